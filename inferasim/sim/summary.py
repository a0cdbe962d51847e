"""The headline metrics of a run: :func:`summarize` (:meth:`SimResult.summary`).

The metrics and their order are the same for every run,
:data:`SUMMARY_METRICS`; a metric that does not apply (no SLO given, no KV
tiers, an aggregated fleet, an open loop) is NaN and left out of the display.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from inferasim._validate import slo_ms

__all__ = ["SUMMARY_METRICS", "summarize", "rejection_reasons", "rejection_note", "reasons_text"]

#: What a summary of a workload without hash ids says instead of cache numbers.
NO_HASH_IDS_NOTE = (
    "no hash ids in the workload: cache hit numbers are absent (NaN), not zero; "
    "the source carries no prefix-reuse information"
)

_STATS = (("mean", None), ("p50", 50), ("p90", 90), ("p99", 99))

#: The metrics of :meth:`SimResult.summary`, in order: the same for every run
#: (NaN where a metric does not apply: no SLO given, no KV tiers, an aggregated
#: fleet, an open loop).
SUMMARY_METRICS: tuple[str, ...] = (
    "requests",
    "finished",
    "rejected",
    "duration_ms",
    "throughput_rps",
    "output_tok_s",
    "block_hit_ratio",
    "token_hit_ratio",
    "hbm_token_hit_ratio",
    "tier_token_hit_ratio",
    "load_ms_mean",
    *(f"{m}_{q}" for m in ("queue_ms", "ttft_ms", "tpot_ms", "e2e_ms") for q, _ in _STATS),
    "preemptions",
    "evictions",
    "max_replica_share",
    "goodput_rps",
    "slo_attainment",
    "saturated",
    "arrival_shift_ms_mean",
    "sessions",
    "session_ms_mean",
    "session_ms_p50",
    "session_ms_p99",
    "prefill_busy_fraction",
    "decode_busy_fraction",
    "prefill_peak_kv_usage",
    "decode_peak_kv_usage",
    *(f"{m}_{q}" for m in ("prefill_queue_ms", "handoff_wait_ms", "transfer_ms",
                           "decode_queue_ms") for q in ("mean", "p99")),
)


def summarize(result: Any, slo_ttft_ms: float | None, slo_tpot_ms: float | None) -> pd.Series:
    """The :meth:`SimResult.summary` of ``result`` (see there).

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_requests([0, 50], [32, 32], [3, 3], block_size=16)
    >>> res = ism.Simulator(kv_tokens=160, cost_model=ism.LinearCostModel()).run(
    ...     wl, progress=False)
    >>> list(summarize(res, None, None).index) == list(SUMMARY_METRICS)
    True

    A workload without hash ids has no cache numbers (NaN, with a note), not zeros:

    >>> s = summarize(ism.Simulator(kv_tokens=160, cost_model=ism.LinearCostModel()).run(
    ...     ism.Workload.from_requests([0], [32], [3], block_size=16), progress=False), None, None)
    >>> float(s["token_hit_ratio"]), NO_HASH_IDS_NOTE in s.notes
    (nan, True)
    """
    from inferasim._format import Summary

    slo_ttft_ms = slo_ms(slo_ttft_ms, "slo_ttft_ms")
    slo_tpot_ms = slo_ms(slo_tpot_ms, "slo_tpot_ms")
    req = result.requests
    fin = req[req["status"] == "finished"]
    out = _volume(req, fin, int(result.config.get("block_size", 1)))
    out.update(_latencies(fin, ("queue_ms", "ttft_ms", "tpot_ms", "e2e_ms")))
    out.update(_by_tier(req, fin, out["token_hit_ratio"]))
    reps = result.replicas
    out["preemptions"] = int(reps["preemptions"].sum())
    out["evictions"] = int(reps["evictions"].sum())
    out["max_replica_share"] = float(reps["share"].max()) if len(reps) else 0.0
    notes = [_goodput(out, req, fin, slo_ttft_ms, slo_tpot_ms)]
    rejected = rejection_note(req)
    if rejected is not None:
        notes.insert(0, rejected)
    out["saturated"] = float(_saturated(fin))
    if "arrival_shift_ms" in req.columns:  # closed loop: whole sessions
        out.update(_sessions(req))
    if "decode_replica" in req.columns:  # disaggregated: the two pools apart
        out.update(_pools(reps, fin))
    if result.config.get("has_hash_ids") is False:  # no content ids: no cache numbers at all
        for k in ("block_hit_ratio", "token_hit_ratio", "hbm_token_hit_ratio", "tier_token_hit_ratio"):
            out[k] = float("nan")
        notes.append(NO_HASH_IDS_NOTE)
    inapplicable = [k for k in SUMMARY_METRICS if k not in out]
    values = {k: out.get(k, float("nan")) for k in SUMMARY_METRICS}
    return Summary(
        values, dtype=np.float64, name="summary", title=result._header(), notes=notes,
        inapplicable=inapplicable,
    )


_TOO_LONG = re.compile(r"needs \d+ KV blocks for \d+ \+ \d+ tokens; a replica holds (\d+)")


def _reason_kind(reason: object) -> str:
    """The kind of a rejection reason, without the request's own numbers."""
    text = str(reason)
    m = _TOO_LONG.fullmatch(text)
    if m:
        return f"prompt + output longer than a replica's KV memory of {int(m.group(1)):,} blocks"
    if text == "input_len is 0":
        return "empty prompt"
    return text


