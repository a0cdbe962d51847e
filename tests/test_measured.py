"""Measured runs in: AIPerf and vLLM benchmark readers, compare(), the plot, and to_mooncake for AIPerf.

The measured files are written here in the tools' formats (AIPerf 0.1.1's
``profile_export.jsonl``, vLLM's ``--save-detailed`` result JSON; see
:mod:`inferasim.sim.measured` for the source each field was read from),
from a simulated run: read back, they must compare with zero error, and a
copy perturbed by a known amount must report exactly that error.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from helpers import runner

import inferasim as ism
from inferasim import Workload, WorkloadError
from inferasim.sim import LinearCostModel

EPOCH_NS = 1_759_813_207_532_900_363  # an AIPerf request_start_ns (time.time_ns())


@pytest.fixture(scope="module")
def result():
    wl = Workload.from_synthetic(60, rate=20.0, input_len=600, output_len=12, range_ratio=0.5,
                                 num_prefixes=4, prefix_len=256, block_size=16, seed=3)
    return runner(cost_model=LinearCostModel(), kv_blocks=400)(wl)


def aiperf_lines(req: pd.DataFrame, *, ttft_add: float = 0.0, e2e_mul: float = 1.0) -> str:
    """AIPerf records (MetricRecordInfo) of a request frame, values in display units (ms, tokens)."""
    out = []
    for i, r in enumerate(req.itertuples()):
        metrics = {
            "input_sequence_length": {"value": int(r.input_len), "unit": "tokens"},
            "time_to_first_token": {"value": r.ttft_ms + ttft_add, "unit": "ms"},
            "request_latency": {"value": r.e2e_ms * e2e_mul, "unit": "ms"},
            "output_sequence_length": {"value": int(r.output_len), "unit": "tokens"},
        }
        if r.output_len > 1:  # AIPerf writes no ITL for a single output token
            metrics["inter_token_latency"] = {"value": r.tpot_ms, "unit": "ms"}
        start = EPOCH_NS + int(round(r.arrival_ms * 1e6))
        out.append(json.dumps({
            "metadata": {
                "session_num": i, "x_request_id": f"req-{i}", "x_correlation_id": f"c-{i}",
                "conversation_id": f"conv-{i}", "turn_index": 0, "request_start_ns": start,
                "request_ack_ns": None, "request_end_ns": start + int(r.e2e_ms * 1e6),
                "worker_id": "worker_1", "record_processor_id": "rp_1",
                "benchmark_phase": "profiling", "was_cancelled": False, "cancellation_time_ns": None,
            },
            "metrics": metrics,
            "error": None,
        }))
    return "\n".join(out) + "\n"


def test_aiperf_round_trip_of_a_simulated_run_has_zero_error(result):
    req = result.requests
    measured = ism.read_aiperf(io.StringIO(aiperf_lines(req)))
    assert len(measured) == len(req) and measured["status"].eq("finished").all()
    assert measured["arrival_ms"].to_numpy() == pytest.approx(req["arrival_ms"].to_numpy(), abs=1e-6)
    cmp = ism.compare(measured, result)
    assert cmp.attrs["matched"] == "arrival_order"
    assert set(cmp["metric"]) == {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}
    assert set(cmp["stat"]) == {"mean", "p50", "p90", "p99", "per_request"}
    assert (cmp["error"] == 0).all() and (cmp["abs_error"] == 0).all() and (cmp["rel_error"] == 0).all()
    assert (cmp.loc[cmp["stat"] == "per_request", "n_measured"] > 0).all()


def test_a_perturbed_copy_reports_the_perturbation(result):
    req = result.requests
    measured = ism.read_aiperf(io.StringIO(aiperf_lines(req, ttft_add=7.0, e2e_mul=1.2)))
    cmp = ism.compare(measured, result).set_index(["metric", "stat"])
    # every TTFT statistic (mean, percentiles, per request) is 7 ms higher in the measurement:
    # simulated - measured = -7 (a percentile of x + c is the percentile of x plus c)
    ttft = cmp.loc["ttft_ms"]
    assert ttft["error"].to_numpy() == pytest.approx(-7.0, abs=1e-9)
    assert ttft["abs_error"].to_numpy() == pytest.approx(7.0, abs=1e-9)
    # E2E measured 1.2x: (sim - 1.2 sim) / (1.2 sim) = -1/6 for every statistic
    e2e = cmp.loc["e2e_ms"].drop(index="per_request")
    assert e2e["rel_error"].to_numpy() == pytest.approx(-1 / 6, rel=1e-12)
    assert cmp.loc[("e2e_ms", "per_request"), "rel_error"] == pytest.approx(1 / 6, rel=1e-12)
    # TPOT untouched
    assert (cmp.loc["tpot_ms", "error"] == 0).all()


def test_aiperf_failed_and_warmup_records():
    ok = {"metadata": {"x_request_id": "a", "request_start_ns": 10**18, "benchmark_phase": "profiling"},
          "metrics": {"time_to_first_token": {"value": 2500.0, "unit": "us"},
                      "request_latency": {"value": 0.25, "unit": "s"},
                      "input_sequence_length": {"value": 7, "unit": "tokens"},
                      "output_sequence_length": {"value": 3, "unit": "tokens"},
                      "inter_chunk_latency": {"value": [4.0, 9.5], "unit": "ms"}}, "error": None}
    failed = {"metadata": {"x_request_id": "b", "request_start_ns": 10**18 + 3_000_000,
                           "benchmark_phase": "profiling"},
              "metrics": {"error_isl": {"value": 550, "unit": "tokens"}},
              "error": {"code": 499, "type": "RequestCancellationError", "message": "cancelled"}}
    warm = {**ok, "metadata": {**ok["metadata"], "benchmark_phase": "warmup"}}
    text = "\n".join(json.dumps(r) for r in (warm, ok, failed)) + "\n"
    df = ism.read_aiperf(io.StringIO(text))
    assert df.index.tolist() == ["a", "b"]  # the warm-up record is not profiling
    assert df.index.name == "request_id" and "request_id" not in df.columns
    # units converted: 2500 us = 2.5 ms, 0.25 s = 250 ms; arrival in ms after the first kept one
    assert df["ttft_ms"].tolist()[0] == 2.5 and df["e2e_ms"].tolist()[0] == 250.0
    assert df["max_itl_ms"].tolist()[0] == 9.5 and np.isnan(df["tpot_ms"].tolist()[0])
    assert df["arrival_ms"].tolist() == [0.0, 3.0]
    assert df["status"].tolist() == ["finished", "failed"] and df["input_len"].tolist()[1] == 550
    assert df["reason"].tolist()[1] == "RequestCancellationError (499): cancelled"
    assert len(ism.read_aiperf(io.StringIO(text), phase=None)) == 3


def test_aiperf_bad_input_names_the_line():
    with pytest.raises(WorkloadError, match="line 2, field 'metadata.request_start_ns'"):
        ism.read_aiperf(io.StringIO('{"metadata": {"request_start_ns": 1}}\n{"metadata": {}}\n'))
    bad_unit = {"metadata": {"request_start_ns": 1},
                "metrics": {"time_to_first_token": {"value": 1, "unit": "fortnights"}}}
    with pytest.raises(WorkloadError, match="line 1, field 'metrics.time_to_first_token': unknown time unit"):
        ism.read_aiperf(io.StringIO(json.dumps(bad_unit)))


def vllm_result(req: pd.DataFrame) -> dict:
    """vLLM bench serve --save-detailed lists (seconds) of a request frame: one token a chunk."""
    return {
        "date": "20251010-120000", "backend": "vllm", "completed": len(req), "failed": 0,
        "input_lens": req["input_len"].tolist(),
        "output_lens": req["output_len"].tolist(),
        "ttfts": (req["ttft_ms"] / 1000).tolist(),
        "itls": [[t / 1000] * (n - 1) if n > 1 else []
                 for t, n in zip(req["tpot_ms"], req["output_len"], strict=True)],
        "start_times": (1000.0 + req["arrival_ms"] / 1000).tolist(),
        "generated_texts": [""] * len(req), "errors": [""] * len(req),
    }


def test_vllm_round_trip_of_a_simulated_run_has_zero_error(result):
    req = result.requests
    measured = ism.read_vllm_bench(io.StringIO(json.dumps(vllm_result(req))))
    assert measured.index.tolist() == list(range(len(req))) and measured.index.name == "request_id"
    cmp = ism.compare(measured, result)
    assert cmp.attrs["matched"] == "request_id"
    # seconds and back, and a sum of equal gaps: zero to float rounding
    assert cmp["abs_error"].max() < 1e-9
    assert measured["e2e_ms"].to_numpy() == pytest.approx(req["e2e_ms"].to_numpy(), rel=1e-12)


def test_vllm_failures_and_missing_details():
    res = {"input_lens": [5, 6], "output_lens": [2, 0], "ttfts": [0.01, 0.0], "itls": [[0.004], []],
           "errors": ["", "Traceback (most recent call last):\n  ...\naiohttp.ClientError: boom\n"]}
    df = ism.read_vllm_bench(io.StringIO(json.dumps(res)))
    # no start_times in this version's file: arrivals unknown (NaN), never invented
    assert df["arrival_ms"].isna().all()
    assert df["status"].tolist() == ["finished", "failed"]
    assert df["reason"].tolist() == [None, "aiohttp.ClientError: boom"]
    assert df["e2e_ms"].tolist()[0] == pytest.approx(14.0) and np.isnan(df["e2e_ms"].tolist()[1])
    with pytest.raises(WorkloadError, match="field 'input_lens'.*--save-detailed"):
        ism.read_vllm_bench(io.StringIO(json.dumps({"completed": 2, "mean_ttft_ms": 3.0})))
    with pytest.raises(WorkloadError, match="field 'ttfts': has 1 entries, input_lens has 2"):
        ism.read_vllm_bench(io.StringIO(json.dumps({**res, "ttfts": [0.1]})))


def test_compare_rejects_an_unknown_metric(result):
    with pytest.raises(ValueError, match="metrics: 'queue_ms' is not a column of the measured frame"):
        ism.compare(pd.DataFrame({"ttft_ms": [1.0]}), result, metrics=["queue_ms"])


def test_the_comparison_plot(result):
    cmp = ism.compare(ism.read_aiperf(io.StringIO(aiperf_lines(result.requests, ttft_add=7.0))), result)
    ax = ism.plots.measured_vs_simulated(cmp, metrics=["ttft_ms", "e2e_ms"])
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 8 and labels[0].startswith("TTFT mean (-")
    assert [ln.get_label() for ln in ax.get_lines()] == ["measured", "simulated"]


# ------------------------------------------------------------------ to_mooncake for AIPerf

#: AIPerf 0.1.1's MooncakeTrace (aiperf/dataset/loader/models.py): field -> the Python
#: types pydantic accepts for it in lax mode (an int field takes an int, or a float
#: without a fraction; a str field takes only a str). "type" is the dataset kind.
AIPERF_FIELDS = {"input_length": (int,), "output_length": (int,), "hash_ids": (list,),
                 "timestamp": (int,), "session_id": (str,), "delay": (int,), "text_input": (str,)}


def aiperf_accepts(line: str) -> bool:
    rec = json.loads(line)
    if rec.get("type", "mooncake_trace") != "mooncake_trace":
        return False
    for key, types in AIPERF_FIELDS.items():
        if key in rec and rec[key] is not None:
            v = rec[key]
            if isinstance(v, bool) or not isinstance(v, types):
                return False
            if key == "hash_ids" and not all(type(x) is int for x in v):
                return False
    return "input_length" in rec or "text_input" in rec


def test_to_mooncake_by_default_is_accepted_by_aiperfs_loader_schema():
    wl = Workload.from_requests([0, 2.4, 7], [32, 48, 20], [3, 2, 1], [[1, 2], [1, 2, 3], [9, 8]],
                                block_size=16, session_id=[5, 5, 6])
    exact = io.StringIO()
    wl.to_mooncake(exact, exact=True)
    # the exact format writes 2.4 ms and integer session ids: AIPerf's pydantic model rejects both
    assert not all(aiperf_accepts(x) for x in exact.getvalue().splitlines())
    buf = io.StringIO()
    wl.to_mooncake(buf)
    lines = buf.getvalue().splitlines()
    assert all(aiperf_accepts(x) for x in lines)
    recs = [json.loads(x) for x in lines]
    # field names and JSON types exactly as MooncakeTrace declares them (turn: an allowed extra)
    assert set(recs[0]) == {"timestamp", "input_length", "output_length", "hash_ids", "session_id", "turn"}
    assert [type(recs[0][k]) for k in ("timestamp", "input_length", "output_length", "session_id")] == [
        int, int, int, str]
    assert [r["timestamp"] for r in recs] == [0, 2, 7]  # rounded to whole ms
    assert [r["session_id"] for r in recs] == ["5", "5", "6"]
    # AIPerf orders a session's turns by file order: the file is in arrival order
    assert [r["input_length"] for r in recs if r["session_id"] == "5"] == [32, 48]
    # and this package reads the default file back with its sessions and turns
    back = Workload.from_mooncake(io.StringIO(buf.getvalue()), block_size=16)
    assert back.frame["session_id"].tolist() == ["5", "5", "6"]
    assert back.frame["turn"].tolist() == [1, 2, 1]
    assert back.arrival_ms.tolist() == [0.0, 2.0, 7.0]


def test_a_bailian_workload_goes_to_aiperf_without_its_type():
    text = "\n".join(json.dumps({"chat_id": c, "parent_chat_id": p, "timestamp": t, "input_length": 32,
                                 "output_length": 2, "type": k, "turn": u, "hash_ids": [1, 2]})
                     for c, p, t, k, u in ((1, -1, 0.0, "text", 1), (2, 1, 0.25, "image", 2)))
    wl = Workload.from_bailian(io.StringIO(text))
    buf = io.StringIO()
    wl.to_mooncake(buf)
    assert all(aiperf_accepts(x) for x in buf.getvalue().splitlines())
    assert [json.loads(x)["timestamp"] for x in buf.getvalue().splitlines()] == [0, 250]
