"""Hand-worked cache replays pinning the semantics of inferasim.reuse.

Every expected value is derived in the comments; cache states are written
least-recent first, e.g. ``[1, 2]`` means 2 is the most recent.
"""

from __future__ import annotations

import numpy as np
import pytest

from inferasim import Workload, WorkloadError
from inferasim.reuse import hit_rate_curve, infinite_hit_ratio, replay_cache

BS = 512


def wl_of(ids: list[list[int]], input_len: list[int] | None = None) -> Workload:
    n = len(ids)
    if input_len is None:
        input_len = [BS * len(r) for r in ids]
    return Workload.from_requests(list(range(n)), input_len, [1] * n, ids, block_size=BS)


def hits(wl: Workload, capacity: int, policy: str = "lru", **kw: object) -> list[int]:
    return replay_cache(wl, capacity, policy=policy, **kw)["hit_blocks"].tolist()


def curve_hits(wl: Workload, capacities: list[int], **kw: object) -> list[int]:
    return hit_rate_curve(wl, capacities, **kw)["hit_blocks"].tolist()


# --------------------------------------------------------------- touch order
# R0 [1, 2], R1 [3], R2 [1, 2], capacity 2.
# head_first: R0 touches 1 then 2 -> [1, 2]; R1 inserts 3, evicts 1 -> [2, 3];
#   R2 looks up 1: miss, so 2 (present) cannot hit either -> 0 hits.
# tail_first: R0 touches 2 then 1 -> [2, 1]; R1 inserts 3, evicts 2 -> [1, 3];
#   R2: 1 hits, 2 misses -> 1 hit (512 tokens).
TOUCH_CASE = [[1, 2], [3], [1, 2]]


def test_touch_order_head_first() -> None:
    wl = wl_of(TOUCH_CASE)
    assert hits(wl, 2, touch="head_first") == [0, 0, 0]
    assert curve_hits(wl, [2], touch="head_first") == [0]


def test_touch_order_tail_first_is_default() -> None:
    wl = wl_of(TOUCH_CASE)
    assert hits(wl, 2) == [0, 0, 1]
    assert hits(wl, 2, touch="tail_first") == [0, 0, 1]
    df = hit_rate_curve(wl, [2])
    assert df["hit_blocks"].tolist() == [1]
    assert df["hit_tokens"].tolist() == [512]
    # 5 block refs, 5 * 512 tokens
    assert df["block_hit_ratio"].iloc[0] == pytest.approx(1 / 5)
    assert df["token_hit_ratio"].iloc[0] == pytest.approx(512 / 2560)


def test_prefix_rule_needs_predecessor() -> None:
    # R0 [1, 2], R1 [5, 2]: 2 is cached but its predecessor in R1 is 5, a
    # miss, so R1 hits nothing even with an infinite cache.
    wl = wl_of([[1, 2], [5, 2]])
    assert hits(wl, 10) == [0, 0]
    assert infinite_hit_ratio(wl).hit_blocks == 0


# --------------------------------------------------- request longer than cache
# Capacity 2, R0 [1, 2, 3], R1 [1, 2, 3].
# head_first: R0 touches 1, 2, 3; inserting 3 evicts 1 -> [2, 3]; R1 misses 1 -> 0.
# tail_first: R0 touches 3, 2, 1; inserting 1 evicts 3 -> [2, 1]; R1 hits 1, 2,
#   misses 3 -> 2 hits, 1024 tokens of 1536.
def test_request_longer_than_cache() -> None:
    wl = wl_of([[1, 2, 3], [1, 2, 3]])
    assert hits(wl, 2, touch="head_first") == [0, 0]
    assert hits(wl, 2, touch="tail_first") == [0, 2]
    df = replay_cache(wl, 2)
    assert df["hit_tokens"].tolist() == [0, 1024]
    assert df["token_hit_ratio"].tolist() == [0.0, pytest.approx(1024 / 1536)]
    for touch in ("head_first", "tail_first"):
        assert curve_hits(wl, [2], touch=touch) == [sum(hits(wl, 2, touch=touch))]
    # the ratios of every policy stay within [0, 1]
    for policy in ("lru", "fifo", "lfu", "opt"):
        r = replay_cache(wl, 2, policy=policy)
        assert ((r["block_hit_ratio"] >= 0) & (r["block_hit_ratio"] <= 1)).all()


