"""Tiered LRU hierarchies: one-pass stack split == direct per-tier replay.

Hand-worked cases (derivations in comments, tier contents written most
recent first), hypothesis cross-checks of ``tiered_hit_rate`` (stack
depths) against ``replay_tiered`` (an OrderedDict per tier), and the same
check on both FAST'25 traces.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import hypothesis_settings, id_workloads
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload, WorkloadError
from inferasim.reuse import hit_rate_curve, replay_cache, replay_tiered, tiered_hit_rate

BS = 4
SETTINGS = hypothesis_settings(60)
TOUCHES = ("tail_first", "head_first")


def wl_of(ids: list[list[int]], input_len: list[int] | None = None, bs: int = 1) -> Workload:
    n = len(ids)
    if input_len is None:
        input_len = [bs * len(r) for r in ids]
    return Workload.from_requests(list(range(n)), input_len, [1] * n, ids, block_size=bs)


def per_tier(df, k: int, what: str = "blocks") -> list[int]:
    return [int(df[f"tier{t}_hit_{what}"].sum()) for t in range(k)]


# ------------------------------------------------------------ hand-worked
# Block size 1, exclusive tiers [1, 1], tail-first touches.
# R0 [1, 2]: lookup misses. Touch 2: T0 (2). Touch 1: T0 (1), 2 demoted -> T1 (2).
# R1 [3]:    miss. Touch 3: T0 (3), 1 demoted -> T1 (1), 2 dropped.
# R2 [1, 2]: 1 is in T1 (hit, tier 1); 2 is nowhere -> run ends. 1 hit in tier 1.
#            Touch 2: T0 (2), 3 -> T1 (3, 1)? No: T1 had (1); 3 demoted on top
#            makes T1 (3, 1), over capacity 1 -> 1 dropped: T0 (2), T1 (3).
#            Touch 1: T0 (1), 2 -> T1 (2, 3) -> 3 dropped: T0 (1), T1 (2).
# R3 [1, 2]: 1 in T0, 2 in T1 -> 2 hits, one per tier.
# Stack view: before R2 the LRU stack is 3, 1, 2: depth(1) = 2 = C0 + C1 -> tier 1;
# before R3 it is 1, 2, 3: depths 1 and 2 -> tiers 0 and 1.
EXCLUSIVE_CASE = [[1, 2], [3], [1, 2], [1, 2]]


def test_exclusive_by_hand() -> None:
    wl = wl_of(EXCLUSIVE_CASE)
    df = replay_tiered(wl, [1, 1])
    assert df["tier0_hit_blocks"].tolist() == [0, 0, 0, 1]
    assert df["tier1_hit_blocks"].tolist() == [0, 0, 1, 1]
    assert df["hit_blocks"].tolist() == [0, 0, 1, 2]
    one = tiered_hit_rate(wl, [1, 1])
    assert one["hit_blocks"].tolist() == [1, 2]
    # 7 block references of 1 token each
    assert one["block_hit_ratio"].tolist() == pytest.approx([1 / 7, 2 / 7])
    assert one.attrs["token_hit_ratio"] == pytest.approx(3 / 7)
    # a single LRU of 2 blocks hits the same 3 blocks
    assert replay_cache(wl, 2)["hit_blocks"].sum() == 3


# Inclusive, tiers [1, 2] (each an LRU over every touch), tail-first.
# R0 [1, 2]: T0 (1); T1 (1, 2).   R1 [3]: T0 (3); T1 (3, 1).
# R2 [1, 2]: 1 not in T0, in T1 -> tier 1 hit; 2 nowhere -> stop. 1 hit.
#   Touch 2, then 1: T0 (1); T1 (1, 2).
# R3 [1, 2]: 1 in T0 (tier 0), 2 in T1 (tier 1).
# Stack rule: bounds max(C) = [1, 2]: before R2 depth(1) = 2 -> tier 1; before
# R3 depths 1, 2 -> tiers 0, 1.
def test_inclusive_by_hand() -> None:
    wl = wl_of(EXCLUSIVE_CASE)
    df = replay_tiered(wl, [1, 2], inclusive=True)
    assert df["tier0_hit_blocks"].tolist() == [0, 0, 0, 1]
    assert df["tier1_hit_blocks"].tolist() == [0, 0, 1, 1]
    assert tiered_hit_rate(wl, [1, 2], inclusive=True)["hit_blocks"].tolist() == [1, 2]
    # an inclusive tier no larger than the one above serves nothing: [2, 1]
    # behaves like one LRU of 2 blocks, all in tier 0.
    two = tiered_hit_rate(wl, [2, 1], inclusive=True)
    assert two["hit_blocks"].tolist() == [3, 0]
    assert per_tier(replay_tiered(wl, [2, 1], inclusive=True), 2) == [3, 0]


# Tokens by tier and a block found lower continuing the run. Block size 512,
# exclusive tiers [1, 2], R0 [1, 2, 3] with 1300 tokens (last block 276).
# Tail-first touches 3, 2, 1: T0 (1), T1 (2, 3).
# R1 [1, 2, 3] 1300 tokens: 1 in T0 (512 tokens), 2 and 3 in T1 (512 + 276).
def test_tokens_by_tier() -> None:
    wl = wl_of([[1, 2, 3], [1, 2, 3]], input_len=[1300, 1300], bs=512)
    df = replay_tiered(wl, [1, 2])
    assert df.loc[1, ["tier0_hit_tokens", "tier1_hit_tokens", "hit_tokens"]].tolist() == [
        512,
        788,
        1300,
    ]
    t = tiered_hit_rate(wl, [1, 2])
    assert t["hit_tokens"].tolist() == [512, 788]
    assert t["token_hit_ratio"].tolist() == pytest.approx([512 / 2600, 788 / 2600])
    # full blocks only: the 276-token block is never cached
    f = tiered_hit_rate(wl, [1, 2], full_blocks_only=True)
    assert f["hit_tokens"].tolist() == [512, 512]
    # token capacities round down: 1000 tokens = 1 block, 1500 = 2 blocks
    assert tiered_hit_rate(wl, [1000, 1500], unit="tokens")["capacity"].tolist() == [1, 2]


def test_zero_capacity_tiers_pass_blocks_through() -> None:
    wl = wl_of(EXCLUSIVE_CASE)
    # a zero tier between two others changes nothing but its own row
    a = tiered_hit_rate(wl, [1, 0, 1])
    assert a["hit_blocks"].tolist() == [1, 0, 2]
    assert per_tier(replay_tiered(wl, [1, 0, 1]), 3) == [1, 0, 2]
    assert tiered_hit_rate(wl, [0])["hit_blocks"].tolist() == [0]


def test_bad_input() -> None:
    wl = wl_of(EXCLUSIVE_CASE)
    with pytest.raises(ValueError, match="at least one tier"):
        tiered_hit_rate(wl, [])
    with pytest.raises(ValueError, match=r"capacities\[1\]"):
        tiered_hit_rate(wl, [1, -1])
    with pytest.raises(ValueError, match="sequence"):
        replay_tiered(wl, 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unit"):
        tiered_hit_rate(wl, [1], unit="bytes")
    with pytest.raises(ValueError, match="touch"):
        replay_tiered(wl, [1], touch="random")
    with pytest.raises(WorkloadError, match="no block hash ids"):
        tiered_hit_rate(Workload.from_requests([0], [10], [1]), [1])


# ------------------------------------------------------------- properties
def workloads() -> st.SearchStrategy[Workload]:
    """Any ids (repeats inside a request included), partial last blocks."""
    return id_workloads(max_n=9, max_id=7)


capacity_vectors = st.lists(st.integers(0, 5), min_size=1, max_size=4)


@SETTINGS
@given(
    workloads(), capacity_vectors, st.booleans(), st.sampled_from(TOUCHES), st.booleans()
)
def test_one_pass_equals_replay(
    wl: Workload, caps: list[int], inclusive: bool, touch: str, full: bool
) -> None:
    kw = dict(inclusive=inclusive, touch=touch, full_blocks_only=full)
    one = tiered_hit_rate(wl, caps, **kw)
    rep = replay_tiered(wl, caps, **kw)
    assert one["hit_blocks"].tolist() == per_tier(rep, len(caps))
    assert one["hit_tokens"].tolist() == per_tier(rep, len(caps), "tokens")
    # the whole hierarchy hits like one LRU of sum (exclusive) or max (inclusive)
    size = max(caps) if inclusive else sum(caps)
    single = replay_cache(wl, size, touch=touch, full_blocks_only=full)
    assert (rep["hit_blocks"] == single["hit_blocks"]).all()
    assert (rep["hit_tokens"] == single["hit_tokens"]).all()
    curve = hit_rate_curve(wl, [size], touch=touch, full_blocks_only=full)
    assert one["hit_tokens"].sum() == curve["hit_tokens"].iloc[0]


@SETTINGS
@given(workloads(), capacity_vectors, st.sampled_from(TOUCHES))
def test_top_tiers_beat_one_cache_of_their_size(wl: Workload, caps: list[int], touch: str) -> None:
    # Exclusive: the top k+1 tiers serve every hit a single LRU of their
    # combined size C0+..+Ck serves (a run inside those depths is a run in
    # the hierarchy), plus blocks whose run continues through lower tiers.
    one = tiered_hit_rate(wl, caps, touch=touch)
    bounds = [sum(caps[: k + 1]) for k in range(len(caps))]
    curve = hit_rate_curve(wl, bounds, touch=touch).set_index("capacity_blocks")
    running = one["hit_blocks"].cumsum().tolist()
    for b, r in zip(bounds, running, strict=True):
        assert r >= curve.loc[b, "hit_blocks"]
    assert running[-1] == curve.loc[bounds[-1], "hit_blocks"]


# ------------------------------------------------------------- real traces
TRACE_CAPS = {
    "exclusive": [[1_000, 5_000], [803, 3_000, 20_000], [10_000, 0, 6_000]],
    "inclusive": [[1_000, 5_000, 30_000], [5_000, 2_000, 8_000]],
}


@pytest.fixture(scope="module", params=["conversation", "synthetic"])
def trace(request: pytest.FixtureRequest, conversation_path: Path, synthetic_trace_path: Path):
    path = conversation_path if request.param == "conversation" else synthetic_trace_path
    return Workload.from_mooncake(path)


@pytest.mark.parametrize(
    ("inclusive", "caps"),
    [(False, c) for c in TRACE_CAPS["exclusive"]] + [(True, c) for c in TRACE_CAPS["inclusive"]],
)
def test_one_pass_equals_replay_on_traces(trace: Workload, inclusive: bool, caps: list[int]) -> None:
    one = tiered_hit_rate(trace, caps, inclusive=inclusive)
    rep = replay_tiered(trace, caps, inclusive=inclusive)
    assert one["hit_blocks"].tolist() == per_tier(rep, len(caps))
    assert one["hit_tokens"].tolist() == per_tier(rep, len(caps), "tokens")
    size = max(caps) if inclusive else sum(caps)
    curve = hit_rate_curve(trace, [size])
    assert one["hit_tokens"].sum() == curve["hit_tokens"].iloc[0]
    assert one["hit_blocks"].iloc[0] > 0 and one["hit_blocks"].iloc[-1] > 0
