"""Command-line arguments out of range are usage errors (exit 2, a message), never a traceback
from deep in the store (SQLite integers stop at 2**63 - 1)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app.cli import cli


@pytest.mark.parametrize("args", [
    ["dead-letters", "retry", str(2**63)], ["dead-letters", "retry", "0"], ["dead-letters", "list", "--limit", str(2**63)],
    ["mcp", "--transport", "streamable-http", "--port", "99999"],
])
def test_an_id_or_limit_out_of_range_is_a_usage_error(tmp_path, args):
    done = CliRunner().invoke(cli, args, env={"SQLITE_PATH": str(tmp_path / "m.db"), "EMBEDDER": "hash"})
    assert done.exit_code == 2, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
    assert not (tmp_path / "m.db").exists()  # refused before opening anything
