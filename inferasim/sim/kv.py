"""A replica's KV memory: HBM blocks, the prefix cache and the tiers behind it.

:class:`KVManager` (internal, compiled) is the one place that knows where a
request's KV is, in the spirit of vLLM's ``KVCacheManager``:

* **Accounting.** ``capacity`` pages of HBM (``page_tokens`` each, vLLM's
  ``block_size``; by default a page is one hash block) hold *private* pages (partial
  last blocks, decode blocks, duplicates, blocks being loaded) and the
  prefix cache's blocks (pinned by running sequences, or evictable):
  ``private + cached <= capacity``. :meth:`KVManager.allocate` takes blocks,
  evicting cached ones the eviction policy picks when the free ones run out
  (and offloading them to the first tier); :meth:`KVManager.free` gives a
  sequence's blocks back (tail first, as vLLM's free queue).
* **Lookup.** :meth:`KVManager.hbm_run` is a prompt's leading run of blocks
  resident in HBM (vLLM's ``get_computed_blocks``); :meth:`KVManager.lower_run`
  continues it in the lower tiers and decides whether loading beats
  recomputing; :meth:`KVManager.hits_by_tier` is the same walk as the
  routers see it. The walk itself is :meth:`ReplicaTiers.run`, shared by all.
* **Loads.** :meth:`KVManager.start_loading` takes the blocks out of their
  tiers and starts the transfers; :meth:`KVManager.finish_loading` caches
  the delivered blocks.
* **Caching computed blocks.** :meth:`KVManager.cache_computed` registers the
  full prompt blocks a step computed (and keeps them for the tiers written
  through, which :meth:`ReplicaTiers.flush` writes in bulk when the step ends).
  With ``cache_generated`` a released
  sequence's own full pages past its last hashed block (prompt tail,
  generated tokens) stay cached and evictable under :func:`own_key`, as
  vLLM keeps every full block it hashed (``vllm/v1/core/kv_cache_manager.py``,
  ``KVCacheManager.free``; ``block_pool.py``, ``BlockPool.free_blocks``):
  the same request hits them again after a preemption.
"""

from __future__ import annotations

from typing import Any

from inferasim.sim.cache import BlockCache, own_key
from inferasim.sim.kernels import StepKernel
from inferasim.sim.sequence import Seq
from inferasim.sim.tiers import ReplicaTiers, SharedLookup

__all__: list[str] = []

#: No block resident in HBM (the tier walk of :meth:`KVManager.held_run`).
_NOTHING_IN_HBM: dict[Any, int] = {}


