"""What routers and admission policies see of a replica: :class:`View` (internal, compiled).

A view reads its replica *at the routing instant* (``RoutingContext.now``)
and brings the replica up to that instant itself, lazily, only as far as
the attribute read needs: attributes that change only where the replica
wakes (queue, running set, KV use, cache content, outstanding tokens read
off a decode stretch) advance it only when it wakes by ``now``; the time
estimates, which depend on the decode batch's context (it grows every
decode step), advance it to ``now``. A router reading nothing (round robin)
moves no replica. The public description of these attributes is
:class:`inferasim.sim.router.ReplicaView`.
"""

from __future__ import annotations

from typing import Any

from inferasim.sim.replica import Replica
from inferasim.sim.tiers import SharedLookup, all_distinct
from inferasim.sim.transfer import Link

__all__: list[str] = []

#: Entries a prefill-time memo holds before it is emptied (its values are exact,
#: so emptying it only costs recomputation).
MEMO_MAX = 1 << 15


class RoutingContext:
    """The request being placed and the instant, shared by the views of a fleet."""

    def __init__(
        self,
        memo: dict[tuple[int, ...], float] | None,
        kv_bytes_per_token: float,
        tier_savings: tuple[float, ...],
    ) -> None:
        self.now = 0.0
        self.ids: list[Any] = []  # the request's reusable block ids
        self.limit = 0  # how many of them a hit may reuse
        self.input_len = 0
        # the request's place in the shared tiers (made on first use per request)
        self.lookup: SharedLookup | None = None
        self.distinct = -1  # whether no id repeats (-1: not looked at yet)
        # prefill_ms results by (tokens, cached, B, S, max_tokens) and chunk step
        # times by (n, c, B, S); only for cost models that are pure functions
        self.memo = memo
        self.kv_bytes = kv_bytes_per_token
        self.tier_savings = tier_savings

    def place(self, ids: list[Any], limit: int, now: float, input_len: int) -> None:
        """Routing of a new request (its ids, lookup limit, arrival, prompt length)."""
        self.ids = ids
        self.limit = limit
        self.now = now
        self.input_len = input_len
        self.lookup = None
        self.distinct = -1

    def ids_distinct(self) -> bool:
        """Whether no id of the request repeats (looked at once per request)."""
        d = self.distinct
        if d < 0:
            d = self.distinct = 1 if all_distinct(self.ids) else 0
        return d == 1

    def shared_lookup(self) -> SharedLookup:
        """The request's memo of where its blocks sit in the shared tiers."""
        look = self.lookup
        if look is None:
            look = self.lookup = SharedLookup(self.ids, self.limit)
        return look


class View:
    """One replica as a router sees it at ``ctx.now`` (see the module)."""

    def __init__(self, rep: Replica, ctx: RoutingContext, link: Link | None = None) -> None:
        self.rep = rep
        self.ctx = ctx
        self.link = link  # a prefill instance's handoff link (disaggregated fleets)

    def _settle(self) -> Replica:
        """The replica, advanced to now when its routing-visible state changed by then."""
        rep = self.rep
        now = self.ctx.now
        if rep.next_wake <= now:
            rep.advance(now)
        return rep

    def _at_now(self) -> Replica:
        """The replica advanced to now (decode progress included)."""
        rep = self.rep
        rep.advance(self.ctx.now)
        return rep

    # ----------------------------------------------------------- identity
    @property
    def index(self) -> int:
        return self.rep.index

    @property
    def role(self) -> str:
        return self.rep.role

    @property
    def block_size(self) -> int:
        return self.rep.kv.bs

    @property
    def tier_savings(self) -> tuple[float, ...]:
        return self.ctx.tier_savings

    # ------------------------------------------------------ queue and load
    @property
    def queue_len(self) -> int:
        return len(self._settle().sched.waiting)

    @property
    def running(self) -> int:
        return len(self._settle().sched.running)

    @property
    def outstanding_tokens(self) -> int:
        return self._settle().outstanding_at(self.ctx.now)

    @property
    def decode_batch(self) -> int:
        return self._settle().group.batch

    @property
    def prefill_tokens_pending(self) -> int:
        return _pending_tokens(self._settle())

    # ---------------------------------------------------------- KV memory
    @property
    def kv_running_blocks(self) -> int:
        return self._settle().kv.running

    @property
    def kv_cached_blocks(self) -> int:
        return self._settle().kv.cache.evictable

    @property
    def kv_capacity_blocks(self) -> int:
        return self.rep.kv.capacity

    @property
    def kv_usage(self) -> float:
        kv = self._settle().kv
        return kv.running / kv.capacity

    @property
    def active_blocks(self) -> int:
        rep = self._settle()
        return rep.kv.running_blocks + rep.sched.queued_blocks

    @property
    def free_kv_blocks(self) -> int:
        return self._settle().kv.available

    # ---------------------------------------------------------- the request
    @property
    def prefix_match_blocks(self) -> int:
        ctx = self.ctx
        return self._settle().kv.hbm_run(ctx.ids, ctx.limit)

    @property
    def hit_blocks_by_tier(self) -> tuple[int, ...]:
        return tuple(self.hits())

    def hits(self) -> list[int]:
        """:attr:`hit_blocks_by_tier` as a list (the built-in routers' read)."""
        return self._hits(self._settle())

    def _hits(self, rep: Replica) -> list[int]:
        """The request's reusable run on ``rep`` (settled) by tier."""
        ctx = self.ctx
        kv = rep.kv
        tiers = kv.tiers
        if tiers is None:
            return kv.hits_by_tier(ctx.ids, ctx.limit, None)
        if tiers.all_shared:
            return kv.hits_by_tier(ctx.ids, ctx.limit, ctx.shared_lookup())
        return kv.hits_by_tier(ctx.ids, ctx.limit, None, ctx.ids_distinct())

    # ------------------------------------------------------ time estimates
    def prefill_ms(self, tokens: int, cached: int = 0) -> float:
        return _prefill_ms(self._at_now(), tokens, cached, self.ctx.memo)

    @property
    def queue_ms(self) -> float:
        return _queue_ms(self._at_now(), self.ctx.now, self.ctx.memo)

    @property
    def load_estimate_ms(self) -> float:
        rep = self._settle()
        tiers = rep.kv.tiers
        if tiers is None:
            return 0.0
        return tiers.load_estimate_ms(self.ctx.now, self._hits(rep)[1:])

    @property
    def ttft_estimate_ms(self) -> float:
        rep = self._at_now()
        ctx = self.ctx
        memo = ctx.memo
        queue = _queue_ms(rep, ctx.now, memo)
        tiers = rep.kv.tiers
        if tiers is None:
            cached = rep.kv.hbm_run(ctx.ids, ctx.limit) * rep.kv.bs
            return queue + _prefill_ms(rep, ctx.input_len - cached, cached, memo)
        counts = self._hits(rep)  # (hbm, tier 0, tier 1, ...)
        total = 0
        for c in counts:
            total += c
        cached = total * rep.kv.bs
        load = tiers.load_estimate_ms(ctx.now, counts[1:]) if cached else 0.0
        return queue + load + _prefill_ms(rep, ctx.input_len - cached, cached, memo)

    @property
    def tpot_estimate_ms(self) -> float:
        rep = self._at_now()
        group = rep.group
        return rep.kernel.step(0, 0, group.batch + 1, group.context + self.ctx.input_len)

    @property
    def handoff_estimate_ms(self) -> float:
        link = self.link
        if link is None:
            return 0.0
        ctx = self.ctx
        return link.estimate_ms(ctx.now, ctx.input_len * ctx.kv_bytes)

    @property
    def transfer_backlog_ms(self) -> float:
        tiers = self._settle().kv.tiers
        if tiers is None:
            return 0.0
        return tiers.backlog_ms(self.ctx.now)


