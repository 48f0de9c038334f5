"""With HOST unset the server listens on the loopback interface only."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx

from tests.support.server import free_port, service_command


def listening_addresses(port: int) -> set[str]:
    """Local addresses of TCP sockets in LISTEN state on ``port``, from /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                found.add(address)
    return found


def test_without_host_the_server_binds_to_127_0_0_1_only(server_env, tmp_path):
    port = free_port()
    env = {**server_env, "PORT": str(port)}
    env.pop("HOST", None)
    with open(tmp_path / "stderr", "wb") as err:
        process = subprocess.Popen([*service_command(), "serve"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                   stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "stderr").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.1)
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, and no 0.0.0.0 or :: socket
    finally:
        process.terminate()
        process.wait(timeout=30)
