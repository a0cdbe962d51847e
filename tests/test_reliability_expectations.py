"""Hand-derived expectations the mutation probe of issue 12 showed were missing.

* percentiles (p50/p90/p99 and means) worked out by hand, not from the same
  ``np.percentile`` call the code makes;
* tied timestamps (both real traces have them) are in order: no warning,
  file order kept;
* the KV state (pinned/reference counts, private blocks) in a hand-computed
  simulator run.
"""

from __future__ import annotations

import io
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferasim as ism
from conftest import require_trace
from inferasim import Workload
from inferasim.reuse import infinite_hit_ratio
from inferasim.sim.replica import Replica


def test_summary_percentiles_by_hand():
    # ten requests alone on one replica (1e5 ms apart), prompts 100..1000 tokens,
    # one output token: one prefill step of 1 + 0.01 * P ms, so TTFT = e2e =
    # 2, 3, ..., 11 ms and queue = 0. Linear interpolation over the sorted ten
    # values v[0..9]: p50 at rank 4.5 -> 6.5; p90 at rank 8.1 -> 10 + 0.1 = 10.1;
    # p99 at rank 8.91 -> 10 + 0.91 = 10.91; mean (2 + 11) / 2 = 6.5.
    order = [7, 2, 9, 0, 4, 1, 8, 3, 6, 5]  # arrival order of the prompt sizes
    P = [100 * (k + 1) for k in order]
    wl = Workload.from_requests([1e5 * i for i in range(10)], P, [1] * 10)
    cost = ism.LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.01, decode_seq_ms=0.0)
    s = ism.Simulator(kv_tokens=100 * 512, cost_model=cost).run(wl, progress=False).summary()
    for metric in ("ttft_ms", "e2e_ms"):
        assert s[f"{metric}_p50"] == pytest.approx(6.5, abs=1e-9)
        assert s[f"{metric}_p90"] == pytest.approx(10.1, abs=1e-9)
        assert s[f"{metric}_p99"] == pytest.approx(10.91, abs=1e-9)
        assert s[f"{metric}_mean"] == pytest.approx(6.5, abs=1e-9)
    assert s["queue_ms_p90"] == 0.0


def test_describe_percentiles_by_hand():
    # input lengths 100..1000: p50 at rank 4.5 -> 550, p99 at rank 8.91 -> 991;
    # outputs 1..10: p50 5.5, p99 9.91, max 10, mean 5.5
    wl = Workload.from_requests(list(range(10)), [100 * k for k in range(10, 0, -1)], list(range(1, 11)))
    d = wl.describe()
    assert d["input_p50"] == pytest.approx(550.0) and d["input_p99"] == pytest.approx(991.0)
    assert d["input_mean"] == 550.0 and d["input_max"] == 1000
    assert d["output_p50"] == pytest.approx(5.5) and d["output_p99"] == pytest.approx(9.91)


TIES = (
    '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n'
    '{"timestamp": 5, "input_length": 6, "output_length": 1, "hash_ids": [2]}\n'
    '{"timestamp": 5, "input_length": 7, "output_length": 1, "hash_ids": [3]}\n'
    '{"timestamp": 5, "input_length": 8, "output_length": 1, "hash_ids": [4]}\n'
    '{"timestamp": 9, "input_length": 9, "output_length": 1, "hash_ids": [5]}\n'
)


def test_tied_timestamps_are_in_order():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "not in time order" would fail here
        wl = Workload.from_mooncake(io.StringIO(TIES))
        csv = Workload.from_csv(io.StringIO("time,isl,osl\n0,5,1\n5,6,1\n5,7,1\n5,8,1\n9,9,1\n"))
    assert wl.frame["line"].tolist() == [1, 2, 3, 4, 5] and wl.input_len.tolist() == [5, 6, 7, 8, 9]
    assert csv.frame["line"].tolist() == [2, 3, 4, 5, 6]


def test_ties_after_an_out_of_order_line_keep_file_order():
    # line 2 (t=9) comes before lines 3-5 (t=5, tied): sorted stably to 1, 3, 4, 5, 2
    lines = TIES.splitlines(keepends=True)
    text = lines[0] + lines[4] + lines[1] + lines[2] + lines[3]
    with pytest.warns(UserWarning, match="not in time order"):
        wl = Workload.from_mooncake(io.StringIO(text))
    assert wl.frame["line"].tolist() == [1, 3, 4, 5, 2] and wl.input_len.tolist() == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("name", ["conversation", "synthetic"])
