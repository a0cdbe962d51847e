"""The reuse ceiling against a plain set replay, and the token-level estimate.

``infinite_hit_ratio`` and ``Workload.describe()`` both use the
``_ragged`` helpers; the references here are plain Python sets and dicts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import hypothesis_settings, id_workloads, rows_of, tokens_of
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload
from inferasim.reuse import hit_rate_curve, infinite_hit_ratio

BS = 4
SETTINGS = hypothesis_settings(80)


def plain_ceiling(ids: list[list[int]], toks: list[list[int]], full: bool, bs: int):
    """Set replay: a block hits when every block up to it was seen in an
    earlier request. Returns per-request (hit blocks, hit tokens, blocks)."""
    seen: set[int] = set()
    out = []
    for request, tokens in zip(ids, toks, strict=True):
        kept = [(x, t) for x, t in zip(request, tokens, strict=True) if not full or t >= bs]
        h = 0
        for x, _ in kept:
            if x not in seen:
                break
            h += 1
        out.append((h, sum(t for _, t in kept[:h]), len(kept)))
        seen.update(x for x, _ in kept)
    return out


def plain_partial(ids: list[list[int]], toks: list[list[int]], mode: str) -> list[int]:
    """Credit of every request: prefixes are numbered by a dict
    (prefix number, id) -> prefix number; a second dict keeps, per prefix,
    the tokens of the block that most recently followed it in an earlier
    request."""
    seen: set[int] = set()
    node: dict[tuple[int, int], int] = {}
    after: dict[int, int] = {}  # prefix number -> tokens of the latest next block
    out = []
    for request, tokens in zip(ids, toks, strict=True):
        h = 0
        for x in request:
            if x not in seen:
                break
            h += 1
        prefixes = [0]  # prefix number of request[:j]; 0 = the empty prefix
        for x in request:
            prefixes.append(node.setdefault((prefixes[-1], x), len(node) + 1))
        credit = 0
        if h < len(request) and prefixes[h] in after:
            upper = min(tokens[h], after[prefixes[h]])
            credit = upper if mode == "upper" else upper // 2
        out.append(credit)
        seen.update(request)
        for j in range(len(request)):
            after[prefixes[j]] = tokens[j]
    return out


def workloads() -> st.SearchStrategy[Workload]:
    return id_workloads(max_n=10, max_id=6)


@SETTINGS
@given(workloads(), st.booleans())
def test_ceiling_equals_plain_set_replay(wl: Workload, full: bool) -> None:
    ref = plain_ceiling(rows_of(wl), tokens_of(wl), full, BS)
    c = infinite_hit_ratio(wl, full_blocks_only=full)
    assert c.per_request["hit_blocks"].tolist() == [h for h, _, _ in ref]
    assert c.per_request["hit_tokens"].tolist() == [t for _, t, _ in ref]
    assert c.blocks == sum(b for _, _, b in ref)
    assert c.tokens == int(wl.input_len.sum())
    d = wl.describe()  # describe() must agree with the plain replay too
    total = sum(t for _, t, _ in ref) if not full else None
    if total is not None and c.tokens:
        assert float(d["infinite_token_hit_ratio"]) == pytest.approx(total / c.tokens)


@SETTINGS
@given(workloads(), st.sampled_from(["half", "upper"]))
def test_partial_credit_equals_plain_dict(wl: Workload, mode: str) -> None:
    ids, toks = rows_of(wl), tokens_of(wl)
    expected = plain_partial(ids, toks, mode)
    c = infinite_hit_ratio(wl, partial_block=mode)
    assert c.per_request["partial_tokens"].tolist() == expected
    base = infinite_hit_ratio(wl)
    assert c.hit_tokens == base.hit_tokens + sum(expected)
    assert c.hit_blocks == base.hit_blocks and c.block_hit_ratio == base.block_hit_ratio
    # never more than the prompt; half <= upper
    assert (c.per_request["hit_tokens"] <= c.per_request["input_len"]).all()
    if mode == "upper":
        half = infinite_hit_ratio(wl, partial_block="half")
        assert base.hit_tokens <= half.hit_tokens <= c.hit_tokens


@SETTINGS
@given(workloads(), st.sampled_from(["half", "upper"]), st.sampled_from(["tail_first", "head_first"]))
def test_partial_curve_bounds(wl: Workload, mode: str, touch: str) -> None:
    u = len({x for r in rows_of(wl) for x in r})
    caps = list(range(u + 2))
    curve = hit_rate_curve(wl, caps, partial_block=mode, touch=touch)
    plain = hit_rate_curve(wl, caps, touch=touch)
    ceiling = infinite_hit_ratio(wl, partial_block=mode)
    assert curve["hit_blocks"].tolist() == plain["hit_blocks"].tolist()
    extra = (curve["hit_tokens"] - plain["hit_tokens"]).to_numpy()
    assert (extra >= 0).all() and (extra == curve["partial_tokens"].to_numpy()).all()
    assert (curve["hit_tokens"].diff().dropna() >= 0).all()
    at_u = curve[curve["capacity_blocks"] >= u]
    assert (at_u["hit_tokens"] == ceiling.hit_tokens).all()
    assert curve["hit_tokens"].iloc[0] == 0


# ------------------------------------------------------------- hand-worked
# Block size 512. R0 [1, 2] 1024 tokens; R1 [1, 3] 1024; R2 [4] 300; R3 [1, 2, 5] 1200.
# Block level: R1 hits 1 (512), R3 hits 1, 2 (1024): 1536 of 3548 tokens.
# Divergence blocks and siblings (most recent earlier block after the same prefix):
#   R0: block 0, no earlier request -> 0.
#   R1: block 1 (id 3, 512) after [1]; sibling R0's id 2 (512) -> upper 512, half 256.
#   R2: block 0 (id 4, 300) after []; sibling R1's first block (512) -> upper 300, half 150.
#   R3: block 2 (id 5, 176 tokens) after [1, 2]; no earlier prompt went past
#       [1, 2] -> 0.
HAND = ([[1, 2], [1, 3], [4], [1, 2, 5]], [1024, 1024, 300, 1200])


def hand() -> Workload:
    ids, lens = HAND
    return Workload.from_requests(list(range(4)), lens, [1] * 4, ids, block_size=512)


def test_partial_by_hand() -> None:
    wl = hand()
    assert infinite_hit_ratio(wl).hit_tokens == 1536
    up = infinite_hit_ratio(wl, partial_block="upper")
    assert up.per_request["partial_tokens"].tolist() == [0, 512, 300, 0]
    assert up.hit_tokens == 1536 + 812
    assert up.token_hit_ratio == pytest.approx(2348 / 3548)
    half = infinite_hit_ratio(wl, partial_block="half")
    assert half.per_request["partial_tokens"].tolist() == [0, 256, 150, 0]
    assert half.partial_tokens == 406 and half.partial_block == "half"
    assert infinite_hit_ratio(wl).partial_tokens == 0


# The curve (LRU, tail-first). Touches: R0 2, 1; R1 3, 1; R2 4; R3 5, 2, 1.
# R1's credit needs block 1 cached (depth 1 before R1: the stack is 1, 2) and
# its sibling id 2 (depth 2) -> from capacity 2 on.
# R2's credit needs no prefix and its sibling id 1 (R1's first block): stack
# before R2 is 1, 3, 2 -> depth 1 -> from capacity 1 on.
# upper: capacity 1 -> R2's 300; capacity 2 -> + R1's 512 = 812.
# Block level at capacity 1: R1 hits 1 (depth 1); R3: stack 4, 1, 3, 2 ->
# depth(1) = 2 -> miss. At 2: R3 hits 1 only (depth(2) = 4). At 4: 1 and 2.
def test_partial_curve_by_hand() -> None:
    curve = hit_rate_curve(hand(), [0, 1, 2, 4], partial_block="upper")
    assert curve["partial_tokens"].tolist() == [0, 300, 812, 812]
    assert curve["hit_tokens"].tolist() == [0, 812, 1836, 2348]


def test_bad_partial_block() -> None:
    wl = hand()
    with pytest.raises(ValueError, match="partial_block"):
        infinite_hit_ratio(wl, partial_block="quarter")
    with pytest.raises(ValueError, match="needs policy='lru'"):
        hit_rate_curve(wl, [1], policy="lfu", partial_block="half")


@pytest.mark.parametrize("name", ["conversation", "synthetic"])
def test_token_level_ceilings_on_traces(
    name: str, conversation_path: Path, synthetic_trace_path: Path
) -> None:
    path = conversation_path if name == "conversation" else synthetic_trace_path
    wl = Workload.from_mooncake(path)
    none = infinite_hit_ratio(wl).token_hit_ratio
    half = infinite_hit_ratio(wl, partial_block="half").token_hit_ratio
    upper = infinite_hit_ratio(wl, partial_block="upper").token_hit_ratio
    assert none < half < upper
    assert upper - none < 0.10  # at most one block per request, prompts average ~15 blocks
    curve = hit_rate_curve(wl, [10**7], partial_block="half")
    assert curve["token_hit_ratio"].iloc[0] == pytest.approx(half, abs=1e-12)
    # the plain references on the whole trace
    ids, toks = rows_of(wl), tokens_of(wl)
    ref = plain_ceiling(ids, toks, False, wl.block_size)
    c = infinite_hit_ratio(wl, partial_block="upper")
    assert c.per_request["hit_blocks"].tolist() == [h for h, _, _ in ref]
    assert c.per_request["partial_tokens"].tolist() == plain_partial(ids, toks, "upper")
