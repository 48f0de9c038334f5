"""The memory as Model Context Protocol tools: mounted at ``/mcp`` in the REST app (streamable
HTTP, ``serve``; loaded on first use, ``app.mcp_mount``), or on its own with ``memory-service mcp``
(stdio, or streamable HTTP alone); ``app.mcp_serving`` does the serving.

The tools call the same domain services as the REST routes, built by the same container
(``app.container``), and answer with the same JSON shapes (``app.schemas``). A domain error becomes
a tool error carrying its message (``is_error`` with text for the model), never a crash; arguments
that break a tool's schema are refused by the SDK with a message naming the field.

Sessions are named by the caller's own conversation id (the session's ``externalId``), which is
what an assistant has at hand; ``remember`` creates the session on first use.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Annotated, Any, Literal

import msgspec
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field, create_model

from app.auth import PRINCIPAL
from app.container import Container
from app.cursor_pages import EpisodeCursorPage
from app.idempotency import keyed_result
from app.mcp_mount import MCP_PATH
from app.requests import wire_timestamp
from app.schemas import (
    EntityOut, EpisodeOut, EpisodePage, RelationshipOut, SessionOut, SessionPage, context_out, search_out, wire,
)
from app.schemas_changes import history_out
from domain.record_kinds import Source
from domain.errors import Conflict, DomainError, NotFound
from domain.listing import MAX_CURSOR
from domain.limits import (
    MAX_ID, MAX_LIMIT, MAX_NAME, MAX_QUERY, MAX_RECENT_EPISODES, MAX_RELEVANT, MAX_SEARCH_LIMIT, MAX_SOURCES, MAX_TEXT,
    MAX_TOKEN_BUDGET,
)
from domain.filters import parse_filter
from domain.models import NewEntity, NewEpisode, NewRelationship, Owner, Session
from domain.access import Principal
from domain.retrieval import SearchQuery
from domain.scoped import Services, scoped
from domain.services import check_session_owner

log = logging.getLogger("nexusai.mcp")

Transport = Literal["stdio", "streamable-http"]
INSTRUCTIONS = (
    "Long-term memory for this assistant. Call `remember` after each exchange worth keeping, naming the "
    "conversation with a stable `session` id; call `build_context` (or `search`) before answering to recall what "
    "was said before. Record people, places and things with `upsert_entity` and connect them with `relate`."
)

ExternalId = Annotated[str, Field(min_length=1, max_length=MAX_NAME, description="your conversation id (externalId)")]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
EntityId = Annotated[int, Field(ge=1, le=MAX_ID)]
Metadata = dict[str, Any] | None
IdempotencyKey = Annotated[str | None, Field(min_length=1, max_length=255, description=(
    "any unique string (a UUID) naming this write: a repeated call with the same key and arguments "
    "answers the first call's result (with replayed: true) instead of writing again"))]
SourceName = Source  # the record kinds, from the one table in domain/record_kinds.py
Result = dict[str, Any]

READ = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)


def _wire(value: Any) -> Any:
    """The REST API's JSON shape of a wire Struct (camelCase keys)."""
    return msgspec.to_builtins(value)


def _tool_error(exc: DomainError) -> ToolError:
    where = f" (field {exc.field})" if exc.field else ""
    return ToolError(f"{exc.code}: {exc.message}{where}")


def guarded(fn: Callable[..., Awaitable[Result]]) -> Callable[..., Awaitable[Result]]:
    """Turn the domain's errors into tool errors (the REST API turns them into 4xx/503 answers)."""
    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Result:
        try:
            return await fn(*args, **kwargs)
        except DomainError as exc:
            raise _tool_error(exc) from exc

    return call


def _strict_arguments(server: MCPServer) -> None:
    """Every tool's arguments as strict as the REST bodies: an argument the tool does not declare is
    refused, naming it (the SDK's argument models ignore it: python-sdk issue #3067), and a number
    or boolean must be one ("5", "true" are refused; the SDK still unpacks a list or object sent as
    JSON text). The SDK reads ``fn_metadata.arg_model`` at each call, so a stricter subclass of the
    model it built takes effect; ``parameters`` (the published input schema) follows it."""
    for tool in server._tool_manager.list_tools():  # no public accessor for the registered Tool
        loose = tool.fn_metadata.arg_model
        strict = create_model(loose.__name__, __base__=loose, __module__=loose.__module__)
        strict.model_config.update(extra="forbid", strict=True)
        strict.model_rebuild(force=True)
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


