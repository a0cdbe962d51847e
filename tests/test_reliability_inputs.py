"""Regression tests for issue 23, classes 1-4 and the two loader gaps.

Every bad value gets one error naming the parameter (or file, line and key);
every value at the edge of a documented limit that is allowed gives a frame
inside the README's guarantees. The limits are derived by hand in comments.
"""

from __future__ import annotations

import io
import math
import tracemalloc

import numpy as np
import pytest

import inferasim as ism
from inferasim import LinearCostModel, Simulator, Tier, Tiers, Workload, WorkloadError
from inferasim._validate import MAX_TIME_MS
from inferasim.cli import main
from inferasim.sim import Disaggregated, SloAdmission
from inferasim.sim.limits import MAX_FRAME_MS

BS = 16
COST = LinearCostModel(kv_bytes_per_token=131072)


def jsonl(text: str) -> Workload:
    return Workload.from_mooncake(io.BytesIO(text.encode()))


def small() -> Workload:
    return Workload.from_requests([0, 10, 20], [32, 32, 32], [2, 2, 2], block_size=BS)


def reload_case() -> Workload:
    """Request 2 repeats request 0's 8 blocks after request 1 (8 other blocks)
    evicted them from a 10-block HBM: request 2 loads 96 tokens from DRAM."""
    ids = [list(range(1, 9)), list(range(11, 19)), list(range(1, 9))]
    return Workload.from_requests([0, 100, 200], [128] * 3, [4] * 3, ids, block_size=BS)


def tier_run(cost=COST, **tier):
    t = Tier("dram", 1 << 20, **{"read_gbps": 50.0, "write_gbps": 50.0, **tier})
    return Simulator(1, kv_tokens=10 * BS, cost_model=cost,
                     tiers=Tiers([t], load_policy="always")).run(reload_case(), progress=False)


# ------------------------------------------------------------------ loaders


def test_a_key_given_twice_names_file_line_and_key():
    text = ('{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n'
            '{"timestamp": 1, "input_length": 10, "input_length": 20, "output_length": 5, '
            '"hash_ids": [1]}\n')
    with pytest.raises(WorkloadError, match=r"<buffer>, line 2, field 'input_length': the key "
                                            r"'input_length' is given twice"):
        jsonl(text)


def test_a_key_given_twice_in_a_json_array_and_in_a_nested_object():
    arr = '[{"timestamp": 0, "input_length": 4, "output_length": 1, "timestamp": 3}]'
    with pytest.raises(WorkloadError, match=r"record 1, field 'timestamp'"):
        Workload.from_csv(io.BytesIO(arr.encode()), block_size=BS)
    nested = ('{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1], '
              '"meta": {"a": 1, "a": 2}}\n')
    with pytest.raises(WorkloadError, match=r"line 1, field 'a'"):
        jsonl(nested)


def test_colons_braces_and_escaped_quotes_inside_strings_are_not_keys():
    # the string holds ':', '{', '}' and an escaped quote; the nested object has 2 keys:
    # 4 + 2 colons outside strings, 4 + 2 keys kept: nothing repeated
    text = ('{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1], '
            '"note": "x\\": {\\"y\\": 1}", "meta": {"a": 1, "b": [2, {"c": 3}]}}\n')
    wl = jsonl(text)
    assert wl.input_len.tolist() == [4]


def test_lines_invalid_alone_are_not_joined_into_requests():
    # line 1 alone: '{...}, {... [1' (invalid); line 2 alone: '2]}' (invalid). Joined with
    # a comma they were two valid requests before.
    text = ('{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1]}, '
            '{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": [1\n2]}\n')
    with pytest.raises(WorkloadError, match=r"<buffer>, line 1: malformed JSON"):
        jsonl(text)


# ------------------------------------------------------------------ class 1


