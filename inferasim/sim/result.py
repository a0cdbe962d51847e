"""Simulation results as pandas frames: :class:`SimResult`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from inferasim.sim.engine import RunOutput
from inferasim.sim.frames import replica_frame, request_frame, tier_frame, timeline_frame
from inferasim.sim.summary import SUMMARY_METRICS, summarize
from inferasim.workload import Workload

__all__ = ["SimResult", "SUMMARY_METRICS"]

class SimResult:
    """What one :meth:`Simulator.run` produced.

    Attributes
    ----------
    requests : pandas.DataFrame
        One row per request of the workload (every one, in request order),
        indexed by ``request_id`` (the request's position in the workload,
        as ``Workload.frame``; no column repeats it): ``replica`` (-1 when rejected before routing);
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
        admission policy) and ``reason`` (why it was rejected; empty for finished requests).
        Times are ms, NaN when they never came.

        A disaggregated run adds ``prefill_replica`` (= ``replica``),
        ``decode_replica`` (-1 when the first token was the last),
        ``prefill_queue_ms`` (arrival to the first prefill step),
        ``handoff_wait_ms`` (first token to the start of the KV transfer: the
        KV waited pinned for decode memory; 0 when it started earlier),
        ``transfer_ms`` (transfer start to delivery to the decode instance)
        and ``decode_queue_ms`` (delivery to the first decode step; with
        tiers on the decode instances, ``Disaggregated(decode_cache=True)``,
        also the wait for the blocks loaded from the decode instance's tiers,
        which ``decode_hit_tokens`` counts with its HBM run).
        With KV tiers also ``hbm_hit_tokens`` and ``<tier>_hit_tokens`` (where
        the reused prefix of the first admission came from; they add up to
        ``cached_tokens``) and ``load_ms`` (time spent waiting for loads from
        lower tiers, from admission to the last delivery; a handoff's loads
        from its decode instance's tiers are in ``decode_queue_ms`` instead).
        A closed-loop run (``Simulator.run(workload, closed_loop=True)``) adds
        ``session_id`` and ``turn`` (1-based), ``recorded_arrival_ms`` (the
        workload's), ``arrival_shift_ms`` (simulated ``arrival_ms`` minus
        recorded; 0 for first turns) and ``think_ms`` (the wait after the
        previous answer; NaN for first turns); every latency is measured
        from the simulated arrival.
    replicas : pandas.DataFrame
        One row per replica, indexed by ``replica`` (its index in the fleet;
        no column repeats it): ``requests`` routed, ``share`` of all routed
        requests, ``input_tokens``, ``output_tokens``, ``prompt_blocks``,
        ``cached_blocks``, ``cached_tokens``, ``block_hit_ratio``,
        ``token_hit_ratio``, ``busy_fraction`` (of the run from first arrival
        to last finish), ``peak_running``, ``peak_kv_tokens`` (most HBM KV held by
        running sequences, in tokens: whole pages of
        ``config["page_tokens"]``), ``kv_capacity_tokens``, ``evictions``, ``preemptions``,
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
        ``kv_running_tokens`` (HBM KV held by running sequences, whole pages
        in tokens), ``kv_cached_tokens`` (evictable cached pages kept for
        reuse, in tokens); with KV tiers ``<tier>_tokens``
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
        self.tiers = tier_frame(requests, replicas, config) if tiers is None else tiers

    def _header(self) -> str:
        from inferasim._format import count_noun

        n = len(self.requests)
        done = int((self.requests["status"] == "finished").sum())
        cfg = self.config
        what = ", ".join(
            f"{k} {cfg[k]}" for k in ("routing", "eviction") if isinstance(cfg.get(k), str)
        )
        return (
            f"SimResult: {count_noun(n, 'request')} ({done:,} finished) on "
            f"{count_noun(len(self.replicas), 'replica')}"
            + (f", {what}" if what else "")
        )

    def _key_numbers(self) -> list[tuple[str, str, str]]:
        """(name, value, unit) rows of the headline numbers, for the reprs."""
        from inferasim._format import format_metric, metric_unit

        s = self.summary()
        tiers = [k for k in s.index if k.endswith("_token_hit_ratio") and k != "token_hit_ratio"]
        keys = (
            "duration_ms",
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

    def _notes(self) -> list[str]:
        """The card's notes: rejections first (latencies cover finished requests only)."""
        from inferasim.sim.summary import rejection_note

        rejected = rejection_note(self.requests)
        frames = "frames: .requests, .replicas, .timeline; all metrics: .summary()"
        return [frames] if rejected is None else [rejected, frames]

    def __repr__(self) -> str:
        from inferasim._format import card_text

        return card_text(self._header(), self._key_numbers(), notes=self._notes())

    def _repr_html_(self) -> str:
        from inferasim._format import card_html

        return card_html(self._header(), self._key_numbers(), notes=self._notes())

    @classmethod
    def _build(cls, wl: Workload, run: RunOutput, config: dict[str, Any]) -> SimResult:
        """The frames of a run (see :mod:`inferasim.sim.frames`)."""
        req = request_frame(wl, run, config)
        reps = replica_frame(wl, run, config, req)
        return cls(req, reps, timeline_frame(wl, run), config)

    def summary(
        self, slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None
    ) -> pd.Series:
        """Headline numbers of the run as one labelled Series.

        Parameters
        ----------
        slo_ttft_ms, slo_tpot_ms : float, optional
            Service-level objectives, each None or a finite number of ms with
            ``0 < v <= 2**43`` (bools are refused: ``True`` is not 1 ms). A
            finished request is *good* when it meets every objective given; ``goodput_rps`` counts good requests
            per second of run, ``slo_attainment`` their share of all requests.

        Returns
        -------
        pandas.Series
            ``requests``, ``finished``, ``rejected``, ``duration_ms`` (first
            arrival to last finish, in ms like ``describe()``), ``throughput_rps``, ``output_tok_s``,
            ``block_hit_ratio`` and ``token_hit_ratio`` (cluster-wide, over
            routed requests; NaN, with a note, when the workload has no
            hash ids: absent, not zero), ``{queue,ttft,tpot,e2e}_ms_{mean,p50,p90,p99}``
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
        return summarize(self, slo_ttft_ms, slo_tpot_ms)
