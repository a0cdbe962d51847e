"""Prefix-reuse analysis: what reuse a trace holds, before any simulator runs.

All functions take a :class:`~inferasim.workload.Workload` with hash ids and
return plain pandas objects with documented columns (units: blocks, tokens,
ms). The cache replay semantics (lookup of the leading run, then touch of
every block, tail-first by default) are stated once in
:mod:`inferasim.reuse.replay` and shared by every function.

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
from inferasim.reuse.replay import POLICIES, replay_cache

__all__ = [
    "POLICIES",
    "ReuseCeiling",
    "hit_rate_curve",
    "infinite_hit_ratio",
    "replay_cache",
]
