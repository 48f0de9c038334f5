"""Every shell and Python block of README.md runs, in order, against one real server.

Convention: a block that must not run here (it starts its own server, installs packages, needs
Docker, Ollama, systemd or a long benchmark) carries an HTML comment on the line before its fence,
with the reason:

    <!-- readme-test: skip (starts the server itself) -->
    ```bash
    make run
    ```

Every other ```bash/```sh/```shell and ```python block runs. The server listens on a free port;
the README's own address (``localhost:3002`` / ``127.0.0.1:3002``) is rewritten to it. ``BASE`` is
not set for a block: a block that uses it sets it, as a reader copying that one block would need.
Blocks run in a scratch directory laid out like a checkout after ``make run``:
``.venv`` (a link to this environment), ``./data/memory.db`` the server's database, and
``SQLITE_PATH`` plus the server's embedder settings in the environment and in ``.env``, so
``memory-service ...`` and ``.venv/bin/...`` commands reach the same store. In shell blocks ``set -euo pipefail`` holds
and ``curl`` fails on an HTTP error answer (``--fail-with-body``), so a walkthrough that calls a
deleted record fails here instead of in a reader's terminal.

Each block stands alone: the blocks run top to bottom, then all again on the same store, so a
block that counts on a fresh store (an id it did not create, an ``externalId`` that must be new)
fails on the second pass, as it would for a reader who has already run the quick start.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.server import ServiceProcess, service_env

README = Path(__file__).resolve().parents[2] / "README.md"
SHELL = ("bash", "sh", "shell")
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b\s*(?P<reason>.*?)\s*-->")
README_ADDRESS = re.compile(r"(?:localhost|127\.0\.0\.1):3002\b")
BLOCK_TIMEOUT = 180.0
SHELL_PRELUDE = """set -euo pipefail
curl() { command curl --silent --show-error --fail-with-body "$@"; }
"""


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip_reason: str | None


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text`` in order, each with the skip reason of the comment right above it."""
    blocks, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[index])
        if not fence:
            index += 1
            continue
        start, body = index, []
        index += 1
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        marker = SKIP.search(previous)
        blocks.append(Block(start + 1, fence.group(1).lower(), "\n".join(body) + "\n",
                            marker.group("reason") if marker else None))
        index += 1
    return blocks


BLOCKS = readme_blocks(README.read_text())
RUNNABLE = [b for b in BLOCKS if b.language in (*SHELL, "python") and b.skip_reason is None]


def test_the_readme_has_runnable_blocks_and_every_skip_says_why():
    assert {b.language for b in RUNNABLE} >= {"bash", "python"}
    unexplained = [b.line for b in BLOCKS if b.skip_reason is not None and not b.skip_reason.strip("() ")]
    assert unexplained == [], "a readme-test skip marker needs a reason"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The scratch checkout and a server on its ./data/memory.db; yields (directory, env, server)."""
    directory = tmp_path_factory.mktemp("readme")
    (directory / "data").mkdir()
    (directory / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = service_env("./data/memory.db")
    # A checkout's .env, as a user keeps one: commands that do not inherit the environment (an MCP
    # client spawning `memory-service mcp`) still find the same store and embedder.
    (directory / ".env").write_text("".join(f"{k}={env[k]}\n" for k in ("SQLITE_PATH", "EMBEDDER", "EMBEDDING_DIM")))
    with ServiceProcess(env, cwd=directory, log_dir=tmp_path_factory.mktemp("readme-logs")) as server:
        env = {**env, "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"}
        env.pop("BASE", None)
        yield directory, env, server


PASSES = [(block, "first") for block in RUNNABLE] + [(block, "again") for block in RUNNABLE]


@pytest.mark.parametrize(("block", "run"), PASSES, ids=[f"README.md:{b.line}-{b.language}-{run}" for b, run in PASSES])
def test_readme_block_runs(block: Block, run: str, scratch):
    directory, env, server = scratch
    code = README_ADDRESS.sub(server.url.removeprefix("http://"), block.code)
    if block.language == "python":
        command, source = [sys.executable, "-"], code
    else:
        command, source = ["bash"], SHELL_PRELUDE + code
    done = subprocess.run(command, input=source, cwd=directory, env=env, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT)
    assert done.returncode == 0, (
        f"README.md line {block.line} ({block.language}) exited {done.returncode}\n"
        f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
    )
