"""Hit rate against cache capacity, per trace and eviction policy.

:func:`hit_rate_vs_capacity` is the study (a grid of (trace, policy) curves,
each one :func:`policy_curve` call); :func:`at_capacity` reads one capacity
off its frame. The curves of LRU cost one pass over the trace whatever the
number of capacities; FIFO, LFU and the offline optimum replay the trace
once per capacity (compiled loops when numba is installed, see
:mod:`inferasim.reuse._kernels`).

Examples
--------
r0 [1,2], r1 [1,3], r2 [1,2] of 1024 tokens. Touches go tail-first, so
block 1 is always on top: r1 and r2 hit it with one block of cache (1024 of
3072 tokens); r2 finds block 2 at depth 3 (under 1 and 3), so from three
blocks on it hits too (1536 tokens).

>>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
>>> hr = hit_rate_vs_capacity({"t": wl}, ["lru"], low=512, high=2048, also_tokens=())
>>> hr[["capacity_blocks", "token_hit_ratio"]].round(3).values.tolist()
[[1.0, 0.333], [2.0, 0.333], [3.0, 0.5], [4.0, 0.5]]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor

import numpy as np
import pandas as pd

from inferasim import reuse
from inferasim.reuse import _kernels
from inferasim.reuse._refs import block_refs
from inferasim.reuse._result import check_capacity
from inferasim.reuse.curve import curve_frame, replayed_hits
from inferasim.studies._run import named
from inferasim.studies.settings import (
    CAPACITY_RANGE,
    NODE_CACHE_TOKENS,
    POLICIES,
    capacity_grid,
    curve_points,
)
from inferasim.workload import Workload

__all__ = ["policy_curve", "hit_rate_vs_capacity", "at_capacity", "CURVE_COLUMNS"]

#: Columns of :func:`hit_rate_vs_capacity`.
CURVE_COLUMNS: tuple[str, ...] = (
    "trace",
    "policy",
    "capacity_blocks",
    "capacity_tokens",
    "block_hit_ratio",
    "token_hit_ratio",
)
# Policies whose hit ratio never falls as the cache grows (stack algorithms):
# once one reaches the infinite-cache ceiling, every larger capacity does too.
_MONOTONE = ("lru", "opt")


def policy_curve(
    wl: Workload, capacities_blocks: Iterable[int], policy: str, *, stop_at_ceiling: bool = True
) -> pd.DataFrame:
    """Hit ratio of one cache at each capacity (blocks) under ``policy``.

    :func:`inferasim.reuse.hit_rate_curve` with two shortcuts that leave the
    numbers unchanged: a capacity at or above the working set (the distinct
    blocks) never evicts and is computed at the working set; and for the
    stack policies (LRU and the offline optimum, whose hit ratio cannot fall
    as the cache grows) the replay stops at the first capacity that reaches
    the infinite-cache ceiling, and the larger ones get the ceiling.

    Parameters
    ----------
    wl : Workload
    capacities_blocks : iterable of int
        Capacities in blocks of ``wl.block_size``.
    policy : {"lru", "fifo", "lfu", "opt"}
    stop_at_ceiling : bool, default True
        Use the second shortcut (``False`` replays every capacity).

    Returns
    -------
    pandas.DataFrame
        ``capacity_blocks``, ``capacity_tokens``, ``block_hit_ratio``,
        ``token_hit_ratio``, one row per distinct capacity, ascending.

    Examples
    --------
    Request 1 repeats request 0's two blocks. Touches go tail-first, so the
    head block is the most recent: one block of cache keeps it (1 of 4
    block references hit), two blocks keep both (2 of 4).

    >>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 2]])
    >>> policy_curve(wl, [1, 2, 50], "opt")["block_hit_ratio"].tolist()
    [0.25, 0.5, 0.5]
    """
    requested = np.unique(
        np.array([check_capacity(c, "every capacity") for c in capacities_blocks], dtype=np.int64)
    )
    refs = block_refs(wl)
    working_set = max(refs.n_unique, 1)
    effective = np.unique(np.minimum(requested, working_set))
    cols = ["capacity_blocks", "block_hit_ratio", "token_hit_ratio"]
    if policy == "lru":
        curve = reuse.hit_rate_curve(wl, effective, policy=policy, unit="blocks")[cols]
    else:
        reuse.replay.check_policy(policy)
        stop = None
        if stop_at_ceiling and policy in _MONOTONE:
            # the first capacity whose block hits reach the infinite cache's
            stop = int(reuse.infinite_hit_ratio(wl).hit_blocks)
        blocks, tokens = replayed_hits(refs, effective, policy, stop_at_blocks=stop)
        curve = curve_frame(refs, effective, blocks, tokens, policy)[cols]
    curve = curve.set_index("capacity_blocks").loc[np.minimum(requested, working_set)]
    return pd.DataFrame(
        {
            "capacity_blocks": requested,
            "capacity_tokens": requested * wl.block_size,
            "block_hit_ratio": curve["block_hit_ratio"].to_numpy(dtype=float),
            "token_hit_ratio": curve["token_hit_ratio"].to_numpy(dtype=float),
        }
    )


def hit_rate_vs_capacity(
    workloads: Workload | Mapping[str, Workload],
    policies: Sequence[str] = POLICIES,
    *,
    low: float = CAPACITY_RANGE[0],
    high: float = CAPACITY_RANGE[1],
    per_decade: int | None = None,
    replay_per_decade: int | None = None,
    also_tokens: Iterable[float] = (NODE_CACHE_TOKENS,),
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Hit ratio of one cache against its capacity, per trace and eviction policy.

    Parameters
    ----------
    workloads : Workload or mapping of str to Workload
    policies : sequence of str, default ("lru", "fifo", "lfu", "opt")
    low, high : float, default 1e4, 1e8
        Capacity range in tokens (log-spaced grid, :func:`capacity_grid`).
    per_decade : int, optional
        Capacities per decade of the LRU curve (one pass at any density);
        default :func:`curve_points` (16).
    replay_per_decade : int, optional
        Capacities per decade of the replayed policies (one replay each);
        default :func:`curve_points` (4).
    also_tokens : iterable of float, default (3e6,)
        Capacities (tokens) added to every curve, so :func:`at_capacity`
        reads them exactly.
    executor : concurrent.futures.Executor, optional
        Run the (trace, policy) curves on it (e.g. a ``ProcessPoolExecutor``)
        when the replays run in Python; with the compiled kernels (numba
        installed) the whole study takes about a second and stays in this
        process. Same numbers either way.

    Returns
    -------
    pandas.DataFrame
        One row per (trace, policy, capacity): ``trace``, ``policy``,
        ``capacity_blocks``, ``capacity_tokens``, ``block_hit_ratio``,
        ``token_hit_ratio``.

    Examples
    --------
    >>> wl = Workload.from_synthetic(100, rate=10.0, input_len=2048, output_len=4,
    ...                              num_prefixes=8, prefix_len=1024, seed=0)
    >>> hr = hit_rate_vs_capacity(wl, ["lru", "fifo"], low=512, high=1e5, also_tokens=())
    >>> sorted(hr["policy"].unique()), bool(hr["token_hit_ratio"].between(0, 1).all())
    (['fifo', 'lru'], True)
    """
    extra = np.asarray(list(also_tokens), dtype=float)
    tasks = []
    for name, wl in named(workloads).items():
        for policy in policies:
            points = per_decade if policy == "lru" else replay_per_decade
            grid = capacity_grid(
                low, high, per_decade=points or curve_points(policy), block_size=wl.block_size
            )
            grid = np.union1d(grid, (extra // wl.block_size).astype(np.int64))
            tasks.append((name, policy, wl, grid[grid > 0]))
    if executor is None or _kernels.available():
        # With the compiled kernels every curve takes well under a second: here,
        # each workload's block references are prepared once per curve, and no
        # worker process pays for importing numba.
        curves = [policy_curve(wl, grid, policy) for _n, policy, wl, grid in tasks]
    else:
        # Longest first (replayed policies on the largest traces), results in task order.
        order = sorted(
            range(len(tasks)),
            key=lambda i: (tasks[i][1] == "lru", -tasks[i][2].hash_ids.size),
        )
        # A policy without the stack property replays each capacity on its own:
        # one task a capacity keeps every worker busy to the end (same rows).
        futures = {
            i: [
                executor.submit(policy_curve, tasks[i][2], part, tasks[i][1])
                for part in (
                    [tasks[i][3]]
                    if tasks[i][1] in ("lru", *_MONOTONE)
                    else np.split(tasks[i][3], len(tasks[i][3]))
                )
            ]
            for i in order
        }
        curves = [
            pd.concat([f.result() for f in futures[i]], ignore_index=True) for i in range(len(tasks))
        ]
    frames = [
        curve.assign(trace=name, policy=policy)
        for (name, policy, _wl, _grid), curve in zip(tasks, curves, strict=True)
    ]
    return pd.concat(frames, ignore_index=True)[list(CURVE_COLUMNS)]


def at_capacity(
    curves: pd.DataFrame, capacity_tokens: float, ceilings: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The rows of :func:`hit_rate_vs_capacity` at one capacity, with their share of the ceiling.

    Parameters
    ----------
    curves : DataFrame
        From :func:`hit_rate_vs_capacity`.
    capacity_tokens : float
        Read at the largest grid capacity not above it (whole blocks).
    ceilings : DataFrame, optional
        :func:`inferasim.studies.overview`; adds ``ceiling_token_hit_ratio``
        and ``share_of_ceiling``.

    Returns
    -------
    pandas.DataFrame
        One row per (trace, policy).

    Examples
    --------
    >>> c = pd.DataFrame({"trace": "t", "policy": "lru", "capacity_blocks": [1, 4],
    ...                   "capacity_tokens": [512, 2048], "block_hit_ratio": [0.1, 0.3],
    ...                   "token_hit_ratio": [0.1, 0.3]})
    >>> ceil = pd.DataFrame({"trace": ["t"], "ceiling_token_hit_ratio": [0.6]})
    >>> at_capacity(c, 3000, ceil)[["capacity_tokens", "token_hit_ratio", "share_of_ceiling"]]
       capacity_tokens  token_hit_ratio  share_of_ceiling
    0             2048              0.3               0.5
    """
    below = curves[curves["capacity_tokens"] <= capacity_tokens]
    last = below.groupby(["trace", "policy"], sort=False)["capacity_tokens"].idxmax()
    rows = below.loc[last.to_numpy()].reset_index(drop=True)
    if ceilings is not None:
        rows = rows.merge(ceilings[["trace", "ceiling_token_hit_ratio"]], on="trace", how="left")
        rows["share_of_ceiling"] = rows["token_hit_ratio"] / rows["ceiling_token_hit_ratio"]
    return rows
