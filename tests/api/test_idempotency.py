"""``Idempotency-Key`` on the write routes (Litestar's test client over a real SQLite file): a retry
with the same key and request is answered from the store without a second write."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from litestar.testing import TestClient

from app.idempotency import REPLAYED
from app.main import create_app
from tests.api.test_api_keys import ADMIN_KEY, bearer, issue
from tests.api.test_errors import assert_error

GUARD = 20  # seconds: a hang guard only


def _key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def _episodes(client, session_id: int) -> int:
    return client.get(f"/sessions/{session_id}/episodes").json()["total"]


def test_a_batch_sent_twice_with_one_key_is_stored_once_and_answered_twice_alike(client, session_id):
    body = {"episodes": [{"sessionId": session_id, "userMessage": f"m{n}", "aiResponse": "ok"} for n in range(3)]}
    headers = _key()
    first = client.post("/episodes/batch", json=body, headers=headers)
    again = client.post("/episodes/batch", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.content == first.content
    assert REPLAYED not in first.headers and again.headers[REPLAYED] == "true"
    assert _episodes(client, session_id) == 3


def test_a_plain_episode_sent_twice_with_one_key_is_stored_once(client, session_id):
    body, headers = {"sessionId": session_id, "userMessage": "tea", "aiResponse": "noted"}, _key()
    first = client.post("/episodes", json=body, headers=headers)
    again = client.post("/episodes", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert _episodes(client, session_id) == 1


def test_an_upsert_replayed_keeps_its_first_status_and_does_not_update(client):
    body, headers = {"name": "Ada", "type": "person"}, _key()
    first = client.post("/entities", json=body, headers=headers)
    again = client.post("/entities", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert client.get(f"/entities/{first.json()['id']}/history").json()["items"] == []  # never updated


def test_a_delete_retried_with_its_key_answers_204_again_not_404(client, session_id):
    episode = client.post("/episodes/batch", json={"episodes": [
        {"sessionId": session_id, "userMessage": "x", "aiResponse": "y"}]}).json()[0]
    headers = _key()
    first = client.delete(f"/episodes/{episode['id']}", headers=headers)
    again = client.delete(f"/episodes/{episode['id']}", headers=headers)
    assert (first.status_code, again.status_code) == (204, 204)
    assert again.headers[REPLAYED] == "true"
    assert client.delete(f"/episodes/{episode['id']}").status_code == 404  # without the key: it is gone


def test_a_patch_retried_with_its_key_makes_one_version(client):
    entity = client.post("/entities", json={"name": "Ada", "type": "person"}).json()
    headers = _key()
    for _ in range(2):
        assert client.patch(f"/entities/{entity['id']}", json={"notes": "math"}, headers=headers).status_code == 200
    assert len(client.get(f"/entities/{entity['id']}/history").json()["items"]) == 1


def test_the_same_key_with_another_body_is_a_422_naming_the_key_and_writes_nothing(client, session_id):
    headers = _key()
    body = {"sessionId": session_id, "content": "first"}
    assert client.post("/summaries", json=body, headers=headers).status_code == 201
    other = client.post("/summaries", json={**body, "content": "second"}, headers=headers)
    assert_error(other, 422, "Idempotency-Key")
    assert [s["content"] for s in client.get(f"/sessions/{session_id}/summaries").json()] == ["first"]


def test_the_same_key_on_another_path_is_a_422(client, session_id):
    headers = _key()
    assert client.post("/sessions", json={"externalId": "a"}, headers=headers).status_code == 201
    assert_error(client.post("/entities", json={"name": "a", "type": "b"}, headers=headers), 422, "Idempotency-Key")


def test_a_key_belongs_to_its_caller(make_settings):
    # The caller is the API key a request is made with: two keys, one Idempotency-Key, two writes.
    with TestClient(create_app(make_settings(memory_api_key=ADMIN_KEY))) as client:
        client.headers.update(bearer(ADMIN_KEY))
        session_id = client.post("/sessions", json={"externalId": "conv-1"}).json()["id"]
        key, body = str(uuid.uuid4()), {"sessionId": session_id, "content": "s"}
        for token in (issue(client, name="alice"), issue(client, name="bob")):
            response = client.post("/summaries", json=body, headers={"Idempotency-Key": key, **bearer(token)})
            assert response.status_code == 201 and REPLAYED not in response.headers
        assert len(client.get(f"/sessions/{session_id}/summaries").json()) == 2


def test_a_failed_write_stores_no_answer_and_its_retry_is_a_new_attempt(client):
    headers = _key()
    assert_error(client.post("/summaries", json={"sessionId": 999, "content": "s"}, headers=headers), 404)
    session = client.post("/sessions", json={"externalId": "late"}).json()
    # Another body under the same key is fine: the failed request left nothing behind.
    assert client.post("/summaries", json={"sessionId": session["id"], "content": "s"}, headers=headers).status_code == 201


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_malformed_key_is_a_400_naming_the_header(client, key):
    response = client.post("/sessions", json={"externalId": "k"}, headers={"Idempotency-Key": key.encode("utf-8")})
    assert_error(response, 400, "Idempotency-Key")
    assert client.get("/sessions").json()["total"] == 0


def test_a_key_on_a_read_or_without_a_write_changes_nothing(client, session_id):
    headers = _key()
    assert client.get(f"/sessions/{session_id}", headers=headers).status_code == 200
    assert client.post("/sessions", json={"externalId": "after-read"}, headers=headers).status_code == 201


def test_a_forget_retried_with_its_key_answers_the_first_counts(client):
    client.post("/sessions", json={"externalId": "s", "userId": "u1"})
    headers = _key()
    first = client.delete("/users/u1", headers=headers)
    again = client.delete("/users/u1", headers=headers)
    assert first.json()["sessions"] == 1 and again.json() == first.json()


def test_a_retry_that_arrives_while_the_first_runs_waits_for_it_and_gets_its_answer(make_settings, tmp_path):
    """The first request is held at the database (another connection holds the write lock) while
    the retry arrives; both end with the one answer, and one record exists."""
    settings = make_settings()
    app = create_app(settings)
    with TestClient(app) as client:
        session_id = client.post("/sessions", json={"externalId": "c"}).json()["id"]
        body = {"sessionId": session_id, "content": "once"}
        headers = _key()
        blocker = sqlite3.connect(settings.sqlite_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        released = threading.Event()
        try:
            with ThreadPoolExecutor(2) as pool:
                first = pool.submit(client.post, "/summaries", json=body, headers=headers)
                deadline = time.monotonic() + GUARD
                while not app.state.get("idempotency_in_flight") and time.monotonic() < deadline:
                    time.sleep(0.01)  # until the first request holds its key
                retry = pool.submit(client.post, "/summaries", json=body, headers=headers)
                time.sleep(0.1)  # gives the retry its chance to arrive while the first is held
                blocker.rollback()
                released.set()
                answers = [first.result(GUARD), retry.result(GUARD)]
        finally:
            if not released.is_set():
                blocker.rollback()
            blocker.close()
        assert [a.status_code for a in answers] == [201, 201]
        assert answers[0].content == answers[1].content
        assert answers[1].headers[REPLAYED] == "true"
        assert len(client.get(f"/sessions/{session_id}/summaries").json()) == 1


def test_a_poll_beyond_the_waiter_cap_is_a_503_with_retry_after(client):
    client.app.state["container"].events().waiting = 10**6  # every waiter slot taken
    response = client.get("/events", params={"wait": 5})
    assert_error(response, 503)
    assert int(response.headers["Retry-After"]) >= 1
    assert client.get("/events").status_code == 200  # a poll that does not wait is still answered


def test_a_cursor_beyond_the_head_of_the_feed_is_a_400_naming_after(client, session_id):
    head = client.get("/events").json()["nextAfter"]
    assert client.get("/events", params={"after": head}).status_code == 200
    assert_error(client.get("/events", params={"after": head + 1}), 400, "after")
