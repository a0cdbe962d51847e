"""Measured runs in: the load generators' per-request results, and how far a simulation is from them.

Two readers give a frame with the column names and units of
:attr:`SimResult.requests <inferasim.SimResult.requests>` (``arrival_ms``,
``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms`` in ms; ``input_len``,
``output_len`` in tokens; ``status`` ``"finished"`` or ``"failed"``,
``reason``), one row per request in the file's order:

* :func:`read_aiperf`: NVIDIA AIPerf's ``profile_export.jsonl``. Format read
  from its source, ai-dynamo/aiperf 0.1.1 (commit db4f639, October 2025):
  ``aiperf/common/models/record_models.py`` (``MetricRecordInfo``: one JSON
  object a line with ``metadata``, ``metrics`` and ``error``;
  ``MetricRecordMetadata`` with ``request_start_ns``, ``request_end_ns``
  (``time.time_ns()`` epoch ns), ``x_request_id``, ``x_correlation_id``,
  ``conversation_id``, ``turn_index``, ``benchmark_phase``,
  ``was_cancelled``), ``post_processors/record_export_results_processor.py``
  (metrics written in their display units as ``{"value", "unit"}``) and
  the metric classes under ``aiperf/metrics/types/``:
  ``time_to_first_token``, ``request_latency``, ``inter_token_latency``
  (``(request_latency - ttft) / (osl - 1)``, the simulator's ``tpot_ms``),
  all ms; ``input_sequence_length`` and ``output_sequence_length`` (tokens;
  ``error_isl`` for a failed request); and ``docs/tutorials/working-with-profile-exports.md``.
* :func:`read_vllm_bench`: ``vllm bench serve --save-result --save-detailed``
  JSON. Format read from vllm-project/vllm ``vllm/benchmarks/serve.py``
  (commit def9ce8) and ``vllm/benchmarks/lib/endpoint_request_func.py``
  (``RequestFuncOutput``): per-request lists ``input_lens``,
  ``output_lens``, ``ttfts`` (s), ``itls`` (a list of inter-chunk gaps per
  request, s), ``errors`` (``""`` on success) and, in the versions that
  write it, ``start_times`` (``time.perf_counter()`` s). Without
  ``--save-detailed`` the lists are not written and the reader says so.

:func:`compare` puts a measured frame next to a simulated run: each
metric's mean and percentiles side by side with their error, and, when
the two can be matched request by request, the per-request error.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike, fspath
from typing import IO, Any

import numpy as np
import orjson
import pandas as pd

from inferasim.errors import WorkloadError

__all__ = ["read_aiperf", "read_vllm_bench", "compare", "MEASURED_COLUMNS", "COMPARE_METRICS"]

#: The columns of a measured frame, in order (a subset of ``SimResult.requests``'s
#: names); the frame's index is ``request_id``, as ``SimResult.requests``'s.
MEASURED_COLUMNS = (
    "arrival_ms", "ttft_ms", "tpot_ms", "itl_ms", "max_itl_ms", "e2e_ms",
    "input_len", "output_len", "status", "reason",
)
#: The latency metrics :func:`compare` compares by default.
COMPARE_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")

_TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}


def _read(path: str | PathLike[str] | IO[Any]) -> tuple[bytes, str]:
    if hasattr(path, "read"):
        data = path.read()  # type: ignore[union-attr]
        name = str(getattr(path, "name", "<buffer>"))
    else:
        name = fspath(path)  # type: ignore[arg-type]
        with open(name, "rb") as fh:
            data = fh.read()
    if isinstance(data, str):
        data = data.encode()
    if not data.strip():
        raise WorkloadError("empty file: no requests", source=name)
    return data, name


def _metric(metrics: dict[str, Any], tag: str, kind: str, source: str, line: int) -> float:
    """A metric's value in ms (``kind="time"``) or tokens, NaN when absent."""
    entry = metrics.get(tag)
    if entry is None:
        return float("nan")
    if not isinstance(entry, dict) or "value" not in entry:
        raise WorkloadError(f"expected {{'value': ..., 'unit': ...}}, got {entry!r:.60}",
                            source=source, line=line, field=f"metrics.{tag}")
    value, unit = entry["value"], str(entry.get("unit", ""))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WorkloadError(f"not a number: {value!r:.40}", source=source, line=line,
                            field=f"metrics.{tag}")
    if kind == "time":
        if unit not in _TIME_TO_MS:
            raise WorkloadError(f"unknown time unit {unit!r} (known: {', '.join(_TIME_TO_MS)})",
                                source=source, line=line, field=f"metrics.{tag}")
        return float(value) * _TIME_TO_MS[unit]
    if unit != "tokens":
        raise WorkloadError(f"expected unit 'tokens', got {unit!r}", source=source, line=line,
                            field=f"metrics.{tag}")
    return float(value)


