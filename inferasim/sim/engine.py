"""One run of the simulator: build the fleet, run the event loop, check the outputs.

:func:`simulate` is what :meth:`inferasim.sim.Simulator.run` calls once it
has checked its configuration: it builds the replicas (each with its
scheduler, KV manager, decode stretch and recorder), the shared KV tiers,
the routing context and views, the arrival source (open, or a closed loop)
and the topology (aggregated, or prefill/decode with handoffs), runs
:func:`inferasim.sim.loop.run_loop` and returns a :class:`RunOutput` that
:mod:`inferasim.sim.result` turns into frames.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inferasim.sim.arrivals import Columns, OpenArrivals, SessionArrivals
from inferasim.sim.cost import LinearCostModel
from inferasim.sim.fleet import AggregatedFleet, DisaggregatedFleet
from inferasim.sim.handoff import Handoffs
from inferasim.sim.kernels import kernel_of
from inferasim.sim.limits import check_frame_times
from inferasim.sim.loop import check_outputs, run_loop
from inferasim.sim.replica import Replica
from inferasim.sim.roofline import RooflineCostModel
from inferasim.sim.router import Request
from inferasim.sim.sequence import RequestLog
from inferasim.sim.tierconfig import Tier
from inferasim.sim.tiers import PoolLink, TierStore, replica_tiers
from inferasim.sim.transfer import Link, SharedLink
from inferasim.sim.views import RoutingContext
from inferasim.workload import Workload

__all__ = ["simulate", "tier_savings", "TIMELINE_ROWS"]  # (RunOutput: internal)

#: The timeline holds at most about this many rows in all (at least 250 a
#: replica): when a replica reaches its share, the sampling period of every
#: replica doubles and every other sample is dropped (the grid stays regular).
TIMELINE_ROWS = 100_000

#: Cost models whose step_time_ms is a pure function of its arguments: the views'
#: prefill-time estimates are memoised for them (a user's model may count calls).
_PURE_COSTS = (RooflineCostModel, LinearCostModel)


@dataclass
class RunOutput:
    """Raw outputs of one run (turned into frames by :mod:`inferasim.sim.result`)."""

    out: RequestLog
    reasons: dict[int, str]
    replicas: list[Replica]
    end_ms: float
    tiers: tuple[Tier, ...] = ()
    shared: dict[str, TierStore] = field(default_factory=dict)
    arrival: np.ndarray | None = None  # simulated arrivals (closed loop), else None
    sessions: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # id, turn, think


@dataclass(frozen=True)
class Topology:
    """How many replicas of which role, and the handoff links' settings."""

    prefill: int  # replicas serving prefill (all of them when aggregated)
    decode: int = 0  # decode instances (0: aggregated)
    handoff_gbps: float = 50.0
    handoff_latency_us: float = 5.0
    layerwise: bool = False
    handoff_tier: str | None = None  # handoffs on the prefill instances' links to it
    decode_cache: bool = False  # decode instances keep a prefix cache
    decode_tiers: bool = True  # (with decode_cache) and the fleet's tiers behind it


