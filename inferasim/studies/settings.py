"""Settings shared by the studies, the plots, the widgets and the figures.

The FAST'25 comparison's fleet (ten prefill nodes of 3M tokens of cache),
the capacity range of the hit-rate curves, the policies compared, and the
capacity grid they are evaluated on. Everything here is plain data or a
pure function: any layer above :mod:`inferasim.sim` may import it.

Examples
--------
>>> NODE_CACHE_TOKENS * FLEET_REPLICAS
30000000
>>> capacity_grid(1e4, 1e5, per_decade=1).tolist()
[20, 195]
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = [
    "TRACE_NAMES",
    "REQUIRED_TRACES",
    "CAPACITY_RANGE",
    "NODE_CACHE_TOKENS",
    "FLEET_REPLICAS",
    "POLICIES",
    "ROUTING_POLICIES",
    "PLACEMENTS",
    "SIZING_DEFAULTS",
    "QUICK_WINDOW_MS",
    "ci_mode",
    "capacity_grid",
    "curve_points",
]

#: The FAST'25 traces, in display order; the first two are required.
TRACE_NAMES: tuple[str, ...] = ("conversation", "synthetic", "toolagent")
REQUIRED_TRACES: tuple[str, ...] = ("conversation", "synthetic")
#: Capacity range of the hit-rate curves (tokens).
CAPACITY_RANGE: tuple[float, float] = (1e4, 1e8)
#: One prefill node's DRAM cache in the FAST'25 paper (tokens).
NODE_CACHE_TOKENS: int = 3_000_000
#: Prefill nodes in the FAST'25 local-vs-global comparison.
FLEET_REPLICAS: int = 10
#: Eviction policies of the hit-rate study (``opt`` is Belady's offline optimum).
POLICIES: tuple[str, ...] = ("lru", "fifo", "lfu", "opt")
#: Routing policies of the routing study (``longest_match``: no load term, collapses).
ROUTING_POLICIES: tuple[str, ...] = (
    "random",
    "least_loaded",
    "cache_aware",
    "longest_match",
    "kv_cost",
)
#: Request-to-cache placement rules of the local-vs-pooled replay.
PLACEMENTS: tuple[str, ...] = ("random", "round_robin", "hash_first_block")
#: Settings of the notebook-02 widget and the ``sizing_*`` figures.
SIZING_DEFAULTS: dict[str, Any] = {
    "capacity_tokens": NODE_CACHE_TOKENS,
    "policy": "lru",
    "replicas": 4,
    "routing": "kv_cost",
    "load": 1.0,
}
#: Slice of a trace simulated in quick mode (CI): its first 20 minutes.
QUICK_WINDOW_MS: float = 20 * 60_000


def ci_mode() -> bool:
    """True when the ``CI`` environment variable is set to a true value.

    Notebooks and the figure registry then simulate smaller slices.

    Examples
    --------
    >>> old = os.environ.pop("CI", None)
    >>> ci_mode()
    False
    >>> if old is not None: os.environ["CI"] = old
    """
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def capacity_grid(
    low: float = CAPACITY_RANGE[0],
    high: float = CAPACITY_RANGE[1],
    *,
    per_decade: int = 8,
    block_size: int = 512,
) -> np.ndarray:
    """Log-spaced cache capacities in blocks, covering ``[low, high]`` tokens.

    Parameters
    ----------
    low, high : float
        Range in tokens.
    per_decade : int, default 8
        Points per factor of ten.
    block_size : int, default 512
        Tokens per block.

    Returns
    -------
    numpy.ndarray
        Sorted unique ``int64`` capacities in blocks (at least 1).

    Examples
    --------
    1e4 tokens are 19.5 blocks of 512 (rounds to 20), 1e5 are 195.3 (195):

    >>> capacity_grid(1e4, 1e5, per_decade=1, block_size=512).tolist()
    [20, 195]
    """
    decades = np.log10(high) - np.log10(low)
    points = max(int(round(decades * per_decade)) + 1, 2)
    tokens = np.logspace(np.log10(low), np.log10(high), points)
    return np.unique(np.maximum(np.round(tokens / block_size), 1).astype(np.int64))


def curve_points(policy: str) -> int:
    """Capacities per decade of a hit-rate curve: dense for LRU (one pass), 4 for replays.

    LRU curves cost one pass whatever the number of points; the other
    policies replay the trace once per capacity.

    Examples
    --------
    >>> curve_points("lru"), curve_points("opt")
    (16, 4)
    """
    return 16 if policy == "lru" else 4