def rejection_reasons(requests: pd.DataFrame) -> pd.Series:
    """Rejected requests counted by kind of reason, most frequent first.

    A reason that carries the request's own sizes (``needs 35 KV blocks for
    17636 + 9 tokens; a replica holds 19``) is counted under its kind (more
    KV blocks than a replica holds); other reasons as they are.

    Parameters
    ----------
    requests : DataFrame
        :attr:`SimResult.requests` (``status`` and ``reason``).

    Returns
    -------
    pandas.Series
        ``int64`` counts indexed by reason; empty when nothing was rejected.

    Examples
    --------
    >>> req = pd.DataFrame({"status": ["rejected", "rejected", "finished", "rejected"],
    ...                     "reason": ["needs 7 KV blocks for 100 + 8 tokens; a replica holds 5",
    ...                                "needs 9 KV blocks for 130 + 8 tokens; a replica holds 5",
    ...                                None, "input_len is 0"]})
    >>> rejection_reasons(req).to_dict()
    {"prompt + output longer than a replica's KV memory of 5 blocks": 2, 'empty prompt': 1}
    """
    rejected = requests.loc[requests["status"] == "rejected", "reason"]
    counts = rejected.map(_reason_kind).value_counts(sort=True)
    return counts.astype(np.int64).rename("rejected").rename_axis("reason")


def rejection_note(requests: pd.DataFrame) -> str | None:
    """One sentence on how many requests were rejected and why, or None when none was.

    Every latency figure of a run covers its finished requests only: this is
    the sentence that says how many are missing from them.

    Examples
    --------
    >>> req = pd.DataFrame({"status": ["rejected", "finished", "finished"],
    ...                     "reason": ["needs 7 KV blocks for 100 + 8 tokens; a replica holds 5",
    ...                                None, None]})
    >>> rejection_note(req)
    "1 of 3 requests rejected (prompt + output longer than a replica's KV memory of 5 blocks); latencies cover the 2 finished requests only"
    >>> rejection_note(req.iloc[1:]) is None
    True
    """
    reasons = rejection_reasons(requests)
    if reasons.empty:
        return None
    n = int(reasons.sum())
    finished = int((requests["status"] == "finished").sum())
    return (
        f"{n:,} of {len(requests):,} requests rejected ({reasons_text(reasons)}); latencies "
        f"cover the {finished:,} finished requests only"
    )


def reasons_text(reasons: pd.Series) -> str:
    """:func:`rejection_reasons` in words: the reason alone, or each with its count.

    Examples
    --------
    >>> reasons_text(pd.Series({"empty prompt": 3}))
    'empty prompt'
    >>> reasons_text(pd.Series({"empty prompt": 3, "rejected by admission": 1}))
    '3 empty prompt; 1 rejected by admission'
    """
    if len(reasons) == 1:
        return str(reasons.index[0])
    return "; ".join(f"{int(k):,} {r}" for r, k in reasons.items())


