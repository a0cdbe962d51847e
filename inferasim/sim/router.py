"""Routing: which replica serves a request.

A router is any callable ``router(request, replicas) -> int``. ``request`` is
a :class:`Request` (id, arrival, lengths, hash ids); ``replicas`` is a tuple
of :class:`ReplicaView`, the read-only state of every replica at the arrival
time. The answer is a replica index.

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
    Written only against the public :class:`ReplicaView` API.

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

import math
import random
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from inferasim.sim import routing_fast as _rf
from inferasim.sim.routing_fast import effective as _effective
from inferasim.sim.routing_fast import pending_tokens as _pending_tokens
from inferasim.sim.routing_fast import prefill_ms as _prefill_ms
from inferasim.sim.routing_fast import queue_ms as _queue_ms

__all__ = [
    "Request",
    "ReplicaView",
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


class ReplicaView:
    """Read-only state of one replica, as a router sees it at an arrival.

    Attributes are read live from the replica, so a view is only meaningful
    during the routing call it was passed to.

    Examples
    --------
    >>> import inferasim as ism
    >>> from inferasim.sim import LinearCostModel, Simulator
    >>> seen = []
    >>> def spy(request, replicas):
    ...     seen.append([(v.index, v.queue_len, v.prefix_match_blocks) for v in replicas])
    ...     return 0
    >>> wl = ism.Workload.from_requests([0, 1000], [32, 32], [2, 2], [[1, 2], [1, 3]],
    ...                                 block_size=16)
    >>> res = Simulator(replicas=2, routing=spy, kv_tokens=100 * 16,
    ...                 cost_model=LinearCostModel()).run(wl, progress=False)
    >>> seen[1]          # the second request finds block 1 cached on replica 0
    [(0, 0, 1), (1, 0, 0)]
    """

    __slots__ = ("_rep", "_cur", "_link", "_kvb", "_memo")

    def __init__(
        self,
        replica: Any,
        current: list[Any],
        link: Any = None,
        kv_bytes_per_token: float = 0.0,
        memo: dict[tuple[int, ...], float] | None = None,
    ) -> None:
        self._rep = replica
        self._cur = current  # [ids, limit, now, input_len] of the request being routed
        self._link = link  # a prefill instance's handoff link (disaggregated fleets)
        self._kvb = kv_bytes_per_token
        # prefill_ms results by (tokens, cached, B, S, max_tokens), shared by the views of
        # one run; the engine passes one only for cost models known to be pure functions
        self._memo = memo

    @property
    def role(self) -> str:
        """``"both"`` (aggregated), ``"prefill"`` or ``"decode"``.

        Examples
        --------
        >>> _demo_view().role
        'both'
        """
        return self._rep.role

    @property
    def handoff_estimate_ms(self) -> float:
        """Estimated time to hand the routed request's KV (its prompt) off to a
        decode instance over this prefill instance's link, sharing it with the
        transfers in flight (0 on an aggregated fleet).

        Examples
        --------
        >>> _demo_view().handoff_estimate_ms
        0.0
        """
        if self._link is None:
            return 0.0
        return self._link.estimate_ms(self._cur[2], self._cur[3] * self._kvb)

    @property
    def index(self) -> int:
        """Replica index.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.index
        0
        """
        return self._rep.index

    @property
    def queue_len(self) -> int:
        """Requests waiting (including preempted ones).

        Examples
        --------
        >>> v = _demo_view()
        >>> v.queue_len
        1
        """
        return len(self._rep.waiting)

    @property
    def running(self) -> int:
        """Sequences in the running batch.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.running
        1
        """
        return len(self._rep.running)

    @property
    def outstanding_tokens(self) -> int:
        """Prompt tokens still to compute plus output tokens still to generate.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.outstanding_tokens  # 7 left of request 0, 32 + 2 of the queued one
        41
        """
        return self._rep.outstanding

    @property
    def kv_running_blocks(self) -> int:
        """KV blocks held by running sequences.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.kv_running_blocks
        4
        """
        return self._rep.n_private + self._rep.cache.pinned

    @property
    def kv_cached_blocks(self) -> int:
        """Evictable cached blocks (kept for reuse).

        Examples
        --------
        >>> v = _demo_view()
        >>> v.kv_cached_blocks
        0
        """
        return self._rep.cache.evictable

    @property
    def kv_capacity_blocks(self) -> int:
        """KV blocks the replica holds in all.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.kv_capacity_blocks
        50
        """
        return self._rep.capacity

    @property
    def kv_usage(self) -> float:
        """Fraction of KV memory held by running sequences.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.kv_usage
        0.08
        """
        return (self._rep.n_private + self._rep.cache.pinned) / self._rep.capacity

    @property
    def active_blocks(self) -> int:
        """Blocks of running sequences plus prompt blocks of queued requests.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.active_blocks
        6
        """
        rep = self._rep
        return rep.n_private + rep.cache.pinned + rep.queued_blocks

    @property
    def prefix_match_blocks(self) -> int:
        """Leading blocks of this request resident in the replica's cache.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.prefix_match_blocks  # blocks 1, 2 of (1, 2, 4)
        2
        """
        ids, limit = self._cur[0], self._cur[1]
        return self._rep.cache.match(ids, limit)[0]

    @property
    def block_size(self) -> int:
        """Tokens per KV block.

        Examples
        --------
        >>> _demo_view().block_size
        16
        """
        return self._rep.bs

    @property
    def free_kv_blocks(self) -> int:
        """KV blocks a new request could take now: free plus evictable cached ones.

        Examples
        --------
        >>> _demo_view().free_kv_blocks  # 50 - 4 held by request 0
        46
        """
        rep = self._rep
        return rep.capacity - rep.n_private - rep.cache.pinned

    @property
    def decode_batch(self) -> int:
        """Sequences decoding now (a token each step).

        Examples
        --------
        >>> _demo_view().decode_batch
        1
        """
        return self._rep.B

    @property
    def prefill_tokens_pending(self) -> int:
        """Prompt tokens still to compute on this replica after the running step:
        waiting prompts in full (their cache hits are not known until
        admission) plus the rest of the prompts being prefilled.

        Examples
        --------
        >>> _demo_view().prefill_tokens_pending  # request 1 waits with 32 tokens
        32
        """
        return _pending_tokens(self._rep)

    def prefill_ms(self, tokens: int, cached: int = 0) -> float:
        """Estimated time to prefill ``tokens`` prompt tokens after ``cached``
        ones, in chunks of the token budget left by the current decode batch.

        Each chunk of ``n`` tokens starting at position ``c`` costs
        ``step_time_ms(n, n * c + n * (n + 1) // 2, B, S)`` with the replica's
        decode batch ``B`` and context ``S`` now (they are held fixed).

        Examples
        --------
        >>> v = _demo_view()          # budget 64 - 1 decoding = 63 tokens a step
        >>> round(v.prefill_ms(100), 3)  # 2 steps: 5 + 0.05 * 63 + 0.1, 5 + 0.05 * 37 + 0.1
        15.2
        """
        return _prefill_ms(self._rep, tokens, cached, self._memo)

    @property
    def queue_ms(self) -> float:
        """Estimated wait before a request routed now starts its prefill: the rest
        of the running step plus :meth:`prefill_ms` of
        :attr:`prefill_tokens_pending`.

        Examples
        --------
        >>> v = _demo_view()      # steps end at 7.4, 12.5, 17.6, 22.7; now is 20
        >>> round(v.queue_ms, 3)  # 2.7 + (5 + 0.05 * 32 + 0.1)
        9.4
        """
        return _queue_ms(self._rep, self._cur[2], self._memo)

    @property
    def ttft_estimate_ms(self) -> float:
        """Estimated TTFT of the request being routed if it goes here:
        :attr:`queue_ms` plus :meth:`prefill_ms` of its tokens not cached here
        (at least one token is always computed); with KV tiers, blocks found
        in a lower tier or the shared pool count as cached and their
        :attr:`load_estimate_ms` is added.

        Examples
        --------
        >>> v = _demo_view()  # 48 tokens, blocks 1, 2 (32 tokens) cached: 16 to compute
        >>> round(v.ttft_estimate_ms, 3)  # 9.4 + (5 + 0.05 * 16 + 0.1)
        15.3
        """
        rep = self._rep
        if rep.tiers is None:
            cached = self.prefix_match_blocks * rep.bs
            return self.queue_ms + self.prefill_ms(self._cur[3] - cached, cached)
        counts = rep.tier_match(self._cur[0], self._cur[1])  # (hbm, tier 0, tier 1, ...)
        cached = sum(counts) * rep.bs
        load = rep.tiers.load_estimate_ms(self._cur[2], counts[1:]) if cached else 0.0
        return self.queue_ms + load + self.prefill_ms(self._cur[3] - cached, cached)

    @property
    def load_estimate_ms(self) -> float:
        """Estimated time to load the routed request's blocks found in lower KV
        tiers here (:attr:`hit_blocks_by_tier` below HBM) over the replica's
        tier links as they are now; 0 without tiers. :attr:`ttft_estimate_ms`
        adds it (and counts those blocks as cached).

        Examples
        --------
        >>> _demo_view().load_estimate_ms
        0.0
        """
        rep = self._rep
        if rep.tiers is None:
            return 0.0
        counts = self.hit_blocks_by_tier
        return rep.tiers.load_estimate_ms(self._cur[2], list(counts[1:]))

    @property
    def tpot_estimate_ms(self) -> float:
        """Estimated decode step time once the request being routed joins the
        decode batch here: ``step_time_ms(0, 0, B + 1, S + input_len)``.

        Examples
        --------
        >>> round(_demo_view().tpot_estimate_ms, 3)  # 5 + 0.1 * 2
        5.2
        """
        rep = self._rep
        return float(rep.cost(0, 0, rep.B + 1, rep.S + self._cur[3]))

    @property
    def hit_blocks_by_tier(self) -> tuple[int, ...]:
        """Blocks of this request's reusable run by tier: ``(hbm, tier 0, tier 1, ...)``.

        The run is the leading run of blocks found in HBM or in a lower tier
        (what admission would reuse with ``Tiers(load_policy="always")``); without
        tiers it is ``(prefix_match_blocks,)``.

        Examples
        --------
        >>> v = _demo_view()
        >>> v.hit_blocks_by_tier
        (2,)
        """
        ids, limit = self._cur[0], self._cur[1]
        rep = self._rep
        if rep.tiers is None:
            return (rep.cache.match(ids, limit)[0],)
        return tuple(rep.tier_match(ids, limit))

    @property
    def transfer_backlog_ms(self) -> float:
        """Link time still needed by the KV transfers in flight (loads and offload
        writes, over the replica's tier links; 0 without tiers).

        Examples
        --------
        >>> v = _demo_view()
        >>> v.transfer_backlog_ms
        0.0
        """
        rep = self._rep
        if rep.tiers is None:
            return 0.0
        return rep.tiers.backlog_ms(self._cur[2])


def _demo_view() -> ReplicaView:
    """A view for the examples: one replica 20 ms into serving a request.

    Request 0 (48 tokens: blocks 1, 2, 3 of 16 tokens; 10 output tokens) started at
    0 with ``LinearCostModel()``: by 20 ms it has 3 tokens and holds 4 blocks.
    Request 1 (32 tokens, 2 output tokens) has just queued. The view routes a
    48-token request whose reusable blocks are 1, 2 (of 1, 2, 4) at 20 ms.
    """
    from inferasim.sim.cost import LinearCostModel
    from inferasim.sim.scheduler import Outputs, Replica, Seq

    rep = Replica(
        0,
        cost=LinearCostModel(),
        block_size=16,
        capacity=50,
        max_num_seqs=8,
        max_batched_tokens=64,
        chunked_prefill=True,
        eviction="lru",
        out=Outputs(2),
        sample_ms=1000.0,
        jump=True,
    )
    rep.arrive(Seq(0, 48, 10, [1, 2, 3], 16), 0.0)
    rep.advance(20.0)
    rep.arrive(Seq(1, 32, 2, [7, 8], 16), 20.0)
    return ReplicaView(rep, [[1, 2, 4], 2, 20.0, 48])


def _least_loaded(replicas: Sequence[ReplicaView]) -> int:
    best = 0
    best_load = replicas[0].outstanding_tokens
    for v in replicas[1:]:
        load = v.outstanding_tokens
        if load < best_load:
            best, best_load = v.index, load
    return best


class RoundRobinRouter:
    """Replicas in turn.

    Examples
    --------
    >>> r = RoundRobinRouter(); r.reset(3, seed=0)
    >>> [r(None, (None,) * 3) for _ in range(4)]
    [0, 1, 2, 0]
    """

    needs_state = False

    def __init__(self) -> None:
        self._next = 0

    def reset(self, num_replicas: int, seed: int | None) -> None:
        """Start again at replica 0 (called by the engine before each run).

        Examples
        --------
        >>> r = RoundRobinRouter(); r(None, (None, None)); r.reset(2, seed=None); r(None, (None, None))
        0
        0
        """
        self._next = 0

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        r = self._next
        self._next = r + 1 if r + 1 < len(replicas) else 0
        return r


class RandomRouter:
    """A uniformly random replica (seeded).

    Examples
    --------
    >>> r = RandomRouter(); r.reset(4, seed=1)
    >>> a = [r(None, (None,) * 4) for _ in range(5)]
    >>> r.reset(4, seed=1); a == [r(None, (None,) * 4) for _ in range(5)]
    True
    """

    needs_state = False

    def __init__(self) -> None:
        self._rng = random.Random(0)

    def reset(self, num_replicas: int, seed: int | None) -> None:
        """Reseed (called by the engine before each run with ``Simulator(seed=...)``).

        Examples
        --------
        >>> r = RandomRouter(); r.reset(3, seed=5); first = r(None, (None,) * 3)
        >>> r.reset(3, seed=5); r(None, (None,) * 3) == first
        True
        """
        self._rng = random.Random(seed)

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        return self._rng.randrange(len(replicas))


class LeastLoadedRouter:
    """The replica with the fewest outstanding tokens (lowest index on ties).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> LeastLoadedRouter()(None, [NS(index=0, outstanding_tokens=9),
    ...                           NS(index=1, outstanding_tokens=3)])
    1
    """

    needs_state = True

    def reset(self, num_replicas: int, seed: int | None) -> None:
        """Nothing to reset: the policy keeps no state.

        Examples
        --------
        >>> LeastLoadedRouter().reset(2, seed=0) is None
        True
        """

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        return _least_loaded(replicas)

    def _fast(
        self,
        input_len: int,
        ids: list[int],
        limit: int,
        reps: Sequence[Any],
        t: float,
        active: list[int],
    ) -> int:
        """Same answer as ``__call__``, reading the replicas directly (engine use).

        ``active[i]`` is replica ``i``'s active blocks (the engine keeps it up to date).
        """
        return _rf.least_loaded_pick(reps, t)


class CacheAwareRouter:
    """Longest resident prefix; ties to the fewest outstanding tokens.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> CacheAwareRouter()(None, [NS(index=0, prefix_match_blocks=2, outstanding_tokens=9),
    ...                          NS(index=1, prefix_match_blocks=2, outstanding_tokens=3),
    ...                          NS(index=2, prefix_match_blocks=1, outstanding_tokens=0)])
    1
    """

    needs_state = True
    tier_saving: tuple[float, ...] = ()  # set by the engine when KV tiers exist

    def reset(self, num_replicas: int, seed: int | None) -> None:
        """Nothing to reset: the policy keeps no state.

        Examples
        --------
        >>> LeastLoadedRouter().reset(2, seed=0) is None
        True
        """

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        best = -1
        best_key: tuple[float, int] = (0, 0)
        saving = self.tier_saving
        for v in replicas:
            if saving:
                m: float = _effective(v.hit_blocks_by_tier, saving)
            else:
                m = v.prefix_match_blocks
            key = (-m, v.outstanding_tokens)
            if best < 0 or key < best_key:
                best, best_key = v.index, key
        return best

    def _fast(
        self,
        input_len: int,
        ids: list[int],
        limit: int,
        reps: Sequence[Any],
        t: float,
        active: list[int],
    ) -> int:
        """Same answer as ``__call__``, reading the replicas directly (engine use).

        ``active[i]`` is replica ``i``'s active blocks (the engine keeps it up to date).
        """
        return _rf.cache_aware_pick(self.tier_saving, ids, limit, reps, t)


class KvCostRouter:
    """Dynamo's KV-router cost: ``overlap_weight * new_prefill_blocks + active_blocks``.

    ``new_prefill_blocks`` is the request's prompt blocks minus its resident
    prefix on the replica; ``active_blocks`` the blocks of the replica's
    running sequences plus the prompt blocks of its queue.

    Parameters
    ----------
    overlap_weight : float, default 1.0
        Weight of the prefill blocks (Dynamo's ``kv_overlap_score_weight``).
    temperature : float, default 0.0
        0 picks the lowest cost (ties: fewest outstanding tokens, then lowest
        index); above 0 draws from ``softmax(-(cost - min cost) / temperature)``.
    block_size : int, default 512
        Tokens per block (the engine sets it to the workload's).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> req = Request(0, 0.0, 2048, 8, (1, 2, 3, 4))
    >>> views = [NS(index=0, prefix_match_blocks=4, active_blocks=10, outstanding_tokens=0),
    ...          NS(index=1, prefix_match_blocks=0, active_blocks=0, outstanding_tokens=0)]
    >>> KvCostRouter()(req, views)        # costs 0 + 10 vs 4 + 0
    1
    >>> KvCostRouter(overlap_weight=4.0)(req, views)   # 10 vs 16
    0
    """

    needs_state = True
    tier_saving: tuple[float, ...] = ()  # set by the engine when KV tiers exist

    def __init__(
        self, overlap_weight: float = 1.0, temperature: float = 0.0, block_size: int = 512
    ) -> None:
        if not overlap_weight >= 0:
            raise ValueError(f"overlap_weight must be >= 0, got {overlap_weight!r}")
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        self.overlap_weight = float(overlap_weight)
        self.temperature = float(temperature)
        self.block_size = int(block_size)
        self._rng = random.Random(0)

    def reset(self, num_replicas: int, seed: int | None) -> None:
        """Reseed the softmax sampler (called by the engine before each run).

        Examples
        --------
        >>> KvCostRouter(temperature=1.0).reset(2, seed=0) is None
        True
        """
        self._rng = random.Random(seed)

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        blocks = -(-request.input_len // self.block_size)
        w = self.overlap_weight
        saving = self.tier_saving
        if saving:
            costs = [
                w * (blocks - _effective(v.hit_blocks_by_tier, saving)) + v.active_blocks
                for v in replicas
            ]
        else:
            costs = [w * (blocks - v.prefix_match_blocks) + v.active_blocks for v in replicas]
        low = min(costs)
        if self.temperature > 0:
            weights = [math.exp(-(c - low) / self.temperature) for c in costs]
            return self._rng.choices(range(len(costs)), weights=weights)[0]
        best = -1
        best_load = 0
        for v, c in zip(replicas, costs, strict=True):
            if c == low:
                load = v.outstanding_tokens
                if best < 0 or load < best_load:
                    best, best_load = v.index, load
        return best

    def _fast(
        self,
        input_len: int,
        ids: list[int],
        limit: int,
        reps: Sequence[Any],
        t: float,
        active: list[int],
    ) -> int:
        """Same answer as ``__call__``, reading the replicas directly (engine use).

        ``active[i]`` is replica ``i``'s active blocks (the engine keeps it up to date).
        """
        if self.temperature > 0:
            return -1  # the engine falls back to __call__
        return _rf.kv_cost_pick(
            self.overlap_weight, self.block_size, self.tier_saving, input_len, ids, limit,
            reps, t, active,
        )


class LongestMatchRouter:
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
    >>> [router(Request(i, 0.0, 1024, 1, ids), ()) for i, ids in
    ...  enumerate([(7, 1), (8, 2), (7, 3), (9,)])]
    [0, 1, 0, 2]
    """

    needs_state = False

    def reset(self, num_replicas: int, seed: int | None) -> None:
        """Forget every placement (called by the simulator before a run).

        Examples
        --------
        >>> r = LongestMatchRouter()
        >>> r.reset(2, seed=None)
        >>> r(Request(0, 0.0, 512, 1, (5,)), ())
        0
        """
        self._sent: list[set[int]] = [set() for _ in range(num_replicas)]
        self._count = [0] * num_replicas

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        ids = request.hash_ids
        best, best_key = 0, None
        for r, sent in enumerate(self._sent):
            run = 0
            while run < len(ids) and ids[run] in sent:
                run += 1
            key = (-run, self._count[r])
            if best_key is None or key < best_key:
                best, best_key = r, key
        self._sent[best].update(ids)
        self._count[best] += 1
        return best


class ConductorRouter:
    """Smallest estimated TTFT (queue + uncached prefill); ties to the least loaded.

    Uses only :class:`ReplicaView`'s public API, so it doubles as an example
    of a custom KV-centric policy. (The engine runs the built-in policy
    through a private fast path on its own views, :meth:`_estimates`: the
    same floats, side effects and choice, with the request's shared-tier
    lookups done once for all replicas; subclasses go through ``__call__``.
    A parameter that changes the choice must be honoured by both.)

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> views = [NS(index=0, ttft_estimate_ms=30.0, outstanding_tokens=9),
    ...          NS(index=1, ttft_estimate_ms=12.5, outstanding_tokens=80),
    ...          NS(index=2, ttft_estimate_ms=12.5, outstanding_tokens=40)]
    >>> for v in views: v.handoff_estimate_ms = 0.0
    >>> ConductorRouter()(None, views)
    2
    """

    needs_state = True

    def reset(self, num_replicas: int, seed: int | None) -> None:
        """Nothing to reset: the policy keeps no state.

        Examples
        --------
        >>> ConductorRouter().reset(2, seed=0) is None
        True
        """

    def __call__(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        best = -1
        best_key = (0.0, 0)
        for v in replicas:
            key = (v.ttft_estimate_ms + v.handoff_estimate_ms, v.outstanding_tokens)
            if best < 0 or key < best_key:
                best, best_key = v.index, key
        return best

    def _fast(self, views: Sequence[ReplicaView]) -> int:
        """Same answer as ``__call__`` on the engine's own views (engine use)."""
        return _rf.conductor_pick(*_engine_args(views))

    def _estimates(self, views: Sequence[ReplicaView]) -> list[float]:
        """``ttft_estimate_ms + handoff_estimate_ms`` of each of the engine's views.

        The same floats in the same order of operations, with the same side
        effects (every link an estimate reads is advanced to now, as the
        views do), computed with less overhead
        (:func:`inferasim.sim.routing_fast.conductor_estimates`).
        """
        return _rf.conductor_estimates(*_engine_args(views))


def _engine_args(views: Sequence[ReplicaView]) -> tuple[Any, ...]:
    """The arguments of :func:`~inferasim.sim.routing_fast.conductor_pick` for the
    engine's views (they share the request, the memo and the KV size per token)."""
    v0 = views[0]
    cur = v0._cur
    links = [v._link for v in views] if v0._link is not None else None
    return ([v._rep for v in views], links, v0._kvb, v0._memo, cur[0], cur[1], cur[2], cur[3])


ROUTING_POLICIES: dict[str, Callable[..., Any]] = {
    "round_robin": RoundRobinRouter,
    "random": RandomRouter,
    "least_loaded": LeastLoadedRouter,
    "cache_aware": CacheAwareRouter,
    "kv_cost": KvCostRouter,
    "longest_match": LongestMatchRouter,
    "conductor": ConductorRouter,
}


def make_router(routing: str | Callable[..., int], *, block_size: int = 512) -> Callable[..., int]:
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
        if routing == "kv_cost":
            return KvCostRouter(block_size=block_size)
        return ROUTING_POLICIES[routing]()
    if not callable(routing):
        raise TypeError(f"routing must be a policy name or a callable, got {routing!r}")
    return routing
