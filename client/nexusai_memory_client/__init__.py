"""A typed client for the NexusAI Memory Service, blocking (``MemoryClient``) and asyncio
(``AsyncMemoryClient``), with the same keyword-only methods. Answers decode into this package's
own msgspec Structs (``models``); every failure raises ``MemoryServiceError``.

    with MemoryClient("http://127.0.0.1:3002", api_key="...") as memory:
        session = memory.create_session(external_id="conv-42")
        memory.create_episode(session_id=session.id, user_message="I moved to Lisbon", ai_response="Noted.")
        hits = memory.search(query="where do I live?", session_id=session.id).hits
"""

from nexusai_memory_client.aio import AsyncMemoryClient
from nexusai_memory_client.calls import MemoryServiceError
from nexusai_memory_client.models import (
    ContextPackage, CursorPage, Entity, EntityPage, Episode, EpisodePage, EpisodeSearch, Event, Events,
    Forgotten, History, NewEpisode, Ranker, Relationship, SearchHit, SearchResult, Session, SessionPage,
    Summary, Version,
)
from nexusai_memory_client.retries import NO_RETRIES, Retries
from nexusai_memory_client.sync import MemoryClient

__all__ = [
    "AsyncMemoryClient", "ContextPackage", "CursorPage", "Entity", "EntityPage", "Episode", "EpisodePage",
    "EpisodeSearch", "Forgotten",
    "MemoryClient", "MemoryServiceError", "NO_RETRIES", "NewEpisode", "Ranker", "Relationship", "Retries", "SearchHit", "SearchResult",
    "Session", "SessionPage", "Summary", "Event", "Events", "History", "Version",
]
