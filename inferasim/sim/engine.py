"""The event loop: arrivals in order, routing, lazily advanced replicas.

Replicas are independent between arrivals, so the loop is tiny: for each
arrival (in arrival order, ties by request id), bring the replicas a router
needs up to the arrival time, route, enqueue. A replica is only advanced
when someone needs its state (``round_robin`` and ``random`` read none, so
only the chosen replica moves); at the end every replica drains.

Time semantics (the same in the plain and the jumping loop): a step starts
when the previous one ends if there is work; a request arriving at ``t``
joins the first step that starts at or after ``t``; routing at ``t`` sees
every step that ended at or before ``t``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferasim.sim.router import (
    CacheAwareRouter,
    KvCostRouter,
    LeastLoadedRouter,
    ReplicaView,
    Request,
)
from inferasim.sim.scheduler import Outputs, Replica, Seq
from inferasim.workload import Workload

__all__ = ["rejection_reasons", "simulate", "TIMELINE_ROWS", "MIN_TIMELINE_MS"]

#: The timeline holds at most about this many rows in all (at least 250 a
#: replica): when a replica reaches its share, the sampling period of every
#: replica doubles and every other sample is dropped (the grid stays regular).
TIMELINE_ROWS = 100_000
#: The smallest sampling period (ms) accepted; the default period (1/1000 of
#: the arrival span) is never below it either.
MIN_TIMELINE_MS = 1e-3

_FAST_ROUTERS = (KvCostRouter, CacheAwareRouter, LeastLoadedRouter)


@dataclass
class RunOutput:
    """Raw outputs of one run (turned into frames by :mod:`inferasim.sim.result`)."""

    out: Outputs
    reasons: dict[int, str]
    replicas: list[Replica]
    end_ms: float


def rejection_reasons(wl: Workload, capacity: int) -> dict[int, str]:
    """Requests that can never run on a replica, with the reason.

    A request needs ``ceil((input_len + output_len - 1) / block_size)`` blocks
    for its last decode step; more than the replica holds can never finish.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [100, 0], [8, 1], block_size=16)
    >>> rejection_reasons(wl, capacity=5)
    {0: 'needs 7 KV blocks for 100 + 8 tokens; a replica holds 5', 1: 'input_len is 0'}
    """
    P = wl.input_len.astype(np.int64)
    out_len = np.maximum(wl.output_len.astype(np.int64), 1)
    need = -(-(P + out_len - 1) // wl.block_size)
    reasons: dict[int, str] = {}
    for i in np.flatnonzero((need > capacity) | (P <= 0)).tolist():
        if P[i] <= 0:
            reasons[i] = "input_len is 0"
        else:
            reasons[i] = (
                f"needs {need[i]} KV blocks for {P[i]} + {wl.output_len[i]} tokens; "
                f"a replica holds {capacity}"
            )
    return reasons


def simulate(
    wl: Workload,
    *,
    num_replicas: int,
    router: Callable[..., Any],
    cost: Any,
    capacity: int,
    max_num_seqs: int,
    max_batched_tokens: int,
    chunked_prefill: bool,
    eviction: str,
    seed: int | None,
    sample_ms: float | None,
    jump: bool,
    progress: bool,
) -> RunOutput:
    """Run ``wl`` through ``num_replicas`` replicas; see :class:`Simulator`.

    Examples
    --------
    >>> from inferasim.sim.cost import LinearCostModel
    >>> from inferasim.sim.router import RoundRobinRouter
    >>> wl = Workload.from_requests([0, 0], [16, 16], [2, 2], block_size=16)
    >>> run = simulate(wl, num_replicas=2, router=RoundRobinRouter(), cost=LinearCostModel(),
    ...                capacity=8, max_num_seqs=8, max_batched_tokens=64, chunked_prefill=True,
    ...                eviction="lru", seed=0, sample_ms=None, jump=True, progress=False)
    >>> list(run.out.replica), run.end_ms
    ([0, 1], 10.9)
    """
    n = len(wl)
    bs = wl.block_size
    out = Outputs(n)
    reasons = rejection_reasons(wl, capacity)
    arrival = wl.arrival_ms.astype(np.float64)
    P = wl.input_len.astype(np.int64)
    out_len = wl.output_len.astype(np.int64)
    if wl.has_hash_ids:
        nh = np.minimum(wl.num_blocks, P // bs)
    else:
        nh = np.zeros(n, dtype=np.int64)
    starts = wl.offsets[:-1]
    flat = wl.hash_ids
    if sample_ms is None:
        span = float(arrival[-1] - arrival[0]) if n else 0.0
        sample_ms = span / 1000.0 if span > 0 else 1000.0
        if sample_ms < MIN_TIMELINE_MS:
            sample_ms = MIN_TIMELINE_MS
    t0 = float(arrival[0]) if n else 0.0

    reps = [
        Replica(
            r,
            cost=cost,
            block_size=bs,
            capacity=capacity,
            max_num_seqs=max_num_seqs,
            max_batched_tokens=max_batched_tokens,
            chunked_prefill=chunked_prefill,
            eviction=eviction,
            out=out,
            sample_ms=sample_ms,
            jump=jump,
        )
        for r in range(num_replicas)
    ]
    tl_cap = max(250, TIMELINE_ROWS // num_replicas)
    for rep in reps:
        rep.next_sample = rep.clock = t0
        rep.sample_i = 0
        rep.t0 = t0
        rep.peers = reps
        rep.tl_cap = tl_cap
    current: list[Any] = [[], 0]
    views = tuple(ReplicaView(rep, current) for rep in reps)
    if isinstance(router, KvCostRouter):
        router.block_size = bs
    reset = getattr(router, "reset", None)
    if reset is not None:
        reset(num_replicas, seed)
    needs_state = getattr(router, "needs_state", True)
    # built-in policies have a fast path reading the replicas directly
    fast_route = getattr(router, "_fast", None) if type(router) in _FAST_ROUTERS else None

    bar = None
    if progress and n:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, delay=1.0, unit="req", desc="simulate", leave=False)
    arr_l, P_l, O_l, nh_l, st_l = (
        arrival.tolist(),
        P.tolist(),
        out_len.tolist(),
        nh.tolist(),
        starts.tolist(),
    )
    wakes = [math.inf] * num_replicas
    # active blocks of each replica (running plus queued prompt blocks), what kv_cost
    # reads: replica state only changes in advance/arrive, each followed by an update
    active = [0] * num_replicas
    min_wake = math.inf
    for i in range(n):
        if bar is not None and not i & 1023 and i:
            bar.update(1024)
        if i in reasons:
            continue
        a = arr_l[i]
        p = P_l[i]
        k = nh_l[i]
        ids = flat[st_l[i] : st_l[i] + k].tolist() if k else []
        limit = (p - 1) // bs
        if limit > k:
            limit = k
        r = -1
        if fast_route is not None:
            # bring up to date only the replicas whose routing state changed
            # (wakes[r] is the earliest time replica r's state would change)
            if a >= min_wake:
                for j, w in enumerate(wakes):
                    if w <= a:
                        rep = reps[j]
                        rep.advance(a)
                        wakes[j] = rep.wake()
                        active[j] = rep.n_private + rep.cache.pinned + rep.queued_blocks
                min_wake = min(wakes)
            r = fast_route(p, ids, limit, reps, a, active)
        if r < 0:
            if needs_state:
                for j, rep in enumerate(reps):
                    rep.advance(a)
                    wakes[j] = rep.wake()
                    active[j] = rep.n_private + rep.cache.pinned + rep.queued_blocks
            current[0] = ids
            current[1] = limit
            r = router(Request(i, a, p, O_l[i], tuple(ids)), views)
            try:
                r = operator.index(r)
                if not 0 <= r < num_replicas:
                    raise IndexError
            except (TypeError, IndexError):
                raise ValueError(
                    f"routing returned {r!r} for request {i}; expected an int "
                    f"in [0, {num_replicas})"
                ) from None
        rep = reps[r]
        rep.advance(a)
        rep.arrive(Seq(i, p, O_l[i], ids, bs), a)
        w = wakes[r] = rep.wake()
        active[r] = rep.n_private + rep.cache.pinned + rep.queued_blocks
        if w < min_wake:
            min_wake = w
    for rep in reps:
        rep.advance(math.inf)
    if bar is not None:
        bar.update(n - bar.n)
        bar.close()
    fin = np.frombuffer(out.finish, dtype=np.float64)
    end = float(np.nanmax(fin)) if np.isfinite(fin).any() else t0
    stop = math.nextafter(end, math.inf)
    for rep in reps:
        if rep.next_sample < stop:
            rep._emit(stop)
    check_outputs(out, arrival, reasons, reps, capacity)
    return RunOutput(out=out, reasons=reasons, replicas=reps, end_ms=end)


def check_outputs(
    out: Outputs, arrival: np.ndarray, reasons: dict[int, str], reps: list[Replica], capacity: int
) -> None:
    """The run's invariants, checked once at its end (vectorised, cheap).

    Every request not rejected finished, with finite times ordered
    ``arrival <= scheduled <= first_token <= finish``; no replica held more
    KV blocks than its capacity. A violation is a bug (or a cost model whose
    finite step times overflow): an error naming the first bad request,
    never a frame with bad rows.

    Examples
    --------
    >>> o = Outputs(1)
    >>> o.scheduled[0], o.first_token[0], o.finish[0] = 1.0, 2.0, 3.0
    >>> check_outputs(o, np.array([0.0]), {}, [], 8)
    >>> o.finish[0] = float("nan")
    >>> check_outputs(o, np.array([0.0]), {}, [], 8)
    Traceback (most recent call last):
    ...
    RuntimeError: internal error: request 0 has times arrival=0.0, scheduled=1.0, first_token=2.0, finish=nan ...
    """
    sched = np.frombuffer(out.scheduled, dtype=np.float64)
    first = np.frombuffer(out.first_token, dtype=np.float64)
    fin = np.frombuffer(out.finish, dtype=np.float64)
    ok = (arrival <= sched) & (sched <= first) & (first <= fin) & (fin < math.inf)
    if reasons:
        ok[list(reasons)] = True
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise RuntimeError(
            f"internal error: request {i} has times arrival={float(arrival[i])!r}, "
            f"scheduled={float(sched[i])!r}, first_token={float(first[i])!r}, "
            f"finish={float(fin[i])!r} (not finite and ordered); "
            "no result frames were built (a cost model whose step times sum beyond float64 "
            "range gives this too)"
        )
    for rep in reps:
        if rep.peak_kv > capacity:
            raise RuntimeError(
                f"internal error: replica {rep.index} held {rep.peak_kv} KV blocks, capacity {capacity}"
            )
