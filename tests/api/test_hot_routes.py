"""The hot routes (app.hot_routes) answer exactly as Litestar does: the same status, headers and bytes,
for the plain requests they take and for everything they hand on; the route is known to the request
log and the metrics either way; a write is made once, and wakes the embedding worker as Litestar's
hook does."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from app.hot_routes import HotRoutes
from app.main import create_app

VOLATILE = {"date", "x-request-id"}


def _hot(app) -> HotRoutes:
    handler = app.asgi_handler
    while not isinstance(handler, HotRoutes):
        handler = handler.app
    return handler


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One store with two sessions of episodes, served through the app; ``handed_on`` counts the
    requests the hot reads give to Litestar."""
    from app.config import Settings

    folder = tmp_path_factory.mktemp("hot")
    settings = Settings(sqlite_path=str(folder / "memory.db"), vector_index="memory", embedder="fake",
                        embedding_dim=16, port=0, cors_origins=("https://app.example",), max_body_bytes=4096)
    with TestClient(create_app(settings)) as client:
        ids = []
        for name in ("a", "b"):
            sid = client.post("/sessions", json={"externalId": name}).json()["id"]
            for n in range(12):
                body = {"sessionId": sid, "userMessage": f"Zoë asked about coffee {n} in {name}",
                        "aiResponse": f"café latte number {n}", "metadata": {"n": n}, "tokenCount": n}
                ids.append(client.post("/episodes", json=body).json()["id"])
        hot = _hot(client.app)
        inner, handed_on = hot.app, []

        async def counting(scope, receive, send):
            handed_on.append(scope["path"])
            await inner(scope, receive, send)

        hot.app = counting
        yield client, hot, inner, handed_on
        hot.app = inner


def _answer(response) -> tuple:
    headers = sorted((k.lower(), v) for k, v in response.headers.items() if k.lower() not in VOLATILE)
    return response.status_code, headers, response.content


PLAIN = [
    "/episodes/1", "/episodes/24",
    "/episodes/search?q=coffee", "/episodes/search?q=coffee&limit=3", "/episodes/search?q=Zo%C3%AB+latte",
    "/episodes/search?q=coffee+latte&match=any&limit=100", "/episodes/search?q=coffee&sessionId=2",
    "/episodes/search?q=coffee&sessionId=99",
    "/episodes/search?limit=1&q=caf%C3%A9", "/episodes/search?q=coff%2A&match=fts", "/episodes/search?q=nothinghere",
    "/sessions/1/episodes", "/sessions/2/episodes?limit=5&offset=3", "/sessions/1/episodes?offset=0",
    "/sessions/1/episodes?offset=40", "/sessions/1/episodes?limit=1",
]

HANDED_ON = [
    # not found, and ids Litestar judges (404 for a non-digit id, 400 out of range)
    "/episodes/999", "/episodes/0", "/episodes/007", "/episodes/-1", "/episodes/1.0", "/episodes/1e0",
    "/episodes/99999999999999999999", "/sessions/9/episodes", "/sessions/01/episodes",
    # query parameters: unknown, repeated, out of range, other spellings, empty, missing
    "/episodes/1?x=1", "/episodes/search?q=coffee&x=1", "/episodes/search?q=a&q=b", "/episodes/search",
    "/episodes/search?q=", "/episodes/search?q=coffee&limit=0", "/episodes/search?q=coffee&limit=1001",
    "/episodes/search?q=coffee&limit=05", "/episodes/search?q=coffee&limit=1e1", "/episodes/search?q=coffee&limit=",
    "/episodes/search?q=coffee&match=some",
    "/episodes/search?q=coffee&sessionId=0", "/episodes/search?q=%22unbalanced&match=fts",
    "/episodes/search?q=" + "w" * 2001,
    "/sessions/1/episodes?limit=0", "/sessions/1/episodes?offset=-1", "/sessions/1/episodes?limit=2&limit=3",
    "/sessions/1/episodes?limit",
]

