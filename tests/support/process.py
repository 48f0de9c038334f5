"""Helpers for the fault tests that drive a real ``memory-service serve`` process.

``WriteLoad`` runs writer threads against a server and remembers every write that was
acknowledged with a 2xx, so a test can kill the server mid-load and then check that each of
those writes survived. ``read_only_checks`` opens the SQLite file read-only after the server has
stopped and runs SQLite's own integrity checks (the table and every FTS5 index).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

import httpx

from adapters.sqlite.driver import sqlite3
from tests.support.server import run_service

FTS_TABLES = ("episodes_fts", "summaries_fts", "entities_fts")


@dataclass
class Acknowledged:
    """Writes the server answered 2xx, keyed by the id it returned, with what was sent."""

    episodes: dict[int, dict] = field(default_factory=dict)
    entities: dict[int, dict] = field(default_factory=dict)
    relationships: dict[int, dict] = field(default_factory=dict)
    unanswered: int = 0  # requests cut off by the kill: allowed to be present or absent
    refused: list[str] = field(default_factory=list)  # non-2xx answers: a test asserts it is empty

    def total(self) -> int:
        return len(self.episodes) + len(self.entities) + len(self.relationships)

    def merge(self, found: Acknowledged) -> None:
        """Add another run's acknowledged writes (a later answer for the same id wins)."""
        self.episodes.update(found.episodes)
        self.entities.update(found.entities)
        self.relationships.update(found.relationships)
        self.unanswered += found.unanswered
        self.refused.extend(found.refused)


class WriteLoad:
    """``threads`` writers posting episodes, entities and relationships until ``stop()``.

    Each writer owns distinct entity names so an acknowledged entity's notes stay what that
    writer sent last; relationships link the writer's own entities."""

    def __init__(self, url: str, session_id: int, threads: int = 8, tag: str = "run") -> None:
        self.url = url
        self.session_id = session_id
        self.tag = tag
        self.acknowledged = Acknowledged()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._writer, args=(n,), daemon=True) for n in range(threads)]

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> Acknowledged:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=30)
        return self.acknowledged

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        """Block until at least ``count`` writes were acknowledged (bounded)."""
        deadline = time.monotonic() + timeout
        while self.acknowledged.total() < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.acknowledged.total()} writes acknowledged within {timeout}s; "
                                     f"refused: {self.acknowledged.refused[:3]}")
            time.sleep(0.01)

    def _writer(self, number: int) -> None:
        entity_ids: list[int] = []
        step = 0
        with httpx.Client(base_url=self.url, timeout=10.0) as client:
            while not self._stopping.is_set():
                step += 1
                kind = ("episode", "episode", "entity", "relationship")[step % 4]
                try:
                    if kind == "episode":
                        self._episode(client, number, step)
                    elif kind == "entity" or len(entity_ids) < 2:
                        entity_ids.append(self._entity(client, number, step))
                    else:
                        self._relationship(client, entity_ids[-2], entity_ids[-1], f"{self.tag}-{number}-{step}")
                except httpx.HTTPError:
                    with self._lock:
                        self.acknowledged.unanswered += 1
                    if self._stopping.wait(0.02):
                        return
                except _Refused as refused:
                    with self._lock:
                        self.acknowledged.refused.append(str(refused))

    def _post(self, client: httpx.Client, path: str, body: dict) -> dict:
        response = client.post(path, json=body)
        if response.status_code not in (200, 201):
            raise _Refused(f"POST {path} -> {response.status_code} {response.text[:200]}")
        return response.json()

    def _episode(self, client: httpx.Client, number: int, step: int) -> None:
        body = {"sessionId": self.session_id, "userMessage": f"{self.tag} writer {number} step {step} ünïcode ✓",
                "aiResponse": f"answer {step} from {number}", "tokenCount": step, "metadata": {"w": number, "s": step}}
        answer = self._post(client, "/episodes", body)
        with self._lock:
            self.acknowledged.episodes[answer["id"]] = body

    def _entity(self, client: httpx.Client, number: int, step: int) -> int:
        body = {"name": f"{self.tag}-entity-{number}-{step}", "type": "person", "notes": f"notes {step}",
                "metadata": {"w": number}}
        answer = self._post(client, "/entities", body)
        with self._lock:
            self.acknowledged.entities[answer["id"]] = body
        return answer["id"]

    def _relationship(self, client: httpx.Client, from_id: int, to_id: int, label: str) -> None:
        body = {"fromId": from_id, "toId": to_id, "label": label, "metadata": {}}
        answer = self._post(client, "/relationships", body)
        with self._lock:
            self.acknowledged.relationships[answer["id"]] = body


class _Refused(Exception):
    pass


def missing_or_changed(db_path: Path, acknowledged: Acknowledged) -> list[str]:
    """Every acknowledged write that is absent from the file or differs from what was sent."""
    problems: list[str] = []
    with read_only(db_path) as conn:
        for episode_id, sent in acknowledged.episodes.items():
            row = conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
            if row is None:
                problems.append(f"episode {episode_id} lost")
            elif (row["session_id"], row["user_message"], row["ai_response"], row["token_count"],
                  json.loads(row["metadata"])) != (sent["sessionId"], sent["userMessage"], sent["aiResponse"],
                                                   sent["tokenCount"], sent["metadata"]):
                problems.append(f"episode {episode_id} changed: {dict(row)} != {sent}")
        for entity_id, sent in acknowledged.entities.items():
            row = conn.execute("SELECT * FROM entities WHERE id = ?", (entity_id,)).fetchone()
            if row is None or (row["name"], row["type"], row["notes"]) != (sent["name"], sent["type"], sent["notes"]):
                problems.append(f"entity {entity_id} lost or changed: {dict(row) if row else None}")
        for rel_id, sent in acknowledged.relationships.items():
            row = conn.execute("SELECT * FROM relationships WHERE id = ?", (rel_id,)).fetchone()
            if row is None or (row["from_id"], row["to_id"], row["label"]) != (sent["fromId"], sent["toId"],
                                                                              sent["label"]):
                problems.append(f"relationship {rel_id} lost or changed")
    return problems


