"""Output a person reads: describe(), summary() and the reprs of the result objects.

Values stay at full precision; only the display rounds: counts and lengths as
integers with thousands separators, ratios to 4 decimals, never scientific
notation, a unit next to each number.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import inferasim as ism
from inferasim import Workload, reuse
from inferasim._format import Summary, format_metric


def rows(text: str) -> dict[str, list[str]]:
    """Indented 'name value [unit]' lines as name -> [value, unit...]."""
    out = {}
    for line in text.splitlines():
        if line.startswith("  ") and line.split():
            name, *rest = re.split(r"\s{2,}", line.strip())
            out[name] = rest
    return out


@pytest.fixture(scope="module")
def small() -> Workload:
    # Two requests 1,000 ms apart; ids [1, 2] then [1, 3]: the second reuses block 1.
    return Workload.from_requests([0, 1000], [1024, 600], [10, 31], [[1, 2], [1, 3]])


def test_describe_values_are_full_precision_floats(small):
    d = small.describe()
    assert isinstance(d, pd.Series) and d.dtype == np.float64
    assert d["input_mean"] == 812.0  # (1024 + 600) / 2
    assert d["output_mean"] == 20.5  # (10 + 31) / 2: not rounded in the value
    # block 1 of request 2 is the one hit of 4 blocks; 512 of 1624 prompt tokens
    assert d["infinite_block_hit_ratio"] == 0.25
    assert d["infinite_token_hit_ratio"] == 512 / 1624
    doubled = d * 2  # arithmetic gives a plain Series with full values
    assert type(doubled) is pd.Series and doubled["infinite_token_hit_ratio"] == 1024 / 1624


def test_describe_displays_integers_ratios_and_units(small):
    text = repr(small.describe())
    assert text.splitlines()[0] == "Workload: 2 requests, block_size=512"
    r = rows(text)
    assert r["requests"] == ["2"]
    assert r["duration_ms"] == ["1.0 s"]  # a run's span in the unit people read (issue 24)
    assert r["offered_rate_rps"] == ["2", "req/s"]  # 2 requests over 1 s
    assert r["input_mean"] == ["812", "tokens"] and r["input_max"] == ["1,024", "tokens"]
    assert r["output_p99"] == ["31", "tokens"]  # 30.79 shown as a whole token count
    assert r["blocks_total"] == ["4", "blocks"]
    assert r["inconsistent_blocks"] == ["0", "requests"]
    assert r["infinite_block_hit_ratio"] == ["0.2500"]
    assert r["infinite_token_hit_ratio"] == ["0.3153"]  # 512 / 1624 = 0.31527
    html = small.describe()._repr_html_()
    assert "0.3153" in html and "1,024" in html and "tokens" in html


def test_no_scientific_notation_on_a_large_or_tiny_workload():
    wl = Workload.from_synthetic(3000, 1e-3, input_len=100_000, output_len=4, seed=0)
    text = repr(wl.describe())
    assert not re.search(r"\de[+-]\d", text), text
    r = rows(text)
    # 3,000 requests at 0.001 req/s span about 3e9 ms: some 830 hours, in hours
    assert re.fullmatch(r"\d{3}\.\d h", r["duration_ms"][0]), r["duration_ms"]
    assert format_metric("offered_rate_rps", 0.000012346) == "0.00001235"


def test_workload_repr_is_a_header_key_numbers_and_a_short_preview():
    wl = Workload.from_synthetic(10_000, 50.0, input_len=512, output_len=8, num_prefixes=4,
                                 prefix_len=1024, seed=0)
    text = repr(wl)
    lines = text.splitlines()
    assert lines[0] == "Workload from synthetic: 10,000 requests, block_size=512"
    r = rows(text)
    assert r["offered rate"][1] == "req/s" and r["input mean / max"][1] == "tokens"
    assert len(lines) < 20  # not the frame dumped whole
    html = wl._repr_html_()
    assert "Workload from synthetic: 10,000 requests" in html and "<details>" in html


def test_summary_keeps_its_keys_and_full_precision_and_displays_rounded():
    wl = Workload.from_synthetic(300, 20.0, input_len=700, output_len=20, num_prefixes=4,
                                 prefix_len=1024, seed=2)
    res = ism.Simulator(replicas=2, kv_tokens=400 * 512, cost_model=ism.LinearCostModel()).run(
        wl, progress=False)
    s = res.summary()
    assert isinstance(s, pd.Series) and s.dtype == np.float64
    fin = res.requests[res.requests["status"] == "finished"]
    # full precision: exactly the numbers of the request frame
    assert s["ttft_ms_mean"] == fin["ttft_ms"].mean()
    assert s["requests"] == 300.0 and s["saturated"] in (0.0, 1.0)
    # without an SLO goodput and attainment are NaN, and not displayed
    assert np.isnan(s["goodput_rps"]) and np.isnan(s["slo_attainment"])
    text = repr(s)
    assert "goodput_rps" not in text and "slo_attainment" not in text
    assert "no SLO given" in text and "no SLO given" in s._repr_html_()
    r = rows(text)
    assert r["requests"] == ["300"]
    assert r["token_hit_ratio"][0] == f"{s['token_hit_ratio']:.4f}"
    assert r["ttft_ms_mean"][1] == "ms" and r["saturated"][0] in ("yes", "no")
    # every shown number has at most 4 significant digits past the integer part
    for name, (value, *_) in r.items():
        if re.fullmatch(r"[\d,]+\.\d+", value) and "ratio" not in name and "share" not in name:
            assert len(value.replace(",", "").replace(".", "").lstrip("0")) <= 4, (name, value)
    # selections and arithmetic are plain Series of the same floats
    part = s[["ttft_ms_p50", "token_hit_ratio"]]
    assert type(part) is pd.Series and part.tolist() == [s["ttft_ms_p50"], s["token_hit_ratio"]]
    assert (s / s)["requests"] == 1.0


def test_summary_with_an_slo_adds_goodput_and_attainment():
    # Two requests alone on one replica: TTFT 6.6 ms each (LinearCostModel, see
    # SimResult's example); an SLO of 10 ms is met by both, 5 ms by none.
    wl = Workload.from_requests([0, 50], [32, 32], [3, 3], block_size=16)
    res = ism.Simulator(kv_tokens=10 * 16, cost_model=ism.LinearCostModel()).run(wl, progress=False)
    met = res.summary(slo_ttft_ms=10)
    assert met["slo_attainment"] == 1.0
    assert met["goodput_rps"] == met["throughput_rps"]
    assert "SLO: TTFT <= 10 ms" in repr(met) and "no SLO" not in repr(met)
    assert res.summary(slo_ttft_ms=5)["slo_attainment"] == 0.0


def test_simresult_repr_is_a_header_and_key_numbers():
    wl = Workload.from_requests([0, 50], [32, 32], [3, 3], block_size=16)
    res = ism.Simulator(kv_tokens=10 * 16, cost_model=ism.LinearCostModel()).run(wl, progress=False)
    text = repr(res)
    assert text.splitlines()[0].startswith("SimResult: 2 requests (2 finished) on 1 replica,")
    r = rows(text)
    assert r["ttft_ms_p50"] == ["6.6", "ms"]
    assert len(text.splitlines()) < 15
    assert "SimResult: 2 requests" in res._repr_html_()


def test_describe_and_summary_give_the_span_under_one_name_and_unit():
    # Requests at 0 and 50 ms, 32-token prompts, 3 output tokens, alone on one
    # replica: the second finishes at 50 + 6.6 (TTFT) + 2 decode steps; whatever
    # that time is, both spans are in ms under the one name ``duration_ms``.
    wl = Workload.from_requests([0, 50], [32, 32], [3, 3], block_size=16)
    res = ism.Simulator(kv_tokens=10 * 16, cost_model=ism.LinearCostModel()).run(wl, progress=False)
    s, d = res.summary(), wl.describe()
    assert "duration_s" not in s.index and d["duration_ms"] == 50.0
    assert s["duration_ms"] == res.requests["finish_ms"].max() - 0.0
    assert s["throughput_rps"] == 2 / (s["duration_ms"] / 1000)
    assert rows(repr(s))["duration_ms"][0].endswith(" ms")


def test_reuse_results_show_a_header_and_key_numbers(small):
    c = reuse.infinite_hit_ratio(small)
    text = repr(c)
    assert text.splitlines()[0] == (
        "ReuseCeiling: an infinite prefix cache serves 31.53% of prompt tokens"
    )
    r = rows(text)
    assert r["hit_tokens"] == ["512", "tokens"] and r["tokens"] == ["1,624", "tokens"]
    assert r["block_hit_ratio"] == ["0.2500"]
    assert "request_id" not in text  # the per-request frame is named, not dumped
    assert "ReuseCeiling" in c._repr_html_()

    wl = Workload.from_requests([0, 1, 2], [3, 3, 1], [1] * 3, [[1, 2, 3], [1, 2, 4], [5]],
                                block_size=1)
    p = repr(reuse.popularity(wl))
    # ids 1,2 in two requests; 3,4,5 in one: 5 distinct, 2 shared
    assert p.splitlines()[0] == "Popularity: 5 distinct blocks, 2 shared by 2+ requests"
    assert rows(p)["max_requests_per_block"] == ["2", "requests"]
    t = reuse.prefix_tree(wl)
    # radix nodes: [1,2] (shared), [3], [4], [5]: 4 nodes, 3 leaves
    assert repr(t).splitlines()[0] == "PrefixTree: 4 radix nodes, 3 leaves"
    assert isinstance(t.summary(), Summary) and t.summary()["nodes"] == 4.0
    s = reuse.sessions(Workload.from_requests([0, 5], [4, 7], [1, 1], [[1, 2], [1, 2, 3, 4]],
                                              block_size=2))
    assert repr(s).splitlines()[0] == "Sessions: 1 chains over 2 requests"
    assert rows(repr(s))["max_turns"] == ["2"]


# ------------------------------------------------ issue 24 item 9: no column repeats the index
def _repeats_the_index(frame: pd.DataFrame) -> list[str]:
    """Columns whose values are the index's, row for row."""
    idx = frame.index.to_numpy()
    return [c for c in frame.columns
            if len(frame) and frame[c].dtype.kind in "iu" and np.array_equal(frame[c].to_numpy(), idx)]


