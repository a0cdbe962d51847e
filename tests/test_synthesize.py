"""Trace synthesis that keeps the prefix structure (issue 13 part 2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ks_2samp

from inferasim import Workload, reuse
from inferasim.workload.synthesize import fit_trace

# Three sessions share a system block (id 1); session A has a second turn that
# extends its first turn's ids. block_size 2, every block full.
#   r0 t=0   [1, 2]        A turn 1
#   r1 t=10  [1, 3]        B turn 1
#   r2 t=15  [1, 6]        C turn 1
#   r3 t=20  [1, 2, 4, 5]  A turn 2 (8 tokens >= 4 + 1: holds r0's prompt and answer)
HAND = Workload.from_requests(
    [0, 10, 15, 20], [4, 4, 4, 8], [1, 1, 1, 1], [[1, 2], [1, 3], [1, 6], [1, 2, 4, 5]], block_size=2
)


def hand_model():
    # cap = max(2, 0.1 * 3) = 2 sessions: block 1 (3 sessions) is global, the rest private
    return fit_trace(HAND, min_shared_blocks=1, max_family_share=0.1)


def test_fit_by_hand():
    m = hand_model()
    assert m.session.tolist() == [0, 1, 2, 0] and m.turn.tolist() == [1, 1, 1, 2]
    assert m.offset_ms.tolist() == [0, 0, 0, 20]
    # nodes in order of first use: 1, 2, 3, 6, 4, 5
    assert m.node_sessions.tolist() == [3, 1, 1, 1, 1, 1]
    assert m.node_depth.tolist() == [1, 2, 2, 2, 3, 4]
    assert m.family.tolist() == [0, 1, 2]  # nothing but the global block ties them
    assert m.arrival_grid_ms is None


def test_scale_one_replays_every_session_once_with_fresh_ids():
    new = Workload.synthesize(like=hand_model(), seed=3)
    f = new.frame
    assert len(new) == 4 and sorted(f["turn"].tolist()) == [1, 1, 1, 2]
    assert f["session_id"].nunique() == 3
    ids = [new.block_ids(i).tolist() for i in range(4)]
    assert ids[0][0] == 0  # fresh ids, in order of first use
    assert len({r[0] for r in ids}) == 1  # the global block is shared by all
    second = int(np.flatnonzero(f["turn"].to_numpy() == 2)[0])
    sid = f["session_id"].iloc[second]
    first = int(np.flatnonzero((f["session_id"] == sid).to_numpy() & (f["turn"] == 1).to_numpy())[0])
    assert ids[second][:2] == ids[first]  # turn 2 extends turn 1
    private = [set(r[1:]) for i, r in enumerate(ids) if i != second]
    assert not (private[0] & private[1]) and not (private[1] & private[2])
    # infinite cache: hits = visits - 1 per node, whatever the order:
    # global block 4 visits -> 3 hits, A's block 2 -> 1 hit: 4 of 10 blocks
    assert reuse.infinite_hit_ratio(new).token_hit_ratio == pytest.approx(0.4)
    assert reuse.infinite_hit_ratio(HAND).token_hit_ratio == pytest.approx(0.4)


def test_scale_two_doubles_sessions_same_horizon():
    m = hand_model()
    new = Workload.synthesize(like=m, num_sessions_scale=2, seed=0)
    assert len(new) == 8 and new.frame["session_id"].nunique() == 6
    # global block: 8 visits -> 7 hits; each copy of A: 1 hit -> 9 of 20 blocks
    assert reuse.infinite_hit_ratio(new).token_hit_ratio == pytest.approx(9 / 20)
    # horizon = 8 requests at twice the rate of 4 requests over 20 * 4 / 3 ms
    assert new.arrival_ms.max() < 20 * 4 / 3


def test_prompt_scale_stretches_private_blocks_only():
    new = Workload.synthesize(like=hand_model(), prompt_scale=2, seed=0)
    # private blocks double, the global one does not: 1 + 2 * 1 = 3 blocks (6 tokens)
    # for turn-1 requests, 1 + 2 * 3 = 7 blocks (14 tokens) for A's turn 2
    assert sorted(new.input_len.tolist()) == [6, 6, 6, 14]
    assert sorted(new.num_blocks.tolist()) == [3, 3, 3, 7]
    assert new.inconsistent_mask().sum() == 0


def test_same_seed_same_workload():
    m = hand_model()
    a = Workload.synthesize(like=m, num_requests=40, seed=5)
    assert a == Workload.synthesize(like=m, num_requests=40, seed=5)
    assert a != Workload.synthesize(like=m, num_requests=40, seed=6)
    assert len(a) == 40


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_requests": 0}, "num_requests"),
        ({"rate": 2.0, "num_sessions_scale": 2}, "not both"),
        ({"prompt_scale": float("nan")}, "prompt_scale"),
        ({"num_sessions_scale": -1}, "num_sessions_scale"),
        ({"rate": 0}, "rate"),
    ],
)
def test_bad_parameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Workload.synthesize(like=HAND, **kwargs)


def test_needs_hash_ids():
    with pytest.raises(ValueError, match="no hash ids"):
        Workload.synthesize(like=Workload.from_requests([0], [3], [1]))


# ------------------------------------------------------------------ real traces

CAPACITIES = [10_000, 100_000, 1_000_000, 10_000_000]  # tokens


def curve(wl):
    blocks = [c // wl.block_size for c in CAPACITIES]
    return reuse.hit_rate_curve(wl, blocks, unit="blocks")["token_hit_ratio"].to_numpy()


@pytest.fixture(scope="module", params=["conversation", "synthetic"])
def real(request, conversation_path, synthetic_trace_path):
    path = conversation_path if request.param == "conversation" else synthetic_trace_path
    wl = Workload.from_mooncake(path)
    return request.param, wl, fit_trace(wl)


def test_fit_sessions_match_reuse_sessions(real):
    # the same chaining rule, implemented twice (tree walk here, trie in reuse)
    _, wl, m = real
    ref = reuse.sessions(wl).requests
    assert m.turn.tolist() == ref["turn"].tolist()
    assert m.num_sessions == ref["session"].nunique()


def test_scale_one_reproduces_curve_ceiling_and_distributions(real):
    name, wl, m = real
    new = Workload.synthesize(like=m, seed=0)
    assert len(new) == len(wl)
    # every session appears once: the infinite-cache ratio is the original's exactly
    assert reuse.infinite_hit_ratio(new).token_hit_ratio == pytest.approx(
        reuse.infinite_hit_ratio(wl).token_hit_ratio, abs=1e-12
    )
    diff = np.abs(curve(new) - curve(wl))
    assert diff.max() < 0.03, (name, curve(wl), curve(new))
    # Kolmogorov-Smirnov distances (max CDF gap) of what the issue names
    so, sn = reuse.sessions(wl), reuse.sessions(new)  # sessions inferred from ids
    assert ks_2samp(so.sessions["turns"], sn.sessions["turns"]).statistic < 0.03
    ro, rn = so.requests, sn.requests
    assert ks_2samp(ro["gap_ms"].dropna(), rn["gap_ms"].dropna()).statistic < 0.08
    assert ks_2samp(ro["growth_tokens"].dropna(), rn["growth_tokens"].dropna()).statistic < 0.05
    assert ks_2samp(np.diff(wl.arrival_ms), np.diff(new.arrival_ms)).statistic < 0.06
    assert sorted(new.input_len.tolist()) == sorted(wl.input_len.tolist())
    assert new.describe()["duration_ms"] == pytest.approx(wl.describe()["duration_ms"], rel=0.01)


def test_scale_four_lower_reuse_same_ceiling(real):
    _, wl, m = real
    one, four = (Workload.synthesize(like=m, num_sessions_scale=k, seed=1) for k in (1, 4))
    assert len(four) == 4 * len(wl)
    assert four.describe()["duration_ms"] == pytest.approx(wl.describe()["duration_ms"], rel=0.01)
    # each session keeps its structure: the same ceiling (shared system prompts
    # gain a hit per extra session, a negligible share)
    assert reuse.infinite_hit_ratio(four).token_hit_ratio == pytest.approx(
        reuse.infinite_hit_ratio(one).token_hit_ratio, abs=0.005
    )
    # four times the working set: never more reuse at a fixed capacity (up to the
    # hot system block's (4n - 1) / 4n against (n - 1) / n hits), much less at 1e7
    c1, c4 = curve(one), curve(four)
    assert (c4 <= c1 + 1e-3).all()
    assert c1[3] - c4[3] > 0.1


@pytest.mark.parametrize(
    ("prompt", "ids", "min_shared", "linked"),
    [
        # r0: 4 tokens [1, 2] + 2 output tokens = 6; r1: 6 tokens [1, 2, 3]. r1 holds r0's
        # prompt and answer exactly (6 >= 6): a second turn of r0's session.
        ([4, 6], [[1, 2], [1, 2, 3]], 1, True),
        # r0: one full block [7] (2 tokens + 2 = 4); r1 [7, 8] (4 tokens) extends it by its
        # only full block: depth 1 = min_shared_blocks is long enough to link.
        ([2, 4], [[7], [7, 8]], 1, True),
        # r0: 3 tokens [5, 6], its last block partial (1 of 2 tokens): 1 full block, so it
        # anchors at [5] only. With min_shared_blocks=2, r1 [5, 6, 9] (6 tokens >= 3 + 2)
        # looks at depth 2 ([5, 6]) alone, where no turn ends: a new session.
        ([3, 6], [[5, 6], [5, 6, 9]], 2, False),
    ],
)
def test_session_links_at_their_boundaries(prompt, ids, min_shared, linked):
    wl = Workload.from_requests([0, 10], prompt, [2, 2], ids, block_size=2)
    m = fit_trace(wl, min_shared_blocks=min_shared)
    assert m.session.tolist() == ([0, 0] if linked else [0, 1])
    assert m.turn.tolist() == ([1, 2] if linked else [1, 1])
