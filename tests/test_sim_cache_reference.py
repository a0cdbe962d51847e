"""BlockCache against a plain reference model of the documented rules.

``BlockCache`` keeps its LRU order in an ``OrderedDict`` (the n oldest taken
with one ``islice``), counts pinned blocks by size changes and keeps heap
entries with stale ones skipped for the other policies. The reference here
is a direct reading of the module docstring: a dict of reference counts,
one tick per event, and an eviction that scans every evictable block for
the smallest key:

* ``lru``: the tick at which the block last became evictable (a release
  walks its ids tail first);
* ``fifo``: the tick at which the block entered the cache;
* ``lfu``: (hits in the current residency, tick it became evictable);
* ``length_aware``: (hits, -position in its prompt, tick it became evictable).

Random operation sequences on a small id range (so runs repeat ids, meet
cached ids and revive evictable ones) must give the same reference counts,
the same ids cached by ``register_run`` and the same eviction order.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.sim.cache import EVICTION_POLICIES, BlockCache


class _Reference:
    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.ref: dict[int, int] = {}
        self.tick = 0
        self.born: dict[int, int] = {}  # tick of entering the cache
        self.pos: dict[int, int] = {}
        self.hits: dict[int, int] = {}
        self.freed: dict[int, int] = {}  # tick of becoming evictable
        self.evictions = 0

    def _next(self) -> int:
        self.tick += 1
        return self.tick

    def register_run(self, ids: list[int], out: list[int], start: int) -> int:
        k = 0
        for pos, h in enumerate(ids, start):
            if h not in self.ref:
                self.ref[h] = 1
                self.born[h] = self._next()
                self.pos[h] = pos
                self.hits[h] = 0
                out.append(h)
                k += 1
        return k

    def acquire(self, ids: list[int]) -> None:
        for h in ids:
            if self.ref[h] == 0:
                del self.freed[h]
            self.ref[h] += 1
            self.hits[h] += 1

    def release(self, ids: list[int]) -> None:
        for h in reversed(ids):
            self.ref[h] -= 1
            if self.ref[h] == 0:
                self.freed[h] = self._next()

    def _key(self, h: int) -> tuple:
        if self.policy == "lru":
            return (self.freed[h],)
        if self.policy == "fifo":
            return (self.born[h],)
        if self.policy == "lfu":
            return (self.hits[h], self.freed[h])
        return (self.hits[h], -self.pos[h], self.freed[h])

    def evict(self, n: int, out: list[int]) -> None:
        for _ in range(n):
            h = min(self.freed, key=self._key)
            del self.freed[h], self.ref[h], self.born[h], self.pos[h], self.hits[h]
            out.append(h)
        self.evictions += n


ops = st.lists(
    st.tuples(
        st.sampled_from(["run", "release", "evict"]),
        st.lists(st.integers(0, 9), max_size=6),  # ids of a new sequence
        st.integers(0, 6),  # its start position, or how many to evict
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(policy=st.sampled_from(EVICTION_POLICIES), script=ops, pick=st.randoms(use_true_random=False))
def test_block_cache_equals_the_plain_reference(policy, script, pick):
    cache, ref = BlockCache(policy), _Reference(policy)
    held: list[list[int]] = []  # the ids each live sequence holds (as the scheduler's seq.hashed)
    for op, ids, k in script:
        if op == "run":
            # a sequence: its leading cached run is acquired (as admission does), the
            # rest registered (ids repeated or cached by then stay private)
            m = 0
            while m < len(ids) and ids[m] in ref.ref:
                m += 1
            assert cache.match_len(ids, len(ids)) == m
            assert cache.evictable_among(ids, m) == sum(ref.ref[h] == 0 for h in ids[:m])
            hashed = ids[:m]
            cache.acquire(hashed)
            ref.acquire(hashed)
            got: list[int] = []
            want: list[int] = []
            # (a copy: register_run appends to the list it is given)
            assert cache.register_run(ids[m:], got, k + m) == ref.register_run(ids[m:], want, k + m)
            assert got == want
            held.append(hashed + got)
        elif op == "release" and held:
            seq = held.pop(pick.randrange(len(held)))
            cache.release(seq)
            ref.release(seq)
        elif op == "evict":
            n = min(k, len(ref.freed))
            got, want = [], []
            cache.evict(n, got if k % 2 else None)  # (with and without the out list)
            ref.evict(n, want)
            if k % 2:
                assert got == want
        assert cache.ref == ref.ref
        assert cache.pinned == sum(1 for r in ref.ref.values() if r > 0)
        assert cache.evictable == len(ref.freed)
        assert cache.evictions == ref.evictions
    # whatever is left evicts in the reference's order
    got, want = [], []
    n = len(ref.freed)
    cache.evict(n, got)
    ref.evict(n, want)
    assert got == want
