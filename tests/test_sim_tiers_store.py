"""Tier stores and lookups against plain one-block-at-a-time references.

``ReplicaTiers._write`` takes a batch fast path (all blocks new) and an
inlined slow path; ``KVManager.hits_by_tier`` (the routers' estimate) and
``KVManager.lower_run`` (admission) share the walk ``ReplicaTiers.run`` (the
"first tier holding a block" lookup inlined in it). Here they are checked against direct
implementations of the documented rules on random small stores (tiny
capacities, ids drawn from a small range so batches overlap the stores,
repeat inside a batch and overflow): a write is ``TierStore.put`` one block
at a time (bytes for the blocks the tier lacked), its evictions cascade to
the next active tier if that one is an evict tier and are dropped otherwise
(and by the last tier); HBM's evictions go to the first active tier if it
is an evict tier, computed blocks to every through tier; a lookup is the leading
run of blocks in HBM or in the first tier holding them, stopping at a
block in none or repeated below HBM.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.sim.cache import BlockCache
from inferasim.sim.cost import LinearCostModel
from inferasim.sim.kv import KVManager
from inferasim.sim.tierconfig import Tier
from inferasim.sim.tiers import ReplicaTiers, TierStore

BS = 4  # tokens per block
KVB = 1.0  # bytes per token: a block is 4 bytes


def _kv(hbm: dict[int, int], rt: ReplicaTiers, load_always: bool = False) -> KVManager:
    """A replica's KV manager whose HBM cache holds ``hbm`` (id -> reference count)
    above ``rt``."""
    kv = KVManager(1 << 20, BS, BlockCache("lru"), rt, LinearCostModel().kernel(),
                   write_through=False, load_always=load_always)
    kv.cache.ref = hbm
    return kv


def _tiers(caps: list[int], shared_last: bool, writes: list[str] | None = None
           ) -> tuple[ReplicaTiers, dict[str, TierStore]]:
    writes = writes or ["evict"] * len(caps)
    specs = [
        Tier(f"t{k}", c * BS, read_gbps=1.0, write_gbps=2.0,
             shared=shared_last and k == len(caps) - 1, write=writes[k])
        for k, c in enumerate(caps)
    ]
    shared = {t.name: TierStore(t.capacity_tokens // BS) for t in specs if t.shared}
    return ReplicaTiers(specs, shared, BS, KVB), shared


def _reference_write(stores: list[list[int]], caps: list[int], k: int, ids: list[int],
                     written: list[int], peaks: list[int], policy: list[str]) -> None:
    """One put at a time on plain lists (index 0 = least recent)."""
    store, down = stores[k], []
    for h in ids:
        if h in store:
            store.remove(h)
            store.append(h)
            continue
        written[k] += 1
        store.append(h)
        if len(store) > caps[k]:
            down.append(store.pop(0))
        elif len(store) > peaks[k]:
            peaks[k] = len(store)
    nxt = next((j for j in range(k + 1, len(caps)) if caps[j] > 0), -1)
    if down and nxt >= 0 and policy[nxt] == "evict":
        _reference_write(stores, caps, nxt, down, written, peaks, policy)


ids_lists = st.lists(st.integers(0, 11), max_size=9)


@settings(max_examples=300, deadline=None)
@given(
    caps=st.lists(st.integers(0, 5), min_size=1, max_size=3),
    shared_last=st.booleans(),
    policy=st.lists(st.sampled_from(["evict", "through"]), min_size=3, max_size=3),
    writes=st.lists(st.tuples(st.booleans(), ids_lists, ids_lists), max_size=8),
)
def test_writes_equal_one_put_at_a_time(caps, shared_last, policy, writes):
    policy = policy[: len(caps)]
    rt, _ = _tiers(caps, shared_last, policy)
    ref = [[] for _ in caps]
    written = [0] * len(caps)
    peaks = [0] * len(caps)
    caps_b = [s.capacity for s in rt.stores]
    active = [k for k, c in enumerate(caps_b) if c > 0]
    for t, (evicted, ids, more) in enumerate(writes):
        if evicted:  # an HBM eviction: distinct ids (as the cache hands them over)
            ids = list(dict.fromkeys(ids))
            rt.offload(float(t), ids)
            if active and ids and policy[active[0]] == "evict":
                _reference_write(ref, caps_b, active[0], ids, written, peaks, policy)
        else:  # one step's computed blocks, from two requests (distinct, as cached)
            ids = list(dict.fromkeys(ids))
            more = [h for h in dict.fromkeys(more) if h not in ids]
            rt.write_through_blocks(float(t), ids)
            rt.write_through_blocks(float(t), more)
            rt.flush(float(t))
            for k in active:  # every through tier, top first, the step's blocks in order
                if policy[k] == "through" and ids + more:
                    _reference_write(ref, caps_b, k, ids + more, written, peaks, policy)
    for k, store in enumerate(rt.stores):
        assert list(store.blocks) == ref[k]
        assert store.peak == peaks[k]
        assert rt.bytes_written[k] == written[k] * BS * KVB
        assert len(store.blocks) <= store.capacity


def _reference_match(ref: set[int], stores: list[list[int]], ids: list[int], limit: int) -> list[int]:
    m = 0
    while m < limit and ids[m] in ref:
        m += 1
    out = [m] + [0] * len(stores)
    seen = set()
    for h in ids[m:limit]:
        if h in ref:
            out[0] += 1
            continue
        k = next((k for k, s in enumerate(stores) if h in s), -1)
        if k < 0 or h in seen:
            break
        seen.add(h)
        out[k + 1] += 1
    return out


def _filled(caps: list[int], contents: list[list[int]]):
    """Per-replica tiers of ``caps`` blocks holding ``contents`` (as far as each fits),
    and each tier's blocks as a list (LRU first)."""
    rt, _ = _tiers(caps, shared_last=False)
    for k, store in enumerate(rt.stores):
        for h in contents[k][: store.capacity]:
            store.put(h)
    return rt, [list(s.blocks) if s.capacity > 0 else [] for s in rt.stores]


