"""The pluggy plugin manager and the registry of the rankers its plugins provide.

Nothing here runs at import: the container calls ``get_plugin_manager()`` once at start-up and
builds a ``RankerRegistry`` from it; tests build their own, usually without entry points.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pluggy

from adapters.rankers import plugin as builtin_plugin
from domain.errors import Invalid
from domain.ranking import MAX_CONTEXT_WINDOW, RankedHit, RankerConfig, RankingRequest
from ports import hookspecs
from ports.ranker import Ranker

ENTRY_POINT_GROUP = hookspecs.PROJECT
BUILTIN_PLUGIN = "builtin"
RANKER_OPTION_PREFIX = "RANKER_"
RANKER_HOOK = "nexusai_memory_register_rankers"

logger = logging.getLogger(__name__)


class PluginError(Exception):
    """A plugin cannot be loaded or breaks the ranker contract; raised at start-up, never per request."""


def get_plugin_manager(*, load_entrypoints: bool = True) -> pluggy.PluginManager:
    """A new plugin manager: the hookspecs, the built-in rankers, and (if asked) installed plugins."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    manager.register(builtin_plugin, name=BUILTIN_PLUGIN)
    try:
        if load_entrypoints:
            manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        manager.check_pending()
    except (ImportError, ValueError, pluggy.PluginValidationError) as error:
        raise PluginError(f"loading plugins of entry-point group {ENTRY_POINT_GROUP!r} failed: {error}") from error
    return manager


def ranker_options(environ: Mapping[str, str]) -> dict[str, str]:
    """Options for third-party rankers from the environment: ``RANKER_MYPLUGIN_FOO=1`` -> ``{"myplugin_foo": "1"}``."""
    return {
        name[len(RANKER_OPTION_PREFIX) :].lower(): value
        for name, value in environ.items()
        if name.startswith(RANKER_OPTION_PREFIX) and len(name) > len(RANKER_OPTION_PREFIX)
    }


def ranker_plugins(manager: pluggy.PluginManager) -> list[tuple[str, object]]:
    """``(name, plugin)`` of every plugin implementing the ranker hook, in registration order
    (built-ins first), as the plugin manager reports it (``get_hookcallers``, as datasette lists plugins)."""
    hook = getattr(manager.hook, RANKER_HOOK)
    return [(name, plugin) for name, plugin in manager.list_name_plugin()
            if plugin is not None and any(caller is hook for caller in manager.get_hookcallers(plugin) or ())]


@dataclass(frozen=True, slots=True)
class RankerInfo:
    """What ``GET /rankers`` lists. ``plugin`` is the pluggy plugin name: ``builtin`` or the
    entry-point name; ``distribution`` is ``"<project> <version>"`` for entry-point plugins."""

    name: str
    description: str
    plugin: str
    distribution: str | None = None


class RankerRegistry:
    """The rankers of every registered plugin, by name; built once at start-up.

    Raises ``PluginError`` when a plugin returns something that is not a ranker or two plugins
    register the same name, so a broken installation fails before serving.
    """

    def __init__(self, manager: pluggy.PluginManager, config: RankerConfig) -> None:
        distributions = {
            id(plugin): f"{dist.project_name} {dist.version}" for plugin, dist in manager.list_plugin_distinfo()
        }
        self._rankers: dict[str, Ranker] = {}
        self._infos: dict[str, RankerInfo] = {}
        for name, plugin in ranker_plugins(manager):
            # The hook is called through pluggy, with keyword arguments, on a caller narrowed to this
            # one plugin: every ranker is then known to come from it (pluggy drops ``None`` answers).
            only_this = manager.subset_hook_caller(RANKER_HOOK, [p for p in manager.get_plugins() if p is not plugin])
            for provided in only_this(config=config):
                for ranker in _as_rankers(provided, name):
                    self._add(ranker, name, distributions.get(id(plugin)))

    def _add(self, ranker: Ranker, plugin: str, distribution: str | None) -> None:
        existing = self._infos.get(ranker.name)
        if existing is not None:
            raise PluginError(
                f"ranker {ranker.name!r} is registered twice: by plugin {existing.plugin!r} and by plugin {plugin!r}"
            )
        self._rankers[ranker.name] = _GuardedRanker(ranker)
        self._infos[ranker.name] = RankerInfo(ranker.name, ranker.description, plugin, distribution)

    def get(self, name: str, *, field: str = "ranker") -> Ranker:
        """The ranker called ``name``; ``Invalid`` naming the known ones otherwise.

        ``field`` names where the name came from: the request field, or ``DEFAULT_RANKER`` when the
        container checks its configuration at start-up.
        """
        ranker = self._rankers.get(name)
        if ranker is None:
            known = ", ".join(sorted(self._rankers))
            raise Invalid(f"unknown ranker {name!r}; known rankers: {known}", field=field)
        return ranker

    def names(self) -> list[str]:
        """Ranker names in registration order (built-ins first)."""
        return list(self._rankers)

    def describe(self) -> list[RankerInfo]:
        return list(self._infos.values())


