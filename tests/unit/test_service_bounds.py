"""The domain services hold the API's numeric ranges themselves, so a caller that is not the REST
API (the MCP tools) gets a 4xx-style ``Invalid`` for a huge offset or token count, never SQLite's
OverflowError from deep in the store."""

from __future__ import annotations

import pytest

from adapters.sqlite.store import SqliteStore
from domain.errors import Invalid
from domain.models import EpisodeChanges, NewEpisode
from domain.services import EpisodeService, SessionService


@pytest.fixture
async def store(tmp_path):
    opened = SqliteStore.open(str(tmp_path / "memory.db"))
    yield opened
    await opened.close()


@pytest.mark.parametrize("offset", [2**63, 10**30])
async def test_an_offset_past_the_largest_id_is_invalid(store, offset):
    sessions, episodes = SessionService(store), EpisodeService(store)
    session = await sessions.create("s", {})
    with pytest.raises(Invalid) as listed:
        await sessions.list(20, offset)
    assert listed.value.field == "offset"
    with pytest.raises(Invalid):
        await episodes.of_session(session.id, 20, offset)
    assert (await sessions.list(20, 2**63 - 1)).items == []


@pytest.mark.parametrize("count", [2**31 + 1, 2**63, 10**30])
async def test_a_token_count_beyond_the_api_range_is_invalid(store, count):
    sessions, episodes = SessionService(store), EpisodeService(store)
    session = await sessions.create("s", {})
    with pytest.raises(Invalid) as added:
        await episodes.add(NewEpisode(session_id=session.id, user_message="u", ai_response="a", token_count=count))
    assert added.value.field == "tokenCount"
    episode = await episodes.add(NewEpisode(session_id=session.id, user_message="u", ai_response="a",
                                            token_count=2**31))
    with pytest.raises(Invalid) as updated:  # None is "clear" now (JSON Merge Patch): name only the field tested
        await episodes.update(episode.id, EpisodeChanges(token_count=count))
    assert updated.value.field == "tokenCount"
    assert (await episodes.get(episode.id)).token_count == 2**31
