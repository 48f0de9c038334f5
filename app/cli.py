"""``memory-service``: serve the API and run maintenance on a store."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Annotated, Optional

import typer

from app.config import ConfigError, Settings, load_settings

cli = typer.Typer(help="NexusAI Memory Service", no_args_is_help=True, add_completion=False)


def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(2) from None


def configure_logging(settings: Settings) -> None:
    from app.logs import configure

    configure(settings.log_level, settings.log_format, secrets=[settings.memory_api_key, settings.qdrant_api_key])


@cli.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="bind address (default HOST)")] = None,
    port: Annotated[Optional[int], typer.Option(help="listen port (default PORT)")] = None,
) -> None:
    """Serve the REST API (uvicorn, uvloop + httptools)."""
    import uvicorn

    from app.main import create_app

    settings = _settings()
    if host is not None or port is not None:
        settings = settings.with_overrides(host=host or settings.host, port=settings.port if port is None else port)
    configure_logging(settings)
    try:
        app = create_app(settings)
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(2) from None
    except Exception as exc:  # e.g. the database cannot be opened: one clear line, not a traceback
        typer.echo(f"start-up failed: {exc}", err=True)
        raise typer.Exit(1) from None
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level,
                loop="uvloop", http="httptools", access_log=False, timeout_graceful_shutdown=10)


@cli.command()
def reindex(
    collection: Annotated[Optional[str], typer.Option(help="episodes, entities or summaries (default: all)")] = None,
) -> None:
    """Re-embed every record from SQLite into the vector index (after a model or dimension change)."""
    from app.maintenance import run_reindex

    settings = _settings()
    configure_logging(settings)
    sys.exit(asyncio.run(run_reindex(settings, collection)))


@cli.command()
def doctor() -> None:
    """Check configuration, connectivity and dimensions, and print what is wrong."""
    from app.maintenance import run_doctor

    settings = _settings()
    sys.exit(asyncio.run(run_doctor(settings)))


@cli.command()
def stats() -> None:
    """Row counts, FTS size, vectors per collection and the embedding backlog, as JSON."""
    from app.maintenance import collect_stats

    settings = _settings()
    typer.echo(json.dumps(asyncio.run(collect_stats(settings)), indent=2))


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    cli()


if __name__ == "__main__":
    main()
