"""Fixtures shared by every test layer."""

from __future__ import annotations

import os

import pytest

from app.config import Settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def make_settings(tmp_path):
    """Settings for a throwaway service: a real SQLite file in tmp_path, the in-memory vector
    index and the fake embedder unless overridden."""

    def build(**overrides) -> Settings:
        values = dict(
            sqlite_path=str(tmp_path / "memory.db"), vector_index="memory", embedder="fake", embedding_dim=16,
            port=0,
        )
        values.update(overrides)
        return Settings(**values)

    return build
