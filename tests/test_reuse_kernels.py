"""The compiled replay kernels (numba) equal the Python reference loops exactly.

:mod:`inferasim.reuse._kernels` re-implements FIFO, LFU and the offline
optimum over dense arrays (FIFO with an insertion counter instead of a queue,
LFU with a packed-key heap instead of bucket lists); the Python loops of
:mod:`inferasim.reuse.replay` stay as the reference. Hand cases pin the
kernels' own tricks; hypothesis compares every request's hits on arbitrary
and prefix-closed workloads, both touch orders, every capacity from 1 to
past the working set; the FAST'25 traces are compared in
``test_reuse_traces.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_reuse_properties import TOUCHES, prefix_closed, workloads

from inferasim import Workload
from inferasim.reuse import _kernels, hit_rate_curve
from inferasim.reuse._refs import block_refs
from inferasim.reuse.curve import replayed_hits
from inferasim.reuse.replay import replay_hits, replay_hits_many

pytestmark = pytest.mark.skipif(not _kernels.available(), reason="compiled kernels unavailable (numba missing: pip install -e . installs it; or INFERASIM_NO_NUMBA set: unset it)")

POLICIES = ("fifo", "lfu", "opt")


def _wl(ids: list[list[int]]) -> Workload:
    n = len(ids)
    return Workload.from_requests(
        list(range(n)), [max(len(r), 1) for r in ids], [1] * n, ids, block_size=1
    )


def _both(wl: Workload, cap: int, policy: str, touch: str = "head_first") -> list[list[int]]:
    refs = block_refs(wl)
    return [
        replay_hits(refs, cap, policy, touch, compiled=c).tolist() for c in (True, False)
    ]


def test_fifo_counter_by_hand() -> None:
    # Capacity 2, head-first. r0 [1, 2] inserts 1 (#1) and 2 (#2). r1 [1, 3]: 1 hits
    # (insertion #1 > 2 - 2 = 0), then 3 is inserted (#3), evicting 1 (#1 <= 3 - 2)
    # though 1 was just used: FIFO does not refresh. r2 [1, 2]: 1 misses, so 0 hits;
    # 1 is inserted (#4) evicting 2 (#2 <= 4 - 2), then 2 (#5) evicting 3 (#3).
    # r3 [2, 1]: 2 (#5) and 1 (#4) are both above 5 - 2 = 3: 2 hits.
    wl = _wl([[1, 2], [1, 3], [1, 2], [2, 1]])
    compiled, python = _both(wl, 2, "fifo")
    assert compiled == python == [0, 1, 0, 2]


def test_lfu_ties_go_to_the_least_recent_by_hand() -> None:
    # Capacity 2, head-first. r0 [1], r1 [2], r2 [1]: 1 has two uses, 2 one.
    # r3 [3] evicts 2 (fewest uses). r4 [4] evicts 3 (one use, and 1 has two).
    # r5 [1, 4]: both cached, 2 hits. r6 [3]: 3 is gone, 0 hits.
    wl = _wl([[1], [2], [1], [3], [4], [1, 4], [3]])
    compiled, python = _both(wl, 2, "lfu")
    assert compiled == python == [0, 0, 1, 0, 0, 2, 0]


def test_opt_bypasses_by_hand() -> None:
    # Capacity 1. r0 [1], r1 [2], r2 [1]: after r1 the cache keeps 1 (next use r2)
    # rather than 2 (never used again): r2 hits. r3 [2]: 2 was dropped, 0 hits.
    wl = _wl([[1], [2], [1], [2]])
    compiled, python = _both(wl, 1, "opt")
    assert compiled == python == [0, 0, 1, 0]


def test_request_longer_than_the_cache() -> None:
    # Capacity 2 and a request of 4 distinct blocks: every policy ends holding
    # some of them; kernels and loops agree on the next request's hits.
    wl = _wl([[1, 2, 3, 4], [1, 2, 3, 4], [4, 3]])
    for policy in POLICIES:
        for touch in TOUCHES:
            compiled, python = _both(wl, 2, policy, touch)
            assert compiled == python, (policy, touch)


@settings(max_examples=80, deadline=None)
@given(workloads(), st.sampled_from(TOUCHES), st.sampled_from(POLICIES))
def test_kernels_equal_python_loops(wl: Workload, touch: str, policy: str) -> None:
    refs = block_refs(wl)
    caps = list(range(1, refs.n_unique + 2))
    fast = replay_hits_many(refs, caps, policy, touch, compiled=True)
    slow = replay_hits_many(refs, caps, policy, touch, compiled=False)
    assert np.array_equal(fast, slow)


@settings(max_examples=60, deadline=None)
@given(prefix_closed(max_nodes=20), st.sampled_from(TOUCHES), st.sampled_from(POLICIES))
def test_kernels_equal_python_loops_prefix_closed(wl: Workload, touch: str, policy: str) -> None:
    refs = block_refs(wl)
    for cap in range(1, refs.n_unique + 2):
        fast = replay_hits(refs, cap, policy, touch, compiled=True)
        assert np.array_equal(fast, replay_hits(refs, cap, policy, touch, compiled=False))


@settings(max_examples=40, deadline=None)
@given(prefix_closed(max_nodes=16), st.sampled_from(TOUCHES))
def test_early_stop_equals_every_capacity(wl: Workload, touch: str) -> None:
    # replayed_hits(stop_at_blocks=ceiling) for the optimum (a stack policy): the
    # capacities after the first that reaches the ceiling get its numbers, which
    # is what replaying them gives.
    refs = block_refs(wl)
    caps = np.arange(1, refs.n_unique + 3)
    ceiling = hit_rate_curve(wl, [refs.n_unique + 5], policy="lru", touch=touch)
    stop = int(ceiling["hit_blocks"].iloc[0])
    every = replayed_hits(refs, caps, "opt", touch)
    early = replayed_hits(refs, caps, "opt", touch, stop_at_blocks=stop)
    assert np.array_equal(every[0], early[0]) and np.array_equal(every[1], early[1])


def test_kernel_rejects_a_zero_capacity() -> None:
    look = np.array([0], dtype=np.int64)
    off = np.array([0, 1], dtype=np.int64)
    with pytest.raises(ValueError, match="at least 1 block"):
        _kernels.replay_kernel("fifo", look, off, look, off, 0)
