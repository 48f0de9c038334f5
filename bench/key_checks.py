"""The cost of API key checks on the seed routes, in process (the app's ASGI callable, no network,
so the difference is the check and nothing else).

    .venv/bin/python bench/key_checks.py [--requests 2000] [--rounds 3]

Every mode runs on a SQLite file with SQLITE_SYNCHRONOUS=normal (no fsync per write to hide the
check). Each route is driven
in turn with: no key configured (the open service), the bootstrap key
(MEMORY_API_KEY), a stored key not bound to a user (cached after its first use), a stored key
bound to the user who owns the data (cached; every record checked against it), and the bound key
with the cache off (KEY_CACHE_SECONDS=0: a hash lookup in SQLite per request). Reported: the
median microseconds per request over the rounds, and each column's ratio to the open service.
A benchmark, never a test: pytest does not collect it, and every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from litestar.testing import AsyncTestClient  # noqa: E402

from app.config import Settings  # noqa: E402
from app.main import create_app  # noqa: E402

ADMIN = "bench-bootstrap-key"
MODES = ("open", "bootstrap", "stored", "bound", "bound-uncached")


async def _one_mode(mode: str, folder: Path, requests: int) -> dict[str, float]:
    key = ADMIN if mode != "open" else None
    # Every mode on a SQLite file (the uncached key must be read from one), SQLITE_SYNCHRONOUS=normal
    # so an fsync per write does not drown the check being measured.
    settings = Settings(sqlite_path=str(folder / f"{mode}.db"), sqlite_synchronous="normal", vector_index="memory",
                        embedder="hash", embedding_dim=16, port=0, worker_enabled=False, max_in_flight=0,
                        memory_api_key=key, key_cache_seconds=0.0 if mode == "bound-uncached" else 5.0)
    app = create_app(settings)
    admin = {"Authorization": f"Bearer {ADMIN}"} if key else {}
    # Litestar's async test client: the app's lifespan runs, requests go straight to its ASGI callable.
    async with AsyncTestClient(app, base_url="http://bench.local") as setup:
        setup.headers.update(admin)
        session = (await setup.post("/sessions", json={"externalId": "bench", "userId": "u1"})).json()
        episode = (await setup.post("/episodes", json={"sessionId": session["id"], "userMessage": "the marathon plan",
                                                       "aiResponse": "train three times a week"})).json()
        headers = admin
        if mode in ("stored", "bound", "bound-uncached"):
            body = {"name": "bench", "scopes": ["read", "write"], **({"userId": "u1"} if mode != "stored" else {})}
            secret = (await setup.post("/admin/keys", json=body)).json()["key"]
            headers = {"Authorization": f"Bearer {secret}"}
        routes = [
            ("GET /episodes/:id", "GET", f"/episodes/{episode['id']}", None),
            ("GET /episodes/search", "GET", "/episodes/search?q=marathon&limit=10", None),
            ("GET /sessions/:id/episodes", "GET", f"/sessions/{session['id']}/episodes?limit=20", None),
            ("POST /episodes", "POST", "/episodes", {"sessionId": session["id"], "userMessage": "more about running",
                                                      "aiResponse": "keep going"}),
        ]
        setup.headers.update(headers)
        out: dict[str, float] = {}
        for name, method, path, body in routes:
            for _ in range(50):
                await setup.request(method, path, json=body)
            began = time.perf_counter()
            for _ in range(requests):
                answer = await setup.request(method, path, json=body)
            out[name] = (time.perf_counter() - began) / requests * 1e6
            assert answer.status_code < 300, (mode, name, answer.status_code, answer.text)
        return out


async def check_cost(folder: Path, iterations: int = 20_000) -> dict[str, float]:
    """The check alone, in microseconds: the bearer token to a principal and the services as it sees
    them, for the bootstrap key, a cached stored key, and a stored key read from SQLite each time."""
    from adapters.sqlite.api_keys import SqliteApiKeys
    from adapters.sqlite.store import SqliteStore
    from app.auth import Authenticator
    from domain.access import new_key
    from domain.models import utc_now
    from domain.scoped import Services, scoped

    store = SqliteStore.open(str(folder / "keys.db"))
    try:
        keys = SqliteApiKeys(store.database)
        secret, key = new_key("bench", user_id="u1", now=utc_now())
        await keys.create(key)
        plain = Services(*([object()] * 9))
        out: dict[str, float] = {}
        for label, token, cache in (("bootstrap", ADMIN, 5.0), ("stored, cached", secret, 5.0),
                                    ("stored, uncached", secret, 0.0)):
            auth = Authenticator(keys, ADMIN, cache_seconds=cache)
            rounds = iterations if cache else iterations // 10
            began = time.perf_counter()
            for _ in range(rounds):
                scoped(await auth.principal(token), plain)
            out[label] = (time.perf_counter() - began) / rounds * 1e6
        return out
    finally:
        await store.close()


async def measure(requests: int, rounds: int) -> tuple[dict[str, dict[str, float]], str]:
    """Median microseconds per request by route and mode, and the table that shows them."""
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        await _one_mode("open", Path(tmp), 200)  # warm the interpreter: the first app pays for imports
        for round_ in range(rounds):
            for mode in MODES:  # interleaved, so load on a shared machine hits every mode alike
                folder = Path(tmp) / f"r{round_}"
                folder.mkdir(exist_ok=True)
                for route, micros in (await _one_mode(mode, folder, requests)).items():
                    results.setdefault(route, {}).setdefault(mode, []).append(micros)
        alone = await check_cost(Path(tmp))
    medians = {route: {m: statistics.median(v) for m, v in by_mode.items()} for route, by_mode in results.items()}
    medians["the check alone"] = alone
    lines = [f"key checks: microseconds per request in process (median of {rounds} rounds of {requests}), "
             "ratio to the open service", f"{'route':28}" + "".join(f"{m:>22}" for m in MODES)]
    for route, by_mode in medians.items():
        if route == "the check alone":
            lines.append("the check alone (token -> principal -> scoped services), microseconds: "
                         + ", ".join(f"{k} {v:.1f}" for k, v in by_mode.items()))
            continue
        cells = [f"{by_mode[m]:9.0f} ({by_mode[m] / by_mode['open']:4.2f}x)" for m in MODES]
        lines.append(f"{route:28}" + "".join(f"{c:>22}" for c in cells))
    return medians, "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.INFO)  # a log line per request would cost more than the check measured
    print(asyncio.run(measure(args.requests, args.rounds))[1])


if __name__ == "__main__":
    main()
