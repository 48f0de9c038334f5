"""``memory-service``: serve the API and run maintenance on a store."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from app.config import ConfigError, Settings, load_settings
from app.heap import limit_malloc_arenas

cli = typer.Typer(help="NexusAI Memory Service", no_args_is_help=True, add_completion=False)

# Where `make run` keeps its store. Maintenance commands use it when SQLITE_PATH is unset, so they
# work on the served store from the repository's folder; `serve` still wants SQLITE_PATH said.
MAKE_RUN_SQLITE_PATH = "./data/memory.db"


def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(2) from None


def _store_settings(*, must_exist: bool = True) -> Settings:
    """Settings for a command that works on an existing store: the server's configuration
    (environment, then .env), with make run's database when SQLITE_PATH is unset."""
    try:
        settings = load_settings(default_sqlite_path=MAKE_RUN_SQLITE_PATH)
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(2) from None
    path = settings.sqlite_path
    if must_exist and settings.store == "sqlite" and path != ":memory:" and not Path(path).exists():
        hint = "" if path != MAKE_RUN_SQLITE_PATH else (
            " (SQLITE_PATH is unset, so make run's database is used: run this from the folder where "
            "make run ran, or set SQLITE_PATH)")
        typer.echo(f"configuration error: SQLITE_PATH: no database at {path}{hint}", err=True)
        raise typer.Exit(2)
    return settings


def _progress_bar(description: str):
    """A rich progress bar on stderr (stdout stays the command's result), and a
    ``progress(done, total)`` callback that moves it."""
    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(console=Console(stderr=True), transient=False)
    task = bar.add_task(description, total=None)

    def advance(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, advance


def configure_logging(settings: Settings) -> None:
    from app.logs import configure

    configure(settings.log_level, settings.log_format, secrets=settings.secrets)


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _open_stores(container) -> None:
    """Open the database before uvicorn starts, so a locked or unopenable store fails with one
    line instead of a lifespan traceback. The vector index is not opened here: it is derived
    data, and whatever state it is in the index manager deals with it while the service runs."""
    container.store()


@cli.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="bind address (default HOST)")] = None,
    port: Annotated[Optional[int], typer.Option(help="listen port (default PORT)")] = None,
) -> None:
    """Serve the REST API (uvicorn, uvloop + httptools): one process, or ``WORKERS`` where the
    engines are shared (``app.serving``)."""
    settings = _settings()
    limit_malloc_arenas(settings.malloc_arenas)  # before the threads that would each take an arena start
    if host is not None or port is not None:
        settings = settings.with_overrides(host=host or settings.host, port=settings.port if port is None else port)
    configure_logging(settings)
    _serve(settings)


def _serve(settings: Settings) -> None:
    import uvicorn

    from app.serving import check_before_spawning, resolve_workers, run_workers, shared_metrics_dir

    try:
        workers = resolve_workers(settings)
        if workers > 1:
            check_before_spawning(settings)
            app = None
        else:
            from app.main import create_app

            app = create_app(settings, serving=True)
            _open_stores(app.state.container)
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(2) from None
    except Exception as exc:  # e.g. the database cannot be opened: one clear line, not a traceback
        typer.echo(f"start-up failed: {exc}", err=True)
        raise typer.Exit(1) from None
    # log_config=None: uvicorn's loggers go through app.logs (JSON when asked), not its own handlers.
    options = dict(log_level=settings.log_level, log_config=None, loop="uvloop", http="httptools",
                   access_log=False, timeout_graceful_shutdown=10, proxy_headers=settings.forwarded_allow_ips is not None,
                   forwarded_allow_ips=settings.forwarded_allow_ips)
    # uvicorn re-raises a SIGTERM once its graceful shutdown is done; with the default handler the
    # process would then die "killed by SIGTERM". Handled here, a drained shutdown exits 0.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    if app is None:
        # The workers import prometheus-client afresh and count into one directory: a scrape sums them.
        with shared_metrics_dir():
            run_workers(settings, workers, **options)
        return
    uvicorn.run(app, host=settings.host, port=settings.port, **options)


@cli.command()
def reindex(
    collection: Annotated[Optional[str], typer.Option(help="episodes, entities or summaries (default: all)")] = None,
) -> None:
    """Build new index generations from the stored embeddings, embedding only records that have none for the configured model (after a model or dimension change, or to rebuild)."""
    from app.maintenance import run_reindex

    settings = _store_settings()
    configure_logging(settings)
    sys.exit(asyncio.run(run_reindex(settings, collection)))


