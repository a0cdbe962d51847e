"""Helpers the test files share: hypothesis settings, workload and simulator
configuration strategies, one way to run the simulator in a test, invariant
checks inside a run, and reference routers (the built-in policies written
plainly, for cross-checks).

(pytest fixtures, hooks and the trace paths are in conftest.py.)
"""

from __future__ import annotations

import bisect
import contextlib
import math
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from conftest import family_workload
from inferasim import Workload
from inferasim.sim import EngineConfig, KvCostRouter, LinearCostModel, Simulator
from inferasim.sim.cache import BlockCache
from inferasim.sim.kv import KVManager
from inferasim.sim.replica import Replica
from inferasim.sim.sequence import DECODE
from inferasim.sim.stretch import DecodeStretch

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
    # the vLLM v1 rules (any subset; pages of 1, 2 or 4 tokens divide every drawn
    # block size) in a third of the configurations
    rules = {}
    if draw(st.integers(0, 2)) == 0:
        rules = dict(
            page_tokens=draw(st.sampled_from([None, 1, 2, 4])),
            full_prompt_admission=draw(st.booleans()),
            cache_on_schedule=draw(st.booleans()),
            cache_generated=draw(st.booleans()),
        )
    engine = EngineConfig(
        max_num_seqs=max_num_seqs,
        max_batched_tokens=draw(st.integers(max_num_seqs, 64)),
        chunked_prefill=draw(st.booleans()),
        **rules,
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


# ---------------------------------------------------------------- invariant checks


def check_memory(kv: Any) -> None:
    """A KV manager's accounting: private blocks >= 0, private + cached <= capacity,
    ``pinned`` the cached blocks with references, no negative reference count, no
    lower tier above its capacity."""
    c = kv.cache
    assert kv.private >= 0
    assert c.pages == sum(c.entry_pages(h) for h in c.ref)
    assert kv.private + c.pages <= kv.capacity
    assert c.pinned == sum(c.entry_pages(h) for h, r in c.ref.items() if r > 0)
    assert all(r >= 0 for r in c.ref.values())
    assert all(0 < p < c.ppb or h >= 2**64 for h, p in c.short.items())
    if kv.tiers is not None:
        for store in kv.tiers.stores:
            assert len(store.blocks) <= store.capacity


def check_stretch_plan(stretch: Any) -> None:
    """A decode stretch's new blocks (:meth:`DecodeStretch._cum`, a closed form over
    the phase histogram) against the blocks each decoding sequence allocates, one
    sequence and step at a time, and its searches (``_fitting``, ``_next_allocating``) against
    ``bisect_right`` over those running sums.

    A sequence that joined the group at decode step ``d_join`` with ``c_join``
    computed tokens starts a new page at the step that starts after ``d`` steps
    when ``(d - d_join + c_join) % page_tokens == 0``, while ``d`` is below its
    finish-heap entry (it finishes at the end of the step that brings the count
    to that entry). Stretch step ``x + 1`` starts after ``D + 1 + x`` steps
    (step 0, the running one, was allocated when the step was composed)."""
    group = stretch.group
    D, pt, steps = group.steps, group.bs, stretch.steps
    live = [(e[0], e[3]) for e in group.heap if e[3].state == DECODE and e[3].epoch == e[2]]
    sums = [0]
    for x in range(steps - 1):
        d = D + 1 + x
        sums.append(sums[-1] + sum(
            1 for finish, seq in live if d < finish and (d - seq.d_join + seq.c_join) % pt == 0
        ))
    assert [stretch._cum(j) for j in range(steps)] == sums
    free = stretch.kv.free
    for j in range(steps):
        for limit in (sums[j], sums[j] + free):
            fit = bisect.bisect_right(sums[1:], limit)
            assert stretch._fitting(j, limit) == fit
            hi = (j + steps - 1) // 2  # (capped: the question of DecodeStretch._uniform)
            assert stretch._fitting(j, limit, hi) == min(fit, hi)
        assert stretch._next_allocating(j) == bisect.bisect_right(sums[1:], sums[j])


def check_replica(sched: Any, kv: Any) -> None:
    """:func:`check_memory`, the sequence slots, and each cached block pinned exactly by
    the running sequences holding it (aggregated replicas: every holder is running)."""
    check_memory(kv)
    assert len(sched.running) <= sched.max_seqs
    holders: dict[int, int] = {}
    for seq in sched.running:
        for h in seq.hashed:
            holders[h] = holders.get(h, 0) + 1
    assert {h: r for h, r in kv.cache.ref.items() if r} == holders, "a reference count slipped"
    # no pinned page unused: a holder uses every page of the entries it pins but
    # the last one's tail (``cpages`` counts the pages it uses), and some holder
    # uses each pinned page (vLLM pins only the blocks a sequence uses)
    cache = kv.cache
    used: dict[int, int] = {}
    for seq in sched.running:
        if not seq.hashed:
            continue
        *head, last = seq.hashed
        before = sum(cache.entry_pages(h) for h in head)
        tail = seq.cpages - before
        assert 0 < tail <= cache.entry_pages(last), "a sequence's pages slipped"
        for h in head:
            used[h] = cache.entry_pages(h)
        used[last] = max(used.get(last, 0), tail)
    assert all(used[h] == cache.entry_pages(h) for h in holders), "a pinned page is unused"


class InvariantChecks:
    """Monkeypatches that check the cache and memory invariants inside a run (on the
    interpreted core: mark the test ``instrumented``, see tests/test_native.py): at
    every step start and end (``Replica``), every application of a decode stretch's
    steps (``DecodeStretch.progress``, ``_uniform``: the jump applies many steps at
    once), every allocation (``KVManager.allocate``) and every eviction
    (``BlockCache.evict``: only unpinned blocks go); every decode stretch's plan
    (:func:`check_stretch_plan`)."""

    def __init__(self, monkeypatch: Any) -> None:
        orig_evict = BlockCache.evict
        orig_allocate = KVManager.allocate
        orig_start = Replica._start_step
        orig_complete = Replica._complete
        orig_progress = DecodeStretch.progress
        orig_uniform = DecodeStretch._uniform
        orig_plan = DecodeStretch.plan
        self.evicted = 0
        self.jump_checks = 0
        self.plan_checks = 0

        def evict(cache, k, out=None):
            before = dict(cache.ref)
            pages = {h: cache.entry_pages(h) for h in before}
            e0, p0 = cache.evictions, cache.pages
            orig_evict(cache, k, out)
            gone = set(before) - set(cache.ref)
            # whole entries go, or (pages) the tail pages of one entry
            assert len(gone) == cache.evictions - e0
            shrunk = [h for h in cache.ref if cache.entry_pages(h) != pages[h]]
            assert len(shrunk) <= 1 and all(before[h] == 0 for h in shrunk)
            removed = p0 - cache.pages
            if cache.partial:
                assert removed == k
            else:  # (whole entries: at most one entry's pages more)
                assert k <= removed < k + max(pages.values())
            assert all(before[h] == 0 for h in gone), "a pinned block was evicted"
            self.evicted += cache.evictions - e0

        def allocate(kv, n, t):
            orig_allocate(kv, n, t)
            check_memory(kv)

        def start(rep):
            orig_start(rep)
            check_replica(rep.sched, rep.kv)

        def complete(rep):
            orig_complete(rep)
            check_replica(rep.sched, rep.kv)

        def progress(stretch, until):  # the decode jump applies many steps at once
            orig_progress(stretch, until)
            check_replica(stretch.sched, stretch.kv)
            if stretch.steps:  # (the applied position's blocks, kept as it moves)
                assert stretch.pos_blocks == stretch._cum(stretch.pos)
            self.jump_checks += 1

        def uniform(stretch, j, jn):
            orig_uniform(stretch, j, jn)
            check_replica(stretch.sched, stretch.kv)
            if stretch.steps:
                assert stretch.pos_blocks == stretch._cum(stretch.pos)

        def plan(stretch, t, cap):
            first_end = orig_plan(stretch, t, cap)
            if stretch.steps:
                check_stretch_plan(stretch)
                self.plan_checks += 1
            return first_end

        monkeypatch.setattr(BlockCache, "evict", evict)
        monkeypatch.setattr(DecodeStretch, "plan", plan)
        monkeypatch.setattr(KVManager, "allocate", allocate)
        monkeypatch.setattr(Replica, "_start_step", start)
        monkeypatch.setattr(Replica, "_complete", complete)
        monkeypatch.setattr(DecodeStretch, "progress", progress)
        monkeypatch.setattr(DecodeStretch, "_uniform", uniform)


# ---------------------------------------------------------------- reference routers
#
# The built-in routing policies (inferasim/sim/routing.py) written again, as plainly
# as their documentation states them (inferasim/sim/router.py): every replica's
# score computed in full from the public ReplicaView attributes (no pruning, no
# early exit, no memo), the winner the smallest (score, outstanding tokens, index).
# A run routed by a built-in policy and a run routed by its reference must give the
# same frames, bit for bit (the built-ins' pruning and tie handling are the risk).


def effective_match(view: Any, saving: Sequence[float] | None = None) -> float:
    """The routed request's (effective) resident prefix on ``view``: its HBM blocks
    plus, per lower tier, the blocks found there times the share of a miss's prefill
    they save (``saving``, by default the view's ``tier_savings``); without tiers
    (no savings) ``prefix_match_blocks``."""
    if saving is None:
        saving = view.tier_savings
    if not saving:
        return float(view.prefix_match_blocks)
    hits = view.hit_blocks_by_tier
    m = float(hits[0])
    for k, share in enumerate(saving):
        m += share * hits[k + 1]
    return m


def lowest(replicas: Sequence[Any], scores: list[float]) -> int:
    """The index of the replica with the smallest score; ties to the fewest
    outstanding tokens, then the lowest position."""
    best = min(range(len(replicas)),
               key=lambda i: (scores[i], replicas[i].outstanding_tokens, i))
    return replicas[best].index


class ReferenceLeastLoaded:
    """``least_loaded``: the fewest outstanding tokens, ties to the lowest index."""

    def __call__(self, request: Any, replicas: Sequence[Any]) -> int:
        return lowest(replicas, [0.0] * len(replicas))


class ReferenceCacheAware:
    """``cache_aware``: the longest effective match, ties to the least loaded."""

    def __init__(self, saving: Sequence[float] | None = None) -> None:
        self.saving = saving

    def __call__(self, request: Any, replicas: Sequence[Any]) -> int:
        return lowest(replicas, [-effective_match(v, self.saving) for v in replicas])


class ReferenceKvCost:
    """``kv_cost``: ``overlap_weight * (prompt blocks - effective match) + active_blocks``,
    lowest wins (ties to the least loaded); with a temperature, drawn from the
    softmax of ``-(cost - lowest cost) / temperature`` with ``random.Random(seed)``."""

    def __init__(self, overlap_weight: float = 1.0, temperature: float = 0.0,
                 saving: Sequence[float] | None = None) -> None:
        self.overlap_weight = float(overlap_weight)
        self.temperature = float(temperature)
        self.saving = saving
        self.rng = random.Random(0)

    def reset(self, num_replicas: int, seed: int | None) -> None:
        self.rng = random.Random(seed)

    def __call__(self, request: Any, replicas: Sequence[Any]) -> int:
        w = self.overlap_weight
        blocks = -(-request.input_len // replicas[0].block_size)
        costs = [w * (blocks - effective_match(v, self.saving)) + v.active_blocks
                 for v in replicas]
        if self.temperature > 0:
            low = min(costs)
            weights = [math.exp(-(c - low) / self.temperature) for c in costs]
            return replicas[self.rng.choices(range(len(replicas)), weights=weights)[0]].index
        return lowest(replicas, costs)


class ReferenceConductor:
    """``conductor``: the smallest ``ttft_estimate_ms + handoff_estimate_ms``, ties to
    the least loaded. ``calls`` counts the requests it placed."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: Any, replicas: Sequence[Any]) -> int:
        self.calls += 1
        return lowest(replicas, [v.ttft_estimate_ms + v.handoff_estimate_ms for v in replicas])


def reference_router(routing: Any, saving: Sequence[float] | None = None) -> Any:
    """The reference of a built-in policy: a name, or a :class:`KvCostRouter`
    (its weight and temperature). ``saving`` replaces the views' ``tier_savings``."""
    if isinstance(routing, KvCostRouter):
        return ReferenceKvCost(routing.overlap_weight, routing.temperature, saving)
    if routing == "kv_cost":
        return ReferenceKvCost(saving=saving)
    if routing == "cache_aware":
        return ReferenceCacheAware(saving)
    if routing == "least_loaded":
        return ReferenceLeastLoaded()
    if routing == "conductor":
        return ReferenceConductor()
    raise ValueError(f"no reference router for {routing!r}")


class ScriptedRouter:
    """Places request ``i`` on ``script[i]`` while the script lasts, then asks
    ``then``; at each of those calls ``seen`` records ``look(views)`` (read first).

    A way to build a hand-derived fleet state in a real run and test a built-in
    router on the real views of it.
    """

    def __init__(self, script: Sequence[int], then: Any,
                 look: Callable[[Sequence[Any]], Any] | None = None) -> None:
        self.script = list(script)
        self.then = then
        self.look = look
        self.seen: list[Any] = []

    def reset(self, num_replicas: int, seed: int | None) -> None:
        self.seen = []
        if hasattr(self.then, "reset"):
            self.then.reset(num_replicas, seed)

    def __call__(self, request: Any, replicas: Sequence[Any]) -> int:
        i = request.request_id
        if i < len(self.script):
            return self.script[i]
        if self.look is not None:
            self.seen.append(self.look(replicas))
        return self.then(request, replicas)


# ---------------------------------------------------------------- the browser

#: Debian's chromium, driven by Playwright (tests/test_browser.py, tests/test_docs.py).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def chromium_page(missing: Callable[[str], None]) -> Iterator[Any]:
    """A new 1400x1000 page in headless Debian chromium, closed afterwards;
    ``missing(message)`` (skip, or fail under CI) when chromium or playwright is absent."""
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        finally:
            browser.close()


def moved_prompt_tokens(req: pd.DataFrame) -> np.ndarray:
    """Prompt tokens each handed-off request's transfer moved (its prompt less
    what the decode instance held; 0 for a request never handed off)."""
    handed = req["decode_replica"].to_numpy() >= 0
    hit = req["decode_hit_tokens"].to_numpy() if "decode_hit_tokens" in req else 0
    return np.where(handed, req["input_len"].to_numpy() - hit, 0)
