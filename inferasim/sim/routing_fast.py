"""The built-in routers' hot paths, compiled with mypyc (internal).

:mod:`inferasim.sim.router` holds the public router classes (their
docstrings must survive, so it is not compiled); their engine fast paths,
the conductor's estimates and the estimates the views share live here,
typed for mypyc. Each function gives the same answer, the same floats (the
same operations in the same order) and the same side effects as the view
formulas it shortcuts; the router classes delegate to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inferasim.sim.scheduler import Replica
from inferasim.sim.tiers import ReplicaTiers
from inferasim.sim.transfer import Link

__all__: list[str] = []

#: Entries a prefill-time memo holds before it is emptied (its values are exact,
#: so emptying it only costs recomputation).
MEMO_MAX = 1 << 15


def pending_tokens(rep: Replica) -> int:
    """:attr:`ReplicaView.prefill_tokens_pending` of replica ``rep``."""
    n = 0
    for seq in rep.waiting:
        n += seq.tokens
    for seq in rep.prefilling:
        n += seq.tokens - seq.computed
    if rep.in_step:
        for _, k in rep.cur_chunks:  # (computed when the running step ends)
            n -= k
    return n


def prefill_ms(
    rep: Replica, tokens: int, cached: int, memo: dict[tuple[int, ...], float] | None
) -> float:
    """:meth:`ReplicaView.prefill_ms` of replica ``rep``, looked up in ``memo`` first.

    The chunk loop is a pure function of ``(tokens, cached, B, S, max_tokens)``
    and the cost model, so a memo (one per run and cost model) gives the same
    float as the loop. The loop looks each chunk's step time up there too,
    under the key ``(n, c, B, S)`` (``n`` tokens after ``c``): prefill times
    from the same start share their leading chunks (a queue's from 0, on a
    prefill instance whose decode batch stays empty, all but the last).
    """
    B = rep.B
    S = rep.S
    if memo is None:
        return _chunks_ms(rep, tokens, cached, B, S, None)
    key = (tokens, cached, B, S, rep.max_tokens)
    hit = memo.get(key)
    if hit is not None:
        return hit
    t = _chunks_ms(rep, tokens, cached, B, S, memo)
    if len(memo) >= MEMO_MAX:
        memo.clear()
    memo[key] = t
    return t


def _chunks_ms(
    rep: Replica, tokens: int, cached: int, B: int, S: int, memo: dict[tuple[int, ...], float] | None
) -> float:
    """The chunk loop of :func:`prefill_ms` (step times looked up in ``memo``, if any)."""
    budget = rep.max_tokens - B
    if budget < 1:
        budget = 1
    cost = rep.cost
    t = 0.0
    c = cached
    left = tokens
    while left > 0:
        n = left if left < budget else budget
        if memo is None:
            t += float(cost(n, n * c + n * (n + 1) // 2, B, S))
        else:
            ck = (n, c, B, S)
            x = memo.get(ck)
            if x is None:
                x = float(cost(n, n * c + n * (n + 1) // 2, B, S))
                if len(memo) >= MEMO_MAX:
                    memo.clear()
                memo[ck] = x
            t += x
        c += n
        left -= n
    return t


def queue_ms(rep: Replica, now: float, memo: dict[tuple[int, ...], float] | None) -> float:
    """:attr:`ReplicaView.queue_ms` of replica ``rep`` at ``now``."""
    wait = rep.step_end - now if rep.in_step and rep.step_end > now else 0.0
    pending = pending_tokens(rep)
    return wait + (prefill_ms(rep, pending, 0, memo) if pending else 0.0)


def effective(hits: Sequence[int], saving: Sequence[float]) -> float:
    """HBM blocks plus lower-tier blocks weighted by the share of a miss they save."""
    m = float(hits[0])
    for k in range(len(saving)):
        m += saving[k] * hits[k + 1]
    return m


class SharedTiers:
    """Where each block of the routed request sits in the shared tiers (``where``),
    looked up once for every replica whose tiers are all shared, and only as far
    as some replica's walk reaches.

    ``kof(j)`` is the tier holding ``ids[j]``, or -1 when none does or the id came
    earlier in the request (a repeat ends a reusable run in a lower tier, as in
    ``Replica.tier_match``: an earlier copy is either in HBM, and then so is this
    one, or was counted in a lower tier already). ``known`` holds ``kof`` of the
    positions ``0 .. len(known) - 1`` and ``miss`` those of them where it is -1 (see :meth:`counts`).

    ``tiers`` is the :class:`~inferasim.sim.tiers.ReplicaTiers` of any replica
    whose tiers are all shared (each sees the same stores).
    """

    def __init__(self, tiers: ReplicaTiers, ids: list[Any], limit: int) -> None:
        self.ids = ids  # (Any: an id goes to a dict as the object it is, never re-boxed)
        self.rt = tiers
        self.limit = limit
        self.known: list[int] = []
        self.miss: list[int] = []
        head = ids[:limit]
        # first position of each id, only when some id repeats
        self.first: dict[int, int] | None = None
        if len(set(head)) < limit:
            first: dict[int, int] = {}
            for j, h in enumerate(head):
                first.setdefault(h, j)
            self.first = first

    def counts(self, m: int, ref: dict[int, int], n: int) -> list[int]:
        """Blocks of the reusable run from ``m`` by tier, ``[hbm, tier 0, ..., tier
        n - 1]``, for a replica with HBM ids ``ref`` whose leading HBM run is ``m``.

        The run is the walk ``j = m, m + 1, ...`` while ``ids[j] in ref or kof(j)
        >= 0``: it can only end at a miss (``kof == -1``), so it ends at the first
        miss at or after ``m`` not in HBM (or at ``limit``), found by jumping
        from miss to miss; the positions are looked up once per request, as far
        as a walk needs (``known`` then covers the run).

        Examples
        --------
        Blocks 5 and 6 in the pool (tier 0), 7 nowhere, 5 repeated: a replica
        holding nothing reuses 5 and 6 from the pool; one holding 5 and 7 in HBM
        walks to the repeated 6 (a repeat ends the run below HBM).

        >>> from inferasim.sim.tierconfig import Tier
        >>> from inferasim.sim.tiers import TierStore
        >>> pool = {"pool": TierStore(8)}
        >>> pool["pool"].put(5), pool["pool"].put(6)
        (None, None)
        >>> rt = ReplicaTiers([Tier("pool", 128, 1.0, 1.0, shared=True)], pool, 16, 1.0, False)
        >>> st = SharedTiers(rt, [5, 6, 7, 5, 6], 5)
        >>> st.counts(0, {}, 1), st.counts(1, {7: 0, 5: 0}, 1), st.known, st.miss
        ([0, 2], [3, 1], [0, 0, -1, -1, -1], [2, 3, 4])
        """
        ids = self.ids
        miss = self.miss
        i = 0  # bisect_left(miss, m)
        hi = len(miss)
        while i < hi:
            mid = (i + hi) // 2
            if miss[mid] < m:
                i = mid + 1
            else:
                hi = mid
        e = 0
        while True:
            if i == len(miss):  # look further (each position once per request)
                known = self.known
                j = len(known)
                limit = self.limit
                rt = self.rt
                first = self.first
                while j < limit:
                    h = ids[j]
                    k = -1 if first is not None and first[h] < j else rt.where(h)
                    known.append(k)
                    if k < 0:
                        miss.append(j)
                        break
                    j += 1
                if i == len(miss):
                    e = limit
                    break
            e = miss[i]
            if e >= m and ids[e] not in ref:
                break
            i += 1
        if n == 1:  # HBM blocks after a lower-tier one, the rest in the tier
            h = 0
            for j in range(m, e):
                if ids[j] in ref:
                    h += 1
            return [m + h, e - m - h]
        counts = [m] + [0] * n
        known = self.known
        for j in range(m, e):
            if ids[j] in ref:
                counts[0] += 1
            else:
                counts[known[j] + 1] += 1
        return counts


def conductor_estimates(
    reps: list[Replica],
    links: list[Link] | None,
    kv_bytes_per_token: float,
    memo: dict[tuple[int, ...], float] | None,
    ids: list[Any],
    limit: int,
    now: float,
    input_len: int,
) -> list[float]:
    """``ttft_estimate_ms + handoff_estimate_ms`` of the views of ``reps`` (and
    ``links``, the prefill instances' handoff links; None on an aggregated fleet)
    for the request ``ids[:limit]`` of ``input_len`` tokens at ``now``.

    The same floats in the same order of operations, with the same side
    effects (every link an estimate reads is advanced to now, as the views
    do), computed with less overhead: the request's place in the shared tiers
    is looked up once for all the replicas (a replica whose tiers are all
    shared sees the same stores), and prefill times come from ``memo``.
    """
    shared: SharedTiers | None = None  # the request in the shared tiers (looked up once)
    head = ids[:limit]
    nh = len(head)
    nbytes = input_len * kv_bytes_per_token
    out: list[float] = []
    for r in range(len(reps)):
        rep = reps[r]
        queue = queue_ms(rep, now, memo)
        ref = rep.cache.ref
        m = 0  # the leading run of head in HBM
        while m < nh and head[m] in ref:
            m += 1
        tiers: ReplicaTiers | None = rep.tiers
        if tiers is None:
            cached = m * rep.bs
            ttft = queue + prefill_ms(rep, input_len - cached, cached, memo)
        else:
            if m == limit:
                counts = [m] + [0] * tiers.n
            elif tiers.all_shared:
                if shared is None:
                    shared = SharedTiers(tiers, ids, limit)
                counts = shared.counts(m, ref, tiers.n)
            else:
                counts = rep.tier_match(ids, limit)
            total = 0
            for c in counts:
                total += c
            cached = total * rep.bs
            load = tiers.load_estimate_ms(now, counts[1:]) if cached else 0.0
            ttft = queue + load + prefill_ms(rep, input_len - cached, cached, memo)
        out.append(ttft + (links[r].estimate_ms(now, nbytes) if links is not None else 0.0))
    return out


def conductor_pick(
    reps: list[Replica],
    links: list[Link] | None,
    kv_bytes_per_token: float,
    memo: dict[tuple[int, ...], float] | None,
    ids: list[Any],
    limit: int,
    now: float,
    input_len: int,
) -> int:
    """The conductor's choice among ``reps`` (see :func:`conductor_estimates`):
    the smallest estimate, ties to the fewest outstanding tokens, then the
    lowest position; returns that replica's ``index``."""
    est = conductor_estimates(reps, links, kv_bytes_per_token, memo, ids, limit, now, input_len)
    best = 0
    best_t = est[0]
    best_load = reps[0].outstanding
    for j in range(1, len(est)):
        t = est[j]
        if t <= best_t:
            load = reps[j].outstanding
            if t < best_t or load < best_load:
                best = j
                best_t = t
                best_load = load
    return reps[best].index


def least_loaded_pick(reps: list[Any], t: float) -> int:
    """:meth:`LeastLoadedRouter._fast`: the fewest outstanding tokens at ``t``."""
    best = 0
    best_load: int = reps[0].outstanding_at(t)
    for i in range(1, len(reps)):
        load: int = reps[i].outstanding_at(t)
        if load < best_load:
            best = i
            best_load = load
    return best


def cache_aware_pick(
    saving: Sequence[float], ids: list[Any], limit: int, reps: list[Any], t: float
) -> int:
    """:meth:`CacheAwareRouter._fast`: the longest (effective) match, ties to the
    fewest outstanding tokens at ``t``, then the lowest index."""
    best = -1
    best_m = 0.0
    best_load = 0
    have_load = False
    head = ids[:limit]
    nh = len(head)
    for i in range(len(reps)):
        rep = reps[i]
        if saving and rep.tiers is not None:
            m = effective(rep.tier_match(ids, limit), saving)
        else:
            ref: dict[int, int] = rep.cache.ref
            k = 0
            while k < nh and head[k] in ref:
                k += 1
            m = float(k)
        if best < 0 or m > best_m:
            best = i
            best_m = m
            have_load = False
        elif m == best_m:
            if not have_load:
                best_load = reps[best].outstanding_at(t)
                have_load = True
            load: int = rep.outstanding_at(t)
            if load < best_load:
                best = i
                best_load = load
    return best


def kv_cost_pick(
    w: float,
    block_size: int,
    saving: Sequence[float],
    input_len: int,
    ids: list[Any],
    limit: int,
    reps: list[Any],
    t: float,
    active: list[int],
) -> int:
    """:meth:`KvCostRouter._fast` (temperature 0): the lowest
    ``w * (blocks - match) + active``, ties to the fewest outstanding tokens at
    ``t``, then the lowest index; ``active[i]`` is replica ``i``'s active blocks."""
    blocks = -(-input_len // block_size)
    miss = w * blocks  # the same float as w * (blocks - 0) in __call__
    n = len(active)
    costs: list[float] = [miss + a for a in active]
    low = costs[0]  # min(costs)
    for i in range(1, n):
        if costs[i] < low:
            low = costs[i]
    if limit > 0:
        # the effective match is at most ``limit``, so w * (blocks - m) + active >=
        # w * (blocks - limit) + active: a replica whose bound exceeds the lowest cost
        # so far can be neither the minimum nor a tie. Least active first: once one
        # replica's bound exceeds it, all later ones' do (the lowest cost only falls).
        base = w * (blocks - limit)
        order = _by_active(active)
        if saving:
            for i in order:
                a = active[i]
                if base + a > low:
                    break
                c = w * (blocks - effective(reps[i].tier_match(ids, limit), saving)) + a
                costs[i] = c
                if c < low:
                    low = c
        else:
            head = ids[:limit]
            h0 = head[0]
            for i in order:
                a = active[i]
                if base + a > low:
                    break
                ref: dict[int, int] = reps[i].cache.ref
                if h0 not in ref:
                    continue
                m = 0
                for h in head:
                    if h not in ref:
                        break
                    m += 1
                c = w * (blocks - m) + a
                costs[i] = c
                if c < low:
                    low = c
    best = -1  # costs.index(low), and whether another cost equals it
    tie = False
    for i in range(n):
        if costs[i] == low:
            if best < 0:
                best = i
            else:
                tie = True
                break
    if tie:  # ties: fewest outstanding tokens, then lowest index
        best_load: int = reps[best].outstanding_at(t)
        for i in range(best + 1, n):
            if costs[i] == low:
                load: int = reps[i].outstanding_at(t)
                if load < best_load:
                    best = i
                    best_load = load
    return best


def _by_active(active: list[int]) -> list[int]:
    """``sorted(range(len(active)), key=active.__getitem__)``: the indices by active
    blocks, ties in index order (a stable insertion sort for small fleets)."""
    n = len(active)
    if n > 64:
        return sorted(range(n), key=active.__getitem__)
    order: list[int] = []
    for i in range(n):
        a = active[i]
        j = len(order)
        order.append(i)
        while j > 0 and active[order[j - 1]] > a:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    return order