@pytest.mark.parametrize(
    ("tier", "match"),
    [
        ({"latency_us": 1e300}, r"Tier 'dram': latency_us must be a finite number >= 0 and "
                                r"<= 2\*\*43 \* 1000 \(µs\), got 1e\+300"),
        ({"read_gbps": 1e-300}, r"Tier 'dram': read_gbps must be a finite number >= 1e-09"),
        ({"write_gbps": 5e-324}, r"Tier 'dram': write_gbps must be a finite number >= 1e-09"),
        ({"read_gbps": True}, r"Tier 'dram': read_gbps must be a finite number"),
        ({"latency_us": float("nan")}, r"Tier 'dram': latency_us must be"),
    ],
)
def test_tier_durations_are_bounded_at_construction(tier, match):
    with pytest.raises(ValueError, match=match):
        Tier("dram", 1 << 20, **{"read_gbps": 50.0, "write_gbps": 50.0, **tier})


@pytest.mark.parametrize("cap", [2**62, 2**63, -1])
def test_tier_capacities_are_below_2_62_as_kv_tokens(cap):
    # the README row "kv_tokens, tier capacities < 2**62 tokens": 2**62 was accepted for a tier
    with pytest.raises(ValueError, match=r"Tier 'dram': capacity_tokens must be an int >= 0 "
                                         r"and < 2\*\*62"):
        Tier("dram", cap, read_gbps=50.0, write_gbps=50.0)
    assert Tier("dram", 2**62 - 1, read_gbps=50.0, write_gbps=50.0).capacity_tokens == 2**62 - 1


def test_tier_at_the_limits_gives_frames_within_the_guarantees():
    # 3 requests x latency (2**43 / 4 ms) stay within 2**43 ms with the bytes' time;
    # request 2 waits that long for its load and finishes within 2**44 ms
    lat = MAX_TIME_MS * 1000 / 4
    r = tier_run(latency_us=lat).requests
    assert r["status"].eq("finished").all()
    assert float(r["finish_ms"].max()) <= MAX_FRAME_MS
    assert float(r.loc[2, "load_ms"]) >= lat / 1000
    # reads at 1 byte a second (writes fast, so the link carries the load alone):
    # 96 tokens x 131072 bytes take 12,582,912 s = 1.258e10 ms
    r = tier_run(read_gbps=1e-9).requests
    assert float(r.loc[2, "load_ms"]) == pytest.approx(96 * 131072 * 1000, rel=1e-6)


def test_tier_link_too_slow_for_the_workload_is_refused_at_the_run():
    # 3 requests x 132 tokens x 1e8 bytes = 3.96e10 bytes at 1 byte/s = 3.96e13 ms > 2**43
    cost = LinearCostModel(kv_bytes_per_token=1e8)
    with pytest.raises(ValueError, match=r"Tier 'dram': read_gbps: moving every "
                                         r"request's KV once \(3.96e\+10 bytes in 3 transfers\) "
                                         r"takes 3.96e\+13 ms"):
        tier_run(cost, read_gbps=1e-9)
    # n * latency: 3 x (2**43 ms / 2) = 1.5 x 2**43 ms
    with pytest.raises(ValueError, match="Tier 'dram': latency_us: moving every"):
        tier_run(latency_us=MAX_TIME_MS * 1000 / 2)


@pytest.mark.parametrize(
    ("fleet", "match"),
    [
        ({"handoff_latency_us": 1e300}, r"replicas.handoff_latency_us must be a finite number "
                                        r">= 0 and <= 2\*\*43 \* 1000"),
        ({"handoff_gbps": 1e-300}, r"replicas.handoff_gbps must be a finite number >= 1e-09"),
        ({"handoff_gbps": float("inf")}, r"replicas.handoff_gbps must be a finite number"),
        ({"handoff_latency_us": -1.0}, r"replicas.handoff_latency_us must be"),
    ],
)
def test_handoff_durations_are_bounded_at_the_run(fleet, match):
    with pytest.raises(ValueError, match=match):
        Simulator(Disaggregated(1, 1, **fleet), kv_tokens=4096, cost_model=COST).run(
            small(), progress=False)