# Either way, as long as the answer is Litestar's: a trailing slash, text decoded to U+FFFD, blank words.
EITHER = ["/episodes/1/", "/episodes/search?q=%FF%FE", "/episodes/search?q=+", "/episodes/search?q=%2C%2C", "/episodes/search?q=" + "w" * 2000,
          "/episodes/search?q=coffee&limit=1000", f"/episodes/{2**63 - 1}", f"/episodes/{2**63}"]


def _litestar_alone(hot: HotRoutes, client, path: str):
    match, hot._match = hot._match, (lambda _path: None)  # every request handed on
    try:
        return client.get(path)
    finally:
        hot._match = match


@pytest.mark.parametrize("path", PLAIN + HANDED_ON + EITHER)
def test_every_answer_is_litestars_exact_answer(served, path):
    client, hot, inner, handed_on = served
    assert _answer(client.get(path)) == _answer(_litestar_alone(hot, client, path))


@pytest.mark.parametrize("path", PLAIN)
def test_a_plain_read_is_answered_by_the_hot_path(served, path):
    client, hot, inner, handed_on = served
    handed_on.clear()
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert handed_on == [], f"{path} was handed on"


@pytest.mark.parametrize("path", HANDED_ON)
def test_anything_else_is_handed_to_litestar_untouched(served, path):
    client, hot, inner, handed_on = served
    handed_on.clear()
    response = client.get(path)
    assert handed_on, f"{path} was answered by the hot path ({response.status_code})"
    assert 400 <= response.status_code < 500, (path, response.text)


@pytest.mark.parametrize("headers", [{"Origin": "https://app.example"}, {"X-Actor": "ops"}, {"X-Actor": "\t"}])
def test_cors_and_the_actor_header_stay_litestars(served, headers):
    client, hot, inner, handed_on = served
    handed_on.clear()
    response = client.get("/episodes/1", headers=headers)
    assert handed_on == ["/episodes/1"]
    if "Origin" in headers:
        assert response.headers["access-control-allow-origin"] == "https://app.example"


def test_head_is_answered_like_get_without_the_body(served):
    client, hot, inner, handed_on = served
    handed_on.clear()
    head, get = client.head("/episodes/search?q=coffee"), client.get("/episodes/search?q=coffee")
    assert handed_on == []
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))


def test_the_request_log_and_metrics_name_the_route(served):
    client, hot, inner, handed_on = served

    def count(route: str) -> float:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith("memory_http_requests_total{") and f'route="{route}"' in line and 'status="200"' in line \
                    and 'method="GET"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    for path, route in (("/episodes/2", "/episodes/{episode_id}"), ("/episodes/search?q=latte", "/episodes/search"),
                        ("/sessions/2/episodes", "/sessions/{session_id}/episodes")):
        before = count(route)
        handed_on.clear()
        assert client.get(path).status_code == 200 and handed_on == []
        assert count(route) == before + 1, route


# -- POST /episodes ---------------------------------------------------------------------------------
def _written(client) -> int:
    """How many episodes the store holds (both sessions)."""
    return sum(client.get(f"/sessions/{sid}/episodes").json()["total"] for sid in (1, 2))


def _without_identity(response) -> tuple:
    body = response.json()
    body.pop("id"), body.pop("createdAt")
    headers = sorted((k.lower(), v) for k, v in response.headers.items() if k.lower() not in VOLATILE | {"content-length"})
    return response.status_code, headers, body


def _post_alone(hot: HotRoutes, client, **kwargs):
    """POST /episodes with the hot path out of the way (Litestar alone)."""
    create, hot._create_body = hot._create_body, None  # no body is plain: every POST handed on
    try:
        return client.post("/episodes", **kwargs)
    finally:
        hot._create_body = create


PLAIN_BODIES = [
    {"sessionId": 1, "userMessage": "Zoë likes oat milk", "aiResponse": "noted"},
    {"sessionId": 2, "userMessage": "", "aiResponse": "only the reply", "tokenCount": 7, "metadata": {"topic": "x"}},
    {"sessionId": 1, "userMessage": "dated", "aiResponse": "r", "createdAt": "2026-01-02T03:04:05Z",
     "expiresAt": "2099-01-01T00:00:00+02:00"},
]


