from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, Response, delete, get, patch, post
from litestar.openapi import ResponseSpec
from litestar.params import Parameter, QueryParameter

from app.cursor_pages import EntityCursorPage, RelationshipCursorPage
from app.idempotency import answered, created_or_updated, idempotent, nothing
from app.routes.deps import (
    AS_OF, LIST_DESCRIPTION, Cursor, EntityFilter, Filter, Limit, Offset, Order, PathId, UserFilter, as_of_param, errors,
)
from app.routes.examples import DeleteRelationshipBody, UpdateEntityBody, UpsertEntityBody, UpsertRelationshipBody
from app.schemas import (
    EntityOut, EntityPage, RelationshipOut, new_record, wire,
)
from app.schemas_changes import changes_of
from domain.limits import MAX_NAME
from domain.models import EntityChanges, NewEntity, NewRelationship
from domain.services import EntityService

Name = Annotated[str, Parameter(min_length=1, max_length=MAX_NAME)]


class EntityController(Controller):
    path = "/entities"
    tags = ["entities"]
    opt = idempotent()

    @post("/", summary="Upsert an entity by (userId, name, type): 201 created, 200 updated",
          responses={**errors(400, 413, 422), 200: ResponseSpec(EntityOut, description="An existing entity, updated")})
    async def upsert(self, data: UpsertEntityBody, entity_service: EntityService) -> Response[EntityOut]:
        new = new_record(data, NewEntity)
        return await answered(lambda: entity_service.upsert(new), lambda result: wire(result.item, EntityOut),
                              created_or_updated)

    @get("/", summary="List entities (filter by type and metadata; oldest or newest first)",
         responses=errors(400), description=LIST_DESCRIPTION)
    async def list_all(self, entity_service: EntityService, limit: Limit = 20, order: Order = "asc",
                       cursor: Cursor = None, filter: Filter = None,
                       type: Annotated[str | None, Parameter(min_length=1, max_length=MAX_NAME)] = None,
                       user_id: UserFilter = None) -> EntityCursorPage:
        page = await entity_service.listed(limit=limit, order=order, cursor=cursor, filter=filter, type=type,
                                           user_id=user_id)
        return wire(page, EntityCursorPage)

    @get("/by-type/{entity_type:str}", summary="Entities of one type, by name", responses=errors(400))
    async def by_type(self, entity_type: str, entity_service: EntityService, limit: Limit = 100,
                      offset: Offset = 0) -> EntityPage:
        return wire(await entity_service.by_type(entity_type, limit, offset), EntityPage)

    @get("/search", summary="Entities whose name contains the given text", responses=errors(400))
    async def by_name(self, name: Name, entity_service: EntityService, limit: Limit = 20) -> list[EntityOut]:
        return wire(await entity_service.find_by_name(name, limit), list[EntityOut])

    @get("/{entity_id:str}", summary="Get an entity", responses=errors(400, 404))
    async def get_one(self, entity_id: PathId, entity_service: EntityService) -> EntityOut:
        return wire(await entity_service.get(entity_id), EntityOut)

    @patch("/{entity_id:str}", summary="Change an entity's name, type, notes or metadata (re-indexed and re-embedded)",
           responses=errors(400, 404, 409, 413, 422),
           description="JSON Merge Patch: fields left out stay as they are; `notes: null` (or `\"\"`) clears the "
                       "notes; null on name, type or metadata is a 400. A name and type that "
                       "another entity has is a 409.")
    async def update(self, entity_id: PathId, data: UpdateEntityBody, entity_service: EntityService) -> EntityOut:
        return await answered(lambda: entity_service.update(entity_id, changes_of(data, EntityChanges)),
                              lambda entity: wire(entity, EntityOut), 200)

    @delete("/{entity_id:str}", summary="Delete an entity, its relationships and its vector",
          responses=errors(400, 404, 422))
    async def remove(self, entity_id: PathId, entity_service: EntityService) -> None:
        return await answered(lambda: entity_service.delete(entity_id), nothing, 204)

    @get("/{entity_id:str}/relationships", summary="An entity's relationships (outgoing by default)",
          responses=errors(400, 404),
          description='`direction=out|in|both`; every edge, open and closed, unless `asOf` asks for '
                      'those valid at one moment.')
    async def relationships(
        self, entity_id: PathId, entity_service: EntityService, direction: Literal["out", "in", "both"] = "out",
        as_of: Annotated[str | None, QueryParameter(name="asOf", description=AS_OF)] = None,
    ) -> list[RelationshipOut]:
        moment = as_of_param(as_of)
        return wire(await entity_service.relationships(entity_id, direction, moment), list[RelationshipOut])


class RelationshipController(Controller):
    path = "/relationships"
    tags = ["relationships"]
    opt = idempotent()

    @get("/", summary="List relationships (filter by entity, label, metadata and validity)", responses=errors(400),
         description=LIST_DESCRIPTION + " `entityId` matches either end; every edge, open and closed, unless "
                                        "`asOf` asks for those valid at one moment.")
    async def list_all(
        self, entity_service: EntityService, limit: Limit = 20, order: Order = "asc", cursor: Cursor = None,
        filter: Filter = None, entity_id: EntityFilter = None,
        label: Annotated[str | None, Parameter(min_length=1, max_length=MAX_NAME)] = None, user_id: UserFilter = None,
        as_of: Annotated[str | None, QueryParameter(name="asOf", description=AS_OF)] = None,
    ) -> RelationshipCursorPage:
        page = await entity_service.listed_relationships(limit=limit, order=order, cursor=cursor, filter=filter,
                                                         entity_id=entity_id, label=label, user_id=user_id,
                                                         as_of=as_of_param(as_of))
        return wire(page, RelationshipCursorPage)

    @post("/", summary="Upsert a relationship by (fromId, toId, label, userId): 201 created, 200 updated",
          responses={**errors(400, 404, 409, 413, 422),
                     200: ResponseSpec(RelationshipOut, description="An existing relationship, updated")},
          description=('Both entities must exist. Each owner (`userId`, or none) has at most one open edge '
                       '(no `validTo`) of a triple: upserting it replaces its metadata and validity; another '
                       'owner\'s edge of the same triple is another relationship. `validFrom`/`validTo` (RFC '
                       '3339) say when the fact held; `supersedes: true` first closes the owner\'s other open '
                       'edges of (fromId, label) at this edge\'s `validFrom` (or now), keeping them as history.'))
    async def upsert(self, data: UpsertRelationshipBody, entity_service: EntityService) -> Response[RelationshipOut]:
        new = new_record(data, NewRelationship)
        return await answered(lambda: entity_service.relate(new), lambda result: wire(result.item, RelationshipOut),
                              created_or_updated)

    @delete("/", summary="Delete a relationship named by {fromId, toId, label} (its open and closed edges; "
                         "with userId, that owner's only; a key bound to a user deletes its own)",
          responses=errors(400, 404, 422), status_code=204)
    async def remove(self, data: DeleteRelationshipBody, entity_service: EntityService) -> None:
        return await answered(lambda: entity_service.unrelate(data.from_id, data.to_id, data.label, data.user_id),
                              nothing, 204)
