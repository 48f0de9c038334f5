"""Map + encode of one episode and a page of 20 episodes: the round-2 hand mappers vs msgspec.convert (wire()).

Usage: git show dd2d8ae:app/schemas.py > /tmp/old_schemas.py && .venv/bin/python docs/notes/round-3/12c_bench_mapping.py /tmp/old_schemas.py
"""
import importlib.util, sys, timeit
import msgspec
sys.path.insert(0, ".")
from domain.models import Episode, Page
spec = importlib.util.spec_from_file_location("old_schemas", sys.argv[1])
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
import app.schemas as new
eps = [Episode(id=i, session_id=1, user_message="hello there " * 10, ai_response="a reply " * 20, token_count=None,
               metadata={} if i % 2 else {"channel": "web"}, created_at="2025-01-01T00:00:00.000Z") for i in range(1, 21)]
page = Page(items=eps, total=100, limit=20, offset=0)
enc = msgspec.json.Encoder()
assert enc.encode(old.episode_page(page)) == enc.encode(new.wire(page, new.EpisodePage))
assert enc.encode(old.episode_out(eps[0])) == enc.encode(new.wire(eps[0], new.EpisodeOut))
n = 2000
cases = [("old page of 20 ", lambda: enc.encode(old.episode_page(page))),
         ("new page of 20 (wire)", lambda: enc.encode(new.wire(page, new.EpisodePage))),
         ("old one episode", lambda: enc.encode(old.episode_out(eps[0]))),
         ("new one episode (wire)", lambda: enc.encode(new.wire(eps[0], new.EpisodeOut))),
         ("new one episode (episode_out)", lambda: enc.encode(new.episode_out(eps[0])))]
best = {label: float("inf") for label, _ in cases}
for _ in range(40):  # interleaved, best of 40: the machine is shared
    for label, fn in cases:
        best[label] = min(best[label], timeit.timeit(fn, number=n) / n * 1e6)
for label, us in best.items():
    print(f"{label}: {us:.2f} us (map + encode)")
