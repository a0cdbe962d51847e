"""The conductor's shared-tier walk (``routing_fast.SharedTiers``) against the plain walk.

``ConductorRouter._estimates`` finds where a request's reusable run ends on each
replica whose tiers are all shared by jumping between the positions that no
shared tier holds (looked up once per request, lazily); the plain walk steps
through every position (``ids[j]`` in the replica's HBM, else in the first
shared tier holding it, else the run ends; an id repeated in the request ends
the run below HBM). They must give the same counts for every replica, in any
order of the replicas (the lookups are shared and extended as needed).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from inferasim.sim.routing_fast import SharedTiers

from inferasim.sim.tierconfig import Tier
from inferasim.sim.tiers import ReplicaTiers, TierStore


def plain_counts(ids, limit, ref, where, n):
    """The walk of the conductor before the jump (one position at a time)."""
    m = 0
    while m < limit and ids[m] in ref:
        m += 1
    counts = [m] + [0] * n
    seen = set(ids[:m])
    for j in range(m, limit):
        if ids[j] in ref:
            counts[0] += 1
        else:
            k = where(ids[j]) if ids[j] not in seen else -1
            if k < 0:
                break
            counts[k + 1] += 1
        seen.add(ids[j])
    return m, counts


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 3),
    ids=st.lists(st.integers(0, 12), min_size=1, max_size=30),
)
def test_jumping_walk_equals_the_plain_walk(data, n, ids):
    limit = data.draw(st.integers(0, len(ids)), label="limit")
    # each id in at most one shared tier (where: the first holding it), or none
    tier_of = {h: data.draw(st.integers(-1, n - 1), label=f"tier of {h}") for h in set(ids)}

    def where(h):
        return tier_of[h]

    # n shared tiers (ample capacity) holding each id in its tier: rt.where == where
    tiers = [Tier(f"pool{k}", 16 * 64, 1.0, 1.0, shared=True) for k in range(n)]
    stores = {t.name: TierStore(64) for t in tiers}
    for h, k in tier_of.items():
        if k >= 0:
            stores[tiers[k].name].put(h)
    rt = ReplicaTiers(tiers, stores, 16, 1.0, False)
    assert all(rt.where(h) == k for h, k in tier_of.items())

    refs = data.draw(
        st.lists(st.sets(st.integers(0, 12)).map(lambda s: dict.fromkeys(s, 0)), min_size=1, max_size=6),
        label="replicas' HBM",
    )
    walk = SharedTiers(rt, ids, limit)
    for ref in refs:
        m, want = plain_counts(ids, limit, ref, where, n)
        if m == limit:  # (the estimate never walks a full HBM hit)
            continue
        assert walk.counts(m, ref, n) == want
    # what was looked up is what the plain lookup says, and the misses are its -1s
    seen_first = {}
    for j, h in enumerate(ids[:limit]):
        seen_first.setdefault(h, j)
    for j, k in enumerate(walk.known):
        assert k == (-1 if seen_first[ids[j]] < j else tier_of[ids[j]])
    assert walk.miss == [j for j, k in enumerate(walk.known) if k < 0]
