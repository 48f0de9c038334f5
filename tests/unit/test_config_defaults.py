"""Configuration defaults: the in-process model unless the seed's embedding service is named,
each embedder's own model and vector size, and make run's database for the CLI."""

from __future__ import annotations

import pytest

from app.config import ConfigError, Settings, load_settings
from app.container import build_container


def _settings(**env: str):
    return load_settings({"SQLITE_PATH": ":memory:", **env}, dotenv=None)


def test_with_nothing_set_the_embedder_is_the_packaged_minilm_at_384():
    settings = _settings()
    embedder = build_container(settings).embedder()

    assert (settings.embedder, settings.model_name, settings.embedding_dim) == ("local", "all-MiniLM-L6-v2", None)
    assert (embedder.model, embedder.dimension) == ("all-MiniLM-L6-v2", 384)


def test_the_seeds_embedding_service_url_alone_selects_the_embedding_service_at_768():
    settings = _settings(EMBEDDING_SERVICE_URL="http://embedder.internal:3003")
    embedder = build_container(settings).embedder()

    assert (settings.embedder, settings.model_name) == ("embedding-service", "nomic-embed-text")
    assert embedder.dimension == 768


def test_an_explicit_embedder_wins_over_the_embedding_service_url():
    assert _settings(EMBEDDER="hash", EMBEDDING_SERVICE_URL="http://x:3003").embedder == "hash"


@pytest.mark.parametrize(("embedder", "dimension"), [("ollama", 768), ("openai", 768), ("hash", 768)])
def test_served_and_hashing_embedders_default_to_nomic_embed_texts_768(embedder, dimension):
    assert build_container(_settings(EMBEDDER=embedder)).embedder().dimension == dimension


def test_embedding_dim_overrides_any_default():
    assert build_container(_settings(EMBEDDER="ollama", EMBEDDING_DIM="1024")).embedder().dimension == 1024


def test_sqlite_path_is_required_unless_a_default_is_given():
    with pytest.raises(ConfigError, match="SQLITE_PATH"):
        load_settings({}, dotenv=None)
    assert load_settings({}, dotenv=None, default_sqlite_path="./data/memory.db").sqlite_path == "./data/memory.db"
    assert load_settings({"SQLITE_PATH": "a.db"}, dotenv=None, default_sqlite_path="b.db").sqlite_path == "a.db"


@pytest.mark.parametrize(("variable", "value"), [("WEIGHTED_ALPHA", "1.5"), ("MMR_LAMBDA", "2"), ("PORT", "x"),
                                                 ("EMBEDDING_BATCH", "0"), ("STORE", "postgres"),
                                                 ("WORKERS", "-1")])
def test_a_bad_value_is_reported_under_its_own_variable(variable, value):
    with pytest.raises(ConfigError) as raised:
        _settings(**{variable: value})
    assert raised.value.variable == variable and str(raised.value).startswith(f"{variable}: must be")
