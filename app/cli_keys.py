"""``memory-service keys create|list|revoke``: API keys on the configured store.

The secret of a created key is printed once, on its own line last, and never again (only its hash
is stored). A key revoked here stops working in a running service within KEY_CACHE_SECONDS.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Optional

import typer

from app.container import opened
from domain.access import ApiKey
from domain.errors import DomainError

keys_cli = typer.Typer(help="API keys: create, list, revoke", no_args_is_help=True, add_completion=False)


def key_view(key: ApiKey) -> dict[str, Any]:
    """A key as the CLI and ``/admin/keys`` show it: everything but its hash."""
    return {"id": key.id, "name": key.name, "scopes": list(key.scopes), "userId": key.user_id,
            "agentId": key.agent_id, "expiresAt": key.expires_at, "rateLimit": key.rate_limit,
            "globalRead": key.global_read, "createdAt": key.created_at, "lastUsedAt": key.last_used_at,
            "revokedAt": key.revoked_at}


def _run(action) -> Any:
    from app.cli import _store_settings

    async def go() -> Any:
        async with opened(_store_settings(must_exist=False)) as container:
            await container.store_resource()
            return await action(container.keys())

    try:
        return asyncio.run(go())
    except DomainError as exc:
        typer.echo(f"{exc.field or 'error'}: {exc.message}", err=True)
        raise typer.Exit(2) from None


@keys_cli.command("create")
def create(
    name: Annotated[str, typer.Option(help="what the key is for")],
    user: Annotated[Optional[str], typer.Option(help="bind the key to this userId")] = None,
    agent: Annotated[Optional[str], typer.Option(help="and to this agentId (needs --user)")] = None,
    scopes: Annotated[str, typer.Option(help="comma-separated: read, write, forget, admin")] = "read,write",
    expires: Annotated[Optional[str], typer.Option(help="expiry, an ISO-8601 date-time")] = None,
    rate_limit: Annotated[Optional[float], typer.Option(help="requests per second (0: none; default KEY_RATE_LIMIT)")] = None,
    no_global_read: Annotated[bool, typer.Option("--no-global-read", help="hide records without an owner")] = False,
) -> None:
    """Create a key and print it once (store it now: it cannot be shown again)."""
    issued = _run(lambda keys: keys.create(name, scopes=[s.strip() for s in scopes.split(",") if s.strip()],
                                           user_id=user, agent_id=agent, expires_at=expires, rate_limit=rate_limit,
                                           global_read=not no_global_read))
    typer.echo(json.dumps(key_view(issued.key)))
    typer.echo(issued.secret)


@keys_cli.command("list")
def list_() -> None:
    """Every key (revoked ones too), one JSON object a line; never a secret."""
    for key in _run(lambda keys: keys.list()):
        typer.echo(json.dumps(key_view(key)))


@keys_cli.command("revoke")
def revoke(key_id: Annotated[int, typer.Argument(help="the key's id")]) -> None:
    """Revoke a key: it is refused from then on (a running service: within KEY_CACHE_SECONDS)."""
    typer.echo(json.dumps(key_view(_run(lambda keys: keys.revoke(key_id)))))
