"""Write policies on the conversation trace: the issue-22 measurements.

Llama-3.1-8B on H100-80GB (the default roofline; HBM from the model), link
numbers of :func:`bench_simulator.tiers` (DRAM 50 GB/s, pool 25 GB/s).

* 10 replicas ``least_loaded``: HBM only; a 30M-token shared pool (default:
  written through); the same pool written on eviction (the old default); a
  3M-token DRAM (evict) in front of the pool; DRAM alone. Next to them the
  timing-free numbers: one LRU of 30M tokens (the pooled replay), and
  :func:`inferasim.reuse.replay_tiers` on the simulation's own placement
  and HBM; and the pool behind a fleet-wide budget of 50 GB/s
  (``pool_gbps``, a fifth of the ten replicas' NICs together).
* 8 replicas ``kv_cost``: a vLLM-offload-like G2 (3M tokens per replica,
  written through) plus a write-through cluster pool (AISimulate: 35.8%).

Usage::

    python benchmarks/tier_policies.py
"""

from __future__ import annotations

import time

from _common import trace_path

import inferasim as ism
from inferasim.reuse import hit_rate_curve, replay_tiers
from inferasim.sim import Tier


def hit(res) -> float:
    req = res.requests
    return float(req["cached_tokens"].sum() / req["input_len"].sum())


def main() -> None:
    wl = ism.Workload.from_mooncake(trace_path("conversation_trace.jsonl"))
    bs = wl.block_size
    pool = Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)
    pool_evict = Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0,
                      shared=True, write="evict")
    dram = Tier("dram", 3_000_000, read_gbps=50.0, write_gbps=50.0, latency_us=5.0)
    g2 = Tier("dram", 3_000_000, read_gbps=50.0, write_gbps=50.0, latency_us=5.0,
              write="through")
    fast = dict(read_gbps=1e6, write_gbps=1e6, latency_us=0.0)
    curve = hit_rate_curve(wl, [30_000_000 // bs])
    print(f"timing-free pooled LRU of 30M tokens: {float(curve['token_hit_ratio'].iloc[0]):.4f}")
    rows = [
        ("10 least_loaded, HBM only", 10, "least_loaded", None),
        ("10 least_loaded, pool 30M (through)", 10, "least_loaded", [pool]),
        ("10 least_loaded, pool 30M (evict)", 10, "least_loaded", [pool_evict]),
        ("10 least_loaded, DRAM 3M + pool 30M", 10, "least_loaded", [dram, pool]),
        ("10 least_loaded, DRAM 3M + pool 30M (1e6 GB/s)", 10, "least_loaded",
         [Tier("dram", 3_000_000, **fast), Tier("pool", 30_000_000, shared=True, **fast)]),
        ("10 least_loaded, DRAM 3M alone", 10, "least_loaded", [dram]),
        ("10 least_loaded, pool 30M, 50 GB/s for the fleet (pool_gbps)", 10, "least_loaded",
         [Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0,
               shared=True, pool_gbps=50.0)]),
        ("8 kv_cost, G2 3M through + pool 30M", 8, "kv_cost", [g2, pool]),
        ("8 kv_cost, pool 30M (through)", 8, "kv_cost", [pool]),
    ]
    for name, n, routing, tiers in rows:
        t0 = time.perf_counter()
        sim = ism.Simulator(replicas=n, routing=routing, tiers=tiers)
        res = sim.run(wl, progress=False)
        dt = time.perf_counter() - t0
        line = f"{name}: {hit(res):.4f} ({dt:.1f} s)"
        if tiers:
            cap = int(res.replicas["kv_capacity_tokens"].iloc[0])
            ref = replay_tiers(wl, cap, tiers, replicas=n,
                               assign=res.requests["replica"].to_numpy())
            line += f"; replay_tiers on its placement {ref.attrs['token_hit_ratio']:.4f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
