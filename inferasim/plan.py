"""Capacity planning on top of the simulator: how much load, how many replicas, which trade-offs.

* :func:`max_rate`: the highest load factor at which a fleet still meets a
  latency objective (TTFT and/or TPOT at a percentile), by bisection on
  :meth:`Workload.scale_time`, each probe one simulation;
* :func:`min_replicas`: the fewest replicas that meet the objective at a
  given load or rate;
* :func:`pareto`: the non-dominated rows of a sweep frame (e.g. GPUs
  against p99 TTFT);
* :func:`with_cost`: dollars per hour and per million tokens from a GPU
  price.

An objective is met when every request finished (none rejected) and the
``percentile``-th percentile of TTFT (and of TPOT, over requests with more
than one output token) is at most its bound; percentiles as in
:meth:`SimResult.summary` (``numpy.percentile``, linear interpolation).
The searches assume that more load never helps and more replicas never hurt
the objective; they report every probe so a non-monotone case can be seen.

Examples
--------
>>> import inferasim as ism
>>> wl = ism.Workload.from_requests([10.0 * k for k in range(50)], [100] * 50, [1] * 50)
>>> sim = ism.Simulator(engine=ism.EngineConfig(max_num_seqs=1, max_batched_tokens=100),
...                     kv_tokens=8 * 512, cost_model=ism.LinearCostModel())
>>> cap = ism.plan.max_rate(wl, sim, slo_ttft_ms=11.0, run={"progress": False})
>>> 0.98 <= cap.load <= 1.0   # service 10 ms per request, one every 10 ms: load 1
True
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from inferasim._run_options import run_options
from inferasim._validate import percentile as check_percentile
from inferasim._validate import slo_ms
from inferasim.workload import Workload

__all__ = ["MaxRate", "MinReplicas", "max_rate", "min_replicas", "pareto", "with_cost"]


# ----------------------------------------------------------------- helpers
def _simulator_with(simulator: Any, **changes: Any) -> Any:
    """A deep copy of a Simulator with some parameters changed (``set_params`` keys).

    The copy shares no object with ``simulator``: the user's simulator, its
    router and cost model stay as they were whatever the probes do.
    """
    from inferasim.sim import Simulator

    if not isinstance(simulator, Simulator):
        raise TypeError(f"simulator must be a Simulator, got {type(simulator).__name__}")
    return copy.deepcopy(simulator).set_params(**changes)


def _check_slo(slo_ttft_ms: float | None, slo_tpot_ms: float | None, percentile: float) -> None:
    if slo_ttft_ms is None and slo_tpot_ms is None:
        raise ValueError("give an objective: slo_ttft_ms= and/or slo_tpot_ms=")
    slo_ms(slo_ttft_ms, "slo_ttft_ms")
    slo_ms(slo_tpot_ms, "slo_tpot_ms")
    check_percentile(percentile)


def _offered_rps(wl: Workload) -> float:
    arr = wl.arrival_ms
    if len(arr) < 2 or not arr[-1] > arr[0]:
        raise ValueError("the workload spans no time: it has no offered rate to scale")
    return len(arr) * 1000.0 / float(arr[-1] - arr[0])


def _probe(
    workload: Workload,
    simulator: Any,
    load: float,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    percentile: float,
    run: Mapping[str, Any],
) -> dict[str, Any]:
    """Simulate at one load multiplier; say whether the objective holds."""
    wl = workload if load == 1.0 else workload.scale_time(1.0 / load)
    res = simulator.run(wl, **run)
    req = res.requests
    fin = req[req["status"] == "finished"]
    rejected = int(len(req) - len(fin))
    ttft = fin["ttft_ms"].to_numpy()
    tpot = fin["tpot_ms"].dropna().to_numpy()
    ttft_q = float(np.percentile(ttft, percentile)) if ttft.size else math.nan
    tpot_q = float(np.percentile(tpot, percentile)) if tpot.size else math.nan
    ok = rejected == 0 and len(fin) > 0
    if slo_ttft_ms is not None:
        ok = ok and ttft_q <= slo_ttft_ms
    if slo_tpot_ms is not None:
        ok = ok and (not tpot.size or tpot_q <= slo_tpot_ms)
    s = res.summary()
    tp = getattr(simulator.cost_model, "tp", 1) if simulator.cost_model is not None else 1
    dur = float(s["duration_ms"]) / 1000.0
    tokens = float(fin["input_len"].sum() + fin["output_len"].sum())
    return {
        "load": float(load),
        "replicas": int(res.config["replicas"]),
        "gpus": int(len(res.replicas)) * int(tp),
        "ttft_ms": ttft_q,
        "tpot_ms": tpot_q,
        "rejected": rejected,
        "saturated": bool(s["saturated"]),
        "tok_s": tokens / dur if dur > 0 else math.nan,
        "output_tok_s": float(s["output_tok_s"]),
        "meets_slo": bool(ok),
        # (open loop) no two requests in service at once: in the fleet, on a replica
        "runs_alone": bool(not run.get("closed_loop") and _runs_alone(req, by_replica=False)),
        "alone_on_replicas": bool(
            not run.get("closed_loop") and _runs_alone(req, by_replica=True)
        ),
    }


def _usd_per_million(gpus: int, tok_s: float, usd_per_gpu_hour: float | None) -> float:
    if usd_per_gpu_hour is None or not tok_s > 0:
        return math.nan
    return gpus * usd_per_gpu_hour / 3600.0 / tok_s * 1e6


@dataclass(frozen=True)
class MaxRate:
    """What :func:`max_rate` found.

    Attributes
    ----------
    load : float
        The highest load multiplier probed that met the objective (0.0 when
        even the lowest probe missed it); the true threshold lies below
        ``load * (1 + rtol)``.
    rate_rps : float
        The offered rate at that load (requests per second).
    scale_time : float
        ``1 / load``: the :meth:`Workload.scale_time` factor of that run.
    ttft_ms, tpot_ms : float
        The percentile TTFT and TPOT at that load.
    gpus : int
        GPUs of the fleet.
    usd_per_million_tokens : float
        Fleet cost per million prompt plus output tokens at that load (NaN
        without a GPU price).
    probes : pandas.DataFrame
        Every simulation run, in the order run.
    note : str
        Why the search stopped where it did, when it did not bracket the
        threshold: ``"no load meets the objective: ..."`` (then ``load`` is
        0.0) or why ``load`` is the highest load worth probing. Empty when
        the threshold was bracketed to ``rtol``.

    Examples
    --------
    >>> MaxRate(2.0, 10.0, 0.5, 100.0, 20.0, 1, float("nan"), None).scale_time
    0.5
    """

    load: float
    rate_rps: float
    scale_time: float
    ttft_ms: float
    tpot_ms: float
    gpus: int
    usd_per_million_tokens: float
    probes: pd.DataFrame | None = field(repr=False, compare=False)
    note: str = ""


@dataclass(frozen=True)
class MinReplicas:
    """What :func:`min_replicas` found.

    Attributes
    ----------
    replicas : int
        The fewest replicas that met the objective (0 when none up to
        ``max_replicas`` did).
    gpus : int
        GPUs of that fleet (replicas times tensor parallelism).
    load, rate_rps : float
        The load multiplier and offered rate planned for.
    ttft_ms, tpot_ms : float
        The percentile TTFT and TPOT with that many replicas.
    usd_per_million_tokens : float
        Fleet cost per million prompt plus output tokens (NaN without a GPU
        price).
    probes : pandas.DataFrame
        Every simulation run, in the order run.
    note : str
        ``"no fleet meets the objective: ..."`` when ``replicas`` is 0 (and
        why the search stopped), else empty.

    Examples
    --------
    >>> MinReplicas(4, 4, 1.0, 3.0, 50.0, 10.0, float("nan"), None).gpus
    4
    """

    replicas: int
    gpus: int
    load: float
    rate_rps: float
    ttft_ms: float
    tpot_ms: float
    usd_per_million_tokens: float
    probes: pd.DataFrame | None = field(repr=False, compare=False)
    note: str = ""


# ----------------------------------------------------------------- load limits
#: At a load where every request arrives within this many ms of the first, any
#: higher load is the same simulation (the engine's times resolve 1 µs).
_SAME_INSTANT_MS = 1e-3


def _load_limits(workload: Workload) -> tuple[float, float]:
    """(lowest, highest) load factor worth probing on ``workload``.

    Lowest: below it ``scale_time(1 / x)`` would put an arrival past the
    2**43 ms a workload may span. Highest: above it every request arrives
    within 1 µs of the first, so a higher load is the same run.
    """
    from inferasim.workload._parse import MAX_ARRIVAL_SPAN_MS

    arr = workload.arrival_ms
    furthest = float(np.max(np.abs(arr))) if len(arr) else 0.0
    lowest = furthest / MAX_ARRIVAL_SPAN_MS * (1.0 + 1e-9) if furthest > 0 else 0.0
    span = float(arr[-1] - arr[0]) if len(arr) > 1 else 0.0
    highest = span / _SAME_INSTANT_MS if span > 0 else math.inf
    return lowest, highest


def _runs_alone(requests: pd.DataFrame, *, by_replica: bool) -> bool:
    """Whether no two requests were in service at once (on one replica, ``by_replica``).

    Then, in an open loop, every request already ran alone: at a lower load
    (no two requests at once anywhere) or with more replicas (none at once
    on one replica) each would still run alone and get the same latency.
    """
    fin = requests[requests["status"] == "finished"]
    if len(fin) != len(requests) or len(fin) < 2:
        return False
    groups = fin.groupby("replica", sort=False) if by_replica else [(None, fin)]
    for _, rows in groups:
        order = np.argsort(rows["arrival_ms"].to_numpy(), kind="stable")
        start = rows["arrival_ms"].to_numpy()[order]
        end = rows["finish_ms"].to_numpy()[order]
        if np.any(start[1:] < np.maximum.accumulate(end)[:-1]):
            return False
    return True


# ----------------------------------------------------------------- searches
def max_rate(
    workload: Workload,
    simulator: Any,
    *,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    percentile: float = 99.0,
    rtol: float = 0.02,
    start: float = 1.0,
    min_load: float = 1.0 / 1024,
    max_load: float = 1024.0,
    usd_per_gpu_hour: float | None = None,
    run: Mapping[str, Any] | None = None,
) -> MaxRate:
    """The highest load factor at which the fleet meets the objective.

    The load factor ``x`` runs the workload with every arrival time divided
    by ``x`` (``workload.scale_time(1 / x)``: ``x`` times the offered rate).
    From ``start`` the search doubles (or halves) ``x`` until it brackets
    the threshold, then bisects geometrically until the bracket's ratio is
    at most ``1 + rtol``; it returns the bracket's lower end, a load that
    met the objective. Each probe is one simulation.

    The search never leaves the loads the workload can take: not below the
    load at which its arrivals would pass 2**43 ms, not above the load at
    which they all fall within 1 µs (a higher load is the same run). It
    stops going down as soon as a probe misses the objective although no
    two requests were in service at once (open loop): every request ran
    alone, so no lower load can do better. Then, and when
    ``min_load`` is reached, the result is ``load=0.0`` with ``note``
    saying that no load meets the objective and why.

    Parameters
    ----------
    workload : Workload
    simulator : Simulator
        The fleet (probes run on a copy; ``simulator`` is not changed).
    slo_ttft_ms, slo_tpot_ms : float, optional
        Bounds on the ``percentile``-th TTFT and TPOT (at least one).
    percentile : float, default 99
    rtol : float, default 0.02
        Relative width of the final bracket.
    start : float, default 1.0
        First load factor probed.
    min_load, max_load : float
        Search limits (finite, ``0 < min_load <= start <= max_load``):
        below ``min_load`` the answer is 0.0; at ``max_load`` the search
        stops and returns it.
    usd_per_gpu_hour : float, optional
        GPU price, for ``usd_per_million_tokens``.
    run : dict, optional
        :meth:`~inferasim.sim.Simulator.run` options for every probe, e.g.
        ``{"closed_loop": True, "progress": False}``.

    Returns
    -------
    MaxRate

    Examples
    --------
    >>> import inferasim as ism
    >>> wl = ism.Workload.from_synthetic(200, rate=5.0, input_len=1024, output_len=32, seed=0)
    >>> sim = ism.Simulator(cost_model=ism.LinearCostModel(kv_tokens=64 * 512))
    >>> cap = ism.plan.max_rate(wl, sim, slo_ttft_ms=500, rtol=0.05, usd_per_gpu_hour=2.0,
    ...                         run={"progress": False})
    >>> bool(cap.probes["meets_slo"].any()), cap.load > 1
    (True, True)
    >>> bool(cap.probes.query("load > @cap.load * 1.05")["meets_slo"].any())
    False

    An objective no load can meet (a 1 ms TTFT for requests that take
    longer alone) is reported as such:

    >>> none = ism.plan.max_rate(wl, sim, slo_ttft_ms=1.0, run={"progress": False})
    >>> none.load, none.note
    (0.0, 'no load meets the objective: at load 0.0009766 no two requests ... so no lower load can do better')
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, got {type(workload).__name__}")
    _check_slo(slo_ttft_ms, slo_tpot_ms, percentile)
    if not (isinstance(rtol, (int, float)) and 0 < rtol < 1):
        raise ValueError(f"rtol must be in (0, 1), got {rtol!r}")
    for name, v in (("min_load", min_load), ("start", start), ("max_load", max_load)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(
                f"{name} must be a finite number, got {v!r} (the search probes loads between "
                "min_load and max_load, one simulation each)"
            )
    if not (0 < min_load <= start <= max_load):
        raise ValueError(
            f"need 0 < min_load <= start <= max_load, got {min_load!r}, {start!r}, {max_load!r}"
        )
    offered = _offered_rps(workload)
    lowest, highest = _load_limits(workload)
    if start < lowest:
        raise ValueError(
            f"start={start!r} is below {lowest:.4g}, the lowest load of this workload: "
            "scale_time would put its arrivals past 2**43 ms"
        )
    floor, ceiling = max(float(min_load), lowest), min(float(max_load), max(highest, start))
    options = run_options(run)
    sim = _simulator_with(simulator)
    probes: list[dict[str, Any]] = []

    def ok(x: float) -> bool:
        probes.append(_probe(workload, sim, x, slo_ttft_ms, slo_tpot_ms, percentile, options))
        return probes[-1]["meets_slo"]

    good: dict[str, Any] | None = None
    note = ""
    x = float(start)
    if ok(x):
        lo, good = x, probes[-1]
        hi = None
        while hi is None and lo < ceiling:
            x = min(lo * 2.0, ceiling)
            if ok(x):
                lo, good = x, probes[-1]
            else:
                hi = x
        if hi is None:
            note = (
                f"max_load={max_load!r} reached" if ceiling == max_load
                else f"at load {ceiling:.4g} every request arrives within 1 µs of the first: "
                "a higher load is the same run"
            )
    else:
        hi, lo = x, None
        while lo is None and hi > floor and not probes[-1]["runs_alone"]:
            x = max(hi / 2.0, floor)
            if ok(x):
                lo, good = x, probes[-1]
            else:
                hi = x
        if lo is None:
            if probes[-1]["runs_alone"]:
                why = (
                    f"at load {probes[-1]['load']:.4g} no two requests were in service at "
                    "once (each ran alone), so no lower load can do better"
                )
            elif floor > min_load:
                why = (
                    f"it is missed down to load {floor:.4g}, below which the workload's "
                    "arrivals would pass 2**43 ms"
                )
            else:
                why = f"it is missed down to min_load={min_load!r}"
            note = f"no load meets the objective: {why}"
    if lo is not None and hi is not None:
        while hi / lo > 1.0 + rtol:
            mid = math.sqrt(lo * hi)
            if ok(mid):
                lo, good = mid, probes[-1]
            else:
                hi = mid
    frame = pd.DataFrame(probes)
    if good is None:
        return MaxRate(
            0.0, 0.0, math.inf, math.nan, math.nan, probes[-1]["gpus"], math.nan, frame, note
        )
    return MaxRate(
        load=good["load"],
        rate_rps=offered * good["load"],
        scale_time=1.0 / good["load"],
        ttft_ms=good["ttft_ms"],
        tpot_ms=good["tpot_ms"],
        gpus=good["gpus"],
        usd_per_million_tokens=_usd_per_million(good["gpus"], good["tok_s"], usd_per_gpu_hour),
        probes=frame,
        note=note,
    )


def min_replicas(
    workload: Workload,
    simulator: Any,
    *,
    load: float = 1.0,
    rate: float | None = None,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    percentile: float = 99.0,
    max_replicas: int = 1024,
    usd_per_gpu_hour: float | None = None,
    run: Mapping[str, Any] | None = None,
) -> MinReplicas:
    """The fewest replicas of a simulator's fleet that meet the objective at a load.

    Probes 1, 2, 4, ... replicas until one meets the objective, then
    bisects between the last that missed and the first that met it. Each
    probe is one simulation with every other parameter of ``simulator``
    kept. It stops early when a probe misses the objective although no two
    requests were in service at once on a replica (open loop): more
    replicas cannot do better; the result is then ``replicas=0`` with a
    ``note`` saying so.

    Parameters
    ----------
    workload : Workload
    simulator : Simulator
        The fleet to size: an aggregated one (``replicas`` an int, which is
        ignored); probes run on copies, ``simulator`` is not changed. A
        prefill/decode fleet (``replicas=Disaggregated(...)``) is refused:
        one replica count cannot scale its two pools (sweep them instead).
    load : float, default 1.0
        Load multiplier (``workload.scale_time(1 / load)``).
    rate : float, optional
        Target offered rate in requests per second instead of ``load``.
    slo_ttft_ms, slo_tpot_ms : float, optional
        Bounds on the ``percentile``-th TTFT and TPOT (at least one).
    percentile : float, default 99
    max_replicas : int, default 1024
        Give up above this many (the answer is then 0).
    usd_per_gpu_hour : float, optional
        GPU price, for ``usd_per_million_tokens``.
    run : dict, optional
        :meth:`~inferasim.sim.Simulator.run` options for every probe.

    Returns
    -------
    MinReplicas

    Examples
    --------
    >>> import inferasim as ism
    >>> # one 10 ms request every 3 ms: round-robin over 4 replicas gives each one every 12 ms
    >>> wl = ism.Workload.from_requests([3.0 * k for k in range(120)], [100] * 120, [1] * 120)
    >>> sim = ism.Simulator(routing="round_robin", kv_tokens=8 * 512,
    ...                     engine=ism.EngineConfig(max_num_seqs=1, max_batched_tokens=100),
    ...                     cost_model=ism.LinearCostModel())
    >>> ism.plan.min_replicas(wl, sim, slo_ttft_ms=11.0, run={"progress": False}).replicas
    4
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, got {type(workload).__name__}")
    _check_slo(slo_ttft_ms, slo_tpot_ms, percentile)
    offered = _offered_rps(workload)
    if rate is not None:
        if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a positive finite number, got {rate!r}")
        load = rate / offered
    if not (isinstance(load, (int, float)) and math.isfinite(load) and load > 0):
        raise ValueError(f"load must be a positive finite number, got {load!r}")
    if isinstance(max_replicas, bool) or not isinstance(max_replicas, int) or max_replicas < 1:
        raise ValueError(f"max_replicas must be a positive integer, got {max_replicas!r}")
    options = run_options(run)
    _simulator_with(simulator)  # type check only
    from inferasim.sim import Disaggregated

    if isinstance(simulator.replicas, Disaggregated):
        raise ValueError(
            f"min_replicas sizes an aggregated fleet (replicas=int); this simulator has the "
            f"prefill/decode fleet replicas={simulator.replicas!r}, which one replica count "
            "cannot scale: size its pools with inferasim.sweep over replicas__prefill and "
            "replicas__decode (then plan.pareto on gpus and the latency)"
        )
    lowest, _ = _load_limits(workload)
    if load < lowest:
        given = f"rate={rate!r}" if rate is not None else f"load={load!r}"
        raise ValueError(
            f"{given} is below load {lowest:.4g}, the lowest this workload can take: "
            "scale_time would put its arrivals past 2**43 ms"
        )
    probes: list[dict[str, Any]] = []
    met: dict[int, dict[str, Any]] = {}

    def ok(r: int) -> bool:
        sim = _simulator_with(simulator, replicas=r)
        probes.append(
            _probe(workload, sim, float(load), slo_ttft_ms, slo_tpot_ms, percentile, options)
        )
        if probes[-1]["meets_slo"]:
            met[r] = probes[-1]
        return probes[-1]["meets_slo"]

    lo, hi = 0, None  # lo: most replicas known to miss; hi: fewest known to meet
    r = 1
    while r <= max_replicas:
        if ok(r):
            hi = r
            break
        lo = r
        if probes[-1]["alone_on_replicas"]:
            break
        r = min(r * 2, max_replicas) if r < max_replicas else max_replicas + 1
    frame_rows = probes
    if hi is None:
        if probes[-1]["alone_on_replicas"]:
            why = (
                f"with {probes[-1]['replicas']} replicas no two requests were in service at "
                "once on a replica (each ran alone), so more replicas cannot do better"
            )
        else:
            why = f"it is missed up to max_replicas={max_replicas}"
        return MinReplicas(
            0, 0, float(load), offered * load, math.nan, math.nan, math.nan,
            pd.DataFrame(frame_rows), f"no fleet meets the objective: {why}",
        )
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    best = met[hi]
    return MinReplicas(
        replicas=hi,
        gpus=best["gpus"],
        load=float(load),
        rate_rps=offered * load,
        ttft_ms=best["ttft_ms"],
        tpot_ms=best["tpot_ms"],
        usd_per_million_tokens=_usd_per_million(best["gpus"], best["tok_s"], usd_per_gpu_hour),
        probes=pd.DataFrame(frame_rows),
    )


# ----------------------------------------------------------------- frames
def pareto(
    frame: pd.DataFrame, x: str, y: str, *, maximize: tuple[str, ...] | list[str] = ()
) -> pd.DataFrame:
    """The rows of a frame that no other row beats on both ``x`` and ``y``.

    A row is dominated when another row is at least as good on both columns
    and strictly better on one; "good" is small unless the column is named
    in ``maximize``. Rows with a missing ``x`` or ``y`` (failed runs) are
    never on the front; rows with equal ``x`` and ``y`` are both kept.

    Parameters
    ----------
    frame : pandas.DataFrame
        E.g. a :func:`inferasim.sweep` frame.
    x, y : str
        Column names.
    maximize : sequence of str, default ()
        Columns where larger is better.

    Returns
    -------
    pandas.DataFrame
        The non-dominated rows (original index), sorted by ``x`` then ``y``
        from best to worst on ``x``.

    Examples
    --------
    >>> df = pd.DataFrame({"gpus": [4, 8, 8, 16, 16], "ttft": [900.0, 300.0, 500.0, 300.0, 100.0]})
    >>> pareto(df, "gpus", "ttft").index.tolist()
    [0, 1, 4]
    """
    for col in (x, y):
        if col not in frame.columns:
            raise KeyError(f"pareto: no column {col!r}; columns are {list(frame.columns)}")
    for col in maximize:
        if col not in (x, y):
            raise ValueError(f"maximize names {col!r}, which is neither x={x!r} nor y={y!r}")
    d = frame.dropna(subset=[x, y])
    sx = d[x].to_numpy(dtype=np.float64) * (-1.0 if x in maximize else 1.0)
    sy = d[y].to_numpy(dtype=np.float64) * (-1.0 if y in maximize else 1.0)
    order = np.lexsort((sy, sx))  # by x, then y
    keep: list[int] = []
    best_y = math.inf
    last: tuple[float, float] | None = None
    for i in order:
        point = (sx[i], sy[i])
        if sy[i] < best_y or point == last:
            keep.append(int(i))
            if sy[i] < best_y:
                best_y, last = sy[i], point
    return d.iloc[keep]


def with_cost(frame: pd.DataFrame, usd_per_gpu_hour: float) -> pd.DataFrame:
    """Add fleet cost columns to a sweep frame from a GPU price.

    ``usd_per_hour`` = ``gpus * usd_per_gpu_hour``;
    ``usd_per_million_tokens`` = that hour's cost over the prompt plus output
    tokens served in an hour (``input_tok_s + output_tok_s``), times 1e6;
    ``usd_per_million_output_tokens`` the same over output tokens only.
    The fleet is paid for whether busy or not, so the cost per token falls
    as load rises.

    Parameters
    ----------
    frame : pandas.DataFrame
        With ``gpus``, ``input_tok_s`` and ``output_tok_s`` (a default
        :func:`inferasim.sweep` frame has them).
    usd_per_gpu_hour : float
        Price of one GPU for an hour.

    Returns
    -------
    pandas.DataFrame
        A copy with the three columns added.

    Examples
    --------
    >>> df = pd.DataFrame({"gpus": [2], "input_tok_s": [900.0], "output_tok_s": [100.0]})
    >>> with_cost(df, 3.6).round(2).to_dict("records")
    [{'gpus': 2, 'input_tok_s': 900.0, 'output_tok_s': 100.0, 'usd_per_hour': 7.2, 'usd_per_million_tokens': 2.0, 'usd_per_million_output_tokens': 20.0}]
    """
    if not (isinstance(usd_per_gpu_hour, (int, float)) and usd_per_gpu_hour >= 0):
        raise ValueError(f"usd_per_gpu_hour must be a number >= 0, got {usd_per_gpu_hour!r}")
    missing = [c for c in ("gpus", "input_tok_s", "output_tok_s") if c not in frame.columns]
    if missing:
        raise KeyError(f"with_cost needs columns {missing}")
    out = frame.copy()
    per_hour = out["gpus"].astype(float) * float(usd_per_gpu_hour)
    per_s = per_hour / 3600.0
    out["usd_per_hour"] = per_hour
    out["usd_per_million_tokens"] = per_s / (out["input_tok_s"] + out["output_tok_s"]) * 1e6
    out["usd_per_million_output_tokens"] = per_s / out["output_tok_s"] * 1e6
    return out
