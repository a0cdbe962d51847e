"""The README's routing table: the conversation trace on 8 replicas, each router.

Llama-3.1-8B on H100 (the default cost model and KV capacity), under the
default engine rules (vLLM v1's) and, in brackets, ``EngineConfig.whole_blocks()``.

Usage::

    python benchmarks/routing_table.py
"""

from __future__ import annotations

import inferasim as ism
from inferasim.sim import EngineConfig

ROUTERS = ("round_robin", "random", "least_loaded", "cache_aware", "kv_cost", "longest_match")


def row(wl: ism.Workload, routing: str, engine: EngineConfig) -> dict[str, float]:
    """Token hit ratio, TTFT p50/p99 and the busiest replica's share of one run."""
    summary = ism.Simulator(replicas=8, routing=routing, engine=engine).run(
        wl, progress=False).summary()
    return {name: float(summary[name]) for name in
            ("token_hit_ratio", "ttft_ms_p50", "ttft_ms_p99", "max_replica_share")}


def main() -> None:
    wl = ism.Workload.from_mooncake("conversation")
    print("| routing | token hit ratio | TTFT p50 (ms) | TTFT p99 (ms) | busiest replica share |")
    print("|---|---|---|---|---|")
    for routing in ROUTERS:
        new, old = row(wl, routing, EngineConfig()), row(wl, routing, EngineConfig.whole_blocks())
        cells = [f"{new['token_hit_ratio']:.3f} ({old['token_hit_ratio']:.3f})",
                 f"{new['ttft_ms_p50']:,.0f} ({old['ttft_ms_p50']:,.0f})",
                 f"{new['ttft_ms_p99']:,.0f} ({old['ttft_ms_p99']:,.0f})",
                 f"{new['max_replica_share']:.3f} ({old['max_replica_share']:.3f})"]
        print(f"| {routing} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
