"""A replica's prefix KV cache: content-addressed, reference-counted blocks.

Only *full* prompt blocks with a hash id ever enter the cache. A cached
block is either **pinned** (reference count > 0: some running sequence uses
it, it is never evicted) or **evictable** (count 0: kept for reuse until a
new block is needed and the eviction policy picks it).

Blocks that are not cached (partial last blocks, decode blocks, blocks of
workloads without hash ids, duplicates of a block another request cached
first) are *private*: the scheduler only counts them. Memory per replica is
``private + cached <= capacity``.

Pages
-----
An engine allocates KV in *pages* (vLLM: 16 tokens) smaller than the
workload's hash blocks. With ``pages_per_block > 1`` every count here is in
pages: a cache entry is one hash block of ``pages_per_block`` pages, and
evicting a page takes the last resident page of the entry the policy picks
(vLLM frees a request's pages to the tail of its free queue in reverse
order, so a block's tail pages go before its head:
``vllm/v1/core/block_pool.py``, ``BlockPool.free_blocks``). An entry that
lost its tail pages is *partial*: a lookup reuses its leading pages and
stops there (vLLM hashes every page, so the leading pages of a block still
hit). Entries keyed by :func:`own_key` hold a request's own pages past its
last hashed block (its prompt tail and generated tokens), which only that
request can hit again, after a preemption.

Eviction policies
-----------------
``"lru"`` (default)
    Evict the block that became evictable longest ago. A finishing sequence
    releases its blocks tail first, as vLLM's free-block queue does, so a
    request's tail goes before its (more widely shared) head.
``"fifo"``
    Evict the block that entered the cache first.
``"lfu"``
    Evict the block with the fewest hits in its current residency, ties by
    LRU order.
``"length_aware"``
    The Mooncake paper's LengthAwareCache (FAST'25, section 4.2, Table 1:
    "similar to LFU but prioritizing cache blocks occurring later in
    requests" for eviction). Evict the block with the fewest hits in its
    current residency (as ``"lfu"``); among blocks with equal hits, the one
    deepest in its prompt first (largest 0-based block position in the
    prompt of the request that cached it; with prefix-chained hash ids a
    block has one position); remaining ties by LRU order. The eviction key
    is ``(hits, -position, time it became evictable)``, smallest first.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from itertools import islice
from typing import Any, Final

__all__ = ["BlockCache", "EVICTION_POLICIES", "PrefixIndex", "make_policy", "own_key"]

#: Keys of own-page entries lie above every int64 hash id (Final: compiled, a
#: constant instead of a module-dict lookup at every use).
OWN_BASE: Final = 1 << 64


def own_key(rid: int) -> int:
    """The cache key of request ``rid``'s own pages (never a workload hash id).

    Examples
    --------
    >>> own_key(3) - 2**64
    3
    """
    return OWN_BASE + rid

EVICTION_POLICIES = ("lru", "fifo", "lfu", "length_aware")


class _LRU:
    """Evictable blocks in the order they became evictable."""

    __slots__ = ("_od",)

    def __init__(self) -> None:
        self._od: OrderedDict[Any, None] = OrderedDict()

    def inserted(self, h: int, pos: int = 0) -> None:
        pass

    def hit(self, h: int) -> None:
        pass

    def add(self, h: int) -> None:
        self._od[h] = None

    def discard(self, h: int) -> None:
        del self._od[h]

    def forget(self, h: int) -> None:
        pass

    def pop(self) -> int:
        return self._od.popitem(last=False)[0]

    def __len__(self) -> int:
        return len(self._od)


class _HeapPolicy:
    """Evictable blocks in a heap keyed by (key, tick), stale entries skipped."""

    __slots__ = ("_heap", "_live", "_tick", "_born", "_hits", "_lfu", "_depth")

    def __init__(self, lfu: bool, depth: bool = False) -> None:
        self._heap: list[tuple[int, int, int, int]] = []
        self._live: dict[int, int] = {}  # evictable hash -> tick of its heap entry
        self._tick = 0
        self._born: dict[int, int] = {}  # insertion tick, or -position (length_aware)
        self._hits: dict[int, int] = {}
        self._lfu = lfu
        self._depth = depth

    def inserted(self, h: int, pos: int = 0) -> None:
        self._tick += 1
        self._born[h] = -pos if self._depth else self._tick
        self._hits[h] = 0

    def hit(self, h: int) -> None:
        self._hits[h] += 1

    def add(self, h: int) -> None:
        self._tick += 1
        if self._depth:
            key, key2 = self._hits[h], self._born[h]
        else:
            key, key2 = (self._hits[h] if self._lfu else self._born[h]), 0
        self._live[h] = self._tick
        heapq.heappush(self._heap, (key, key2, self._tick, h))

    def discard(self, h: int) -> None:
        del self._live[h]

    def forget(self, h: int) -> None:
        del self._born[h]
        del self._hits[h]

    def pop(self) -> int:
        heap, live = self._heap, self._live
        while True:
            _, _, tick, h = heapq.heappop(heap)
            if live.get(h) == tick:
                del live[h]
                return h

    def __len__(self) -> int:
        return len(self._live)


def make_policy(eviction: Any) -> Any:
    """A fresh built-in policy for a name, or the policy object itself (checked).

    Examples
    --------
    >>> type(make_policy("lfu")).__name__
    '_HeapPolicy'
    >>> make_policy("mru")
    Traceback (most recent call last):
    ...
    ValueError: eviction must be one of ('lru', 'fifo', 'lfu', 'length_aware') or an EvictionPolicy object, got 'mru'
    """
    if isinstance(eviction, str):
        if eviction == "lru":
            return _LRU()
        if eviction in ("fifo", "lfu", "length_aware"):
            return _HeapPolicy(lfu=eviction == "lfu", depth=eviction == "length_aware")
    else:
        missing = [m for m in _POLICY_METHODS if not callable(getattr(eviction, m, None))]
        if not missing:
            return eviction
        raise TypeError(
            f"eviction object {eviction!r} lacks the EvictionPolicy method(s) "
            f"{', '.join(missing)} (see inferasim.sim.eviction.EvictionPolicy)"
        )
    raise ValueError(
        f"eviction must be one of {EVICTION_POLICIES} or an EvictionPolicy object, got {eviction!r}"
    )


#: What an eviction policy object must do (see inferasim.sim.eviction.EvictionPolicy).
_POLICY_METHODS = ("inserted", "hit", "add", "discard", "forget", "pop", "__len__")


class PrefixIndex:
    """The lookup side of a replica's prefix cache (internal).

    Which entries are cached (``ref``: key -> reference count), how many
    pages each holds (``short``: the entries with fewer than
    ``pages_per_block``), and the leading cached run of a prompt.
    :class:`BlockCache` adds pinning, registering and eviction; the
    routers ask only these questions (the scheduler asks them before it pins).

    Examples
    --------
    >>> c = BlockCache(pages_per_block=2); _ = c.register(1)
    >>> c.size, c.entry_pages(1), c.match([1, 2], 4)
    (1, 2, (2, 1))
    """

    __slots__ = ("ref", "short", "ppb")

    def __init__(self, pages_per_block: int = 1) -> None:
        # (keys typed Any: compiled, an int key is unboxed and boxed again around
        # every dict operation, allocating and freeing an int object a block; the
        # id lists typed list, not Sequence: compiled, an item is read directly
        # instead of through PyObject_GetItem)
        self.ref: dict[Any, int] = {}
        # entries with fewer than ppb pages (partial ones, own pages)
        self.short: dict[int, int] = {}
        self.ppb = pages_per_block

    @property
    def size(self) -> int:
        """Cached entries (pinned and evictable).

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.size
        1
        """
        return len(self.ref)

    def entry_pages(self, h: int) -> int:
        """Pages of a cached entry.

        Examples
        --------
        >>> c = BlockCache(pages_per_block=4); _ = c.register(1); c.entry_pages(1)
        4
        """
        return self.short.get(h, self.ppb)

    def match_len(self, ids: list[Any], limit: int) -> int:
        """Length of the leading run of ``ids[:limit]`` that is cached.

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); _ = c.register(3)
        >>> c.match_len([1, 2, 3], 3)
        1
        """
        ref = self.ref
        m = 0
        while m < limit and ids[m] in ref:
            m += 1
        return m

    def match(self, ids: list[Any], limit: int, own: int = -1) -> tuple[int, int]:
        """The leading cached run of ``ids`` within ``limit`` pages: ``(pages, entries)``.

        Whole entries count while they are complete and end within the
        limit; the run ends with the leading pages of a partial entry or of
        the entry the limit cuts. When every id hits completely, the own
        entry ``own`` (see :func:`own_key`) continues the run.

        Examples
        --------
        >>> c = BlockCache(pages_per_block=4); _ = c.register(1), c.register(2)
        >>> c.match([1, 2, 3], 6)     # 4 pages of 1, then 2 of 2's 4 (the limit)
        (6, 2)
        """
        ppb = self.ppb
        if ppb == 1 and own < 0:
            m = self.match_len(ids, limit if limit < len(ids) else len(ids))
            return m, m
        ref, short = self.ref, self.short
        n = len(ids)
        pages = 0
        j = 0
        while j < n:
            h = ids[j]
            if h not in ref:
                return pages, j
            p = short.get(h, ppb) if short else ppb
            room = limit - pages
            if p < ppb or room < ppb:
                take = p if p < room else room
                if take <= 0:
                    return pages, j
                return pages + take, j + 1
            pages += ppb
            j += 1
        if own >= 0 and own in ref:
            p = short[own]
            room = limit - pages
            take = p if p < room else room
            if take > 0:
                return pages + take, j + 1
        return pages, j

    def evictable_among(self, ids: list[Any], m: int) -> int:
        """Pages of the entries ``ids[:m]`` (cached) that are evictable now:
        reusing them takes them out of the evictable pool.

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); _ = c.register(2); c.release([1])
        >>> c.evictable_among([1, 2], 2)
        1
        """
        ref = self.ref
        n = 0
        if self.ppb == 1 and not self.short:
            for j in range(m):
                if not ref[ids[j]]:
                    n += 1
            return n
        short, ppb = self.short, self.ppb
        for j in range(m):
            h = ids[j]
            if not ref[h]:
                n += short.get(h, ppb)
        return n


class BlockCache(PrefixIndex):
    """Content-addressed, reference-counted KV blocks of one replica.

    Parameters
    ----------
    eviction : {"lru", "fifo", "lfu", "length_aware"} or EvictionPolicy, default "lru"
        Which evictable block goes first when a new block is needed (see
        the module docstring and :class:`inferasim.sim.eviction.EvictionPolicy`).
    pages_per_block : int, default 1
        Engine pages in one hash block; counts are in pages (see "Pages").
    partial : bool, default True
        With pages, evict page by page (an entry can lose its tail pages);
        False evicts whole entries (what lower tiers, which store whole
        blocks, need).

    Attributes
    ----------
    ref : dict
        Cached key -> reference count (0 = evictable).
    pinned : int
        Cached pages with a reference count > 0.
    pages : int
        Cached pages (pinned and evictable).
    evictions : int
        Entries evicted so far (whole; a partial entry counts when its last
        page goes).

    Examples
    --------
    >>> c = BlockCache()
    >>> c.register(7), c.register(8)
    (True, True)
    >>> c.release([7, 8])           # 8 (the tail) becomes evictable first
    >>> c.match_len([7, 8, 9], 3), c.evictable_among([7, 8], 2)  # resident run, to revive
    (2, 2)
    >>> c.evict(1)
    >>> c.match_len([7, 8, 9], 3), c.evictions
    (1, 1)

    With 4 pages a block, evicting 3 pages takes the tail pages of the
    entry the policy picks (LRU: 8, released first):

    >>> c = BlockCache(pages_per_block=4)
    >>> _ = c.register(7), c.register(8); c.release([7, 8]); c.evict(3)
    >>> c.match([7, 8, 9], 12), c.pages     # 4 pages of 7, then 1 of 8
    ((5, 2), 5)
    """

    __slots__ = ("pinned", "pages", "evictions", "evicted_pages", "partial",
                 "_policy", "_lru", "_od", "_victim", "_in_victim")

    def __init__(self, eviction: Any = "lru", pages_per_block: int = 1,
                 partial: bool = True) -> None:
        self._policy: Any = make_policy(eviction)
        self._lru = isinstance(self._policy, _LRU)
        # the LRU order (empty for the other policies)
        self._od: OrderedDict[Any, None] = (
            self._policy._od if isinstance(self._policy, _LRU) else OrderedDict()
        )
        super().__init__(pages_per_block)
        self.pinned = 0
        self.pages = 0
        self.evictions = 0  # entries evicted whole
        # pages evicted, counting an entry that lost only its tail pages (the
        # scheduler's test of "did this step evict")
        self.evicted_pages = 0
        self.partial = partial
        # (pages) the entry losing pages now: out of the policy, ref 0, still resident
        self._victim = 0
        self._in_victim = False

    @property
    def evictable(self) -> int:
        """Cached pages no running sequence uses.

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); c.evictable
        1
        """
        return self.pages - self.pinned

    def acquire(self, ids: list[Any]) -> None:
        """Pin cached entries for a sequence (one reference each).

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); c.acquire([1]); c.pinned
        1
        """
        ref, policy = self.ref, self._policy
        if self.ppb != 1 or self.short:
            short, ppb = self.short, self.ppb
            lru, od = self._lru, self._od
            for h in ids:
                r = ref[h]
                if r == 0:
                    if self._in_victim and h == self._victim:
                        self._in_victim = False
                    elif lru:  # (the LRU order itself, not _LRU.discard/hit: with the
                        # same in release and _evict_pages, measured in callgrind
                        # instructions, vLLM rules: conversation -9.8%, tiered -6.5%)
                        del od[h]
                    else:
                        policy.discard(h)
                    self.pinned += short.get(h, ppb)
                ref[h] = r + 1
                if not lru:  # (LRU keeps no hit counts)
                    policy.hit(h)
            return
        if self._lru:  # (LRU keeps no hit counts: the revived blocks leave its order)
            od = self._od
            n0 = len(od)
            for h in ids:
                r = ref[h]
                if r == 0:
                    del od[h]
                ref[h] = r + 1
            self.pinned += n0 - len(od)
            return
        for h in ids:
            r = ref[h]
            if r == 0:
                policy.discard(h)
                self.pinned += 1
            ref[h] = r + 1
            policy.hit(h)

    def trim(self, h: int, pages: int) -> None:
        """Keep only the leading ``pages`` pages of entry ``h``, which one
        sequence has just pinned alone: the pages its hit does not use leave
        the cache, as vLLM pins only the blocks a hit uses (the sequence
        computes the rest into pages of its own, and :meth:`top_up` gives them
        back to the entry when it completes the block).

        Examples
        --------
        A 4-page entry a hit uses 3 pages of (the prompt ends on its last
        page, which is recomputed):

        >>> c = BlockCache(pages_per_block=4); _ = c.register(1); c.release([1])
        >>> c.acquire([1]); c.trim(1, 3); c.match([1], 4), c.pages, c.pinned
        ((3, 1), 3, 3)
        """
        have = self.short.get(h, self.ppb)
        if pages >= have:
            return
        self.short[h] = pages
        self.pinned -= have - pages
        self.pages -= have - pages

    def register(self, h: int, pos: int = 0) -> bool:
        """Cache a block its sequence just computed, pinned by that sequence.

        ``pos`` is the block's 0-based position in its prompt (read by
        ``"length_aware"`` eviction only). Returns False (nothing changes)
        when the id is already cached: the sequence keeps its copy as a
        private block.

        Examples
        --------
        >>> c = BlockCache(); c.register(5), c.register(5), c.ref
        (True, False, {5: 1})
        """
        if h in self.ref:
            return False
        self.ref[h] = 1
        self.pinned += self.ppb
        self.pages += self.ppb
        self._policy.inserted(h, pos)
        return True

    def top_up(self, h: int, pages: int) -> int:
        """Grow a pinned entry to ``pages`` pages (a partial block completed again by
        a sequence holding it, or a request's own entry); returns the pages added.

        Examples
        --------
        >>> c = BlockCache(pages_per_block=4); _ = c.register(1); c.release([1])
        >>> c.evict(3); c.acquire([1]); c.top_up(1, 4), c.pages, c.pinned
        (3, 4, 4)
        """
        have = self.short.get(h, self.ppb)
        if pages <= have:
            return 0
        if pages >= self.ppb and h < OWN_BASE:
            del self.short[h]
            pages = self.ppb
        else:
            self.short[h] = pages
        add = pages - have
        self.pinned += add
        self.pages += add
        return add

    def register_own(self, key: int, pages: int, pos: int = 0) -> None:
        """Cache ``pages`` pages under ``key``, pinned: a request's own pages
        (:func:`own_key`), or the leading pages of hash block ``key`` at prompt
        position ``pos`` that a released sequence computed (a partial entry).

        Examples
        --------
        >>> c = BlockCache(pages_per_block=4); c.register_own(own_key(0), 3); c.pages
        3
        >>> c.register_own(9, 2, pos=0); c.match([9], 4), c.pinned
        ((2, 1), 5)
        """
        self.ref[key] = 1
        self.short[key] = pages
        self.pinned += pages
        self.pages += pages
        self._policy.inserted(key, pos)

    def register_run(self, ids: list[Any], out: list[Any], start: int = 0) -> int:
        """:meth:`register` every id of ``ids``; append the cached ones to ``out``.

        ``ids[k]`` sits at position ``start + k`` of its prompt. Returns how
        many were cached (the rest were cached already).

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(2); held = []
        >>> c.register_run([1, 2, 3], held), held
        (2, [1, 3])
        """
        ref = self.ref
        n0 = len(ref)
        if self._lru:  # (no per-block policy state: count by the size change)
            for h in ids:
                if h not in ref:
                    ref[h] = 1
                    out.append(h)
        else:
            inserted = self._policy.inserted
            for pos, h in enumerate(ids, start):
                if h not in ref:
                    ref[h] = 1
                    out.append(h)
                    inserted(h, pos)
        k = len(ref) - n0
        self.pinned += k * self.ppb
        self.pages += k * self.ppb
        return k

    def release(self, ids: list[Any]) -> None:
        """Drop one reference from each entry, tail first.

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); c.ref, c.pinned
        ({1: 0}, 0)
        """
        ref = self.ref
        if self.ppb != 1 or self.short:
            short, ppb = self.short, self.ppb
            lru, od = self._lru, self._od
            add = self._policy.add
            freed = 0
            for i in range(len(ids) - 1, -1, -1):  # (tail first, by index: mypyc
                h = ids[i]  # fails on reversed() of a list[Any])
                r = ref[h] - 1
                ref[h] = r
                if r == 0:
                    freed += short.get(h, ppb)
                    if lru:  # (the LRU order itself, not _LRU.add: see acquire)
                        od[h] = None
                    else:
                        add(h)
            self.pinned -= freed
            return
        if self._lru:  # (the freed blocks join the LRU order: count them by its growth)
            od = self._od
            n0 = len(od)
            for i in range(len(ids) - 1, -1, -1):  # (tail first, by index: mypyc
                h = ids[i]  # fails on reversed() of a list[Any])
                r = ref[h]
                if r == 1:
                    ref[h] = 0
                    od[h] = None
                else:
                    ref[h] = r - 1
            self.pinned -= len(od) - n0
            return
        freed = 0
        add = self._policy.add
        for i in range(len(ids) - 1, -1, -1):
            h = ids[i]
            r = ref[h] - 1
            ref[h] = r
            if r == 0:
                freed += 1
                add(h)
        self.pinned -= freed

    def evict(self, n: int, out: list[int] | None = None) -> None:
        """Evict ``n`` evictable pages chosen by the policy (at least ``n``: whole
        entries when ``partial`` is False).

        ``out``, if given, receives the evicted hash ids in eviction order
        (for offloading them to a lower tier; own entries are not offered).

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); gone = []
        >>> c.evict(1, gone); c.size, gone
        (0, [1])
        """
        if self.ppb != 1 or self.short:
            self._evict_pages(n, out)
            return
        policy = self._policy
        if n > len(policy):
            raise RuntimeError(f"cannot evict {n} blocks: {len(policy)} evictable")
        ref = self.ref
        if self._lru:  # (the n oldest in one C-level walk, then one delete each)
            od = self._od
            gone: list[Any] = list(islice(od, n))
            for h in gone:
                del od[h]
                del ref[h]
            if out is not None:
                out += gone
        else:
            for _ in range(n):
                h = policy.pop()
                del ref[h]
                policy.forget(h)
                if out is not None:
                    out.append(h)
        self.evictions += n
        self.evicted_pages += n
        self.pages -= n

    def _evict_pages(self, n: int, out: list[int] | None) -> None:
        """:meth:`evict` counted in pages: entries go in the policy's order, and
        an entry with more pages than are still needed loses only its tail."""
        if n > self.pages - self.pinned:
            raise RuntimeError(f"cannot evict {n} pages: {self.pages - self.pinned} evictable")
        policy, ref, short, ppb = self._policy, self.ref, self.short, self.ppb
        lru, od = self._lru, self._od
        pages = self.pages  # (counted in locals, stored once)
        evictions = self.evictions
        while n > 0:
            if self._in_victim:
                h: Any = self._victim  # (Any: a dict key kept boxed, see ref)
            elif lru:  # (the LRU order itself, not _LRU.pop/forget: see acquire)
                h = od.popitem(last=False)[0]
            else:
                h = policy.pop()
            p = short.get(h, ppb)
            if p > n and self.partial:
                short[h] = p - n
                pages -= n
                self._victim = h
                self._in_victim = True
                break
            self._in_victim = False
            del ref[h]
            own = h >= OWN_BASE
            if p != ppb or own:
                del short[h]
            if not lru:
                policy.forget(h)
            pages -= p
            evictions += 1
            n -= p
            if out is not None and not own:
                out.append(h)
        self.evicted_pages += self.pages - pages
        self.pages = pages
        self.evictions = evictions