@cli.command()
def doctor() -> None:
    """Check configuration, connectivity and dimensions, and print what is wrong."""
    from app.maintenance import run_doctor

    settings = _store_settings()
    sys.exit(asyncio.run(run_doctor(settings)))


@cli.command()
def stats() -> None:
    """Row counts, FTS size, vectors per collection and the embedding backlog, as JSON."""
    from app.maintenance import collect_stats

    settings = _store_settings()
    typer.echo(json.dumps(asyncio.run(collect_stats(settings)), indent=2))


@cli.command("eval")
def eval_(
    files: Annotated[list[Path], typer.Argument(help="LoCoMo .json or turns+questions .jsonl conversations")],
    rankers: Annotated[Optional[str], typer.Option(help="comma-separated rankers (default: all, default first)")] = None,
    k: Annotated[str, typer.Option(help="comma-separated cut-offs")] = "5,10,20",
    json_out: Annotated[Optional[Path], typer.Option("--json", help="also write the table here as JSON")] = None,
    min_score: Annotated[Optional[float], typer.Option(
        "--min-score", min=0.0, max=1.0, help="relevance floor, 0-1 (default: each ranker's, as a search)")] = None,
) -> None:
    """Evidence recall@k, and LongMemEval's recall_all@k, recall_any@k and ndcg@k, per ranker on
    conversations, in a throwaway store with the configured embedder."""
    from app.evaluation import as_json, evaluate, render
    from domain.errors import DomainError

    settings = _store_settings(must_exist=False)  # only the embedder settings count: the store is a throwaway
    configure_logging(settings)
    try:
        ks = tuple(int(v) for v in k.split(","))
    except ValueError:
        typer.echo(f"--k must be comma-separated whole numbers, not {k!r}", err=True)
        raise typer.Exit(2) from None
    chosen = [name.strip() for name in rankers.split(",") if name.strip()] if rankers else None
    if json_out is not None and (json_out.is_dir() or not json_out.parent.is_dir()):
        # Found out before the run, not after minutes of loading and searching.
        typer.echo(f"--json {json_out}: not a file path in an existing directory", err=True)
        raise typer.Exit(2)
    try:
        run = asyncio.run(evaluate(settings, files, chosen, ks, min_score))
    except DomainError as exc:
        typer.echo(f"eval failed: {exc.message}", err=True)
        raise typer.Exit(2) from None
    typer.echo(render(run, ks))
    if json_out is not None:
        try:
            json_out.write_text(json.dumps(as_json(run, ks), indent=2))
        except OSError as exc:
            typer.echo(f"--json {json_out}: cannot write it: {exc.strerror}", err=True)
            raise typer.Exit(2) from None


def _store_path(settings: Settings) -> str:
    if settings.store != "sqlite":
        typer.echo("configuration error: STORE: export, import and backup need STORE=sqlite", err=True)
        raise typer.Exit(2)
    return settings.sqlite_path


