"""Digests of the result frames of many simulator configurations (JSON).

Two sets of configurations:

* ``native``: 40 small drawn ones that reach the rarer paths (preemption,
  every eviction and routing policy, tiers, loads, write-through,
  admission, chunked and unchunked prefill, the step loop) and five on the
  conversation trace. tests/test_native.py runs them on the compiled
  package and on an interpreted copy; the digests must be equal.
* ``reference``: 26 trace configurations covering every benchmark row and
  every feature. tests/test_frames_reference.py compares their digests
  (and the ``native`` ones) with ``tests/data/frames_reference.json``, the
  digests the engine gave before its restructure: the same frames, bit for
  bit.

Each set runs under one of two engine rules (``RULES``): ``whole_blocks``
(``EngineConfig.whole_blocks()``, the rules every digest of 41ecd0e was taken
under: the restructure's proof) and ``vllm`` (the default ``EngineConfig()``,
vLLM v1's rules; recorded when they became the default, a change detector).

Usage::

    python tests/_frames_digest.py native|reference whole_blocks|vllm CONVERSATION_TRACE [SYNTHETIC_TRACE]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys

import numpy as np
import pandas as pd

import inferasim as ism
from inferasim.sim import (
    Disaggregated,
    EngineConfig,
    KvCostRouter,
    LinearCostModel,
    Simulator,
    SloAdmission,
    Tier,
    Tiers,
)

#: Rejection reasons name the objective's parameter; the name changed with the
#: configuration objects (``slo_ttft_ms`` -> ``ttft_ms``): digests use the new one.
_REASON_NAME = re.compile(r"> slo_(ttft|tpot)_ms ")


#: HBM memory columns in tokens and their names in pages before (see :func:`digest`).
_IN_TOKENS = {
    "peak_kv_tokens": "peak_kv_blocks",
    "kv_capacity_tokens": "kv_capacity_blocks",
    "kv_running_tokens": "kv_running_blocks",
    "kv_cached_tokens": "kv_cached_blocks",
}


def digest(res) -> str:
    """sha1 of the request, replica and timeline frames (values and column names)."""
    h = hashlib.sha1()
    for frame in (res.requests, res.replicas, res.timeline):
        if frame.index.name in ("request_id", "replica"):
            # request_id was a column next to an unnamed RangeIndex before issue
            # 24, the index's name since (so is replica in the replica frame): put it
            # back as that column (the same digest)
            frame = frame.reset_index()
        if any(c in frame.columns for c in _IN_TOKENS):
            # HBM memory was counted in pages under *_blocks names before the
            # frames moved to tokens (issue 20: one unit, in the names): count
            # back in pages under the old names (the same digest)
            page = int(res.config["page_tokens"])
            old = {c: _IN_TOKENS[c] for c in frame.columns if c in _IN_TOKENS}
            frame = frame.assign(**{c: frame[c] // page for c in old}).rename(columns=old)
        if "reason" in frame.columns:
            frame = frame.assign(
                reason=frame["reason"].map(
                    # no reason: None before issue 24, "" since (the same digest)
                    lambda r: _REASON_NAME.sub(r"> \1_ms ", r) if isinstance(r, str) and r else None
                )
            )
        h.update(pd.util.hash_pandas_object(frame.reset_index(), index=False).values.tobytes())
        h.update(",".join(map(str, frame.columns)).encode())
    return h.hexdigest()


def random_configs(n: int, seed: int) -> list[tuple[str, ism.Workload, dict, dict]]:
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
            tiers.append(dict(name="dram", capacity_tokens=int(rng.integers(0, 40)) * 16,
                              read_gbps=float(rng.choice([0.01, 1.0])), write_gbps=1.0,
                              latency_us=float(rng.choice([0.0, 50.0]))))
        if rng.random() < 0.4:
            tiers.append(dict(name="pool", capacity_tokens=int(rng.integers(0, 80)) * 16,
                              read_gbps=0.5, write_gbps=0.5, latency_us=10.0, shared=True))
        replicas = int(rng.integers(1, 4))
        routing = str(rng.choice(["kv_cost", "cache_aware", "least_loaded", "round_robin", "random"]))
        eviction = str(rng.choice(["lru", "fifo", "lfu", "length_aware"]))
        kv_blocks = int(rng.integers(12, 60))
        engine = EngineConfig(
            max_num_seqs=int(rng.integers(1, 9)),
            max_batched_tokens=int(rng.choice([32, 64, 256])),
            chunked_prefill=bool(rng.random() < 0.8),
        )
        fast = bool(rng.random() < 0.8)
        cost = LinearCostModel(kv_bytes_per_token=131072) if rng.random() < 0.6 else None
        write_through = bool(tiers and rng.random() < 0.3)
        load_policy = str(rng.choice(["faster", "always"]))
        admission = SloAdmission(ttft_ms=200.0) if rng.random() < 0.2 else None
        if cost is None and tiers:
            cost = LinearCostModel(kv_bytes_per_token=131072)
        if write_through:
            tiers[0]["write"] = "through"
        kw = dict(
            replicas=replicas, routing=routing, eviction=eviction, kv_tokens=kv_blocks * 16,
            engine=engine, fast=fast, cost_model=cost, admission=admission,
            tiers=Tiers(tuple(Tier(**t) for t in tiers), load_policy=load_policy) if tiers else None,
        )
        out.append((f"random-{k}", wl, kw, {}))
    return out


def _tiers() -> dict[str, Tier]:
    return dict(
        dram3m=Tier("dram", 3_000_000, read_gbps=50.0, write_gbps=50.0, latency_us=5.0),
        pool30m=Tier("pool", 30_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0,
                     shared=True),
        dram=Tier("dram", 200_000, read_gbps=50.0, write_gbps=20.0, latency_us=5.0),
        pool=Tier("pool", 2_000_000, read_gbps=25.0, write_gbps=10.0, latency_us=10.0,
                  shared=True),
        ssd=Tier("ssd", 1_000_000, read_gbps=5.0, write_gbps=2.0, latency_us=80.0),
    )


def native_configs(conversation: str) -> list[tuple[str, ism.Workload, dict, dict]]:
    """The 40 drawn configurations and five on the first 1,500 conversation requests."""
    wl = ism.Workload.from_mooncake(conversation).head(1500)
    t = _tiers()
    dram = Tier("dram", 200_000, read_gbps=50.0, write_gbps=50.0, latency_us=5.0)
    pool = Tier("pool", 2_000_000, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)
    del t
    return random_configs(40, seed=1) + [
        ("trace-kv_cost", wl, dict(replicas=4), {}),
        ("trace-tiers", wl, dict(replicas=4, tiers=[dram, pool], kv_tokens=2000 * 512), {}),
        ("trace-pd", wl, dict(replicas=Disaggregated(2, 2), routing="conductor",
                              tiers=[pool], kv_tokens=3000 * 512), {}),
        ("trace-closed-loop", wl, dict(replicas=2, kv_tokens=3000 * 512), dict(closed_loop=True)),
        ("trace-step-loop", wl, dict(replicas=2, fast=False, eviction="lfu",
                                     kv_tokens=1500 * 512), {}),
    ]


def reference_configs(conversation: str, synthetic: str) -> list[tuple[str, ism.Workload, dict, dict]]:
    """Every benchmark row and every feature on the FAST'25 traces (26 runs)."""
    conv = ism.Workload.from_mooncake(conversation)
    c3 = conv.head(3000)
    syn = ism.Workload.from_mooncake(synthetic)
    gen = ism.Workload.from_synthetic(20_000, rate=150.0, input_len=1024, output_len=128,
                                      range_ratio=0.5, num_prefixes=16, prefix_len=2048,
                                      prefix_zipf=1.0, seed=0)
    t = _tiers()
    dram_through = Tier("dram", 200_000, read_gbps=50.0, write_gbps=20.0, latency_us=5.0,
                        write="through")
    kv = lambda blocks: blocks * 512  # noqa: E731 (the conversation trace's 512-token blocks)
    eng = EngineConfig
    return [
        ("bench-conversation", conv, dict(replicas=8, routing="kv_cost"), {}),
        ("bench-tiers", conv, dict(replicas=8, routing="kv_cost",
                                   tiers=[t["dram3m"], t["pool30m"]]), {}),
        ("bench-pd", conv, dict(replicas=Disaggregated(8, 8), routing="conductor",
                                tiers=[t["pool30m"]]), {}),
        ("gen-20k", gen, dict(replicas=32, routing="kv_cost"), {}),
        ("gen-20k-dram", gen, dict(replicas=32, routing="kv_cost", tiers=[t["dram3m"]]), {}),
        ("c3-round_robin", c3, dict(replicas=4, routing="round_robin"), {}),
        ("c3-random", c3, dict(replicas=4, routing="random", seed=3), {}),
        ("c3-least_loaded", c3, dict(replicas=4, routing="least_loaded"), {}),
        ("c3-cache_aware", c3, dict(replicas=4, routing="cache_aware", kv_tokens=kv(400)), {}),
        ("c3-longest_match", c3, dict(replicas=3, routing="longest_match",
                                      kv_tokens=kv(3000)), {}),
        ("c3-conductor", c3, dict(replicas=4, routing="conductor", kv_tokens=kv(600)), {}),
        ("c3-kv_cost-temp", c3, dict(replicas=4, routing=KvCostRouter(overlap_weight=2.0,
                                                                      temperature=0.5),
                                     seed=7), {}),
        ("c3-fifo-tight", c3, dict(replicas=2, eviction="fifo", kv_tokens=kv(120),
                                   engine=eng(max_num_seqs=64)), {}),
        ("c3-lfu", c3, dict(replicas=2, eviction="lfu", kv_tokens=kv(300)), {}),
        ("c3-length_aware", c3, dict(replicas=2, eviction="length_aware",
                                     kv_tokens=kv(300)), {}),
        ("c3-slo", c3, dict(replicas=2, admission=SloAdmission(ttft_ms=2000.0, tpot_ms=60.0),
                            kv_tokens=kv(500)), {}),
        ("c3-closed", c3, dict(replicas=4, kv_tokens=kv(500)), dict(closed_loop=True)),
        ("c3-closed-pd", c3, dict(replicas=Disaggregated(2, 2), kv_tokens=kv(800)),
         dict(closed_loop=True, think_time=1000.0)),
        ("c3-pd-layerwise", c3, dict(replicas=Disaggregated(2, 2, handoff_gbps=10.0,
                                                            layerwise=True),
                                     routing="kv_cost", kv_tokens=kv(700)), {}),
        ("c3-tiers-hot", c3, dict(replicas=4, tiers=Tiers([dram_through, t["pool"]],
                                                          replicate_hot_blocks=2,
                                                          load_policy="always"),
                                  kv_tokens=kv(300)), {}),
        ("c3-tiers-ssd", c3, dict(replicas=3, routing="cache_aware",
                                  tiers=[t["dram"], t["ssd"], t["pool"]], kv_tokens=kv(250)), {}),
        ("syn-pool-step", syn.head(800), dict(replicas=2, tiers=[t["pool"]], fast=False,
                                              kv_tokens=kv(200)), {}),
        ("c3-unchunked", c3, dict(replicas=2, engine=eng(chunked_prefill=False, max_num_seqs=16),
                                  kv_tokens=kv(600)), {}),
        ("c3-pd-slo-tiers", c3, dict(replicas=Disaggregated(2, 2), routing="conductor",
                                     admission=SloAdmission(ttft_ms=3000.0),
                                     tiers=[t["dram"], t["pool"]], kv_tokens=kv(600)), {}),
        ("c3-timeline", c3.head(600), dict(replicas=2), dict(timeline_ms=0.5)),
        ("c3-linear", c3, dict(replicas=3, cost_model=LinearCostModel(kv_bytes_per_token=131072),
                               tiers=[t["dram"]], kv_tokens=kv(200),
                               engine=eng(max_batched_tokens=2048)), {}),
    ]


