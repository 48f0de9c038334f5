"""The built-in rankers as a plugin, registered by the plugin manager like any third-party one."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.rankers.builtin import (
    KeywordRanker,
    MmrRanker,
    RecencyRanker,
    RrfRanker,
    VectorRanker,
    WeightedRanker,
)
from adapters.rankers.conversation import ConversationRanker
from domain.ranking import RankerConfig
from ports.hookspecs import hookimpl
from ports.ranker import Ranker


@hookimpl
def nexusai_memory_register_rankers(config: RankerConfig) -> Sequence[Ranker]:
    return [
        ConversationRanker(config),
        RrfRanker(config),
        VectorRanker(),
        KeywordRanker(),
        WeightedRanker(config),
        RecencyRanker(config),
        MmrRanker(config),
    ]
