"""Hot-block replication on a disaggregated fleet: what copying hot pool blocks into DRAM changes.

The FAST'25 conversation trace (12,031 requests), Llama-3.1-8B on H100-80GB
(the default roofline model), 8 prefill + 8 decode instances, ``conductor``
routing. Behind each prefill instance: a 30M-token shared pool (25 GB/s per
replica link, 10 us) and 3M tokens of its own DRAM (50 GB/s, 5 us).

* ``dram, pool``: HBM evicts into DRAM, DRAM into the pool (the usual order;
  a block read from the pool reaches the reader's DRAM when its HBM evicts it);
* ``pool, dram``: HBM evicts into the pool (Mooncake-like: everything is
  published to the store), DRAM only gets what the pool evicts;
* ``pool, dram, hot k``: the same with ``Tiers(..., replicate_hot_blocks=k)``: a block
  read from the pool more than ``k`` times is copied into the reader's DRAM.

Prints per case the CPU time of ``Simulator.run`` (one run), the TTFT mean
and p99, the token hit ratio, the share of prompt tokens loaded from each
tier, and the 1-minute load average.

Usage::

    python benchmarks/bench_hot_blocks.py
"""

from __future__ import annotations

import os
import time

from _common import trace_path


def main() -> None:
    import inferasim as ism
    from inferasim.sim import Tier

    wl = ism.Workload.from_mooncake(trace_path("conversation_trace.jsonl"))
    pool = Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)
    dram = Tier("dram", 3_000_000, read_gbps=50.0, write_gbps=50.0, latency_us=5.0)
    cases = {
        "dram, pool": ([dram, pool], None),
        "pool, dram": ([pool, dram], None),
        "pool, dram, hot 0": ([pool, dram], 0),
        "pool, dram, hot 4": ([pool, dram], 4),
    }
    print(f"{'case':<20}{'cpu s':>7}{'TTFT mean':>11}{'TTFT p99':>10}{'hit':>7}{'pool':>7}{'dram':>7}")
    for name, (tiers, hot) in cases.items():
        sim = ism.Simulator(
            replicas=ism.Disaggregated(prefill=8, decode=8), routing="conductor",
            tiers=ism.Tiers(tiers, replicate_hot_blocks=hot),
        )
        t0 = time.process_time()
        res = sim.run(wl, progress=False)
        cpu = time.process_time() - t0
        s = res.summary()
        req = res.requests
        tokens = float(req["input_len"].sum())
        share = {t: float(req[f"{t}_hit_tokens"].sum()) / tokens for t in ("pool", "dram")}
        print(
            f"{name:<20}{cpu:>7.1f}{s['ttft_ms_mean']:>11.0f}{s['ttft_ms_p99']:>10.0f}"
            f"{s['token_hit_ratio']:>7.3f}{share['pool']:>7.3f}{share['dram']:>7.3f}"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