def read_aiperf(
    path: str | PathLike[str] | IO[Any], *, phase: str | None = "profiling"
) -> pd.DataFrame:
    """Read AIPerf's per-request export (``profile_export.jsonl``) into a measured frame.

    Parameters
    ----------
    path : str, path or file-like
        The JSON-lines export (see the module docstring for the format).
    phase : str or None, default "profiling"
        Keep the records of this ``benchmark_phase`` (AIPerf's warm-up
        records are ``"warmup"``); None keeps every record, with a
        ``phase`` column.

    Returns
    -------
    pandas.DataFrame
        :data:`MEASURED_COLUMNS` plus ``session_id`` (``x_correlation_id``)
        and ``turn`` (``turn_index + 1``), indexed by ``request_id``
        (``x_request_id``); ``arrival_ms`` is ``request_start_ns`` in ms after
        the first request (rebased in integer ns); ``ttft_ms``,
        ``e2e_ms`` (``request_latency``); ``tpot_ms`` and ``itl_ms`` both
        AIPerf's ``inter_token_latency``; ``max_itl_ms`` the largest
        ``inter_chunk_latency``; NaN where AIPerf wrote no value (a
        non-streaming run has no TTFT; one output token has no ITL). A
        record with an ``error`` has ``status`` ``"failed"`` and ``reason``
        ``"<type> (<code>): <message>"``; its ``input_len`` is ``error_isl``.

    Raises
    ------
    WorkloadError
        Malformed JSON, a record without ``metadata.request_start_ns``, a
        metric that is not ``{"value", "unit"}`` or has an unknown unit; the
        message names the file, the line and the field.

    Examples
    --------
    >>> import io, json
    >>> rec = lambda start, ttft, lat, isl, osl, itl: json.dumps({
    ...     "metadata": {"session_num": 0, "x_request_id": f"r{start}", "request_start_ns": start,
    ...                  "request_end_ns": start + int(lat * 1e6), "worker_id": "w",
    ...                  "record_processor_id": "p", "benchmark_phase": "profiling"},
    ...     "metrics": {"time_to_first_token": {"value": ttft, "unit": "ms"},
    ...                 "request_latency": {"value": lat, "unit": "ms"},
    ...                 "inter_token_latency": {"value": itl, "unit": "ms"},
    ...                 "input_sequence_length": {"value": isl, "unit": "tokens"},
    ...                 "output_sequence_length": {"value": osl, "unit": "tokens"}},
    ...     "error": None})
    >>> text = rec(10**18, 20.0, 50.0, 100, 4, 10.0) + "\\n" + rec(10**18 + 5 * 10**6, 30.0, 30.0, 80, 1, 0) + "\\n"
    >>> df = read_aiperf(io.StringIO(text))
    >>> df[["arrival_ms", "ttft_ms", "tpot_ms", "e2e_ms", "input_len", "output_len"]].values.tolist()
    [[0.0, 20.0, 10.0, 50.0, 100.0, 4.0], [5.0, 30.0, 0.0, 30.0, 80.0, 1.0]]
    """
    data, source = _read(path)
    rows: list[dict[str, Any]] = []
    starts: list[int] = []
    for line, text in enumerate(data.split(b"\n"), start=1):
        if not text.strip():
            continue
        try:
            rec = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise WorkloadError(f"malformed JSON: {exc.msg}", source=source, line=line) from None
        meta = rec.get("metadata") if isinstance(rec, dict) else None
        if not isinstance(meta, dict) or type(meta.get("request_start_ns")) is not int:
            raise WorkloadError("expected a record with metadata.request_start_ns (integer ns)",
                                source=source, line=line, field="metadata.request_start_ns")
        if phase is not None and meta.get("benchmark_phase", "profiling") != phase:
            continue
        metrics = rec.get("metrics") or {}
        error = rec.get("error")
        isl = _metric(metrics, "input_sequence_length", "tokens", source, line)
        if error and np.isnan(isl):
            isl = _metric(metrics, "error_isl", "tokens", source, line)
        itl = _metric(metrics, "inter_token_latency", "time", source, line)
        chunks = metrics.get("inter_chunk_latency")
        gaps = chunks.get("value") if isinstance(chunks, dict) else None
        unit = _TIME_TO_MS.get(str(chunks.get("unit", "ms")), 1.0) if isinstance(chunks, dict) else 1.0
        turn = meta.get("turn_index")
        row = {
            "request_id": meta.get("x_request_id"),
            "ttft_ms": _metric(metrics, "time_to_first_token", "time", source, line),
            "tpot_ms": itl,
            "itl_ms": itl,
            "max_itl_ms": float(max(gaps)) * unit if isinstance(gaps, list) and gaps else float("nan"),
            "e2e_ms": _metric(metrics, "request_latency", "time", source, line),
            "input_len": isl,
            "output_len": _metric(metrics, "output_sequence_length", "tokens", source, line),
            "status": "failed" if error else "finished",
            "reason": (
                f"{error.get('type')} ({error.get('code')}): {error.get('message')}"
                if isinstance(error, dict) else (str(error) if error else None)
            ),
            "session_id": meta.get("x_correlation_id"),
            "turn": (int(turn) + 1) if isinstance(turn, int) else np.nan,
        }
        if phase is None:
            row["phase"] = meta.get("benchmark_phase")
        rows.append(row)
        starts.append(meta["request_start_ns"])
    if not rows:
        raise WorkloadError(f"no records of benchmark_phase {phase!r}", source=source)
    frame = pd.DataFrame(rows)
    for col in ("request_id", "reason", "session_id"):
        frame[col] = pd.Series([r[col] for r in rows], dtype=object)
    ns = np.asarray(starts, dtype=np.int64)
    frame.insert(1, "arrival_ms", (ns - ns.min()).astype(np.float64) / 1e6)
    return frame.set_index("request_id")