def _pending_tokens(rep: Replica) -> int:
    """Prompt tokens still to compute after the running step: waiting prompts in
    full plus the rest of the prompts being prefilled."""
    sched = rep.sched
    n = 0
    for seq in sched.waiting:
        n += seq.tokens
    for seq in sched.prefilling:
        n += seq.tokens - seq.computed
    if sched.in_step:
        for _, k in sched.chunks:  # (computed when the running step ends)
            n -= k
    return n


def _prefill_ms(
    rep: Replica, tokens: int, cached: int, memo: dict[tuple[int, ...], float] | None
) -> float:
    """Time to prefill ``tokens`` after ``cached`` in chunks of the budget the decode
    batch leaves, looked up in ``memo`` first.

    The chunk loop is a pure function of ``(tokens, cached, B, S, max_tokens)``
    and the cost model, so a memo (one per run and cost model) gives the same
    float as the loop. The loop looks each chunk's step time up there too,
    under ``(n, c, B, S)``: prefill times from the same start share their
    leading chunks."""
    B = rep.group.batch
    S = rep.group.context
    if memo is None:
        return _chunks_ms(rep, tokens, cached, B, S, None)
    key = (tokens, cached, B, S, rep.sched.max_tokens)
    hit = memo.get(key)
    if hit is not None:
        return hit
    t = _chunks_ms(rep, tokens, cached, B, S, memo)
    if len(memo) >= MEMO_MAX:
        memo.clear()
    memo[key] = t
    return t


def _chunks_ms(
    rep: Replica, tokens: int, cached: int, B: int, S: int,
    memo: dict[tuple[int, ...], float] | None,
) -> float:
    """The chunk loop of :func:`_prefill_ms`."""
    budget = rep.sched.max_tokens - B
    if budget < 1:
        budget = 1
    step = rep.cost.step_time_ms
    t = 0.0
    c = cached
    left = tokens
    while left > 0:
        n = left if left < budget else budget
        if memo is None:
            t += float(step(n, n * c + n * (n + 1) // 2, B, S))
        else:
            ck = (n, c, B, S)
            x = memo.get(ck)
            if x is None:
                x = float(step(n, n * c + n * (n + 1) // 2, B, S))
                if len(memo) >= MEMO_MAX:
                    memo.clear()
                memo[ck] = x
            t += x
        c += n
        left -= n
    return t


def _queue_ms(rep: Replica, now: float, memo: dict[tuple[int, ...], float] | None) -> float:
    """The rest of the running step plus the prefill time of the pending tokens."""
    sched = rep.sched
    wait = sched.step_end - now if sched.in_step and sched.step_end > now else 0.0
    pending = _pending_tokens(rep)
    return wait + (_prefill_ms(rep, pending, 0, memo) if pending else 0.0)
