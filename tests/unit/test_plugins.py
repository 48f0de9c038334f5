"""The plugin manager, the ranker registry, and discovery of a third-party ranker by entry point."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pluggy
import pytest

from app.plugins import PluginError, RankerInfo, RankerRegistry, get_plugin_manager, ranker_options
from domain.errors import Invalid
from domain.models import Episode
from domain.ranking import Candidate, Key, LegHit, RankedHit, RankerConfig, RankingRequest
from ports import hookspecs

BUILTIN_NAMES = ["conversation", "rrf", "vector", "keyword", "weighted", "recency", "mmr"]
NOW = datetime(2026, 3, 1, tzinfo=UTC)

hookimpl = pluggy.HookimplMarker("nexusai_memory")  # what a plugin author writes


def ranking_request(vector: Sequence[Key], keyword: Sequence[Key], *, limit: int = 10) -> RankingRequest:
    keys = sorted({*vector, *keyword})
    candidates = {
        key: Candidate(key, Episode(key[1], 1, "u", "a", None, {}, "2026-03-01T00:00:00.000Z"), NOW) for key in keys
    }
    return RankingRequest(
        query="q",
        query_vector=None,
        vector_hits=[LegHit(key, 1.0 / rank, rank) for rank, key in enumerate(vector, start=1)],
        keyword_hits=[LegHit(key, 10.0 / rank, rank) for rank, key in enumerate(keyword, start=1)],
        candidates=candidates,
        limit=limit,
        now=NOW,
    )


class FixedRanker:
    """A hand-written ranker answering a fixed list of hits, contract-breaking ones included."""

    needs_vectors = False

    def __init__(self, name: str, hits: Sequence[object] = ()) -> None:
        self.name = name
        self.description = f"answers {len(hits)} fixed hits"
        self._hits = list(hits)

    def rank(self, request: RankingRequest) -> Sequence[object]:
        return self._hits


class Provides:
    """A plugin object registering the given rankers."""

    def __init__(self, *rankers: object) -> None:
        self._rankers = list(rankers)

    @hookimpl
    def nexusai_memory_register_rankers(self, config: RankerConfig) -> list[object]:
        return self._rankers


def registry_with(*plugins: tuple[str, object]) -> RankerRegistry:
    manager = get_plugin_manager(load_entrypoints=False)
    for name, plugin in plugins:
        manager.register(plugin, name=name)
    return RankerRegistry(manager, RankerConfig())


# ---- manager and hookspecs ----------------------------------------------------------------------


def test_the_plugin_manager_registers_the_built_ins_as_the_builtin_plugin() -> None:
    manager = get_plugin_manager(load_entrypoints=False)
    assert manager.has_plugin("builtin")
    registry = RankerRegistry(manager, RankerConfig())
    assert registry.names() == BUILTIN_NAMES
    assert {info.plugin for info in registry.describe()} == {"builtin"}
    assert all(info.distribution is None and info.description for info in registry.describe())


def test_each_call_builds_a_new_plugin_manager() -> None:
    first, second = get_plugin_manager(load_entrypoints=False), get_plugin_manager(load_entrypoints=False)
    first.register(Provides(FixedRanker("only-in-first")), name="extra")
    assert "only-in-first" not in RankerRegistry(second, RankerConfig()).names()


def test_every_hookspec_is_documented() -> None:
    specs = [
        value
        for name, value in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("nexusai_memory_")
    ]
    assert specs, "no hookspecs found"
    for spec in specs:
        assert hasattr(spec, "nexusai_memory_spec"), f"{spec.__name__} is not marked as a hookspec"
        assert (spec.__doc__ or "").strip(), f"hookspec {spec.__name__} has no docstring"


def test_every_hookspec_is_explained_in_the_plugin_guide() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    for name, _ in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith("nexusai_memory_"):
            assert name in guide, f"hookspec {name} is missing from the plugin guide, docs/plugins.md"


def test_every_hook_of_the_manager_has_a_spec() -> None:
    manager = get_plugin_manager(load_entrypoints=False)
    names = [name for name in vars(manager.hook) if not name.startswith("_")]
    assert sorted(names) == ["nexusai_memory_register_rankers", "nexusai_memory_reranker"]
    assert all(getattr(manager.hook, name).spec is not None for name in names)


def test_a_plugin_with_a_misspelt_hook_fails_at_start_up() -> None:
    class Misspelt:
        @hookimpl
        def nexusai_memory_register_ranker(self, config: RankerConfig) -> list[object]:
            return []

    manager = get_plugin_manager(load_entrypoints=False)
    manager.register(Misspelt(), name="misspelt")
    with pytest.raises(pluggy.PluginValidationError, match="nexusai_memory_register_ranker"):
        manager.check_pending()


def test_the_config_reaches_the_plugin() -> None:
    seen: list[RankerConfig] = []

    class Recording:
        @hookimpl
        def nexusai_memory_register_rankers(self, config: RankerConfig) -> list[object]:
            seen.append(config)
            return []

    manager = get_plugin_manager(load_entrypoints=False)
    manager.register(Recording(), name="recording")
    config = RankerConfig(rrf_k=10, options={"recording_foo": "bar"})
    RankerRegistry(manager, config)
    assert seen == [config]


def test_ranker_options_come_from_ranker_prefixed_variables() -> None:
    environ = {"RANKER_MYPLUGIN_FOO": "1", "RANKER_": "ignored", "DEFAULT_RANKER": "rrf", "PORT": "3002"}
    assert ranker_options(environ) == {"myplugin_foo": "1"}


# ---- registry -----------------------------------------------------------------------------------


def test_an_unknown_ranker_is_invalid_and_names_the_known_ones() -> None:
    registry = registry_with()
    with pytest.raises(Invalid) as raised:
        registry.get("bm42")
    assert raised.value.field == "ranker"
    assert "'bm42'" in raised.value.message
    assert all(name in raised.value.message for name in BUILTIN_NAMES)


def test_an_unknown_default_ranker_names_the_setting() -> None:
    with pytest.raises(Invalid) as raised:
        registry_with().get("bm42", field="DEFAULT_RANKER")
    assert raised.value.field == "DEFAULT_RANKER"


def test_a_ranker_name_registered_by_two_plugins_is_rejected_at_start_up() -> None:
    with pytest.raises(PluginError, match=r"'rrf'.*'builtin'.*'impostor'"):
        registry_with(("impostor", Provides(FixedRanker("rrf"))))


def test_two_rankers_of_one_plugin_with_one_name_are_rejected() -> None:
    with pytest.raises(PluginError, match="'twin'"):
        registry_with(("twins", Provides(FixedRanker("twin"), FixedRanker("twin"))))


def test_a_plugin_returning_something_other_than_rankers_is_rejected() -> None:
    with pytest.raises(PluginError, match="'broken'"):
        registry_with(("broken", Provides(SimpleNamespace(name="half", description="no rank", needs_vectors=False))))


@pytest.mark.parametrize("window", [-1, 4, 1.5, True, "1"])
def test_a_context_window_outside_zero_to_three_is_rejected_naming_the_ranker(window: object) -> None:
    ranker = FixedRanker("nosy")
    ranker.context_window = window  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match="'nosy'.*context_window"):
        registry_with(("nosy", Provides(ranker)))


def test_a_ranker_without_a_context_window_asks_for_none() -> None:
    registry = registry_with(("acme", Provides(FixedRanker("acme-first"))))
    assert registry.get("acme-first").context_window == 0


def test_a_plugin_may_register_no_rankers() -> None:
    class Silent:
        @hookimpl
        def nexusai_memory_register_rankers(self, config: RankerConfig) -> None:
            return None

    assert registry_with(("silent", Silent())).names() == BUILTIN_NAMES


def test_a_third_party_ranker_is_listed_with_its_plugin() -> None:
    registry = registry_with(("acme", Provides(FixedRanker("acme-first"))))
    assert registry.describe()[-1] == RankerInfo("acme-first", "answers 0 fixed hits", "acme", None)
    assert registry.get("acme-first").name == "acme-first"


def test_a_contract_breaking_ranker_is_trimmed_to_the_contract() -> None:
    hits = [
        SimpleNamespace(key=["episodes", 2], score=3),  # a list key and an int score: normalised
        SimpleNamespace(key=("episodes", 2), score=2.0),  # repeated
        SimpleNamespace(key=("episodes", 404), score=1.5),  # not a candidate
        SimpleNamespace(key=("episodes", 1), score=1.0),
        SimpleNamespace(key=("episodes", 3), score=0.5),  # beyond the limit
    ]
    ranker = registry_with(("sloppy", Provides(FixedRanker("sloppy", hits)))).get("sloppy")
    ranked = ranker.rank(ranking_request([("episodes", 1), ("episodes", 2), ("episodes", 3)], [], limit=2))
    assert ranked == [RankedHit(("episodes", 2), 3.0), RankedHit(("episodes", 1), 1.0)]


def test_the_registry_ranks_with_the_built_ins() -> None:
    ranked = registry_with().get("rrf").rank(ranking_request([("episodes", 1)], [("episodes", 2), ("episodes", 1)]))
    assert [hit.key for hit in ranked] == [("episodes", 1), ("episodes", 2)]


# ---- the example plugin, installed and found through its entry point ----------------------------


def test_the_example_plugin_is_not_found_unless_installed() -> None:
    assert "keyword-first" not in RankerRegistry(get_plugin_manager(load_entrypoints=True), RankerConfig()).names()


def test_the_example_plugin_is_discovered_through_its_entry_point(installed_example: Path) -> None:
    manager = get_plugin_manager(load_entrypoints=True)
    assert manager.has_plugin("keyword_first")
    plugin = manager.get_plugin("keyword_first")
    assert Path(plugin.__file__).is_relative_to(installed_example)

    registry = RankerRegistry(manager, RankerConfig())
    assert registry.names()[: len(BUILTIN_NAMES)] == BUILTIN_NAMES
    info = {info.name: info for info in registry.describe()}["keyword-first"]
    assert info.plugin == "keyword_first"
    assert info.distribution == "nexusai-memory-keyword-first 0.1.0"

    ranked = registry.get("keyword-first").rank(
        ranking_request(vector=[("episodes", 3), ("episodes", 1)], keyword=[("episodes", 2), ("episodes", 1)])
    )
    # Keyword hits first in keyword order, then what only the vector leg found.
    assert [hit.key for hit in ranked] == [("episodes", 2), ("episodes", 1), ("episodes", 3)]
    assert all(isinstance(hit, RankedHit) for hit in ranked)
    assert [hit.score for hit in ranked] == pytest.approx([1.0, 1 / 2, 1 / 3])


def test_entry_points_are_skipped_when_not_asked_for(installed_example: Path) -> None:
    manager = get_plugin_manager(load_entrypoints=False)
    assert not manager.has_plugin("keyword_first")