def read_vllm_bench(path: str | PathLike[str] | IO[Any], *, run: int | None = None) -> pd.DataFrame:
    """Read a ``vllm bench serve --save-result --save-detailed`` JSON file into a measured frame.

    Parameters
    ----------
    path : str, path or file-like
        The result file (see the module docstring for the format). With
        ``--append-result`` it holds one JSON object a line, one per run.
    run : int, optional
        Which run of an appended file (0-based, negative from the end);
        required when the file holds more than one.

    Returns
    -------
    pandas.DataFrame
        :data:`MEASURED_COLUMNS`, one row per request in the file's order
        (the order vLLM sent them), indexed by ``request_id`` 0..n-1; ``arrival_ms``
        from ``start_times`` (ms after the first request; NaN when the file
        has no ``start_times``); ``ttft_ms`` (``ttfts``); ``e2e_ms`` =
        TTFT + the sum of the request's ``itls`` (vLLM's latency is the
        last chunk's time, so this is exact); ``tpot_ms`` = the sum of
        ``itls`` / (``output_len`` - 1), vLLM's TPOT; ``itl_ms`` the mean
        and ``max_itl_ms`` the largest inter-chunk gap (the same as TPOT
        when every chunk carries one token). A request with a non-empty
        ``errors`` entry is ``"failed"`` (its latencies NaN), ``reason`` the
        error's last line.

    Raises
    ------
    WorkloadError
        Malformed JSON, a file without the per-request lists (saved without
        ``--save-detailed``), lists of different lengths; naming the file
        and field.

    Examples
    --------
    >>> import io, json
    >>> res = {"input_lens": [100, 80], "output_lens": [3, 0], "ttfts": [0.02, 0.0],
    ...        "itls": [[0.01, 0.012], []], "errors": ["", "Bad Gateway"], "start_times": [7.0, 7.005]}
    >>> df = read_vllm_bench(io.StringIO(json.dumps(res)))
    >>> df[["arrival_ms", "ttft_ms", "tpot_ms", "e2e_ms", "status"]].round(6).values.tolist()
    [[0.0, 20.0, 11.0, 42.0, 'finished'], [5.0, nan, nan, nan, 'failed']]
    """
    data, source = _read(path)
    try:
        objs = [orjson.loads(x) for x in data.split(b"\n") if x.strip()] if data.lstrip()[:1] == b"{" \
            and b"\n{" in data.strip() else [orjson.loads(data)]
    except orjson.JSONDecodeError as exc:
        raise WorkloadError(f"malformed JSON: {exc.msg}", source=source) from None
    if run is None and len(objs) > 1:
        raise WorkloadError(f"the file holds {len(objs)} runs (--append-result); pass run=", source=source)
    res = objs[0 if run is None else run]
    need = ("input_lens", "output_lens", "ttfts", "itls")
    missing = [k for k in need if k not in res]
    if missing:
        raise WorkloadError(
            f"no per-request lists {missing}: save the run with --save-result --save-detailed",
            source=source, field=missing[0],
        )
    n = len(res["input_lens"])
    for k in (*need, "errors", "start_times"):
        if k in res and len(res[k]) != n:
            raise WorkloadError(f"has {len(res[k])} entries, input_lens has {n}", source=source, field=k)
    errors = [str(e or "") for e in res.get("errors", [""] * n)]
    ok = np.array([not e for e in errors])
    ttft = np.asarray(res["ttfts"], dtype=np.float64) * 1e3
    out_len = np.asarray(res["output_lens"], dtype=np.float64)
    itls = [np.asarray(x, dtype=np.float64) * 1e3 for x in res["itls"]]
    decode = np.array([x.sum() for x in itls])
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out_len > 1, decode / np.maximum(out_len - 1, 1), np.nan)
    mean_gap = np.array([x.mean() if x.size else np.nan for x in itls])
    max_gap = np.array([x.max() if x.size else np.nan for x in itls])
    nan = np.full(n, np.nan)
    if "start_times" in res:
        st = np.asarray(res["start_times"], dtype=np.float64)
        arrival = (st - st.min()) * 1e3
    else:
        arrival = nan.copy()
    return pd.DataFrame({
        "arrival_ms": arrival,
        "ttft_ms": np.where(ok, ttft, nan),
        "tpot_ms": np.where(ok, tpot, nan),
        "itl_ms": np.where(ok, mean_gap, nan),
        "max_itl_ms": np.where(ok, max_gap, nan),
        "e2e_ms": np.where(ok, ttft + decode, nan),
        "input_len": np.asarray(res["input_lens"], dtype=np.float64),
        "output_len": out_len,
        "status": np.where(ok, "finished", "failed").astype(object),
        "reason": pd.Series([e.strip().splitlines()[-1] if e.strip() else None for e in errors],
                            dtype=object),
    }).rename_axis("request_id")


