"""Scoped keys against a real ``serve`` process: a key made with ``memory-service keys create``
beside the running service works at once, sees only its user's records on every route family,
and stops working when ``keys revoke`` revokes it (KEY_CACHE_SECONDS=0 here: no cached trust)."""

from __future__ import annotations

import json

import httpx

from tests.support.server import ServiceProcess, run_service, service_env

ADMIN = "e2e-admin-key"


def test_a_key_from_the_cli_is_scoped_on_every_route_family_and_revocable(tmp_path):
    env = service_env(tmp_path / "memory.db", {"MEMORY_API_KEY": ADMIN, "KEY_CACHE_SECONDS": "0"})
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with ServiceProcess(env) as server:
        base = server.url
        created = run_service(["keys", "create", "--name", "assistant", "--user", "u1"], env)
        assert created.returncode == 0, created.stderr
        record_line, secret = created.stdout.strip().splitlines()
        key_id = json.loads(record_line)["id"]
        mine = {"Authorization": f"Bearer {secret}"}

        ids = {}
        for user in ("u1", "u2"):
            session = httpx.post(f"{base}/sessions", headers=admin, json={"externalId": f"{user}-c", "userId": user}).json()
            episode = httpx.post(f"{base}/episodes", headers=admin, json={
                "sessionId": session["id"], "userMessage": f"running {user}", "aiResponse": "ok"}).json()
            entity = httpx.post(f"{base}/entities", headers=admin, json={"name": f"Ana {user}", "type": "person",
                                                                         "userId": user}).json()
            summary = httpx.post(f"{base}/summaries", headers=admin, json={"sessionId": session["id"],
                                                                           "content": f"running {user}"}).json()
            ids[user] = (session["id"], episode["id"], entity["id"], summary["id"])
        s2, e2, n2, m2 = ids["u2"]
        for path in (f"/sessions/{s2}", f"/episodes/{e2}", f"/entities/{n2}", f"/summaries/{m2}",
                     f"/sessions/{s2}/episodes"):
            assert httpx.get(f"{base}{path}", headers=mine).status_code == 404, path
        for path in ("/sessions", "/episodes", "/entities", "/summaries", "/episodes/search?q=running", "/events"):
            answer = httpx.get(f"{base}{path}", headers=mine)
            assert answer.status_code == 200 and "u2" not in answer.text, (path, answer.text)
        found = httpx.post(f"{base}/search", headers=mine, json={"query": "running", "sources": ["episodes", "summaries"]})
        assert found.status_code == 200 and found.json()["hits"] and "u2" not in found.text
        package = httpx.post(f"{base}/context", headers=mine, json={"query": "running", "tokenBudget": 500,
                                                                     "userId": "u1"})
        assert package.status_code == 200 and "running u1" in package.text and "u2" not in package.text
        assert httpx.delete(f"{base}/users/u2", headers=mine).status_code == 403
        assert httpx.patch(f"{base}/entities/{ids['u1'][2]}", headers=mine, json={"notes": "n"}).status_code == 200
        history = httpx.get(f"{base}/entities/{ids['u1'][2]}/history", headers=admin).json()["items"]
        assert history[-1]["actor"] == f"key:{key_id}"

        listed = [json.loads(line) for line in run_service(["keys", "list"], env).stdout.splitlines()]
        assert listed[0]["lastUsedAt"] is not None and "key" not in listed[0]
        assert run_service(["keys", "revoke", str(key_id)], env).returncode == 0
        assert httpx.get(f"{base}/sessions", headers=mine).status_code == 401
        assert server.stop() == 0
