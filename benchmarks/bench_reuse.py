"""Benchmark the prefix-reuse analysis on the FAST'25 conversation trace.

Prints one table (operation, median seconds over ``--repeats`` runs, target,
pass/fail, peak traced memory; FIFO, LFU and the optimum replay with the
compiled kernels when numba is installed, and once more with the Python
reference loops) and the hit ratios of both shared traces at
1e3, 1e4 and 1e5 blocks and at infinity.

Usage::

    python benchmarks/bench_reuse.py [--repeats 5] [--trace-dir DIR]

The traces are read from ``--trace-dir``, ``$INFERASIM_TRACE_DIR`` or
``../shared/traces`` beside the repository.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import trace_path

from inferasim import Workload
from inferasim.reuse import (
    hit_rate_curve,
    infinite_hit_ratio,
    partitioned_hit_rate,
    popularity,
    prefix_tree,
    replay_cache,
    replay_tiered,
    reuse_distance,
    sessions,
    tiered_hit_rate,
)
from inferasim.reuse._refs import block_refs
from inferasim.reuse.replay import replay_hits
from inferasim.studies import hit_rate_vs_capacity

REPO = Path(__file__).resolve().parents[1]
CAPACITY = 10_000  # blocks, for the direct replays
# Illustrative hierarchies in tokens (512-token blocks): an 8B model's spare
# HBM on one GPU (~803 blocks), + 3M tokens of host DRAM, + 30M tokens of SSD.
TIERS = {
    "HBM + DRAM": [803 * 512, 3_000_000],
    "HBM + DRAM + SSD": [803 * 512, 3_000_000, 30_000_000],
}


def trace_dir(arg: str | None) -> Path:
    if arg:
        if not (Path(arg) / "conversation_trace.jsonl").is_file():
            sys.exit(f"conversation_trace.jsonl not found in --trace-dir {arg}")
        return Path(arg)
    return trace_path("conversation_trace.jsonl").parent


def measure(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median wall time (s) over ``repeats`` runs, then peak traced memory (MiB) of one run."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trace-dir", default=None)
    args = parser.parse_args()
    root = trace_dir(args.trace_dir)
    wl = Workload.from_mooncake(root / "conversation_trace.jsonl")
    print(
        f"conversation_trace.jsonl: {len(wl):,} requests, {wl.hash_ids.size:,} block refs; "
        f"median of {args.repeats} runs; peak = tracemalloc peak of one more run\n"
    )
    ops: list[tuple[str, Callable[[], Any], float | None]] = [
        ("hit_rate_curve lru (one pass, ~200 pts)", lambda: hit_rate_curve(wl), 1.0),
        ("hit_rate_curve lru head_first", lambda: hit_rate_curve(wl, touch="head_first"), 1.0),
        (
            "hit_rate_curve lru full_blocks_only",
            lambda: hit_rate_curve(wl, full_blocks_only=True),
            1.0,
        ),
        (f"replay_cache lru @{CAPACITY}", lambda: replay_cache(wl, CAPACITY, policy="lru"), 1.5),
        (f"replay_cache fifo @{CAPACITY}", lambda: replay_cache(wl, CAPACITY, policy="fifo"), 1.5),
        (f"replay_cache lfu @{CAPACITY}", lambda: replay_cache(wl, CAPACITY, policy="lfu"), 1.5),
        (f"replay_cache opt @{CAPACITY}", lambda: replay_cache(wl, CAPACITY, policy="opt"), 5.0),
        (
            f"replay_hits fifo @{CAPACITY}, Python loop",
            lambda: replay_hits(block_refs(wl), CAPACITY, "fifo", compiled=False),
            None,
        ),
        (
            f"replay_hits lfu @{CAPACITY}, Python loop",
            lambda: replay_hits(block_refs(wl), CAPACITY, "lfu", compiled=False),
            None,
        ),
        (
            f"replay_hits opt @{CAPACITY}, Python loop",
            lambda: replay_hits(block_refs(wl), CAPACITY, "opt", compiled=False),
            None,
        ),
        (
            "hit_rate_vs_capacity, 4 policies, 18 caps",
            lambda: hit_rate_vs_capacity({"conversation": wl}),
            2.0,
        ),
        ("replay_cache opt @1000", lambda: replay_cache(wl, 1000, policy="opt"), 5.0),
        (
            "tiered_hit_rate [1e4, 6e3] (one pass)",
            lambda: tiered_hit_rate(wl, [10_000, 6_000]),
            1.0,
        ),
        (
            "tiered_hit_rate 3 tiers inclusive",
            lambda: tiered_hit_rate(wl, [803, 5_860, 58_594], inclusive=True),
            1.0,
        ),
        ("replay_tiered [1e4, 6e3]", lambda: replay_tiered(wl, [10_000, 6_000]), None),
        (
            f"replay_cache length_aware @{CAPACITY}",
            lambda: replay_cache(wl, CAPACITY, policy="length_aware"),
            1.5,
        ),
        ("infinite_hit_ratio", lambda: infinite_hit_ratio(wl), None),
        (
            "infinite_hit_ratio partial_block=half",
            lambda: infinite_hit_ratio(wl, partial_block="half"),
            None,
        ),
        (
            "hit_rate_curve lru partial_block=half",
            lambda: hit_rate_curve(wl, partial_block="half"),
            1.0,
        ),
        ("popularity", lambda: popularity(wl), 1.0),
        ("reuse_distance", lambda: reuse_distance(wl), 1.0),
        ("sessions", lambda: sessions(wl), 1.0),
        ("prefix_tree", lambda: prefix_tree(wl), None),
        (
            "partitioned_hit_rate lru 8 parts",
            lambda: partitioned_hit_rate(wl, 20_000, 8, assign="hash_first_block"),
            None,
        ),
        (
            "partitioned_hit_rate 8 parts + pool",
            lambda: partitioned_hit_rate(wl, 20_000, 8, assign="hash_first_block", pool=20_000),
            None,
        ),
    ]
    header = f"{'operation':<42} {'median s':>9} {'target s':>9} {'result':>7} {'peak MiB':>9}"
    print(header)
    print("-" * len(header))
    failed = 0
    for name, fn, target in ops:
        med, peak = measure(fn, args.repeats)
        verdict = "-" if target is None else ("pass" if med < target else "FAIL")
        failed += verdict == "FAIL"
        tgt = "-" if target is None else f"{target:.1f}"
        print(f"{name:<42} {med:>9.3f} {tgt:>9} {verdict:>7} {peak:>9.1f}")

    print("\nHit ratios (block / token) by capacity in blocks (tail_first unless noted)")
    caps = [1_000, 10_000, 100_000]
    head = (
        f"{'trace':<14} {'policy':<16}" + "".join(f"{c:>17,}" for c in caps) + f"{'infinity':>17}"
    )
    print(head)
    print("-" * len(head))
    for name in ("conversation", "synthetic"):
        trace = (
            wl if name == "conversation" else Workload.from_mooncake(root / f"{name}_trace.jsonl")
        )
        inf = infinite_hit_ratio(trace)
        rows: list[tuple[str, list[tuple[float, float]]]] = []
        for touch in ("tail_first", "head_first"):
            c = hit_rate_curve(trace, caps, touch=touch)
            label = "lru" if touch == "tail_first" else "lru head_first"
            rows.append((label, list(zip(c["block_hit_ratio"], c["token_hit_ratio"], strict=True))))
        c = hit_rate_curve(trace, caps, full_blocks_only=True)
        rows.append(
            ("lru full blocks", list(zip(c["block_hit_ratio"], c["token_hit_ratio"], strict=True)))
        )
        for policy in ("fifo", "lfu", "length_aware", "opt"):
            c = hit_rate_curve(trace, caps, policy=policy)
            rows.append(
                (policy, list(zip(c["block_hit_ratio"], c["token_hit_ratio"], strict=True)))
            )
        inf_full = infinite_hit_ratio(trace, full_blocks_only=True)
        for label, vals in rows:
            ceiling = inf_full if label == "lru full blocks" else inf
            vals = [*vals, (ceiling.block_hit_ratio, ceiling.token_hit_ratio)]
            cells = "".join(f"{f'{b:.4f} / {t:.4f}':>17}" for b, t in vals)
            print(f"{name:<14} {label:<16}{cells}")
    traces = {
        "conversation": wl,
        "synthetic": Workload.from_mooncake(root / "synthetic_trace.jsonl"),
    }
    print("\nToken hit ratio of the reuse ceiling by partial_block estimate")
    print(f"{'trace':<14} {'none':>8} {'half':>8} {'upper':>8}")
    for name, trace in traces.items():
        cells = [
            infinite_hit_ratio(trace, partial_block=m).token_hit_ratio
            for m in ("none", "half", "upper")
        ]
        print(f"{name:<14}" + "".join(f" {c:>8.4f}" for c in cells))

    print("\nToken hit ratio served by each tier (LRU; capacities in tokens)")
    for name, trace in traces.items():
        for label, caps in TIERS.items():
            for inclusive in (False, True):
                t = tiered_hit_rate(trace, caps, unit="tokens", inclusive=inclusive)
                split = " + ".join(f"{v:.4f}" for v in t["token_hit_ratio"])
                kind = "inclusive" if inclusive else "exclusive"
                print(
                    f"{name:<14} {label:<18} {kind:<10} {split} "
                    f"= {t.attrs['token_hit_ratio']:.4f}"
                )
    if failed:
        print(f"\n{failed} operation(s) missed their target")


if __name__ == "__main__":
    main()
