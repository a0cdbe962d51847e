"""Parameter fuzz (issue 23): values at the edges of every documented limit.

For tiers, handoff links, think times, cost coefficients, timeline periods,
the widgets' arguments and load slider (``cache_sizing``, ``tiered_cache_sizing``),
objectives (``summary``, ``SloAdmission``, ``sweep``, the CLI flags),
seeds, ``Workload.synthesize`` and session columns, a random value drawn
around each limit (just inside, just outside, 0, subnormals, inf, NaN,
bools, None, strings, numpy scalars) gives exactly one of:

* one clear error (ValueError / WorkloadError, never OverflowError,
  MemoryError or numpy's own) whose message names the parameter; or
* a result inside the guarantees: the value lies within its documented
  limit, and a run's frame has every request ``finished`` (finite ordered
  times within 2**44 ms) or ``rejected`` with a reason.

The JSON structural checks are cross-checked against the standard
:mod:`json` module read line by line with every key kept.

Bounded for CI; ``INFERASIM_FUZZ=long`` runs 20 times more examples.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples
from inferasim import LinearCostModel, Simulator, Tier, Tiers, Workload, WorkloadError
from inferasim._validate import MAX_TIME_MS, MIN_GBPS
from inferasim.sim import Disaggregated, SloAdmission
from inferasim.sim.command import _slo_flag
from inferasim.sim.limits import MAX_FRAME_MS
from inferasim.workload._parse import parse_json_records

FUZZ = settings(max_examples=examples(40), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
BS = 16
COST = LinearCostModel(kv_bytes_per_token=131072)
UP = math.inf


def near(x: float) -> list[float]:
    """``x`` and its two float neighbours."""
    return [math.nextafter(x, -UP), x, math.nextafter(x, UP)]


#: Values at the edges of the limits (the same list for every parameter: a
#: value far from one limit is at the edge of another).
EDGES = [
    0.0, -0.0, 5e-324, -5e-324, 1.0, -1.0, 1e300, -1e300, UP, -UP, math.nan,
    *near(MIN_GBPS), *near(MAX_TIME_MS), *near(MAX_TIME_MS * 1000), *near(MAX_TIME_MS / 2),
    True, False, None, "1", "nan", [1.0], np.float64(2.5), np.int64(3), np.float32(math.nan),
    2**63, 2**64, 2**64 - 1, -(2**63),
]
values = st.one_of(st.sampled_from(EDGES), st.floats(), st.integers(-(2**70), 2**70))


def is_real(v) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def in_range(v, low: float, high: float, *, low_open: bool = False) -> bool:
    if not is_real(v) or not math.isfinite(float(v)):
        return False
    v = float(v)
    return (v > low if low_open else v >= low) and v <= high


def check_error(e: BaseException, *names: str) -> None:
    """One clear error: a ValueError naming one of ``names``, on one line."""
    assert isinstance(e, ValueError), f"{type(e).__name__}: {e}"
    text = str(e)
    assert any(n in text for n in names), text
    assert "\n" not in text, text


def check_frame(res, n: int) -> None:
    """The README's guarantees on a run's request frame."""
    r = res.requests
    assert len(r) == n
    assert set(r["status"]) <= {"finished", "rejected"}
    rej = r[r["status"] == "rejected"]
    assert rej["reason"].notna().all()
    fin = r[r["status"] == "finished"]
    times = fin[["arrival_ms", "scheduled_ms", "first_token_ms", "finish_ms"]].to_numpy()
    assert np.isfinite(times).all()
    assert (np.diff(times, axis=1) >= 0).all()
    assert (np.abs(times) <= MAX_FRAME_MS).all()


def reload_case() -> Workload:
    ids = [list(range(1, 9)), list(range(11, 19)), list(range(1, 9))]
    return Workload.from_requests([0, 100, 200], [128] * 3, [4] * 3, ids, block_size=BS)


# ------------------------------------------------------------------ durations


@FUZZ
@given(field=st.sampled_from(["read_gbps", "write_gbps", "latency_us"]), v=values)
def test_tier_parameters(field, v):
    kw = {"read_gbps": 50.0, "write_gbps": 50.0, field: v}
    try:
        t = Tier("dram", 1 << 20, **kw)
    except (ValueError, TypeError) as e:
        check_error(e, f"Tier 'dram': {field}")
        return
    if field == "latency_us":
        assert in_range(v, 0.0, MAX_TIME_MS * 1000)
    else:
        assert in_range(v, MIN_GBPS, UP)
    sim = Simulator(1, kv_tokens=10 * BS, cost_model=COST, tiers=Tiers([t], load_policy="always"))
    try:
        res = sim.run(reload_case(), progress=False)
    except ValueError as e:
        check_error(e, f"Tier 'dram': {field}")
        return
    check_frame(res, 3)


@FUZZ
@given(field=st.sampled_from(["handoff_gbps", "handoff_latency_us"]), v=values)
def test_handoff_parameters(field, v):
    sim = Simulator(Disaggregated(1, 1, **{field: v}), kv_tokens=4096, cost_model=COST)
    try:
        res = sim.run(reload_case(), progress=False)
    except (ValueError, TypeError) as e:
        check_error(e, f"replicas.{field}")
        return
    if field == "handoff_latency_us":
        assert in_range(v, 0.0, MAX_TIME_MS * 1000 / 3)  # (3 handoffs within 2**43 ms)
    else:
        assert in_range(v, MIN_GBPS, UP)
    check_frame(res, 3)


@FUZZ
@given(v=values)
def test_think_time(v):
    wl = Workload.from_requests([0, 10, 20], [32, 32, 48], [3, 3, 1], session_id=[1, 1, 1],
                                block_size=BS)
    try:
        res = Simulator(kv_tokens=4096, cost_model=COST).run(
            wl, closed_loop=True, think_time=v, progress=False)
    except (ValueError, TypeError) as e:
        check_error(e, "think_time")
        return
    assert v is None or in_range(v, 0.0, MAX_TIME_MS / 2)  # (two thinks in one session)
    check_frame(res, 3)


@FUZZ
@given(field=st.sampled_from(["overhead_ms", "prefill_token_ms", "decode_seq_ms",
                              "decode_context_ms", "prefill_attention_ms"]), v=values)
def test_cost_coefficients(field, v):
    try:
        cost = LinearCostModel(**{field: v})
    except (ValueError, TypeError) as e:
        check_error(e, field, "would never advance")
        return
    assert in_range(v, 0.0, MAX_TIME_MS)
    wl = Workload.from_requests([0, 5], [32, 16], [3, 2], block_size=BS)
    try:
        res = Simulator(kv_tokens=4096, cost_model=cost).run(wl, progress=False)
    except ValueError as e:  # (step times that add up beyond the frames' limit)
        check_error(e, "beyond the 2**44 ms")
        return
    check_frame(res, 2)


@FUZZ
@given(v=values)
def test_timeline_period(v):
    wl = Workload.from_requests([0, 5], [32, 16], [3, 2], block_size=BS)
    try:
        res = Simulator(kv_tokens=4096, cost_model=COST).run(wl, timeline_ms=v, progress=False)
    except (ValueError, TypeError) as e:
        check_error(e, "timeline_ms")
        return
    assert v is None or in_range(v, 0.001, MAX_TIME_MS)
    check_frame(res, 2)


# ------------------------------------------------------------------ objectives


@pytest.fixture(scope="module")
def result():
    wl = Workload.from_requests([0, 100, 200], [32, 32, 32], [2, 2, 2], block_size=BS)
    return Simulator(kv_tokens=4096, cost_model=COST).run(wl, progress=False)


def slo_ok(v) -> bool:
    return v is None or in_range(v, 0.0, MAX_TIME_MS, low_open=True)


@FUZZ
@given(name=st.sampled_from(["slo_ttft_ms", "slo_tpot_ms"]), v=values)
def test_summary_objectives(result, name, v):
    try:
        s = result.summary(**{name: v})
    except (ValueError, TypeError) as e:
        check_error(e, name)
        assert not slo_ok(v)
        return
    assert slo_ok(v)
    assert v is None or 0.0 <= s["slo_attainment"] <= 1.0


@FUZZ
@given(name=st.sampled_from(["ttft_ms", "tpot_ms"]), v=values)
def test_slo_admission_objectives(name, v):
    other = {"tpot_ms": 100.0} if name == "ttft_ms" else {"ttft_ms": 100.0}
    try:
        SloAdmission(**{name: v, **other})
    except (ValueError, TypeError) as e:
        check_error(e, f"admission.{name}")
        assert not slo_ok(v)
        return
    assert slo_ok(v)


@FUZZ
@given(flag=st.sampled_from(["--slo-ttft-ms", "--slo-tpot-ms"]), v=values)
def test_cli_objective_flags(flag, v):
    import argparse

    text = str(v)
    try:
        out = _slo_flag(flag)(text)
    except argparse.ArgumentTypeError as e:
        assert str(e).startswith(f"{flag} must be"), str(e)
        return
    assert 0 < out <= MAX_TIME_MS and out == float(text)


@settings(max_examples=examples(10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["slo_ttft_ms", "slo_tpot_ms"]), v=values)
def test_sweep_objectives(name, v):
    from inferasim.sweep import sweep

    wl = Workload.from_requests([0, 100], [32, 32], [2, 2], block_size=BS)
    try:
        f = sweep(wl, {"kv_tokens": [4096], "cost_model": [COST]}, progress=False, **{name: v})
    except (ValueError, TypeError) as e:
        check_error(e, name)
        assert not slo_ok(v)
        return
    assert slo_ok(v) and len(f) == 1


# ------------------------------------------------------------------ seeds and synthesis


def seed_ok(v) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool) and 0 <= v < 2**64


@FUZZ
@given(v=values)
def test_seeds_follow_one_rule(v):
    outcomes = []
    for call in (
        lambda: Workload.from_synthetic(3, rate=1.0, input_len=8, output_len=2, seed=v),
        lambda: Workload.synthesize(like(), 4, seed=v),
    ):
        try:
            call()
            outcomes.append(True)
        except (ValueError, TypeError) as e:
            check_error(e, "seed must be an integer")
            outcomes.append(False)
    assert outcomes == [seed_ok(v)] * 2
    sim = Simulator(2, routing="random", kv_tokens=4096, cost_model=COST, seed=v)
    try:
        check_frame(sim.run(reload_case(), progress=False), 3)
        assert v is None or seed_ok(v)
    except (ValueError, TypeError) as e:
        check_error(e, "seed must be None or an integer")
        assert not (v is None or seed_ok(v))


def like() -> Workload:
    return Workload.from_requests([0, 5, 9], [4, 8, 4], [1, 1, 1],
                                  [[1, 2], [1, 2, 3, 4], [1, 9]], block_size=2)


#: Scales and rates: valid values that need gigabytes (a prompt_scale of
#: 1e5 .. 1e7 on this trace stays within 2**28 ids) are left out.
SCALES = st.one_of(
    st.sampled_from([*EDGES, 1e9, 1e12, 1e-12, 0.5, 3.0, 100.0]).filter(
        lambda v: not (is_real(v) and 100.0 < abs(float(v)) < 1e8)),
    st.floats(-100.0, 100.0),
)


@FUZZ
@given(name=st.sampled_from(["prompt_scale", "num_sessions_scale", "rate", "num_requests"]),
       v=SCALES)
def test_synthesize_parameters(name, v):
    kw = {name: v} if name != "num_requests" else {}
    n = v if name == "num_requests" else (None if name == "num_sessions_scale" else 6)
    try:
        wl = Workload.synthesize(like(), n, seed=1, **kw)
    except (ValueError, TypeError) as e:
        assert not isinstance(e, OverflowError | MemoryError)
        check_error(e, name)
        return
    assert len(wl) >= 1 and (name != "num_requests" or v is None or len(wl) == v)
    assert int(wl.input_len.max()) <= 2**40
    assert float(np.abs(wl.arrival_ms).max()) <= MAX_TIME_MS


# ------------------------------------------------------------------ sessions


SESSION_IDS = st.sampled_from([1, 2, 1.5, 2.0, "a", "b", " a", "1", "01", "nan", "", None,
                               math.nan, True, "x,y", 'q"', 2**63, -1, np.int64(7)])


@FUZZ
@given(sid=st.lists(SESSION_IDS, min_size=1, max_size=5),
       turns=st.none() | st.lists(st.sampled_from([1, 2, 3, 0, -1, 1.5, math.nan, True, 2.0]),
                                  min_size=5, max_size=5))
def test_session_columns_round_trip_or_fail_at_from_requests(sid, turns):
    n = len(sid)
    kw = {"session_id": sid} if turns is None else {"session_id": sid, "turn": turns[:n]}
    try:
        wl = Workload.from_requests(list(range(n)), [32] * n, [2] * n, block_size=BS, **kw)
    except WorkloadError as e:
        assert "field 'session_id'" in str(e) or "field 'turn'" in str(e), str(e)
        return
    buf = io.StringIO()
    wl.to_csv(buf)
    buf.seek(0)
    assert Workload.from_csv(buf, block_size=BS) == wl


# ------------------------------------------------------------------ JSON structure


KEYS = st.sampled_from(["timestamp", "input_length", "a", "b", 'q"', "c:d", "{"])
LEAVES = st.one_of(st.integers(0, 9), st.sampled_from(["x", "a\":{", "}]", "\\", ":"]))
JVALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.lists(st.tuples(KEYS, inner), max_size=3),
    max_leaves=6,
)


def dump(v) -> str:
    """JSON text of a value; a list of (key, value) pairs is an object (keys may repeat)."""
    if isinstance(v, list) and v and all(isinstance(p, tuple) for p in v):
        return "{" + ", ".join(f"{json.dumps(k)}: {dump(x)}" for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dump(x) for x in v) + "]"
    return json.dumps(v)


def repeated(text: str) -> str | None:
    found: list[str] = []

    def hook(pairs):  # (the first key whose second occurrence comes first)
        keys = [k for k, _ in pairs]
        for j, k in enumerate(keys):
            if k in keys[:j] and not found:
                found.append(k)
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return found[0] if found else None


@FUZZ
@given(records=st.lists(st.lists(st.tuples(KEYS, JVALUES), min_size=1, max_size=4),
                        min_size=1, max_size=4),
       array=st.booleans())
def test_duplicate_keys_match_a_reference(records, array):
    texts = [dump(r) for r in records]
    data = ("[" + ",\n".join(texts) + "]" if array else "\n".join(texts) + "\n").encode()
    dups = [repeated(t) for t in texts]
    try:
        got, lines, unit = parse_json_records(data, "t")
    except WorkloadError as e:
        first = next(i for i, d in enumerate(dups) if d is not None)
        assert f"{'record' if array else 'line'} {first + 1}, field {dups[first]!r}" in str(e)
        return
    assert all(d is None for d in dups)
    assert got == [json.loads(t) for t in texts]


@FUZZ
@given(records=st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), JVALUES),
                                 min_size=1, max_size=3, unique_by=lambda p: p[0]),
                        min_size=2, max_size=4),
       cuts=st.lists(st.integers(0, 10**6), min_size=1, max_size=3))
def test_lines_hold_whole_records(records, cuts):
    # records on one line joined by ", " (never valid JSON lines), then newlines at random
    # places: whatever loads is exactly what each line parsed alone gives
    text = ", ".join(dump(r) for r in records)
    for c in sorted({c % (len(text) + 1) for c in cuts}, reverse=True):
        text = text[:c] + "\n" + text[c:]
    data = text.encode()
    reference = []
    try:
        for line in text.split("\n"):
            if line.strip():
                obj = json.loads(line)
                assert isinstance(obj, dict)
                reference.append(obj)
    except (ValueError, AssertionError):
        reference = None
    try:
        got = parse_json_records(data, "t")[0]
    except WorkloadError:
        return
    assert reference is not None and got == reference


# ------------------------------------------------------------------ widgets

WIDGET = settings(max_examples=examples(12), deadline=None,
                  suppress_health_check=[HealthCheck.too_slow])


def widget_workload() -> Workload:
    """12 requests of 2 blocks (one shared prefix block), 10 ms apart: 0..110 ms."""
    ids = [[1, 100 + i] for i in range(12)]
    return Workload.from_requests([10.0 * i for i in range(12)], [1024] * 12, [2] * 12, ids,
                                  block_size=512)


def positive_int(v) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool) and 1 <= v < 2**62


def widget_value_ok(name: str, v) -> bool:
    """Whether the documented limits (README, widgets row) allow ``v`` for ``name``."""
    if name == "replicas":
        return positive_int(v)
    if name == "load":
        # > 0 and not so low that the last arrival (110 ms) / load passes 2**43 ms
        return in_range(v, 0.0, UP, low_open=True) and 110.0 / float(v) <= MAX_TIME_MS * (1 + 1e-9)
    if name == "capacity_tokens":
        return in_range(v, 1e4, 1e8)
    if name in ("dram_tokens", "pool_tokens"):
        high = 1e8 if name == "dram_tokens" else 1e9
        return in_range(v, 0.0, high) and (float(v) == 0 or float(v) >= 1e4)
    assert name == "sim_window_ms"  # the first request arrives at 0 ms: any window > 0 holds it
    return v is None or in_range(v, 0.0, MAX_TIME_MS, low_open=True)


WIDGET_VALUES = st.one_of(values, st.sampled_from([1e4, 1e8, 1e9, 2.0**-30, 0.125, 8.0, 100.0,
                                                   110.0 / MAX_TIME_MS, 32, 33, 2**62 - 1]))


#: (widget, parameter) pairs; the other arguments keep a small valid setting.
WIDGET_ARGUMENTS = [("cache_sizing", n) for n in ("replicas", "load", "capacity_tokens", "sim_window_ms")]
WIDGET_ARGUMENTS += [("tiered_cache_sizing", n) for n in ("replicas", "dram_tokens", "pool_tokens", "sim_window_ms")]


@WIDGET
@given(case=st.sampled_from(WIDGET_ARGUMENTS), v=WIDGET_VALUES)
def test_widget_arguments(case, v):
    from inferasim import widgets

    make, name = case
    kw = {"replicas": 2, **({"capacity_tokens": 1e5} if make == "cache_sizing" else {"dram_tokens": 1e5})}
    try:
        w = getattr(widgets, make)(widget_workload(), **{**kw, name: v})
    except ValueError as e:
        check_error(e, name)
        assert not widget_value_ok(name, v), v
        return
    assert widget_value_ok(name, v), v
    if name == "replicas":  # kept exactly: never clamped to the slider's range
        assert w.controls["replicas"].value == v
        return
    if name == "load":
        assert w.settings()["load"] == float(v)
    if name == "capacity_tokens":
        assert w.capacity_tokens == float(v)
    if name in ("dram_tokens", "pool_tokens"):
        assert w.capacities()[name.removesuffix("_tokens")] == float(v)
    res = w.simulate()
    n = len(w.simulation_workload()) if make == "cache_sizing" else len(res.requests)
    check_frame(res, n)
    assert "not simulated" not in w.status.value


@WIDGET
@given(v=WIDGET_VALUES)
def test_cache_sizing_load_set_on_the_slider(v):
    # a control set from code: refused by name on the status line, or simulated
    from inferasim.widgets import cache_sizing

    w = cache_sizing(widget_workload(), capacity_tokens=1e5, replicas=1)
    try:
        w.controls["load"].value = v
    except Exception:  # the slider's own type check (traitlets): the value never got in
        return
    held = w.controls["load"].value
    try:
        w.simulate()
    except ValueError as e:
        check_error(e, "load")
        assert not widget_value_ok("load", held)
        assert w.status.value.startswith("not simulated: load must be")
        return
    assert widget_value_ok("load", held)
    check_frame(w.result, len(w.simulation_workload()))
