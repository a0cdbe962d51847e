"""Linked runs of blocks replayed as one weighted block (reuse._chains) give the unmerged LRU hits.

The merged computation (one reference per run of ids that always occur
together, weighted stack depths, ramps of hits per run) is cross-checked
against the unmerged one (every block its own reference, the one-pass stack
distances) and against direct replay of the LRU cache, on random workloads
built to hold such runs: paths of a random forest whose nodes expand into
chains of sub-ids (as the 16-token copy of a 512-token trace does), cut
anywhere, with random ids, repeats and inconsistent lengths mixed in.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import hypothesis_settings
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.reuse import _kernels, hit_rate_curve, replay_cache
from inferasim.reuse._chains import chain_hits, chain_refs, lru_hits
from inferasim.reuse._stack import count_less

pytestmark = pytest.mark.skipif(not _kernels.available(), reason="the merged runs need numba")

BS = 4
TOUCHES = ("tail_first", "head_first")
SETTINGS = hypothesis_settings(150)


@st.composite
def chained(draw: st.DrawFn) -> Workload:
    """Forest paths with every node expanded into 1-4 chained sub-ids, cut anywhere."""
    k = draw(st.integers(1, 8))
    parent = [-1] + [draw(st.integers(-1, i - 1)) for i in range(1, k)]
    width = draw(st.lists(st.integers(1, 4), min_size=k, max_size=k))
    n = draw(st.integers(1, 10))
    rows, lens = [], []
    for _ in range(n):
        node = draw(st.integers(0, k - 1))
        path = []
        while node != -1:
            path.append(node)
            node = parent[node]
        ids = [10 * v + j for v in path[::-1] for j in range(width[v])]
        ids = ids[: draw(st.integers(0, len(ids)))] if draw(st.booleans()) else ids
        if draw(st.integers(0, 5)) == 0:  # a stray id, a repeat, or a foreign id
            ids.insert(draw(st.integers(0, len(ids))), draw(st.sampled_from([3, 10, 11, 999])))
        full = BS * len(ids)
        lens.append(draw(st.sampled_from([full, max(full - 1, 0), max(full - BS + 1, 0),
                                          full + 3, max(full - 2 * BS, 0)])))
        rows.append(ids)
    return Workload.from_requests(list(range(n)), lens, [1] * n, rows, block_size=BS)


def _hits(chains, caps, touch):
    return [a.tolist() for a in lru_hits(chains, caps, touch)]


@SETTINGS
@given(chained(), st.sampled_from(TOUCHES), st.booleans())
def test_merged_runs_give_the_unmerged_hits(wl: Workload, touch: str, full: bool) -> None:
    merged = chain_refs(wl, full_blocks_only=full)
    plain = chain_refs(wl, full_blocks_only=full, merge=False)
    assert (merged.n_ids, merged.n_blocks) == (plain.n_ids, plain.n_blocks)
    assert merged.weight.sum() == merged.n_ids  # every id in exactly one group
    caps = np.arange(plain.n_ids + 3)
    assert _hits(merged, caps, touch) == _hits(plain, caps, touch)


@SETTINGS
@given(chained(), st.sampled_from(TOUCHES), st.booleans())
def test_curve_equals_direct_replay(wl: Workload, touch: str, full: bool) -> None:
    caps = list(range(int(np.unique(wl.hash_ids).size) + 2))
    curve = hit_rate_curve(wl, caps, touch=touch, full_blocks_only=full)
    for c, hb, ht in zip(caps, curve["hit_blocks"], curve["hit_tokens"], strict=True):
        r = replay_cache(wl, c, policy="lru", touch=touch, full_blocks_only=full)
        assert (r["hit_blocks"].sum(), r["hit_tokens"].sum()) == (hb, ht)


@SETTINGS
@given(chained(), st.booleans())
def test_a_group_is_the_same_run_wherever_it_occurs(wl: Workload, full: bool) -> None:
    merged = chain_refs(wl, full_blocks_only=full)
    plain = chain_refs(wl, full_blocks_only=full, merge=False).refs
    width = merged.weight[merged.refs.compact]
    starts = np.concatenate(([0], np.cumsum(width)))
    # within each request the runs tile its references in order
    assert starts[-1] == plain.ids.size
    runs = {}
    for g, a, b in zip(merged.refs.compact.tolist(), starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        runs.setdefault(g, set()).add(tuple(plain.ids[a:b].tolist()))
    assert all(len(r) == 1 for r in runs.values())


def test_hand_derived_groups_and_hits() -> None:
    # Requests (block size 1): [1 2 3], [1 2 4], [5 1 2 3].
    # 1 -> 2 always and 2 <- 1 always: linked. 2 is followed by 3 and by 4: no link.
    # 5 starts the last request and is followed by 1, but 1 starts the others: no link.
    # Groups: {1, 2} (weight 2), {3}, {4}, {5}.
    wl = Workload.from_requests([0, 1, 2], [3, 3, 4], [1] * 3, [[1, 2, 3], [1, 2, 4], [5, 1, 2, 3]],
                                block_size=1)
    c = chain_refs(wl)
    assert c.refs.compact.tolist() == [0, 1, 0, 2, 3, 0, 1]
    assert c.weight.tolist() == [2, 1, 1, 1]
    # Tail-first LRU stack (top first): after R0: 1 2 3; after R1: 1 2 4 3.
    # R1 looks up 1, 2 at depths 1, 2: 1 hit from C=1, 2 hits from C=2.
    # R2 looks up 5 (cold): no hits at all. So hits: C=0: 0, C=1: 1, C>=2: 2.
    assert lru_hits(c, np.array([0, 1, 2, 5]), "tail_first")[0].tolist() == [0, 1, 2, 2]
    # Head-first stack after R0: 3 2 1; R1's 1, 2 at depths 3, 2: the prefix needs C >= 3.
    assert lru_hits(c, np.array([0, 2, 3, 5]), "head_first")[0].tolist() == [0, 0, 2, 2]


def test_ramp_and_jump_of_one_group_after_a_deeper_predecessor() -> None:
    # A 4-block group at weighted depth S = 10 after a reference of depth 8 (P = 8),
    # tail-first: members at depths 7, 8, 9, 10, prefix maxima 8, 8, 9, 10:
    # 0 hits below C = 8, 2 at C = 8, 3 at 9, 4 from 10 on. The row's first reference
    # (depth 8, weight 1) hits from C = 8. Tokens: blocks of 5, the last group holds 17.
    depth = np.array([8, 10])
    weight = np.array([1, 4])
    tokens = np.array([5, 17])
    caps = np.array([7, 8, 9, 10, 11])
    blocks, toks = chain_hits(depth, 99, weight, tokens, np.array([0, 2]), caps, 5, "tail_first")
    assert blocks.tolist() == [0, 3, 4, 5, 5]
    # full group hit from C = 10: 5 + 17 tokens; below, 5 tokens a hit block
    assert toks.tolist() == [0, 15, 20, 22, 22]


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 9)), min_size=1, max_size=30),
       st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 45)), min_size=1, max_size=10))
def test_weighted_count_less_is_a_weighted_count(pairs, queries) -> None:
    values = np.array([v for v, _ in pairs])
    weights = np.array([w for _, w in pairs])
    lo = np.array([min(a, b, values.size) for a, b, _ in queries])
    hi = np.array([min(max(a, b), values.size) for a, b, _ in queries])
    bound = np.array([c for *_, c in queries])
    want = [int(weights[a:b][values[a:b] < c].sum()) for a, b, c in zip(lo, hi, bound, strict=True)]
    assert count_less(values, lo, hi, bound, weights).tolist() == want
    assert count_less(values, lo, hi, bound).tolist() == [
        int((values[a:b] < c).sum()) for a, b, c in zip(lo, hi, bound, strict=True)]


def test_sparse_ids_are_factorised() -> None:
    big = [[2**60, 2**60 + 7, 5], [2**60, 2**60 + 7, -3]]
    wl = Workload.from_requests([0, 1], [3, 3], [1, 1], big, block_size=1)
    c = chain_refs(wl)
    assert c.weight.tolist() == [2, 1, 1] and c.n_ids == 4


@pytest.mark.parametrize("touch", TOUCHES)
def test_the_conversation_trace_split_into_chained_ids_gives_the_unmerged_hits(touch: str) -> None:
    from conftest import require_trace

    wl = Workload.from_mooncake(require_trace("conversation")).head(1500)
    # every 512-token id becomes 8 chained 64-token ids (a request's last ids may then
    # cover no tokens: inconsistent rows, kept on purpose)
    ids = (np.repeat(wl.hash_ids * 8, 8) + np.tile(np.arange(8), wl.hash_ids.size)).astype(np.int64)
    split = Workload(wl.frame, ids, wl.offsets * 8, block_size=64, has_hash_ids=True)
    caps = np.unique(np.geomspace(1, 300_000, 40).astype(np.int64))
    for full in (False, True):
        merged = chain_refs(split, full_blocks_only=full)
        plain = chain_refs(split, full_blocks_only=full, merge=False)
        assert merged.refs.ids.size < plain.refs.ids.size / 4  # runs were merged
        assert _hits(merged, caps, touch) == _hits(plain, caps, touch)
