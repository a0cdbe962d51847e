"""Benchmark the Workload sources against the targets of the Workload issue.

Run: ``python benchmarks/bench_workload.py``. Prints one row per operation:
median wall time over repeats, peak memory, the target and whether it holds.
"""

from __future__ import annotations

import json

from _common import median_time, peak_memory_mb, print_table, trace_path

from inferasim import Workload


def main() -> None:
    path = trace_path("conversation_trace.jsonl")

    def json_loop():
        with open(path, "rb") as fh:
            return [json.loads(line) for line in fh]

    rows = []
    t_json, _ = median_time(json_loop, repeats=7)
    t_load, wl = median_time(lambda: Workload.from_mooncake(path), repeats=7)
    rows.append({"operation": "json.loads loop (baseline)", "median_s": f"{t_json:.3f}",
                 "peak_MB": "-", "target": "-", "ok": "-"})
    ratio = t_load / t_json
    rows.append({"operation": "from_mooncake(conversation, 12,031 lines)", "median_s": f"{t_load:.3f}",
                 "peak_MB": f"{peak_memory_mb(lambda: Workload.from_mooncake(path)):.0f}",
                 "target": "< 0.3 s and <= 1.5x baseline",
                 "ok": f"{'yes' if t_load < 0.3 and ratio <= 1.5 else 'NO'} ({ratio:.2f}x)"})
    t_desc, _ = median_time(wl.describe, repeats=7)
    rows.append({"operation": "describe(conversation)", "median_s": f"{t_desc:.3f}",
                 "peak_MB": "-", "target": "-", "ok": "-"})

    def synth():
        return Workload.from_synthetic(
            1_000_000, rate=100.0, input_len=2048, output_len=256, range_ratio=0.5,
            num_prefixes=16, prefix_len=2048, prefix_zipf=1.0, seed=0,
        )

    t_syn, big = median_time(synth, repeats=3)
    peak = peak_memory_mb(synth)
    rows.append({"operation": "from_synthetic(1,000,000, 16-prefix Zipf)", "median_s": f"{t_syn:.3f}",
                 "peak_MB": f"{peak:.0f}", "target": "< 5 s and < 1,500 MB",
                 "ok": "yes" if t_syn < 5 and peak < 1500 else "NO"})
    print(f"synthetic: {len(big):,} requests, {big.hash_ids.size:,} block ids\n")
    print_table(rows)


if __name__ == "__main__":
    main()
