"""Print a digest of the result frames of many simulator configurations (JSON).

Run by tests/test_native.py twice, once on the compiled package and once on
an interpreted copy of it; the digests must be equal. Usage::

    python tests/_frames_digest.py CONVERSATION_TRACE_PATH
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pandas as pd

import inferasim as ism
from inferasim.sim import LinearCostModel, Simulator, Tier


def digest(res) -> str:
    h = hashlib.sha1()
    for frame in (res.requests, res.replicas, res.timeline):
        h.update(pd.util.hash_pandas_object(frame.reset_index(), index=False).values.tobytes())
        h.update(",".join(map(str, frame.columns)).encode())
    return h.hexdigest()


def random_configs(n: int, seed: int) -> list[tuple[str, ism.Workload, dict]]:
    """Small workloads under drawn settings, meant to reach the rarer paths:
    preemption (few blocks), every eviction and routing policy, tiers, loads,
    write-through, admission, chunked and unchunked prefill, the step loop."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        m = int(rng.integers(20, 120))
        families = int(rng.integers(1, 6))
        fam = rng.integers(0, families, m)
        shared = rng.integers(0, 6, m)
        ids = [[1000 * int(f) + j for j in range(int(s))] + [10**6 + 100 * i + j for j in range(int(rng.integers(0, 3)))]
               for i, (f, s) in enumerate(zip(fam, shared, strict=True))]
        prompt = [max(1, 16 * len(x) - int(rng.integers(0, 16))) for x in ids]
        arrivals = np.cumsum(rng.exponential(float(rng.choice([0.5, 5.0, 50.0])), m))
        wl = ism.Workload.from_requests(
            arrivals.tolist(), prompt, rng.integers(1, 40, m).tolist(), ids, block_size=16
        )
        tiers = []
        if rng.random() < 0.5:
            tiers.append(Tier("dram", int(rng.integers(0, 40)) * 16, read_gbps=float(rng.choice([0.01, 1.0])),
                              write_gbps=1.0, latency_us=float(rng.choice([0.0, 50.0]))))
        if rng.random() < 0.4:
            tiers.append(Tier("pool", int(rng.integers(0, 80)) * 16, read_gbps=0.5, write_gbps=0.5,
                              latency_us=10.0, shared=True))
        kw = dict(
            replicas=int(rng.integers(1, 4)),
            routing=str(rng.choice(["kv_cost", "cache_aware", "least_loaded", "round_robin", "random"])),
            eviction=str(rng.choice(["lru", "fifo", "lfu", "length_aware"])),
            kv_blocks=int(rng.integers(12, 60)),
            max_num_seqs=int(rng.integers(1, 9)),
            max_batched_tokens=int(rng.choice([32, 64, 256])),
            chunked_prefill=bool(rng.random() < 0.8),
            fast=bool(rng.random() < 0.8),
            cost_model=LinearCostModel(kv_bytes_per_token=131072) if rng.random() < 0.6 else None,
            tiers=tiers or None,
            write_through=bool(tiers and rng.random() < 0.3),
            load_policy=str(rng.choice(["faster", "always"])),
            admission="slo" if rng.random() < 0.2 else None,
            slo_ttft_ms=200.0,
        )
        if kw["admission"] is None:
            del kw["slo_ttft_ms"]
        if kw["cost_model"] is None and tiers:
            kw["cost_model"] = LinearCostModel(kv_bytes_per_token=131072)
        out.append((f"random-{k}", wl, kw))
    return out


def trace_configs(path: str) -> list[tuple[str, ism.Workload, dict]]:
    wl = ism.Workload.from_mooncake(path).head(1500)
    dram = Tier("dram", 200_000, read_gbps=50.0, write_gbps=50.0, latency_us=5.0)
    pool = Tier("pool", 2_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)
    return [
        ("trace-kv_cost", wl, dict(replicas=4)),
        ("trace-tiers", wl, dict(replicas=4, tiers=[dram, pool], kv_blocks=2000)),
        ("trace-pd", wl, dict(prefill_replicas=2, decode_replicas=2, routing="conductor",
                              tiers=[pool], kv_blocks=3000)),
        ("trace-closed-loop", wl, dict(replicas=2, closed_loop=True, kv_blocks=3000)),
        ("trace-step-loop", wl, dict(replicas=2, fast=False, eviction="lfu", kv_blocks=1500)),
    ]


def main() -> None:
    configs = random_configs(40, seed=1) + trace_configs(sys.argv[1])
    out = {}
    for name, wl, kw in configs:
        out[name] = digest(Simulator(progress=False, **kw).run(wl))
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