@pytest.mark.parametrize("fleet", ["aggregated", "disaggregated", "closed_loop", "tiers"])
def test_request_frames_are_indexed_by_request_id_and_no_column_repeats_it(fleet):
    # before: SimResult.requests had a request_id column 0..n-1 next to an unnamed 0..n-1 index
    wl = Workload.from_requests([0, 5, 10, 15], [64] * 4, [3] * 4,
                                [[1, 2, 3, 4], [1, 2, 5, 6], [1, 7, 8, 9], [1, 2, 3, 10]],
                                block_size=16, session_id=[1, 1, 2, 2])
    cost = ism.LinearCostModel(kv_bytes_per_token=1024)
    kw = {"kv_tokens": 64 * 16, "cost_model": cost}
    run = {}
    if fleet == "disaggregated":
        kw["replicas"] = ism.sim.Disaggregated(1, 1)
    if fleet == "closed_loop":
        run = {"closed_loop": True}
    if fleet == "tiers":
        kw["tiers"] = [ism.Tier("dram", 1 << 16, read_gbps=10.0, write_gbps=10.0)]
    req = ism.Simulator(**kw).run(wl, progress=False, **run).requests
    assert req.index.name == "request_id" and req.index.tolist() == [0, 1, 2, 3]
    assert "request_id" not in req.columns
    assert _repeats_the_index(req) == []
    # the workload's own frame follows the same rule
    assert wl.frame.index.name == "request_id" and _repeats_the_index(wl.frame) == []
    if fleet == "closed_loop":  # the session columns still lead
        assert list(req.columns[:2]) == ["session_id", "turn"]