# ------------------------------------------------------------- partial blocks
# R0 and R1 are both [1, 2] with 800 tokens: block 2 holds 800 - 512 = 288.
# Trace semantics: R1 hits both blocks -> 2 of 4 refs, 800 of 1600 tokens.
# full_blocks_only: block 2 is never looked up nor inserted -> refs are
#   [1], [1]; R1 hits 1 -> 1 of 2 refs, 512 of 1600 tokens (denominator is
#   always sum(input_len)).
def test_partial_last_block() -> None:
    wl = wl_of([[1, 2], [1, 2]], input_len=[800, 800])
    trace = infinite_hit_ratio(wl)
    assert (trace.hit_blocks, trace.blocks, trace.hit_tokens, trace.tokens) == (2, 4, 800, 1600)
    assert trace.token_hit_ratio == pytest.approx(0.5)
    engine = infinite_hit_ratio(wl, full_blocks_only=True)
    assert (engine.hit_blocks, engine.blocks, engine.hit_tokens, engine.tokens) == (1, 2, 512, 1600)
    assert engine.block_hit_ratio == pytest.approx(0.5)
    assert engine.token_hit_ratio == pytest.approx(0.32)
    df = hit_rate_curve(wl, [1, 2], full_blocks_only=True)
    assert df["hit_tokens"].tolist() == [512, 512]
    r = replay_cache(wl, 1, full_blocks_only=True)
    assert r["blocks"].tolist() == [1, 1]
    assert r["hit_tokens"].tolist() == [0, 512]
    # trace semantics at capacity 1 (tail_first): R0 leaves [2, 1] cut to [1];
    # R1 hits 1 then misses 2 -> 512 tokens.
    assert replay_cache(wl, 1)["hit_tokens"].tolist() == [0, 512]


# -------------------------------------------------------------------- policies
# Capacity 2, one block per request: R0 [1], R1 [1], R2 [2], R3 [3], R4 [1].
# LRU:  R1 hits; R2 -> [1, 2]; R3 evicts 1 -> [2, 3]; R4 misses.      hits 1
# FIFO: R1 hits (no refresh); R2 queue [1, 2]; R3 evicts 1; R4 misses. hits 1
# LFU:  R1 hits (1 used twice); R3 evicts 2 (one use) -> {1, 3}; R4 hits. hits 2
# OPT:  after R1, 1's next use is R4; 2 and 3 are never used again, so
#       they are dropped at once and 1 stays; R4 hits.                 hits 2
POLICY_CASE = [[1], [1], [2], [3], [1]]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("lru", [0, 1, 0, 0, 0]),
        ("fifo", [0, 1, 0, 0, 0]),
        ("lfu", [0, 1, 0, 0, 1]),
        ("opt", [0, 1, 0, 0, 1]),
    ],
)
def test_policies_by_hand(policy: str, expected: list[int]) -> None:
    assert hits(wl_of(POLICY_CASE), 2, policy) == expected


# Capacity 2: R0 [1], R1 [2], R2 [1], R3 [3], R4 [1], R5 [2].
# LRU:  R2 hits 1 -> [2, 1]; R3 evicts 2 -> [1, 3]; R4 hits; R5 misses. hits 2
# FIFO: R2 hits (no refresh), queue [1, 2]; R3 evicts 1 -> [2, 3]; R4 misses,
#       inserts 1 evicting 2 -> [3, 1]; R5 misses.                         hits 1
# OPT:  before R3 the cache holds 1 (next R4) and 2 (next R5); 3 is never
#       used again, so it is bypassed; R4 and R5 hit.                      hits 3
def test_fifo_does_not_refresh_and_opt_bypasses() -> None:
    wl = wl_of([[1], [2], [1], [3], [1], [2]])
    assert sum(hits(wl, 2, "lru")) == 2
    assert sum(hits(wl, 2, "fifo")) == 1
    assert hits(wl, 2, "opt") == [0, 0, 1, 0, 1, 1]


# OPT with prefix semantics, capacity 2, prefix-closed requests:
# R0 [1, 2, 3], R1 [1, 2, 4], R2 [1, 5], R3 [1, 2, 3].
# After R0: next uses 1 -> R1 pos 0, 2 -> R1 pos 1, 3 -> R3 pos 2: keep {1, 2}.
# R1 hits 1, 2 (2 blocks). Next uses: 1 -> R2, 2 -> R3, 4 never: keep {1, 2}.
# R2 hits 1 (1 block); 5 never used again. Keep {1, 2} (next R3).
# R3 hits 1, 2, misses 3 (2 blocks). Total 5.
def test_opt_by_hand_prefix_closed() -> None:
    wl = wl_of([[1, 2, 3], [1, 2, 4], [1, 5], [1, 2, 3]])
    assert hits(wl, 2, "opt") == [0, 2, 1, 2]


