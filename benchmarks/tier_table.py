"""Local versus pooled KV tiers on the FAST'25 traces, simulated with timing.

For the conversation and synthetic traces on 10 replicas (Llama-3.1-8B on
H100-80GB, the default roofline; HBM from the model), three cache layouts:

(a) HBM only;
(b) HBM + 3M tokens of host DRAM per replica (30M in all, used locally);
(c) HBM + one 30M-token pool shared by the fleet (the same DRAM, pooled);

under ``least_loaded`` and ``cache_aware`` routing. Columns: the token hit
ratio by tier (HBM, DRAM, pool; they add up to ``hit``), the mean prefill GPU
time per request and the mean TTFT and load wait. *Prefill GPU time* of a
request is what its computed prompt tokens add to a step: ``step_time_ms(n,
pairs, 0, 0) - step_time_ms(0, 0, 0, 0)`` for its ``n`` computed tokens as
one chunk after its reused prefix (recomputation after preemption
included), so reuse saves exactly the tokens it skips. Link numbers are
those of :func:`bench_simulator.tiers` (DRAM 50 GB/s over PCIe Gen5, pool
25 GB/s over a 200 Gb/s RDMA NIC).

Usage::

    python benchmarks/tier_table.py            # prints the table (markdown)
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pandas as pd
from _common import trace_path
from bench_simulator import tiers

LAYOUTS = {
    "(a) HBM only": dict(dram_tokens=0, pool_tokens=0),
    "(b) + 3M DRAM each": dict(dram_tokens=3_000_000, pool_tokens=0),
    "(c) + 30M pool": dict(dram_tokens=0, pool_tokens=30_000_000),
}


def prefill_gpu_ms(res, cost) -> np.ndarray:
    """Marginal prefill time of each finished request's computed tokens (ms)."""
    req = res.requests[res.requests["status"] == "finished"]
    n = req["computed_prefill_tokens"].to_numpy(np.float64)
    c = req["cached_tokens"].to_numpy(np.float64)
    pairs = n * c + n * (n + 1) / 2
    zero = np.zeros_like(n)
    return np.asarray(cost.step_time_ms(n, pairs, zero, zero)) - float(
        cost.step_time_ms(0, 0, 0, 0)
    )


def table(replicas: int = 10) -> pd.DataFrame:
    import inferasim as ism
    from inferasim.sim import RooflineCostModel

    cost = RooflineCostModel()
    rows = []
    for trace in ("conversation", "synthetic"):
        wl = ism.Workload.from_mooncake(trace_path(f"{trace}_trace.jsonl"))
        for routing in ("least_loaded", "cache_aware"):
            for layout, sizes in LAYOUTS.items():
                t = time.perf_counter()
                res = ism.Simulator(
                    replicas=replicas,
                    routing=routing,
                    cost_model=cost,
                    tiers=tiers(**sizes) or None,
                ).run(wl, progress=False)
                s = res.summary()
                # hits by tier (a row per tier of the run; a tier not there serves 0)
                hits = res.tiers["token_hit_ratio"].reindex(["hbm", "dram", "pool"], fill_value=0.0)
                row = {
                    "trace": trace,
                    "routing": routing,
                    "layout": layout,
                    "hit": s["token_hit_ratio"],
                    **hits.to_dict(),
                    "prefill_gpu_ms": float(prefill_gpu_ms(res, cost).mean()),
                    "ttft_ms_mean": s["ttft_ms_mean"],
                    "ttft_ms_p90": s["ttft_ms_p90"],
                    "load_ms_mean": s["load_ms_mean"] if len(res.tiers) > 1 else 0.0,
                    "run_s": time.perf_counter() - t,
                }
                rows.append(row)
                print(row, file=sys.stderr)
    return pd.DataFrame(rows)


def main() -> None:
    df = table()
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(df.to_string(index=False))
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (2 cores)")


if __name__ == "__main__":
    main()