class KVManager:
    """HBM blocks, the prefix cache and the lower tiers of one replica."""

    def __init__(
        self,
        capacity: int,
        block_size: int,
        cache: BlockCache,
        tiers: ReplicaTiers | None,
        kernel: StepKernel,
        write_through: bool,
        load_always: bool,
        page_tokens: int = 0,
        cache_generated: bool = False,
    ) -> None:
        self.capacity = capacity
        self.bs = block_size
        self.pt = page_tokens if page_tokens > 0 else block_size  # tokens a page
        self.ppb = block_size // self.pt  # pages a hash block
        self.cache_generated = cache_generated
        self.cache = cache
        self.tiers: ReplicaTiers | None = tiers
        self.kernel = kernel
        self.write_through = write_through and tiers is not None
        self.load_always = load_always
        # the fixed cost of a step (a load is worth it when it beats the marginal
        # prefill time of the blocks it brings)
        self.step0 = kernel.step(0, 0, 0, 0) if tiers is not None else 0.0
        self.private = 0  # blocks not in the prefix cache
        self.held = 0  # (prefill instance) blocks of handed-off KV held until delivered
        self.peak = 0

    # ---------------------------------------------------------- accounting
    @property
    def running(self) -> int:
        """Blocks held by running sequences (private plus pinned cached)."""
        return self.private + self.cache.pinned

    @property
    def running_blocks(self) -> int:
        """:attr:`running` in hash blocks (rounded up; what routers compare with
        prompt blocks)."""
        ppb = self.ppb
        return -(-(self.private + self.cache.pinned) // ppb)

    @property
    def free(self) -> int:
        """Pages neither private nor cached."""
        return self.capacity - self.private - self.cache.pages

    @property
    def available(self) -> int:
        """Blocks a new allocation may take: free plus evictable."""
        return self.capacity - self.private - self.cache.pinned

    def allocate(self, n: int, t: float) -> None:
        """Take ``n`` blocks at ``t``, evicting (and offloading) cached ones as needed."""
        cache = self.cache
        free = self.capacity - self.private - cache.pages
        self.private += n
        if n > free:
            if self.tiers is None:
                cache.evict(n - free)
            else:  # offload on evict, at the start of the step that needs the blocks
                gone: list[int] = []
                cache.evict(n - free, gone)
                self.tiers.offload(t, gone)

    def note_peak(self) -> None:
        """Remember the most blocks held by running sequences so far."""
        kv = self.private + self.cache.pinned
        if kv > self.peak:
            self.peak = kv

    def free_blocks(self, seq: Seq, computed: int) -> None:
        """Give back the pages of ``seq`` (``computed`` tokens), tail first."""
        pt = self.pt
        held = -(-computed // pt)
        if self.cache_generated:
            self._cache_own(seq, computed)
        if seq.hashed:
            self.cache.release(seq.hashed)
        self.private -= held - seq.cpages
        seq.hashed = []
        seq.cpages = 0
        seq.hit = 0

    def _cache_own(self, seq: Seq, computed: int) -> None:
        """Keep the full pages of ``seq`` past its hashed blocks cached (own entry),
        when its hashed blocks are a complete leading run; a sequence released
        inside its prompt's hash blocks keeps the leading pages of the block it
        was computing instead (:meth:`_cache_partial`)."""
        cache = self.cache
        n = len(seq.ids)
        ppb = self.ppb
        full = computed // self.pt
        base = n * ppb
        if full < base:
            self._cache_partial(seq, full)
            return
        if full == base or len(seq.hashed) < n or seq.cpages < base or seq.lower:
            return
        key = own_key(seq.rid)
        if len(seq.hashed) > n:  # (it holds its own entry from a resume: grow it)
            add = cache.top_up(key, full - base)
        else:
            if key in cache.ref:  # (an older own entry it did not hit: kept as it is)
                return
            cache.register_own(key, full - base)
            seq.hashed.append(key)
            add = full - base
        seq.cpages += add
        self.private -= add

    def _cache_partial(self, seq: Seq, full: int) -> None:
        """A sequence released (preempted) with ``full`` full pages, inside its
        prompt's hash blocks: keep the leading pages of the hash block it was
        computing cached, as a partial entry, when the blocks before it are
        its complete leading run.

        vLLM hashes and caches every full page when its chunk is scheduled
        (``vllm/v1/core/kv_cache_manager.py``, ``KVCacheManager.allocate_slots``
        -> ``cache_blocks``), so a preempted prefill's pages up to its last
        full one stay cached (``KVCacheManager.free``) and the request hits
        them on resume; hash blocks are cached here only when complete, so
        those leading pages would otherwise be lost. Not with lower tiers
        (they store whole blocks only)."""
        ppb = self.ppb
        j = full // ppb
        k = full - j * ppb
        if not k or self.tiers is not None or seq.lower:
            return
        cache = self.cache
        h = seq.ids[j]
        hashed = seq.hashed
        if len(hashed) == j + 1 and hashed[j] == h and seq.cpages > j * ppb:
            add = cache.top_up(h, k)  # (the partial entry it hit on resume: grown)
        elif len(hashed) == j and seq.cpages == j * ppb and h not in cache.ref:
            cache.register_own(h, k, j)
            hashed.append(h)
            add = k
        else:
            return
        seq.cpages += add
        self.private -= add

    # ------------------------------------------------- decode prefix cache
    def held_prefix(self, ids: list[Any], tokens: int) -> int:
        """Leading complete hash blocks of a ``tokens``-token prompt (``ids``) cached
        here (a decode instance keeping a prefix cache: what a handoff need not
        move; a partial entry ends the run)."""
        ref = self.cache.ref
        short = self.cache.short
        n = tokens // self.bs
        lim = n if n < len(ids) else len(ids)
        m = 0
        while m < lim and ids[m] in ref and not (short and ids[m] in short):
            m += 1
        return m

    def held_run(self, ids: list[Any], tokens: int) -> tuple[int, int, list[int]]:
        """The leading run of complete hash blocks of a ``tokens``-token prompt
        (``ids``) this decode instance holds, in HBM then in its own tiers.

        Returns ``(m, r, counts)``: the HBM run (:meth:`held_prefix`), the
        run's end once the tiers continue it (the walk of
        :meth:`ReplicaTiers.run` with no block counted in HBM, so it stops at
        the first block no tier holds) and the blocks to load from each tier.
        Without tiers ``r == m``.
        """
        m = self.held_prefix(ids, tokens)
        tiers = self.tiers
        if tiers is None:
            return m, m, []
        n = tokens // self.bs
        lim = n if n < len(ids) else len(ids)
        if m >= lim:
            return m, m, []
        r, counts, _ = tiers.run(ids, m, lim, _NOTHING_IN_HBM, None)
        return m, r, counts

    def start_inbound(self, seq: Seq, t: float, m: int, r: int, counts: list[int]) -> None:
        """Start loading blocks ``m..r`` of a handed-off ``seq``'s prompt from this
        decode instance's tiers at ``t`` (into pages reserved with the handoff;
        :meth:`adopt` caches them once they are delivered)."""
        tiers = self.tiers
        assert tiers is not None
        objs: list[Any] = seq.ids[m:r]
        self._take(tiers, objs, t)
        seq.loads = tiers.start_loads(t, counts, seq)  # (sets loads_left, load times)

    def adopt(self, seq: Seq, m: int) -> None:
        """A handed-off ``seq`` arrived whose ``m`` leading blocks were pinned here at
        placement: cache the rest of its full prompt blocks (pinned by it; one
        cached already stays a private copy)."""
        ids = seq.ids
        n = seq.prompt // self.bs
        hashed = ids[:m]
        k = self.cache.register_run(ids[m : n if n < len(ids) else len(ids)], hashed, m)
        self.private -= k * self.ppb
        seq.hashed = hashed
        seq.cpages = len(hashed) * self.ppb
        seq.hit = m

    # -------------------------------------------------------------- lookup
    def hbm_run(self, ids: list[Any], limit: int) -> int:
        """Length of the leading run of ``ids[:limit]`` resident in HBM (hash blocks)."""
        return self.cache.match_len(ids, limit)

    def page_limit(self, tokens: int) -> int:
        """Pages a hit may reuse for a sequence of ``tokens`` (at least one token
        is computed: ``(tokens - 1) // page_tokens``)."""
        return (tokens - 1) // self.pt

    def hits_by_tier(
        self, ids: list[Any], limit: int, lookup: SharedLookup | None, distinct: bool = False
    ) -> list[int]:
        """Blocks of the reusable run of ``ids[:limit]`` by tier, ``[hbm, tier 0, ...]``
        (what admission would find with ``load_policy="always"``; routing use).

        ``lookup`` memoises the request's place in the shared tiers for all
        replicas whose tiers are all shared (None: look it up here);
        ``distinct``: no id of ``ids`` repeats (:meth:`ReplicaTiers.run`)."""
        tiers = self.tiers
        m = self.cache.match_len(ids, limit)
        if tiers is None:
            return [m]
        shared = lookup if tiers.all_shared else None
        _, counts, mid = tiers.run(ids, m, limit, self.cache.ref, shared, distinct)
        return [m + len(mid), *counts]

    def lower_run(
        self, ids: list[int], m: int, limit: int, t: float
    ) -> tuple[int, list[int], list[int], int]:
        """Continue a leading HBM run of ``m`` blocks in the lower tiers.

        Returns ``(r, counts, mid, revive)``: the run's end (``m`` when nothing
        lies below or loading is not worth it), blocks to load from each tier,
        HBM blocks found after the first lower-tier block (reused in place) and
        how many of those are evictable now. Loading is worth it when the load
        (on the links as they are) ends sooner than recomputing from the first
        loaded block takes (the cost model's marginal prefill time), or always
        with ``load_policy="always"``.
        """
        tiers = self.tiers
        assert tiers is not None
        ref = self.cache.ref
        r, counts, mid = tiers.run(ids, m, limit, ref, None)
        if r == m:
            return m, counts, [], 0
        if not self.load_always:
            bs = self.bs
            n = (r - m) * bs
            c0 = m * bs
            redo = self.kernel.step(n, n * c0 + n * (n + 1) // 2, 0, 0) - self.step0
            if not tiers.load_estimate_ms(t, counts) < redo:
                return m, counts, [], 0
        revive = 0
        mids: list[Any] = mid
        for h in mids:
            if not ref[h]:
                revive += 1
        return r, counts, mid, revive

    # --------------------------------------------------------------- loads
    def start_loading(
        self, seq: Seq, t: float, m: int, r: int, counts: list[int], mid: list[int]
    ) -> None:
        """Pin the ``m`` leading and the ``mid`` HBM blocks of a run of ``r`` blocks
        and start loading the rest from the lower tiers (private until delivered)."""
        cache = self.cache
        tiers = self.tiers
        assert tiers is not None
        ids = seq.ids
        hashed = ids[:m]
        if mid:
            hashed = hashed + mid
        if hashed:
            cache.acquire(hashed)
        seq.hashed = hashed
        seq.cpages = len(hashed) * self.ppb
        seq.hit = m
        ref = cache.ref
        objs: list[Any] = ids[m:r]  # (as objects: looked up without re-boxing)
        lower: list[Any] = [h for h in objs if h not in ref]
        self._take(tiers, lower, t)
        seq.lower = lower
        seq.mixed = bool(mid)
        seq.loads = tiers.start_loads(t, counts, seq)  # (sets loads_left, load times)

    def _take(self, tiers: ReplicaTiers, lower: list[Any], t: float) -> None:
        """Take the blocks ``lower`` out of the tiers holding them, about to be
        loaded at ``t`` (grouped by tier, in prompt order)."""
        by_tier: list[list[Any]] = [[] for _ in range(tiers.n)]
        for h in lower:
            by_tier[tiers.where(h)].append(h)
        for k, hs in enumerate(by_tier):
            if hs:
                tiers.take(k, hs, t)

    def finish_loading(self, seq: Seq) -> None:
        """Every load of ``seq`` was delivered: cache its blocks (in prompt order)."""
        seq.loads = []
        k = self.cache.register_run(seq.lower, seq.hashed) * self.ppb
        self.private -= k
        seq.cpages += k
        if seq.mixed:  # hold the blocks in prompt order (tail-first release)
            held = set(seq.hashed)
            seq.hashed = [h for h in seq.ids[: seq.computed // self.bs] if h in held]
        seq.lower = []

    def cancel_loading(self, seq: Seq, t: float) -> None:
        """Drop the loads of a preempted ``seq`` at ``t`` (their blocks are lost)."""
        assert self.tiers is not None
        self.tiers.cancel(t, seq.loads)
        seq.loads = []

    # ------------------------------------------------------------- caching
    def register_blocks(self, seq: Seq, c0: int, c: int) -> int:
        """Cache the full prompt blocks of ``seq`` that tokens ``c0..c`` complete;
        returns how many entered the cache (the last ones of ``seq.hashed``).

        A block cached already stays a private copy, unless it is the partial
        entry this sequence hit, which its pages complete again (or, when
        another holder completed it first, which replaces them)."""
        ids = seq.ids
        if not ids:
            return 0
        bs = self.bs
        j0 = c0 // bs
        j1 = c // bs
        if j1 <= j0 or j0 >= len(ids):
            return 0
        cache = self.cache
        ppb = self.ppb
        x = seq.hit - 1  # (pages: the entry this sequence hit last may be partial)
        if ppb > 1 and j0 <= x < j1 and x < len(ids) and ids[x] in cache.ref:
            k = cache.register_run(ids[j0:x], seq.hashed, j0)
            # its pages of block x become the entry's, whether they complete it
            # or another holder did first (then they were copies): a holder
            # never pins entry pages while keeping copies of them
            cache.top_up(ids[x], ppb)
            grow = ppb - (seq.cpages - x * ppb)
            self.private -= grow
            seq.cpages += grow
            k += cache.register_run(ids[x + 1 : j1], seq.hashed, x + 1)
        else:
            k = cache.register_run(ids[j0:j1], seq.hashed, j0)
        self.private -= k * ppb
        seq.cpages += k * ppb
        return k

    def cache_computed(self, seq: Seq, c0: int, c: int, e: float) -> None:
        """A step ending at ``e`` took ``seq`` from ``c0`` to ``c`` computed tokens:
        cache the full prompt blocks it completed (written through, if so)."""
        k = self.register_blocks(seq, c0, c)
        if k and self.write_through:
            self.tiers.write_through_blocks(e, seq.hashed[-k:])  # type: ignore[union-attr]

    def write_scheduled(self, seq: Seq, e: float) -> None:
        """The step ending at ``e`` computed the blocks ``seq`` cached when it was
        scheduled (``cache_on_schedule``): write them through, if so."""
        k = seq.fresh
        seq.fresh = 0
        if k and self.write_through:
            self.tiers.write_through_blocks(e, seq.hashed[-k:])  # type: ignore[union-attr]
