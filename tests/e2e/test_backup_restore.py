"""``memory-service export`` / ``import`` round-trip every record exactly, and ``backup`` copies
a live database with SQLite's online backup API; both restore into a working service."""

from __future__ import annotations

import json
from itertools import pairwise

import httpx
import pytest

from tests.support.process import read_only, service_stats, wait_for_backlog
from tests.support.server import ServiceProcess, run_service, service_env

# SQLite only under TEST_STORE=postgres: backup copies the SQLite file with its online backup API.
pytestmark = [pytest.mark.e2e, pytest.mark.sqlite_only]

TABLES = ("sessions", "episodes", "entities", "relationships", "summaries")
AWKWARD = ["plain", "ünïcödé ✓ 日本語 🧠", "line\nbreak\ttab", 'quote " and \\ backslash', "' OR 1=1; --", "  spaces  "]


def _populate(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        for s, text in enumerate(AWKWARD):
            session = http.post("/sessions", json={"externalId": f"conv {s} {text}",
                                                   "metadata": {"n": s, "nested": {"list": [1, 2.5, None, text]}}})
            assert session.status_code == 201, session.text
            sid = session.json()["id"]
            for n in range(3):
                episode = http.post("/episodes", json={"sessionId": sid, "userMessage": f"{text} {n}",
                                                       "aiResponse": f"reply {text}", "tokenCount": n,
                                                       "metadata": {"k": text}})
                assert episode.status_code == 201, episode.text
            summary = http.post("/summaries", json={"sessionId": sid, "content": f"summary of {text}",
                                                    "episodeCount": 3, "metadata": {"s": s}})
            assert summary.status_code == 201, summary.text
        ids = []
        for e, text in enumerate(AWKWARD):
            entity = http.post("/entities", json={"name": text, "type": "thing", "notes": f"notes {e}",
                                                  "metadata": {"e": e}})
            assert entity.status_code == 201, entity.text
            ids.append(entity.json()["id"])
        for a, b in pairwise(ids):
            assert http.post("/relationships", json={"fromId": a, "toId": b, "label": "next",
                                                     "metadata": {"w": 1}}).status_code == 201
        # A deleted record leaves a gap in the ids, which the round trip must keep.
        assert http.delete("/episodes/2").status_code in (200, 204)


def _dump(db_path) -> dict[str, list[tuple]]:
    with read_only(db_path) as conn:
        return {t: [tuple(row) for row in conn.execute(f"SELECT * FROM {t} ORDER BY id")] for t in TABLES}


def test_export_then_import_into_a_fresh_store_reproduces_every_record(tmp_path):
    env = service_env(tmp_path / "memory.db")
    with ServiceProcess(env, log_dir=tmp_path) as server:
        _populate(server.url)
        wait_for_backlog(server.url, pending=0)
        # an export taken while serving
        live = run_service(["export", str(tmp_path / "live.jsonl")], env)
        assert live.returncode == 0, live.stderr
    original = _dump(tmp_path / "memory.db")
    assert all(original[t] for t in TABLES)

    exported = run_service(["export", str(tmp_path / "export.jsonl")], env)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "live.jsonl").read_text() == (tmp_path / "export.jsonl").read_text()
    lines = (tmp_path / "export.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "nexusai-memory-export"
    assert len(lines) - 1 == sum(len(rows) for rows in original.values())

    fresh = service_env(tmp_path / "restored" / "memory.db")
    imported = run_service(["import", str(tmp_path / "export.jsonl")], fresh)
    assert imported.returncode == 0, imported.stderr
    assert _dump(tmp_path / "restored" / "memory.db") == original
    with read_only(tmp_path / "restored" / "memory.db") as conn:
        queued = conn.execute("SELECT collection, count(*) FROM embedding_outbox GROUP BY collection").fetchall()
        fts_hits = conn.execute("SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH '\"ünïcödé\"'").fetchone()[0]
    assert dict(map(tuple, queued)) == {t: len(original[t]) for t in ("episodes", "entities", "summaries")}
    assert fts_hits == 3  # the keyword index was built for the imported rows

    with ServiceProcess(fresh, log_dir=tmp_path) as server:
        wait_for_backlog(server.url, pending=0)
        with httpx.Client(base_url=server.url) as http:
            assert http.get("/episodes/search", params={"q": "backslash"}).json()["results"]
            after = http.post("/episodes", json={"sessionId": 1, "userMessage": "new", "aiResponse": "row"})
            assert after.json()["id"] > max(row[0] for row in original["episodes"])
    stats = service_stats(fresh)
    assert stats["vectors"]["episodes"] == len(original["episodes"]) + 1
    assert stats["vectors"]["entities"] == len(original["entities"])
    assert stats["vectors"]["summaries"] == len(original["summaries"])


def test_importing_into_a_store_that_holds_the_same_ids_imports_nothing(tmp_path):
    env = service_env(tmp_path / "memory.db")
    with ServiceProcess(env, log_dir=tmp_path) as server:
        _populate(server.url)
    assert run_service(["export", str(tmp_path / "export.jsonl")], env).returncode == 0
    before = _dump(tmp_path / "memory.db")
    again = run_service(["import", str(tmp_path / "export.jsonl")], env)
    assert again.returncode == 1
    assert "import failed: line 2: sessions id 1" in again.stderr
    assert "Traceback" not in again.stderr
    assert _dump(tmp_path / "memory.db") == before


def test_importing_a_file_that_is_not_an_export_is_a_clear_error(tmp_path):
    (tmp_path / "junk.jsonl").write_text('{"hello": 1}\n')
    done = run_service(["import", str(tmp_path / "junk.jsonl")], service_env(tmp_path / "memory.db"))
    assert done.returncode == 1
    assert "not a memory-service export" in done.stderr and "Traceback" not in done.stderr


def test_a_backup_of_a_live_server_opens_and_holds_the_same_rows(tmp_path):
    env = service_env(tmp_path / "memory.db")
    with ServiceProcess(env, log_dir=tmp_path) as server:
        _populate(server.url)
        done = run_service(["backup", str(tmp_path / "backup.db")], env)
        assert done.returncode == 0, done.stderr
        refused = run_service(["backup", str(tmp_path / "backup.db")], env)
        assert refused.returncode == 1 and "exists" in refused.stderr
    assert _dump(tmp_path / "backup.db") == _dump(tmp_path / "memory.db")
    with read_only(tmp_path / "backup.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # The copy is a working store: a server starts on it and finds the records.
    restored = service_env(tmp_path / "backup.db", {"QDRANT_PATH": str(tmp_path / "backup.qdrant")})
    with ServiceProcess(restored, log_dir=tmp_path) as server:
        assert httpx.get(f"{server.url}/episodes/search", params={"q": "plain"}).json()["results"]
