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

A shared KV tier couples the replicas: what one writes at ``t`` another may
read after ``t``. With one, the replicas are advanced in global time order
(repeatedly the replica whose state changes next, ties to the lowest index:
step ends before the step starts at the same instant), so every pool read
at ``t`` sees exactly the pool writes before it. Pool reads happen at
step starts outside decode stretches; writes at evictions, which inside a
stretch happen at the start of an allocating step, a point where the
replica's routing-visible state changes and so where it wakes: the jump
stays exact.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferasim.sim.cost import LinearCostModel
from inferasim.sim.roofline import RooflineCostModel
from inferasim.sim.router import (
    CacheAwareRouter,
    ConductorRouter,
    KvCostRouter,
    LeastLoadedRouter,
    ReplicaView,
    Request,
)
from inferasim.sim.routing_fast import conductor_pick
from inferasim.sim.scheduler import HANDOFF, Outputs, Replica, Seq
from inferasim.sim.tierconfig import Tier
from inferasim.sim.tiers import TierStore, replica_tiers
from inferasim.sim.transfer import Link
from inferasim.workload import Workload

__all__ = [
    "rejection_reasons",
    "simulate",
    "simulate_disaggregated",
    "tier_savings",
    "TIMELINE_ROWS",
    "MIN_TIMELINE_MS",
]

#: The timeline holds at most about this many rows in all (at least 250 a
#: replica): when a replica reaches its share, the sampling period of every
#: replica doubles and every other sample is dropped (the grid stays regular).
TIMELINE_ROWS = 100_000
#: The smallest sampling period (ms) accepted; the default period (1/1000 of
#: the arrival span) is never below it either.
MIN_TIMELINE_MS = 1e-3

_FAST_ROUTERS = (KvCostRouter, CacheAwareRouter, LeastLoadedRouter)
#: Cost models whose step_time_ms is a pure function of its arguments: the views'
#: prefill-time estimates are memoised for them (a user's model may count calls).
_PURE_COSTS = (RooflineCostModel, LinearCostModel)


def estimate_memo(cost: Any) -> dict[tuple[int, ...], float] | None:
    """A fresh memo for the routing views' prefill-time estimates, or None when
    ``cost`` is not a built-in (pure) cost model.

    Examples
    --------
    >>> estimate_memo(LinearCostModel())
    {}
    >>> estimate_memo(object()) is None
    True
    """
    return {} if type(cost) in _PURE_COSTS else None

#: Livelock guard of the disaggregated loop: every ``STALL_CHECK`` events it
#: checks for progress (an arrival, first token, delivery or finish); after
#: ``STALL_LIMIT`` checks in a row without any it raises an internal error
#: instead of letting simulated time tick forever (a bug, never a valid run:
#: about 130k events with no request reaching a milestone).
STALL_CHECK = 4096
STALL_LIMIT = 32
#: Test hook: the disaggregated loop checks at every event that its kept next
#: changes of the prefill instances and next deliveries of the links equal the
#: values read afresh (an internal error if not).
_CHECK_SYNC = False
#: The time of a handoff event ``(done, seq, time, prefill index)``.
_EVENT_TIME = operator.itemgetter(2)


@dataclass
class RunOutput:
    """Raw outputs of one run (turned into frames by :mod:`inferasim.sim.result`)."""

    out: Outputs
    reasons: dict[int, str]
    replicas: list[Replica]
    end_ms: float
    tiers: tuple[Tier, ...] = ()
    shared: dict[str, TierStore] | None = None
    arrival: np.ndarray | None = None  # simulated arrivals (closed loop), else None
    sessions: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # id, turn, think



def replica_index(r: Any, rid: int, n: int, what: str = "") -> int:
    """The router's answer for request ``rid`` as a replica index in ``[0, n)``.

    Examples
    --------
    >>> replica_index(1, 0, 2)
    1
    >>> replica_index(2, 7, 2, " (a prefill instance)")
    Traceback (most recent call last):
    ...
    ValueError: routing returned 2 for request 7; expected an int in [0, 2) (a prefill instance)
    """
    try:
        r = operator.index(r)
        if not 0 <= r < n:
            raise IndexError
    except (TypeError, IndexError):
        raise ValueError(
            f"routing returned {r!r} for request {rid}; expected an int in [0, {n}){what}"
        ) from None
    return r

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


