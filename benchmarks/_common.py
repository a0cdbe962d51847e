"""Shared helpers for the benchmark scripts: timing, peak memory, trace lookup, tables."""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def trace_path(filename: str) -> Path:
    """A FAST'25 trace by file name, found as :func:`inferasim.workload.traces.find_trace` finds it."""
    from inferasim.errors import TraceNotFoundError
    from inferasim.workload.traces import TRACES, find_trace

    name = next(n for n, info in TRACES.items() if info.filename == filename)
    try:
        return find_trace(name, download=False)
    except TraceNotFoundError as exc:
        raise SystemExit(str(exc)) from None


def median_time(fn: Callable[[], Any], repeats: int = 5) -> tuple[float, Any]:
    """Median wall time (s) of ``fn()`` over ``repeats`` runs, and its last result."""
    times, result = [], None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _reference_loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def machine_speed_s(repeats: int = 3) -> float:
    """Seconds a fixed pure-Python loop takes here now (min of ``repeats``): a speed index.

    This machine's speed drifts by up to 2.5x over hours (the same tree, the same case:
    5.5 s one evening, 14 s the next morning). Benchmarks print this index beside their
    times, so numbers taken at different times can be compared: a run is comparable to
    another only at a similar index (or in alternating pairs taken minutes apart).
    """
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        _reference_loop(5_000_000)
        best = min(best, time.perf_counter() - start)
    return best


def core_build() -> str:
    """``"compiled"`` when the simulator core runs as mypyc extensions (the normal
    ``pip install``), ``"interpreted"`` when it runs from source, ``"mixed"`` otherwise
    (see :func:`inferasim.sim.native_modules`); benchmarks print it with their times."""
    from inferasim.sim import native_modules

    builds = set(native_modules().values())
    return builds.pop() if len(builds) == 1 else "mixed"


def peak_memory_mb(fn: Callable[[], Any]) -> float:
    """Peak Python-heap allocation (MB) of one ``fn()`` call, measured by tracemalloc.

    numpy allocations are traced too (numpy reports them to tracemalloc).
    """
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 1e6


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print rows of equal keys as an aligned text table."""
    keys = list(rows[0])
    cells = [[str(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))
