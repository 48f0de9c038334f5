"""A BERT sentence encoder in plain numpy: the forward pass of a sentence-transformers model made
of a BERT encoder, mean pooling and L2 normalisation (all-MiniLM-L6-v2 and its kin).

It reads what a sentence-transformers model directory already holds: ``config.json``,
``model.safetensors`` (through the ``safetensors`` package) and ``tokenizer.json`` (through
Hugging Face's Rust ``tokenizers``). No torch: the whole runtime is numpy's BLAS, which keeps the
default install small and the start-up quick; ``README.md`` has the measurements behind the choice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np

DEFAULT_MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 128 and ships 256; ST truncates there


class UnsupportedModel(ValueError):
    """The directory holds something this encoder cannot run (another architecture, pooling)."""


def model_dimension(model_dir: str | Path) -> int:
    """The size of the vectors the model in ``model_dir`` makes, read from its config only."""
    return int(_config(Path(model_dir))["hidden_size"])


def _config(model_dir: Path) -> dict:
    path = model_dir / "config.json"
    if not path.is_file():
        raise UnsupportedModel(f"{model_dir} has no config.json (not a Hugging Face model directory)")
    return json.loads(path.read_text(encoding="utf-8"))


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's GELU is the erf form; numpy has no erf, and a polynomial erf costs 8x the tanh form
    # in elementwise passes. The tanh form differs by < 5e-4 per activation, which moves the
    # final embeddings by a cosine of < 3e-6 (measured on 256 LoCoMo texts): far inside the
    # 0.999 parity the tests hold against sentence-transformers.
    inner = x * x
    inner *= np.float32(0.044715)
    inner += 1.0
    inner *= x
    inner *= np.float32(math.sqrt(2.0 / math.pi))
    np.tanh(inner, out=inner)
    inner += 1.0
    inner *= x
    inner *= 0.5
    return inner


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(variance + eps) * weight + bias


class BertSentenceEncoder:
    """Encode texts into L2-normalised, mean-pooled BERT embeddings (float32, one row per text).

    Thread-safe for concurrent ``encode`` calls: it holds only read-only arrays after loading.
    """

    def __init__(self, model_dir: str | Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        config = _config(model_dir)
        if config.get("model_type") != "bert" or config.get("position_embedding_type", "absolute") != "absolute":
            raise UnsupportedModel(
                f"{model_dir} is a {config.get('model_type')!r} model; the numpy runtime runs BERT "
                "encoders only (use EMBEDDER=sentence-transformers for other architectures)"
            )
        if config.get("hidden_act", "gelu") != "gelu":
            raise UnsupportedModel(f"{model_dir}: activation {config.get('hidden_act')!r} is not supported")
        self._check_pooling(model_dir)
        weights_path = model_dir / "model.safetensors"
        if not weights_path.is_file():
            raise UnsupportedModel(f"{model_dir} has no model.safetensors")
        self.dimension = int(config["hidden_size"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._max_tokens = min(self._max_seq_length(model_dir), int(config["max_position_embeddings"]))
        weights = {key.removeprefix("bert."): value for key, value in load_file(str(weights_path)).items()}
        self._embeddings = {
            name: weights[f"embeddings.{name}"].astype(np.float32)
            for name in ("position_embeddings.weight", "token_type_embeddings.weight",
                         "LayerNorm.weight", "LayerNorm.bias")
        }
        # The vocabulary table is most of the model (30522 x 384: 45 MB in float32) and a pass reads
        # only the rows of its tokens: it is kept in float16 (half the resident memory) and only
        # the rows looked up are widened. Rounding to float16 (< 5e-4 relative) moved the embeddings
        # by a cosine of < 1e-6 on the parity texts, far inside the 0.999 held against sentence-transformers.
        self._words = weights["embeddings.word_embeddings.weight"].astype(np.float16)
        self._layers = [self._layer(weights, n) for n in range(int(config["num_hidden_layers"]))]
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=self._max_tokens)
        self._tokenizer.no_padding()

    @staticmethod
    def _check_pooling(model_dir: Path) -> None:
        pooling = model_dir / "1_Pooling" / "config.json"
        if pooling.is_file():
            modes = {k: v for k, v in json.loads(pooling.read_text(encoding="utf-8")).items()
                     if k.startswith("pooling_mode") and v}
            if set(modes) != {"pooling_mode_mean_tokens"}:
                raise UnsupportedModel(f"{model_dir}: pooling {sorted(modes)} is not supported (mean only)")

    @staticmethod
    def _max_seq_length(model_dir: Path) -> int:
        path = model_dir / "sentence_bert_config.json"
        if path.is_file():
            return int(json.loads(path.read_text(encoding="utf-8")).get("max_seq_length", DEFAULT_MAX_TOKENS))
        return DEFAULT_MAX_TOKENS

    @staticmethod
    def _layer(weights: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
        prefix = f"encoder.layer.{n}."
        get = lambda name: weights[prefix + name].astype(np.float32)  # noqa: E731
        # Q, K and V in one matrix: one BLAS call instead of three. Weights are stored (out, in);
        # transposed once here so every matmul reads them row-major.
        qkv = np.concatenate([get(f"attention.self.{p}.weight") for p in ("query", "key", "value")])
        return {
            "qkv_w": np.ascontiguousarray(qkv.T),
            "qkv_b": np.concatenate([get(f"attention.self.{p}.bias") for p in ("query", "key", "value")]),
            "out_w": np.ascontiguousarray(get("attention.output.dense.weight").T),
            "out_b": get("attention.output.dense.bias"),
            "ln1_w": get("attention.output.LayerNorm.weight"), "ln1_b": get("attention.output.LayerNorm.bias"),
            "in_w": np.ascontiguousarray(get("intermediate.dense.weight").T), "in_b": get("intermediate.dense.bias"),
            "ff_w": np.ascontiguousarray(get("output.dense.weight").T), "ff_b": get("output.dense.bias"),
            "ln2_w": get("output.LayerNorm.weight"), "ln2_b": get("output.LayerNorm.bias"),
        }

    def encode(self, texts: Sequence[str], batch_size: int = 32,
               turn: Callable[[], AbstractContextManager] = nullcontext, turn_tokens: int | None = None) -> np.ndarray:
        """One unit-length float32 row per text, in the order given. Each forward pass runs inside
        ``turn()`` (the caller's lane: a query may go between two of them); ``turn_tokens`` caps a
        pass at that many padded tokens (fewer texts per pass when they are long), so the wait
        between two turns stays short whatever the texts' length."""
        encodings = self._tokenizer.encode_batch(list(texts))
        # Batches of similar length waste little work on padding (sentence-transformers does the same).
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(encodings), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            longest = max(len(encodings[i].ids) for i in chosen)
            step = max(1, turn_tokens // longest) if turn_tokens else len(chosen)
            for first in range(0, len(chosen), step):
                part = chosen[first : first + step]
                with turn():
                    out[part] = self._forward([encodings[i].ids for i in part])
        return out

    def _forward(self, token_ids: list[list[int]]) -> np.ndarray:
        batch, length = len(token_ids), max(len(ids) for ids in token_ids)
        ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, row_ids in enumerate(token_ids):
            ids[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1.0
        emb = self._embeddings
        x = (self._words[ids].astype(np.float32) + emb["position_embeddings.weight"][:length]
             + emb["token_type_embeddings.weight"][0])
        x = _layer_norm(x, emb["LayerNorm.weight"], emb["LayerNorm.bias"], self._eps)
        # Padded keys get a large negative score, so they take no attention weight.
        attention_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self._layers:
            x = self._encoder_layer(x, layer, attention_bias)
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def _encoder_layer(self, x: np.ndarray, w: dict[str, np.ndarray], attention_bias: np.ndarray) -> np.ndarray:
        batch, length, hidden = x.shape
        head_size = hidden // self._heads
        flat = x.reshape(batch * length, hidden)  # one large GEMM per projection, not one per text
        qkv = (flat @ w["qkv_w"] + w["qkv_b"]).reshape(batch, length, 3, self._heads, head_size)
        # Contiguous (batch, heads, length, head) blocks: numpy's stacked matmul only reaches BLAS
        # for contiguous operands, and is ~100x slower on strided views.
        q, k, v = (np.ascontiguousarray(qkv[:, :, i].transpose(0, 2, 1, 3)) for i in range(3))
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / math.sqrt(head_size)) + attention_bias
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
        attended = _layer_norm(context @ w["out_w"] + w["out_b"] + flat, w["ln1_w"], w["ln1_b"], self._eps)
        intermediate = _gelu(attended @ w["in_w"] + w["in_b"])
        out = _layer_norm(intermediate @ w["ff_w"] + w["ff_b"] + attended, w["ln2_w"], w["ln2_b"], self._eps)
        return out.reshape(batch, length, hidden)
