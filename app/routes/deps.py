"""Litestar dependencies: small provider functions that ask the container for a service."""

from __future__ import annotations

from typing import Annotated

from litestar.datastructures import State
from litestar.di import Provide
from litestar.params import Parameter

from domain.context import ContextService
from domain.retrieval import SearchService
from domain.services import EntityService, EpisodeService, SessionService, SummaryService

MAX_ID = 2**63 - 1
PathId = Annotated[int, Parameter(ge=1, le=MAX_ID, description="a positive integer id")]
Limit = Annotated[int, Parameter(ge=1, le=1000, description="page size, 1-1000")]
Offset = Annotated[int, Parameter(ge=0, le=MAX_ID, description="rows to skip")]


def _sessions(state: State) -> SessionService:
    return state.container.sessions()


def _episodes(state: State) -> EpisodeService:
    return state.container.episodes()


def _entities(state: State) -> EntityService:
    return state.container.entities()


def _summaries(state: State) -> SummaryService:
    return state.container.summaries()


def _search(state: State) -> SearchService:
    return state.container.search()


def _context(state: State) -> ContextService:
    return state.container.context()


DEPENDENCIES = {
    "session_service": Provide(_sessions, sync_to_thread=False),
    "episode_service": Provide(_episodes, sync_to_thread=False),
    "entity_service": Provide(_entities, sync_to_thread=False),
    "summary_service": Provide(_summaries, sync_to_thread=False),
    "search_service": Provide(_search, sync_to_thread=False),
    "context_service": Provide(_context, sync_to_thread=False),
}