def test_handoff_link_too_slow_for_the_workload_is_refused():
    # 3 x 34 tokens x 1e9 bytes = 1.02e11 bytes at 1 byte/s = 1.02e14 ms > 2**43 ms
    cost = LinearCostModel(kv_bytes_per_token=1e9)
    with pytest.raises(ValueError, match=r"replicas.handoff_gbps: "
                                         r"moving every request's KV once \(1.02e\+11 bytes"):
        Simulator(Disaggregated(1, 1, handoff_gbps=1e-9), kv_tokens=4096,
                  cost_model=cost).run(small(), progress=False)


def three_turns() -> Workload:
    return Workload.from_requests([0, 10, 20], [32, 32, 48], [3, 3, 1], session_id=[1, 1, 1],
                                  block_size=BS)


def test_think_time_is_bounded_per_value_and_per_session():
    sim = Simulator(kv_tokens=4096, cost_model=COST)
    with pytest.raises(ValueError, match=r"think_time: the think time of request 1 is 1e\+300; "
                                         r"it must be a finite number of ms >= 0 and <= 2\*\*43"):
        sim.run(three_turns(), closed_loop=True, think_time=1e300, progress=False)
    # two thinks of 2**42 ms sum to 2**43: allowed, and the frame stays within 2**44 ms
    r = sim.run(three_turns(), closed_loop=True, think_time=2.0**42, progress=False).requests
    assert r["status"].eq("finished").all() and float(r["finish_ms"].max()) <= MAX_FRAME_MS
    assert float(r["arrival_ms"].iloc[2]) >= 2.0**43
    # 0.6 x 2**43 twice = 1.2 x 2**43 ms in session 1
    with pytest.raises(ValueError, match=r"think_time: the think times of session 1 sum to "
                                         r"1.06e\+13 ms, beyond the 2\*\*43 ms"):
        sim.run(three_turns(), closed_loop=True, think_time=0.6 * 2.0**43, progress=False)


def test_cost_coefficients_are_bounded_and_frame_times_checked_at_the_end():
    with pytest.raises(ValueError, match=r"overhead_ms must be a finite number >= 0 and "
                                         r"<= 2\*\*43 \(ms\), got 1e\+300"):
        LinearCostModel(overhead_ms=1e300)
    with pytest.raises(ValueError, match="decode_seq_ms must be a finite number"):
        LinearCostModel(decode_seq_ms=True)
    wl = Workload.from_requests([0], [16], [2], block_size=BS)
    slow = LinearCostModel(overhead_ms=MAX_TIME_MS, prefill_token_ms=0.0, decode_seq_ms=0.0)
    # 2 output tokens: 1 prefill step + 1 decode step of 2**43 ms = 2**44 ms: the limit itself
    r = Simulator(kv_tokens=64, cost_model=slow).run(wl, progress=False).requests
    assert float(r["finish_ms"].iloc[0]) == MAX_FRAME_MS
    # 3 output tokens: 3 x 2**43 ms > 2**44 ms
    wl3 = Workload.from_requests([0], [16], [3], block_size=BS)
    with pytest.raises(ValueError, match=r"request 0 finishes at 2.64e\+13 ms, beyond the 2\*\*44"):
        Simulator(kv_tokens=64, cost_model=slow).run(wl3, progress=False)


def test_timeline_period_is_bounded():
    with pytest.raises(ValueError, match=r"timeline_ms must be a finite number >= 0.001 and "
                                         r"<= 2\*\*43"):
        Simulator(kv_tokens=4096, cost_model=COST).run(small(), timeline_ms=1e300,
                                                        progress=False)


# ------------------------------------------------------------------ class 2


@pytest.fixture(scope="module")
def result():
    # three requests 100 ms apart, each alone on the replica: TTFT = one prefill step of
    # 32 tokens = 5 + 0.05 x 32 = 6.6 ms
    wl = Workload.from_requests([0, 100, 200], [32, 32, 32], [2, 2, 2], block_size=BS)
    return Simulator(kv_tokens=4096, cost_model=COST).run(wl, progress=False)


