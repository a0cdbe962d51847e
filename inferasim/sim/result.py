"""Simulation results as pandas frames: :class:`SimResult`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from inferasim.sim.engine import RunOutput
from inferasim.workload import Workload

__all__ = ["SimResult", "SUMMARY_METRICS"]

_STATS = (("mean", None), ("p50", 50), ("p90", 90), ("p99", 99))

#: The metrics of :meth:`SimResult.summary`, in order: the same for every run
#: (NaN where a metric does not apply: no SLO given, no KV tiers, an aggregated
#: fleet, an open loop).
SUMMARY_METRICS: tuple[str, ...] = (
    "requests",
    "finished",
    "rejected",
    "duration_s",
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


class SimResult:
    """What one :meth:`Simulator.run` produced.

    Attributes
    ----------
    requests : pandas.DataFrame
        One row per request of the workload (every one, in request order):

        ``request_id``; ``replica`` (-1 when rejected before routing);
        ``arrival_ms``, ``scheduled_ms`` (first admitted to a batch),
        ``first_token_ms``, ``finish_ms``; ``queue_ms`` (scheduled -
        arrival), ``ttft_ms`` (first token - arrival), ``tpot_ms`` ((finish -
        first token) / (output_len - 1), NaN for one-token outputs),
        ``itl_ms`` (inter-token latency as AIPerf defines it, ``(e2e_ms -
        ttft_ms) / (output_len - 1)``: the same number as ``tpot_ms``, NaN for
        one-token outputs), ``max_itl_ms`` (the largest gap between two
        consecutive tokens, a stall indicator: a long prefill chunk sharing
        the step, a preemption and recompute; NaN for one-token outputs),
        ``e2e_ms`` (finish - arrival); ``input_len``, ``output_len`` (tokens);
        ``cached_blocks``, ``cached_tokens`` (prefix reused at the first
        admission); ``computed_prefill_tokens`` (prefill tokens computed,
        recomputation after preemption included); ``preemptions``;
        ``status`` (``"finished"`` or ``"rejected"``: the request can never
        fit in a replica's KV memory, has no prompt, or was turned away by the
        admission policy) and ``reason`` (why it was rejected, else missing).
        Times are ms, NaN when they never came.

        A disaggregated run adds ``prefill_replica`` (= ``replica``),
        ``decode_replica`` (-1 when the first token was the last),
        ``prefill_queue_ms`` (arrival to the first prefill step),
        ``handoff_wait_ms`` (first token to the start of the KV transfer: the
        KV waited pinned for decode memory; 0 when it started earlier),
        ``transfer_ms`` (transfer start to delivery to the decode instance)
        and ``decode_queue_ms`` (delivery to the first decode step).
        With KV tiers also ``hbm_hit_tokens`` and ``<tier>_hit_tokens`` (where
        the reused prefix of the first admission came from; they add up to
        ``cached_tokens``) and ``load_ms`` (time spent waiting for loads from
        lower tiers, from admission to the last delivery).
        A closed-loop run (``Simulator.run(workload, closed_loop=True)``) adds
        ``session_id`` and ``turn`` (1-based), ``recorded_arrival_ms`` (the
        workload's), ``arrival_shift_ms`` (simulated ``arrival_ms`` minus
        recorded; 0 for first turns) and ``think_ms`` (the wait after the
        previous answer; NaN for first turns); every latency is measured
        from the simulated arrival.
    replicas : pandas.DataFrame
        One row per replica: ``requests`` routed, ``share`` of all routed
        requests, ``input_tokens``, ``output_tokens``, ``prompt_blocks``,
        ``cached_blocks``, ``cached_tokens``, ``block_hit_ratio``,
        ``token_hit_ratio``, ``busy_fraction`` (of the run from first arrival
        to last finish), ``peak_running``, ``peak_kv_blocks`` (held by running
        sequences), ``kv_capacity_blocks``, ``evictions``, ``preemptions``,
        ``steps`` (engine steps run). A disaggregated run adds ``role``
        (``"prefill"`` or ``"decode"``); a decode instance's ``requests`` and
        ``share`` count the sequences handed off to it, its
        ``output_tokens`` the tokens it generated (all but the first).
        With KV tiers also ``<tier>_bytes_read``
        (loaded into this replica's HBM), ``<tier>_bytes_written`` (written by
        this replica) and ``<tier>_peak_tokens`` (most tokens held; for a
        shared tier the pool's peak, the same on every row).
    timeline : pandas.DataFrame
        The state of every replica sampled every ``timeline_ms``: ``time_ms``,
        ``replica``, ``queue`` (waiting requests), ``running``,
        ``kv_running_blocks`` (held by running sequences), ``kv_cached_blocks``
        (evictable blocks kept for reuse); with KV tiers ``<tier>_tokens``
        (tokens held: the replica's own tier, or the whole shared pool).
    tiers : pandas.DataFrame
        One row per KV tier, indexed by name, HBM first (only ``"hbm"``
        without lower tiers): ``shared``, ``capacity_tokens`` (per replica;
        in all for a shared tier), ``hit_tokens`` (of the first admissions,
        adding up to ``requests["cached_tokens"]``), ``token_hit_ratio``
        (``hit_tokens`` over routed prompt tokens, adding up to the
        summary's ``token_hit_ratio``), ``bytes_read`` and
        ``bytes_written`` (fleet totals; 0 for HBM).
    config : dict
        The simulator parameters of the run.

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_requests([0], [32], [3], [[1, 2]], block_size=16)
    >>> res = ism.Simulator(kv_tokens=160, cost_model=ism.LinearCostModel()).run(
    ...     wl, progress=False)
    >>> res.requests[["ttft_ms", "e2e_ms", "status"]].round(3).to_dict("records")
    [{'ttft_ms': 6.6, 'e2e_ms': 16.8, 'status': 'finished'}]
    """

    def __init__(
        self,
        requests: pd.DataFrame,
        replicas: pd.DataFrame,
        timeline: pd.DataFrame,
        config: dict[str, Any],
        tiers: pd.DataFrame | None = None,
    ) -> None:
        self.requests = requests
        self.replicas = replicas
        self.timeline = timeline
        self.config = config
        self.tiers = _tier_frame(requests, replicas, config) if tiers is None else tiers

    def _header(self) -> str:
        n = len(self.requests)
        done = int((self.requests["status"] == "finished").sum())
        cfg = self.config
        what = ", ".join(
            f"{k} {cfg[k]}" for k in ("routing", "eviction") if isinstance(cfg.get(k), str)
        )
        return (
            f"SimResult: {n:,} requests ({done:,} finished) on {len(self.replicas)} replicas"
            + (f", {what}" if what else "")
        )

    def _key_numbers(self) -> list[tuple[str, str, str]]:
        """(name, value, unit) rows of the headline numbers, for the reprs."""
        from inferasim._format import format_metric, metric_unit

        s = self.summary()
        tiers = [k for k in s.index if k.endswith("_token_hit_ratio") and k != "token_hit_ratio"]
        keys = (
            "duration_s",
            "throughput_rps",
            "token_hit_ratio",
            *tiers,  # with KV tiers: where the hits came from
            "load_ms_mean",
            "ttft_ms_p50",
            "ttft_ms_p99",
            "tpot_ms_p50",
            "max_replica_share",
            "rejected",
            "saturated",
        )
        return [(k, format_metric(k, s[k]), metric_unit(k)) for k in keys if k in s.index]

    def __repr__(self) -> str:
        from inferasim._format import card_text

        return card_text(
            self._header(),
            self._key_numbers(),
            notes=["frames: .requests, .replicas, .timeline; all metrics: .summary()"],
        )

    def _repr_html_(self) -> str:
        from inferasim._format import card_html

        return card_html(
            self._header(),
            self._key_numbers(),
            notes=["frames: .requests, .replicas, .timeline; all metrics: .summary()"],
        )

    @classmethod
    def _build(cls, wl: Workload, run: RunOutput, config: dict[str, Any]) -> SimResult:
        out = run.out
        n = len(wl)
        f64 = np.float64

        def col(a: Any, dtype: Any) -> np.ndarray:
            return np.frombuffer(a, dtype=dtype).copy() if n else np.zeros(0, dtype)

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
            rid, gap = rep.gap_maxima()
            np.fmax.at(max_gap, rid, gap)
        max_gap[out_len <= 1] = np.nan
        status = np.full(n, "finished", dtype=object)
        reason = np.full(n, None, dtype=object)
        for i, why in run.reasons.items():
            status[i] = "rejected"
            reason[i] = why
        req = pd.DataFrame(
            {
                "request_id": np.arange(n, dtype=np.int64),
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
        if run.sessions is not None:  # closed loop
            sid, turn, think = run.sessions
            req.insert(1, "session_id", sid)
            req.insert(2, "turn", turn)
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
        req.index.name = None
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
                    "busy_fraction": np.array([r.busy_ms for r in run.replicas]) / span
                    if span > 0
                    else np.zeros(R),
                    "peak_running": np.array([r.peak_running for r in run.replicas], np.int64),
                    "peak_kv_blocks": np.array([r.peak_kv for r in run.replicas], np.int64),
                    "kv_capacity_blocks": np.array([r.capacity for r in run.replicas], np.int64),
                    "evictions": np.array([r.cache.evictions for r in run.replicas], np.int64),
                    "preemptions": np.array([r.preemptions for r in run.replicas], np.int64),
                    "steps": np.array([r.steps for r in run.replicas], np.int64),
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
                rd = [r.tiers.bytes_read[k] if r.tiers else 0.0 for r in run.replicas]
                wr = [r.tiers.bytes_written[k] if r.tiers else 0.0 for r in run.replicas]
                if t.shared:
                    pk = [run.shared[t.name].peak * bs] * R
                else:
                    pk = [r.tiers.stores[k].peak * bs if r.tiers else 0 for r in run.replicas]
                reps[f"{t.name}_bytes_read"] = np.array(rd, f64)
                reps[f"{t.name}_bytes_written"] = np.array(wr, f64)
                reps[f"{t.name}_peak_tokens"] = np.array(pk, np.int64)
        tier_cols = [f"{t.name}_tokens" for t in tiers]
        zeros = (0,) * len(tiers)
        rows = [
            (*row[:1], r.index, *row[1:5], *(row[5:] if r.tiers is not None else zeros))
            for r in run.replicas
            for row in r.tl
        ]
        tl = pd.DataFrame(
            rows,
            columns=[
                "time_ms",
                "replica",
                "queue",
                "running",
                "kv_running_blocks",
                "kv_cached_blocks",
                *tier_cols,
            ],
        )
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
                "kv_running_blocks": np.int64,
                "kv_cached_blocks": np.int64,
                **dict.fromkeys(tier_cols, np.int64),
            }
        )
        return cls(req, reps, tl, config)

    def summary(
        self, slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None
    ) -> pd.Series:
        """Headline numbers of the run as one labelled Series.

        Parameters
        ----------
        slo_ttft_ms, slo_tpot_ms : float, optional
            Service-level objectives. A finished request is *good* when it
            meets every objective given; ``goodput_rps`` counts good requests
            per second of run, ``slo_attainment`` their share of all requests.

        Returns
        -------
        pandas.Series
            ``requests``, ``finished``, ``rejected``, ``duration_s`` (first
            arrival to last finish), ``throughput_rps``, ``output_tok_s``,
            ``block_hit_ratio`` and ``token_hit_ratio`` (cluster-wide, over
            routed requests), ``{queue,ttft,tpot,e2e}_ms_{mean,p50,p90,p99}``
            (finished requests), ``preemptions``, ``evictions``,
            ``max_replica_share`` (busiest replica's share of requests; ``1 /
            replicas`` is perfectly balanced); ``goodput_rps`` and
            ``slo_attainment`` (NaN when no SLO is given);
            ``hbm_token_hit_ratio`` and ``tier_token_hit_ratio`` (hits from HBM
            and from the lower KV tiers, adding up to ``token_hit_ratio``; by
            tier in :attr:`tiers`) and ``load_ms_mean`` (NaN without tiers);
            ``saturated`` (1.0 when the queueing delay
            keeps growing: from the first to the last quarter of arrivals, the
            mean queue grows by more than 10% of the time between them and
            ends above 100 ms; the fleet cannot keep up with the offered load;
            else 0.0); ``arrival_shift_ms_mean``, ``sessions`` and
            ``session_ms_{mean,p50,p99}`` (a session's last finish minus its
            first arrival, over sessions whose every turn finished; NaN in an
            open loop); ``{prefill,decode}_busy_fraction``,
            ``{prefill,decode}_peak_kv_usage`` and
            ``{prefill_queue,handoff_wait,transfer,decode_queue}_ms_{mean,p99}``
            (NaN on an aggregated fleet). The metrics and their order are the
            same for every run (:data:`SUMMARY_METRICS`). Every value is a
            float at full precision; the Series displays them rounded, with
            units, leaves out the ones that do not apply and says when no SLO
            was given.

        Examples
        --------
        >>> import inferasim as ism
        >>> wl = ism.Workload.from_requests([0, 50], [32, 32], [3, 3], block_size=16)
        >>> s = ism.Simulator(kv_tokens=160, cost_model=ism.LinearCostModel()).run(
        ...     wl, progress=False).summary(slo_ttft_ms=10)
        >>> s[["finished", "ttft_ms_p50", "slo_attainment", "saturated"]].tolist()
        [2.0, 6.6, 1.0, 0.0]
        >>> float(ism.Simulator(kv_tokens=160, cost_model=ism.LinearCostModel()).run(
        ...     wl, progress=False).summary()["goodput_rps"])  # no SLO given
        nan
        """
        req = self.requests
        fin = req[req["status"] == "finished"]
        routed = req[req["replica"] >= 0]
        n = len(req)
        t0 = float(req["arrival_ms"].min()) if n else 0.0
        t1 = float(fin["finish_ms"].max()) if len(fin) else t0
        dur_s = (t1 - t0) / 1000.0
        rate = (lambda k: k / dur_s) if dur_s > 0 else (lambda k: float("nan"))
        bs = int(self.config.get("block_size", 1))
        pblocks = float((-(-routed["input_len"] // bs)).sum())
        itok = float(routed["input_len"].sum())
        out: dict[str, Any] = {
            "requests": n,
            "finished": len(fin),
            "rejected": int((req["status"] == "rejected").sum()),
            "duration_s": dur_s,
            "throughput_rps": rate(len(fin)),
            "output_tok_s": rate(float(fin["output_len"].sum())),
            "block_hit_ratio": float(routed["cached_blocks"].sum()) / pblocks
            if pblocks
            else float("nan"),
            "token_hit_ratio": float(routed["cached_tokens"].sum()) / itok
            if itok
            else float("nan"),
        }
        for metric in ("queue_ms", "ttft_ms", "tpot_ms", "e2e_ms"):
            v = fin[metric].dropna().to_numpy()
            for name, q in _STATS:
                if not v.size:
                    out[f"{metric}_{name}"] = float("nan")
                elif q is None:
                    out[f"{metric}_{name}"] = float(v.mean())
                else:
                    out[f"{metric}_{name}"] = float(np.percentile(v, q))
        if "hbm_hit_tokens" in req.columns:
            hbm = float(routed["hbm_hit_tokens"].sum())
            out["hbm_token_hit_ratio"] = hbm / itok if itok else float("nan")
            out["tier_token_hit_ratio"] = (
                (float(routed["cached_tokens"].sum()) - hbm) / itok if itok else float("nan")
            )
            out["load_ms_mean"] = float(fin["load_ms"].mean()) if len(fin) else float("nan")
        else:
            out["hbm_token_hit_ratio"] = out["token_hit_ratio"]
        out["preemptions"] = int(self.replicas["preemptions"].sum())
        out["evictions"] = int(self.replicas["evictions"].sum())
        out["max_replica_share"] = (
            float(self.replicas["share"].max()) if len(self.replicas) else 0.0
        )
        notes = []
        if slo_ttft_ms is None and slo_tpot_ms is None:
            notes.append("no SLO given: pass slo_ttft_ms= or slo_tpot_ms= for goodput")
        else:
            good = np.ones(len(fin), dtype=bool)
            slo = []
            if slo_ttft_ms is not None:
                good &= fin["ttft_ms"].to_numpy() <= slo_ttft_ms
                slo.append(f"TTFT <= {slo_ttft_ms:g} ms")
            if slo_tpot_ms is not None:
                tp = fin["tpot_ms"].to_numpy()
                good &= np.isnan(tp) | (tp <= slo_tpot_ms)
                slo.append(f"TPOT <= {slo_tpot_ms:g} ms")
            out["goodput_rps"] = rate(int(good.sum()))
            out["slo_attainment"] = int(good.sum()) / n if n else float("nan")
            notes.append("SLO: " + " and ".join(slo))
        out["saturated"] = float(_saturated(fin))
        if "arrival_shift_ms" in req.columns:  # closed loop: whole sessions
            out["arrival_shift_ms_mean"] = float(req["arrival_shift_ms"].mean()) if n else 0.0
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
        if "decode_replica" in req.columns:  # disaggregated: the two pools apart
            reps = self.replicas
            for role in ("prefill", "decode"):
                busy = reps.loc[reps["role"] == role, "busy_fraction"]
                out[f"{role}_busy_fraction"] = float(busy.mean()) if len(busy) else float("nan")
                kv = reps.loc[reps["role"] == role]
                out[f"{role}_peak_kv_usage"] = (
                    float((kv["peak_kv_blocks"] / kv["kv_capacity_blocks"]).max())
                    if len(kv)
                    else float("nan")
                )
            for metric in ("prefill_queue_ms", "handoff_wait_ms", "transfer_ms", "decode_queue_ms"):
                v = fin[metric].dropna().to_numpy()
                out[f"{metric}_mean"] = float(v.mean()) if v.size else float("nan")
                out[f"{metric}_p99"] = float(np.percentile(v, 99)) if v.size else float("nan")
        from inferasim._format import Summary

        inapplicable = [k for k in SUMMARY_METRICS if k not in out]
        values = {k: out.get(k, float("nan")) for k in SUMMARY_METRICS}
        return Summary(
            values, dtype=np.float64, name="summary", title=self._header(), notes=notes,
            inapplicable=inapplicable,
        )


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


def _tier_frame(req: pd.DataFrame, reps: pd.DataFrame, config: dict[str, Any]) -> pd.DataFrame:
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