def _requests(x: Any, what: str) -> pd.DataFrame:
    frame = getattr(x, "requests", x)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{what} must be a SimResult or a DataFrame of requests, got {type(x).__name__}")
    return frame


def _request_ids(frame: pd.DataFrame) -> np.ndarray | None:
    """A frame's request ids as text: its ``request_id`` column, else its index of that name."""
    if "request_id" in frame.columns:
        return frame["request_id"].astype(str).to_numpy()
    if frame.index.name == "request_id":
        return frame.index.astype(str).to_numpy()
    return None


def _match(meas: pd.DataFrame, sim: pd.DataFrame) -> tuple[str | None, np.ndarray, np.ndarray]:
    """Row pairs of the two frames: by shared request ids, else by arrival order (same count)."""
    ids_m, ids_s = _request_ids(meas), _request_ids(sim)
    if ids_m is not None and ids_s is not None:
        a, b = ids_m, ids_s
        if len(set(a)) == len(a) == len(b) == len(set(b)) and set(a) == set(b):
            pos = {v: i for i, v in enumerate(b)}
            return "request_id", np.arange(len(a)), np.array([pos[v] for v in a], dtype=np.int64)
    if len(meas) == len(sim) and len(meas):
        def order(f: pd.DataFrame) -> np.ndarray:
            arr = f["arrival_ms"].to_numpy(dtype=float) if "arrival_ms" in f else np.full(len(f), np.nan)
            return np.arange(len(f)) if np.isnan(arr).any() else np.argsort(arr, kind="stable")
        return "arrival_order", order(meas), order(sim)
    return None, np.zeros(0, np.int64), np.zeros(0, np.int64)