def _run_backup_step(step, *args, description: str | None = None) -> None:
    from app.backup import BackupError

    try:
        if description is None:
            counts = step(*args)
        else:
            bar, advance = _progress_bar(description)
            with bar:
                counts = step(*args, progress=advance)
    except (BackupError, OSError) as exc:
        typer.echo(f"{step.__name__.split('_')[0]} failed: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(counts.describe())


@cli.command("export")
def export_(
    path: Annotated[str, typer.Argument(help="the JSON Lines file to write (a new file, mode 0600)")],
    force: Annotated[bool, typer.Option("--force", help="replace PATH if it exists (a symlink is replaced, not followed)")] = False,
) -> None:
    """Write every session, episode, entity, relationship and summary to PATH (JSON Lines)."""
    from app.backup import export_store

    _run_backup_step(export_store, _store_path(_store_settings()), path, force, description="exporting")


@cli.command("import")
def import_(path: Annotated[str, typer.Argument(help="a file written by `memory-service export`")]) -> None:
    """Load an export into SQLITE_PATH, keeping ids, in one transaction; queues the embeddings."""
    from app.backup import import_store

    _run_backup_step(import_store, _store_path(_store_settings(must_exist=False)), path, description="importing")


@cli.command()
def backup(path: Annotated[str, typer.Argument(help="the new SQLite file to write")]) -> None:
    """Copy the live database to PATH with SQLite's online backup API (safe while serving);
    missing folders are created."""
    from app.backup import backup_store

    _run_backup_step(backup_store, _store_path(_store_settings()), path)


@cli.command("migrate-store")
def migrate_store_(
    source: Annotated[str, typer.Option("--from", help="the SQLite store: sqlite:PATH (or just PATH)")],
    target: Annotated[str, typer.Option("--to", help="an empty PostgreSQL database: postgresql://...")],
) -> None:
    """Copy a SQLite store into an empty PostgreSQL database (ids, history, the change feed, the
    outbox, stored embeddings and the index manifest kept), in one transaction; then serve it with
    STORE=postgres and DATABASE_URL."""
    from app.migrate_store import MigrationError, migrate_store

    path = source.removeprefix("sqlite:")
    if not target.startswith(("postgresql://", "postgres://")):
        typer.echo("migrate-store: --to must be a postgresql:// URL", err=True)
        raise typer.Exit(2)
    try:
        copied = migrate_store(path, target, lambda table, n: typer.echo(f"{table}: {n}"))
    except MigrationError as exc:
        typer.echo(f"migrate-store: {exc}", err=True)
        raise typer.Exit(1) from None
    except Exception as exc:  # an unreachable server, a refused login: one clear line
        typer.echo(f"migrate-store failed: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"copied {sum(copied.values())} rows into PostgreSQL")


MAX_ID = 2**63 - 1  # SQLite's largest integer: a larger one is a usage error, not an OverflowError
dead_letters = typer.Typer(help="Embedding jobs given up on after EMBEDDING_MAX_ATTEMPTS failures", no_args_is_help=True)
cli.add_typer(dead_letters, name="dead-letters")


@dead_letters.command("list")
def dead_letters_list(limit: Annotated[int, typer.Option(min=1, max=MAX_ID, help="at most this many")] = 100) -> None:
    """Print each dead-lettered job as one JSON line (id, record, attempts, last error)."""
    from app.dead_letters import list_dead_letters, render

    jobs = asyncio.run(list_dead_letters(_store_settings(), limit))
    typer.echo(render(jobs) if jobs else "no dead letters")


@dead_letters.command("retry")
def dead_letters_retry(
    ids: Annotated[Optional[list[int]], typer.Argument(min=1, max=MAX_ID, help="job ids (from `list`)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="retry every dead letter")] = False,
) -> None:
    """Queue dead-lettered jobs again with a fresh attempt count."""
    from app.dead_letters import retry_dead_letters

    if not ids and not all_:
        typer.echo("name job ids or pass --all", err=True)
        raise typer.Exit(2)
    revived = asyncio.run(retry_dead_letters(_store_settings(), None if all_ else list(ids or [])))
    typer.echo(f"requeued {revived} dead letters")


@cli.command()
def mcp(
    transport: Annotated[str, typer.Option(help="stdio (an assistant starts this command) or streamable-http")] = "stdio",
    host: Annotated[Optional[str], typer.Option(help="streamable-http bind address (default HOST)")] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="streamable-http listen port")] = 3004,
) -> None:
    """Serve the memory as Model Context Protocol tools (remember, search, build_context, sessions, entities, relationships, history)."""
    if transport not in ("stdio", "streamable-http"):
        typer.echo(f"configuration error: --transport: must be stdio or streamable-http, not {transport!r}", err=True)
        raise typer.Exit(2)
    from app.mcp_serving import run

    settings = _settings()
    limit_malloc_arenas(settings.malloc_arenas)
    configure_logging(settings)  # to stderr: with stdio, stdout carries the protocol
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        asyncio.run(run(settings, transport, host or settings.host, port))  # type: ignore[arg-type]
    except ConfigError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(2) from None
    except Exception as exc:  # e.g. the store is held by a running `serve`: one clear line, not a traceback
        typer.echo(f"mcp failed: {exc}", err=True)
        raise typer.Exit(1) from None


def _add_keys_commands() -> None:
    from app.cli_keys import keys_cli

    cli.add_typer(keys_cli, name="keys")


_add_keys_commands()


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    cli()


if __name__ == "__main__":
    main()
