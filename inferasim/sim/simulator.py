"""The public :class:`Simulator`: configure a fleet once, run any workload."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from inferasim.sim.admission import make_admission
from inferasim.sim.cache import EVICTION_POLICIES
from inferasim.sim.engine import MIN_TIMELINE_MS, simulate, simulate_disaggregated
from inferasim.sim.result import SimResult
from inferasim.sim.router import make_router
from inferasim.sim.tierconfig import Tier, check_tiers
from inferasim.workload import Workload

__all__ = ["Simulator"]


class Simulator:
    """A fleet of identical LLM serving replicas with prefix caching and routing.

    Each replica runs a vLLM-v1-style continuous-batching scheduler (FCFS
    queue, chunked prefill, preemption of the most recently admitted sequence
    when KV memory runs out) over its own content-addressed KV block cache;
    a router places every request on a replica at its arrival. The
    constructor only stores parameters; :meth:`run` checks them.

    Parameters
    ----------
    replicas : int, default 1
        Number of identical replicas.
    routing : str or callable, default "kv_cost"
        ``"round_robin"``, ``"random"``, ``"least_loaded"``, ``"cache_aware"``,
        ``"kv_cost"``, or ``f(request, replicas) -> int``; see
        :mod:`inferasim.sim.router`.
    cost_model : object, optional
        Anything with ``step_time_ms(...)`` and ``kv_capacity_blocks(block_size)``
        (see :mod:`inferasim.sim.cost`). Default:
        ``RooflineCostModel("llama-3.1-8b", "h100-80gb")``.
    kv_blocks : int, optional
        KV blocks per replica (blocks of the workload's ``block_size``),
        shared by running sequences and the prefix cache. Default: the cost
        model's ``kv_capacity_blocks``. A very large number means unbounded.
    eviction : {"lru", "fifo", "lfu", "length_aware"}, default "lru"
        Which evictable cached block goes when a new block is needed;
        ``"length_aware"`` is the Mooncake paper's policy (fewest hits first,
        then the block deepest in its prompt; see :mod:`inferasim.sim.cache`).
    max_num_seqs : int, default 256
        Running sequences per replica at most.
    max_batched_tokens : int, default 8192
        Tokens per engine step at most (decode tokens plus prefill chunks).
    chunked_prefill : bool, default True
        Split prompts into chunks across steps; False prefills whole prompts
        (a prompt longer than ``max_batched_tokens`` then runs in a step of
        its own).
    overlap_weight, temperature : float
        Parameters of the ``"kv_cost"`` router (defaults 1.0 and 0.0).
    seed : int, default 0
        Seed of random routing and softmax sampling.
    timeline_ms : float, optional
        Sampling period of :attr:`SimResult.timeline` (at least 0.001 ms);
        default 1/1000 of the arrival span (at least 0.001 ms). The timeline
        is capped at about 100,000 rows (at least 250 a replica): a run that
        would sample more doubles the period, keeping every other sample,
        until it fits; ``config["timeline_ms"]`` holds the period used.
    progress : bool, default True
        Show a progress bar (``tqdm.auto``) on runs longer than a second.
    fast : bool, default True
        Advance pure-decode stretches in one jump. False runs every step on
        its own (the reference loop; same frames, much slower).
    tiers : list of Tier, optional
        KV tiers below each replica's HBM, in lookup order (host DRAM, SSD,
        a ``shared=True`` pool); see :class:`~inferasim.sim.tierconfig.Tier` and
        "What is modelled" in :mod:`inferasim.sim`. Transfers need the cost
        model's ``kv_bytes_per_token``.
    write_through : bool, default False
        Also write every block a prefill computes to the first tier when its
        step ends (as Mooncake publishes KV to its store); otherwise blocks
        only go down when HBM evicts them.
    load_policy : {"faster", "always"}, default "faster"
        Load the blocks a request finds in lower tiers only when the load
        (on the links as they are) would end sooner than recomputing them
        takes (the cost model's marginal prefill time), or always.
    replicate_hot_blocks : int, optional
        Copy hot blocks of a shared tier into the reading replica's own
        tier: a block loaded from a shared tier (the pool) counts one read
        (fleet-wide); when its count exceeds this number, the reader also
        writes it into its first own tier (host DRAM) as the load starts
        (that tier's link carries the bytes, like an offload write; no step
        waits for it), and with this option a replica looks a block up in
        its own tiers before the shared ones, so its next request loads the
        copy over the faster local link. Needs a tier of the replica's own
        and a shared tier. ``0`` copies on every read; None (default) never.
    admission : None, "slo" or callable, default None
        Which arriving requests are served (see :mod:`inferasim.sim.admission`).
        None admits all; ``"slo"`` rejects at arrival a request whose
        predicted TTFT on its instance exceeds ``slo_ttft_ms`` or whose
        predicted TPOT exceeds ``slo_tpot_ms`` (Mooncake's early rejection);
        a callable ``admit(request, views, now) -> bool`` decides itself.
        Rejected requests keep their row (``status="rejected"``, a
        ``reason``) and consume nothing.
    slo_ttft_ms, slo_tpot_ms : float, optional
        The objectives of ``admission="slo"``.
    prefill_replicas, decode_replicas : int, optional
        Give both for a disaggregated fleet (then ``replicas`` is unused):
        ``prefill_replicas`` instances run prompts (chunked, each with its
        own prefix cache) and sample the first token; the KV of the prompt
        is then handed off to one of ``decode_replicas`` instances, which
        generate the rest. See :func:`inferasim.sim.engine.simulate_disaggregated`
        for the handoff (decode memory reserved before the transfer; the KV
        stays pinned on the prefill instance while no decode instance has
        room). Routing and admission place requests on prefill instances.
    handoff_gbps : float, default 50.0
        Bandwidth of each prefill instance's handoff link (GB/s), shared by
        its transfers in flight (one 400 Gb/s NIC).
    handoff_latency_us : float, default 5.0
        Latency of a handoff transfer (us).
    layerwise : bool, default False
        Stream the KV while the prefill runs (as Mooncake does layer by
        layer): the transfer starts with the prefill and the sequence moves
        at the later of the prefill's and the transfer's end.
    closed_loop : bool, default False
        Replay conversations as closed loops: a session's next turn is sent
        when the previous answer has arrived (its finish, or its rejection)
        plus a think time, instead of at its recorded time; first turns
        keep their recorded arrivals. Sessions come from the workload's
        ``session_id`` / ``turn`` columns, else from the chains
        :func:`inferasim.reuse.sessions` infers from the hash ids. See
        :mod:`inferasim.sim.closed_loop`. The think-time estimate prices
        a turn as on an aggregated replica (no handoff) also for a
        disaggregated fleet.
    think_time : None, float, array or callable, optional
        Closed loop only. None: the recorded gap minus the previous turn's
        service time alone on an idle replica (never negative); a number of
        ms; one value per request; or a callable (see
        :func:`inferasim.sim.closed_loop.think_times`).

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(200, rate=20.0, input_len=1024, output_len=32,
    ...                                  num_prefixes=4, prefix_len=512, seed=0)
    >>> sim = ism.Simulator(replicas=2, routing="cache_aware", kv_blocks=64,
    ...                     cost_model=ism.LinearCostModel(), progress=False)
    >>> res = sim.run(wl)
    >>> len(res.requests), int(res.replicas["requests"].sum())
    (200, 200)

    A host-DRAM tier behind a small HBM (the cost model needs the KV bytes
    per token to time transfers):

    >>> cost = ism.LinearCostModel(kv_bytes_per_token=131072)
    >>> dram = ism.Tier("dram", capacity_tokens=65536, read_gbps=50.0, write_gbps=50.0)
    >>> res = ism.Simulator(replicas=2, kv_blocks=8, cost_model=cost, tiers=[dram],
    ...                     progress=False).run(wl)
    >>> s = res.summary()
    >>> bool(s["dram_token_hit_ratio"] > 0), bool(res.requests["load_ms"].max() > 0)
    (True, True)

    A closed loop: turn 2 of session 7 was recorded 100 ms after turn 1;
    turn 1 takes 16.8 ms alone, so the user thought 83.2 ms; on a fleet
    where turn 1 waits behind another request, turn 2 comes later:

    >>> wl = ism.Workload.from_requests([0, 0, 100], [32, 32, 48], [3, 3, 1],
    ...                                 session_id=[1, 7, 7], block_size=16)
    >>> res = ism.Simulator(kv_blocks=16, max_num_seqs=1, max_batched_tokens=32,
    ...                     cost_model=ism.LinearCostModel(), closed_loop=True,
    ...                     progress=False).run(wl)
    >>> res.requests[["turn", "think_ms", "arrival_ms", "arrival_shift_ms"]].round(3).values.tolist()
    [[1.0, nan, 0.0, 0.0], [1.0, nan, 0.0, 0.0], [2.0, 83.2, 116.8, 16.8]]
    """

    def __init__(
        self,
        replicas: int = 1,
        *,
        routing: str | Callable[..., int] = "kv_cost",
        cost_model: Any = None,
        kv_blocks: int | None = None,
        eviction: str = "lru",
        max_num_seqs: int = 256,
        max_batched_tokens: int = 8192,
        chunked_prefill: bool = True,
        overlap_weight: float = 1.0,
        temperature: float = 0.0,
        seed: int | None = 0,
        timeline_ms: float | None = None,
        progress: bool = True,
        fast: bool = True,
        tiers: list[Tier] | tuple[Tier, ...] | None = None,
        write_through: bool = False,
        load_policy: str = "faster",
        replicate_hot_blocks: int | None = None,
        admission: str | Callable[..., bool] | None = None,
        slo_ttft_ms: float | None = None,
        slo_tpot_ms: float | None = None,
        prefill_replicas: int | None = None,
        decode_replicas: int | None = None,
        handoff_gbps: float = 50.0,
        handoff_latency_us: float = 5.0,
        layerwise: bool = False,
        closed_loop: bool = False,
        think_time: Any = None,
    ) -> None:
        self.replicas = replicas
        self.routing = routing
        self.cost_model = cost_model
        self.kv_blocks = kv_blocks
        self.eviction = eviction
        self.max_num_seqs = max_num_seqs
        self.max_batched_tokens = max_batched_tokens
        self.chunked_prefill = chunked_prefill
        self.overlap_weight = overlap_weight
        self.temperature = temperature
        self.seed = seed
        self.timeline_ms = timeline_ms
        self.progress = progress
        self.fast = fast
        self.tiers = tiers
        self.write_through = write_through
        self.load_policy = load_policy
        self.replicate_hot_blocks = replicate_hot_blocks
        self.admission = admission
        self.slo_ttft_ms = slo_ttft_ms
        self.slo_tpot_ms = slo_tpot_ms
        self.prefill_replicas = prefill_replicas
        self.decode_replicas = decode_replicas
        self.handoff_gbps = handoff_gbps
        self.handoff_latency_us = handoff_latency_us
        self.layerwise = layerwise
        self.closed_loop = closed_loop
        self.think_time = think_time

    def __repr__(self) -> str:
        return (
            f"Simulator(replicas={self.replicas}, routing={self.routing!r}, "
            f"kv_blocks={self.kv_blocks}, eviction={self.eviction!r})"
        )

    def _cost(self) -> Any:
        cost = self.cost_model
        if cost is None:
            from inferasim.sim.roofline import RooflineCostModel

            cost = RooflineCostModel()
        for name in ("step_time_ms", "kv_capacity_blocks"):
            if not callable(getattr(cost, name, None)):
                raise TypeError(f"cost_model needs a {name}() method, got {cost!r}")
        return cost

    def _check(self) -> None:
        def positive_int(name: str) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")

        for name in ("replicas", "max_num_seqs", "max_batched_tokens"):
            positive_int(name)
        if (self.prefill_replicas is None) != (self.decode_replicas is None):
            raise ValueError("give both prefill_replicas= and decode_replicas=, or neither")
        if self.prefill_replicas is not None:
            positive_int("prefill_replicas")
            positive_int("decode_replicas")
            for name in ("handoff_gbps", "handoff_latency_us"):
                v = getattr(self, name)
                if not (isinstance(v, numbers.Real) and math.isfinite(v) and v >= 0) or (
                    name == "handoff_gbps" and v == 0
                ):
                    raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if self.kv_blocks is not None:
            positive_int("kv_blocks")
            if self.kv_blocks >= 2**62:
                raise ValueError(
                    f"kv_blocks must be < 2**62, got {self.kv_blocks!r} "
                    "(any count above the blocks a workload can touch already means unbounded)"
                )
        for name in ("replicas", "max_num_seqs", "max_batched_tokens"):
            if getattr(self, name) >= 2**62:
                raise ValueError(f"{name} must be < 2**62, got {getattr(self, name)!r}")
        if self.max_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_batched_tokens ({self.max_batched_tokens}) must be >= max_num_seqs "
                f"({self.max_num_seqs}): every running sequence needs a token each step"
            )
        if self.eviction not in EVICTION_POLICIES:
            raise ValueError(f"eviction must be one of {EVICTION_POLICIES}, got {self.eviction!r}")
        if self.timeline_ms is not None and not (
            isinstance(self.timeline_ms, numbers.Real)
            and not isinstance(self.timeline_ms, bool)
            and MIN_TIMELINE_MS <= self.timeline_ms < math.inf
        ):
            raise ValueError(
                f"timeline_ms must be a finite number >= {MIN_TIMELINE_MS} ms, got {self.timeline_ms!r}"
            )
        check_tiers(self.tiers)
        if self.load_policy not in ("faster", "always"):
            raise ValueError(
                f"load_policy must be 'faster' or 'always', got {self.load_policy!r}"
            )
        hot = self.replicate_hot_blocks
        if hot is not None:
            if isinstance(hot, bool) or not isinstance(hot, numbers.Integral) or hot < 0:
                raise ValueError(f"replicate_hot_blocks must be None or an int >= 0, got {hot!r}")
            tiers = check_tiers(self.tiers)
            if not any(not t.shared for t in tiers):
                raise ValueError(
                    "replicate_hot_blocks copies hot pool blocks into the reading replica's own "
                    "tier, and tiers= has none: add one, e.g. Tier('dram', 3_000_000, "
                    "read_gbps=50.0, write_gbps=50.0)"
                )
            if not any(t.shared for t in tiers):
                raise ValueError(
                    "replicate_hot_blocks copies blocks read from a shared tier, and tiers= has "
                    "none: add one with shared=True"
                )
        if not isinstance(self.write_through, bool):
            raise ValueError(f"write_through must be a bool, got {self.write_through!r}")
        if not isinstance(self.closed_loop, bool):
            raise ValueError(f"closed_loop must be a bool, got {self.closed_loop!r}")
        if self.think_time is not None and not self.closed_loop:
            raise ValueError("think_time is only used with closed_loop=True")

    def run(self, workload: Workload) -> SimResult:
        """Replay a workload through the fleet.

        Parameters
        ----------
        workload : Workload
            Requests with arrival times, lengths and (optionally) hash ids.
            Without hash ids every request gets private blocks (no reuse).

        Returns
        -------
        SimResult
            Frames with one row per request, per replica and per timeline
            sample, and :meth:`SimResult.summary`.

        Examples
        --------
        >>> import inferasim as ism
        >>> wl = ism.Workload.from_requests([0, 5000], [1024, 1024], [4, 4],
        ...                                 [[1, 2], [1, 3]], block_size=512)
        >>> res = ism.Simulator(kv_blocks=16, cost_model=ism.LinearCostModel(),
        ...                     progress=False).run(wl)
        >>> res.requests["cached_tokens"].tolist()
        [0, 512]
        """
        if not isinstance(workload, Workload):
            raise TypeError(f"run() needs a Workload, got {type(workload).__name__}")
        self._check()
        cost = self._cost()
        capacity = self.kv_blocks
        if capacity is None:
            capacity = cost.kv_capacity_blocks(workload.block_size)
            if capacity is None:
                raise ValueError(
                    "the cost model does not know the KV memory: give kv_blocks= "
                    "(blocks per replica)"
                )
            if capacity < 1:
                raise ValueError(
                    f"the cost model leaves no KV memory ({capacity} blocks): the weights do not "
                    "fit, use a larger GPU or tensor parallelism"
                )
        admit = make_admission(
            self.admission, slo_ttft_ms=self.slo_ttft_ms, slo_tpot_ms=self.slo_tpot_ms
        )
        router = make_router(
            self.routing,
            overlap_weight=self.overlap_weight,
            temperature=self.temperature,
            block_size=workload.block_size,
        )
        tiers = check_tiers(self.tiers)
        common = dict(
            router=router,
            cost=cost,
            capacity=int(capacity),
            max_num_seqs=int(self.max_num_seqs),
            max_batched_tokens=int(self.max_batched_tokens),
            chunked_prefill=bool(self.chunked_prefill),
            eviction=self.eviction,
            seed=self.seed,
            sample_ms=self.timeline_ms,
            jump=bool(self.fast),
            progress=bool(self.progress),
            admission=admit,
            tiers=tiers,
            write_through=self.write_through,
            load_policy=self.load_policy,
            replicate_hot=None if self.replicate_hot_blocks is None else int(self.replicate_hot_blocks),
        )
        disagg = self.prefill_replicas is not None
        loop: dict[str, Any] = {}
        if self.closed_loop:
            from inferasim.sim.closed_loop import session_links, think_times

            links = session_links(workload)
            think = think_times(
                workload,
                links,
                cost,
                self.think_time,
                max_batched_tokens=int(self.max_batched_tokens),
                chunked_prefill=bool(self.chunked_prefill),
            )
            loop = {"parent": links.parent, "think": np.nan_to_num(think, nan=0.0)}
        if disagg:
            kvb = getattr(cost, "kv_bytes_per_token", None)
            if not isinstance(kvb, numbers.Real) or not kvb >= 0:
                raise ValueError(
                    f"a disaggregated fleet needs the cost model's kv_bytes_per_token, got {kvb!r}"
                )
            run = simulate_disaggregated(
                workload,
                prefill_replicas=int(self.prefill_replicas),
                decode_replicas=int(self.decode_replicas),
                kv_bytes_per_token=float(kvb),
                handoff_gbps=float(self.handoff_gbps),
                handoff_latency_us=float(self.handoff_latency_us),
                layerwise=bool(self.layerwise),
                **common,
                **loop,
            )
        else:
            run = simulate(workload, num_replicas=int(self.replicas), **common, **loop)
        if self.closed_loop:
            run.sessions = (links.session_id, links.turn, think)
        config = {
            "replicas": int(self.replicas),
            "routing": self.routing if isinstance(self.routing, str) else repr(self.routing),
            "cost_model": repr(cost),
            "kv_blocks": int(capacity),
            "block_size": workload.block_size,
            "eviction": self.eviction,
            "max_num_seqs": int(self.max_num_seqs),
            "max_batched_tokens": int(self.max_batched_tokens),
            "chunked_prefill": bool(self.chunked_prefill),
            "seed": self.seed,
            "admission": self.admission
            if self.admission is None or isinstance(self.admission, str)
            else repr(self.admission),
            "slo_ttft_ms": self.slo_ttft_ms,
            "slo_tpot_ms": self.slo_tpot_ms,
            "timeline_ms": run.replicas[0].period if run.replicas else self.timeline_ms,
        }
        if self.closed_loop:
            config["closed_loop"] = True
            config["think_time"] = (
                self.think_time
                if self.think_time is None or isinstance(self.think_time, int | float)
                else repr(self.think_time)
            )
        if disagg:
            config.update(
                replicas=int(self.prefill_replicas) + int(self.decode_replicas),
                prefill_replicas=int(self.prefill_replicas),
                decode_replicas=int(self.decode_replicas),
                handoff_gbps=float(self.handoff_gbps),
                handoff_latency_us=float(self.handoff_latency_us),
                layerwise=bool(self.layerwise),
            )
        if tiers:
            config["tiers"] = list(tiers)
            config["write_through"] = self.write_through
            config["load_policy"] = self.load_policy
            if self.replicate_hot_blocks is not None:
                config["replicate_hot_blocks"] = int(self.replicate_hot_blocks)
        return SimResult._build(workload, run, config)
