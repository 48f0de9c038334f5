"""Hook specifications of the ``nexusai_memory`` plugin project.

A plugin needs only ``pluggy.HookimplMarker("nexusai_memory")`` and functions named like the
specs below; ``hookimpl`` is exported here for the service's own plugins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pluggy

from domain.ranking import RankerConfig
from ports.ranker import Ranker
from ports.reranker import Reranker

PROJECT = "nexusai_memory"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def nexusai_memory_register_rankers(config: RankerConfig) -> Sequence[Ranker]:  # type: ignore[empty-body]
    """Return the rankers this plugin provides, built with the service's ranker settings."""


@hookspec(firstresult=True)
def nexusai_memory_reranker(options: Mapping[str, str]) -> Reranker | None:  # type: ignore[empty-body]
    """Return a reranker to reorder search hits, or None; the first plugin answering wins, and a
    configured ``RERANKER_URL`` comes before any plugin. ``options`` are the ``RANKER_*`` settings."""
