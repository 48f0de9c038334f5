"""``/mcp`` in the REST app loads the MCP SDK on the first request that reaches it
(``app.mcp_mount``): a service only ever asked REST questions never imports it. Each case runs in
a fresh interpreter, where nothing has imported the SDK yet."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_sdk_is_loaded_by_the_first_mcp_request_and_then_serves_it(tmp_path):
    seen = _run(f"""
        import json, sys
        from litestar.testing import TestClient
        from app.config import Settings
        from app.main import create_app
        settings = Settings(sqlite_path={str(tmp_path / "memory.db")!r}, vector_index="memory", embedder="fake",
                            embedding_dim=16, port=0)
        with TestClient(create_app(settings), base_url="http://localhost:3002") as client:
            client.post("/sessions", json={{"externalId": "rest"}})
            before = "mcp" in sys.modules
            hello = {{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {{
                "protocolVersion": "2025-06-18", "capabilities": {{}}, "clientInfo": {{"name": "t", "version": "1"}}}}}}
            answer = client.post("/mcp", json=hello, headers={{"Accept": "application/json, text/event-stream"}})
            body = answer.text
            print(json.dumps({{"before": before, "after": "mcp" in sys.modules, "status": answer.status_code,
                              "server": "nexusai-memory" in body}}))
    """)
    assert seen == {"before": False, "after": True, "status": 200, "server": True}
