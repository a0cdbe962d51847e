"""The shared-tier lookup (``tiers.SharedLookup``) against the plain walk.

Routing a request reads its reusable run on every replica. On a replica whose
tiers are all shared, ``ReplicaTiers.run(ids, m, limit, ref, lookup)`` asks
a ``SharedLookup`` made once per request where each position's block sits in
the shared tiers (looked up once per position, only as far as some walk
reaches; an id repeated in the request is a miss from the start); without
it (``lookup=None``, what admission does) the walk looks every block up in
the stores and tracks the ids it counted below HBM itself. From the
replica's leading HBM run ``m`` both must give the same ``(end, counts,
mid)`` for every replica, in any order of the replicas (the lookup is
shared and extended as needed), and both must be the documented walk: a
block in HBM is reused in place, a block below HBM comes from the first
tier holding it, the run ends at a block in neither or repeated below HBM.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim.sim.tierconfig import Tier
from inferasim.sim.tiers import ReplicaTiers, SharedLookup, TierStore


def plain_walk(ids, limit, ref, where, n):
    """The documented walk from the leading HBM run, one position at a time:
    ``(m, end, counts, mid, looked)``, ``looked`` the positions it asked ``where``."""
    m = 0
    while m < limit and ids[m] in ref:
        m += 1
    counts, mid, looked = [0] * n, [], []
    seen = set(ids[:m])
    j = m
    while j < limit:
        h = ids[j]
        if h in ref:
            mid.append(h)
        else:
            looked.append(j)
            k = where(h) if h not in seen else -1
            if k < 0:
                break
            counts[k] += 1
        seen.add(h)
        j += 1
    return m, j, counts, mid, looked


def _pools(tier_of: dict[int, int], n: int) -> ReplicaTiers:
    """``n`` shared tiers (ample capacity) holding each id in its tier, and a
    replica's window on them."""
    tiers = [Tier(f"pool{k}", 16 * 64, 1.0, 1.0, shared=True) for k in range(n)]
    stores = {t.name: TierStore(64) for t in tiers}
    for h, k in tier_of.items():
        if k >= 0:
            stores[tiers[k].name].put(h)
    return ReplicaTiers(tiers, stores, 16, 1.0)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 3),
    ids=st.lists(st.integers(0, 12), min_size=1, max_size=30),
)
def test_shared_lookup_walk_equals_the_plain_walk(data, n, ids):
    limit = data.draw(st.integers(0, len(ids)), label="limit")
    # each id in at most one shared tier (where: the first holding it), or none
    tier_of = {h: data.draw(st.integers(-1, n - 1), label=f"tier of {h}") for h in set(ids)}
    rt = _pools(tier_of, n)
    assert rt.all_shared and all(rt.where(h) == k for h, k in tier_of.items())

    refs = data.draw(
        st.lists(st.sets(st.integers(0, 12)).map(lambda s: dict.fromkeys(s, 0)), min_size=1,
                 max_size=6),
        label="replicas' HBM",
    )
    look = SharedLookup(ids, limit)
    looked: set[int] = set()
    for ref in refs:
        m, end, counts, mid, asked = plain_walk(ids, limit, ref, tier_of.__getitem__, n)
        assert rt.run(ids, m, limit, ref, None) == (end, counts, mid)
        assert rt.run(ids, m, limit, ref, look) == (end, counts, mid)
        looked.update(asked)
    # a position is looked up once it is walked below HBM, never beyond; a repeated
    # id is a miss (-1) from the start; what was looked up is where() of its id
    first: dict[int, int] = {}
    for j, h in enumerate(ids[:limit]):
        first.setdefault(h, j)
    assert len(look.known) == limit
    for j, k in enumerate(look.known):
        if first[ids[j]] < j:
            assert k == -1
        elif j in looked:
            assert k == tier_of[ids[j]]
        else:
            assert k == -2  # (not looked up)


def test_a_repeated_id_ends_the_run_below_hbm():
    # A pool holds blocks 5 and 6; the request is 5, 6, 7, 5, 6 (limit 5).
    # A replica holding nothing: 5 and 6 from the pool, 7 nowhere: end 2, (pool 2).
    # A replica holding 7 and 5 in HBM (leading run 0: 5 is in HBM, so m = 1):
    # 6 from the pool, 7 and 5 in HBM (mid), then the repeated 6 ends the run
    # (its first copy is loaded already): end 4, (pool 1), mid [7, 5].
    rt = _pools({5: 0, 6: 0}, 1)
    ids = [5, 6, 7, 5, 6]
    look = SharedLookup(ids, 5)
    assert look.known == [-2, -2, -2, -1, -1]  # (the repeats of 5 and 6: misses at once)
    assert rt.run(ids, 0, 5, {}, look) == (2, [2], [])
    assert rt.run(ids, 1, 5, {7: 0, 5: 0}, look) == (4, [1], [7, 5])
    assert look.known == [0, 0, -1, -1, -1]  # 7 looked up by the first walk only
    for ref, m in (({}, 0), ({7: 0, 5: 0}, 1)):
        assert rt.run(ids, m, 5, ref, None) == rt.run(ids, m, 5, ref, SharedLookup(ids, 5))
