"""Local versus pooled caches, and what routing does about it (FAST'25 section 3).

Two studies on the same fleet (:data:`FLEET_REPLICAS` nodes of
:data:`NODE_CACHE_TOKENS` tokens of cache each):

* :func:`local_vs_pooled` replays the trace without timing through N local
  caches (requests placed by a fixed rule) and one pooled cache of N times
  the capacity (:func:`inferasim.reuse.partitioned_hit_rate`);
* :func:`compare_routing` simulates the fleet under each routing policy
  (one :func:`run_routing` call per (trace, policy)) and returns every
  request's latency; :func:`routing_summary` and :func:`replica_load` reduce
  that frame.

Examples
--------
>>> wl = Workload.from_synthetic(30, rate=5.0, input_len=1024, output_len=8,
...                              num_prefixes=4, prefix_len=1024, seed=0)
>>> req = compare_routing({"demo": wl}, ["round_robin"], replicas=2, capacity_tokens=51_200)
>>> routing_summary(req)[["trace", "routing", "requests", "busiest_share"]]
  trace      routing  requests  busiest_share
0  demo  round_robin        30            0.5
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np
import pandas as pd

from inferasim import reuse
from inferasim.studies._run import named, simulate
from inferasim.studies.settings import (
    FLEET_REPLICAS,
    NODE_CACHE_TOKENS,
    PLACEMENTS,
    ROUTING_POLICIES,
)
from inferasim.workload import Workload

__all__ = [
    "local_vs_pooled",
    "run_routing",
    "compare_routing",
    "routing_summary",
    "replica_load",
    "REQUEST_COLUMNS",
]

#: Columns of :func:`compare_routing` taken from ``SimResult.requests`` (its
#: index ``request_id`` becomes a column of the long frame, one row per run and request).
REQUEST_COLUMNS: tuple[str, ...] = (
    "request_id",
    "replica",
    "status",
    "arrival_ms",
    "input_len",
    "cached_tokens",
    "queue_ms",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
)


def local_vs_pooled(
    workloads: Workload | Mapping[str, Workload],
    replicas: int = FLEET_REPLICAS,
    capacity_tokens: int = NODE_CACHE_TOKENS,
    placements: Sequence[str] = PLACEMENTS,
) -> pd.DataFrame:
    """Token hit ratio of ``replicas`` local caches against the same memory pooled.

    Each node has ``capacity_tokens`` of LRU cache; requests are spread over
    nodes by each rule in ``placements`` (``random``, ``round_robin``,
    ``hash_first_block``: see :func:`inferasim.reuse.partitioned_hit_rate`).
    The pooled cache holds ``replicas * capacity_tokens`` and sees every
    request, so it does not depend on the placement.

    Returns
    -------
    pandas.DataFrame
        One row per (trace, cache): ``trace``, ``cache`` (``"local"`` or
        ``"pooled"``), ``placement`` (the rule, ``"any"`` for the pooled
        cache), ``capacity_tokens`` (per cache), ``token_hit_ratio`` and
        ``ceiling_token_hit_ratio`` (infinite cache).

    Examples
    --------
    Four requests of one block [1]; two nodes of one block, round-robin:
    node 0 sees r0, r2 (r2 hits), node 1 sees r1, r3 (r3 hits): 2 of 4. The
    pooled cache hits r1, r2, r3: 3 of 4, which is also the ceiling.

    >>> wl = Workload.from_requests([0, 1, 2, 3], [512] * 4, [1] * 4, [[1], [1], [1], [1]])
    >>> local_vs_pooled({"t": wl}, 2, 512, ["round_robin"])[["cache", "placement", "token_hit_ratio"]]
        cache    placement  token_hit_ratio
    0   local  round_robin             0.50
    1  pooled          any             0.75
    """
    rows = []
    for name, wl in named(workloads).items():
        blocks = int(capacity_tokens) // wl.block_size
        ceiling = float(reuse.infinite_hit_ratio(wl).token_hit_ratio)
        pooled = float("nan")
        for placement in placements:
            part = reuse.partitioned_hit_rate(wl, blocks * replicas, replicas, assign=placement)
            pooled = float(part.loc["pooled", "token_hit_ratio"])
            rows.append(
                {
                    "trace": name,
                    "cache": "local",
                    "placement": placement,
                    "capacity_tokens": blocks * wl.block_size,
                    "token_hit_ratio": float(part.loc["partitioned", "token_hit_ratio"]),
                    "ceiling_token_hit_ratio": ceiling,
                }
            )
        if not placements:
            part = reuse.partitioned_hit_rate(wl, blocks * replicas, 1)
            pooled = float(part.loc["pooled", "token_hit_ratio"])
        rows.append(
            {
                "trace": name,
                "cache": "pooled",
                "placement": "any",
                "capacity_tokens": blocks * replicas * wl.block_size,
                "token_hit_ratio": pooled,
                "ceiling_token_hit_ratio": ceiling,
            }
        )
    return pd.DataFrame(rows)


def run_routing(
    workload: Workload,
    routing: str,
    *,
    replicas: int = FLEET_REPLICAS,
    capacity_tokens: int = NODE_CACHE_TOKENS,
    **config: Any,
) -> Any:
    """One configuration of :func:`compare_routing`: simulate the fleet under one router.

    Parameters
    ----------
    workload : Workload
    routing : str
        A :class:`inferasim.Simulator` routing policy.
    replicas : int, default 10
    capacity_tokens : int, default 3,000,000
        Prefix-cache capacity per replica (rounded down to whole blocks).
    **config
        More :class:`inferasim.Simulator` settings (seed 0 by default).

    Returns
    -------
    SimResult

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> run_routing(wl, "round_robin", replicas=2, capacity_tokens=51_200).replicas["requests"].tolist()
    [10, 10]
    """
    return simulate(
        workload,
        replicas=replicas,
        routing=routing,
        kv_tokens=int(capacity_tokens),
        **config,
    )


def compare_routing(
    workloads: Workload | Mapping[str, Workload],
    policies: Sequence[str] = ROUTING_POLICIES,
    *,
    replicas: int = FLEET_REPLICAS,
    capacity_tokens: int = NODE_CACHE_TOKENS,
    window_ms: float | None = None,
    executor: Executor | None = None,
    **config: Any,
) -> pd.DataFrame:
    """Simulate the fleet under each routing policy; one row per request and run.

    Parameters
    ----------
    workloads : Workload or mapping of str to Workload
    policies : sequence of str, default ROUTING_POLICIES
    replicas : int, default 10
    capacity_tokens : int, default 3,000,000
        Prefix-cache capacity per replica.
    window_ms : float, optional
        Simulate only the first ``window_ms`` of each trace (quick runs).
    executor : concurrent.futures.Executor, optional
        Run the (trace, policy) simulations on it (e.g. a
        ``ProcessPoolExecutor``); in this process by default. Runs are
        seeded, so the frame is the same either way.
    **config
        More :class:`inferasim.Simulator` settings.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``routing``, ``replicas``, ``capacity_tokens`` and the
        :data:`REQUEST_COLUMNS` of ``SimResult.requests`` (``replica`` is
        -1 and latencies NaN for a rejected request).

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> req = compare_routing(wl, ["round_robin", "least_loaded"], replicas=2, capacity_tokens=51_200)
    >>> req.groupby("routing").size().to_dict()
    {'least_loaded': 20, 'round_robin': 20}
    """
    tasks = []
    for name, wl in named(workloads).items():
        if window_ms is not None:
            wl = wl.window(0, window_ms)
        tasks += [(name, routing, wl) for routing in policies]
    kw = {"replicas": replicas, "capacity_tokens": capacity_tokens, **config}
    if executor is None:
        runs = [_routing_requests(wl, routing, kw) for _n, routing, wl in tasks]
    else:
        futures = [executor.submit(_routing_requests, wl, routing, kw) for _n, routing, wl in tasks]
        runs = [f.result() for f in futures]
    frames = [
        req.assign(
            trace=name,
            routing=routing,
            replicas=replicas,
            capacity_tokens=int(capacity_tokens) // wl.block_size * wl.block_size,
        )
        for (name, routing, wl), req in zip(tasks, runs, strict=True)
    ]
    out = pd.concat(frames, ignore_index=True)
    first = ["trace", "routing", "replicas", "capacity_tokens"]
    return out[first + [c for c in out.columns if c not in first]]


def _routing_requests(wl: Workload, routing: str, kw: dict[str, Any]) -> pd.DataFrame:
    """The request frame of one :func:`run_routing` (a picklable task for an executor)."""
    return run_routing(wl, routing, **kw).requests.reset_index()[list(REQUEST_COLUMNS)]


def routing_summary(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per (trace, routing) of :func:`compare_routing`: latency percentiles, reuse, balance.

    Percentiles are over finished requests, as ``SimResult.summary()``.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``routing``, ``requests``, ``rejected``, ``ttft_p50_ms``,
        ``ttft_p99_ms``, ``tpot_p50_ms``, ``token_hit_ratio`` (cached /
        prompt tokens of routed requests), ``busiest_share`` (the busiest
        replica's share of routed requests; ``1 / replicas`` is perfect
        balance).

    Examples
    --------
    Three requests on replica 0 and one on replica 1: the busiest holds 3/4.

    >>> req = pd.DataFrame({"trace": "t", "routing": "r", "replica": [0, 0, 0, 1],
    ...                     "status": "finished", "input_len": 100, "cached_tokens": [0, 50, 50, 0],
    ...                     "ttft_ms": [1.0, 2.0, 3.0, 4.0], "tpot_ms": 1.0})
    >>> routing_summary(req)[["ttft_p50_ms", "token_hit_ratio", "busiest_share"]].values.tolist()
    [[2.5, 0.25, 0.75]]
    """
    rows = []
    for (trace, routing), run in requests.groupby(["trace", "routing"], sort=False):
        fin = run[run["status"] == "finished"]
        routed = run[run["replica"] >= 0]
        ttft = fin["ttft_ms"].dropna().to_numpy(dtype=float)
        tpot = fin["tpot_ms"].dropna().to_numpy(dtype=float)
        prompt = float(routed["input_len"].sum())
        rows.append(
            {
                "trace": trace,
                "routing": routing,
                "requests": len(run),
                "rejected": int((run["status"] == "rejected").sum()),
                "ttft_p50_ms": float(np.percentile(ttft, 50)) if ttft.size else float("nan"),
                "ttft_p99_ms": float(np.percentile(ttft, 99)) if ttft.size else float("nan"),
                "tpot_p50_ms": float(np.percentile(tpot, 50)) if tpot.size else float("nan"),
                "token_hit_ratio": float(routed["cached_tokens"].sum()) / prompt
                if prompt
                else float("nan"),
                "busiest_share": float(routed["replica"].value_counts().max() / len(routed))
                if len(routed)
                else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def replica_load(requests: pd.DataFrame) -> pd.DataFrame:
    """Requests and prompt tokens per replica, per (trace, routing) of :func:`compare_routing`.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``routing``, ``replica`` (every replica of the fleet, idle
        ones with 0), ``requests``, ``input_tokens``, ``cached_tokens``.
        Rejected requests (replica -1) are left out.

    Examples
    --------
    >>> req = pd.DataFrame({"trace": "t", "routing": "r", "replicas": 3, "replica": [0, 0, 2, -1],
    ...                     "input_len": [10, 20, 30, 5], "cached_tokens": 0})
    >>> replica_load(req)[["replica", "requests", "input_tokens"]].values.tolist()
    [[0, 2, 30], [1, 0, 0], [2, 1, 30]]
    """
    frames = []
    for (trace, routing), run in requests.groupby(["trace", "routing"], sort=False):
        routed = run[run["replica"] >= 0]
        n = int(run["replicas"].iloc[0]) if "replicas" in run else int(routed["replica"].max()) + 1
        per = routed.groupby("replica").agg(
            requests=("replica", "size"),
            input_tokens=("input_len", "sum"),
            cached_tokens=("cached_tokens", "sum"),
        )
        per = per.reindex(range(n), fill_value=0).rename_axis("replica").reset_index()
        frames.append(per.assign(trace=trace, routing=routing))
    out = pd.concat(frames, ignore_index=True)
    return out[["trace", "routing", "replica", "requests", "input_tokens", "cached_tokens"]]
