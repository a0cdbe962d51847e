"""The same GPUs aggregated or split into prefill and decode pools, side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from inferasim._run_options import run_options
from inferasim._validate import slo_ms
from inferasim.sim.config import Disaggregated
from inferasim.sim.simulator import Simulator
from inferasim.workload import Workload

__all__ = ["compare_topologies"]

_METRICS = (
    "finished",
    "rejected",
    "throughput_rps",
    "output_tok_s",
    "token_hit_ratio",
    "ttft_ms_mean",
    "ttft_ms_p99",
    "tpot_ms_mean",
    "tpot_ms_p99",
    "e2e_ms_mean",
    "e2e_ms_p99",
    "goodput_rps",
    "slo_attainment",
    "saturated",
)


def compare_topologies(
    workload: Workload,
    gpus: int = 16,
    splits: Sequence[tuple[int, int]] = ((8, 8),),
    *,
    aggregated: bool = True,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    handoff: Mapping[str, Any] | None = None,
    run: Mapping[str, Any] | None = None,
    **simulator: Any,
) -> pd.DataFrame:
    """Run one workload on ``gpus`` replicas aggregated and on each prefill:decode split.

    Parameters
    ----------
    workload : Workload
        The requests.
    gpus : int, default 16
        Replicas in all (each split must add up to it).
    splits : sequence of (int, int), default ((8, 8),)
        ``(prefill, decode)`` pairs: each runs
        ``Simulator(replicas=Disaggregated(prefill, decode, ...))``.
    aggregated : bool, default True
        Also run ``Simulator(replicas=gpus)``.
    slo_ttft_ms, slo_tpot_ms : float, optional
        Objectives for ``goodput_rps`` and ``slo_attainment`` (passed to
        :meth:`SimResult.summary`; to reject requests by SLO as well, give
        ``admission=SloAdmission(ttft_ms=..., tpot_ms=...)``).
    handoff : dict, optional
        More :class:`Disaggregated` settings for every split
        (``handoff_gbps``, ``handoff_latency_us``, ``layerwise``).
    run : dict, optional
        :meth:`Simulator.run` options for every run, e.g.
        ``{"progress": False}``.
    **simulator
        Any other :class:`Simulator` parameter (routing, cost model,
        kv_tokens, engine, admission, ...), the same for every run.

    Returns
    -------
    pandas.DataFrame
        One row per topology: ``topology`` (``"aggregated"`` or ``"P:D"``),
        ``prefill_replicas``, ``decode_replicas`` (0 and 0 for aggregated),
        then summary metrics (``finished``, ``rejected``, ``throughput_rps``,
        ``output_tok_s``, ``token_hit_ratio``, TTFT/TPOT/E2E means and p99,
        ``goodput_rps`` and ``slo_attainment`` when an SLO is given, ``saturated``).

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(100, rate=20.0, input_len=512, output_len=16, seed=0)
    >>> df = compare_topologies(wl, gpus=2, splits=[(1, 1)], kv_tokens=64 * 512,
    ...                         cost_model=ism.LinearCostModel(kv_bytes_per_token=131072),
    ...                         run={"progress": False})
    >>> df["topology"].tolist(), df["finished"].tolist()
    (['aggregated', '1:1'], [100, 100])
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be a positive integer, got {gpus!r}")
    for pair in splits:
        if len(pair) != 2 or pair[0] < 1 or pair[1] < 1 or pair[0] + pair[1] != gpus:
            raise ValueError(
                f"each split must be (prefill, decode) >= 1 adding up to gpus={gpus}, got {pair!r}"
            )
    if "replicas" in simulator:
        raise ValueError("replicas= is set by compare_topologies (gpus=, splits=)")
    slo_ms(slo_ttft_ms, "slo_ttft_ms")  # (before the first run)
    slo_ms(slo_tpot_ms, "slo_tpot_ms")
    options = run_options(run)
    handoff = dict(handoff or {})
    for name in ("prefill", "decode"):
        if name in handoff:
            raise ValueError(f"handoff[{name!r}] is set by compare_topologies (splits=)")
    runs: list[tuple[str, int, int, int | Disaggregated]] = []
    if aggregated:
        runs.append(("aggregated", 0, 0, gpus))
    for p, d in splits:
        runs.append((f"{p}:{d}", p, d, Disaggregated(prefill=p, decode=d, **handoff)))
    rows = []
    for label, p, d, fleet in runs:
        res = Simulator(replicas=fleet, **simulator).run(workload, **options)
        s = res.summary(slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)
        rows.append(
            {"topology": label, "prefill_replicas": p, "decode_replicas": d}
            | {m: s[m] for m in _METRICS if m in s.index}
        )
    frame = pd.DataFrame(rows)
    for count in ("finished", "rejected"):  # summary values are floats; counts read as ints
        frame[count] = frame[count].astype(np.int64)
    return frame
