"""Hook specifications of the ``nexusai_memory`` plugin project.

A plugin needs only ``pluggy.HookimplMarker("nexusai_memory")`` and functions named like the
specs below; ``hookimpl`` is exported here for the service's own plugins.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

from domain.ranking import RankerConfig
from ports.ranker import Ranker

PROJECT = "nexusai_memory"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def nexusai_memory_register_rankers(config: RankerConfig) -> Sequence[Ranker]:  # type: ignore[empty-body]
    """Return the rankers this plugin provides, built with the service's ranker settings."""
