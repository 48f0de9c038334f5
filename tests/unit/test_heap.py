"""``app.heap``: a serving process freezes what start-up built and spaces out young collections;
an app built for a test leaves the collector alone. Each case runs in a process of its own (a
frozen heap cannot be thawed back into the generations it came from)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from app.config import Settings, load_settings
from app.heap import YOUNG_THRESHOLD

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_freezing_start_up_freezes_what_start_up_built_and_raises_the_young_threshold():
    seen = _run("""
        import gc, json
        from app import heap
        before = gc.get_freeze_count(), gc.get_threshold()
        heap.freeze_start_up()
        print(json.dumps({"before": before, "frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}))
    """)
    assert seen["before"] == [0, [700, 10, 10]]
    assert seen["frozen"] > 1_000  # every module, type and object the interpreter made so far
    assert seen["threshold"] == [YOUNG_THRESHOLD, 10, 10]


def _app_started(tmp_path: Path, serving: bool) -> dict:
    return _run(f"""
        import gc, json
        from litestar.testing import TestClient
        from app.config import Settings
        from app.main import create_app
        settings = Settings(sqlite_path={str(tmp_path / "memory.db")!r}, vector_index="memory", embedder="fake",
                            embedding_dim=16, port=0)
        with TestClient(create_app(settings, serving={serving})) as client:
            status = client.get("/health/live").status_code
            print(json.dumps({{"status": status, "frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}}))
    """)


def test_the_serving_app_freezes_its_heap_once_started(tmp_path):
    seen = _app_started(tmp_path, serving=True)
    assert seen["status"] == 200
    assert seen["frozen"] > 10_000
    assert seen["young"] == YOUNG_THRESHOLD


def test_an_app_built_for_a_test_leaves_the_collector_alone(tmp_path):
    seen = _app_started(tmp_path, serving=False)
    assert seen == {"status": 200, "frozen": 0, "young": 700}


def test_what_a_model_builds_while_it_loads_after_start_up_is_frozen_once_it_has_loaded():
    # A local model loads in the background after start-up's freeze: the objects it builds would
    # otherwise be walked by every later full collection.
    seen = _run("""
        import asyncio, gc, json
        from app import startup
        from ports.embedder import EmbedderStatus

        startup.POLL_SECONDS = 0.01

        class Loading:  # starting for two probes; the load builds objects the collector tracks
            def __init__(self):
                self.probes, self.built = 0, None
            async def probe(self):
                self.probes += 1
                if self.probes == 2:
                    self.built = [{"layer": n} for n in range(100)]
                return EmbedderStatus(model="m", dimension=4, reachable=self.probes > 2, starting=self.probes <= 2)

        embedder = Loading()
        asyncio.run(startup.freeze_heap_once_loaded(embedder))
        tracked = {id(o) for o in gc.get_objects()}  # the collected generations, not the frozen one
        print(json.dumps({"probes": embedder.probes, "collected": id(embedder.built) in tracked,
                          "frozen": gc.get_freeze_count() > 0}))
    """)
    assert seen == {"probes": 3, "collected": False, "frozen": True}


ARENAS_USED = """
    import ctypes, json, threading
    from app.heap import limit_malloc_arenas
    capped = limit_malloc_arenas({arenas})
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    together = threading.Barrier(9)

    def allocate():  # a thread's first malloc takes an arena of its own while glibc may make one
        block = libc.malloc(4096)
        together.wait()  # all alive at once: none inherits the arena of a thread that ended
        together.wait()
        libc.free(block)

    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    together.wait()
    libc.malloc_stats()  # one "Arena N:" block per arena, on stderr
    together.wait()
    for thread in threads:
        thread.join()
    print(json.dumps({{"capped": capped}}))
"""


def _arenas(arenas: int) -> tuple[bool, int]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(ARENAS_USED.format(arenas=arenas))], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    used = sum(line.startswith("Arena ") for line in done.stderr.splitlines())
    return json.loads(done.stdout.strip().splitlines()[-1])["capped"], used


def test_capped_malloc_arenas_are_shared_by_threads_beyond_the_cap():
    assert _arenas(2) == (True, 2)


def test_zero_leaves_glibc_giving_each_new_thread_an_arena_of_its_own():
    capped, used = _arenas(0)
    assert not capped
    # The main thread's and one per thread, up to glibc's default cap of 8 per core.
    assert used == min(9, 8 * os.cpu_count())


def test_a_serving_process_caps_its_arenas_at_two_unless_told_otherwise():
    assert Settings(sqlite_path=":memory:").malloc_arenas == 2
    assert load_settings({"SQLITE_PATH": ":memory:", "MALLOC_ARENAS": "0"}, dotenv=None).malloc_arenas == 0


def test_an_operators_malloc_arena_max_wins_over_the_setting(monkeypatch):
    from app.heap import limit_malloc_arenas

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # glibc read it at start; the setting leaves it be
    assert limit_malloc_arenas(2) is False


def test_trimming_gives_back_to_the_system_what_a_burst_freed_below_memory_still_in_use():
    # 60 MB of heap blocks freed under one kept at the top: glibc keeps them resident until trimmed.
    seen = _run("""
        import ctypes, json
        from app import heap
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

        def anon_mb():
            line = next(l for l in open("/proc/self/status") if l.startswith("RssAnon:"))
            return int(line.split()[1]) / 1024

        blocks = [libc.malloc(64 * 1024) for _ in range(960)]  # below glibc's mmap threshold: heap
        for block in blocks:
            libc.memset(block, 1, 64 * 1024)
        kept = libc.malloc(64 * 1024)
        libc.memset(kept, 1, 64 * 1024)
        for block in blocks:
            libc.free(block)
        before = anon_mb()
        trimmed = heap.trim()
        print(json.dumps({"trimmed": trimmed, "given_back_mb": before - anon_mb()}))
    """)
    assert seen["trimmed"] is True
    assert seen["given_back_mb"] > 40


def test_the_serving_app_gives_freed_memory_back_while_it_runs_and_stops_when_it_shuts_down(tmp_path):
    # One event loop for the app and for the wait after its shutdown: a trim task the shutdown left
    # running would go on trimming on it.
    seen = _run(f"""
        import asyncio, json
        from app import heap
        from app.config import Settings
        from app.main import create_app
        trims = []
        heap.TRIM_SECONDS = 0.05
        heap.trim = lambda: trims.append(1) or True
        settings = Settings(sqlite_path={str(tmp_path / "memory.db")!r}, vector_index="memory", embedder="fake",
                            embedding_dim=16, port=0)

        async def main():
            # The ASGI lifespan driven by hand on this loop (a test client would run the app on a
            # thread of its own, whose loop ends with it).
            app, inbox, outbox = create_app(settings, serving=True), asyncio.Queue(), asyncio.Queue()
            lifespan = asyncio.ensure_future(app({{"type": "lifespan", "asgi": {{"version": "3.0"}}, "state": {{}}}},
                                                 inbox.get, outbox.put))
            await inbox.put({{"type": "lifespan.startup"}})
            assert (await outbox.get())["type"] == "lifespan.startup.complete"
            for _ in range(600):
                if len(trims) >= 2:
                    break
                await asyncio.sleep(0.05)
            await inbox.put({{"type": "lifespan.shutdown"}})
            assert (await outbox.get())["type"] == "lifespan.shutdown.complete"
            await lifespan
            at_shutdown = len(trims)
            await asyncio.sleep(0.3)  # six periods
            return at_shutdown, len(trims) - at_shutdown

        trimmed, after = asyncio.run(main())
        print(json.dumps({{"trims": trimmed, "after_shutdown": after}}))
    """)
    assert seen["trims"] >= 2
    assert seen["after_shutdown"] == 0


def test_a_trim_that_fails_stops_trimming_with_one_warning_and_serving_goes_on():
    seen = _run("""
        import asyncio, json, logging
        from app import heap
        calls, lines = [], []
        heap.TRIM_SECONDS = 0.01

        def broken():
            calls.append(1)
            raise OSError("no allocator here")

        heap.trim = broken
        logging.getLogger("nexusai.heap").addHandler(logging.Handler())
        logging.getLogger("nexusai.heap").handlers[0].emit = lines.append

        async def main():
            task = asyncio.ensure_future(heap.return_freed_memory())
            await asyncio.sleep(0.2)
            return task.done() and task.exception() is None

        ended = asyncio.run(main())
        print(json.dumps({"calls": len(calls), "warnings": len(lines), "ended": ended}))
    """)
    assert seen == {"calls": 1, "warnings": 1, "ended": True}