@pytest.mark.parametrize("body", PLAIN_BODIES)
def test_a_plain_post_is_written_once_by_the_hot_path_with_litestars_answer(served, body):
    client, hot, inner, handed_on = served
    woken, after_write = [], hot._after_write
    hot._after_write = lambda: (woken.append(1), after_write())
    try:
        before = _written(client)
        handed_on.clear()
        fast = client.post("/episodes", json=body)
        assert handed_on == [] and fast.status_code == 201, fast.text
        assert woken == [1]  # the embedding worker and the change feed are woken, as after Litestar's write
        assert _written(client) == before + 1  # one episode written
        assert client.get(f"/episodes/{fast.json()['id']}").json() == fast.json()
        slow = _post_alone(hot, client, json=body)
        assert _without_identity(fast) == _without_identity(slow)
    finally:
        hot._after_write = after_write


BAD_BODIES = [
    ("json", {"sessionId": 99, "userMessage": "u", "aiResponse": "a"}),  # no such session: 404
    ("json", {"sessionId": "1", "userMessage": "u", "aiResponse": "a"}),  # a number in a string
    ("json", {"sessionId": 1, "userMessage": "u", "aiResponse": "a", "extra": 1}),
    ("json", {"sessionId": 1, "userMessage": "", "aiResponse": " "}),  # both empty: the service's 400
    ("json", {"sessionId": 1, "userMessage": "u"}),
    ("json", {"sessionId": 1, "userMessage": "u", "aiResponse": "a", "createdAt": "yesterday"}),
    ("json", [1, 2]),
    ("content", b'{"sessionId": 1, "userMessage": "u", '),
    ("content", b""),
    ("content", b'{"sessionId": 1, "userMessage": "' + b"x" * 5000 + b'", "aiResponse": "a"}'),  # over max_body
]


@pytest.mark.parametrize(("kind", "body"), BAD_BODIES)
def test_a_post_that_is_not_plain_is_handed_on_and_writes_nothing(served, kind, body):
    client, hot, inner, handed_on = served
    headers = {"content-type": "application/json"}
    before = _written(client)
    handed_on.clear()
    fast = client.post("/episodes", headers=headers, **{kind: body})
    assert handed_on == ["/episodes"], fast.text
    slow = _post_alone(hot, client, headers=headers, **{kind: body})
    assert 400 <= fast.status_code < 500
    assert _answer(fast) == _answer(slow)
    assert _written(client) == before


@pytest.mark.parametrize(("path", "headers"), [("/episodes?x=1", {}), ("/episodes", {"X-Actor": "ops"}),
                                               ("/episodes/", {})])
def test_a_post_with_a_query_an_actor_or_another_path_is_litestars(served, path, headers):
    client, hot, inner, handed_on = served
    handed_on.clear()
    response = client.post(path, json=PLAIN_BODIES[0], headers=headers)
    assert handed_on == [path.split("?")[0]], response.text
    assert response.status_code == (400 if "?" in path else 201), response.text


@pytest.mark.parametrize(("method", "path", "body", "status", "call"), [
    ("GET", "/episodes/999", None, 404, "get"),
    ("GET", "/sessions/9/episodes", None, 404, "of_session"),
    ("GET", '/episodes/search?q=%22x&match=fts', None, 400, "search"),
    ("POST", "/episodes", {"sessionId": 99, "userMessage": "u", "aiResponse": "a"}, 404, "add"),
    ("POST", "/episodes", {"sessionId": 1, "userMessage": " ", "aiResponse": ""}, 400, "add"),
])
def test_a_request_the_service_refuses_is_answered_by_litestar_without_asking_the_service_again(
        served, monkeypatch, method, path, body, status, call):
    from domain.services import EpisodeService

    client, hot, inner, handed_on = served
    calls, original = [], getattr(EpisodeService, call)

    async def counted(self, *args, **kwargs):
        calls.append(call)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(EpisodeService, call, counted)
    handed_on.clear()
    response = client.request(method, path, json=body)
    assert response.status_code == status, response.text
    assert handed_on == [path.split("?")[0]]  # Litestar answered (its error shape, its checks)
    assert calls == [call]  # once: the hot path's call; Litestar raised its failure, did not call again
