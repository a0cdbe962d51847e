"""Calibration of the cost models to measured step times (issue 13 part 4)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from inferasim.sim.calibrate import LLAMA31_8B_H100_VLLM, measurements_frame, step_arguments
from inferasim.sim.cost import LinearCostModel, prefill_attention_pairs
from inferasim.sim.presets import CALIBRATIONS, GPUS
from inferasim.sim.roofline import RooflineCostModel

H100_BF16 = 989.4e12
H100_BW = 3.35e12
LLAMA8B_WEIGHT_BYTES = 2 * 8_030_261_248


def points_from(model, prefill=(512, 2048, 8192, 32768), decode=((1, 512), (32, 3500), (128, 3500))):
    rows = [
        {"kind": "prefill", "tokens": t, "ms": model.step_time_ms(t, prefill_attention_pairs(t, 0), 0, 0)}
        for t in prefill
    ]
    rows += [
        {"kind": "decode", "batch": b, "context": x, "ms": model.step_time_ms(0, 0, b, b * x)}
        for b, x in decode
    ]
    return rows


# ------------------------------------------------------------------ roofline


def test_calibrate_recovers_known_efficiencies():
    # measurements made by a model with chosen efficiencies: the fit must find them
    truth = RooflineCostModel(
        mfu=0.6, mbu=0.7, overhead_ms=1.0, attention_efficiency=0.5, calibration="v0.1"
    )
    start = RooflineCostModel(calibration="v0.1")
    fit = start.calibrate(points_from(truth), attention=True)
    assert fit.params == pytest.approx(
        {"mfu": 0.6, "mbu": 0.7, "overhead_ms": 1.0, "attention_efficiency": 0.5}, rel=1e-5
    )
    assert fit.rms_rel_error < 1e-6
    model, report = fit  # unpacks
    assert model.mfu == pytest.approx(0.6, rel=1e-5) and model.calibration == "v0.1"
    assert list(report.columns) == [
        "kind", "tokens", "batch", "context", "measured_ms", "predicted_ms", "error_ms",
        "rel_error", "before_ms", "before_rel_error",
    ]
    # the "before" column is the starting model's own prediction
    p, a, d, c = step_arguments(measurements_frame(points_from(truth)))
    np.testing.assert_allclose(report["before_ms"], start.step_time_ms(p, a, d, c), rtol=1e-12)


def test_calibrate_only_the_named_parameters():
    truth = RooflineCostModel(mbu=0.6, calibration="v0.1")  # mfu 0.45, overhead 0.5
    fit = RooflineCostModel(calibration="v0.1").calibrate(
        [r for r in points_from(truth) if r["kind"] == "decode"], parameters=["mbu"]
    )
    assert list(fit.params) == ["mbu"]
    assert fit.params["mbu"] == pytest.approx(0.6, rel=1e-6)
    assert fit.model.mfu == 0.45 and fit.model.overhead_ms == 0.5


def test_public_points_before_match_the_issue_and_after_within_3_percent():
    report = RooflineCostModel(calibration="v0.1").calibrate(
        LLAMA31_8B_H100_VLLM, attention=True
    ).report
    # issue 13: "the current preset gives 19 / 77 / 336 / 1816 ms, 6.5 ms and 12.0 / 29.4 ms"
    # (the 128-sequence context is not stated; at 3,500 tokens v0.1 gives 28.4)
    before = report["before_ms"].to_numpy()
    np.testing.assert_allclose(before[:6], [19, 77, 336, 1816, 6.5, 12.0], rtol=0.015)
    assert before[6] == pytest.approx(28.4, abs=0.05)
    assert (report["before_rel_error"].iloc[:4] > 0.55).all()  # prefill 59-75% too slow
    assert report["rel_error"].abs().max() < 0.03


def test_v02_preset_is_the_fit_of_the_public_points():
    fit = RooflineCostModel(calibration="v0.1").calibrate(LLAMA31_8B_H100_VLLM, attention=True)
    v02 = CALIBRATIONS["v0.2"]
    stored = {
        "mfu": v02.mfu,
        "mbu": v02.mbu,
        "overhead_ms": v02.overhead_ms,
        "attention_efficiency": v02.attention_efficiency,
    }
    assert fit.params == pytest.approx(stored, abs=2e-4)


def test_calibrations_by_name_and_default_per_gpu():
    old = RooflineCostModel("llama-3.1-8b", "h100-80gb", calibration="v0.1")
    # v0.1 by hand: 0.5 ms + 16,060,522,496 B at 0.8 * 3.35 TB/s
    assert old.step_time_ms(0, 0, 1, 0) == pytest.approx(
        0.5 + 1e3 * LLAMA8B_WEIGHT_BYTES / (H100_BW * 0.8), rel=1e-12
    )
    assert RooflineCostModel().calibration == "v0.2"
    assert RooflineCostModel(gpu="a100-80gb").calibration == "v0.1"
    assert RooflineCostModel(gpu=GPUS["h100-80gb"]).calibration == "v0.2"
    explicit = RooflineCostModel(mfu=0.3)  # an explicit factor overrides the calibration's
    assert explicit.mfu == 0.3 and explicit.mbu == CALIBRATIONS["v0.2"].mbu
    with pytest.raises(ValueError, match="unknown calibration 'v3'"):
        RooflineCostModel(calibration="v3")
    with pytest.raises(ValueError, match="attention_efficiency"):
        RooflineCostModel(attention_efficiency=0)


def test_attention_efficiency_by_hand():
    m = RooflineCostModel(attention_efficiency=0.225, calibration="v0.1")  # half of mfu 0.45
    p = 8192
    pairs = p * (p + 1) // 2
    linear = 2 * 8_030_261_248 * p / (H100_BF16 * 0.45)
    attention = 4 * 32 * 32 * 128 * pairs / (H100_BF16 * 0.225)
    assert m.step_time_ms(p, pairs, 0, 0) == pytest.approx(0.5 + 1e3 * (linear + attention), rel=1e-12)


def test_bad_measurements_are_named():
    m = RooflineCostModel()
    with pytest.raises(ValueError, match="row 1: kind must be 'prefill' or 'decode'"):
        m.calibrate([{"kind": "decode", "ms": 6}, {"kind": "pre", "tokens": 5, "ms": 1}])
    with pytest.raises(ValueError, match="row 0, field 'ms'"):
        m.calibrate([{"kind": "decode", "ms": -1}])
    with pytest.raises(ValueError, match="missing column 'ms'"):
        m.calibrate([{"kind": "decode"}])
    with pytest.raises(ValueError, match="cannot fit 'gpu'"):
        m.calibrate([{"kind": "decode", "ms": 6}], parameters=["gpu"])
    with pytest.raises(ValueError, match="no rows"):
        m.calibrate([])


def test_prefill_with_batch_and_context_by_hand():
    # 2 sequences of 4 new tokens after 3 cached: P = 8, A = 2 * (4 * 3 + 4 * 5 / 2) = 44
    df = measurements_frame([{"kind": "prefill", "tokens": 4, "batch": 2, "context": 3, "ms": 1.0}])
    p, a, d, c = step_arguments(df)
    assert (p[0], a[0], d[0], c[0]) == (8.0, 44.0, 0.0, 0.0)


# ------------------------------------------------------------------ KV fit warning


def test_warns_once_when_a_sequence_kv_cannot_fit():
    m = RooflineCostModel()
    # (80e9 * 0.9 - 16,060,522,496 - 2e9) / 131,072 B = 411,525.65 tokens of KV fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.step_time_ms(0, 0, 1, 411_525)  # one sequence that fits
        # 128 x 3,500 = 448,000 context tokens: may fit through shared prefixes
        m.step_time_ms(0, 0, 128, 448_000)
        m.step_time_ms(1_000, prefill_attention_pairs(1_000, 410_000), 0, 0)  # 411,000 fit
    with pytest.warns(UserWarning, match="at least 411,526 tokens of KV") as record:
        m.step_time_ms(0, 0, 1, 411_526)  # one sequence longer than the budget
        m.step_time_ms(0, 0, np.array([2]), np.array([900_000]))
        m.step_time_ms(300_000, 0, 1, 200_000)
    assert len([w for w in record if "KV" in str(w.message)]) == 1  # once per model
    # prefill: 2,000 new tokens after 410,000 cached = 412,000 (A / P - (P + 1) / 2 = 410,000)
    fresh = RooflineCostModel()
    with pytest.warns(UserWarning, match="at least 412,000 tokens"):
        fresh.step_time_ms(2_000, prefill_attention_pairs(2_000, 410_000), 0, 0)
    # the engine's decode runs (the compiled kernel) check too: one step of 2
    # sequences with 1,000,000 tokens of context, 500,000 a sequence
    jump = RooflineCostModel()
    with pytest.warns(UserWarning, match="at least 500,000 tokens"):
        jump.kernel().run([], 0.0, 2, 1_000_000, 1)
    # and its steps: the prefill above, priced by the kernel
    with pytest.warns(UserWarning, match="at least 412,000 tokens"):
        RooflineCostModel().kernel().step(2_000, int(prefill_attention_pairs(2_000, 410_000)), 0, 0)


# ------------------------------------------------------------------ linear


def test_linear_fit_recovers_all_five_coefficients():
    truth = LinearCostModel(
        overhead_ms=2.0, prefill_token_ms=0.01, prefill_attention_ms=1e-7,
        decode_seq_ms=0.05, decode_context_ms=1e-5,
    )
    fit = LinearCostModel.fit(points_from(truth, prefill=(256, 1024, 4096, 16384)))
    assert fit.params == pytest.approx(
        {"overhead_ms": 2.0, "prefill_token_ms": 0.01, "prefill_attention_ms": 1e-7,
         "decode_seq_ms": 0.05, "decode_context_ms": 1e-5}, rel=1e-6)
    assert fit.rms_rel_error < 1e-9


def test_linear_fit_keeps_coefficients_non_negative():
    # decode gets faster with batch: the unconstrained slope is -0.5, clamped to 0,
    # and the best constant for 3 and 2 ms in relative terms is 2.4:
    # minimise (k/3 - 1)^2 + (k/2 - 1)^2 -> k = (1/3 + 1/2) / (1/9 + 1/4) = 2.3077
    rows = [{"kind": "decode", "batch": 1, "ms": 3.0}, {"kind": "decode", "batch": 3, "ms": 2.0}]
    fit = LinearCostModel.fit(rows, parameters=["overhead_ms", "decode_seq_ms"])
    assert fit.params["decode_seq_ms"] == 0.0
    assert fit.params["overhead_ms"] == pytest.approx((1 / 3 + 1 / 2) / (1 / 9 + 1 / 4), rel=1e-9)


def test_linear_fit_on_the_public_points():
    fit = LinearCostModel.fit(LLAMA31_8B_H100_VLLM)
    roofline = RooflineCostModel(calibration="v0.1").calibrate(LLAMA31_8B_H100_VLLM, attention=True)
    # a linear model cannot bend like the roofline's max(compute, memory): it fits
    # the seven points within 20% (17% at the 512-token prefill), the roofline within 3%
    assert 0.03 < fit.report["rel_error"].abs().max() < 0.20
    assert roofline.rms_rel_error < fit.rms_rel_error
    assert all(v >= 0 for v in fit.params.values())
