"""Benchmark ``inferasim figures`` on the FAST'25 traces: wall and total CPU.

Prints three tables:

1. start-up: wall and CPU of ``python -c "import inferasim.figures"`` and of
   ``inferasim figures --list`` (a fresh interpreter each, min of 3);
2. the whole command as a user runs it (``make_figures`` with its default
   worker pool): wall, and total CPU (user + sys) of this process *and its
   children* (``resource.getrusage``), min and median over ``--repeats``;
3. one row a figure, from a run in this process only (``jobs=1``), so that
   each figure's CPU is its total CPU: a study shared by several figures is
   counted at the first figure that uses it.

CPU is the number to compare on a shared machine; the load average is
printed before and after.

Usage::

    python benchmarks/bench_figures.py [--repeats 2] [--out DIR] [--skip-serial]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import trace_path

from inferasim.figures import FIGURES, FigureData, make_figures
from inferasim.style import save_figure


def cpu_total() -> float:
    """User + sys CPU seconds of this process and of its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def startup(repeats: int = 3) -> list[tuple[str, float, float]]:
    """Min wall and CPU of a fresh interpreter running each command."""
    cmds = {
        "import inferasim.figures": [sys.executable, "-c", "import inferasim.figures"],
        "inferasim figures --list": [
            sys.executable, "-c", "import sys; from inferasim.cli import main; "
            "sys.argv = ['inferasim', 'figures', '--list']; main()",
        ],
    }
    rows = []
    for label, cmd in cmds.items():
        walls, cpus = [], []
        for _ in range(repeats):
            before = cpu_total()
            start = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - start)
            cpus.append(cpu_total() - before)
        rows.append((label, min(walls), min(cpus)))
    return rows


def whole_run(out: Path, traces: Path) -> tuple[float, float]:
    before, start = cpu_total(), time.perf_counter()
    make_figures(out, traces, formats=("pdf", "png"))
    return time.perf_counter() - start, cpu_total() - before


def serial_run(out: Path, traces: Path) -> list[tuple[str, float, float]]:
    data = FigureData(traces)
    start, cpu = time.perf_counter(), time.process_time()
    data.workloads  # noqa: B018
    rows = [("(load traces)", time.perf_counter() - start, time.process_time() - cpu)]
    for spec in FIGURES:
        start, cpu = time.perf_counter(), time.process_time()
        save_figure(spec.make(data), out, spec.name, formats=("pdf", "png"))
        rows.append((spec.name, time.perf_counter() - start, time.process_time() - cpu))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="whole-command runs (default 2)")
    parser.add_argument("--out", default=None, help="figure folder (default: a temporary one)")
    parser.add_argument("--skip-serial", action="store_true", help="skip the per-figure table")
    args = parser.parse_args()
    traces = trace_path("conversation_trace.jsonl").parent
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_figures_"))
    print(f"traces: {traces}; figures to {out}; load average before: {load()}\n")

    print(f"{'start-up (fresh interpreter, min of 3)':<40}{'wall s':>8}{'CPU s':>8}")
    for label, wall, cpu in startup():
        print(f"{label:<40}{wall:>8.2f}{cpu:>8.2f}")

    walls, cpus = [], []
    for _ in range(args.repeats):
        wall, cpu = whole_run(out, traces)
        walls.append(wall)
        cpus.append(cpu)
    print(f"\n{'make_figures, default pool':<40}{'wall s':>8}{'CPU s':>8}")
    print(f"{'min of ' + str(args.repeats):<40}{min(walls):>8.1f}{min(cpus):>8.1f}")
    print(f"{'median':<40}{statistics.median(walls):>8.1f}{statistics.median(cpus):>8.1f}")

    if not args.skip_serial:
        rows = serial_run(out, traces)
        print(f"\n{'figure (jobs=1: CPU is the total)':<40}{'wall s':>8}{'CPU s':>8}")
        for name, wall, cpu in rows:
            print(f"{name:<40}{wall:>8.1f}{cpu:>8.1f}")
        total_wall = sum(r[1] for r in rows)
        total_cpu = sum(r[2] for r in rows)
        print(f"{'total':<40}{total_wall:>8.1f}{total_cpu:>8.1f}")
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()
