"""The result frames of a run, built from its raw outputs (:mod:`inferasim.sim.engine`).

:func:`request_frame`, :func:`replica_frame`, :func:`timeline_frame` and
:func:`tier_frame` build what :class:`inferasim.sim.result.SimResult`
holds; their columns are documented there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from inferasim.sim.engine import RunOutput
from inferasim.workload import Workload

__all__: list[str] = []  # internal: the builders of SimResult's frames


def _column(a: Any, dtype: Any, n: int) -> np.ndarray:
    """A per-request output array as a numpy column (a copy)."""
    return np.frombuffer(a, dtype=dtype).copy() if n else np.zeros(0, dtype)


def request_frame(wl: Workload, run: RunOutput, config: dict[str, Any]) -> pd.DataFrame:
    """One row per request of ``wl`` (every one, in request order)."""
    out = run.out
    n = len(wl)
    f64 = np.float64

    def col(a: Any, dtype: Any) -> np.ndarray:
        return _column(a, dtype, n)

    recorded = wl.arrival_ms.astype(f64)
    arrival = recorded if run.arrival is None else run.arrival
    scheduled = col(out.scheduled, f64)
    first = col(out.first_token, f64)
    finish = col(out.finish, f64)
    out_len = wl.output_len.astype(np.int64)
    P = wl.input_len.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out_len > 1, (finish - first) / np.maximum(out_len - 1, 1), np.nan)
    max_gap = col(out.max_gap, f64)
    for rep in run.replicas:
        rid, gap = rep.rec.gap_maxima()
        np.fmax.at(max_gap, rid, gap)
    max_gap[out_len <= 1] = np.nan
    status = np.full(n, "finished", dtype=object)
    reason = np.full(n, "", dtype=object)  # finished requests: no reason (an empty cell)
    for i, why in run.reasons.items():
        status[i] = "rejected"
        reason[i] = why
    req = pd.DataFrame(
        {
            "replica": col(out.replica, np.int64),
            "arrival_ms": arrival,
            "scheduled_ms": scheduled,
            "first_token_ms": first,
            "finish_ms": finish,
            "queue_ms": scheduled - arrival,
            "ttft_ms": first - arrival,
            "tpot_ms": tpot,
            "itl_ms": tpot.copy(),
            "max_itl_ms": max_gap,
            "e2e_ms": finish - arrival,
            "input_len": P,
            "output_len": out_len,
            "cached_blocks": col(out.cached_blocks, np.int64),
            "cached_tokens": col(out.cached_tokens, np.int64),
            "computed_prefill_tokens": col(out.computed, np.int64),
            "preemptions": col(out.preemptions, np.int64),
            "status": pd.Series(status, dtype=object),
            "reason": pd.Series(reason, dtype=object),
        }
    )
    if "type" in wl.frame.columns:  # request types (Bailian traces): group by type
        req.insert(0, "type", wl.frame["type"].to_numpy())
    if run.sessions is not None:  # closed loop
        sid, turn, think = run.sessions
        req.insert(0, "session_id", sid)
        req.insert(1, "turn", turn)
        at = req.columns.get_loc("arrival_ms") + 1
        req.insert(at, "recorded_arrival_ms", recorded)
        req.insert(at + 1, "arrival_shift_ms", arrival - recorded)
        req.insert(at + 2, "think_ms", think)
    tiers = run.tiers
    bs = wl.block_size
    if tiers:
        hit = [col(out.tier_hits[k], np.int64) * bs for k in range(len(tiers))]
        req.insert(
            req.columns.get_loc("cached_tokens") + 1,
            "hbm_hit_tokens",
            req["cached_tokens"].to_numpy() - sum(hit, np.zeros(n, np.int64)),
        )
        at = req.columns.get_loc("hbm_hit_tokens") + 1
        for k, t in enumerate(tiers):
            req.insert(at + k, f"{t.name}_hit_tokens", hit[k])
        req.insert(at + len(tiers), "load_ms", col(out.load_ms, f64))
    req.index.name = "request_id"  # the request's position in the workload, never a column
    disagg = "prefill_replicas" in config
    if disagg:
        xs, dl, ds = col(out.xfer_start, f64), col(out.delivered, f64), col(out.decode_start, f64)
        pos = req.columns.get_loc("replica") + 1
        req.insert(pos, "prefill_replica", req["replica"].to_numpy().copy())
        req.insert(pos + 1, "decode_replica", col(out.decode_replica, np.int64))
        pos = req.columns.get_loc("queue_ms") + 1
        req.insert(pos, "prefill_queue_ms", scheduled - arrival)
        with np.errstate(invalid="ignore"):
            req.insert(pos + 1, "handoff_wait_ms", np.maximum(xs - first, 0.0))
        req.insert(pos + 2, "transfer_ms", dl - xs)
        req.insert(pos + 3, "decode_queue_ms", ds - dl)
        if config.get("decode_cache"):  # prompt tokens the decode instance held (not moved)
            req.insert(
                req.columns.get_loc("cached_tokens") + 1,
                "decode_hit_tokens",
                col(out.decode_hit, np.int64),
            )
    return req


def replica_frame(
    wl: Workload, run: RunOutput, config: dict[str, Any], req: pd.DataFrame
) -> pd.DataFrame:
    """One row per replica (``req``: the run's request frame)."""
    f64 = np.float64
    n = len(wl)
    tiers = run.tiers
    bs = wl.block_size
    P = wl.input_len.astype(np.int64)
    out_len = wl.output_len.astype(np.int64)
    arrival = req["arrival_ms"].to_numpy()
    disagg = "prefill_replicas" in config

    R = len(run.replicas)
    routed = req["replica"].to_numpy() >= 0
    rr = req["replica"].to_numpy()[routed]
    done = routed & (req["status"].to_numpy() == "finished")

    def per(values: np.ndarray, mask: np.ndarray = routed) -> np.ndarray:
        return np.bincount(req["replica"].to_numpy()[mask], weights=values[mask], minlength=R)

    pblocks = -(-P // bs)
    t0 = float(arrival[0]) if n else 0.0
    span = run.end_ms - t0
    requests = np.bincount(rr, minlength=R)
    in_tok = per(P.astype(f64))
    blocks = per(pblocks.astype(f64))
    cb = per(req["cached_blocks"].to_numpy().astype(f64))
    ct = per(req["cached_tokens"].to_numpy().astype(f64))
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = pd.DataFrame(
            {
                "replica": np.arange(R, dtype=np.int64),
                "requests": requests.astype(np.int64),
                "share": requests / max(int(routed.sum()), 1),
                "input_tokens": in_tok.astype(np.int64),
                "output_tokens": per(out_len.astype(f64), done).astype(np.int64),
                "prompt_blocks": blocks.astype(np.int64),
                "cached_blocks": cb.astype(np.int64),
                "cached_tokens": ct.astype(np.int64),
                "block_hit_ratio": cb / blocks,
                "token_hit_ratio": ct / in_tok,
                "busy_fraction": np.array([r.rec.busy_ms for r in run.replicas]) / span
                if span > 0
                else np.zeros(R),
                "peak_running": np.array([r.rec.peak_running for r in run.replicas], np.int64),
                "peak_kv_tokens": np.array([r.kv.peak * r.kv.pt for r in run.replicas], np.int64),
                "kv_capacity_tokens": np.array(
                    [r.kv.capacity * r.kv.pt for r in run.replicas], np.int64
                ),
                "evictions": np.array([r.kv.cache.evictions for r in run.replicas], np.int64),
                "preemptions": np.array([r.rec.preemptions for r in run.replicas], np.int64),
                "steps": np.array([r.rec.steps for r in run.replicas], np.int64),
            }
        )
    if disagg:
        P_n = int(config["prefill_replicas"])
        reps.insert(1, "role", ["prefill"] * P_n + ["decode"] * (R - P_n))
        dr = req["decode_replica"].to_numpy()
        handed = dr >= 0
        dec_req = np.bincount(dr[handed], minlength=R)
        reqs = np.where(np.arange(R) < P_n, requests, dec_req).astype(np.int64)
        reps["requests"] = reqs
        for name in ("share",):
            reps[name] = np.where(
                np.arange(R) < P_n,
                requests / max(int(routed.sum()), 1),
                dec_req / max(int(handed.sum()), 1),
            )
        fin_d = handed & done
        dec_out = np.bincount(dr[fin_d], weights=(out_len[fin_d] - 1).astype(f64), minlength=R)
        pre_out = np.bincount(rr, weights=done[routed].astype(f64), minlength=R)
        reps["output_tokens"] = np.where(np.arange(R) < P_n, pre_out, dec_out).astype(np.int64)
    if tiers:
        for k, t in enumerate(tiers):
            rd = [r.kv.tiers.bytes_read[k] if r.kv.tiers else 0.0 for r in run.replicas]
            wr = [r.kv.tiers.bytes_written[k] if r.kv.tiers else 0.0 for r in run.replicas]
            if t.shared:
                pk = [run.shared[t.name].peak * bs] * R
            else:
                pk = [r.kv.tiers.stores[k].peak * bs if r.kv.tiers else 0 for r in run.replicas]
            reps[f"{t.name}_bytes_read"] = np.array(rd, f64)
            reps[f"{t.name}_bytes_written"] = np.array(wr, f64)
            reps[f"{t.name}_peak_tokens"] = np.array(pk, np.int64)
    return reps.set_index("replica")  # the replica's index in the fleet, never a column


def timeline_frame(wl: Workload, run: RunOutput) -> pd.DataFrame:
    """The state of every replica on the sampling grid, in time then replica order."""
    f64 = np.float64
    tiers = run.tiers
    bs = wl.block_size
    tier_cols = [f"{t.name}_tokens" for t in tiers]
    zeros = (0,) * len(tiers)
    rows = [
        (*row[:1], r.index, *row[1:5], *(row[5:] if r.kv.tiers is not None else zeros))
        for r in run.replicas
        for row in r.rec.rows
    ]
    tl = pd.DataFrame(
        rows,
        columns=[
            "time_ms",
            "replica",
            "queue",
            "running",
            "kv_running_tokens",
            "kv_cached_tokens",
            *tier_cols,
        ],
    )
    if len(tl):  # HBM's pages in tokens, as the tiers'
        page = run.replicas[0].kv.pt
        for name in ("kv_running_tokens", "kv_cached_tokens"):
            tl[name] = tl[name].astype(np.int64) * page
    for t, name in zip(tiers, tier_cols, strict=True):
        if len(tl):
            tl[name] = tl[name].astype(np.int64) * bs
        log = run.shared.get(t.name).log if t.shared else None
        if log and len(tl):  # the pool's size at each sample, from its change log
            times = np.array([x[0] for x in log], f64)
            sizes = np.array([x[1] for x in log], np.int64)
            i = np.searchsorted(times, tl["time_ms"].to_numpy(), side="right") - 1
            tl[name] = np.where(i >= 0, sizes[np.maximum(i, 0)], 0) * bs
    if len(tl):
        tl = tl.sort_values(["time_ms", "replica"], kind="stable", ignore_index=True)
    tl = tl.astype(
        {
            "time_ms": f64,
            "replica": np.int64,
            "queue": np.int64,
            "running": np.int64,
            "kv_running_tokens": np.int64,
            "kv_cached_tokens": np.int64,
            **dict.fromkeys(tier_cols, np.int64),
        }
    )
    return tl


def tier_frame(req: pd.DataFrame, reps: pd.DataFrame, config: dict[str, Any]) -> pd.DataFrame:
    """:attr:`SimResult.tiers`: one row per KV tier (HBM first) from the other frames."""
    routed = req[req["replica"] >= 0]
    itok = float(routed["input_len"].sum())
    tiers = list(config.get("tiers", ()))
    rows = []
    lower = 0
    for t in tiers:
        hit = int(routed[f"{t.name}_hit_tokens"].sum())
        lower += hit
        rows.append({
            "tier": t.name,
            "shared": bool(t.shared),
            "capacity_tokens": int(t.capacity_tokens),
            "hit_tokens": hit,
            "bytes_read": float(reps[f"{t.name}_bytes_read"].sum()),
            "bytes_written": float(reps[f"{t.name}_bytes_written"].sum()),
        })
    hbm = {
        "tier": "hbm",
        "shared": False,
        "capacity_tokens": int(config.get("kv_tokens", 0)),
        "hit_tokens": int(routed["cached_tokens"].sum()) - lower,
        "bytes_read": 0.0,
        "bytes_written": 0.0,
    }
    frame = pd.DataFrame([hbm, *rows]).set_index("tier")
    frame.insert(3, "token_hit_ratio", frame["hit_tokens"] / itok if itok else np.nan)
    return frame
