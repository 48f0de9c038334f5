"""bench/peer.py without its POST row (the session page and keyword search rows only): what a read costs on
the corpus alone, with no index build triggered by the POSTs running beside it. Usage: python THIS [workers]."""
import sys, argparse, json
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "bench"))
import peer
peer.ROUTES = [r for r in peer.ROUTES if "search" in r[0] or "sessions" in r[0]]
args = argparse.Namespace(duration=5, rounds=2, workers=int(sys.argv[1]) if len(sys.argv) > 1 else 1)
from run import ensure_wrk
res = peer.peer_comparison(args, ensure_wrk())
print(res["table"])
