"""``WORKERS``: how many processes ``serve`` runs, where several are refused, and their metrics."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest

from app.config import ConfigError, load_settings
from app.serving import AUTO_MAX, cgroup_cpu_quota, resolve_workers, usable_cores

SHARED = {"VECTOR_INDEX": "server", "QDRANT_URL": "http://127.0.0.1:6333"}  # never contacted here


def _settings(tmp_path, **env):
    return load_settings({"SQLITE_PATH": str(tmp_path / "m.db"), **env}, dotenv=None)


def test_the_embedded_default_runs_one_process(tmp_path):
    settings = _settings(tmp_path)
    assert settings.workers == 0 and resolve_workers(settings) == 1
    assert resolve_workers(_settings(tmp_path, WORKERS="1")) == 1


def test_over_a_qdrant_server_workers_0_means_one_per_usable_core_at_most_four(tmp_path):
    assert resolve_workers(_settings(tmp_path, **SHARED)) == max(1, min(usable_cores(), AUTO_MAX))
    assert resolve_workers(_settings(tmp_path, WORKERS="0", **SHARED)) == max(1, min(usable_cores(), AUTO_MAX))


def test_over_a_qdrant_server_an_explicit_number_of_workers_is_kept(tmp_path):
    assert resolve_workers(_settings(tmp_path, WORKERS="3", **SHARED)) == 3


def test_postgresql_with_a_qdrant_server_runs_several_workers_and_with_edge_one(tmp_path):
    postgres = {"STORE": "postgres", "DATABASE_URL": "postgresql://memory@127.0.0.1/memory"}  # never contacted here
    assert resolve_workers(_settings(tmp_path, WORKERS="3", **postgres, **SHARED)) == 3
    with pytest.raises(ConfigError) as raised:
        resolve_workers(_settings(tmp_path, WORKERS="2", **postgres))
    message = str(raised.value)
    assert "VECTOR_INDEX=edge" in message and "VECTOR_INDEX=server" in message and "together with STORE=postgres" in message


@pytest.mark.parametrize("raw", ["-1", "65", "two"])
def test_a_bad_workers_value_names_the_variable(tmp_path, raw):
    with pytest.raises(ConfigError) as raised:
        _settings(tmp_path, WORKERS=raw)
    assert raised.value.variable == "WORKERS"


@pytest.mark.parametrize(("env", "named"), [
    ({}, "VECTOR_INDEX=edge"),
    ({"VECTOR_INDEX": "memory"}, "VECTOR_INDEX=memory"),
    ({**SHARED, "STORE": "memory"}, "STORE=memory"),
    ({**SHARED, "SQLITE_PATH": ":memory:"}, "SQLITE_PATH=:memory:"),
])
def test_engines_processes_cannot_share_run_one_worker_and_refuse_more_naming_those_that_allow_it(
        tmp_path, env, named):
    def workers(n: str):
        return resolve_workers(load_settings({"SQLITE_PATH": str(tmp_path / "m.db"), "WORKERS": n, **env}, dotenv=None))

    assert workers("0") == 1 and workers("1") == 1
    with pytest.raises(ConfigError) as raised:
        workers("2")
    message = str(raised.value)
    assert raised.value.variable == "WORKERS" and message.startswith("WORKERS: must be 1 with")
    assert named in message and "VECTOR_INDEX=server" in message and "STORE=postgres" in message
    assert "\n" not in message and "(got 2)" in message


def _count_in_a_worker(requests: int, refusals: int) -> None:
    """A worker's share, in its own spawned process (prometheus-client reads
    PROMETHEUS_MULTIPROC_DIR when it is imported there)."""
    from app.metrics import ServiceMetrics

    metrics = ServiceMetrics()
    assert metrics.shared
    for _ in range(requests):
        metrics.observe_request("GET", "/episodes/{episode_id}", 200, 0.002)
    for _ in range(refusals):
        metrics.rejected.inc()
    metrics.dead_lettered.inc()


def _render_in_a_worker(out) -> None:
    from prometheus_client import generate_latest

    from app.metrics import ServiceMetrics

    out.put(generate_latest(ServiceMetrics().exposed()).decode())


def test_counters_add_up_over_worker_processes_in_a_private_directory_removed_at_exit():
    from app.serving import METRICS_DIR_VARIABLE, shared_metrics_dir

    spawn = multiprocessing.get_context("spawn")
    before = os.environ.get(METRICS_DIR_VARIABLE)
    with shared_metrics_dir() as path:
        assert os.environ[METRICS_DIR_VARIABLE] == path and os.stat(path).st_mode & 0o777 == 0o700
        for requests, refusals in ((3, 1), (4, 0)):
            worker = spawn.Process(target=_count_in_a_worker, args=(requests, refusals))
            worker.start()
            worker.join()
            assert worker.exitcode == 0
        answers = spawn.Queue()
        scraper = spawn.Process(target=_render_in_a_worker, args=(answers,))
        scraper.start()
        text = answers.get(timeout=60)
        scraper.join()
    assert 'memory_http_requests_total{method="GET",route="/episodes/{episode_id}",status="200"} 7.0' in text
    assert "memory_http_rejected_overload_total 1.0" in text
    assert "memory_embedding_dead_lettered_total 2.0" in text
    assert not os.path.exists(path) and os.environ.get(METRICS_DIR_VARIABLE) == before


def test_metrics_directories_of_services_that_are_gone_are_removed_at_start(tmp_path):
    from app.serving import METRICS_DIR_PREFIX, sweep_metrics_dirs

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # its pid names no process now (as after kill -9 of a service)
    left = tmp_path / f"{METRICS_DIR_PREFIX}{ended.pid}-abc123_9"
    left.mkdir()
    (left / "counter_123.db").write_bytes(b"\0" * 4096)
    running = tmp_path / f"{METRICS_DIR_PREFIX}{os.getpid()}-def456_9"
    running.mkdir()
    unrelated = tmp_path / f"{METRICS_DIR_PREFIX}notapid"
    unrelated.mkdir()
    older_kind = tmp_path / f"{METRICS_DIR_PREFIX}12345678"  # an earlier version's name: mkdtemp's suffix alone
    older_kind.mkdir()
    other_file = tmp_path / f"{METRICS_DIR_PREFIX}{ended.pid}-file_abc"
    other_file.write_text("not a directory")

    assert sweep_metrics_dirs(str(tmp_path)) == [str(left)]
    assert not left.exists() and running.is_dir() and unrelated.is_dir() and other_file.is_file()
    assert older_kind.is_dir()


def test_the_shared_metrics_directory_is_named_after_the_serving_process():
    from app.serving import METRICS_DIR_PREFIX, shared_metrics_dir

    with shared_metrics_dir() as path:
        assert os.path.basename(path).startswith(f"{METRICS_DIR_PREFIX}{os.getpid()}-")


@pytest.mark.parametrize(("files", "expected"), [
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: two processes may share them
    ({"cpu.max": "100000 100000\n"}, 1),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),  # cgroup v1, no limit
    ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),
    ({}, None),  # no cgroup files at all
])
def test_usable_cores_respects_the_cgroup_cpu_quota(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    membership = tmp_path / "self-cgroup"
    membership.write_text("0::/\n")  # a container's own cgroup namespace: its cgroup is the mount root
    affinity = usable_cores(tmp_path / "nowhere", membership)
    assert usable_cores(tmp_path, membership) == (affinity if expected is None else min(affinity, expected))


def _cgroup_files(mount, files: dict[str, str], membership: str):
    for name, text in files.items():
        (mount / name).parent.mkdir(parents=True, exist_ok=True)
        (mount / name).write_text(text)
    (mount.parent / "self-cgroup").write_text(membership)
    return cgroup_cpu_quota(mount, mount.parent / "self-cgroup")


@pytest.mark.parametrize(("files", "membership", "expected"), [
    # systemd CPUQuota=50% on the service unit: the quota is in the unit's own cgroup.
    ({"cpu.max": "max 100000\n", "system.slice/cpu.max": "max 100000\n",
      "system.slice/x.service/cpu.max": "50000 100000\n"}, "0::/system.slice/x.service\n", 0.5),
    # An ancestor's quota caps every cgroup below it; the smallest on the way up wins.
    ({"system.slice/cpu.max": "150000 100000\n", "system.slice/x.service/cpu.max": "max 100000\n"},
     "0::/system.slice/x.service\n", 1.5),
    ({"cpu.max": "100000 100000\n", "a/cpu.max": "300000 100000\n", "a/b/cpu.max": "200000 100000\n"},
     "0::/a/b\n", 1.0),
    # A sibling's quota is not this process's.
    ({"system.slice/y.service/cpu.max": "50000 100000\n"}, "0::/system.slice/x.service\n", None),
    # cgroup v1: the cpu controller's line (here shared with cpuacct) names the path under cpu/.
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n",
      "cpu/system.slice/x.service/cpu.cfs_quota_us": "25000\n",
      "cpu/system.slice/x.service/cpu.cfs_period_us": "100000\n"},
     "12:memory:/elsewhere\n4:cpu,cpuacct:/system.slice/x.service\n1:name=systemd:/system.slice/x.service\n", 0.25),
    # The path /proc/self/cgroup names is not under this mount (a v1 container that shares the
    # host's cgroup namespace sees its own cgroup as the mount root): the root's quota still counts.
    ({"cpu.max": "200000 100000\n"}, "0::/docker/0123abcd\n", 2.0),
    ({}, "0::/system.slice/x.service\n", None),
])
def test_the_cpu_quota_is_the_smallest_from_the_processs_own_cgroup_up_to_the_root(
        tmp_path, files, membership, expected):
    assert _cgroup_files(tmp_path / "cgroup", files, membership) == expected


def test_without_proc_self_cgroup_the_quota_is_read_at_the_mount_root(tmp_path):
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert cgroup_cpu_quota(tmp_path, tmp_path / "no-such-file") == 1.0