# ---------------------------------------------------------------- boundaries
def test_capacity_zero_and_working_set() -> None:
    wl = wl_of([[1, 2], [1, 3], [1, 3, 4], [1, 2]], input_len=[1024, 1024, 1100, 1024])
    ceiling = infinite_hit_ratio(wl)
    # infinite: R1 hits 1; R2 hits 1, 3; R3 hits 1, 2 -> 5 of 9 refs;
    # tokens 512 + 1024 + 1024 = 2560 of 4172.
    assert (ceiling.hit_blocks, ceiling.blocks) == (5, 9)
    assert (ceiling.hit_tokens, ceiling.tokens) == (2560, 4172)
    unique = 4
    curve = hit_rate_curve(wl, [0, unique, unique + 10])
    assert curve["hit_blocks"].tolist() == [0, 5, 5]
    assert curve["token_hit_ratio"].iloc[1] == ceiling.token_hit_ratio
    for policy in ("lru", "fifo", "lfu", "opt"):
        assert sum(hits(wl, 0, policy)) == 0
        assert sum(hits(wl, unique, policy)) == 5


def test_token_capacities_round_down() -> None:
    wl = wl_of(TOUCH_CASE)
    blocks = hit_rate_curve(wl, [1, 2])
    tokens = hit_rate_curve(wl, [700, 1500], unit="tokens")  # 1 and 2 blocks
    assert tokens["capacity_blocks"].tolist() == [1, 2]
    assert tokens["capacity_tokens"].tolist() == [512, 1024]
    assert tokens["hit_blocks"].tolist() == blocks["hit_blocks"].tolist()
    assert replay_cache(wl, 1500, unit="tokens")["hit_blocks"].tolist() == hits(wl, 2)


def test_default_grid_reaches_working_set() -> None:
    wl = wl_of([[1, 2], [1, 3], [4], [1, 2]])
    df = hit_rate_curve(wl)
    assert df["capacity_blocks"].iloc[0] == 1
    assert df["capacity_blocks"].iloc[-1] == 4
    assert df["block_hit_ratio"].iloc[-1] == infinite_hit_ratio(wl).block_hit_ratio


def test_repeated_id_inside_a_request() -> None:
    # R0 [7, 7]: the lookup happens before the insertion, so the second 7
    # misses. R1 [7] hits. Capacity 1.
    wl = wl_of([[7, 7], [7]])
    assert hits(wl, 1) == [0, 1]
    assert curve_hits(wl, [1]) == [1]
    assert infinite_hit_ratio(wl).hit_blocks == 1


# ---------------------------------------------------------------- bad input
def test_no_hash_ids_is_an_error() -> None:
    wl = Workload.from_requests([0, 1], [100, 200], [1, 1])
    for call in (
        lambda: hit_rate_curve(wl),
        lambda: replay_cache(wl, 10),
        lambda: infinite_hit_ratio(wl),
    ):
        with pytest.raises(WorkloadError, match="no block hash ids"):
            call()


@pytest.mark.parametrize("bad", [-1, 1.5, float("inf"), "10", None])
def test_bad_capacity(bad: object) -> None:
    with pytest.raises(ValueError, match="capacity"):
        replay_cache(wl_of(TOUCH_CASE), bad)  # type: ignore[arg-type]


def test_bad_options() -> None:
    wl = wl_of(TOUCH_CASE)
    with pytest.raises(ValueError, match="policy"):
        replay_cache(wl, 1, policy="arc")
    with pytest.raises(ValueError, match="policy"):
        hit_rate_curve(wl, policy="mru")
    with pytest.raises(ValueError, match="touch"):
        hit_rate_curve(wl, touch="random")
    with pytest.raises(ValueError, match="unit"):
        hit_rate_curve(wl, [1], unit="bytes")
    with pytest.raises(ValueError, match="capacit"):
        hit_rate_curve(wl, [1, -2])
    with pytest.raises(ValueError, match="capacities"):
        hit_rate_curve(wl, [])


def test_every_request_comes_out() -> None:
    wl = wl_of([[1], [], [1, 2]], input_len=[512, 0, 1024])
    df = replay_cache(wl, 4)
    assert df.index.tolist() == [0, 1, 2]
    assert df["hit_blocks"].tolist() == [0, 0, 1]
    assert np.isnan(df["block_hit_ratio"].iloc[1])
