"""Regression tests for issue 12 (reliability), simulator side.

Classes 1, 2 (cost models), 9 (integer ranges) and 10 (unbounded timeline,
block-size sized allocations) of the issue.
"""

from __future__ import annotations

import math
import time
import tracemalloc

import numpy as np
import pytest
from helpers import runner

import inferasim as ism
from inferasim.sim import decode, engine
from inferasim.sim.recorder import Recorder
from inferasim.workload import Workload


class Scalar:
    """A user cost model: 1 ms a step, or ``bad`` for steps matching ``when``."""

    def __init__(self, bad: float, when: str) -> None:
        self.bad, self.when = bad, when

    def __repr__(self) -> str:
        return f"Scalar(bad={self.bad}, when={self.when!r})"

    def step_time_ms(self, pt, pa, b, s):
        if isinstance(b, np.ndarray):
            out = np.ones(b.shape)
            if self.when == "decode":
                out[s > 40] = self.bad
            return out
        if self.when == "prefill" and pt > 0:
            return self.bad
        if self.when == "decode" and pt == 0 and s > 40:
            return self.bad
        return 1.0

    def kv_capacity_blocks(self, block_size):
        return None


run = runner(kv_tokens=64 * 16)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
@pytest.mark.parametrize("when", ["prefill", "decode"])
@pytest.mark.parametrize("fast", [True, False])
def test_a_bad_step_time_names_the_cost_model_and_inputs(bad, when, fast):
    # before: finish_ms < arrival_ms or NaN times with status "finished".
    # 200 output tokens: the fast loop prices the decode stretch as one array
    # (more than 64 steps), the plain loop step by step: both are checked.
    wl = Workload.from_requests([0.0], [16], [200], block_size=16)
    with pytest.raises(ValueError) as info:
        run(wl, cost_model=Scalar(bad, when), fast=fast)
    msg = str(info.value)
    assert f"Scalar(bad={bad}, when={when!r})" in msg and "decode_context=" in msg, msg
    assert "finite and >= 0" in msg


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("bad", "only_41"), [(math.nan, False), (-1.0, True)])
def test_a_decode_run_is_checked_at_its_first_bad_step(fast, bad, only_41):
    # One request of 16 tokens and 200 outputs: one prefill step, then decode steps of
    # one sequence with 17, 18, ... tokens of context. The jumping loop prices the
    # whole 199-step stretch in one run of the kernel (a user cost model: one
    # step_time_ms call a step), the plain loop one step at a time; both stop at the
    # first bad step time (context 41, the 25th decode step), nothing priced after it.
    # Steps take 1 ms; bad ones NaN from context 41 on, or -1 ms at context 41 alone:
    # then the stretch's 199 steps (contexts 17..215) total 198 * 1 - 1 = 197 ms >= 0,
    # so only the check of each step time finds the step ending before the one before.
    wl = Workload.from_requests([0.0], [16], [200], block_size=16)
    calls = []

    class Spy(Scalar):
        def step_time_ms(self, pt, pa, b, s):
            calls.append((pt, pa, b, s))
            if only_41 and (pt, s) != (0, 41):
                return 1.0
            return super().step_time_ms(pt, pa, b, s)

    with pytest.raises(ValueError, match=rf"of {bad!r} ms .*decode_seqs=1, decode_context=41\)"):
        run(wl, cost_model=Spy(bad, "decode"), fast=fast)
    assert calls == [(16, 16 * 17 // 2, 0, 0)] + [(0, 0, 1, c) for c in range(17, 42)]


def test_finite_step_times_that_overflow_never_give_frames():
    # each step is finite (1e308 ms) but their sum is not: an error naming the
    # cost model instead of rows "finished" at inf (and no endless timeline)
    class Huge(Scalar):
        def step_time_ms(self, pt, pa, b, s):
            return 1e308 if pt else 1.0

    # two whole prefills in a row (one sequence at a time): the second would end at 2e308
    wl = Workload.from_requests([0.0, 0.0], [16, 16], [1, 1], block_size=16)
    with pytest.raises(ValueError, match=r"Scalar\(bad=0.*1e\+308 ms.*prefill_tokens=16"):
        run(wl, cost_model=Huge(0, ""), engine=ism.EngineConfig(max_num_seqs=1, max_batched_tokens=16))
    # in a decode stretch the priced run itself is checked
    with pytest.raises(ValueError, match=r"Scalar\(bad=0.*inf in total"):
        run(Workload.from_requests([0.0], [16], [4], block_size=16), cost_model=type("H", (Scalar,), {
            "step_time_ms": lambda self, pt, pa, b, s: 1e308})(0, ""))


def test_kv_tokens_beyond_int64_is_rejected_up_front():
    # before: the whole run, then an OverflowError building the result
    wl = Workload.from_requests([0.0], [16], [2], block_size=16)
    with pytest.raises(ValueError, match=r"kv_tokens must be < 2\*\*62"):
        run(wl, cost_model=ism.LinearCostModel(), kv_tokens=2**63)


def test_timeline_is_capped_and_stays_a_regular_grid():
    # before: 20 bursty requests on 4 replicas gave 16M timeline rows (35 s)
    wl = Workload.from_requests(np.arange(20) * 0.01, [4096] * 20, [512] * 20, block_size=16)
    t = time.perf_counter()
    res = ism.Simulator(replicas=4, routing="round_robin", cost_model=ism.LinearCostModel(),
                        kv_tokens=10**6 * 16).run(wl, progress=False)
    assert time.perf_counter() - t < 20
    tl = res.timeline
    assert len(tl) <= engine.TIMELINE_ROWS
    period = res.config["timeline_ms"]
    assert period >= 0.19 / 1000  # coarsened from the default span / 1000
    for _, g in tl.groupby("replica"):
        # every replica's samples sit on the same grid t0 + k * period, k = 0, 1, ...
        k = np.arange(len(g))
        assert np.allclose(g["time_ms"].to_numpy(), k * period, rtol=0, atol=1e-9 * period * len(g))
    assert tl["time_ms"].max() <= res.requests["finish_ms"].max()


@pytest.mark.parametrize("period", [1e-300, 0.0, -1.0, math.nan, math.inf, True])
def test_tiny_or_invalid_timeline_period_rejected(period):
    wl = Workload.from_requests([0.0], [16], [2], block_size=16)
    with pytest.raises(ValueError, match="timeline_ms must be a finite number >= 0.001"):
        run(wl, cost_model=ism.LinearCostModel(), timeline_ms=period)


def test_huge_block_size_allocates_by_use_and_matches_dense():
    # before: array("q") of block_size entries per replica (128 MiB at 2**24)
    wl = Workload.from_synthetic(30, rate=50.0, input_len=300, output_len=90, range_ratio=0.5,
                                 block_size=2**24, seed=3)
    tracemalloc.start()
    res = ism.Simulator(replicas=3, cost_model=ism.LinearCostModel(), kv_tokens=8 * 2**24).run(
        wl, progress=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 2**20
    slow = ism.Simulator(replicas=3, cost_model=ism.LinearCostModel(), kv_tokens=8 * 2**24,
                         fast=False).run(wl, progress=False)
    assert res.requests.equals(slow.requests)


def test_sparse_phase_histogram_gives_the_dense_frames(monkeypatch):
    # block size 64 wraps the phase histogram often; the sparse and the dense
    # histogram must give identical frames (fast and plain loops)
    wl = Workload.from_synthetic(60, rate=400.0, input_len=200, output_len=150, range_ratio=0.9,
                                 num_prefixes=3, prefix_len=128, block_size=64, seed=5)
    sim = ism.Simulator(replicas=2, cost_model=ism.LinearCostModel(), kv_tokens=40 * 64)
    dense = sim.run(wl, progress=False)
    assert decode.DecodeGroup(64, Recorder(1.0, 0.0)).sparse is None
    monkeypatch.setattr(decode, "DENSE_PHASES", 0)
    assert decode.DecodeGroup(64, Recorder(1.0, 0.0)).sparse == {}  # (the patch reaches it)
    sparse = sim.run(wl, progress=False)
    assert dense.requests.equals(sparse.requests) and dense.timeline.equals(sparse.timeline)
    plain = sim.set_params(fast=False).run(wl, progress=False)
    assert dense.requests.equals(plain.requests) and dense.timeline.equals(plain.timeline)
