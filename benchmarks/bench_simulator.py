"""Benchmark of the fleet simulator: run time, memory, events per second.

Cases (each in its own subprocess, so peak RSS is the case's own):

* ``conversation``: the FAST'25 conversation trace (12,031 requests), 8
  replicas, ``kv_cost`` routing, Llama-3.1-8B on H100-80GB (the default
  roofline model). Target: median under 1 s, peak under 300 MB.
* ``conversation-tiers``: the conversation case with KV tiers behind each
  replica's HBM: 3M tokens of host DRAM per replica and one 30M-token pool
  shared by the fleet (:func:`tiers`), timed in the same process as the run
  without tiers (alternating repeats). Target: under 1.5 s and at most 2x the
  run without tiers.
* ``synthetic-N``: N synthetic requests (1,024-token own part after a
  2,048-token prefix from a 16-prefix Zipf(1) pool, 128 output tokens,
  Poisson arrivals at 150 req/s), 32 replicas, ``kv_cost``. Target for
  N = 1,000,000: under 40 s and 1.5 GB peak RSS.

Time is the wall time of ``Simulator.run`` (median of the repeats; loading
or generating the workload is excluded). Peak memory is tracemalloc's peak
during one extra run (Python and numpy allocations of the run; skipped above
200,000 requests) and the process's peak RSS (interpreter, libraries,
workload and run); ``load`` is the 1-minute load average at the end of the
case (2 cores: above ~1 other work was competing); ``index s`` is the machine's
speed index at the end of the case (:func:`_common.machine_speed_s`: a fixed
pure-Python loop, lower is faster; this machine drifts by up to 2.5x over hours,
so only runs at a similar index compare). Events are
engine steps simulated (each replica step counts once, jumped or not).

Usage::

    python benchmarks/bench_simulator.py                 # conversation + 10k/100k
    python benchmarks/bench_simulator.py --million       # also 1,000,000 requests
    python benchmarks/bench_simulator.py --policies      # routing-policy results table
    python benchmarks/bench_simulator.py --tiers         # conversation with and without tiers
    python benchmarks/bench_simulator.py --million --dram  # 1M requests, also with a DRAM tier
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc

from _common import core_build, machine_speed_s, trace_path


def tiers(dram_tokens: int = 3_000_000, pool_tokens: int = 30_000_000) -> list:
    """Host DRAM per replica and a pool shared by the fleet, with public link numbers.

    * Host DRAM over PCIe Gen5 x16: 64 GB/s per direction raw, about 50 GB/s
      achieved host-to-device with pinned memory (NVIDIA H100 PCIe Gen5
      bandwidth tests report 50-55 GB/s); 5 us per transfer.
    * A Mooncake-Store-like pool reached over RDMA: one 200 Gb/s NIC per replica
      (ConnectX-6/7 at 200 Gb/s = 25 GB/s; Mooncake's testbed uses 4-8 x 200 or
      400 Gb/s per node shared by 8 GPUs); 10 us per transfer.
    """
    from inferasim.sim import Tier

    out = []
    if dram_tokens:
        out.append(Tier("dram", dram_tokens, read_gbps=50.0, write_gbps=50.0, latency_us=5.0))
    if pool_tokens:
        out.append(
            Tier("pool", pool_tokens, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)
        )
    return out


def _workload(case: str):
    import inferasim as ism

    if case.startswith("conversation"):
        return ism.Workload.from_mooncake(trace_path("conversation_trace.jsonl")), 8
    n = int(case.split("-")[1])
    wl = ism.Workload.from_synthetic(
        n,
        rate=150.0,
        input_len=1024,
        output_len=128,
        range_ratio=0.5,
        num_prefixes=16,
        prefix_len=2048,
        prefix_zipf=1.0,
        seed=0,
    )
    return wl, 32


def run_case(case: str, repeats: int, routing: str) -> dict:
    """Time one case in this process; return a JSON-able record."""
    from inferasim.sim import Simulator

    wl, replicas = _workload(case)
    if case == "conversation-tiers":
        tiered = tiers()
    elif case.endswith("-dram"):
        tiered = tiers(pool_tokens=0)
    else:
        tiered = None
    sim = Simulator(replicas=replicas, routing=routing, tiers=tiered)
    base = Simulator(replicas=replicas, routing=routing) if tiered else None
    times, base_times = [], []
    res = None
    for _ in range(repeats):
        if base is not None and case == "conversation-tiers":  # alternate, same process
            t = time.perf_counter()
            base.run(wl, progress=False)
            base_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        res = sim.run(wl, progress=False)
        times.append(time.perf_counter() - t)
    peak = float("nan")
    if len(wl) <= 200_000:  # tracemalloc slows a run ~2x: skipped for 1M (RSS only)
        tracemalloc.start()
        sim.run(wl, progress=False)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    steps = int(res.replicas["steps"].sum())
    s = res.summary()
    return {
        "case": case,
        "requests": len(wl),
        "replicas": replicas,
        "routing": routing,
        "repeats": repeats,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "steps": steps,
        "steps_per_s": steps / statistics.median(times),
        "requests_per_s": len(wl) / statistics.median(times),
        "tracemalloc_peak_mb": peak / 2**20,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load_avg_1min": os.getloadavg()[0],
        "speed_index_s": machine_speed_s(),
        "token_hit_ratio": float(s["token_hit_ratio"]),
        "ttft_p50_ms": float(s["ttft_ms_p50"]),
        "ttft_p99_ms": float(s["ttft_ms_p99"]),
        "no_tier_median_s": statistics.median(base_times) if base_times else float("nan"),
    }


def policies() -> None:
    """Hit ratio and TTFT of every routing policy on the conversation trace, 8 replicas."""
    import pandas as pd

    from inferasim.sim import ROUTING_POLICIES, Simulator

    wl, replicas = _workload("conversation")
    rows = {}
    for routing in ROUTING_POLICIES:
        s = Simulator(replicas=replicas, routing=routing).run(wl, progress=False).summary()
        rows[routing] = s[
            [
                "block_hit_ratio",
                "token_hit_ratio",
                "ttft_ms_p50",
                "ttft_ms_p99",
                "queue_ms_p99",
                "max_replica_share",
                "evictions",
                "saturated",
            ]
        ]
    print(pd.DataFrame(rows).T.to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--million", action="store_true", help="include 1,000,000 requests")
    parser.add_argument("--policies", action="store_true", help="routing-policy results")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--routing", default="kv_cost")
    parser.add_argument("--tiers", action="store_true", help="conversation with KV tiers")
    parser.add_argument("--dram", action="store_true", help="also 1M requests with a DRAM tier")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.repeats, args.routing)))
        return
    if args.policies:
        policies()
        return
    cases = [("conversation", args.repeats), ("synthetic-10000", 3), ("synthetic-100000", 3)]
    if args.tiers:
        cases = [("conversation-tiers", args.repeats)]
    if args.million:
        cases.append(("synthetic-1000000", 1))
        if args.dram:
            cases.append(("synthetic-1000000-dram", 1))
    records = []
    for case, repeats in cases:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--case",
                case,
                "--repeats",
                str(repeats),
                "--routing",
                args.routing,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        records.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = records[-1]
        print(f"{case}: {r['median_s']:.3f} s", file=sys.stderr)
        if r["no_tier_median_s"] == r["no_tier_median_s"]:
            print(
                f"{case}: {r['median_s']:.3f} s with tiers vs {r['no_tier_median_s']:.3f} s "
                f"without ({r['median_s'] / r['no_tier_median_s']:.2f}x), hit ratio "
                f"{r['token_hit_ratio']:.3f}, load {r['load_avg_1min']:.2f}"
            )
    header = (
        f"{'case':<20}{'requests':>10}{'replicas':>9}{'repeats':>8}{'median s':>10}"
        f"{'min s':>8}{'steps':>11}{'steps/s':>11}{'req/s':>9}{'tracemalloc MB':>16}"
        f"{'max RSS MB':>12}{'load':>6}{'index s':>9}"
    )
    print(f"simulator core: {core_build()} (inferasim.sim.native_modules())")
    print(header)
    print("-" * len(header))
    for r in records:
        print(
            f"{r['case']:<20}{r['requests']:>10,}{r['replicas']:>9}{r['repeats']:>8}"
            f"{r['median_s']:>10.3f}{r['min_s']:>8.3f}{r['steps']:>11,}"
            f"{r['steps_per_s']:>11,.0f}{r['requests_per_s']:>9,.0f}"
            f"{r['tracemalloc_peak_mb']:>16.1f}{r['max_rss_mb']:>12.0f}"
            f"{r['load_avg_1min']:>6.2f}{r['speed_index_s']:>9.3f}"
        )
    synth = [r for r in records if r["case"].startswith("synthetic")]
    if len(synth) > 1:
        base = synth[0]
        print("\nscaling (time per request relative to the smallest synthetic case):")
        for r in synth:
            per = r["median_s"] / r["requests"]
            print(
                f"  {r['requests']:>9,} requests: {per * 1e6:6.1f} us/request "
                f"({per / (base['median_s'] / base['requests']):.2f}x)"
            )


if __name__ == "__main__":
    main()
