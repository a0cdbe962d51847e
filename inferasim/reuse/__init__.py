"""Prefix-reuse analysis: what reuse a trace holds, before any simulator runs.

All functions take a :class:`~inferasim.workload.Workload` with hash ids and
return plain pandas objects with documented columns (units: blocks, tokens,
ms). The cache replay semantics (lookup of the leading run of cached ids,
then a touch of every block, tail-first by default; partial last blocks
count unless ``full_blocks_only=True``) are stated once in
:mod:`inferasim.reuse.replay` and shared by every function.

* :func:`hit_rate_curve`: hit ratio against capacity (LRU in one pass);
* :func:`replay_cache`: per-request hits of one cache (LRU, FIFO, LFU, OPT);
* :func:`infinite_hit_ratio`: the reuse ceiling;
* :func:`popularity`, :func:`reuse_distance`, :func:`prefix_tree`,
  :func:`sessions`: the structure of the reuse;
* :func:`partitioned_hit_rate`: local (split) versus global (pooled) caches,
  optionally backed by one shared pool;
* :func:`tiered_hit_rate`, :func:`replay_tiered`: the hits served by each
  tier of an LRU hierarchy (HBM, DRAM, SSD, ...), in one pass or replayed;
* :func:`replay_tiers`: a fleet's HBM and tiers under the tiers' write
  policies (evict or write-through, per replica or shared), the simulator's
  timing-free limit.

Examples
--------
>>> from inferasim import Workload
>>> from inferasim.reuse import hit_rate_curve, infinite_hit_ratio
>>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 3]])
>>> infinite_hit_ratio(wl).block_hit_ratio
0.25
>>> hit_rate_curve(wl, [1])["hit_blocks"].tolist()
[1]
"""

from __future__ import annotations

from inferasim.reuse.ceiling import ReuseCeiling, infinite_hit_ratio
from inferasim.reuse.curve import hit_rate_curve
from inferasim.reuse.distance import reuse_distance
from inferasim.reuse.partition import partitioned_hit_rate
from inferasim.reuse.policies import replay_tiers
from inferasim.reuse.popularity import Popularity, popularity
from inferasim.reuse.replay import POLICIES, replay_cache
from inferasim.reuse.sessions import Sessions, sessions
from inferasim.reuse.tiered import replay_tiered, tiered_hit_rate
from inferasim.reuse.tree import PrefixTree, prefix_tree

__all__ = [
    "POLICIES",
    "Popularity",
    "PrefixTree",
    "ReuseCeiling",
    "Sessions",
    "hit_rate_curve",
    "infinite_hit_ratio",
    "partitioned_hit_rate",
    "popularity",
    "prefix_tree",
    "replay_cache",
    "replay_tiered",
    "replay_tiers",
    "reuse_distance",
    "sessions",
    "tiered_hit_rate",
]
