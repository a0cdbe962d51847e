"""A replica's prefix KV cache: content-addressed, reference-counted blocks.

Only *full* prompt blocks with a hash id ever enter the cache. A cached
block is either **pinned** (reference count > 0: some running sequence uses
it, it is never evicted) or **evictable** (count 0: kept for reuse until a
new block is needed and the eviction policy picks it).

Blocks that are not cached (partial last blocks, decode blocks, blocks of
workloads without hash ids, duplicates of a block another request cached
first) are *private*: the scheduler only counts them. Memory per replica is
``private + cached <= capacity``.

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
from collections.abc import Sequence
from itertools import islice
from typing import Any

__all__ = ["BlockCache", "EVICTION_POLICIES", "make_policy"]

EVICTION_POLICIES = ("lru", "fifo", "lfu", "length_aware")


class _LRU:
    """Evictable blocks in the order they became evictable."""

    __slots__ = ("_od",)

    def __init__(self) -> None:
        self._od: OrderedDict[int, None] = OrderedDict()

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


class BlockCache:
    """Content-addressed, reference-counted KV blocks of one replica.

    Parameters
    ----------
    eviction : {"lru", "fifo", "lfu", "length_aware"} or EvictionPolicy, default "lru"
        Which evictable block goes first when a new block is needed (see
        the module docstring and :class:`inferasim.sim.eviction.EvictionPolicy`).

    Attributes
    ----------
    ref : dict
        Cached hash id -> reference count (0 = evictable).
    pinned : int
        Cached blocks with a reference count > 0.
    evictions : int
        Blocks evicted so far.

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
    """

    __slots__ = ("ref", "pinned", "evictions", "_policy", "_lru", "_od")

    def __init__(self, eviction: Any = "lru") -> None:
        self._policy: Any = make_policy(eviction)
        self._lru = isinstance(self._policy, _LRU)
        # the LRU order (empty for the other policies)
        self._od: OrderedDict[int, None] = (
            self._policy._od if isinstance(self._policy, _LRU) else OrderedDict()
        )
        self.ref: dict[int, int] = {}
        self.pinned = 0
        self.evictions = 0

    @property
    def size(self) -> int:
        """Cached blocks (pinned and evictable).

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.size
        1
        """
        return len(self.ref)

    @property
    def evictable(self) -> int:
        """Cached blocks no running sequence uses.

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); c.evictable
        1
        """
        return len(self.ref) - self.pinned

    def match_len(self, ids: Sequence[Any], limit: int) -> int:
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

    def evictable_among(self, ids: Sequence[Any], m: int) -> int:
        """How many of ``ids[:m]`` (cached) are evictable now: reusing them takes
        them out of the evictable pool.

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); _ = c.register(2); c.release([1])
        >>> c.evictable_among([1, 2], 2)
        1
        """
        ref = self.ref
        n = 0
        for j in range(m):
            if not ref[ids[j]]:
                n += 1
        return n

    def acquire(self, ids: Sequence[int]) -> None:
        """Pin cached blocks for a sequence (one reference each).

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); c.acquire([1]); c.pinned
        1
        """
        ref, policy = self.ref, self._policy
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
        self.pinned += 1
        self._policy.inserted(h, pos)
        return True

    def register_run(self, ids: Sequence[int], out: list[int], start: int = 0) -> int:
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
        self.pinned += k
        return k

    def release(self, ids: Sequence[int]) -> None:
        """Drop one reference from each block, tail first.

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); c.ref, c.pinned
        ({1: 0}, 0)
        """
        ref = self.ref
        if self._lru:  # (the freed blocks join the LRU order: count them by its growth)
            od = self._od
            n0 = len(od)
            for h in reversed(ids):
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
        for h in reversed(ids):
            r = ref[h] - 1
            ref[h] = r
            if r == 0:
                freed += 1
                add(h)
        self.pinned -= freed

    def evict(self, n: int, out: list[int] | None = None) -> None:
        """Evict ``n`` evictable blocks chosen by the policy.

        ``out``, if given, receives the evicted ids in eviction order (for
        offloading them to a lower tier).

        Examples
        --------
        >>> c = BlockCache(); _ = c.register(1); c.release([1]); gone = []
        >>> c.evict(1, gone); c.size, gone
        (0, [1])
        """
        policy = self._policy
        if n > len(policy):
            raise RuntimeError(f"cannot evict {n} blocks: {len(policy)} evictable")
        ref = self.ref
        if self._lru:  # (the n oldest in one C-level walk, then one delete each)
            od = self._od
            gone = list(islice(od, n))
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
