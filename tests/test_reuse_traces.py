"""Cross-checks of the reuse analysis on the FAST'25 traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferasim import Workload
from inferasim.reuse import hit_rate_curve, infinite_hit_ratio
from inferasim.reuse._refs import block_refs
from inferasim.reuse.replay import replay_hits

CAPACITIES = [1, 3, 10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000]


@pytest.fixture(scope="module")
def conversation(conversation_path: Path) -> Workload:
    return Workload.from_mooncake(conversation_path)


@pytest.fixture(scope="module")
def synthetic(synthetic_trace_path: Path) -> Workload:
    return Workload.from_mooncake(synthetic_trace_path)


@pytest.fixture(params=["conversation", "synthetic"])
def trace(request: pytest.FixtureRequest) -> Workload:
    return request.getfixturevalue(request.param)


def test_trace_sizes(conversation: Workload) -> None:
    refs = block_refs(conversation)
    assert refs.ids.size == 288_500
    assert refs.n_unique == 182_790


@pytest.mark.parametrize("touch", ["tail_first", "head_first"])
@pytest.mark.parametrize("full", [False, True])
def test_one_pass_equals_replay_on_traces(trace: Workload, touch: str, full: bool) -> None:
    refs = block_refs(trace, full_blocks_only=full)
    caps = [c for c in CAPACITIES if c < refs.n_unique] + [refs.n_unique]
    curve = hit_rate_curve(trace, caps, touch=touch, full_blocks_only=full)
    replayed = [int(replay_hits(refs, c, "lru", touch).sum()) for c in caps]
    assert curve["hit_blocks"].tolist() == replayed
    ceiling = infinite_hit_ratio(trace, full_blocks_only=full)
    assert curve["hit_blocks"].iloc[-1] == ceiling.hit_blocks
    assert curve["token_hit_ratio"].iloc[-1] == ceiling.token_hit_ratio


def test_trace_ceiling_matches_describe(trace: Workload) -> None:
    # Workload.describe() and infinite_hit_ratio share the _ragged helpers, so
    # this is a consistency check only; the independent reference (a plain
    # set replay) is in test_reuse_ceiling.py.
    d = trace.describe()
    c = infinite_hit_ratio(trace)
    assert c.block_hit_ratio == pytest.approx(float(d["infinite_block_hit_ratio"]), abs=1e-12)
    assert c.token_hit_ratio == pytest.approx(float(d["infinite_token_hit_ratio"]), abs=1e-12)


def test_opt_dominates_on_traces(conversation: Workload) -> None:
    refs = block_refs(conversation)
    for cap in (100, 3_000, 30_000):
        best = replay_hits(refs, cap, "opt").sum()
        for policy in ("lru", "fifo", "lfu"):
            assert best >= replay_hits(refs, cap, policy).sum()


def test_default_curve_is_dense_and_monotone(conversation: Workload) -> None:
    curve = hit_rate_curve(conversation)
    assert len(curve) >= 150
    assert curve["capacity_blocks"].iloc[-1] == 182_790
    assert (np.diff(curve["token_hit_ratio"]) >= 0).all()


def test_structure_on_conversation(conversation: Workload) -> None:
    from inferasim.reuse import popularity, prefix_tree, reuse_distance, sessions

    # prefix-closed trace: a re-referenced block's predecessors were in the
    # same earlier request, so re-references are exactly the infinite hits
    rd = reuse_distance(conversation)
    assert len(rd) == infinite_hit_ratio(conversation).hit_blocks == 105_710
    assert (rd["stack_distance"] >= 1).all() and (rd["time_since_ms"] >= 0).all()
    pop = popularity(conversation)
    assert pop.blocks["requests"].sum() == 288_500  # no id repeats inside a request
    assert pop.blocks["hash_id"].iloc[0] == 0 and pop.blocks["requests"].iloc[0] == 12_031
    assert 0 < pop.zipf_exponent < 3
    tree = prefix_tree(conversation)
    assert tree.nodes["ends"].sum() == 12_031
    assert tree.root_children == 1  # every request starts with block 0
    s = sessions(conversation)
    linked = s.requests[s.requests["parent"] >= 0]
    assert len(linked) > 3_000
    assert (linked["gap_ms"] > 0).all() and (linked["growth_tokens"] >= 0).all()
    assert s.sessions["turns"].sum() == 12_031


@pytest.mark.parametrize("policy", ["fifo", "lfu", "opt"])
def test_compiled_kernels_equal_python_loops_on_traces(trace: Workload, policy: str) -> None:
    from inferasim.reuse import _kernels

    if not _kernels.available():
        pytest.skip("numba is not installed (pip install -e . installs it)")
    refs = block_refs(trace)
    for cap, touch in ((300, "tail_first"), (30_000, "tail_first"), (3_000, "head_first")):
        fast = replay_hits(refs, cap, policy, touch, compiled=True)
        slow = replay_hits(refs, cap, policy, touch, compiled=False)
        assert np.array_equal(fast, slow), (cap, touch)