class read_only:
    """A read-only connection to a database whose server has stopped.

    A WAL database whose last writer was killed keeps its ``-wal`` file; opening it with
    ``mode=ro`` still reads the committed frames in it. When SQLite cannot open it read-only in
    place (it needs the ``-shm`` index rebuilt), a copy of the three files is opened instead,
    so the original is never touched."""

    def __init__(self, db_path: Path) -> None:
        self._path = Path(db_path)
        self._scratch: str | None = None

    def __enter__(self) -> sqlite3.Connection:
        try:
            self._conn = self._open(self._path)
            self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            self._scratch = tempfile.mkdtemp(prefix="memory-copy-")
            copy = Path(self._scratch) / self._path.name
            for suffix in ("", "-wal", "-shm"):
                source = Path(f"{self._path}{suffix}")
                if source.exists():
                    shutil.copy2(source, f"{copy}{suffix}")
            self._conn = self._open(copy)
        return self._conn

    def __exit__(self, *exc_info: object) -> None:
        self._conn.close()
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        return conn


def integrity_problems(db_path: Path) -> list[str]:
    """``PRAGMA integrity_check`` plus FTS5's own ``integrity-check`` of every keyword index.

    FTS5's check is spelled as an INSERT, which a read-only connection refuses, so it runs on a
    private copy of the files (the copy holds exactly what the stopped server left behind)."""
    problems: list[str] = []
    with read_only(db_path) as conn:
        result = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
        if result != ["ok"]:
            problems.extend(result)
        quick = conn.execute("PRAGMA foreign_key_check").fetchall()
        problems.extend(f"foreign key: {tuple(row)}" for row in quick)
    scratch = tempfile.mkdtemp(prefix="memory-fts-check-")
    try:
        copy = Path(scratch) / "copy.db"
        source = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        target = sqlite3.connect(copy)
        source.backup(target)
        source.close()
        for table in FTS_TABLES:
            try:
                target.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
            except sqlite3.Error as exc:
                problems.append(f"{table}: {exc}")
        target.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return problems


def service_stats(env: Mapping[str, str]) -> dict:
    """``memory-service stats`` as a dict (the server must be stopped: the Edge shards are locked)."""
    done = run_service(["stats"], env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def now_stamp() -> str:
    """The wall clock in /health's ``checkedAt`` format, for "checked after this moment"."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_fresh(body: dict, since: str) -> bool:
    """Whether every component of a /health body was checked at or after ``since``: /health
    answers from background checks, so a body read right after a write may predate it."""
    components = body.get("components") or {}
    return bool(components) and all((c.get("checkedAt") or "") >= since for c in components.values())


def fresh_health(client, predicate=lambda body: True, timeout: float = 60.0, headers=None) -> dict:
    """Poll ``client.get("/health")`` (an httpx or Litestar test client) until a body checked
    after this call satisfies ``predicate``; bounded, raising with the last body."""
    since = now_stamp()
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = client.get("/health", headers=dict(headers or {})).json()
        if is_fresh(body, since) and predicate(body):
            return body
        time.sleep(0.02)
    raise AssertionError(f"/health never reached the expected state within {timeout}s: {body}")


def backlog_pending(body: dict) -> int | None:
    return body["components"]["embeddingBacklog"].get("pending")


def wait_for_backlog(url: str, pending: int = 0, timeout: float = 120.0, headers: Mapping[str, str] | None = None
                     ) -> dict:
    """Poll ``GET /health`` until the embedding backlog is at most ``pending``; returns the last
    health body (bounded: raises with the last body on time-out)."""
    with httpx.Client(base_url=url, timeout=10.0) as client:
        return fresh_health(client, lambda b: (backlog_pending(b) is not None and backlog_pending(b) <= pending),
                            timeout, headers)


def wait_for_health(url: str, predicate, timeout: float = 60.0) -> dict:
    """Poll ``GET /health`` until ``predicate(body)`` holds (bounded)."""
    with httpx.Client(base_url=url, timeout=10.0) as client:
        return fresh_health(client, predicate, timeout)


def index_settled(body: dict) -> bool:
    """The vector index serves every collection from a generation holding one point per row,
    and nothing is being built."""
    index = body["components"]["vectorIndex"].get("index") or {}
    collections = index.get("collections") or {}
    return index.get("status") == "consistent" and bool(collections) and all(
        c["points"] == c["rows"] and c["building"] is None for c in collections.values())


def wait_for_index(url: str, timeout: float = 120.0) -> dict:
    """Poll ``GET /health`` until the index is consistent with the store (bounded)."""
    return wait_for_health(url, lambda body: index_settled(body)
                           and body["components"]["embeddingBacklog"]["pending"] == 0, timeout)