@settings(max_examples=300, deadline=None)
@given(
    caps=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    contents=st.lists(st.lists(st.integers(0, 11), max_size=6, unique=True), min_size=3, max_size=3),
    hbm=st.sets(st.integers(0, 11), max_size=6),
    ids=st.lists(st.integers(0, 11), max_size=10),
    cut=st.integers(0, 10),
)
def test_hits_by_tier_equals_the_plain_lookup(caps, contents, hbm, ids, cut):
    rt, stores = _filled(caps, contents)
    limit = min(cut, len(ids))
    kv = _kv(dict.fromkeys(hbm, 1), rt)
    assert kv.hits_by_tier(ids, limit, None) == _reference_match(hbm, stores, ids, limit)
    for h in set(ids) | hbm:
        want = next((k for k, s in enumerate(stores) if h in s), -1)
        assert rt.where(h) == want


def _reference_lower_run(hbm: dict[int, int], stores: list[list[int]], ids: list[int],
                         m: int, limit: int) -> tuple[int, list[int], list[int], int]:
    """Admission's run below HBM, with ``load_policy="always"``: from the first
    block not in HBM, HBM blocks are reused in place (``mid``; ``revive`` counts
    the evictable ones, reference count 0), other blocks come from the first
    tier holding them; the run ends at a block in no tier or repeated below HBM."""
    counts = [0] * len(stores)
    if not any(ids[m] in s for s in stores):
        return m, counts, [], 0
    mid, seen, r = [], set(), m
    for h in ids[m:limit]:
        if h in hbm:
            mid.append(h)
        else:
            k = next((k for k, s in enumerate(stores) if h in s), -1)
            if k < 0 or h in seen:
                break
            seen.add(h)
            counts[k] += 1
        r += 1
    return r, counts, mid, sum(1 for h in mid if hbm[h] == 0)


@settings(max_examples=300, deadline=None)
@given(
    caps=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    contents=st.lists(st.lists(st.integers(0, 11), max_size=6, unique=True), min_size=3, max_size=3),
    hbm=st.dictionaries(st.integers(0, 11), st.integers(0, 2), max_size=6),
    ids=st.lists(st.integers(0, 11), min_size=1, max_size=10),
    cut=st.integers(1, 10),
)
def test_lower_run_equals_the_plain_walk(caps, contents, hbm, ids, cut):
    rt, stores = _filled(caps, contents)
    limit = min(cut, len(ids))
    m = 0
    while m < limit and ids[m] in hbm:
        m += 1
    if m == limit:  # (admission only looks below HBM when the HBM run stops short)
        return
    kv = _kv(hbm, rt, load_always=True)
    got = kv.lower_run(ids, m, limit, 0.0)
    assert got == _reference_lower_run(hbm, stores, ids, m, limit)
    # the routers' estimate is the same walk: HBM blocks first, then each tier's
    assert kv.hits_by_tier(ids, limit, None) == [m + len(got[2])] + got[1]
    if len(set(ids)) == len(ids):  # (told no id repeats, the walk keeps no record of them)
        assert kv.hits_by_tier(ids, limit, None, True) == [m + len(got[2])] + got[1]


@settings(max_examples=100, deadline=None)
@given(
    cap=st.integers(1, 6),
    shared=st.booleans(),
    spread=st.integers(0, 12),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 17)), min_size=300, max_size=700),
)
def test_long_runs_keep_the_lru_order(cap, shared, spread, ops):
    """A store's order survives its bookkeeping: long random runs of one-block writes
    and loads (an exclusive tier gives the block up, a shared one refreshes it) leave
    exactly the blocks of a plain LRU list, in its order, with the same evictions;
    the stale entries behind the store's order stay bounded (they are trimmed, from
    the front when evictions consumed them, else by renumbering). In the first
    half ids come from ``cap`` values (nothing is evicted: refreshes pile up and
    the entries are renumbered), then from ``cap + 1 + spread`` (evictions)."""
    rt, _ = _tiers([cap], shared_last=shared)
    store = rt.stores[0]
    ref: list[int] = []
    for t, (write, h) in enumerate(ops):
        h %= cap if 2 * t < len(ops) else cap + 1 + spread
        if write:
            rt._write(float(t), 0, [h])  # (the last tier: its evictions are dropped)
            if h in ref:  # a write of a held block refreshes it
                ref.remove(h)
            ref.append(h)
            if len(ref) > cap:
                ref.pop(0)
        elif h in ref:
            rt.take(0, [h])
            ref.remove(h)
            if shared:  # the pool keeps its copy, now the most recent
                ref.append(h)
        assert list(store.blocks) == ref
        # (an operation adds at most one stale entry; past live + 64 a trim runs)
        assert len(store.order) - len(store.blocks) <= len(store.blocks) + 66
