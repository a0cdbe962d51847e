"""Simulator fuzz: random small fleets and workloads with extreme but valid values.

Zero and huge lengths, identical timestamps, huge gaps, adversarial cost
models (zero-time decode steps, huge step times) and routers (always the
same replica, the most loaded one). Every run: rows in == rows out, status
``finished`` or ``rejected`` with a reason, finished rows with finite ordered
times, KV within capacity, the jump equal to the step-by-step loop; and the
same case run in another process gives identical frames.

Bounded for CI; ``INFERASIM_FUZZ=long`` runs 20 times more examples.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferasim import LinearCostModel, Simulator, Workload


class ZeroDecode:
    """Prefill costs time, decode steps take none (valid: finite and >= 0)."""

    def __repr__(self) -> str:
        return "ZeroDecode()"

    def step_time_ms(self, pt, pa, b, s):
        if isinstance(b, np.ndarray):
            return np.zeros(b.shape)
        return 0.5 + 0.01 * pt if pt else 0.0

    def kv_capacity_blocks(self, block_size):
        return None


class Slow:
    """Huge but finite step times (an hour a step)."""

    def __repr__(self) -> str:
        return "Slow()"

    def step_time_ms(self, pt, pa, b, s):
        return 3.6e6 + 0.0 * np.asarray(s, dtype=float) if isinstance(b, np.ndarray) else 3.6e6

    def kv_capacity_blocks(self, block_size):
        return None


def always_last(request, replicas):
    return len(replicas) - 1


def most_loaded(request, replicas):
    load = [r.outstanding_tokens for r in replicas]
    return int(np.argmax(load))


ROUTERS = {"last": always_last, "most_loaded": most_loaded}


@st.composite
def cases(draw) -> dict:
    bs = draw(st.sampled_from([1, 4, 16, 64]))
    n = draw(st.integers(1, 14))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.001, 1.0, 50.0, 50.0, 1e9]), min_size=n, max_size=n))
    P = draw(st.lists(st.sampled_from([0, 1, 2, 7, 64, 300, 10**7]), min_size=n, max_size=n))
    out = draw(st.lists(st.sampled_from([0, 1, 2, 30, 200]), min_size=n, max_size=n))
    ids = []
    fresh = 1000
    for p in P:
        nblocks = min(-(-p // bs), 40)
        shared = draw(st.integers(0, 3))
        row = list(range(shared))[:nblocks] + list(range(fresh, fresh + max(nblocks - shared, 0)))
        fresh += nblocks
        ids.append(row)
    seqs = draw(st.integers(1, 6))
    cost = draw(st.sampled_from(["linear", "zero_decode", "slow", "linear_flat"]))
    return {
        "wl": dict(arrival_ms=np.cumsum(gaps).tolist(), input_len=P, output_len=out,
                   hash_ids=ids if draw(st.booleans()) else None, block_size=bs),
        "sim": dict(
            replicas=draw(st.integers(1, 4)),
            routing=draw(st.sampled_from(["round_robin", "random", "least_loaded", "cache_aware",
                                          "kv_cost", "longest_match", "last", "most_loaded"])),
            kv_blocks=draw(st.sampled_from([1, 2, 5, 40, 10**6])),
            max_num_seqs=seqs,
            max_batched_tokens=draw(st.integers(seqs, 128)),
            chunked_prefill=draw(st.booleans()),
            eviction=draw(st.sampled_from(["lru", "fifo", "lfu"])),
            temperature=draw(st.sampled_from([0.0, 1.0])),
            seed=draw(st.integers(0, 2)),
            timeline_ms=draw(st.sampled_from([None, 0.001, 3.0])),
        ),
        "cost": cost,
    }


def build(case: dict) -> tuple[Workload, dict]:
    wl = Workload.from_requests(**case["wl"])
    sim = dict(case["sim"])
    sim["routing"] = ROUTERS.get(sim["routing"], sim["routing"])
    sim["cost_model"] = {
        "linear": LinearCostModel(),
        "linear_flat": LinearCostModel(overhead_ms=0.0, prefill_token_ms=0.0, prefill_attention_ms=0.0,
                                       decode_seq_ms=1.0, decode_context_ms=0.0),
        "zero_decode": ZeroDecode(),
        "slow": Slow(),
    }[case["cost"]]
    return wl, sim


def frames(case: dict, fast: bool = True):
    wl, sim = build(case)
    return Simulator(**sim, progress=False, fast=fast).run(wl)


def check(case: dict, res) -> None:
    wl, sim = build(case)
    req = res.requests
    assert len(req) == len(wl) and req["request_id"].tolist() == list(range(len(wl)))
    assert set(req["status"]) <= {"finished", "rejected"}
    rej = req[req["status"] == "rejected"]
    assert rej["reason"].map(lambda r: isinstance(r, str) and len(r) > 0).all()
    fin = req[req["status"] == "finished"]
    times = fin[["arrival_ms", "scheduled_ms", "first_token_ms", "finish_ms"]].to_numpy()
    assert np.isfinite(times).all()
    assert (np.diff(times, axis=1) >= 0).all()
    cap = res.config["kv_blocks"]
    assert (res.replicas["peak_kv_blocks"] <= cap).all()
    tl = res.timeline
    assert (tl["kv_running_blocks"] + tl["kv_cached_blocks"] <= cap).all()
    assert np.isfinite(tl["time_ms"]).all()
    s = res.summary()
    assert isinstance(s, pd.Series)


def assert_same(a, b) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.replicas, b.replicas, check_exact=True)
    pd.testing.assert_frame_equal(a.timeline, b.timeline, check_exact=True)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_fuzz_simulator(case):
    fast = frames(case, fast=True)
    check(case, fast)
    assert_same(fast, frames(case, fast=False))


_CHILD = """
import pickle, sys
sys.path.insert(0, {tests!r})
from test_fuzz_sim import frames
cases = pickle.loads(sys.stdin.buffer.read())
out = [frames(c) for c in cases]
sys.stdout.buffer.write(pickle.dumps([(r.requests, r.replicas, r.timeline) for r in out]))
"""


def random_case(rng: np.random.Generator) -> dict:
    """A case like :func:`cases` draws, from a seeded numpy generator (no shrinking)."""
    n = int(rng.integers(2, 14))
    bs = int(rng.choice([1, 4, 16, 64]))
    P = rng.choice([0, 1, 2, 7, 64, 300], size=n).tolist()
    ids = [list(range(min(-(-p // bs), 40))) for p in P]
    return {
        "wl": dict(arrival_ms=np.cumsum(rng.choice([0.0, 0.001, 1.0, 50.0], size=n)).tolist(),
                   input_len=P, output_len=rng.choice([0, 1, 2, 30], size=n).tolist(),
                   hash_ids=ids, block_size=bs),
        "sim": dict(replicas=int(rng.integers(2, 4)),
                    routing=str(rng.choice(["random", "kv_cost", "cache_aware", "most_loaded"])),
                    kv_blocks=int(rng.choice([5, 40])), max_num_seqs=4, max_batched_tokens=64,
                    chunked_prefill=bool(rng.integers(2)), eviction=str(rng.choice(["lru", "lfu"])),
                    temperature=float(rng.choice([0.0, 1.0])), seed=int(rng.integers(3)), timeline_ms=None),
        "cost": str(rng.choice(["linear", "zero_decode"])),
    }


def test_same_case_same_frames_in_another_process():
    # a fresh process with another hash seed: any set/dict-order or global-state
    # dependence shows up as different frames
    import os

    rng = np.random.default_rng(2024)
    cases_ = [random_case(rng) for _ in range(examples(3))]
    here = [frames(c) for c in cases_]
    env = dict(os.environ, PYTHONHASHSEED="12345")
    child = subprocess.run(
        [sys.executable, "-c", _CHILD.format(tests=os.path.dirname(__file__))],
        input=pickle.dumps(cases_), capture_output=True, check=True, env=env, timeout=300,
    )
    there = pickle.loads(child.stdout)
    for a, (req, reps, tl) in zip(here, there, strict=True):
        pd.testing.assert_frame_equal(a.requests, req, check_exact=True)
        pd.testing.assert_frame_equal(a.replicas, reps, check_exact=True)
        pd.testing.assert_frame_equal(a.timeline, tl, check_exact=True)
