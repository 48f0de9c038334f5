"""What the per-request trimming must not change: point reads answered on the event
loop see every committed write, and proxy headers are read only from configured proxies."""

from __future__ import annotations

import asyncio

from adapters.sqlite.store import SqliteStore
from app.config import load_settings
from domain import writes
from domain.models import EpisodeChanges, NewEpisode


async def test_point_reads_on_the_event_loop_see_each_committed_write_at_once(tmp_path) -> None:
    store = SqliteStore.open(str(tmp_path / "m.db"))
    try:
        session = await store.uow.run(lambda tx: writes.create_session(tx, "conv-1", {}))
        [episode] = await store.uow.run(lambda tx: writes.add_episodes(tx, [NewEpisode(session.id, "first", "reply")]))
        for n in range(20):
            await store.uow.run(lambda tx: writes.update_episode(tx, episode.id, EpisodeChanges(user_message=f"edit {n}")))
            assert (await store.episodes.get(episode.id)).user_message == f"edit {n}"
        await store.uow.run(lambda tx: writes.delete_episode(tx, episode.id))
        assert await store.episodes.get(episode.id) is None
        # Many at once on the one loop connection: each answers its own row.
        found = await asyncio.gather(*(store.sessions.get(session.id) for _ in range(50)))
        assert {s.external_id for s in found} == {"conv-1"}
    finally:
        await store.close()


def test_proxy_headers_are_trusted_only_from_the_configured_proxies(tmp_path) -> None:
    base = {"SQLITE_PATH": str(tmp_path / "m.db")}
    assert load_settings(base, dotenv=None).forwarded_allow_ips is None
    assert load_settings({**base, "FORWARDED_ALLOW_IPS": " 10.0.0.1,10.0.0.2 "},
                         dotenv=None).forwarded_allow_ips == "10.0.0.1,10.0.0.2"