@dataclass
class Columns:
    """The workload's columns as the arrival loops read them (plain lists), and the
    run's start: shared by :func:`simulate` and :func:`simulate_disaggregated`.

    Examples
    --------
    >>> wl = Workload.from_requests([5, 9], [40, 16], [2, 2], [[1, 2], [3]], block_size=16)
    >>> c = Columns.of(wl, capacity=8, sample_ms=None)
    >>> c.t0, c.sample_ms, c.ids(0), c.ids(1)   # limit: (40 - 1) // 16 = 2, (16 - 1) // 16 = 0
    (5.0, 0.004, ([1, 2], 2), ([3], 0))
    """

    n: int
    bs: int
    reasons: dict[int, str]  # requests that can never run (see rejection_reasons)
    arrival: np.ndarray
    t0: float  # the first arrival (0 without requests)
    sample_ms: float  # the timeline's sampling period
    arr: list[float]
    plen: list[int]
    olen: list[int]
    nh: list[int]  # reusable (full prompt) blocks of each request
    start: list[int]  # offset of each request's hash ids in flat
    flat: np.ndarray

    @classmethod
    def of(cls, wl: Workload, capacity: int, sample_ms: float | None) -> Columns:
        """The columns of ``wl``; ``sample_ms`` None: 1/1000 of the arrival span."""
        n = len(wl)
        bs = wl.block_size
        arrival = wl.arrival_ms.astype(np.float64)
        P = wl.input_len.astype(np.int64)
        if wl.has_hash_ids:
            nh = np.minimum(wl.num_blocks, P // bs)
        else:
            nh = np.zeros(n, dtype=np.int64)
        if sample_ms is None:
            span = float(arrival[-1] - arrival[0]) if n else 0.0
            sample_ms = span / 1000.0 if span > 0 else 1000.0
            if sample_ms < MIN_TIMELINE_MS:
                sample_ms = MIN_TIMELINE_MS
        return cls(
            n=n,
            bs=bs,
            reasons=rejection_reasons(wl, capacity),
            arrival=arrival,
            t0=float(arrival[0]) if n else 0.0,
            sample_ms=sample_ms,
            arr=arrival.tolist(),
            plen=P.tolist(),
            olen=wl.output_len.astype(np.int64).tolist(),
            nh=nh.tolist(),
            start=wl.offsets[:-1].tolist(),
            flat=wl.hash_ids,
        )

    def ids(self, i: int) -> tuple[list[int], int]:
        """Request ``i``'s reusable block ids and how many of them a hit may reuse
        (at least one prompt token is always computed)."""
        k = self.nh[i]
        ids = self.flat[self.start[i] : self.start[i] + k].tolist() if k else []
        limit = (self.plen[i] - 1) // self.bs
        return ids, limit if limit < k else k

    def progress_bar(self, progress: bool) -> Any:
        """A tqdm bar over the requests, or None."""
        if not (progress and self.n):
            return None
        from tqdm.auto import tqdm

        return tqdm(total=self.n, delay=1.0, unit="req", desc="simulate", leave=False)

    def finish(
        self,
        out: Outputs,
        reps: list[Replica],
        bar: Any,
        reasons: dict[int, str],
        capacity: int,
        sim_arr: np.ndarray | None,
    ) -> float:
        """Close the bar and the timelines, check the run; return its end (ms)."""
        if bar is not None:
            bar.update(self.n - bar.n)
            bar.close()
        fin = np.frombuffer(out.finish, dtype=np.float64)
        end = float(np.nanmax(fin)) if np.isfinite(fin).any() else self.t0
        stop = math.nextafter(end, math.inf)
        for rep in reps:
            if rep.next_sample < stop:
                rep._emit(stop)
        check_outputs(out, self.arrival if sim_arr is None else sim_arr, reasons, reps, capacity)
        return end


def configure_router(
    router: Any,
    num_replicas: int,
    seed: int | None,
    *,
    block_size: int,
    cost: Any,
    tiers: tuple[Tier, ...],
    live: bool,
    chunk_tokens: int,
    kv_bytes: float,
) -> None:
    """Tell a built-in router the run's block size and tier savings; reset it.

    Examples
    --------
    >>> from inferasim.sim.cost import LinearCostModel
    >>> r = KvCostRouter()
    >>> configure_router(r, 2, 0, block_size=16, cost=LinearCostModel(), tiers=(), live=False,
    ...                  chunk_tokens=64, kv_bytes=0.0)
    >>> r.block_size
    16
    """
    if isinstance(router, KvCostRouter):
        router.block_size = block_size
    if live and isinstance(router, KvCostRouter | CacheAwareRouter):
        router.tier_saving = tier_savings(cost, tiers, block_size, chunk_tokens, kv_bytes)
    reset = getattr(router, "reset", None)
    if reset is not None:
        reset(num_replicas, seed)


def session_children(parent: np.ndarray) -> dict[int, list[int]]:
    """Closed loop: the requests each request's answer sends (its next turns).

    Examples
    --------
    >>> session_children(np.array([-1, 0, 0, 1]))
    {0: [1, 2], 1: [3]}
    """
    children: dict[int, list[int]] = {}
    for j, p_j in enumerate(parent.tolist()):
        if p_j >= 0:
            children.setdefault(p_j, []).append(j)
    return children


def advance_all(reps: list[Replica], wakes: list[float], active: list[int], until: float) -> None:
    """Advance every replica to ``until`` in global time order (a shared tier).

    The replica whose state changes first runs on to just before the next
    change of any other (its events there come strictly first in the
    global order), then the next; ties go one event at a time by index.
    ``wakes`` and ``active`` (each replica's wake and active blocks) are
    kept up to date.
    """
    inf = math.inf
    # the replicas with a change up to ``until`` (``on``) and the time of that
    # change (``at``): the one with the smallest (time, index) goes next, the
    # global order (ties to the lowest index). (The time, not the wake: a step
    # due to start at ``c`` wakes just after ``c``, as ``advance`` starts the
    # steps before its bound, but it comes before another replica's change one
    # ulp after ``c``.) A scan of at most a few dozen replicas: cheaper compiled
    # than a heap of tuples, and the same choices.
    n = len(wakes)
    on = [False] * n
    at = [inf] * n
    left = 0
    for j in range(n):
        w = wakes[j]
        if w <= until and w < inf:
            on[j] = True
            at[j] = reps[j].next_change()
            left += 1
    while left:
        # the first (smallest time, then index) and the next change of another
        j = -1
        c1 = inf
        w2 = inf  # (the others change after until when none is on)
        for i in range(n):
            if on[i]:
                c = at[i]
                if j < 0 or c < c1:
                    if j >= 0:
                        w2 = c1  # (c1 <= w2 always)
                    c1 = c
                    j = i
                elif c < w2:
                    w2 = c
        bound = until if w2 > until else math.nextafter(w2, -inf)
        w = wakes[j]
        if bound < w:
            bound = w
        rep = reps[j]
        rep.advance(bound)
        w = rep.wake()
        wakes[j] = w
        active[j] = rep.n_private + rep.cache.pinned + rep.queued_blocks
        if w <= until and w < inf:
            at[j] = rep.next_change()
        else:
            on[j] = False
            left -= 1


def simulate(
    wl: Workload,
    *,
    num_replicas: int,
    router: Any,
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
    tiers: tuple[Tier, ...] = (),
    write_through: bool = False,
    load_policy: str = "faster",
    admission: Callable[..., Any] | None = None,
    parent: np.ndarray | None = None,
    think: np.ndarray | None = None,
    replicate_hot: int | None = None,
) -> RunOutput:
    """Run ``wl`` through ``num_replicas`` replicas; see :class:`Simulator`.

    With ``parent`` (closed loop; see :mod:`inferasim.sim.closed_loop`)
    request ``j`` with ``parent[j] >= 0`` arrives at its parent's finish (or
    rejection) plus ``think[j]`` instead of at its recorded arrival. Arrivals
    then come from a priority queue ``(time, request)``; before the head is
    routed, every replica holding a request with a waiting next turn is
    advanced, in global time order, through each state change up to the
    head (:meth:`Replica.wake`), so a finish, and the next turn it issues,
    is seen before any later arrival is routed: every replica's clock stays
    at or before the queue's head, and what a finish pushes is never earlier
    than the finish.

    Examples
    --------
    >>> from inferasim.sim.cost import LinearCostModel
    >>> from inferasim.sim.router import RoundRobinRouter
    >>> wl = Workload.from_requests([0, 0], [16, 16], [2, 2], block_size=16)
    >>> run = simulate(wl, num_replicas=2, router=RoundRobinRouter(), cost=LinearCostModel(),
    ...                capacity=8, max_num_seqs=8, max_batched_tokens=64, chunked_prefill=True,
    ...                eviction="lru", seed=0, sample_ms=None, jump=True, progress=False)
    >>> list(run.out.replica), round(run.end_ms, 9)
    ([0, 1], 10.9)
    """
    col = Columns.of(wl, capacity, sample_ms)
    n, bs, reasons, t0, sample_ms = col.n, col.bs, col.reasons, col.t0, col.sample_ms
    out = Outputs(n, len(tiers))
    live = any(t.capacity_tokens >= bs for t in tiers)
    shared = {t.name: TierStore(t.capacity_tokens // bs, log=True) for t in tiers if t.shared}
    reads: dict[str, dict[int, int]] = {}  # reads of each shared block (replicate_hot)
    coupled = any(t.shared and t.capacity_tokens >= bs for t in tiers)
    kvb: Any = getattr(cost, "kv_bytes_per_token", None) if live else 0.0
    if live and not (isinstance(kvb, int | float) and math.isfinite(kvb) and kvb > 0):
        raise ValueError(
            f"KV tiers need the KV bytes per token: the cost model has kv_bytes_per_token="
            f"{kvb!r}; give e.g. LinearCostModel(kv_bytes_per_token=131072)"
        )

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
            tiers=replica_tiers(tiers, shared, bs, kvb, write_through, replicate_hot, reads)
            if live
            else None,
            write_through=write_through,
            load_policy=load_policy,
        )
        for r in range(num_replicas)
    ]
    tl_cap = max(250, TIMELINE_ROWS // num_replicas)
    for rep in reps:
        rep.next_sample = rep.clock = t0
        rep.sample_i = 0
        rep.t0 = t0
        rep.coupled = coupled
        rep.peers = reps
        rep.tl_cap = tl_cap
    current: list[Any] = [[], 0, 0.0, 0]  # ids, limit, time, input_len of the request
    memo = estimate_memo(cost)
    views = tuple(ReplicaView(rep, current, memo=memo) for rep in reps)
    configure_router(
        router, num_replicas, seed, block_size=bs, cost=cost, tiers=tiers, live=live,
        chunk_tokens=max_batched_tokens, kv_bytes=kvb,
    )
    needs_state = getattr(router, "needs_state", True)
    # built-in policies have a fast path reading the replicas directly
    fast_route = getattr(router, "_fast", None) if type(router) in _FAST_ROUTERS else None
    conductor = type(router) is ConductorRouter  # its fast path reads the views

    bar = col.progress_bar(progress)
    arr_l, P_l, O_l = col.arr, col.plen, col.olen
    wakes = [math.inf] * num_replicas
    # active blocks of each replica (running plus queued prompt blocks), what kv_cost
    # reads: replica state only changes in advance/arrive, each followed by an update
    active = [0] * num_replicas

    closed = parent is not None
    sim_arr: np.ndarray | None = None
    if closed:
        assert parent is not None and think is not None
        children = session_children(parent)
        watch = set(children)
        for rep in reps:
            rep.watch = watch
        sim_arr = np.full(n, np.nan)
        think_l = think.tolist()
        pend = [0] * num_replicas  # routed requests with next turns, not finished yet
        queue = [(arr_l[j], j) for j in range(n) if parent[j] < 0]
        heapq.heapify(queue)

        def issue(rid: int, t: float) -> None:
            """Request ``rid`` was answered (or rejected) at ``t``: send its next turns."""
            for c in children.get(rid, ()):
                heapq.heappush(queue, (t + think_l[c], c))

        def drain(j: int) -> None:
            rep = reps[j]
            fin_l = rep.finished
            for rid in fin_l:
                pend[j] -= 1
                issue(rid, out.finish[rid])
            fin_l.clear()

        def settle() -> None:
            """Advance the replicas holding waited-for requests through every state
            change up to the queue's head (which their finishes may move earlier)."""
            while True:
                head = queue[0][0] if queue else math.inf
                best, bj = math.inf, -1
                for j in range(num_replicas):
                    if pend[j]:
                        w = reps[j].wake()
                        if w < best:
                            best, bj = w, j
                if bj < 0 or best > head:
                    return
                if coupled:
                    advance_all(reps, wakes, active, best)
                    for j in range(num_replicas):
                        if reps[j].finished:
                            drain(j)
                else:
                    rep = reps[bj]
                    rep.advance(best)
                    wakes[bj] = rep.wake()
                    active[bj] = rep.n_private + rep.cache.pinned + rep.queued_blocks
                    drain(bj)

        def session_arrivals() -> Any:
            while True:
                settle()
                if not queue:
                    return
                t, j = heapq.heappop(queue)
                sim_arr[j] = t
                yield j, t

    def open_arrivals() -> Any:
        for j in range(n):
            yield j, arr_l[j]

    arrivals = session_arrivals if closed else open_arrivals

    min_wake = math.inf
    count = 0
    for i, a in arrivals():
        count += 1
        if bar is not None and not count & 1023:
            bar.update(1024)
        if i in reasons:
            if closed:
                issue(i, a)
            continue
        p = P_l[i]
        ids, limit = col.ids(i)
        r = -1
        if coupled:
            advance_all(reps, wakes, active, a)
            min_wake = min(wakes)
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
            if needs_state:  # (coupled: only decode progress is left before a)
                for j, rep in enumerate(reps):
                    rep.advance(a)
                    wakes[j] = rep.wake()
                    active[j] = rep.n_private + rep.cache.pinned + rep.queued_blocks
            current[0] = ids
            current[1] = limit
            current[2] = a
            current[3] = p
            if conductor:
                r = router._fast(views)
            else:
                r = replica_index(
                    router(Request(i, a, p, O_l[i], tuple(ids)), views), i, num_replicas
                )
        rep = reps[r]
        rep.advance(a)
        if admission is not None:
            current[0] = ids
            current[1] = limit
            current[2] = a
            current[3] = p
            if not admission(Request(i, a, p, O_l[i], tuple(ids)), (views[r],), a):
                reasons[i] = getattr(admission, "last_reason", "") or "rejected by admission"
                w = wakes[r] = rep.wake()
                active[r] = rep.n_private + rep.cache.pinned + rep.queued_blocks
                if w < min_wake:
                    min_wake = w
                if closed:
                    issue(i, a)
                continue
        if closed:
            for j in range(num_replicas):
                if reps[j].finished:  # (settle leaves no waited-for finish at or before a)
                    raise RuntimeError(
                        f"internal error: request {reps[j].finished[0]} finished unseen "
                        f"before the arrival of request {i} at {a}"
                    )
            if i in watch:
                pend[r] += 1
        rep.arrive(Seq(i, p, O_l[i], ids, bs), a)
        w = wakes[r] = rep.wake()
        active[r] = rep.n_private + rep.cache.pinned + rep.queued_blocks
        if w < min_wake:
            min_wake = w
    if coupled:
        advance_all(reps, wakes, active, math.inf)
    for rep in reps:
        rep.advance(math.inf)
    if closed:
        if queue or any(pend) or any(rep.finished for rep in reps) or count != n:
            raise RuntimeError("internal error: closed-loop turns left at the end of the run")
        for rep in reps:
            rep.watch = None
    end = col.finish(out, reps, bar, reasons, capacity, sim_arr)
    return RunOutput(
        out=out,
        reasons=reasons,
        replicas=reps,
        end_ms=end,
        tiers=tuple(tiers),
        shared=shared,
        arrival=sim_arr if closed else None,
    )


def tier_savings(
    cost: Any, tiers: tuple[Tier, ...], block_size: int, chunk_tokens: int, kv_bytes: float
) -> tuple[float, ...]:
    """Share of a miss's prefill time a block found in each tier saves (routing use).

    ``1 - load / recompute`` per block, at least 0: ``load`` is one block
    alone on the tier's link (bytes at ``read_gbps`` plus latency),
    ``recompute`` the prefill time per block of a full ``chunk_tokens``
    chunk beyond a step's fixed cost (a single block can hide in a
    memory-bound step).

    Examples
    --------
    >>> from inferasim.sim.cost import LinearCostModel
    >>> t = Tier("dram", 10**6, read_gbps=1.0, write_gbps=1.0)
    >>> # a block: 16 tokens * 1e5 bytes = 1.6 ms at 1 GB/s; recompute 16 * 0.5 = 8 ms
    >>> tier_savings(LinearCostModel(prefill_token_ms=0.5), (t,), 16, 64, 1e5)
    (0.8,)
    """
    n = max(chunk_tokens, block_size)
    pairs = n * (n + 1) // 2
    per_block = (
        float(cost.step_time_ms(n, pairs, 0, 0)) - float(cost.step_time_ms(0, 0, 0, 0))
    ) * block_size / n
    out = []
    for t in tiers:
        load = block_size * kv_bytes / (t.read_gbps * 1e6) + t.latency_us / 1000.0
        out.append(max(0.0, 1.0 - load / per_block) if per_block > 0 else 0.0)
    return tuple(out)


def simulate_disaggregated(
    wl: Workload,
    *,
    prefill_replicas: int,
    decode_replicas: int,
    router: Any,
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
    admission: Callable[..., Any] | None,
    kv_bytes_per_token: float,
    handoff_gbps: float,
    handoff_latency_us: float,
    layerwise: bool,
    tiers: tuple[Tier, ...] = (),
    write_through: bool = False,
    load_policy: str = "faster",
    parent: np.ndarray | None = None,
    think: np.ndarray | None = None,
    replicate_hot: int | None = None,
) -> RunOutput:
    """Run ``wl`` on a prefill pool and a decode pool; see :class:`Simulator`.

    Replicas ``0 .. P-1`` are prefill instances, ``P .. P+D-1`` decode
    instances. The router places each request on a prefill instance; a
    prefill instance computes the prompt (chunked, with its own prefix
    cache), samples the first token and hands the sequence off:

    1. a decode instance with room for the KV (``ceil((input_len + 1) /
       block_size)`` free or evictable blocks) is chosen, the one with the
       fewest active blocks (ties to the lowest index), and the blocks are
       reserved there; if none has room the KV stays pinned on the prefill
       instance and the handoff waits (vLLM's source-first order: the
       source holds the KV until the destination has taken it), retried,
       first come first served, whenever a decode instance's state changes;
    2. the prompt's KV (``input_len * kv_bytes_per_token`` bytes) moves over
       the prefill instance's link (:class:`~inferasim.sim.transfer.Link`:
       ``handoff_gbps`` shared by the transfers in flight, plus
       ``handoff_latency_us``);
    3. on delivery the prefill instance frees the KV and the sequence joins
       the decode instance's next step (its second token).

    With ``layerwise`` steps 1-2 happen when the prefill starts (the KV
    streams out layer by layer as it is computed) and the sequence is
    delivered at the later of the transfer's end and the prefill's end.

    A prefill instance preempts (recompute) as an aggregated replica does;
    a prompt it preempted is admitted again only when all its blocks fit
    beside the handed-off KV the instance holds (else it would be preempted
    again before its first token, at every step: with a layerwise handoff
    re-reserving decode room each time, the run could never end). A
    preempted layerwise prefill calls its handoff off (transfer stopped,
    decode reservation freed). The loop raises an internal error after
    ``STALL_CHECK * STALL_LIMIT`` events without an arrival, first token,
    delivery or finish (a livelock is a bug, never a result).

    The loop processes events in time order (step ends of prefill
    instances, transfer deliveries, arrivals; decode instances are advanced
    to each event that touches them), so the state read at an event is the
    state at that instant. Handoffs at one instant go out by prefill
    instance, then in the order the instance produced them (its step's
    admission order), never by request id; a decode step starting at ``t``
    sees the reservations made at ``t`` (as an arrival at ``t`` joins the
    step starting at ``t``).

    With ``parent`` / ``think`` (closed loop, as in :func:`simulate`)
    arrivals come from a priority queue, and while a request with a waiting
    next turn is in flight the decode instances' state changes are events
    too, so each finish (at a decode instance, or at a prefill instance for
    a one-token answer) pushes the next turn before any later event.

    Examples
    --------
    >>> from inferasim.sim.cost import LinearCostModel
    >>> from inferasim.sim.router import RoundRobinRouter
    >>> wl = Workload.from_requests([0], [32], [3], block_size=16)
    >>> run = simulate_disaggregated(wl, prefill_replicas=1, decode_replicas=1,
    ...     router=RoundRobinRouter(), cost=LinearCostModel(), capacity=8, max_num_seqs=8,
    ...     max_batched_tokens=64, chunked_prefill=True, eviction="lru", seed=0,
    ...     sample_ms=None, jump=True, progress=False, admission=None,
    ...     kv_bytes_per_token=1e6, handoff_gbps=32.0, handoff_latency_us=0.0,
    ...     layerwise=False)
    >>> [round(run.out.first_token[0], 9), round(run.out.delivered[0], 9),  # 6.6 + 32 MB / 32 GB/s
    ...  round(run.out.finish[0], 9)]
    [6.6, 7.6, 17.8]
    """
    col = Columns.of(wl, capacity, sample_ms)
    n, bs, reasons, t0, sample_ms = col.n, col.bs, col.reasons, col.t0, col.sample_ms
    P_n, D_n = prefill_replicas, decode_replicas
    out = Outputs(n, len(tiers))
    # KV tiers (and a shared pool) sit behind the prefill instances' HBM: the
    # prefill instances are advanced in global time order (below), as a shared
    # tier needs; decode instances have none
    live = any(t.capacity_tokens >= bs for t in tiers)
    shared = {t.name: TierStore(t.capacity_tokens // bs, log=True) for t in tiers if t.shared}
    reads: dict[str, dict[int, int]] = {}  # reads of each shared block (replicate_hot)
    pre: list[Replica] = []
    dec: list[Replica] = []
    for r in range(P_n + D_n):
        role = "prefill" if r < P_n else "decode"
        rep = Replica(
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
            role=role,
            tiers=replica_tiers(
                tiers, shared, bs, kv_bytes_per_token, write_through, replicate_hot, reads
            )
            if live and role == "prefill"
            else None,
            write_through=write_through,
            load_policy=load_policy,
        )
        rep.next_sample = rep.clock = t0
        rep.sample_i = 0
        rep.t0 = t0
        (pre if r < P_n else dec).append(rep)
    tl_cap = max(250, TIMELINE_ROWS // (P_n + D_n))
    for rep in pre + dec:  # one timeline grid for the fleet, capped (see TIMELINE_ROWS)
        rep.peers = pre + dec
        rep.tl_cap = tl_cap
    links = [Link(handoff_gbps, handoff_latency_us) for _ in range(P_n)]
    current: list[Any] = [[], 0, 0.0, 0]
    memo = estimate_memo(cost)
    views = tuple(
        ReplicaView(rep, current, links[r], kv_bytes_per_token, memo) for r, rep in enumerate(pre)
    )
    dviews = tuple(ReplicaView(rep, current, memo=memo) for rep in dec)
    conductor = type(router) is ConductorRouter  # its fast path reads the views
    configure_router(
        router, P_n, seed, block_size=bs, cost=cost, tiers=tiers, live=live,
        chunk_tokens=max_batched_tokens, kv_bytes=kv_bytes_per_token,
    )

    bar = col.progress_bar(progress)
    arr_l, P_l, O_l = col.arr, col.plen, col.olen
    # the handoffs: waiting for room, in flight, delivered (see _Handoffs)
    hs = _Handoffs(pre, dec, links, out, bs, kv_bytes_per_token, layerwise)

    closed = parent is not None
    queue: list[tuple[float, int]] = []
    children: dict[int, list[int]] = {}
    think_l: list[float] = []
    sim_arr = np.full(n, np.nan) if closed else None
    if closed:
        assert parent is not None and think is not None
        children = session_children(parent)
        watch = set(children)
        for rep in pre + dec:
            rep.watch = watch
        think_l = think.tolist()
        queue = [(arr_l[j], j) for j in range(n) if parent[j] < 0]
        heapq.heapify(queue)

    order: list[int] = [] if closed else [i for i in range(n) if i not in reasons]
    needs_state = getattr(router, "needs_state", True)
    # the next change of each prefill instance and the next delivery of each link,
    # updated after every call that changes them (both are pure functions of state)
    pre_wake = hs.pre_wake
    link_done = hs.link_done
    k = 0
    count = 0
    inf = math.inf
    ticks = stalls = 0
    mark = -1
    T = t0
    stall_check, stall_limit = STALL_CHECK, STALL_LIMIT
    check_sync = _CHECK_SYNC
    events: list[tuple[bool | None, Seq, float, int]] = []
    while True:
        ticks += 1
        if ticks >= stall_check:  # the livelock guard (see STALL_CHECK)
            ticks = 0
            now = count + len(queue) + _milestones(out)
            stalls = stalls + 1 if now == mark else 0
            mark = now
            if stalls >= stall_limit:
                raise RuntimeError(
                    f"internal error: {stall_check * stall_limit} events without progress "
                    f"(no arrival, first token, delivery or finish) in the disaggregated loop, "
                    f"simulated time {T!r} ms: a livelock"
                )
        if closed:
            T = queue[0][0] if queue else inf
        else:
            T = arr_l[order[k]] if k < len(order) else inf
        # (pre_wake, link_done: kept current by every call that changes a prefill
        # instance or a link, so nothing is read again here)
        for w in pre_wake:
            if w < T:
                T = w
        for w in link_done:
            if w < T:
                T = w
        if hs.waiting_room or hs.inflight:
            for rep in dec:
                w = rep.wake()
                if w < T:
                    T = w
        if T == inf:
            break
        if check_sync and (
            pre_wake != [rep.wake() for rep in pre]
            or link_done != [link.next_done() for link in links]
        ):
            raise RuntimeError(f"internal error: stale wakes in the disaggregated loop at {T!r}")
        # 1. prefill instances up to T: steps ending at T complete (first tokens)
        events.clear()
        for p in range(P_n):
            rep = pre[p]
            if pre_wake[p] <= T:
                rep.advance(T)
                pre_wake[p] = rep.wake()
            if rep.handoffs:  # (only an advance adds handoffs)
                for done, seq, te in rep.handoffs:
                    events.append((done, seq, te, p))
                rep.handoffs.clear()
        # in time order; at one instant by prefill instance, then in the order the
        # instance produced them (its step's chunk order, i.e. admission order):
        # a stable sort of the lists built instance by instance, each already in
        # time order. (Not by request id: an id says nothing about who came
        # first once closed-loop turns arrive at simulated times.)
        if len(events) > 1:
            events.sort(key=_EVENT_TIME)
        # (a prefill step that started before T, right after the previous event:
        # its layerwise transfers start then, before anything at T)
        early = 0
        while early < len(events) and events[early][2] < T:
            early += 1
        # (a zero-time step can also start and end there: its first token too)
        for j in range(early):
            done, seq, te, p = events[j]
            hs.handle(done, seq, te, p)
        if hs.inflight:  # (closed loop) decode finishes up to T, after the early
            # handoffs: a decode step starting at their time must see their
            # reservations, as it does when the decode instances advance lazily
            for rep in dec:
                if rep.wake() <= T:
                    rep.advance(T)
        # 2. transfers delivered by T
        for p in range(P_n):
            # (advance a link only when something is delivered: its float state
            # then depends on the event times alone, the same in both loops)
            if link_done[p] <= T:
                link = links[p]
                done_ids = link.pop_done(T)
                link_done[p] = link.next_done()
                for tid in done_ids:
                    rec = hs.flight.pop((p, tid))
                    out.delivered[rec.seq.rid] = T
                    rec.delivered = True
                    if rec.prefilled:
                        hs.hand_over(rec, T)
        # 3. handoffs that were waiting for room, then the new ones
        if hs.waiting_room:
            still: list[tuple[Seq, int]] = []
            for seq, p in hs.waiting_room:
                if not hs.place(seq, p, T, seq.state == HANDOFF):
                    still.append((seq, p))
            hs.waiting_room = still
        for j in range(early, len(events)):
            done, seq, te, p = events[j]
            hs.handle(done, seq, te, p)
        # 4. arrivals at T
        if closed:
            hs.inflight -= _drain(pre, dec, out, children, think_l, queue)
        while True:
            if closed:
                if not queue or queue[0][0] > T:
                    break
                a, i = heapq.heappop(queue)
                assert sim_arr is not None
                sim_arr[i] = a
                if i in reasons:  # never fits: answered by the rejection
                    _issue(children, think_l, queue, i, a)
                    continue
            else:
                if k >= len(order) or arr_l[order[k]] > T:
                    break
                i = order[k]
                k += 1
                a = arr_l[i]
            count += 1
            if bar is not None and not count & 1023:
                bar.update(1024)
            p_len = P_l[i]
            ids, limit = col.ids(i)
            if needs_state:  # (an instance whose next change is after a stays as it is)
                for p in range(P_n):
                    if pre_wake[p] <= a:
                        rep = pre[p]
                        rep.advance(a)
                        pre_wake[p] = rep.wake()
            current[0] = ids
            current[1] = limit
            current[2] = a
            current[3] = p_len
            if conductor:  # (ConductorRouter._fast, without the views)
                r = conductor_pick(pre, links, kv_bytes_per_token, memo, ids, limit, a, p_len)
            else:
                r = replica_index(
                    router(Request(i, a, p_len, O_l[i], tuple(ids)), views),
                    i,
                    P_n,
                    " (a prefill instance)",
                )
            # (routing may have moved the links: their estimates advance them to a)
            hs.next_deliveries()
            rep = pre[r]
            rep.advance(a)
            pre_wake[r] = rep.wake()
            if admission is not None:
                need = -(-(p_len + 1) // bs)
                d = hs.least_active_with_room(need, a)
                if d < 0:  # (no room anywhere: the view of the first, brought up to a)
                    d = 0
                    dec[0].advance(a)
                dv = dviews[d]
                req = Request(i, a, p_len, O_l[i], tuple(ids))
                admitted = admission(req, (views[r], dv), a)
                hs.next_deliveries()  # (the views' estimates may move the links)
                if not admitted:
                    reasons[i] = getattr(admission, "last_reason", "") or "rejected by admission"
                    if closed:
                        _issue(children, think_l, queue, i, a)
                    continue
            if closed and i in children:
                hs.inflight += 1
            rep.arrive(Seq(i, p_len, O_l[i], ids, bs), a)
            pre_wake[r] = rep.wake()
        if closed:
            hs.inflight -= _drain(pre, dec, out, children, think_l, queue)
    for rep in pre:
        rep.advance(math.inf)
    for rep in dec:
        rep.advance(math.inf)
    if hs.waiting_room or hs.flight or hs.by_seq:
        raise RuntimeError("internal error: handoffs left at the end of the run")
    if closed:
        if queue or hs.inflight or any(rep.finished for rep in pre + dec):
            raise RuntimeError("internal error: closed-loop turns left at the end of the run")
        for rep in pre + dec:
            rep.watch = None
    reps = pre + dec
    end = col.finish(out, reps, bar, reasons, capacity, sim_arr)
    return RunOutput(
        out=out,
        reasons=reasons,
        replicas=reps,
        end_ms=end,
        tiers=tuple(tiers),
        shared=shared,
        arrival=sim_arr,
    )


def _issue(
    children: dict[int, list[int]], think: list[float], queue: list[tuple[float, int]],
    rid: int, t: float,
) -> None:
    """Closed loop: push the next turns of request ``rid``, answered at ``t``."""
    kids = children.get(rid)
    if kids is not None:
        for c in kids:
            heapq.heappush(queue, (t + think[c], c))


def _drain(
    pre: list[Replica], dec: list[Replica], out: Outputs, children: dict[int, list[int]],
    think: list[float], queue: list[tuple[float, int]],
) -> int:
    """Closed loop: issue the next turns of the requests finished since the last
    drain (prefill instances first, then decode); return how many finished."""
    n = 0
    for reps in (pre, dec):
        for rep in reps:
            if rep.finished:
                for rid in rep.finished:
                    n += 1
                    _issue(children, think, queue, rid, out.finish[rid])
                rep.finished.clear()
    return n


class _Flight:
    """One handoff's transfer (internal to :func:`simulate_disaggregated`): the
    sequence, its prefill and decode instances, the transfer's id on the prefill
    instance's link, and whether the prefill and the transfer are done."""

    __slots__ = ("seq", "p", "d", "prefilled", "delivered", "tid")

    def __init__(self, seq: Seq, p: int, d: int, prefilled: bool, tid: int) -> None:
        self.seq = seq
        self.p = p
        self.d = d
        self.prefilled = prefilled
        self.delivered = False
        self.tid = tid


class _Handoffs:
    """The handoffs of :func:`simulate_disaggregated` (internal): the prefill
    instances' first tokens on their way to a decode instance.

    ``waiting_room`` holds the handoffs waiting for decode room (first come
    first served), ``flight`` the transfers in flight by (link, transfer id),
    ``by_seq`` every placed handoff by request id until it is delivered (a
    layerwise one is placed when its prefill starts). ``pre_wake`` and
    ``link_done`` are the next change of each prefill instance and the next
    delivery of each link, kept current by every call that changes them.
    ``inflight`` counts closed-loop requests with a waiting next turn, routed
    and not finished.
    """

    def __init__(
        self,
        pre: list[Replica],
        dec: list[Replica],
        links: list[Link],
        out: Outputs,
        bs: int,
        kv_bytes_per_token: float,
        layerwise: bool,
    ) -> None:
        self.pre = pre
        self.dec = dec
        self.links = links
        self.out = out
        self.bs = bs
        self.kvb = kv_bytes_per_token
        self.layerwise = layerwise
        self.waiting_room: list[tuple[Seq, int]] = []
        self.flight: dict[tuple[int, int], _Flight] = {}
        self.by_seq: dict[int, _Flight] = {}
        self.inflight = 0
        self.pre_wake: list[float] = [rep.wake() for rep in pre]
        self.link_done: list[float] = [link.next_done() for link in links]

    def next_deliveries(self) -> None:
        """Read every link's next delivery again (estimates may have moved a link)."""
        link_done = self.link_done
        links = self.links
        for p in range(len(links)):
            link_done[p] = links[p].next_done()

    def least_active_with_room(self, need: int, t: float) -> int:
        """The decode instance with room for ``need`` blocks and the fewest active
        ones (ties to the lowest index), brought up to ``t``; -1 if none has room.

        Memory and queue only change where a replica wakes, so only the ones
        waking by ``t`` are advanced to read them (and then the chosen one);
        inside a decode stretch not even those, the memory at ``t`` is read off
        the stretch's plan (:meth:`Replica.kv_at`), as long as no handoff waits
        for room and no closed-loop turn waits for a finish (the loop then
        wakes on decode changes, so it needs every decode wake after ``t``:
        a placement that fails advances the instances read off too).
        """
        dec = self.dec
        best = -1
        best_active = 0
        # (read-offs leave an instance's wake at or before t: only while decode
        # wakes are no event times, see the loop, and never past a failure)
        readoff = not self.waiting_room and not self.inflight
        skipped: list[Replica] = []
        for j in range(len(dec)):
            rep = dec[j]
            kv = rep.kv_at(t) if readoff else -1
            if kv < 0:
                if rep.wake() <= t:
                    rep.advance(t)
                kv = rep.n_private + rep.cache.pinned
            elif rep.wake() <= t:
                skipped.append(rep)
            if rep.capacity - kv < need:
                continue
            act = kv + rep.queued_blocks
            if best < 0 or act < best_active:
                best = j
                best_active = act
        if best >= 0:
            dec[best].advance(t)
        else:  # the handoff waits: the loop then wakes on decode changes
            for rep in skipped:
                rep.advance(t)
        return best

    def place(self, seq: Seq, p: int, t: float, done: bool) -> bool:
        """Reserve decode room for ``seq`` (from prefill instance ``p``) and start its
        transfer at ``t``; False (nothing done) when no decode instance has room."""
        need = -(-(seq.prompt + 1) // self.bs)
        d = self.least_active_with_room(need, t)
        if d < 0:
            return False
        self.dec[d].reserve(need)
        link = self.links[p]
        tid = link.start(t, seq.prompt * self.kvb)
        self.link_done[p] = link.next_done()
        self.out.xfer_start[seq.rid] = t
        rec = _Flight(seq, p, d, done, tid)
        self.flight[(p, tid)] = rec
        self.by_seq[seq.rid] = rec
        return True

    def hand_over(self, rec: _Flight, t: float) -> None:
        """Deliver ``rec``'s sequence at ``t`` (prefill done and transfer delivered)."""
        seq = rec.seq
        p = rec.p
        rep = self.pre[p]
        rep.advance(t)
        rep.release_kv(seq, t)
        self.pre_wake[p] = rep.wake()
        dec = self.dec[rec.d]
        dec.advance(t)
        dec.deliver(seq, t)
        del self.by_seq[seq.rid]

    def call_off(self, seq: Seq, t: float) -> None:
        """A layerwise handoff whose prefill was preempted at ``t`` (its KV is gone).

        The transfer stops and the decode reservation is freed, so the room goes
        to others (a sequence that can't recompute while it holds room the one
        pinning its prefill instance's memory waits for would deadlock); the
        handoff starts again with the recompute.
        """
        rec = self.by_seq.pop(seq.rid, None)
        if rec is None:
            self.waiting_room = [(s, p) for s, p in self.waiting_room if s is not seq]
            return
        p = rec.p
        if not rec.delivered:
            link = self.links[p]
            link.cancel(t, rec.tid)
            self.link_done[p] = link.next_done()
            del self.flight[(p, rec.tid)]
        dec = self.dec[rec.d]
        dec.advance(t)
        dec.unreserve(-(-(seq.prompt + 1) // self.bs), t)

    def handle(self, done: bool | None, seq: Seq, te: float, p: int) -> None:
        """One handoff event of prefill instance ``p`` at ``te``: ``done`` None
        (preempted), False (its prefill starts) or True (its first token)."""
        if done is None:  # preempted
            if self.layerwise:
                self.call_off(seq, te)
            return
        if not done:  # the prefill starts: with layerwise, the KV streams out
            if self.layerwise and not self.place(seq, p, te, False):
                self.waiting_room.append((seq, p))
            return
        rec = self.by_seq.get(seq.rid)
        if rec is not None:  # layerwise, transfer under way or delivered
            rec.prefilled = True
            if rec.delivered:
                self.out.delivered[seq.rid] = te
                self.hand_over(rec, te)
        elif self.layerwise and _waits(self.waiting_room, seq):
            pass  # still waiting for room; placed as a whole when it comes
        elif not self.place(seq, p, te, True):
            self.waiting_room.append((seq, p))


def _waits(waiting_room: list[tuple[Seq, int]], seq: Seq) -> bool:
    """Whether ``seq`` is in ``waiting_room``."""
    for s, _ in waiting_room:
        if s is seq:
            return True
    return False

def _milestones(out: Outputs) -> int:
    """First tokens, deliveries and finishes reached so far (the livelock guard's measure).

    Examples
    --------
    >>> o = Outputs(2)
    >>> o.first_token[0] = o.finish[0] = 1.0
    >>> _milestones(o)
    2
    """
    return sum(
        int(np.isfinite(np.frombuffer(a, dtype=np.float64)).sum())
        for a in (out.first_token, out.delivered, out.finish)
    )


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
