"""Helpers the test files share: hypothesis settings, workload and simulator
configuration strategies, and one way to run the simulator in a test.

(pytest fixtures, hooks and the trace paths are in conftest.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from conftest import family_workload
from inferasim import Workload
from inferasim.sim import EngineConfig, KvCostRouter, LinearCostModel, Simulator

# ---------------------------------------------------------------- hypothesis


def hypothesis_settings(
    max_examples: int, *, slow: bool = False, fixtures: bool = False, shrink: bool = True
) -> settings:
    """``settings(max_examples=..., deadline=None)`` and, when asked, fewer checks.

    ``slow`` suppresses the too-slow data-generation check (simulator
    strategies), ``fixtures`` the function-scoped-fixture check (tests with
    ``monkeypatch``), and ``shrink=False`` leaves out the shrink phase (a
    failing multi-replica run can take minutes to shrink). Checks not named
    here follow the loaded profile (conftest.py).
    """
    checks = [HealthCheck.too_slow] if slow else []
    if fixtures:
        checks.append(HealthCheck.function_scoped_fixture)
    kw: dict[str, Any] = {"suppress_health_check": checks} if checks else {}
    if not shrink:
        kw["phases"] = (Phase.explicit, Phase.reuse, Phase.generate)
    return settings(max_examples=max_examples, deadline=None, **kw)


# ---------------------------------------------------------------- reuse workloads

REUSE_BS = 4  # block size of the reuse-analysis strategies


def partial_block_workload(ids: list[list[int]], rems: list[int], bs: int = REUSE_BS,
                           arrival: Any = None, outputs: Any = None) -> Workload:
    """Requests with these block ids and a last block of ``rems[i]`` tokens (1..bs).

    ``input_len = bs * (len(ids) - 1) + rem``: a partial last block whenever
    ``rem < bs``; a request without ids has 0 tokens. Arrivals one per ms and
    one output token each unless given.
    """
    n = len(ids)
    lens = [bs * (len(r) - 1) + m if r else 0 for r, m in zip(ids, rems, strict=True)]
    arrival = list(range(n)) if arrival is None else arrival
    outputs = [1] * n if outputs is None else outputs
    return Workload.from_requests(arrival, lens, outputs, ids, block_size=bs)


@st.composite
def id_workloads(draw: st.DrawFn, max_n: int = 9, max_id: int = 7, timed: bool = False) -> Workload:
    """1 to ``max_n`` requests of up to 6 block ids from ``0..max_id`` (repeats
    inside a request included) with partial last blocks (:func:`partial_block_workload`).

    ``timed`` also draws arrival gaps of 0 to 50 ms and 1 to 9 output tokens.
    """
    n = draw(st.integers(1, max_n))
    ids = draw(st.lists(st.lists(st.integers(0, max_id), max_size=6), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)) if timed else None
    rems = draw(st.lists(st.integers(1, REUSE_BS), min_size=n, max_size=n))
    if not timed:
        return partial_block_workload(ids, rems)
    outs = draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
    return partial_block_workload(ids, rems, arrival=np.cumsum(gaps).tolist(), outputs=outs)


def rows_of(wl: Workload) -> list[list[int]]:
    """Each request's block ids."""
    return [wl.block_ids(i).tolist() for i in range(len(wl))]


def tokens_of(wl: Workload) -> list[list[int]]:
    """Each request's tokens per block (the last block may be partial)."""
    out = []
    for i in range(len(wl)):
        n, total = len(wl.block_ids(i)), int(wl.input_len[i])
        out.append([min(wl.block_size, total - wl.block_size * j) for j in range(n)])
    return out


# ---------------------------------------------------------------- simulator

#: Options of ``Simulator.run`` that :func:`simulate` takes beside the parameters.
RUN_OPTIONS = ("closed_loop", "think_time", "timeline_ms")


def simulate(wl: Workload, *, kv_blocks: int | None = None, **kw: Any) -> Any:
    """``Simulator(**parameters).run(wl, **options)`` without a progress bar.

    ``kw`` holds Simulator parameters and the run options
    :data:`RUN_OPTIONS`. ``kv_blocks`` is a capacity in the workload's blocks,
    as the drawn configurations give it (they are drawn before the workload's
    block size is known): it becomes ``kv_tokens=kv_blocks * wl.block_size``.
    """
    options = {k: kw.pop(k) for k in RUN_OPTIONS if k in kw}
    if kv_blocks is not None:
        if "kv_tokens" in kw:
            raise TypeError("give kv_blocks= or kv_tokens=, not both")
        kw["kv_tokens"] = kv_blocks * wl.block_size
    return Simulator(**kw).run(wl, progress=False, **options)