#: The engine rules a set runs under: the four switches of ``EngineConfig``
#: that tell vLLM v1's rules from the whole-block ones.
RULES = {"whole_blocks": EngineConfig.whole_blocks(), "vllm": EngineConfig()}
_RULE_FIELDS = ("page_tokens", "full_prompt_admission", "cache_on_schedule", "cache_generated")


def under(rules: str, kw: dict) -> dict:
    """``kw`` with its engine (or the default one) switched to ``RULES[rules]``."""
    chosen = RULES[rules]
    engine = dataclasses.replace(kw.get("engine") or EngineConfig(),
                                 **{f: getattr(chosen, f) for f in _RULE_FIELDS})
    return {**kw, "engine": engine}


def digests(configs: list[tuple[str, ism.Workload, dict, dict]],
            rules: str = "whole_blocks") -> dict[str, str]:
    """Run every configuration under ``rules``; its name to the digest of its frames."""
    return {
        name: digest(Simulator(**under(rules, kw)).run(wl, progress=False, **run))
        for name, wl, kw, run in configs
    }


def main() -> None:
    which, rules, conversation = sys.argv[1], sys.argv[2], sys.argv[3]
    if which == "native":
        configs = native_configs(conversation)
    else:
        configs = reference_configs(conversation, sys.argv[4])
    print(json.dumps(digests(configs, rules), sort_keys=True, indent=1))


if __name__ == "__main__":
    main()
