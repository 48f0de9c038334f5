"""Request bodies with the example the docs UI shows (and pre-fills for "Try it out").

Each alias is the wire Struct annotated with ``Body(examples=...)``; a route declares
``data: CreateSessionBody`` instead of ``data: CreateSession`` and validation is unchanged.
``tests/api/test_openapi_docs.py`` checks that every route with a body has an example and that
each example decodes into its Struct.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar.openapi.spec import Example
from litestar.params import Body

from app.requests import (
    ContextRequest, CreateEpisode, CreateSession, CreateSummary, DeleteRelationship, EpisodeBatch, SearchRequest,
    UpdateSession, UpsertEntity, UpsertRelationship,
)
from app.schemas_changes import UpdateEntity, UpdateEpisode, UpdateSummary
from app.schemas_keys import CreateKey

EXAMPLES: dict[type, dict[str, Any]] = {
    CreateSession: {"externalId": "conv-42", "metadata": {"user": "ana"}},
    UpdateSession: {"metadata": {"user": "ana", "tier": 2}},
    CreateEpisode: {"sessionId": 1, "userMessage": "I adopted a grey kitten named Pixel",
                    "aiResponse": "Pixel is a lovely name!", "tokenCount": 16, "metadata": {"channel": "web"}},
    EpisodeBatch: {"episodes": [
        {"sessionId": 1, "userMessage": "I moved to Lisbon", "aiResponse": "Noted: you live in Lisbon."},
        {"sessionId": 1, "userMessage": "My cat is called Miso", "aiResponse": "Hello, Miso!",
         "createdAt": "2025-01-01T12:00:00Z"},
    ]},
    UpdateEpisode: {"aiResponse": "Noted: you live in Lisbon since 2024."},
    UpsertEntity: {"name": "Ana", "type": "person", "notes": "the user; a cellist", "metadata": {"source": "chat"}},
    UpdateEntity: {"notes": "the user; a cellist who moved to Porto", "metadata": {"source": "chat"}},
    UpdateSummary: {"content": "Ana lives in Porto now and has a cat, Miso.", "episodeCount": 3},
    UpsertRelationship: {"fromId": 1, "toId": 2, "label": "lives_in", "metadata": {"since": 2024}},
    DeleteRelationship: {"fromId": 1, "toId": 2, "label": "lives_in"},
    CreateSummary: {"sessionId": 1, "content": "Ana lives in Lisbon and has a cat, Miso.", "firstEpisodeId": 1,
                    "lastEpisodeId": 2, "episodeCount": 2},
    SearchRequest: {"query": "what is my cat called?", "limit": 5, "sessionId": 1,
                    "sources": ["episodes", "summaries"], "ranker": "weighted"},
    ContextRequest: {"query": "plan a weekend trip", "sessionId": 1, "tokenBudget": 2000, "recentEpisodes": 5,
                     "relevantLimit": 10},
    CreateKey: {"name": "assistant for user-42", "userId": "user-42", "scopes": ["read", "write"],
                "expiresAt": "2027-01-01T00:00:00Z", "rateLimit": 20},
}


def _body(struct: type) -> Any:
    return Body(examples=[Example(summary=f"a {struct.__name__} body", value=EXAMPLES[struct])])


CreateSessionBody = Annotated[CreateSession, _body(CreateSession)]
UpdateSessionBody = Annotated[UpdateSession, _body(UpdateSession)]
CreateEpisodeBody = Annotated[CreateEpisode, _body(CreateEpisode)]
EpisodeBatchBody = Annotated[EpisodeBatch, _body(EpisodeBatch)]
UpdateEpisodeBody = Annotated[UpdateEpisode, _body(UpdateEpisode)]
UpsertEntityBody = Annotated[UpsertEntity, _body(UpsertEntity)]
UpsertRelationshipBody = Annotated[UpsertRelationship, _body(UpsertRelationship)]
DeleteRelationshipBody = Annotated[DeleteRelationship, _body(DeleteRelationship)]
CreateSummaryBody = Annotated[CreateSummary, _body(CreateSummary)]
SearchRequestBody = Annotated[SearchRequest, _body(SearchRequest)]
ContextRequestBody = Annotated[ContextRequest, _body(ContextRequest)]
UpdateEntityBody = Annotated[UpdateEntity, _body(UpdateEntity)]
UpdateSummaryBody = Annotated[UpdateSummary, _body(UpdateSummary)]
CreateKeyBody = Annotated[CreateKey, _body(CreateKey)]
