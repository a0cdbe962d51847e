"""Simulator fuzz: random small fleets and workloads with extreme but valid values.

Zero and huge lengths, identical timestamps, huge gaps, adversarial cost
models (zero-time decode steps, huge step times) and routers (always the
same replica, the most loaded one). Every run: rows in == rows out, status
``finished`` or ``rejected`` with a reason, finished rows with finite ordered
times, KV within capacity, the jump equal to the step-by-step loop; and the
same case run in another process gives identical frames.

Disaggregated fleets (prefill and decode pools) get the same checks plus
their own: random pool sizes, tiny KV, layerwise handoffs or not, handoff
links from starved (a token's KV takes seconds) to free, with and without
host DRAM and a shared pool behind the prefill instances (in either order,
hot-block replication on or off), every routing
including the conductor, SLO admission on or off. Every request comes out
(finished with ``arrival <= first token <= finish`` and ``transfer_ms >=
0``, or rejected with a reason; a finished one with more than one token
went through a decode instance), KV within capacity on both pools, tier
hits within the cached tokens, the run ends (the engine's livelock guard
turns a never-ending run into an error).

Bounded for CI; ``INFERASIM_FUZZ=long`` runs 20 times more examples.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
from helpers import assert_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples
from inferasim import LinearCostModel, Simulator, Workload
from inferasim.sim import Disaggregated, EngineConfig, KvCostRouter, SloAdmission, Tier, Tiers


class ZeroDecode:
    """Prefill costs time, decode steps take none (valid: finite and >= 0)."""

    kv_bytes_per_token = 1e5  # (a disaggregated fleet moves the KV)

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
    wl = dict(arrival_ms=np.cumsum(gaps).tolist(), input_len=P, output_len=out,
              hash_ids=ids if draw(st.booleans()) else None, block_size=bs)
    sim = dict(
        replicas=draw(st.integers(1, 4)),
        routing=draw(st.sampled_from(["round_robin", "random", "least_loaded", "cache_aware",
                                      "kv_cost", "longest_match", "last", "most_loaded"])),
        kv_blocks=draw(st.sampled_from([1, 2, 5, 40, 10**6])),
        engine=dict(max_num_seqs=seqs, max_batched_tokens=draw(st.integers(seqs, 128)),
                    chunked_prefill=draw(st.booleans())),
        eviction=draw(st.sampled_from(["lru", "fifo", "lfu"])),
        kv_cost_temperature=draw(st.sampled_from([0.0, 1.0])),
        seed=draw(st.integers(0, 2)),
    )
    run = dict(timeline_ms=draw(st.sampled_from([None, 0.001, 3.0])))
    return {"wl": wl, "sim": sim, "run": run, "cost": cost}


@st.composite
def pd_cases(draw) -> dict:
    """A disaggregated fleet: the workload of :func:`cases` (bounded lengths), random
    pools, links, tiers and admission."""
    bs = draw(st.sampled_from([1, 4, 16]))
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.001, 1.0, 50.0, 1e6]), min_size=n, max_size=n))
    P = draw(st.lists(st.sampled_from([0, 1, 2, 7, 33, 120]), min_size=n, max_size=n))
    out = draw(st.lists(st.sampled_from([0, 1, 2, 9, 40]), min_size=n, max_size=n))
    ids = []
    fresh = 1000
    for p in P:
        nblocks = -(-p // bs)
        shared = draw(st.integers(0, 3))
        ids.append(list(range(shared))[:nblocks] + list(range(fresh, fresh + max(nblocks - shared, 0))))
        fresh += nblocks
    seqs = draw(st.integers(1, 4))
    tiers = draw(st.sampled_from(["", "dram", "pool", "dram+pool", "pool+dram"]))
    hot = draw(st.sampled_from([None, 0, 2])) if "+" in tiers else None
    slo = draw(st.sampled_from([None, None, 5.0, 1e4]))
    wl = dict(arrival_ms=np.cumsum(gaps).tolist(), input_len=P, output_len=out,
              hash_ids=ids if draw(st.booleans()) else None, block_size=bs)
    fleet = dict(prefill=draw(st.integers(1, 3)), decode=draw(st.integers(1, 3)))
    sim = dict(
        replicas=fleet,
        routing=draw(st.sampled_from(["round_robin", "random", "least_loaded", "cache_aware",
                                      "kv_cost", "longest_match", "conductor", "last",
                                      "most_loaded"])),
        kv_blocks=draw(st.sampled_from([1, 3, 8, 40, 10**6])),
        engine=dict(max_num_seqs=seqs, max_batched_tokens=draw(st.integers(seqs, 64)),
                    chunked_prefill=draw(st.booleans())),
        eviction=draw(st.sampled_from(["lru", "fifo", "lfu"])),
        seed=draw(st.integers(0, 2)),
        slo_ttft_ms=slo,
    )
    run = dict(timeline_ms=draw(st.sampled_from([None, 0.5])))
    fleet.update(
        layerwise=draw(st.booleans()),
        handoff_gbps=draw(st.sampled_from([0.01, 0.05, 1.0, 1e6])),
        handoff_latency_us=draw(st.sampled_from([0.0, 50.0, 1e6])),
    )
    return {
        "wl": wl,
        "sim": sim,
        "run": run,
        "tiers": tiers,
        "hot": hot,
        "cost": draw(st.sampled_from(["linear", "zero_decode", "linear_flat"])),
    }


TIERS = {
    "dram": Tier("dram", capacity_tokens=64, read_gbps=0.5, write_gbps=0.5, latency_us=20.0),
    "pool": Tier("pool", capacity_tokens=256, read_gbps=0.2, write_gbps=0.2, latency_us=100.0,
                 shared=True),
}


def build(case: dict) -> tuple[Workload, dict, dict]:
    """A case as (workload, Simulator parameters, run options).

    A case is plain data (it is pickled to another process): ``kv_blocks`` in
    the workload's blocks, ``engine`` and a disaggregated ``replicas`` as
    dicts, ``kv_cost_temperature`` and ``slo_ttft_ms`` for the router and the
    admission, ``tiers`` and ``hot`` for the tier stack.
    """
    wl = Workload.from_requests(**case["wl"])
    spec = dict(case["sim"])
    name = spec.pop("routing")
    temperature = spec.pop("kv_cost_temperature", 0.0)
    slo = spec.pop("slo_ttft_ms", None)
    fleet = spec.pop("replicas")
    disagg = isinstance(fleet, dict)
    kv_tokens = spec.pop("kv_blocks") * wl.block_size
    engine = EngineConfig(**spec.pop("engine"))
    sim = dict(
        spec,  # eviction, seed
        replicas=Disaggregated(**fleet) if disagg else fleet,
        routing=ROUTERS.get(name) or (KvCostRouter(temperature=temperature)
                                      if name == "kv_cost" else name),
        kv_tokens=kv_tokens,
        engine=engine,
        admission=None if slo is None else SloAdmission(ttft_ms=slo),
    )
    kvb = {"kv_bytes_per_token": 1e5} if disagg else {}
    sim["cost_model"] = {
        "linear": LinearCostModel(**kvb),
        "linear_flat": LinearCostModel(overhead_ms=0.0, prefill_token_ms=0.0, prefill_attention_ms=0.0,
                                       decode_seq_ms=1.0, decode_context_ms=0.0, **kvb),
        "zero_decode": ZeroDecode(),
        "slow": Slow(),
    }[case["cost"]]
    if case.get("tiers"):
        sim["tiers"] = Tiers([TIERS[t] for t in case["tiers"].split("+")],
                             replicate_hot_blocks=case.get("hot"))
    return wl, sim, case.get("run", {})


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pd_cases())
def test_fuzz_disaggregated(case):
    fast = frames(case, fast=True)
    check(case, fast)
    assert_same(fast, frames(case, fast=False))


def frames(case: dict, fast: bool = True):
    wl, sim, run = build(case)
    return Simulator(**sim, fast=fast).run(wl, progress=False, **run)


def check(case: dict, res) -> None:
    wl, sim, _ = build(case)
    req = res.requests
    assert len(req) == len(wl) and req.index.tolist() == list(range(len(wl)))
    assert set(req["status"]) <= {"finished", "rejected"}
    rej = req[req["status"] == "rejected"]
    assert rej["reason"].map(lambda r: isinstance(r, str) and len(r) > 0).all()
    fin = req[req["status"] == "finished"]
    times = fin[["arrival_ms", "scheduled_ms", "first_token_ms", "finish_ms"]].to_numpy()
    assert np.isfinite(times).all()
    assert (np.diff(times, axis=1) >= 0).all()
    cap = res.config["kv_tokens"]
    assert (res.replicas["peak_kv_tokens"] <= cap).all()
    tl = res.timeline
    assert (tl["kv_running_tokens"] + tl["kv_cached_tokens"] <= cap).all()
    assert np.isfinite(tl["time_ms"]).all()
    s = res.summary()
    assert isinstance(s, pd.Series)
    if isinstance(sim["replicas"], Disaggregated):
        check_pd(sim, req, res)


def check_pd(sim: dict, req: pd.DataFrame, res) -> None:
    """The disaggregated fleet's own invariants."""
    P_n, D_n = sim["replicas"].prefill, sim["replicas"].decode
    reps = res.replicas
    assert reps["role"].tolist() == ["prefill"] * P_n + ["decode"] * D_n
    fin = req[req["status"] == "finished"]
    assert fin["prefill_replica"].between(0, P_n - 1).all()
    # a finished request with a second token went through a decode instance, its
    # KV moved there (transfer_ms >= 0) after its first token; a one-token answer
    # never left its prefill instance
    two = fin[fin["output_len"] > 1]
    assert two["decode_replica"].between(P_n, P_n + D_n - 1).all()
    assert np.isfinite(two[["handoff_wait_ms", "transfer_ms"]].to_numpy()).all()
    assert (two["transfer_ms"] >= 0).all() and (two["handoff_wait_ms"] >= 0).all()
    one = fin[fin["output_len"] <= 1]
    assert (one["decode_replica"] == -1).all()
    # every admitted request counted once on its prefill instance, a handed-off one
    # once more on its decode instance
    assert reps["requests"].iloc[:P_n].sum() == len(fin)
    assert reps["requests"].iloc[P_n:].sum() == len(two)
    if "hbm_hit_tokens" in req.columns:  # tier hits are part of the cached prefix
        hits = req.filter(like="_hit_tokens").sum(axis=1)
        assert (hits == req["cached_tokens"]).all()


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
                    kv_blocks=int(rng.choice([5, 40])),
                    engine=dict(max_num_seqs=4, max_batched_tokens=64,
                                chunked_prefill=bool(rng.integers(2))),
                    eviction=str(rng.choice(["lru", "lfu"])),
                    kv_cost_temperature=float(rng.choice([0.0, 1.0])), seed=int(rng.integers(3))),
        "run": dict(timeline_ms=None),
        "cost": str(rng.choice(["linear", "zero_decode"])),
    }


def random_pd_case(rng: np.random.Generator) -> dict:
    """A disaggregated case like :func:`pd_cases` draws, from a seeded numpy generator."""
    case = random_case(rng)
    sim = case["sim"]
    del sim["kv_cost_temperature"]
    fleet = dict(prefill=int(rng.integers(1, 3)), decode=int(rng.integers(1, 3)))
    sim["routing"] = str(rng.choice(["random", "kv_cost", "conductor", "most_loaded"]))
    sim["replicas"] = dict(fleet, layerwise=bool(rng.integers(2)),
                           handoff_gbps=float(rng.choice([0.05, 1.0])),
                           handoff_latency_us=float(rng.choice([0.0, 50.0])))
    case["tiers"] = str(rng.choice(["", "dram+pool"]))
    return case


def test_same_case_same_frames_in_another_process():
    # a fresh process with another hash seed: any set/dict-order or global-state
    # dependence shows up as different frames
    import os

    rng = np.random.default_rng(2024)
    cases_ = [random_case(rng) for _ in range(examples(3))]
    cases_ += [random_pd_case(rng) for _ in range(examples(3))]
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
