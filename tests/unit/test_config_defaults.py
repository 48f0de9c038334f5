"""Configuration defaults: the in-process model unless the seed's embedding service is named,
each embedder's own model and vector size, and make run's database for the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
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


# -- the README's configuration table, checked against the declarations in app.config ----------------
README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_rows() -> dict[str, str]:
    """Each variable the README's configuration table names -> the default it states (joined
    rows like ``A`` / ``B`` with defaults ``1`` / ``2`` give one entry per variable)."""
    text = README.read_text()
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if len(cells) < 3:
            continue
        names = re.findall(r"`([A-Z_*]+)`", cells[0])
        defaults = [d.strip() for d in cells[1].split(" / ")]
        for i, name in enumerate(names):
            rows[name] = defaults[i] if len(defaults) == len(names) else cells[1]
    return rows


# Unset in the struct, worked out when read (Settings.resolved_qdrant_path, model_name, the embedder).
COMPUTED = {"QDRANT_PATH": "`<SQLITE_PATH>.qdrant`", "EMBEDDING_MODEL": "`all-MiniLM-L6-v2` in process",
            "EMBEDDING_DIM": "the embedder's own"}


def _same_default(name: str, declared, stated: str) -> bool:
    if name in COMPUTED:
        return declared is None and stated.startswith(COMPUTED[name])
    if declared is None or declared == () or declared == {}:
        return stated.startswith("unset") or (name == "RANKER_*" and not stated)
    first = re.match(r"`([^`]*)`", stated)
    if first is None:
        return False
    value = first.group(1)
    if isinstance(declared, bool):
        return value == str(declared).lower()
    if isinstance(declared, (int, float)):
        return float(value) == declared
    return value == declared


def test_every_setting_has_a_readme_row_stating_its_default():
    rows = _readme_rows()
    for info in msgspec.inspect.type_info(Settings).fields:
        assert info.encode_name in rows, f"README configuration table has no row for {info.encode_name}"
        if info.required:
            continue  # SQLITE_PATH: the README says who requires it
        default = info.default_factory() if info.default is msgspec.NODEFAULT else info.default
        assert _same_default(info.encode_name, default, rows[info.encode_name]), (
            f"README states {rows[info.encode_name]!r} as the default of {info.encode_name}, the code {default!r}")


def test_the_readme_names_no_setting_the_code_does_not_read():
    declared = {info.encode_name for info in msgspec.inspect.type_info(Settings).fields}
    assert set(_readme_rows()) - declared == set()


@pytest.mark.parametrize(("variable", "value"), [("WEIGHTED_ALPHA", "1.5"), ("MMR_LAMBDA", "2"), ("PORT", "x"),
                                                 ("EMBEDDING_BATCH", "0"), ("STORE", "mysql"),
                                                 ("VECTOR_QUERY_TIMEOUT", "0")])
def test_a_bad_value_is_reported_under_its_own_variable(variable, value):
    with pytest.raises(ConfigError) as raised:
        _settings(**{variable: value})
    assert raised.value.variable == variable and str(raised.value).startswith(f"{variable}: must be")


@pytest.mark.parametrize("url", [None, "mysql://db/memory", "/var/lib/memory.db"])
def test_store_postgres_needs_a_postgresql_database_url(url) -> None:
    env = {"STORE": "postgres", **({"DATABASE_URL": url} if url else {})}
    with pytest.raises(ConfigError) as raised:
        load_settings(env=env, dotenv=None)
    assert raised.value.variable == "DATABASE_URL"


def test_store_postgres_needs_no_sqlite_path_and_masks_the_database_password() -> None:
    settings = load_settings(env={"STORE": "postgres", "DATABASE_URL": "postgresql://memory:s3cret@db:5432/memory"},
                             dotenv=None)
    assert settings.store == "postgres" and "s3cret" in settings.secrets
