"""``/admin/keys``: create, list and revoke API keys (a key with the ``admin`` scope only)."""

from __future__ import annotations

from litestar import Controller, Request, delete, get, post

from app.auth import admin_principal
from app.idempotency import unkeyed
from app.routes.deps import PathId, errors
from app.routes.examples import CreateKeyBody
from app.schemas_keys import CreatedKeyOut, KeyOut
from domain.keys import KeyService

def key_out(stored, cls=KeyOut, **extra) -> KeyOut:
    return cls(id=stored.id, name=stored.name, scopes=list(stored.scopes), user_id=stored.user_id,
               agent_id=stored.agent_id, expires_at=stored.expires_at, rate_limit=stored.rate_limit,
               global_read=stored.global_read, created_at=stored.created_at, last_used_at=stored.last_used_at,
               revoked_at=stored.revoked_at, **extra)


def _forget_cached(request: Request) -> None:
    # A key created or revoked here counts at once in this process (others: within KEY_CACHE_SECONDS).
    authenticator = request.app.state.get("authenticator")
    if authenticator is not None:
        authenticator.forget()


class KeyController(Controller):
    """Each handler checks the admin scope first thing in its body, after Litestar has validated
    the input, so a malformed request is a 400 whoever sends it."""

    path = "/admin/keys"
    tags = ["admin"]

    @post("/", summary="Create an API key; the answer shows its secret once", status_code=201,
          responses=errors(400, 403, 413), opt=unkeyed(
              "Idempotency-Key is not taken here: the answer holds the new key's secret, which is never "
              "stored; after a lost answer, list the keys (GET /admin/keys) and revoke the extra one"),
          description="`userId` (and `agentId`) bind the key to an owner: it then sees and changes only that "
                      "owner's records. `scopes`: read, write, forget, admin (admin: unbound keys only). "
                      "Takes no `Idempotency-Key` (a 400): its answer holds a secret that is never stored.")
    async def create(self, request: Request, data: CreateKeyBody, key_service: KeyService) -> CreatedKeyOut:
        admin_principal()
        issued = await key_service.create(data.name, scopes=data.scopes, user_id=data.user_id,
                                          agent_id=data.agent_id, expires_at=data.expires_at,
                                          rate_limit=data.rate_limit, global_read=data.global_read)
        _forget_cached(request)
        return key_out(issued.key, CreatedKeyOut, key=issued.secret)

    @get("/", summary="Every API key (never a secret)", responses=errors(403))
    async def list_all(self, key_service: KeyService) -> list[KeyOut]:
        admin_principal()
        return [key_out(k) for k in await key_service.list()]

    @delete("/{key_id:str}", summary="Revoke an API key", status_code=200, responses=errors(400, 403, 404))
    async def revoke(self, request: Request, key_id: PathId, key_service: KeyService) -> KeyOut:
        admin_principal()
        revoked = await key_service.revoke(key_id)
        _forget_cached(request)
        return key_out(revoked)