# The principal of the MCP request being handled (None: stdio, or an app without app.auth's door).
mcp_principal: ContextVar[Principal | None] = ContextVar("mcp_principal", default=None)


class PrincipalOfRequest:
    """MCP middleware: the tools of one request act as the key of the HTTP request that carried it.
    A tool call runs in the MCP session's task, not the HTTP request's, so the principal travels
    with the request the SDK hands over (``ctx.request``, its ASGI scope's state) and is set here
    around the handler."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        scope = getattr(getattr(ctx, "request", None), "scope", None) or {}
        token = mcp_principal.set((scope.get("state") or {}).get(PRINCIPAL))
        try:
            return await call_next(ctx)
        finally:
            mcp_principal.reset(token)


def build_server(container: Container, wrote: Callable[[], None] = lambda: None) -> MCPServer:
    """The MCP server with the memory tools over ``container``'s services; ``wrote`` is called after
    every write (the embedding worker's wake-up, as the REST app does after non-GET requests)."""
    server = MCPServer("nexusai-memory", title="NexusAI Memory", instructions=INSTRUCTIONS, version="0.1.0",
                       middleware=[PrincipalOfRequest()])
    plain = Services(container.sessions(), container.episodes(), container.entities(), container.summaries(),
                     container.users(), container.search(), container.context(), container.history(),
                     container.events())

    def svc() -> Services:
        """The services as the calling key sees them (app.auth's principal of the HTTP request);
        over stdio the caller is the local user who started the process, as with the CLI."""
        principal = mcp_principal.get()
        return plain if principal is None else scoped(principal, plain)

    def mine(user_id: str | None, agent_id: str | None = None) -> Owner:
        """The owner a tool writes as: what it was given, else the calling key's own (an assistant
        holding a bound key need not repeat who it serves; naming another is still refused)."""
        principal = mcp_principal.get()
        if user_id is None and principal is not None and principal.bound:
            return Owner(principal.user_id, agent_id or principal.agent_id)
        return Owner(user_id, agent_id)

    async def session_named(external_id: str, *, create: bool = False, owner: Owner = Owner()) -> Session:
        sessions = svc().sessions
        try:
            return await sessions.by_external_id(external_id)
        except NotFound:
            if not create:
                raise NotFound(f"session {external_id!r} does not exist; `remember` creates it") from None
        try:
            return await sessions.create(external_id, {}, owner)
        except Conflict:  # created meanwhile by a concurrent call
            return await sessions.by_external_id(external_id)

    @server.tool(annotations=WRITE)
    @guarded
    async def remember(session: ExternalId, user_message: Text, ai_response: Text, metadata: Metadata = None,
                       token_count: Annotated[int, Field(ge=0)] | None = None, user_id: Name | None = None,
                       agent_id: Name | None = None, idempotency_key: IdempotencyKey = None) -> Result:
        """Store one exchange (the user's message and your reply) in the conversation `session`,
        creating the session on first use (owned by `user_id` / `agent_id` when given: a session's
        owner is set once). It becomes searchable at once by keyword, and by meaning as soon as it
        is embedded."""
        owner = mine(user_id, agent_id)
        found = await session_named(session, create=True, owner=owner)
        check_session_owner(found, owner)
        new = NewEpisode(session_id=found.id, user_message=user_message, ai_response=ai_response,
                         token_count=token_count, metadata=metadata or {})
        arguments = {"session": session, "user_message": user_message, "ai_response": ai_response,
                     "metadata": metadata, "token_count": token_count, "user_id": user_id, "agent_id": agent_id}
        result = await keyed_result(container, idempotency_key, "remember", arguments,
                                    lambda: svc().episodes.add(new),
                                    lambda episode: {"session": _wire(wire(found, SessionOut)),
                                                     "episode": _wire(wire(episode, EpisodeOut))},
                                    mcp_principal.get())
        wrote()
        return result

    @server.tool(annotations=READ)
    @guarded
    async def search(query: Query, session: ExternalId | None = None, limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 10,
                     sources: Annotated[list[SourceName], Field(min_length=1, max_length=MAX_SOURCES)] | None = None,
                     ranker: Name | None = None, user_id: Name | None = None, agent_id: Name | None = None,
                     metadata: Metadata = None,
                     min_score: Annotated[float, Field(ge=0.0, le=1.0)] | None = None) -> Result:
        """Hybrid search (meaning + keywords) over episodes, entities and summaries, within one
        conversation `session`, across every session of `user_id` / `agent_id`, or across all;
        `metadata` keeps records whose metadata matches ({key: value | {"in": [...]} |
        {"gte": x, "lte": y} | {"exists": bool}}); `min_score` (0-1, each hit's `relevance` scale;
        default the ranker's floor, 0 keeps every hit) drops weaker hits. Best first; `pending`
        counts records still waiting for their embedding."""
        session_id = (await session_named(session)).id if session else None
        result = await svc().search.search(SearchQuery(
            query, limit, session_id, tuple(sources or ["episodes"]), ranker, owner=Owner(user_id, agent_id),
            metadata=parse_filter({"metadata": metadata} if metadata else None), min_score=min_score))
        return _wire(search_out(result))

    @server.tool(annotations=READ)
    @guarded
    async def build_context(query: Query, session: ExternalId | None = None,
                            token_budget: Annotated[int, Field(ge=1, le=MAX_TOKEN_BUDGET)] = 2000,
                            recent_episodes: Annotated[int, Field(ge=0, le=MAX_RECENT_EPISODES)] = 5,
                            relevant_limit: Annotated[int, Field(ge=1, le=MAX_RELEVANT)] = 10,
                            ranker: Name | None = None, user_id: Name | None = None,
                            agent_id: Name | None = None) -> Result:
        """The context package for answering `query` in conversation `session`: its recent
        exchanges, the most relevant older ones, matching summaries, the entities they mention and
        their relationships, cut to `token_budget` tokens (what did not fit is listed in `omitted`).
        With `user_id` / `agent_id` the memory spans all their sessions (`session` then optional)."""
        session_id = (await session_named(session)).id if session else None
        package = await svc().context.build(query, session_id, token_budget, recent_episodes, relevant_limit,
                                                  ranker, Owner(user_id, agent_id))
        return _wire(context_out(package))

    @server.tool(annotations=READ)
    @guarded
    async def list_sessions(limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 20,
                            offset: Annotated[int, Field(ge=0)] = 0, user_id: Name | None = None,
                            agent_id: Name | None = None) -> Result:
        """The stored conversations (sessions), oldest first, with their total count; with
        `user_id` / `agent_id` only theirs."""
        return _wire(wire(await svc().sessions.list(limit, offset, Owner(user_id, agent_id)), SessionPage))

    @server.tool(annotations=READ)
    @guarded
    async def session_history(session: ExternalId, limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 20,
                              offset: Annotated[int, Field(ge=0)] = 0) -> Result:
        """The exchanges of conversation `session`, oldest first, with their total count."""
        found = await session_named(session)
        return _wire(wire(await svc().episodes.of_session(found.id, limit, offset), EpisodePage))

    @server.tool(annotations=READ)
    @guarded
    async def recent_memories(session: ExternalId | None = None, newest_first: bool = True,
                              limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 20,
                              filter: Annotated[dict[str, Any] | None, Field(
                                  description='e.g. {"metadata": {"topic": "pets"}}')] = None,
                              cursor: Annotated[str | None, Field(max_length=MAX_CURSOR)] = None) -> Result:
        """Stored exchanges, newest first (or oldest first), across every conversation or in one
        `session`, optionally filtered by metadata. Pass the answer's `nextCursor` back as `cursor`
        (with the same `newest_first`) for more; it is null when nothing more is left."""
        session_id = (await session_named(session)).id if session else None
        page = await svc().episodes.listed(limit=limit, order="desc" if newest_first else "asc", cursor=cursor,
                                     filter=None if filter is None else json.dumps(filter), session_id=session_id)
        return _wire(wire(page, EpisodeCursorPage))

    @server.tool(annotations=WRITE)
    @guarded
    async def upsert_entity(name: Name, type: Name, notes: Text | None = None, metadata: Metadata = None,
                            user_id: Name | None = None, idempotency_key: IdempotencyKey = None) -> Result:
        """Record a person, place, thing or idea, identified by (`user_id`, `name`, `type`) — without
        `user_id` a shared one; calling it again with the same key updates its notes and metadata.
        Returns the entity and `created`."""
        new = NewEntity(name=name, type=type, notes=notes, metadata=metadata or {}, user_id=mine(user_id).user_id)
        arguments = {"name": name, "type": type, "notes": notes, "metadata": metadata, "user_id": user_id}
        result = await keyed_result(container, idempotency_key, "upsert_entity", arguments,
                                    lambda: svc().entities.upsert(new),
                                    lambda upserted: {"entity": _wire(wire(upserted.item, EntityOut)),
                                                      "created": upserted.created},
                                    mcp_principal.get())
        wrote()
        return result

    @server.tool(annotations=READ)
    @guarded
    async def find_entities(name: Name, limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 20) -> Result:
        """Entities whose name contains `name` (case-insensitive), with their ids and types."""
        return {"entities": _wire(wire(await svc().entities.find_by_name(name, limit), list[EntityOut]))}

    @server.tool(annotations=READ)
    @guarded
    async def get_entity(entity_id: EntityId,
                         direction: Literal["out", "in", "both"] = "both") -> Result:
        """One entity with its relationships (outgoing, incoming or both) and the entities at
        their other ends."""
        entities = svc().entities
        entity = await entities.get(entity_id)
        edges = await entities.relationships(entity_id, direction)
        others = {e: await entities.get(e) for e in {r.from_id for r in edges} | {r.to_id for r in edges}}
        return {"entity": _wire(wire(entity, EntityOut)), "relationships": _wire(wire(edges, list[RelationshipOut])),
                "related": [_wire(wire(e, EntityOut)) for i, e in sorted(others.items()) if i != entity_id]}

    @server.tool(annotations=WRITE)
    @guarded
    async def relate(from_id: EntityId, label: Name, to_id: EntityId, metadata: Metadata = None,
                     supersedes: bool = False, valid_from: str | None = None,
                     idempotency_key: IdempotencyKey = None) -> Result:
        """Connect two entities with a labelled, directed relationship (e.g. Ana -lives_in-> Lisbon),
        owned by this key's user; the same (from, label, to) again updates its metadata. When a fact
        replaces an older one (Ana moved: -lives_in-> Porto), pass `supersedes=true`: the old edge
        is closed (kept, with its end time) instead of both looking current; another user's edges
        are never touched. `valid_from`: when it became true (RFC 3339)."""
        try:
            begins = wire_timestamp(valid_from, "valid_from")
        except ValueError as exc:
            raise ToolError(f"validation_error: {exc}") from None
        new = NewRelationship(from_id=from_id, to_id=to_id, label=label, metadata=metadata or {},
                              user_id=mine(None).user_id, valid_from=begins, supersedes=supersedes)
        arguments = {"from_id": from_id, "label": label, "to_id": to_id, "metadata": metadata,
                     "supersedes": supersedes, "valid_from": valid_from}
        result = await keyed_result(container, idempotency_key, "relate", arguments,
                                    lambda: svc().entities.relate(new),
                                    lambda upserted: {"relationship": _wire(wire(upserted.item, RelationshipOut)),
                                                      "created": upserted.created},
                                    mcp_principal.get())
        wrote()
        return result

    @server.tool(annotations=READ)
    @guarded
    async def history(kind: Literal["episodes", "entities", "relationships", "summaries"], record_id: EntityId,
                      limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 20) -> Result:
        """How a record changed, oldest first: each update or delete with the record before and after
        (after is null once deleted) and the fields that changed. Works after the record is gone."""
        return _wire(history_out(await svc().history.of_record(kind, record_id, 0, limit)))

    _strict_arguments(server)

    @server.custom_route("/health", methods=["GET"])
    async def health(request):  # a liveness probe for process managers and the test launcher
        from starlette.responses import JSONResponse

        return JSONResponse({"status": "ok", "transport": "streamable-http", "path": MCP_PATH})

    return server
