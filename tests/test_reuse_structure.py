"""Popularity, reuse distance, prefix tree, sessions and partitioned caches.

Hand-worked cases (derivations in comments) plus brute-force
re-implementations on generated workloads.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from helpers import hypothesis_settings, id_workloads, rows_of
from hypothesis import given
from hypothesis import strategies as st

from inferasim import Workload, WorkloadError
from inferasim.reuse import (
    partitioned_hit_rate,
    popularity,
    prefix_tree,
    reuse_distance,
    sessions,
)
from inferasim.reuse.popularity import fit_zipf

BS = 4
SETTINGS = hypothesis_settings(50)


def workloads() -> st.SearchStrategy[Workload]:
    return id_workloads(max_n=9, max_id=6, timed=True)


# ------------------------------------------------------------ reuse distance
def brute_reuse(wl: Workload, touch: str) -> pd.DataFrame:
    """An explicit LRU stack (most recent first) and a last-use table."""
    stack: list[int] = []
    last_use: dict[int, int] = {}
    out = []
    arrival = wl.arrival_ms
    for r, ids in enumerate(rows_of(wl)):
        for k, x in enumerate(ids):
            if x in last_use:
                out.append((r, k, x, arrival[r] - arrival[last_use[x]], stack.index(x) + 1))
        distinct = list(dict.fromkeys(ids))
        for x in distinct if touch == "head_first" else distinct[::-1]:
            if x in stack:
                stack.remove(x)
            stack.insert(0, x)
        for x in distinct:
            last_use[x] = r
    return pd.DataFrame(
        out, columns=["request_id", "position", "hash_id", "time_since_ms", "stack_distance"]
    )


@SETTINGS
@given(workloads(), st.sampled_from(["tail_first", "head_first"]))
def test_reuse_distance_matches_explicit_stack(wl: Workload, touch: str) -> None:
    got = reuse_distance(wl, touch=touch)
    want = brute_reuse(wl, touch)
    assert got["request_id"].tolist() == want["request_id"].tolist()
    assert got["position"].tolist() == want["position"].tolist()
    assert got["hash_id"].tolist() == want["hash_id"].tolist()
    assert got["time_since_ms"].tolist() == want["time_since_ms"].tolist()
    assert got["stack_distance"].tolist() == want["stack_distance"].tolist()


def test_reuse_distance_by_hand() -> None:
    # R0 [1, 2] at 0 ms, R1 [3] at 10 ms, R2 [2, 1] at 25 ms; head_first.
    # Stack before R2 (most recent first): 3, 2, 1. R2 block 2 -> depth 2,
    # 15 + 10 = 25 ms since R0; block 1 -> depth 3, 25 ms.
    wl = Workload.from_requests(
        [0, 10, 25], [2, 1, 2], [1] * 3, [[1, 2], [3], [2, 1]], block_size=1
    )
    df = reuse_distance(wl, touch="head_first")
    assert df["stack_distance"].tolist() == [2, 3]
    assert df["time_since_ms"].tolist() == [25.0, 25.0]
    assert df["position"].tolist() == [0, 1]


# ---------------------------------------------------------------- popularity
@SETTINGS
@given(workloads())
def test_popularity_counts_distinct_requests(wl: Workload) -> None:
    users: dict[int, set[int]] = defaultdict(set)
    for r, ids in enumerate(rows_of(wl)):
        for x in ids:
            users[x].add(r)
    p = popularity(wl)
    got = dict(zip(p.blocks["hash_id"], p.blocks["requests"], strict=True))
    assert got == {x: len(s) for x, s in users.items()}
    assert (np.diff(p.blocks["requests"]) <= 0).all()
    assert p.blocks["rank"].tolist() == list(range(1, len(users) + 1))
    arrival = wl.arrival_ms
    for x, first, last in zip(
        p.blocks["hash_id"], p.blocks["first_use_ms"], p.blocks["last_use_ms"], strict=True
    ):
        assert first == arrival[min(users[x])] and last == arrival[max(users[x])]


def test_top_prefixes_by_hand() -> None:
    # Requests: [1,2,3] x2, [1,2,4], [1,9]. Prefix [1] is used by all 4
    # (branches to 2 and 9), [1,2] by 3 (branches to 3 and 4), [1,2,3] by 2.
    # [1,2,4] and [1,9] by one request only: not shared.
    wl = Workload.from_requests(
        [0, 5, 7, 9], [3, 3, 3, 2], [1] * 4, [[1, 2, 3], [1, 2, 3], [1, 2, 4], [1, 9]], block_size=1
    )
    top = popularity(wl).top_prefixes
    assert top["prefix_blocks"].tolist() == [1, 2, 3]
    assert top["requests"].tolist() == [4, 3, 2]
    assert top["first_use_ms"].tolist() == [0.0, 0.0, 0.0]
    assert top["last_use_ms"].tolist() == [9.0, 7.0, 5.0]
    assert len(popularity(wl, top=1).top_prefixes) == 1


def test_zipf_fit_recovers_exponent() -> None:
    ranks = np.arange(1, 5001)
    for s in (0.6, 1.0, 1.5):
        counts = np.round(2e5 * ranks**-s)
        fitted, c = fit_zipf(counts)
        assert fitted == pytest.approx(s, abs=0.03)
        assert c == pytest.approx(2e5, rel=0.1)
    assert np.isnan(fit_zipf(np.array([5, 1, 1]))[0])  # one shared block: no fit


# --------------------------------------------------------------- prefix tree
def brute_radix(wl: Workload) -> dict[tuple[int, ...], tuple[int, int, int]]:
    """prefix -> (requests through it, ends there, children) for radix nodes."""
    through: dict[tuple[int, ...], set[int]] = defaultdict(set)
    ends: dict[tuple[int, ...], int] = defaultdict(int)
    kids: dict[tuple[int, ...], set[int]] = defaultdict(set)
    for r, ids in enumerate(rows_of(wl)):
        for k in range(1, len(ids) + 1):
            through[tuple(ids[:k])].add(r)
            if k < len(ids):
                kids[tuple(ids[:k])].add(ids[k])
        if ids:
            ends[tuple(ids)] += 1
    return {
        p: (len(s), ends[p], len(kids[p]))
        for p, s in through.items()
        if len(kids[p]) != 1 or ends[p] > 0
    }


@SETTINGS
@given(workloads())
def test_prefix_tree_matches_brute_force(wl: Workload) -> None:
    want = brute_radix(wl)
    nodes = prefix_tree(wl).nodes
    assert len(nodes) == len(want)
    got = sorted(
        zip(nodes["depth_blocks"], nodes["requests"], nodes["ends"], nodes["children"], strict=True)
    )
    assert got == sorted((len(p), *v) for p, v in want.items())
    # the edges add up: a node's depth is its parent's depth plus its edge
    parent_depth = nodes["depth_blocks"].reindex(nodes["parent"]).fillna(0).to_numpy()
    assert (nodes["depth_blocks"].to_numpy() == parent_depth + nodes["edge_blocks"]).all()
    assert (nodes["parent"].to_numpy() < nodes.index.to_numpy()).all()


# ------------------------------------------------------------------ sessions
def test_sessions_by_hand() -> None:
    # block_size 2. Conversation A: A1 [1, 2, 3] (5 tokens, 3 full? no:
    # 5 = 2 + 2 + 1, block 3 partial, full ids [1, 2]) answers 2 tokens;
    # A2 [1, 2, 7, 8] (8 tokens >= 5 + 2) extends A1's full ids -> turn 2.
    # Conversation B: B1 [4, 5] (4 tokens, full) answers 1; B2 [4, 5, 6]
    # (5 tokens >= 4 + 1) -> turn 2. S [1, 2, 9] (5 tokens < 5 + 2) shares
    # A1's full ids but cannot hold A1's prompt and answer: a first turn.
    wl = Workload.from_requests(
        [0, 10, 20, 30, 40],
        [5, 4, 8, 5, 5],
        [2, 1, 3, 1, 1],
        [[1, 2, 3], [4, 5], [1, 2, 7, 8], [4, 5, 6], [1, 2, 9]],
        block_size=2,
    )
    s = sessions(wl)
    r = s.requests
    assert r["parent"].tolist() == [-1, -1, 0, 1, -1]
    assert r["turn"].tolist() == [1, 1, 2, 2, 1]
    assert r["session"].tolist() == [0, 1, 0, 1, 4]
    assert r["gap_ms"].tolist()[2:4] == [20.0, 20.0]
    assert r["growth_tokens"].tolist()[2:4] == [3.0, 1.0]
    assert r["shared_blocks"].tolist()[2:4] == [2.0, 2.0]
    assert s.sessions["turns"].to_dict() == {0: 2, 1: 2, 4: 1}
    assert s.sessions.loc[0, "duration_ms"] == 20.0
    assert s.turn_distribution().to_dict() == {1: 1, 2: 2}
    # with min_shared_blocks=3 no previous turn has enough full blocks
    loose = sessions(wl, contains_answer=False, min_shared_blocks=3).requests
    assert loose["parent"].tolist() == [-1, -1, -1, -1, -1]


@SETTINGS
@given(workloads(), st.integers(1, 3), st.booleans())
def test_sessions_match_definition(wl: Workload, min_shared: int, answer: bool) -> None:
    ids = rows_of(wl)
    inp, out = wl.input_len, wl.output_len
    tokens = wl.block_tokens()
    full = []
    for i, r in enumerate(ids):
        partial = bool(r) and tokens[wl.offsets[i + 1] - 1] < BS
        full.append(r[: len(r) - 1] if partial else r)
    got = sessions(wl, min_shared_blocks=min_shared, contains_answer=answer).requests
    for j, r in enumerate(ids):
        best = (-1, -1)  # (run length, request)
        for i in range(j):
            run = len(full[i])
            need = inp[i] + (out[i] if answer else 1)
            if run >= min_shared and run < len(r) and r[:run] == full[i] and inp[j] >= need:
                best = max(best, (run, i))
        assert got["parent"].iloc[j] == best[1]


# ---------------------------------------------------------------- partitions
def test_partition_by_hand() -> None:
    # block_size 1, capacity 2 in total. Requests [1, 2], [3, 4], [1, 2], [3, 4].
    # Pooled LRU (tail-first): R2's blocks 1, 2 are at depths 3, 4 -> miss;
    # R3 likewise -> 0 hits. Round-robin over 2 caches of 1 block: cache 0
    # sees [1, 2] twice and keeps block 1 (touched last) -> R2 hits 1;
    # cache 1 -> R3 hits 3. Partitioned: 2 hits of 8 block refs.
    wl = Workload.from_requests(
        [0, 1, 2, 3], [2] * 4, [1] * 4, [[1, 2], [3, 4], [1, 2], [3, 4]], block_size=1
    )
    df = partitioned_hit_rate(wl, 2, 2, assign="round_robin")
    assert df.loc["pooled", "hit_blocks"] == 0
    assert df.loc["partitioned", "hit_blocks"] == 2
    assert df.loc["partitioned", "block_hit_ratio"] == pytest.approx(2 / 8)
    assert df.loc["part 0", "requests"] == 2 and df.loc["part 1", "hit_tokens"] == 1
    assert df.index.tolist() == ["pooled", "partitioned", "part 0", "part 1"]


# The cross-check of partitioned_hit_rate against a replay of each part lives
# in test_reuse_partition.py, with a reference that takes the assignment from
# the test instead of assign_parts.


def test_partition_assignments() -> None:
    wl = Workload.from_requests(
        list(range(6)), [2] * 6, [1] * 6, [[1, 2], [3], [1, 5], [3, 6], [], [1]], block_size=1
    )
    df = partitioned_hit_rate(wl, 4, 3, assign="hash_first_block")
    assert df.loc[[f"part {k}" for k in range(3)], "requests"].sum() == 6
    from inferasim.reuse.partition import assign_parts

    a = assign_parts(wl, 3, "hash_first_block")
    assert a[0] == a[2] == a[5] and a[1] == a[3] and a[4] == 0
    # random: seeded, reproducible
    assert (assign_parts(wl, 3, "random", seed=1) == assign_parts(wl, 3, "random", seed=1)).all()
    custom = partitioned_hit_rate(wl, 4, 2, assign=lambda w: np.arange(len(w)) % 2)
    rr = partitioned_hit_rate(wl, 4, 2, assign="round_robin")
    assert custom["hit_blocks"].tolist() == rr["hit_blocks"].tolist()
    with pytest.raises(ValueError, match="outside"):
        partitioned_hit_rate(wl, 4, 2, assign=lambda w: np.full(len(w), 2))
    with pytest.raises(ValueError, match="shape"):
        partitioned_hit_rate(wl, 4, 2, assign=lambda w: [0, 1])
    with pytest.raises(ValueError, match="assign"):
        partitioned_hit_rate(wl, 4, 2, assign="nearest")
    with pytest.raises(ValueError, match="parts"):
        partitioned_hit_rate(wl, 4, 0)


# ---------------------------------------------------------------- bad input
def test_structure_functions_need_hash_ids() -> None:
    wl = Workload.from_requests([0, 1], [100, 200], [1, 1])
    for f in (popularity, reuse_distance, prefix_tree, sessions):
        with pytest.raises(WorkloadError, match="no block hash ids"):
            f(wl)
    with pytest.raises(WorkloadError, match="no block hash ids"):
        partitioned_hit_rate(wl, 10, 2)


def test_bad_arguments() -> None:
    wl = Workload.from_requests([0], [2], [1], [[1, 2]], block_size=1)
    with pytest.raises(ValueError, match="min_shared_blocks"):
        sessions(wl, min_shared_blocks=0)
    with pytest.raises(ValueError, match="top"):
        popularity(wl, top=-1)
    with pytest.raises(ValueError, match="touch"):
        reuse_distance(wl, touch="sideways")
