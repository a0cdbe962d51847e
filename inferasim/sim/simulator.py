"""The public :class:`Simulator`: configure a fleet once, run any workload."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferasim._validate import MAX_TIME_MS, real
from inferasim._validate import seed as check_seed
from inferasim.sim.admission import make_admission
from inferasim.sim.arrivals import MIN_TIMELINE_MS
from inferasim.sim.cache import make_policy
from inferasim.sim.config import Disaggregated, EngineConfig, _positive_int
from inferasim.sim.config import get_params as _get_params
from inferasim.sim.config import set_params as _set_params
from inferasim.sim.engine import Topology, simulate
from inferasim.sim.limits import check_run_durations
from inferasim.sim.result import SimResult
from inferasim.sim.router import make_router
from inferasim.sim.tierconfig import Tier, Tiers, as_tiers
from inferasim.workload import Workload

__all__ = ["Simulator"]


class Simulator:
    """A fleet of LLM serving replicas with prefix caching and routing.

    Each replica runs a vLLM-v1-style continuous-batching scheduler (FCFS
    queue, chunked prefill, preemption of the most recently admitted sequence
    when KV memory runs out) over its own content-addressed KV block cache;
    a router places every request on a replica at its arrival. The
    constructor only stores its parameters; :meth:`run` checks them.
    :meth:`get_params` and :meth:`set_params` read and change them by name,
    nested settings by ``outer__inner`` keys (``"engine__max_num_seqs"``).

    Parameters
    ----------
    replicas : int or Disaggregated, default 1
        Identical replicas serving prefill and decode (an int), or a fleet
        split into prefill and decode instances with a KV handoff between
        them (:class:`~inferasim.sim.config.Disaggregated`).
    routing : str or callable, default "kv_cost"
        ``"round_robin"``, ``"random"``, ``"least_loaded"``, ``"cache_aware"``,
        ``"kv_cost"``, ``"longest_match"``, ``"conductor"``, a router object
        such as ``KvCostRouter(overlap_weight=2.0)``, or any
        ``f(request, replicas) -> int``; see :mod:`inferasim.sim.router`.
    cost_model : object, optional
        Anything with ``step_time_ms(...)`` and ``kv_capacity_blocks(block_size)``
        (see :mod:`inferasim.sim.cost`). Default:
        ``RooflineCostModel("llama-3.1-8b", "h100-80gb")``.
    kv_tokens : int, optional
        KV memory per replica in tokens, shared by running sequences and the
        prefix cache (whole KV pages count: 16 tokens under the default
        ``EngineConfig``, see ``EngineConfig.page_tokens``).
        Default: what the cost model says fits next to the weights. A very
        large number means unbounded.
    engine : EngineConfig, optional
        The replicas' scheduler settings (batch limits, chunked prefill, the
        four engine rules); default ``EngineConfig()``, vLLM v1's rules.
    eviction : {"lru", "fifo", "lfu", "length_aware"} or EvictionPolicy, default "lru"
        Which evictable cached block goes when a new block is needed;
        ``"length_aware"`` is the Mooncake paper's policy (fewest hits first,
        then the block deepest in its prompt; see :mod:`inferasim.sim.cache`),
        or an object following :class:`~inferasim.sim.eviction.EvictionPolicy`
        (each replica gets its own copy).
    tiers : list of Tier or Tiers, optional
        KV tiers below each replica's HBM, in lookup order (host DRAM, SSD,
        a ``shared=True`` pool); see :class:`~inferasim.sim.tierconfig.Tier`,
        :class:`~inferasim.sim.tierconfig.Tiers` and "What is modelled" in
        :mod:`inferasim.sim`. Transfers need the cost model's
        ``kv_bytes_per_token``.
    admission : callable, optional
        Which arriving requests are served (see :mod:`inferasim.sim.admission`):
        None admits all; :class:`~inferasim.sim.admission.SloAdmission`
        rejects at arrival a request whose predicted TTFT or TPOT misses its
        objective (Mooncake's early rejection); any ``admit(request, views,
        now) -> bool`` decides itself. Rejected requests keep their row
        (``status="rejected"``, a ``reason``) and consume nothing.
    seed : int or None, default 0
        Seed of random routing and softmax sampling: an integer in ``[0,
        2**64)``, or None for fresh randomness.
    fast : bool, default True
        Advance pure-decode stretches in one jump. False runs every step on
        its own (the reference loop; same frames, much slower).

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(200, rate=20.0, input_len=1024, output_len=32,
    ...                                  num_prefixes=4, prefix_len=512, seed=0)
    >>> sim = ism.Simulator(replicas=2, routing="cache_aware", kv_tokens=64 * 512,
    ...                     cost_model=ism.LinearCostModel())
    >>> res = sim.run(wl, progress=False)
    >>> len(res.requests), int(res.replicas["requests"].sum())
    (200, 200)

    A host-DRAM tier behind a small HBM (the cost model needs the KV bytes
    per token to time transfers):

    >>> cost = ism.LinearCostModel(kv_bytes_per_token=131072)
    >>> dram = ism.Tier("dram", capacity_tokens=65536, read_gbps=50.0, write_gbps=50.0)
    >>> res = ism.Simulator(replicas=2, kv_tokens=8 * 512, cost_model=cost,
    ...                     tiers=[dram]).run(wl, progress=False)
    >>> bool(res.tiers.loc["dram", "token_hit_ratio"] > 0), bool(res.requests["load_ms"].max() > 0)
    (True, True)

    A closed loop: turn 2 of session 7 was recorded 100 ms after turn 1;
    turn 1 takes 16.8 ms alone, so the user thought 83.2 ms; on a fleet
    where turn 1 waits behind another request, turn 2 comes later:

    >>> wl = ism.Workload.from_requests([0, 0, 100], [32, 32, 48], [3, 3, 1],
    ...                                 session_id=[1, 7, 7], block_size=16)
    >>> sim = ism.Simulator(kv_tokens=256, engine=ism.EngineConfig(max_num_seqs=1,
    ...                     max_batched_tokens=32), cost_model=ism.LinearCostModel())
    >>> res = sim.run(wl, closed_loop=True, progress=False)
    >>> res.requests[["turn", "think_ms", "arrival_ms", "arrival_shift_ms"]].round(3).values.tolist()
    [[1.0, nan, 0.0, 0.0], [1.0, nan, 0.0, 0.0], [2.0, 83.2, 116.8, 16.8]]
    """

    def __init__(
        self,
        replicas: int | Disaggregated = 1,
        *,
        routing: str | Callable[..., int] = "kv_cost",
        cost_model: Any = None,
        kv_tokens: int | None = None,
        engine: EngineConfig | None = None,
        eviction: str = "lru",
        tiers: Tiers | list[Tier] | tuple[Tier, ...] | None = None,
        admission: Callable[..., bool] | None = None,
        seed: int | None = 0,
        fast: bool = True,
    ) -> None:
        self.replicas = replicas
        self.routing = routing
        self.cost_model = cost_model
        self.kv_tokens = kv_tokens
        self.engine = engine
        self.eviction = eviction
        self.tiers = tiers
        self.admission = admission
        self.seed = seed
        self.fast = fast

    def __repr__(self) -> str:
        shown = [f"replicas={self.replicas!r}"]
        for name, default in (("routing", "kv_cost"), ("kv_tokens", None), ("engine", None),
                              ("eviction", "lru"), ("tiers", None), ("admission", None),
                              ("seed", 0), ("fast", True)):
            value = getattr(self, name)
            if value is not default and value != default:
                shown.append(f"{name}={value!r}")
        if self.cost_model is not None:
            shown.append(f"cost_model={self.cost_model!r}")
        return f"Simulator({', '.join(shown)})"

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters by name; with ``deep``, nested ones as ``a__b``.

        Examples
        --------
        >>> from inferasim.sim import EngineConfig, Simulator
        >>> p = Simulator(engine=EngineConfig(max_num_seqs=8)).get_params()
        >>> p["replicas"], p["engine__max_num_seqs"]
        (1, 8)
        """
        names = ("replicas", "routing", "cost_model", "kv_tokens", "engine", "eviction",
                 "tiers", "admission", "seed", "fast")
        out = {name: getattr(self, name) for name in names}
        if deep:
            for name in names:
                value = out[name]
                if name == "engine" and value is None:
                    value = EngineConfig()
                if name == "tiers" and isinstance(value, Tiers):
                    continue
                if not isinstance(value, str | int | float | bool | list | tuple | type(None)):
                    for key, inner in _get_params(value, deep=True).items():
                        out[f"{name}__{key}"] = inner
        return out

    def set_params(self, **params: Any) -> Simulator:
        """Change parameters by name (nested ones by ``a__b`` keys); returns ``self``.

        A nested object is replaced by a changed copy, never changed in
        place, so objects shared with other simulators stay as they were.

        Examples
        --------
        >>> from inferasim.sim import Simulator
        >>> sim = Simulator().set_params(replicas=4, engine__max_num_seqs=64)
        >>> sim.replicas, sim.engine.max_num_seqs
        (4, 64)
        >>> Simulator().set_params(replica=4)
        Traceback (most recent call last):
        ...
        ValueError: Simulator has no parameter 'replica'; it has replicas, routing, cost_model, kv_tokens, engine, eviction, tiers, admission, seed, fast
        """
        names = list(self.get_params(deep=False))
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            head, _, rest = key.partition("__")
            if head not in names:
                raise ValueError(
                    f"Simulator has no parameter {head!r}; it has {', '.join(names)}"
                )
            if rest:
                nested.setdefault(head, {})[rest] = value
            else:
                setattr(self, head, value)
        for head, inner in nested.items():
            base = getattr(self, head)
            if head == "engine" and base is None:
                base = EngineConfig()
            if head == "routing" and isinstance(base, str):
                base = make_router(base)
            setattr(self, head, _set_params(base, **inner))
        return self

    def run(
        self,
        workload: Workload,
        *,
        closed_loop: bool = False,
        think_time: Any = None,
        timeline_ms: float | None = None,
        progress: bool = True,
    ) -> SimResult:
        """Replay a workload through the fleet.

        Parameters
        ----------
        workload : Workload
            Requests with arrival times, lengths and (optionally) hash ids.
            Without hash ids every request gets private blocks (no reuse).
        closed_loop : bool, default False
            Replay conversations as closed loops: a session's next turn is
            sent when the previous answer has arrived (its finish, or its
            rejection) plus a think time, instead of at its recorded time;
            first turns keep their recorded arrivals. Sessions come from the
            workload's ``session_id`` / ``turn`` columns, else from the chains
            :func:`inferasim.reuse.sessions` infers from the hash ids. See
            :mod:`inferasim.sim.closed_loop`. The think-time estimate prices a
            turn as on an aggregated replica (no handoff) also for a
            disaggregated fleet.
        think_time : None, float, array or callable, optional
            Closed loop only. None: the recorded gap minus the previous
            turn's service time alone on an idle replica (never negative); a
            number of ms; one value per request; or a callable (see
            :func:`inferasim.sim.closed_loop.think_times`).
        timeline_ms : float, optional
            Sampling period of :attr:`SimResult.timeline` (at least 0.001 ms,
            at most 2**43 ms);
            default 1/1000 of the arrival span (at least 0.001 ms). The
            timeline is capped at about 100,000 rows (at least 250 a replica):
            a run that would sample more doubles the period, keeping every
            other sample, until it fits; ``config["timeline_ms"]`` holds the
            period used.
        progress : bool, default True
            Show a progress bar (``tqdm.auto``) on runs longer than a second.

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
        >>> res = ism.Simulator(kv_tokens=16 * 512, cost_model=ism.LinearCostModel()).run(
        ...     wl, progress=False)
        >>> res.requests["cached_tokens"].tolist()
        [0, 512]
        """
        if not isinstance(workload, Workload):
            raise TypeError(f"run() needs a Workload, got {type(workload).__name__}")
        plan = _RunPlan.of(self, workload, closed_loop, think_time, timeline_ms)
        run = simulate(workload, plan.topology, **plan.settings(self, timeline_ms, progress))
        if plan.links is not None:
            run.sessions = (plan.links.session_id, plan.links.turn, plan.think)
        return SimResult._build(workload, run, plan.config(self, workload, run, think_time))