def runner(**defaults: Any) -> Callable[..., Any]:
    """A ``run(wl, **kw)``: :func:`simulate` with these defaults (``kw`` wins; a
    capacity in ``kw``, ``kv_tokens`` or ``kv_blocks``, replaces the default one)."""

    def run(wl: Workload, **kw: Any) -> Any:
        base = defaults
        if "kv_tokens" in kw or "kv_blocks" in kw:
            base = {k: v for k, v in defaults.items() if k not in ("kv_tokens", "kv_blocks")}
        return simulate(wl, **{**base, **kw})

    return run


def assert_same(a: Any, b: Any) -> None:
    """Two results have the same request, replica and timeline frames, bit for bit."""
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.replicas, b.replicas, check_exact=True)
    pd.testing.assert_frame_equal(a.timeline, b.timeline, check_exact=True)


@st.composite
def sim_workloads(draw: st.DrawFn, max_n: int = 25, allow_no_ids: bool = True) -> Workload:
    """Up to ``max_n`` requests with 4, 8 or 16-token blocks in four prompt
    families (shared leading blocks), arrivals in bursts and gaps; sometimes
    without hash ids."""
    bs = draw(st.sampled_from([4, 8, 16]))
    n = draw(st.integers(1, max_n))
    gaps = draw(
        st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.5, 20.0, 60.0]), min_size=n, max_size=n)
    )
    arrival = np.cumsum(gaps)
    P = draw(st.lists(st.integers(1, 90), min_size=n, max_size=n))
    out_len = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    ids = []
    fresh = 10_000
    for p in P:
        fam = draw(st.integers(0, 3))
        shared = draw(st.integers(0, 6))
        row = []
        for j in range(-(-p // bs)):
            if j < shared:
                row.append(100 * fam + j)
            else:
                row.append(fresh)
                fresh += 1
        ids.append(row)
    with_ids = draw(st.integers(0, 4)) > 0 if allow_no_ids else True
    return Workload.from_requests(arrival, P, out_len, ids if with_ids else None, block_size=bs)


@st.composite
def busy_workloads(draw: st.DrawFn) -> Workload:
    """Many overlapping requests with long outputs and 4-token blocks: routing
    decisions land inside decode stretches that allocate blocks and finish."""
    n = draw(st.integers(20, 80))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return family_workload(rng, n, [0.0, 0.5, 2.0, 6.0], (1, 40), (1, 80), families=3, shared_max=4)


@st.composite
def sim_configs(draw: st.DrawFn) -> dict:
    """Drawn :func:`simulate` keywords: 1-3 replicas, any routing (``kv_cost``
    sometimes with a softmax temperature), a small KV capacity (``kv_blocks``,
    3 to 40 blocks), small batches, any eviction, a linear cost model, a
    timeline period."""
    max_num_seqs = draw(st.integers(1, 8))
    routing = draw(
        st.sampled_from(
            ["round_robin", "random", "least_loaded", "cache_aware", "kv_cost", "conductor"]
        )
    )
    replicas = draw(st.integers(1, 3))
    kv_blocks = draw(st.integers(3, 40))
    engine = EngineConfig(
        max_num_seqs=max_num_seqs,
        max_batched_tokens=draw(st.integers(max_num_seqs, 64)),
        chunked_prefill=draw(st.booleans()),
    )
    eviction = draw(st.sampled_from(["lru", "fifo", "lfu", "length_aware"]))
    temperature = draw(st.sampled_from([0.0, 0.0, 2.0]))
    return dict(
        replicas=replicas,
        routing=KvCostRouter(temperature=temperature) if routing == "kv_cost" else routing,
        kv_blocks=kv_blocks,
        engine=engine,
        eviction=eviction,
        seed=draw(st.integers(0, 3)),
        cost_model=LinearCostModel(
            overhead_ms=draw(st.sampled_from([0.3, 1.0, 5.0])),
            prefill_token_ms=draw(st.sampled_from([0.0, 0.01, 0.05])),
            prefill_attention_ms=draw(st.sampled_from([0.0, 1e-4])),
            decode_seq_ms=draw(st.sampled_from([0.0, 0.1, 0.7])),
            decode_context_ms=draw(st.sampled_from([0.0, 0.003])),
        ),
        timeline_ms=draw(st.sampled_from([None, 0.7, 5.0])),
    )