def compare(
    measured: Any,
    simulated: Any,
    *,
    metrics: Sequence[str] = COMPARE_METRICS,
    percentiles: Sequence[float] = (50, 90, 99),
) -> pd.DataFrame:
    """Each metric's statistics, measured and simulated side by side, with their error.

    Parameters
    ----------
    measured : DataFrame
        A measured frame (:func:`read_aiperf`, :func:`read_vllm_bench`) or
        any frame with the metric columns (and ``status``).
    simulated : SimResult or DataFrame
        A run (its ``requests`` frame is used).
    metrics : sequence of str, default :data:`COMPARE_METRICS`
    percentiles : sequence of float, default (50, 90, 99)

    Returns
    -------
    pandas.DataFrame
        Tidy, one row per ``metric`` and ``stat`` (``mean``, ``p50``, ...):
        ``measured``, ``simulated`` (over each side's finished requests),
        ``error`` (simulated - measured), ``abs_error``, ``rel_error``
        (error / measured) and ``n_measured``, ``n_simulated``. When the
        requests can be paired (both have the same ``request_id`` values,
        else the same number of requests, paired in arrival order, or in
        file order when a side has no arrivals) a ``per_request`` row per
        metric holds the means over the pairs finished on both sides:
        ``measured`` and ``simulated`` the mean values, ``error`` the mean
        difference, ``abs_error`` the mean absolute difference,
        ``rel_error`` the mean of ``abs(difference) / measured``. ``attrs["matched"]``
        says how requests were paired (``"request_id"``, ``"arrival_order"``
        or None).

    Examples
    --------
    >>> sim = pd.DataFrame({"arrival_ms": [0.0, 5.0], "ttft_ms": [10.0, 20.0],
    ...                     "status": ["finished"] * 2}).rename_axis("request_id")
    >>> meas = sim.assign(ttft_ms=sim["ttft_ms"] + 2.5)
    >>> cmp = compare(meas, sim, metrics=["ttft_ms"], percentiles=[50])  # per request: (2.5/12.5 + 2.5/22.5) / 2
    >>> cmp[["stat", "measured", "simulated", "error", "rel_error"]].values.tolist()
    [['mean', 17.5, 15.0, -2.5, -0.14285714285714285], ['p50', 17.5, 15.0, -2.5, -0.14285714285714285], ['per_request', 17.5, 15.0, -2.5, 0.15555555555555556]]
    """
    meas = _requests(measured, "measured")
    sim = _requests(simulated, "simulated")
    for m in metrics:
        for f, what in ((meas, "measured"), (sim, "simulated")):
            if m not in f.columns:
                raise ValueError(f"metrics: {m!r} is not a column of the {what} frame")
    done_m = meas["status"].to_numpy() == "finished" if "status" in meas else np.ones(len(meas), bool)
    done_s = sim["status"].to_numpy() == "finished" if "status" in sim else np.ones(len(sim), bool)
    how, im, isim = _match(meas, sim)
    rows = []
    stats: list[tuple[str, float | None]] = [("mean", None), *((f"p{p:g}", float(p)) for p in percentiles)]
    for m in metrics:
        a = meas[m].to_numpy(dtype=float)[done_m]
        b = sim[m].to_numpy(dtype=float)[done_s]
        a, b = a[~np.isnan(a)], b[~np.isnan(b)]
        for name, q in stats:
            def stat(v: np.ndarray, q: float | None = q) -> float:
                if not v.size:
                    return float("nan")
                return float(v.mean()) if q is None else float(np.percentile(v, q))
            rows.append({"metric": m, "stat": name, "measured": stat(a), "simulated": stat(b),
                         "n_measured": a.size, "n_simulated": b.size})
        if how is not None:
            x = meas[m].to_numpy(dtype=float)[im]
            y = sim[m].to_numpy(dtype=float)[isim]
            keep = done_m[im] & done_s[isim] & ~np.isnan(x) & ~np.isnan(y)
            x, y = x[keep], y[keep]
            d = y - x
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = float(np.mean(np.abs(d) / x)) if x.size else float("nan")
            rows.append({
                "metric": m, "stat": "per_request",
                "measured": float(x.mean()) if x.size else float("nan"),
                "simulated": float(y.mean()) if y.size else float("nan"),
                "error": float(d.mean()) if d.size else float("nan"),
                "abs_error": float(np.abs(d).mean()) if d.size else float("nan"),
                "rel_error": rel, "n_measured": int(x.size), "n_simulated": int(y.size),
            })
    out = pd.DataFrame(rows)
    plain = out["stat"] != "per_request"
    err = out["simulated"] - out["measured"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out.loc[plain, "error"] = err[plain]
        out.loc[plain, "abs_error"] = err[plain].abs()
        out.loc[plain, "rel_error"] = (err / out["measured"])[plain]
    out = out[["metric", "stat", "measured", "simulated", "error", "abs_error", "rel_error",
               "n_measured", "n_simulated"]]
    out.attrs["matched"] = how
    return out