@dataclass
class _RunPlan:
    """What one :meth:`Simulator.run` simulates, checked: the resolved settings."""

    topology: Topology
    engine: EngineConfig
    cost: Any
    capacity: int
    stack: Tiers
    router: Any
    admission: Any
    parent: np.ndarray | None = None  # closed loop: each request's previous turn
    think: np.ndarray | None = None  # closed loop: think times (NaN for first turns)
    links: Any = None  # closed loop: the session links
    seed: int | None = None  # the checked seed (a plain int: numpy ints become one)

    @classmethod
    def of(
        cls, sim: Simulator, workload: Workload, closed_loop: bool, think_time: Any,
        timeline_ms: float | None,
    ) -> _RunPlan:
        """Check every parameter of ``sim`` and of the run; resolve the defaults."""
        fleet = _fleet(sim.replicas)
        engine = EngineConfig() if sim.engine is None else sim.engine
        if not isinstance(engine, EngineConfig):
            raise TypeError(f"engine must be an EngineConfig, got {engine!r}")
        engine = engine.checked()
        make_policy(sim.eviction)  # (checked: a name, or an object with the policy's methods)
        if timeline_ms is not None:
            real(timeline_ms, "timeline_ms", low=MIN_TIMELINE_MS, high=MAX_TIME_MS)
        if not isinstance(closed_loop, bool):
            raise ValueError(f"closed_loop must be a bool, got {closed_loop!r}")
        if think_time is not None and not closed_loop:
            raise ValueError("think_time is only used with closed_loop=True")
        if not isinstance(sim.fast, bool):
            raise ValueError(f"fast must be a bool, got {sim.fast!r}")
        seed = check_seed(sim.seed, "seed", optional=True)
        cost = _cost(sim.cost_model)
        plan = cls(
            topology=_topology(fleet, cost),
            engine=engine,
            cost=cost,
            capacity=_capacity(sim.kv_tokens, cost, engine.page_for(int(workload.block_size))),
            stack=as_tiers(sim.tiers),
            router=make_router(sim.routing),
            admission=make_admission(sim.admission),
            seed=seed,
        )
        if closed_loop:
            from inferasim.sim.closed_loop import session_links, think_times

            plan.links = session_links(workload)
            plan.think = think_times(
                workload, plan.links, cost, think_time,
                max_batched_tokens=engine.max_batched_tokens,
                chunked_prefill=engine.chunked_prefill,
            )
            plan.parent = plan.links.parent
        plan.check_durations(workload)
        return plan

    def check_durations(self, workload: Workload) -> None:
        """Every duration the tiers, handoff links and think times give stays
        within 2**43 ms (see :mod:`inferasim.sim.limits`)."""
        kvb = getattr(self.cost, "kv_bytes_per_token", None)
        ok = isinstance(kvb, numbers.Real) and not isinstance(kvb, bool) and math.isfinite(kvb)
        topo = self.topology
        check_run_durations(
            workload.input_len,
            workload.output_len,
            float(kvb) if ok and kvb > 0 else 0.0,  # type: ignore[operator, arg-type]
            self.stack.tiers,
            (topo.handoff_gbps, topo.handoff_latency_us) if topo.decode else None,
            self.think,
            None if self.links is None else self.links.session_id,
        )

    def settings(self, sim: Simulator, timeline_ms: float | None, progress: bool) -> dict[str, Any]:
        """The keyword arguments of :func:`inferasim.sim.engine.simulate`."""
        tiers = self.stack.tiers
        hot = self.stack.replicate_hot_blocks
        return dict(
            router=self.router,
            cost=self.cost,
            capacity=self.capacity,
            max_num_seqs=self.engine.max_num_seqs,
            max_batched_tokens=self.engine.max_batched_tokens,
            chunked_prefill=self.engine.chunked_prefill,
            eviction=sim.eviction,
            seed=self.seed,
            sample_ms=timeline_ms,
            jump=sim.fast,
            progress=bool(progress),
            admission=self.admission,
            tiers=tiers,
            write_through=any(t.write == "through" for t in tiers),
            load_policy=self.stack.load_policy,
            replicate_hot=None if hot is None else int(hot),
            parent=self.parent,
            think=None if self.think is None else np.nan_to_num(self.think, nan=0.0),
            rules=self.engine,
        )

    def config(
        self, sim: Simulator, workload: Workload, run: Any, think_time: Any
    ) -> dict[str, Any]:
        """The ``SimResult.config`` of the run: what was simulated, as plain values."""
        topo, engine = self.topology, self.engine
        config: dict[str, Any] = {
            "replicas": topo.prefill + topo.decode,
            "routing": sim.routing if isinstance(sim.routing, str) else repr(sim.routing),
            "cost_model": repr(self.cost),
            "kv_tokens": self.capacity * engine.page_for(int(workload.block_size)),
            "block_size": workload.block_size,
            "page_tokens": engine.page_for(int(workload.block_size)),
            "full_prompt_admission": engine.full_prompt_admission,
            "cache_on_schedule": engine.cache_on_schedule,
            "cache_generated": engine.cache_generated,
            "has_hash_ids": workload.has_hash_ids,
            "eviction": sim.eviction if isinstance(sim.eviction, str) else repr(sim.eviction),
            "max_num_seqs": engine.max_num_seqs,
            "max_batched_tokens": engine.max_batched_tokens,
            "chunked_prefill": engine.chunked_prefill,
            "seed": sim.seed,
            "admission": None if sim.admission is None else repr(sim.admission),
            "timeline_ms": run.replicas[0].rec.period if run.replicas else None,
        }
        if topo.decode:
            config.update(
                prefill_replicas=topo.prefill,
                decode_replicas=topo.decode,
                handoff_gbps=topo.handoff_gbps,
                handoff_latency_us=topo.handoff_latency_us,
                layerwise=topo.layerwise,
            )
            if topo.handoff_tier is not None:
                config["handoff_tier"] = topo.handoff_tier
            if topo.decode_cache:
                config["decode_cache"] = True
                if not topo.decode_tiers:  # (named only when it is not the default)
                    config["decode_tiers"] = False
        stack = self.stack
        if stack.tiers:
            config["tiers"] = list(stack.tiers)
            config["load_policy"] = stack.load_policy
            if stack.replicate_hot_blocks is not None:
                config["replicate_hot_blocks"] = int(stack.replicate_hot_blocks)
        if self.links is not None:
            config["closed_loop"] = True
            config["think_time"] = (
                think_time
                if think_time is None or isinstance(think_time, int | float)
                else repr(think_time)
            )
        return config


