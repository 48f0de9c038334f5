"""An in-process embedder whose model load a test holds back, to see the service while it loads."""

from __future__ import annotations

import threading

from adapters.embedders.local import LocalEmbedder


class GatedLocalEmbedder(LocalEmbedder):
    """The default embedder (the real packaged model), whose load waits until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__("all-MiniLM-L6-v2")
        self.gate = threading.Event()

    def _load(self, path: str):
        self.gate.wait(60)  # bounded: a test that forgets to open the gate still ends
        return super()._load(path)