def _as_rankers(provided: object, plugin: str) -> list[Ranker]:
    if provided is None:
        return []  # a plugin may decide, from its options, to register nothing
    if isinstance(provided, (str, bytes)) or not isinstance(provided, Sequence):
        raise PluginError(f"plugin {plugin!r} must return a list of rankers, not {type(provided).__name__}")
    for ranker in provided:
        name = getattr(ranker, "name", None)
        if not isinstance(name, str) or not name.strip():
            raise PluginError(f"plugin {plugin!r} returned a ranker without a name: {ranker!r}")
        if not isinstance(getattr(ranker, "description", None), str):
            raise PluginError(f"ranker {name!r} of plugin {plugin!r} has no description string")
        if not isinstance(getattr(ranker, "needs_vectors", None), bool):
            raise PluginError(f"ranker {name!r} of plugin {plugin!r} must say needs_vectors = True or False")
        window = getattr(ranker, "context_window", 0)
        if not isinstance(window, int) or isinstance(window, bool) or not 0 <= window <= MAX_CONTEXT_WINDOW:
            raise PluginError(
                f"ranker {name!r} of plugin {plugin!r}: context_window must be an int from 0 to {MAX_CONTEXT_WINDOW}"
            )
        if not callable(getattr(ranker, "rank", None)):
            raise PluginError(f"ranker {name!r} of plugin {plugin!r} has no rank(request) method")
    return list(provided)


class _GuardedRanker:
    """Holds every ranker to the port's contract at its one point of use.

    Plugins may answer their own hit objects (duck typing); this turns them into ``RankedHit`` and
    drops what the contract forbids (unknown or repeated keys, hits beyond the limit), so a buggy
    plugin gives a short answer and a warning instead of a 500.
    """

    __slots__ = ("_ranker", "_warned", "context_window", "description", "name", "needs_vectors")

    def __init__(self, ranker: Ranker) -> None:
        self._ranker = ranker
        self._warned = False
        self.name = ranker.name
        self.description = ranker.description
        self.needs_vectors = ranker.needs_vectors
        self.context_window = getattr(ranker, "context_window", 0)  # optional for plugins: 0 = none

    def rank(self, request: RankingRequest) -> Sequence[RankedHit]:
        hits: list[RankedHit] = []
        seen: set[tuple[str, int]] = set()
        broken = False
        for hit in self._ranker.rank(request):
            if len(hits) >= request.limit:
                broken = True
                break
            key = tuple(hit.key)
            if key in seen or key not in request.candidates:
                broken = True
                continue
            seen.add(key)  # type: ignore[arg-type]
            hits.append(RankedHit(key=key, score=float(hit.score)))  # type: ignore[arg-type]
        if broken and not self._warned:
            self._warned = True  # once per ranker: a broken plugin must not flood the log
            logger.warning(
                "ranker %r broke its contract (unknown, repeated or surplus hits); they were dropped", self.name
            )
        return hits

    def __repr__(self) -> str:
        return f"<ranker {self.name!r} {self._ranker!r}>"