def _fleet(replicas: Any) -> int | Disaggregated:
    """``replicas`` checked: an int, or a checked :class:`Disaggregated`."""
    if isinstance(replicas, Disaggregated):
        return replicas.checked()
    return _positive_int(replicas, "replicas")


def _topology(fleet: int | Disaggregated, cost: Any) -> Topology:
    """The engine's topology for a checked fleet (a disaggregated one needs the
    cost model's KV bytes per token for its handoffs)."""
    if not isinstance(fleet, Disaggregated):
        return Topology(fleet)
    kvb = getattr(cost, "kv_bytes_per_token", None)
    if not isinstance(kvb, numbers.Real) or not kvb >= 0:
        raise ValueError(
            f"a disaggregated fleet needs the cost model's kv_bytes_per_token, got {kvb!r}"
        )
    return Topology(
        fleet.prefill, fleet.decode, fleet.handoff_gbps, fleet.handoff_latency_us, fleet.layerwise,
        fleet.handoff_tier, fleet.decode_cache, fleet.decode_tiers,
    )


def _cost(cost: Any) -> Any:
    """The cost model (the default roofline when None), checked."""
    if cost is None:
        from inferasim.sim.roofline import RooflineCostModel

        cost = RooflineCostModel()
    for name in ("step_time_ms", "kv_capacity_blocks"):
        if not callable(getattr(cost, name, None)):
            raise TypeError(f"cost_model needs a {name}() method, got {cost!r}")
    return cost


def _capacity(kv_tokens: Any, cost: Any, block_size: int) -> int:
    """KV blocks per replica: ``kv_tokens // block_size``, or the cost model's."""
    if kv_tokens is not None:
        tokens = kv_tokens
        if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral) or tokens < 1:
            raise ValueError(f"kv_tokens must be a positive integer, got {tokens!r}")
        if tokens >= 2**62:
            raise ValueError(
                f"kv_tokens must be < 2**62, got {tokens!r} (any count above the tokens a "
                "workload can touch already means unbounded)"
            )
        if tokens < block_size:
            raise ValueError(
                f"kv_tokens ({tokens}) holds no whole KV block of {block_size} tokens"
            )
        return int(tokens) // block_size
    capacity = cost.kv_capacity_blocks(block_size)
    if capacity is None:
        raise ValueError(
            "the cost model does not know the KV memory: give kv_tokens= (per replica)"
        )
    if capacity < 1:
        raise ValueError(
            f"the cost model leaves no KV memory ({capacity} blocks): the weights do not "
            "fit, use a larger GPU or tensor parallelism"
        )
    return int(capacity)