def _volume(req: pd.DataFrame, fin: pd.DataFrame, bs: int) -> dict[str, Any]:
    """Requests, duration, throughput and the fleet's hit ratios."""
    routed = req[req["replica"] >= 0]
    n = len(req)
    t0 = float(req["arrival_ms"].min()) if n else 0.0
    t1 = float(fin["finish_ms"].max()) if len(fin) else t0
    dur_s = (t1 - t0) / 1000.0
    pblocks = float((-(-routed["input_len"] // bs)).sum())
    itok = float(routed["input_len"].sum())
    return {
        "requests": n,
        "finished": len(fin),
        "rejected": int((req["status"] == "rejected").sum()),
        "duration_ms": dur_s * 1000.0,
        "throughput_rps": len(fin) / dur_s if dur_s > 0 else float("nan"),
        "output_tok_s": float(fin["output_len"].sum()) / dur_s if dur_s > 0 else float("nan"),
        "block_hit_ratio": float(routed["cached_blocks"].sum()) / pblocks
        if pblocks
        else float("nan"),
        "token_hit_ratio": float(routed["cached_tokens"].sum()) / itok
        if itok
        else float("nan"),
    }


def _latencies(fin: pd.DataFrame, metrics: tuple[str, ...]) -> dict[str, float]:
    """Mean and percentiles of each latency column over the finished requests."""
    out: dict[str, float] = {}
    for metric in metrics:
        v = fin[metric].dropna().to_numpy()
        for name, q in _STATS:
            if not v.size:
                out[f"{metric}_{name}"] = float("nan")
            elif q is None:
                out[f"{metric}_{name}"] = float(v.mean())
            else:
                out[f"{metric}_{name}"] = float(np.percentile(v, q))
    return out


def _by_tier(req: pd.DataFrame, fin: pd.DataFrame, token_hit_ratio: float) -> dict[str, float]:
    """Hits from HBM and from the lower tiers, and the load wait (with tiers)."""
    if "hbm_hit_tokens" not in req.columns:
        return {"hbm_token_hit_ratio": token_hit_ratio}
    routed = req[req["replica"] >= 0]
    itok = float(routed["input_len"].sum())
    hbm = float(routed["hbm_hit_tokens"].sum())
    return {
        "hbm_token_hit_ratio": hbm / itok if itok else float("nan"),
        "tier_token_hit_ratio": (float(routed["cached_tokens"].sum()) - hbm) / itok
        if itok
        else float("nan"),
        "load_ms_mean": float(fin["load_ms"].mean()) if len(fin) else float("nan"),
    }


def _goodput(
    out: dict[str, Any], req: pd.DataFrame, fin: pd.DataFrame,
    slo_ttft_ms: float | None, slo_tpot_ms: float | None,
) -> str:
    """Goodput and SLO attainment into ``out``; returns the note about the SLO."""
    if slo_ttft_ms is None and slo_tpot_ms is None:
        return "no SLO given: pass slo_ttft_ms= or slo_tpot_ms= for goodput"
    good = np.ones(len(fin), dtype=bool)
    slo = []
    if slo_ttft_ms is not None:
        good &= fin["ttft_ms"].to_numpy() <= slo_ttft_ms
        slo.append(f"TTFT <= {slo_ttft_ms:g} ms")
    if slo_tpot_ms is not None:
        tp = fin["tpot_ms"].to_numpy()
        good &= np.isnan(tp) | (tp <= slo_tpot_ms)
        slo.append(f"TPOT <= {slo_tpot_ms:g} ms")
    dur_s = out["duration_ms"] / 1000.0
    n = len(req)
    out["goodput_rps"] = int(good.sum()) / dur_s if dur_s > 0 else float("nan")
    out["slo_attainment"] = int(good.sum()) / n if n else float("nan")
    return "SLO: " + " and ".join(slo)


def _sessions(req: pd.DataFrame) -> dict[str, float]:
    """Closed loop: the arrival shift and the span of whole sessions."""
    n = len(req)
    out: dict[str, float] = {
        "arrival_shift_ms_mean": float(req["arrival_shift_ms"].mean()) if n else 0.0
    }
    g = req.groupby("session_id", sort=False)
    done = g["status"].agg(lambda s: bool((s == "finished").all()))
    span = (g["finish_ms"].max() - g["arrival_ms"].min())[done].to_numpy()
    out["sessions"] = int(len(done))
    for name, q in (("mean", None), ("p50", 50), ("p99", 99)):
        key = f"session_ms_{name}"
        if not span.size:
            out[key] = float("nan")
        else:
            out[key] = float(span.mean() if q is None else np.percentile(span, q))
    return out


def _pools(reps: pd.DataFrame, fin: pd.DataFrame) -> dict[str, float]:
    """Disaggregated: the prefill and decode pools apart, and the handoff's phases."""
    out: dict[str, float] = {}
    for role in ("prefill", "decode"):
        busy = reps.loc[reps["role"] == role, "busy_fraction"]
        out[f"{role}_busy_fraction"] = float(busy.mean()) if len(busy) else float("nan")
        kv = reps.loc[reps["role"] == role]
        out[f"{role}_peak_kv_usage"] = (
            float((kv["peak_kv_tokens"] / kv["kv_capacity_tokens"]).max())
            if len(kv)
            else float("nan")
        )
    for metric in ("prefill_queue_ms", "handoff_wait_ms", "transfer_ms", "decode_queue_ms"):
        v = fin[metric].dropna().to_numpy()
        out[f"{metric}_mean"] = float(v.mean()) if v.size else float("nan")
        out[f"{metric}_p99"] = float(np.percentile(v, 99)) if v.size else float("nan")
    return out


def _saturated(fin: pd.DataFrame) -> bool:
    """Queueing delay growing with arrival time (see :meth:`SimResult.summary`)."""
    if len(fin) < 8:
        return False
    f = fin.sort_values("arrival_ms")
    q = len(f) // 4
    first, last = f.iloc[:q], f.iloc[-q:]
    gap = float(last["arrival_ms"].mean() - first["arrival_ms"].mean())
    growth = float(last["queue_ms"].mean() - first["queue_ms"].mean())
    return bool(gap > 0 and growth > 0.1 * gap and last["queue_ms"].mean() > 100.0)