@pytest.mark.parametrize("bad", [-5, 0, float("nan"), float("inf"), True, False, "10",
                                 MAX_TIME_MS * 2])
@pytest.mark.parametrize("name", ["slo_ttft_ms", "slo_tpot_ms"])
def test_summary_refuses_bad_objectives(result, name, bad):
    with pytest.raises(ValueError, match=rf"{name} must be None or a finite number > 0 and "
                                         r"<= 2\*\*43 \(ms\)"):
        result.summary(**{name: bad})


def test_summary_objectives_at_the_limits(result):
    # every TTFT is 6.6 ms: 2**43 and 6.6 meet it, 6.5 does not
    assert result.summary(slo_ttft_ms=MAX_TIME_MS)["slo_attainment"] == 1.0
    assert result.summary(slo_ttft_ms=6.6)["slo_attainment"] == 1.0
    assert result.summary(slo_ttft_ms=6.5)["slo_attainment"] == 0.0


def test_sweep_plan_and_topologies_refuse_bad_objectives_before_running():
    from inferasim import plan
    from inferasim.sim.topology import compare_topologies
    from inferasim.sweep import sweep

    grid = {"kv_tokens": [4096], "cost_model": [COST]}
    with pytest.raises(ValueError, match=r"slo_ttft_ms must be None or a finite number > 0"):
        sweep(small(), grid, slo_ttft_ms=True, progress=False)
    with pytest.raises(ValueError, match=r"slo_tpot_ms must be None or a finite number > 0"):
        sweep(small(), grid, slo_tpot_ms=float("nan"), progress=False)
    sim = Simulator(kv_tokens=4096, cost_model=COST)
    with pytest.raises(ValueError, match=r"slo_ttft_ms must be None or a finite number > 0"):
        plan.max_rate(small(), sim, slo_ttft_ms=True)
    with pytest.raises(ValueError, match=r"slo_tpot_ms must be None or a finite number > 0"):
        plan.min_replicas(small(), sim, slo_tpot_ms=-1)
    with pytest.raises(ValueError, match=r"percentile must be a finite number > 0 and <= 100"):
        plan.max_rate(small(), sim, slo_ttft_ms=100, percentile=True)
    with pytest.raises(ValueError, match=r"slo_ttft_ms must be None or a finite number > 0"):
        compare_topologies(small(), gpus=2, splits=[(1, 1)], kv_tokens=4096, cost_model=COST,
                           slo_ttft_ms=-5)


@pytest.mark.parametrize("bad", [-5, 0, True, float("nan"), 1e300])
def test_slo_admission_objectives_follow_the_same_rule(bad):
    # the same rule with or without an admission policy: the constructor checks
    with pytest.raises(ValueError, match=r"admission.ttft_ms must be None or a finite number"):
        SloAdmission(ttft_ms=bad)
    with pytest.raises(ValueError, match=r"admission.tpot_ms must be None or a finite number"):
        SloAdmission(ttft_ms=100, tpot_ms=bad)


@pytest.mark.parametrize(("flag", "value"), [("--slo-ttft-ms", "-5"), ("--slo-tpot-ms", "nan"),
                                             ("--slo-ttft-ms", "0"), ("--slo-ttft-ms", "x")])
def test_cli_objective_flags_are_usage_errors(capsys, flag, value):
    assert main(["simulate", "--num-requests", "5", "--no-progress", flag, value]) == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {flag} must be" in err


@pytest.mark.parametrize("answer", [None, 1, "yes", 0.0])
@pytest.mark.parametrize("fleet", [1, Disaggregated(1, 1)])
def test_an_admission_answer_other_than_a_bool_is_an_error(answer, fleet):
    sim = Simulator(fleet, kv_tokens=4096, cost_model=COST,
                    admission=lambda request, views, now: answer)
    with pytest.raises(ValueError, match=rf"admission returned {answer!r} for request 0; "
                                         r"expected True \(admit\) or False \(reject\)"):
        sim.run(small(), progress=False)