def test_real_traces_have_ties_and_no_unsorted_warning(name):
    path = require_trace(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wl = Workload.from_mooncake(path)
    a = wl.arrival_ms
    assert (a[1:] == a[:-1]).any()  # the trace has ties
    assert wl.frame["line"].is_monotonic_increasing  # and was already in order


class _Spy:
    """Record each replica's KV state at every step start (reads only)."""

    def __init__(self, monkeypatch):
        self.states: list[tuple[float, int, dict[int, int], int]] = []
        orig = Replica._start_step

        def start(rep):
            orig(rep)
            kv = rep.kv
            self.states.append((rep.sched.clock, kv.private, dict(kv.cache.ref), kv.cache.pinned))

        monkeypatch.setattr(Replica, "_start_step", start)


@pytest.mark.instrumented  # wraps the core's methods: see tests/test_native.py
def test_kv_state_by_hand(monkeypatch):
    # block_size 4. A: 8-token prompt, ids [1, 2], 3 outputs, at 0 ms.
    # B: 9-token prompt, ids [1, 2, 3] (shares A's two blocks), 1 output, at 0.5 ms.
    # Steps take 1 ms (overhead only). One replica, plenty of memory, no chunk limit,
    # the rules of EngineConfig.whole_blocks() (blocks cached when their step ends).
    # step 1 [0, 1): A prefills 8 tokens: 2 private blocks; at its end blocks 1, 2
    #   enter the cache, pinned by A (ref 1 each), A's private count -> 0.
    # step 2 [1, 2): A decodes token 9 -> a 3rd block (private 1); B is admitted:
    #   prefix 1, 2 reused ((9 - 1) // 4 = 2 blocks) -> ref 2 each, B computes 1
    #   token in a new private block (private 2).
    wl = Workload.from_requests([0.0, 0.5], [8, 9], [3, 1], [[1, 2], [1, 2, 3]], block_size=4)
    cost = ism.LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.0, decode_seq_ms=0.0)
    spy = _Spy(monkeypatch)
    res = ism.Simulator(kv_tokens=20 * 4, cost_model=cost, fast=False,
                        engine=ism.EngineConfig.whole_blocks()).run(wl, progress=False)
    clock, private, ref, pinned = spy.states[0]
    assert (clock, private, ref, pinned) == (0.0, 2, {}, 0)
    clock, private, ref, pinned = spy.states[1]
    assert (clock, private, ref, pinned) == (1.0, 2, {1: 2, 2: 2}, 2)
    # B finishes at the end of step 2 (2 ms) and unpins; A decodes its third
    # token in step 3 and finishes at 3 ms; then every block is unpinned
    clock, private, ref, pinned = spy.states[2]
    assert (clock, ref, pinned) == (2.0, {1: 1, 2: 1}, 1 + 1)
    req = res.requests
    assert req["cached_tokens"].tolist() == [0, 8]
    assert req["finish_ms"].tolist() == [3.0, 2.0]
    assert res.replicas["peak_kv_tokens"].tolist() == [(2 + 2) * 4]  # step 2: 2 private + 2 pinned 4-token blocks


# ------------------------------------------- a truly independent reference



def set_replay(input_len: list[int], ids: list[list[int]], bs: int) -> tuple[int, int, int, int]:
    """Infinite prefix cache as a plain Python set: (hit blocks, blocks, hit tokens, tokens).

    A request hits the leading run of its ids already seen; then all its ids
    are in the cache. Block k of a request holds bs tokens, its last holds
    input_len - bs * (n - 1). Shares no code with inferasim (no _ragged).
    """
    seen: set[int] = set()
    hb = hbt = 0
    for p, row in zip(input_len, ids, strict=True):
        for k, h in enumerate(row):
            if h not in seen:
                break
            hb += 1
            hbt += bs if k < len(row) - 1 else p - bs * (len(row) - 1)
        seen.update(row)
    return hb, sum(map(len, ids)), hbt, sum(input_len)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_describe_and_ceiling_match_a_set_replay(data):
    bs = data.draw(st.sampled_from([1, 2, 4]))
    n = data.draw(st.integers(1, 12))
    rows, lens = [], []
    for _ in range(n):
        k = data.draw(st.integers(1, 5))
        rows.append(data.draw(st.lists(st.integers(0, 6), min_size=k, max_size=k)))
        lens.append(bs * (k - 1) + data.draw(st.integers(1, bs)))
    wl = Workload.from_requests(list(range(n)), lens, [1] * n, rows, block_size=bs)
    hb, b, hbt, t = set_replay(lens, rows, bs)
    d = wl.describe()
    assert d["infinite_block_hit_ratio"] == pytest.approx(hb / b)
    assert d["infinite_token_hit_ratio"] == pytest.approx(hbt / t)
    c = infinite_hit_ratio(wl)
    assert (c.hit_blocks, c.blocks, c.hit_tokens, c.tokens) == (hb, b, hbt, t)


def test_kv_cost_keeps_a_tie_at_the_pruning_bound():
    # Block size 16, overlap weight 1, steps of 1 ms (overhead only). At 0: A (64
    # tokens, blocks 1-4, 20 outputs) on replica 1, B (20 tokens, block 50, 900
    # outputs) on replica 0; both prefill in [0, 1) and decode from 1. At 2.5 (tokens
    # 2 and 3 scheduled at 1 and 2): A holds ceil(66 / 16) = 5 blocks, 18 tokens to
    # go; B ceil(22 / 16) = 2 blocks, 898 to go.
    # R (64 tokens, blocks 1, 2, 3, 9) at 2.5: 4 blocks, limit (64 - 1) // 16 = 3.
    # replica 0: no match, 2 active -> cost 4 - 0 + 2 = 6 (the first low);
    # replica 1: matches all 3, 5 active -> bound 4 - 3 + 5 = 6 == low, so it must
    # still be walked: cost 6, a tie, broken by fewer outstanding tokens -> 1.
    # (A ">=" slip in the pruning skips it and answers 0.)
    from helpers import ScriptedRouter

    from inferasim.sim import KvCostRouter

    flat = ism.LinearCostModel(overhead_ms=1.0, prefill_token_ms=0.0, decode_seq_ms=0.0)
    wl = Workload.from_requests([0, 0, 2.5], [64, 20, 64], [20, 900, 1],
                                [[1, 2, 3, 4], [50, 51], [1, 2, 3, 9]], block_size=16)

    def look(views):
        return [(v.active_blocks, v.prefix_match_blocks, v.outstanding_tokens) for v in views]

    router = ScriptedRouter([1, 0], KvCostRouter(overlap_weight=1.0), look)
    res = ism.Simulator(replicas=2, routing=router, kv_tokens=100 * 16, cost_model=flat).run(
        wl, progress=False)
    assert router.seen == [[(2, 0, 898), (5, 3, 18)]]
    assert res.requests["replica"].tolist() == [1, 0, 1]
