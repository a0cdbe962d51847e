"""Routing: which replica serves a request.

A router is any callable ``router(request, replicas) -> int`` (the
:class:`Router` protocol). ``request`` is a :class:`Request` (id, arrival,
lengths, hash ids); ``replicas`` is a sequence of :class:`ReplicaView`, the
read-only state of every replica at the arrival time. The answer is a
replica index. A router with a ``reset(num_replicas, seed)`` method is reset
before every run (the documented setup call: a run never changes a router
in any other way).

Built-in policies (``Simulator(routing=name)``):

``"round_robin"``
    Replicas in turn.
``"random"``
    Uniformly at random (seeded by ``Simulator(seed=...)``).
``"least_loaded"``
    Fewest outstanding tokens (prompt tokens still to compute plus output
    tokens still to generate, over queued and running requests).
``"cache_aware"``
    Longest prefix match against what each replica has actually computed
    (exact state); ties go to the least loaded. On the FAST'25 conversation
    trace as given it stays balanced: the first requests arrive together,
    before any prefill ends, so every replica computes the shared first
    block and ties fall to load. It collapses onto one replica as soon as a
    single replica is first to hold the shared block (move the first
    request 10 s earlier).
``"longest_match"``
    Pure longest-prefix routing on the router's own record of where it sent
    each block (like an approximate radix-tree router), with no load term.
    When every request shares its first block, as all FAST'25 conversation
    requests do, the first replica matches every later request and the
    others never do: all traffic lands on one replica. Collapse shows in
    ``SimResult.replicas["requests"]`` and ``summary()["max_replica_share"]``.
``"kv_cost"``
    Dynamo's KV-router cost ``overlap_weight * new_prefill_blocks +
    active_blocks`` (lowest wins; ties to the least loaded). With
    ``temperature > 0`` the replica is drawn with probability proportional to
    ``exp(-(cost - min cost) / temperature)``.
``"conductor"``
    Mooncake's KV-centric scheduler: the replica with the smallest estimated
    TTFT, :attr:`ReplicaView.ttft_estimate_ms` (its queue time plus the
    prefill time of the request's tokens not cached there, from the cost
    model) plus, on a disaggregated fleet, the KV handoff estimate
    (:attr:`ReplicaView.handoff_estimate_ms`; it delays the second token);
    ties to the fewest outstanding tokens, then the lowest index. On an
    aggregated fleet prefill and decode run on the chosen replica; on a
    disaggregated one the decode instance is chosen at the handoff.

The views also estimate times from the cost model (``queue_ms``,
``prefill_ms(tokens)``, ``ttft_estimate_ms``, ``tpot_estimate_ms``) and show
memory (``free_kv_blocks``): enough to write a custom KV-centric policy.

With KV tiers (``Simulator(tiers=...)``) ``cache_aware`` and ``kv_cost``
count a replica's *effective* match: its HBM blocks of the request's
reusable run plus, for each lower tier, the blocks found there times the
share of a miss's prefill time loading them saves
(:func:`inferasim.sim.engine.tier_savings`, from the cost model and the
tier's bandwidth). A block in a shared pool is found from every replica,
so it is a (cheaper) hit everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from inferasim.sim import routing as _policies

__all__ = [
    "Request",
    "ReplicaView",
    "Router",
    "RoundRobinRouter",
    "RandomRouter",
    "LeastLoadedRouter",
    "CacheAwareRouter",
    "LongestMatchRouter",
    "KvCostRouter",
    "ConductorRouter",
    "ROUTING_POLICIES",
    "make_router",
]


class Request(NamedTuple):
    """The request a router places.

    Attributes
    ----------
    request_id : int
    arrival_ms : float
    input_len, output_len : int
        Prompt and output lengths (tokens).
    hash_ids : tuple of int
        The prompt's cacheable (full) block hash ids.

    Examples
    --------
    >>> Request(0, 0.0, 1024, 8, (1, 2)).input_len
    1024
    """

    request_id: int
    arrival_ms: float
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...]


class ReplicaView(Protocol):
    """What a router (or an admission policy) reads of one replica at an arrival.

    Every attribute is the replica's state at the arrival time, exact: the
    simulator brings the replica up to that instant as far as the
    attribute needs, when it is read. A view is only meaningful during the
    call it was passed to.

    Attributes
    ----------
    index : int
        Replica index.
    role : str
        ``"both"`` (aggregated), ``"prefill"`` or ``"decode"``.
    block_size : int
        Tokens per KV block.
    queue_len : int
        Requests waiting (including preempted ones).
    running : int
        Sequences in the running batch.
    outstanding_tokens : int
        Prompt tokens still to compute plus output tokens still to generate.
    decode_batch : int
        Sequences decoding now (a token each step).
    prefill_tokens_pending : int
        Prompt tokens still to compute after the running step: waiting
        prompts in full (their cache hits are not known until admission)
        plus the rest of the prompts being prefilled.
    kv_running_blocks : int
        KV blocks held by running sequences. The ``kv_*_blocks`` and
        ``free_kv_blocks`` fields count KV blocks in vLLM's sense: the
        engine's pages of ``EngineConfig.page_tokens`` tokens (16 by
        default; the workload's hash block with ``page_tokens="block"``).
    kv_cached_blocks : int
        Evictable cached KV blocks (pages kept for reuse).
    kv_capacity_blocks : int
        KV blocks (pages) the replica holds in all.
    kv_usage : float
        Fraction of KV memory held by running sequences.
    active_blocks : int
        Hash blocks of running sequences plus prompt blocks of queued
        requests (workload blocks, as ``prefix_match_blocks``).
    free_kv_blocks : int
        KV blocks (pages) a new request could take now: free plus evictable
        cached ones.
    prefix_match_blocks : int
        Leading blocks of the routed request resident in the replica's HBM.
    hit_blocks_by_tier : tuple of int
        Blocks of the request's reusable run by tier, ``(hbm, tier 0, ...)``:
        the leading run found in HBM or a lower tier (what admission reuses
        with ``load_policy="always"``); ``(prefix_match_blocks,)`` without tiers.
    tier_savings : tuple of float
        Share of a miss's prefill time a block found in each lower tier saves
        (``1 - load / recompute``, from the cost model and the tier's read
        bandwidth); empty without tiers.
    queue_ms : float
        Estimated wait before a request routed now starts its prefill: the
        rest of the running step plus :meth:`prefill_ms` of
        :attr:`prefill_tokens_pending`.
    ttft_estimate_ms : float
        Estimated TTFT of the routed request here: :attr:`queue_ms` plus
        :meth:`prefill_ms` of its tokens not cached here (at least one token
        is always computed); blocks found in a lower tier count as cached and
        their :attr:`load_estimate_ms` is added.
    load_estimate_ms : float
        Time to load the request's blocks found in lower tiers over the
        replica's links as they are now (0 without tiers).
    tpot_estimate_ms : float
        Decode step time once the request joins the decode batch here:
        ``step_time_ms(0, 0, B + 1, S + input_len)``.
    handoff_estimate_ms : float
        Time to hand the request's KV off to a decode instance over this
        prefill instance's link, sharing it with the transfers in flight (0
        on an aggregated fleet).
    transfer_backlog_ms : float
        Link time still needed by the KV transfers in flight (0 without tiers).

    Examples
    --------
    A router that prints what it sees, then sends everything to replica 0:

    >>> import inferasim as ism
    >>> seen = []
    >>> def spy(request, replicas):
    ...     seen.append([(v.index, v.queue_len, v.prefix_match_blocks) for v in replicas])
    ...     return 0
    >>> wl = ism.Workload.from_requests([0, 1000], [32, 32], [2, 2], [[1, 2], [1, 3]],
    ...                                 block_size=16)
    >>> res = ism.Simulator(replicas=2, routing=spy, kv_tokens=1600,
    ...                     cost_model=ism.LinearCostModel()).run(wl, progress=False)
    >>> seen[1]          # the second request finds block 1 cached on replica 0
    [(0, 0, 1), (1, 0, 0)]
    """

    index: int
    role: str
    block_size: int
    queue_len: int
    running: int
    outstanding_tokens: int
    decode_batch: int
    prefill_tokens_pending: int
    kv_running_blocks: int
    kv_cached_blocks: int
    kv_capacity_blocks: int
    kv_usage: float
    active_blocks: int
    free_kv_blocks: int
    prefix_match_blocks: int
    hit_blocks_by_tier: tuple[int, ...]
    tier_savings: tuple[float, ...]
    queue_ms: float
    ttft_estimate_ms: float
    load_estimate_ms: float
    tpot_estimate_ms: float
    handoff_estimate_ms: float
    transfer_backlog_ms: float

    def prefill_ms(self, tokens: int, cached: int = 0) -> float:
        """Estimated time to prefill ``tokens`` prompt tokens after ``cached``
        ones, in chunks of the token budget the current decode batch leaves:
        a chunk of ``n`` tokens at position ``c`` costs ``step_time_ms(n, n * c
        + n * (n + 1) // 2, B, S)`` with the decode batch ``B`` and context
        ``S`` now (held fixed)."""
        ...


@runtime_checkable
class Router(Protocol):
    """The interface of a routing policy: ``router(request, replicas) -> int``.

    ``reset(num_replicas, seed)``, if the router has it, is called before
    every run (reseed, forget placements). Any function of the two
    arguments is a router too.

    Examples
    --------
    Join the shortest queue, ties to the fewest outstanding tokens:

    >>> class ShortestQueue:
    ...     def reset(self, num_replicas, seed):
    ...         pass
    ...     def __call__(self, request, replicas):
    ...         best = min(replicas, key=lambda v: (v.queue_len, v.outstanding_tokens))
    ...         return best.index
    >>> isinstance(ShortestQueue(), Router)
    True
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(50, rate=50.0, input_len=256, output_len=8, seed=0)
    >>> res = ism.Simulator(replicas=3, routing=ShortestQueue(), kv_tokens=8192,
    ...                     cost_model=ism.LinearCostModel()).run(wl, progress=False)
    >>> sorted(res.replicas["requests"].tolist())
    [15, 16, 19]
    """

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        """The index of the replica that serves ``request``."""
        ...


class RoundRobinRouter(_policies.RoundRobinPolicy):
    """Replicas in turn.

    Examples
    --------
    >>> r = RoundRobinRouter(); r.reset(3, seed=0)
    >>> [r(None, [None] * 3) for _ in range(4)]
    [0, 1, 2, 0]
    """


class RandomRouter(_policies.RandomPolicy):
    """A uniformly random replica, seeded by ``Simulator(seed=...)`` (``reset``).

    Examples
    --------
    >>> r = RandomRouter(); r.reset(4, seed=1)
    >>> a = [r(None, [None] * 4) for _ in range(5)]
    >>> r.reset(4, seed=1); a == [r(None, [None] * 4) for _ in range(5)]
    True
    """


class LeastLoadedRouter(_policies.LeastLoadedPolicy):
    """The replica with the fewest outstanding tokens (lowest index on ties).

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(60, rate=40.0, input_len=1024, output_len=8,
    ...                                  num_prefixes=2, prefix_len=512, seed=1)
    >>> def requests_per_replica(routing):
    ...     sim = ism.Simulator(replicas=3, routing=routing, kv_tokens=65536,
    ...                         cost_model=ism.LinearCostModel())
    ...     return sim.run(wl, progress=False).replicas["requests"].tolist()
    >>> requests_per_replica(LeastLoadedRouter())
    [21, 20, 19]
    """


class CacheAwareRouter(_policies.CacheAwarePolicy):
    """Longest resident prefix; ties to the fewest outstanding tokens.

    With KV tiers the match is effective: HBM blocks plus lower-tier blocks
    times :attr:`ReplicaView.tier_savings`.

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(60, rate=40.0, input_len=1024, output_len=8,
    ...                                  num_prefixes=2, prefix_len=512, seed=1)
    >>> def requests_per_replica(routing):
    ...     sim = ism.Simulator(replicas=3, routing=routing, kv_tokens=65536,
    ...                         cost_model=ism.LinearCostModel())
    ...     return sim.run(wl, progress=False).replicas["requests"].tolist()
    >>> requests_per_replica(CacheAwareRouter())  # two prefixes, each sticks to a replica
    [31, 29, 0]
    """


class KvCostRouter(_policies.KvCostPolicy):
    """Dynamo's KV-router cost: ``overlap_weight * new_prefill_blocks + active_blocks``.

    ``new_prefill_blocks`` is the request's prompt blocks minus its resident
    prefix on the replica (effective with KV tiers, as :class:`CacheAwareRouter`);
    ``active_blocks`` the blocks of the replica's running sequences plus the
    prompt blocks of its queue.

    Parameters
    ----------
    overlap_weight : float, default 1.0
        Weight of the prefill blocks (Dynamo's ``kv_overlap_score_weight``).
    temperature : float, default 0.0
        0 picks the lowest cost (ties: fewest outstanding tokens, then lowest
        index); above 0 draws from ``softmax(-(cost - min cost) / temperature)``,
        seeded by ``Simulator(seed=...)``.

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(60, rate=40.0, input_len=1024, output_len=8,
    ...                                  num_prefixes=2, prefix_len=512, seed=1)
    >>> def requests_per_replica(routing):
    ...     sim = ism.Simulator(replicas=3, routing=routing, kv_tokens=65536,
    ...                         cost_model=ism.LinearCostModel())
    ...     return sim.run(wl, progress=False).replicas["requests"].tolist()
    >>> requests_per_replica(KvCostRouter()), requests_per_replica(KvCostRouter(overlap_weight=8.0))
    ([21, 21, 18], [23, 21, 16])
    """

    def __init__(self, overlap_weight: float = 1.0, temperature: float = 0.0) -> None:
        for name, v in (("overlap_weight", overlap_weight), ("temperature", temperature)):
            ok = isinstance(v, int | float) and not isinstance(v, bool)
            if not (ok and 0 <= v < float("inf")):
                raise ValueError(f"KvCostRouter {name} must be a finite number >= 0, got {v!r}")
        super().__init__(float(overlap_weight), float(temperature))

    def __repr__(self) -> str:
        return f"KvCostRouter(overlap_weight={self.overlap_weight}, temperature={self.temperature})"


class LongestMatchRouter(_policies.LongestMatchPolicy):
    """Pure longest-prefix-match routing on the router's own record of placements.

    The router remembers every block id it has sent to each replica (like
    the approximate radix tree of a cache-aware router, without eviction)
    and sends a request to the replica with the longest leading run of its
    ids already sent there; ties (including no match anywhere) go to the
    replica that has received the fewest requests, then the lowest index.
    There is no load term. When every request starts with the same block,
    as in the FAST'25 conversation trace, the first replica matches every
    later request by at least one block and the others never do, so all
    traffic lands on it.

    Examples
    --------
    Requests 0 and 1 share nothing and spread; request 2 extends request 0's
    first block and follows it; request 3 matches nothing and goes to the
    replica with the fewest requests.

    >>> router = LongestMatchRouter()
    >>> router.reset(3, seed=0)
    >>> [router(Request(i, 0.0, 1024, 1, ids), []) for i, ids in
    ...  enumerate([(7, 1), (8, 2), (7, 3), (9,)])]
    [0, 1, 0, 2]
    """


class ConductorRouter(_policies.ConductorPolicy):
    """Smallest estimated TTFT (queue + uncached prefill + loads, plus the KV
    handoff on a disaggregated fleet); ties to the fewest outstanding tokens,
    then the lowest index.

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(60, rate=40.0, input_len=1024, output_len=8,
    ...                                  num_prefixes=2, prefix_len=512, seed=1)
    >>> def requests_per_replica(routing):
    ...     sim = ism.Simulator(replicas=3, routing=routing, kv_tokens=65536,
    ...                         cost_model=ism.LinearCostModel())
    ...     return sim.run(wl, progress=False).replicas["requests"].tolist()
    >>> requests_per_replica(ConductorRouter())
    [20, 21, 19]
    """


ROUTING_POLICIES: dict[str, Callable[..., Any]] = {
    "round_robin": RoundRobinRouter,
    "random": RandomRouter,
    "least_loaded": LeastLoadedRouter,
    "cache_aware": CacheAwareRouter,
    "kv_cost": KvCostRouter,
    "longest_match": LongestMatchRouter,
    "conductor": ConductorRouter,
}


def make_router(routing: str | Callable[..., int]) -> Callable[..., int]:
    """A fresh router for a policy name, or the router object itself.

    Examples
    --------
    >>> type(make_router("kv_cost")).__name__
    'KvCostRouter'
    >>> make_router("nearest")
    Traceback (most recent call last):
    ...
    ValueError: routing must be one of ['round_robin', 'random', 'least_loaded', 'cache_aware', 'kv_cost', 'longest_match', 'conductor'] or a callable, got 'nearest'
    """
    if isinstance(routing, str):
        if routing not in ROUTING_POLICIES:
            raise ValueError(
                f"routing must be one of {list(ROUTING_POLICIES)} or a callable, got {routing!r}"
            )
        return ROUTING_POLICIES[routing]()
    if not callable(routing):
        raise TypeError(f"routing must be a policy name or a callable, got {routing!r}")
    return routing
