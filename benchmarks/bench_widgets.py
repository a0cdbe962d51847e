"""Benchmark the cache-sizing widget and the figure pipeline on the FAST'25 traces.

Prints one table: operation, median seconds over ``--repeats`` runs, target,
pass/fail. The widget's hit-rate view must update in well under a second per
change (target 0.25 s): a slider move only reads the cached curve and
re-renders one PNG.

Usage::

    python benchmarks/bench_widgets.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median_time, print_table, trace_path

from inferasim import Workload, figures
from inferasim.widgets import cache_sizing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    workloads = {
        "conversation": Workload.from_mooncake(trace_path("conversation_trace.jsonl")),
        "synthetic": Workload.from_mooncake(trace_path("synthetic_trace.jsonl")),
    }
    rows = []

    def row(name: str, seconds: float, target: float | None) -> None:
        ok = "" if target is None else ("pass" if seconds <= target else "FAIL")
        rows.append(
            {
                "operation": name,
                "median_s": f"{seconds:.3f}",
                "target_s": "" if target is None else f"{target:g}",
                "ok": ok,
            }
        )

    start = time.perf_counter()
    widget = cache_sizing(workloads, sim_window_ms=10 * 60_000)
    row("build widget (LRU curve of one trace)", time.perf_counter() - start, None)
    capacities = iter([1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7, 1e8] * args.repeats)
    t, _ = median_time(
        lambda: setattr(widget.controls["capacity"], "value", next(capacities)), args.repeats
    )
    row("capacity slider move", t, 0.25)
    widget.controls["trace"].value = "synthetic"  # compute its curve once
    traces = iter(["conversation", "synthetic"] * args.repeats)
    t, _ = median_time(
        lambda: setattr(widget.controls["trace"], "value", next(traces)), args.repeats
    )
    row("trace switch (curve cached)", t, 0.25)
    widget.controls["trace"].value = "conversation"
    start = time.perf_counter()
    widget.controls["policy"].value = "opt"
    row("first switch to OPT (17 replays, then cached)", time.perf_counter() - start, None)
    policies = iter(["lru", "opt"] * args.repeats)
    t, _ = median_time(
        lambda: setattr(widget.controls["policy"], "value", next(policies)), args.repeats
    )
    row("policy switch (curve cached)", t, 0.25)
    t, _ = median_time(widget.simulate, max(args.repeats // 2, 1))
    row("simulate button: 10 min of conversation, 4 replicas", t, None)
    start = time.perf_counter()
    figures.make_figures("/tmp/inferasim-bench-figures", quick=False)
    row("make_figures: all figures, full traces", time.perf_counter() - start, None)
    print_table(rows)


if __name__ == "__main__":
    main()
