"""Import trusts nothing; export, backup and the database are private and never clobber."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest

from adapters.sqlite.schema import SCHEMA_VERSION
from adapters.sqlite.store import SqliteStore
from app.backup import BackupError, backup_store, export_store, import_store
from domain import writes
from domain.models import NewEpisode


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, list[dict]]:
    db = tmp_path / "source.db"

    async def fill() -> None:
        store = SqliteStore.open(str(db))
        session = await store.uow.run(lambda tx: writes.create_session(tx, "s", {"k": 1}))
        await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "hello", "world", token_count=3)]))
        await store.close()

    asyncio.run(fill())
    target = tmp_path / "export.jsonl"
    export_store(str(db), target)
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    return db, lines


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _episode_line(lines: list[dict]) -> dict:
    return next(line for line in lines if line.get("table") == "episodes")


@pytest.mark.parametrize(("column", "value"), [
    ("metadata", "not json"), ("metadata", "[1, 2]"), ("metadata", 7), ("created_at", "yesterday"),
    ("created_at", "0001-01-01T00:00:00+14:00"), ("token_count", "12"), ("token_count", -1),
    ("session_id", 0), ("user_message", None), ("user_message", "x" * 100_001), ("id", "1"),
    ("user_message", "a\x00b"), ("ai_response", "\x00"), ("metadata", '{"a": NaN}'), ("metadata", '{"a": Infinity}'),
    ("metadata", '{"a":' * 129 + "1" + "}" * 129),  # deeper than the API allows
])
def test_an_import_row_that_breaks_the_api_rules_imports_nothing(tmp_path, exported, column, value):
    _db, lines = exported
    _episode_line(lines)["row"][column] = value
    target = tmp_path / "target.db"
    with pytest.raises(BackupError, match=column if column != "id" else "id"):
        import_store(str(target), _write(tmp_path / "bad.jsonl", lines))
    store = SqliteStore.open(str(target))
    try:
        assert asyncio.run(store.operations.counts())["sessions"] == 0  # all or nothing: the good rows too
    finally:
        asyncio.run(store.close())


@pytest.mark.parametrize(("table", "changes", "field"), [
    ("episodes", {"user_message": "", "ai_response": "  "}, "userMessage"),  # the API refuses both empty
    ("sessions", {"external_id": "   "}, "externalId"),
    ("sessions", {"external_id": "a\x00"}, "externalId"),
])
def test_an_import_row_the_api_would_refuse_as_text_imports_nothing(tmp_path, exported, table, changes, field):
    _db, lines = exported
    next(line for line in lines if line.get("table") == table)["row"].update(changes)
    target = tmp_path / "target.db"
    with pytest.raises(BackupError, match=field):
        import_store(str(target), _write(tmp_path / "bad.jsonl", lines))
    store = SqliteStore.open(str(target))
    try:
        assert asyncio.run(store.operations.counts())["sessions"] == 0
    finally:
        asyncio.run(store.close())


def test_a_line_nested_too_deeply_is_refused_by_line(tmp_path, exported):
    _db, lines = exported
    path = _write(tmp_path / "deep.jsonl", lines[:1])
    with path.open("a") as out:
        out.write('{"table": "sessions", "row": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(BackupError, match="line 2"):
        import_store(str(tmp_path / "target.db"), path)


@pytest.mark.parametrize("version", [99, SCHEMA_VERSION + 1, 0, "1", None])
def test_an_unknown_schema_version_is_refused(tmp_path, exported, version):
    _db, lines = exported
    lines[0]["schemaVersion"] = version
    with pytest.raises(BackupError, match="schemaVersion"):
        import_store(str(tmp_path / "target.db"), _write(tmp_path / "v.jsonl", lines))


def test_imported_timestamps_are_stored_in_the_one_canonical_format(tmp_path, exported):
    _db, lines = exported
    _episode_line(lines)["row"]["created_at"] = "2024-02-29T13:00:00+01:00"
    target = tmp_path / "target.db"
    import_store(str(target), _write(tmp_path / "ok.jsonl", lines))
    store = SqliteStore.open(str(target))
    try:
        [episode] = asyncio.run(store.episodes.get_many([_episode_line(lines)["row"]["id"]]))
    finally:
        asyncio.run(store.close())
    assert episode.created_at == "2024-02-29T12:00:00.000Z"
    assert _mode(target) == 0o600


def test_export_refuses_to_overwrite_unless_forced(tmp_path, exported):
    db, _lines = exported
    target = tmp_path / "existing.jsonl"
    target.write_text("precious")
    with pytest.raises(BackupError, match="exists"):
        export_store(str(db), target)
    assert target.read_text() == "precious"
    export_store(str(db), target, force=True)
    assert target.read_text().startswith('{"format"')
    assert _mode(target) == 0o600


def test_export_never_writes_through_a_symlink(tmp_path, exported):
    db, _lines = exported
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere.txt")
    for target in (link, dangling):
        with pytest.raises(BackupError, match="exists"):
            export_store(str(db), target)
    assert not (tmp_path / "nowhere.txt").exists()
    export_store(str(db), link, force=True)  # replaces the link itself
    assert victim.read_text() == "do not touch"
    assert not link.is_symlink() and _mode(link) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch file left


def test_backups_and_new_databases_are_private(tmp_path, exported):
    db, _lines = exported
    assert _mode(db) == 0o600
    backup = tmp_path / "backup.db"
    backup_store(str(db), backup)
    assert _mode(backup) == 0o600
    dangling = tmp_path / "dangling.db"
    dangling.symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(BackupError):
        backup_store(str(db), dangling)
    assert not (tmp_path / "elsewhere.db").exists()


def test_owners_and_expiry_survive_export_and_import(tmp_path: Path) -> None:
    from domain.models import NewEntity, NewRelationship, NewSummary, Owner

    db, copy = tmp_path / "a.db", tmp_path / "b.db"

    async def fill() -> None:
        store = SqliteStore.open(str(db))
        s = await store.uow.run(lambda tx: writes.create_session(tx, "c", {}, Owner("u1", "bot")))
        await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(s.id, "u", "a", expires_at="2999-01-01T00:00:00.000Z")]))
        await store.uow.run(lambda tx: writes.add_summary(tx, NewSummary(s.id, "sum")))
        a = (await store.uow.run(lambda tx: writes.upsert_entity(tx, NewEntity("Ada", "p", user_id="u1")))).item
        await store.uow.run(lambda tx: writes.relate(tx, NewRelationship(a.id, a.id, "self", user_id="u1")))
        await store.close()

    asyncio.run(fill())
    export_store(str(db), tmp_path / "out.jsonl")
    import_store(str(copy), tmp_path / "out.jsonl")

    async def read() -> tuple:
        store = SqliteStore.open(str(copy))
        try:
            return (await store.sessions.get(1), await store.episodes.get(1), await store.summaries.get(1),
                    await store.entities.get(1), (await store.entities.relationships_of(1, "out"))[0])
        finally:
            await store.close()

    session, episode, summary, entity, edge = asyncio.run(read())
    assert (session.user_id, session.agent_id) == ("u1", "bot")
    assert (episode.user_id, episode.agent_id, episode.expires_at) == ("u1", "bot", "2999-01-01T00:00:00.000Z")
    assert summary.user_id == "u1" and entity.user_id == "u1" and edge.user_id == "u1"