def test_numpy_bools_are_admission_answers():
    sim = Simulator(kv_tokens=4096, cost_model=COST,
                    admission=lambda request, views, now: np.bool_(request.request_id != 1))
    assert sim.run(small(), progress=False).requests["status"].tolist() == [
        "finished", "rejected", "finished"]


# ------------------------------------------------------------------ class 3


def sessions(sid, turn=None):
    kw = {"session_id": sid} if turn is None else {"session_id": sid, "turn": turn}
    n = len(sid)
    return Workload.from_requests(list(range(n)), [32] * n, [2] * n, block_size=BS, **kw)


@pytest.mark.parametrize(("sid", "match"), [
    ([None, None, "a"], r"request 0, field 'session_id': must be a session id"),
    (["a", float("nan"), "a"], r"request 1, field 'session_id': must be a session id"),
    ([1, True, 1], r"request 1, field 'session_id'"),
    ([1, 2**63, 1], r"request 1, field 'session_id': session id 9223372036854775808 is outside"),
    # ("1" and "01" would both read back as 1: with "x" beside them, the ids are strings "1")
    (["1", "01", "x"], r"request 1, field 'session_id': the session id '01' is written to CSV as "
                       r"01, which from_csv reads back as '1'"),
    (["1", "2"], r"request 0, field 'session_id': the session id '1' is written to CSV as 1, "
                 r"which from_csv reads back as the number 1"),
    ([" a", "a", "b"], r"request 0, field 'session_id': the session id ' a' .* reads back as 'a'"),
    (["nan", "a", "b"], r"request 0, field 'session_id': must be a session id"),
])
def test_session_ids_are_checked_at_from_requests(sid, match):
    with pytest.raises(WorkloadError, match=match):
        sessions(sid)


@pytest.mark.parametrize(("turn", "match"), [
    ([1, float("nan"), 3], r"request 1, field 'turn': must be a whole number >= 1, got nan"),
    ([1, -1, 3], r"request 1, field 'turn': must be a whole number >= 1, got -1"),
    ([1, 1, 2], r"request 1, field 'turn': turn 1 of session 1 repeats request 0"),
    ([2, 1, 3], r"request 0, field 'turn': turn 2 of session 1 arrives before its turn 1"),
])
def test_turns_are_checked_at_from_requests(turn, match):
    with pytest.raises(WorkloadError, match=match):
        sessions([1, 1, 1], turn)


@pytest.mark.parametrize(("sid", "turn"), [
    ([1, 1, 2], None), (["a", "b", "a"], [1, 1, 2]), ([1.5, 2, 1.5], None),
    (["None", "NA", "a,b"], None), (['q"x', "q'x", "é"], None),
])
def test_valid_sessions_round_trip_through_csv(sid, turn):
    wl = sessions(sid, turn)
    buf = io.StringIO()
    wl.to_csv(buf)
    buf.seek(0)
    assert Workload.from_csv(buf, block_size=BS) == wl


def test_closed_loop_refuses_missing_session_ids_in_a_hand_built_frame():
    base = small()
    frame = base.frame.assign(session_id=[None, None, "a"])
    wl = Workload(frame, base.hash_ids, base.offsets, block_size=BS, has_hash_ids=False)
    with pytest.raises(ValueError, match=r"closed_loop: request 0 has no session_id"):
        Simulator(kv_tokens=4096, cost_model=COST).run(wl, closed_loop=True, progress=False)


# ------------------------------------------------------------------ class 4


def like() -> Workload:
    return Workload.from_requests([0, 5, 9], [4, 8, 4], [1, 1, 1],
                                  [[1, 2], [1, 2, 3, 4], [1, 9]], block_size=2)