def simulate(
    wl: Workload,
    topology: Topology,
    *,
    router: Any,
    cost: Any,
    capacity: int,
    max_num_seqs: int,
    max_batched_tokens: int,
    chunked_prefill: bool,
    eviction: Any,
    seed: int | None,
    sample_ms: float | None,
    jump: bool,
    progress: bool,
    admission: Any = None,
    tiers: tuple[Tier, ...] = (),
    write_through: bool = False,
    load_policy: str = "faster",
    replicate_hot: int | None = None,
    parent: np.ndarray | None = None,
    think: np.ndarray | None = None,
    rules: Any = None,
) -> RunOutput:
    """Run ``wl`` on the fleet ``topology`` describes; see :class:`inferasim.sim.Simulator`.

    With ``parent`` (closed loop, see :mod:`inferasim.sim.closed_loop`)
    request ``j`` with ``parent[j] >= 0`` arrives at its parent's finish (or
    rejection) plus ``think[j]`` instead of at its recorded arrival. ``rules``
    (an :class:`~inferasim.sim.EngineConfig`) selects the page size and the
    vLLM v1 rules; None keeps one page per hash block and the classic rules.

    Examples
    --------
    >>> from inferasim.sim.router import RoundRobinRouter
    >>> wl = Workload.from_requests([0, 0], [16, 16], [2, 2], block_size=16)
    >>> run = simulate(wl, Topology(2), router=RoundRobinRouter(), cost=LinearCostModel(),
    ...                capacity=8, max_num_seqs=8, max_batched_tokens=64, chunked_prefill=True,
    ...                eviction="lru", seed=0, sample_ms=None, jump=True, progress=False)
    >>> list(run.out.replica), round(run.end_ms, 9)
    ([0, 1], 10.9)
    """
    page = rules.page_for(int(wl.block_size)) if rules is not None else 0
    col = Columns(wl, capacity, sample_ms, page)
    bs = col.bs
    out = RequestLog(col.n, len(tiers))
    live = any(t.capacity_tokens >= bs for t in tiers)
    shared = {t.name: TierStore(t.capacity_tokens // bs, log=True) for t in tiers if t.shared}
    disagg = topology.decode > 0
    kvb = float(getattr(cost, "kv_bytes_per_token", 0.0) or 0.0) if live or disagg else 0.0
    if live and not (math.isfinite(kvb) and kvb > 0):
        raise ValueError(
            f"KV tiers need the KV bytes per token: the cost model has kv_bytes_per_token="
            f"{getattr(cost, 'kv_bytes_per_token', None)!r}; give e.g. "
            "LinearCostModel(kv_bytes_per_token=131072)"
        )
    coupled = any(t.shared and t.capacity_tokens >= bs for t in tiers)
    reps = _replicas(
        col, topology, out, cost, capacity, max_num_seqs, max_batched_tokens, chunked_prefill,
        eviction, jump, tiers, shared, kvb, write_through, load_policy, replicate_hot,
        coupled and not disagg, rules,
    )
    routed = topology.prefill
    saving = tier_savings(cost, tiers, bs, max_batched_tokens, kvb) if live else ()
    ctx = RoutingContext({} if type(cost) in _PURE_COSTS else None, kvb, saving)
    reset = getattr(router, "reset", None)
    if reset is not None:
        reset(routed, seed)
    closed = parent is not None
    arrivals: Any
    if closed:
        assert parent is not None and think is not None
        arrivals = SessionArrivals(col, parent, think)
    else:
        arrivals = OpenArrivals(col)
    fleet: Any
    if disagg:
        nics = _handoff_nics(reps[:routed], topology.handoff_tier, bs)
        links: list[Any] = nics if nics is not None else [
            Link(topology.handoff_gbps, topology.handoff_latency_us) for _ in range(routed)
        ]
        hs = Handoffs(reps[:routed], reps[routed:], links, out, col.page, kvb, topology.layerwise,
                      nics, topology.handoff_gbps, topology.decode_cache)
        # decode instances on a shared tier (they have the fleet's tiers): their
        # changes are events of the loop (Handoffs.busy) and they run single steps
        # while requests wait (``coupled``), so every instance reads and writes the
        # shared store at its own times, in both loops alike
        hs.eager = coupled and reps[routed].kv.tiers is not None
        for rep in reps[routed:]:
            rep.decode_cache = topology.decode_cache
            rep.coupled = hs.eager
        fleet = DisaggregatedFleet(
            reps[:routed], reps[routed:], hs, col, out, ctx, router, admission, Request,
            arrivals, closed,
        )
    else:
        fleet = AggregatedFleet(
            reps, col, out, ctx, router, admission, Request, arrivals, coupled, closed
        )
    bar = _progress_bar(col.n, progress)
    run_loop(fleet, arrivals, col.n, bar, out)
    if bar is not None:
        bar.update(col.n - bar.n)
        bar.close()
    fin = np.frombuffer(out.finish, dtype=np.float64)
    end = float(np.nanmax(fin)) if np.isfinite(fin).any() else col.t0
    stop = math.nextafter(end, math.inf)
    for rep in reps:
        if rep.rec.next_sample < stop:
            rep.rec.emit(stop, rep.sched.timeline_row())
    sim_arr = arrivals.arrival if closed else None
    check_outputs(out, col.arrival if sim_arr is None else sim_arr, col.reasons, reps)
    check_frame_times(fin, np.frombuffer(out.first_token, dtype=np.float64))
    return RunOutput(
        out=out, reasons=col.reasons, replicas=reps, end_ms=end, tiers=tuple(tiers),
        shared=shared, arrival=sim_arr,
    )


def _handoff_nics(pre: list[Replica], tier: str | None, bs: int) -> list[SharedLink] | None:
    """The prefill instances' write links to ``tier`` (None: no tier named), which
    carry their handoffs too; a ValueError when the tier holds no block."""
    if tier is None:
        return None
    nics: list[SharedLink] = []
    for rep in pre:
        rt = rep.kv.tiers
        k = next((j for j, t in enumerate(rt.tiers) if t.name == tier), -1) if rt else -1
        if rt is None or k < 0 or rt.tiers[k].capacity_tokens < bs:
            raise ValueError(
                f"replicas.handoff_tier={tier!r} names no KV tier holding a block of {bs} "
                f"tokens; name one of the tiers (Tier(name=...)) or leave it None"
            )
        link = rt.wlinks[k]
        assert isinstance(link, SharedLink)
        nics.append(link)
    return nics


def _replicas(
    col: Columns, topology: Topology, out: RequestLog, cost: Any, capacity: int,
    max_num_seqs: int, max_batched_tokens: int, chunked_prefill: bool, eviction: Any,
    jump: bool, tiers: tuple[Tier, ...], shared: dict[str, TierStore], kvb: float,
    write_through: bool, load_policy: str, replicate_hot: int | None, coupled: bool,
    rules: Any = None,
) -> list[Replica]:
    """The fleet's replicas (prefill instances first), on one timeline grid."""
    bs = col.bs
    live = any(t.capacity_tokens >= bs for t in tiers)
    disagg = topology.decode > 0
    reads: dict[str, dict[int, int]] = {}  # reads of each shared block (replicate_hot)
    # the fleet-wide link of each shared tier with an aggregate bandwidth
    pool_links = {
        t.name: PoolLink(t) for t in tiers if t.shared and t.pool_gbps is not None
    }
    kernel = kernel_of(cost)
    total = topology.prefill + topology.decode
    reps: list[Replica] = []
    for r in range(total):
        role = "both" if not disagg else "prefill" if r < topology.prefill else "decode"
        nic = topology.handoff_tier if role == "prefill" else None
        # a decode instance keeps nothing without decode_cache: no tiers then; with
        # it, its transfers to a shared tier run on its own link alone, off the
        # pool-wide one (a handoff placed at a first token just before an instant
        # would start its reads there behind the prefill instances' transfers of
        # that instant)
        rt = (
            replica_tiers(tiers, shared, bs, kvb, replicate_hot, reads,
                          pool_links if role != "decode" else None, nic)
            if live and (role != "decode" or (topology.decode_cache and topology.decode_tiers))
            else None
        )
        reps.append(
            Replica(
                r, cost=cost, kernel=kernel, block_size=bs, capacity=capacity,
                max_num_seqs=max_num_seqs, max_batched_tokens=max_batched_tokens,
                chunked_prefill=chunked_prefill,
                eviction=eviction if isinstance(eviction, str) else copy.deepcopy(eviction),
                out=out, period=col.sample_ms, t0=col.t0, jump=jump, role=role, tiers=rt,
                write_through=write_through, load_always=load_policy == "always",
                rules=rules,
            )
        )
    cap = max(250, TIMELINE_ROWS // total)
    recorders = [rep.rec for rep in reps]
    for rep in reps:  # one timeline grid for the fleet, capped (see TIMELINE_ROWS)
        rep.rec.peers = recorders
        rep.rec.cap = cap
        rep.coupled = coupled
        rt = rep.kv.tiers
        rep.private_stretches = coupled and rt is not None and not rt.evictions_shared
    return reps


def _progress_bar(n: int, progress: bool) -> Any:
    """A tqdm bar over the requests, or None."""
    if not (progress and n):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=n, delay=1.0, unit="req", desc="simulate", leave=False)


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
