"""Build a Qdrant Edge shard's indexes in a process of its own: ``python -m adapters.qdrant.edge_optimize PATH``.

``QdrantEdgeIndex`` runs this for large shards, because the engine holds the GIL while it builds
HNSW graphs and would otherwise freeze the service's event loop for the whole build.
"""

from __future__ import annotations

import sys

import qdrant_edge as qe


def main(path: str) -> int:
    shard = qe.EdgeShard.load(path)
    try:
        shard.optimize()
        shard.flush()
    finally:
        shard.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