@pytest.mark.parametrize(("kw", "match"), [
    ({"prompt_scale": float("inf")}, r"prompt_scale must be a finite number > 0, got inf"),
    ({"prompt_scale": float("nan")}, r"prompt_scale must be a finite number > 0, got nan"),
    ({"prompt_scale": True}, r"prompt_scale must be a finite number > 0, got True"),
    ({"num_sessions_scale": float("inf")}, r"num_sessions_scale must be a finite number > 0"),
    ({"rate": float("nan")}, r"rate must be a finite number > 0, got nan"),
    ({"rate": 1e-300}, r"rate=1e-300 spreads 6 requests over 6e\+303 ms, beyond the 2\*\*43"),
    ({"seed": -1}, r"seed must be an integer >= 0 and < 2\*\*64, got -1"),
    ({"seed": None}, r"seed must be an integer >= 0 and < 2\*\*64, got None"),
    ({"seed": "3"}, r"seed must be an integer >= 0 and < 2\*\*64, got '3'"),
    ({"seed": 2**64}, r"seed must be an integer >= 0 and < 2\*\*64"),
    ({"seed": 1.0}, r"seed must be an integer"),
])
def test_synthesize_parameters_get_one_clear_error(kw, match):
    with pytest.raises(ValueError, match=match):
        Workload.synthesize(like(), 6, **kw)


def test_synthesize_counts_are_bounded():
    with pytest.raises(ValueError, match=r"num_requests must be an integer >= 1 and <= 268435456"):
        Workload.synthesize(like(), 10**12)
    # 3 requests in the trace x 1e12 = 3e12 requests
    with pytest.raises(ValueError, match=r"num_sessions_scale=1000000000000.0 draws about 3e\+12"):
        Workload.synthesize(like(), num_sessions_scale=1e12)
    # the largest seed is fine
    assert len(Workload.synthesize(like(), 6, seed=2**64 - 1)) == 6


def test_a_huge_prompt_scale_is_refused_before_allocating():
    # the trace's longest request has 4 blocks: with any of them private, the bound is
    # at least 6 x 1e9 ids > 2**28 (and at most 6 x 4 x 1e9); it is refused while
    # nothing of that size exists (the peak stays under 20 MiB)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"prompt_scale: 6 requests at prompt_scale="
                                             r"1000000000.0 may need up to .* hash ids"):
            Workload.synthesize(like(), 6, prompt_scale=1e9)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20
    with pytest.raises(ValueError, match=r"prompt_scale: 6 requests at prompt_scale=1e\+300"):
        Workload.synthesize(like(), 6, prompt_scale=1e300)


def test_a_prompt_scale_within_the_limits_scales_private_blocks():
    # scale 3: every private block is copied 3 times; the shared head stays once
    a = Workload.synthesize(like(), 6, seed=1)
    b = Workload.synthesize(like(), 6, seed=1, prompt_scale=3.0)
    assert len(b) == 6 and (b.input_len >= a.input_len).all()
    assert (b.input_len <= 3 * a.input_len).all()


@pytest.mark.parametrize("seed", [-1, "3", None, True])
def test_generator_and_simulator_seeds_follow_the_same_rule(seed):
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0 and < 2\*\*64"):
        Workload.from_synthetic(5, rate=1.0, seed=seed)
    if seed is None:  # (None is fresh randomness for the simulator)
        Simulator(2, routing="random", kv_tokens=4096, cost_model=COST, seed=None).run(
            small(), progress=False)
        return
    with pytest.raises(ValueError, match=r"seed must be None or an integer >= 0 and < 2\*\*64"):
        Simulator(2, routing="random", kv_tokens=4096, cost_model=COST, seed=seed).run(
            small(), progress=False)


def test_limits_are_the_readme_numbers():
    assert MAX_TIME_MS == 2.0**43 and MAX_FRAME_MS == 2.0**44
    assert math.isclose(MAX_TIME_MS / 1000 / 86400 / 365.25, 278.7, rel_tol=1e-3)
    assert ism.Tier("t", 1, read_gbps=1e-9, write_gbps=1e-9).read_gbps == 1e-9
