"""Benchmark of the disaggregated simulator against the aggregated one, same process.

The FAST'25 conversation trace (12,031 requests), Llama-3.1-8B on
H100-80GB (the default roofline model), 16 GPUs:

* ``aggregated``: 16 replicas, ``kv_cost`` routing;
* ``disaggregated``: 8 prefill + 8 decode instances, ``conductor`` routing,
  a 30M-token shared KV pool (25 GB/s per replica link, 10 us) behind the
  prefill instances, KV handoff at the default 50 GB/s.

Target: the disaggregated run under 2 s and at most 2.5x the aggregated one.
Prints the median wall time of ``Simulator.run`` over the repeats (loading
excluded), the ratio, and the 1-minute load average (2 cores: above ~1
other work was competing).

Usage::

    python benchmarks/bench_disagg.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os

from _common import core_build, machine_speed_s, median_time, trace_path


def main() -> None:
    import inferasim as ism
    from inferasim.sim import Tier

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    wl = ism.Workload.from_mooncake(trace_path("conversation_trace.jsonl"))
    pool = [Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)]
    agg = ism.Simulator(replicas=16, routing="kv_cost")
    dis = ism.Simulator(
        replicas=ism.Disaggregated(prefill=8, decode=8), routing="conductor", tiers=pool
    )
    t_agg, r_agg = median_time(lambda: agg.run(wl, progress=False), args.repeats)
    t_dis, r_dis = median_time(lambda: dis.run(wl, progress=False), args.repeats)
    load = os.getloadavg()[0]
    print(f"{'case':<16}{'median s':>10}{'TTFT mean ms':>14}{'TTFT p99 ms':>13}{'hit ratio':>11}")
    for name, t, r in (("aggregated", t_agg, r_agg), ("disaggregated", t_dis, r_dis)):
        s = r.summary()
        print(
            f"{name:<16}{t:>10.2f}{s['ttft_ms_mean']:>14.0f}{s['ttft_ms_p99']:>13.0f}"
            f"{s['token_hit_ratio']:>11.3f}"
        )
    print(
        f"ratio disaggregated / aggregated: {t_dis / t_agg:.2f}x; load average {load:.2f}; "
        f"speed index {machine_speed_s():.3f} s (lower is faster, see _common.machine_speed_s); "
        f"simulator core {core_build()}"
    )


if __name__ == "__main__":
    main()
