# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext,-all
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. Local versus global caching, and what routing does about it
#
# A fleet of N serving replicas, each with a prefix cache of C tokens, holds
# N*C tokens of KV in total; but a request can only reuse what *its*
# replica holds. The FAST'25 paper compares ten prefill nodes with 3M tokens
# of DRAM cache each, used locally, against the same memory pooled into one
# global cache. We repeat that comparison on both traces, then simulate the
# fleet under five routing policies to see what each does to time to first
# token (TTFT). Both experiments are public functions of `ism.studies`.

# %% tags=["parameters"]
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Under CI (QUICK) the routing simulations use the first 20 minutes of each
# trace; otherwise the full traces.
QUICK = CI
WINDOW_MS = 20 * 60_000 if QUICK else None
# The tiered fleet (last section) replays the conversation trace: under CI
# only its first 10 minutes; otherwise the whole trace.
TIER_WINDOW_MS = 10 * 60_000 if QUICK else None

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

import inferasim as ism

ism.style.use()
traces = {name: ism.Workload.from_mooncake(name) for name in ("conversation", "synthetic")}
N, C = ism.studies.FLEET_REPLICAS, ism.studies.NODE_CACHE_TOKENS

# %% [markdown]
# ## Ten local 3M-token caches against one pooled 30M-token cache
#
# `ism.studies.local_vs_pooled` replays each trace through ten LRU caches
# with requests placed by a fixed rule: uniformly at random, round-robin, or
# sticky on the first block (requests that start with the same block always
# go to the same node, the simplest locality-aware placement), and through
# one pooled cache that sees every request. No timing, just the cache.

# %%
local = ism.studies.local_vs_pooled(traces, replicas=N, capacity_tokens=C)
local

# %%
lg = local.set_index(["trace", "placement"])["token_hit_ratio"]
ceiling = local.groupby("trace")["ceiling_token_hit_ratio"].first()
first_blocks = {
    name: len(set(wl.hash_ids[wl.offsets[:-1][wl.num_blocks > 0]].tolist()))
    for name, wl in traces.items()
}
display(
    Markdown(
        f"Ten local caches with random placement serve {lg['conversation', 'random']:.1%} "
        f"of conversation prompt tokens; the same memory pooled serves {lg['conversation', 'any']:.1%}, "
        f"{lg['conversation', 'any'] / lg['conversation', 'random']:.1f}x more and within reach of the "
        f"{ceiling['conversation']:.1%} ceiling. On the synthetic trace it is "
        f"{lg['synthetic', 'random']:.1%} against {lg['synthetic', 'any']:.1%}. Round-robin placement is no "
        f"better than random ({lg['conversation', 'round_robin']:.1%} and {lg['synthetic', 'round_robin']:.1%}).\n\n"
        f"Sticky placement shows both faces of locality. The synthetic trace has "
        f"{first_blocks['synthetic']:,} distinct first blocks, so keeping each first block on one node keeps "
        f"each document's requests together and reaches {lg['synthetic', 'hash_first_block']:.1%}, "
        f"as much as the pooled cache. Every conversation request starts with the same block "
        f"({first_blocks['conversation']} distinct first block), so sticky placement sends the whole trace to "
        f"one node and gets exactly what one 3M-token cache gets "
        f"({lg['conversation', 'hash_first_block']:.1%}), with nine nodes idle."
    )
)

# %% [markdown]
# ## The fleet under five routers
#
# Now the fleet itself: ten replicas of Llama-3.1-8B on H100s (roofline cost
# model), each with a 3M-token prefix cache, replaying the traces under five
# routers:
#
# * **random**: ignores both load and cache;
# * **least-loaded**: the replica with the fewest outstanding tokens;
# * **cache-aware**: the replica whose cache holds the longest prefix of the
#   request, ties to the least loaded (the simulator's `cache_aware`);
# * **pure longest-match**: longest prefix on the router's own record of what
#   it sent where, no load term at all (the simulator's `longest_match`,
#   the naive form of a cache-aware router);
# * **cache + load cost**: Dynamo-style, minimising
#   *overlap weight x new prefill blocks + active decode blocks*.
#
# One run is `ism.Simulator(replicas=10, routing=..., kv_tokens=3_000_000).run(wl)`;
# `ism.studies.compare_routing` runs the grid (trace x policy) and returns
# every request of every run in one frame.

# %%
routed = ism.studies.compare_routing(traces, replicas=N, capacity_tokens=C, window_ms=WINDOW_MS)
routed.head()

# %%
table = ism.studies.routing_summary(routed)
table.round({"ttft_p50_ms": 0, "ttft_p99_ms": 0, "tpot_p50_ms": 1, "token_hit_ratio": 3, "busiest_share": 3})

# %% [markdown]
# The local caches under each router sit between the placement rules and the
# pooled cache (solid bars; hatched: the placement replay; black: pooled).

# %%
fig, axes = plt.subplots(1, 2, figsize=(ism.style.DOUBLE[0], 2.9), sharey=True)
for ax, trace in zip(axes, traces, strict=True):
    ism.plots.local_vs_pooled(
        local.query("trace == @trace"), table.query("trace == @trace"), ax=ax
    )
    ax.set_title(f"{trace} trace")
axes[1].set_ylabel("")
plt.show()

# %%
routed_hit = table.set_index(["trace", "routing"])["token_hit_ratio"]
display(
    Markdown(
        f"Routing can recover what pooling gives. Ten local caches behind the simulator's cache-aware "
        f"router serve {routed_hit['conversation', 'cache_aware']:.1%} of conversation prompt tokens and "
        f"{routed_hit['synthetic', 'cache_aware']:.1%} of synthetic ones, against "
        f"{lg['conversation', 'any']:.1%} and {lg['synthetic', 'any']:.1%} for the pooled cache: sending each "
        f"request where its prefix already is keeps every conversation's turns on one node, so no node "
        f"needs more than its share of the memory. Load-only routing (least-loaded: "
        f"{routed_hit['conversation', 'least_loaded']:.1%} and {routed_hit['synthetic', 'least_loaded']:.1%}) "
        f"scatters the turns like random placement does."
    )
)

# %% [markdown]
# ## TTFT by routing policy
#
# The TTFT distribution of each router, one panel per trace; pure
# longest-match gets its own panel because on the conversation trace its
# TTFT is counted in hours. The right panel puts every p99 on one log axis.

# %%
normal = routed.query("routing != 'longest_match'")
greys = {"conversation": "0.1", "synthetic": "0.55"}  # traces in grey, policies in colour
fig, ((a, b), (c, d)) = plt.subplots(2, 2, figsize=ism.style.DOUBLE_TALL)
for ax, trace in ((a, "conversation"), (b, "synthetic")):
    ism.plots.latency_cdf(normal.query("trace == @trace"), ax=ax, labels=ism.style.label)
    ax.set_title(f"{trace} trace")
lm = routed.query("routing == 'longest_match'")
ism.plots.latency_cdf(lm, ax=c, hue="trace", palette=greys).legend(loc="upper left")
c.set_title("pure longest-match")
ism.plots.quantile_dots(table, "ttft_p99_ms", ax=d, palette=greys).set_title("TTFT p99 by policy")
plt.show()

# %%
fig, axes = plt.subplots(1, 5, figsize=(ism.style.DOUBLE[0], 2.0), sharey=True)
conv_runs = routed.query("trace == 'conversation'")
for ax, (routing, run) in zip(axes, conv_runs.groupby("routing", sort=False), strict=True):
    ism.plots.replica_load(run, ax=ax, color=ism.style.color(routing))
    ax.set_title(ism.style.two_lines(ism.style.label(routing)))
fig.suptitle(f"conversation trace: requests per replica ({N} replicas x 3M-token cache)")
plt.show()

# %%
conv = table.set_index(["trace", "routing"]).loc["conversation"]
best_p99 = conv.drop("longest_match")["ttft_p99_ms"].idxmin()
display(
    Markdown(
        f"Pure longest-match routing collapses on the conversation trace: it sends "
        f"{conv.loc['longest_match', 'busiest_share']:.0%} of the requests to one replica (a fair share is "
        f"{1 / N:.0%}). Every conversation starts with the same system-prompt block, so the first replica "
        f"matches every later request by at least one block and the others never match at all. That replica "
        f"cannot keep up: TTFT p99 is {conv.loc['longest_match', 'ttft_p99_ms'] / 1000:,.0f} s, while nine "
        f"replicas idle.\n\n"
        f"The simulator's cache-aware router looks at what each replica actually holds and breaks ties by "
        f"load; every replica caches the system-prompt block with its first request, so beyond that block "
        f"it follows conversations and lets load break the ties: busiest replica "
        f"{conv.loc['cache_aware', 'busiest_share']:.0%}, token hit ratio "
        f"{conv.loc['cache_aware', 'token_hit_ratio']:.1%} (close to the pooled cache above), TTFT p99 "
        f"{conv.loc['cache_aware', 'ttft_p99_ms'] / 1000:,.1f} s. Load-only routing balances as well "
        f"(least-loaded: {conv.loc['least_loaded', 'busiest_share']:.0%}) but reuses little "
        f"({conv.loc['least_loaded', 'token_hit_ratio']:.1%}), like random placement "
        f"({conv.loc['random', 'token_hit_ratio']:.1%}, TTFT p99 {conv.loc['random', 'ttft_p99_ms'] / 1000:,.1f} s). "
        f"The cache-and-load cost trades a little reuse ({conv.loc['kv_cost', 'token_hit_ratio']:.1%}) for "
        f"balance: TTFT p99 {conv.loc['kv_cost', 'ttft_p99_ms'] / 1000:,.1f} s; the lowest tail of the five "
        f"is {ism.style.label(best_p99)}'s ({conv.loc[best_p99, 'ttft_p99_ms'] / 1000:,.1f} s)."
    )
)


# %% [markdown]
# ## Local DRAM or one pool, simulated with timing
#
# The first section asked the paper's question without a clock: ten caches
# of 3M tokens, or one of 30M. In a fleet that memory is host DRAM *behind*
# each replica's HBM, and a block found there must be loaded over a link
# before the prefill can use it. So we now simulate it: ten replicas of
# Llama-3.1-8B on H100s (HBM KV from the model), and three layouts,
#
# * **HBM only**;
# * **+ 3M DRAM each**: a `Tier` of 3M tokens per replica, over PCIe at
#   50 GB/s (used locally: 30M tokens in all). A replica's own tier is
#   written on eviction by default (`write="evict"`: it takes the blocks HBM
#   drops, and a load moves them back up: an exclusive hierarchy);
#   `ism.tiers.vllm_offload` writes every computed block instead;
# * **+ 30M pool**: the same 30M tokens as one `Tier(..., shared=True)` that
#   every replica reads and writes over its own 25 GB/s RDMA link. A shared
#   tier is written through by default (`write="through"`: every prefill
#   publishes its blocks, as Mooncake Store does), the semantics of the
#   paper's Fig. 10 global cache (about 37.5% of tokens reused);
#
# under least-loaded and cache-aware routing. Blocks evicted from HBM move
# down; a request loads the part of its prefix found below HBM when that is
# faster than recomputing it, and waits for the load. One run is a few
# lines; the grid is a loop.

# %%
import numpy as np
import pandas as pd

from inferasim.sim.cost import prefill_attention_pairs

conv_t = traces["conversation"]
if TIER_WINDOW_MS:
    conv_t = conv_t.window(0, TIER_WINDOW_MS)
cost = ism.sim.RooflineCostModel("llama-3.1-8b", "h100-80gb")
layouts = {
    "HBM only": [],
    "+ 3M DRAM each": [ism.Tier("dram", C, read_gbps=50.0, write_gbps=50.0, latency_us=5.0)],
    "+ 30M pool": [ism.Tier("pool", N * C, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)],
}
tier_runs = {
    (routing, layout): ism.Simulator(
        replicas=N, routing=routing, cost_model=cost, tiers=tiers or None, seed=0
    ).run(conv_t, progress=False)
    for routing in ("least_loaded", "cache_aware")
    for layout, tiers in layouts.items()
}
tier_runs["least_loaded", "+ 30M pool"].requests.query("load_ms > 0")[
    ["replica", "input_len", "cached_tokens", "hbm_hit_tokens", "pool_hit_tokens", "load_ms", "ttft_ms"]
].head()

# %% [markdown]
# *Prefill GPU time* of a request is what its computed prompt tokens add to
# an engine step: the step time of those tokens after the reused prefix,
# minus the empty step. Reuse saves exactly the tokens it skips.


# %%
def prefill_gpu_ms(res: ism.SimResult) -> np.ndarray:
    req = res.requests.query("status == 'finished'")
    n, cached = req["computed_prefill_tokens"].to_numpy(float), req["cached_tokens"].to_numpy(float)
    zero = np.zeros_like(n)
    return cost.step_time_ms(n, prefill_attention_pairs(n, cached), zero, zero) - cost.step_time_ms(0, 0, 0, 0)


def tier_row(res: ism.SimResult) -> dict[str, float]:
    s = res.summary()
    # hits by tier (SimResult.tiers has a row per tier of the run; none found is 0)
    hits = res.tiers["token_hit_ratio"].reindex(["hbm", "dram", "pool"], fill_value=0.0)
    return {
        "hit": s["token_hit_ratio"],
        **hits.to_dict(),
        "prefill_gpu_ms": prefill_gpu_ms(res).mean(),
        "ttft_mean_ms": s["ttft_ms_mean"],
        "ttft_p50_ms": s["ttft_ms_p50"],
        "load_wait_ms": s["load_ms_mean"] if len(res.tiers) > 1 else 0.0,  # (no tiers: no loads)
    }


simulated = pd.DataFrame(
    [{"routing": r, "layout": lay, **tier_row(res)} for (r, lay), res in tier_runs.items()]
).set_index(["routing", "layout"])
simulated.round({"hit": 3, "hbm": 3, "dram": 3, "pool": 3, "prefill_gpu_ms": 1, "ttft_mean_ms": 1,
                 "ttft_p50_ms": 1, "load_wait_ms": 1})

# %% [markdown]
# The timing-free replay of the same question is
# `ism.reuse.partitioned_hit_rate`: ten LRU caches, each of one replica's
# HBM (plus its DRAM: an exclusive HBM + DRAM hierarchy hits like one LRU
# of their summed size), optionally behind a shared pool (`pool=`; the
# simulator's pool keeps its copy of a block it serves, so
# `pool_exclusive=False`). To compare like with like, each replay places
# every request on the replica the simulated run chose (`assign` takes a
# callable); only the clock is gone.

# %%
hbm_tokens = cost.kv_capacity_blocks(conv_t.block_size) * conv_t.block_size


def replay(res: ism.SimResult, layout: str) -> pd.Series:
    placement = res.requests.sort_index()["replica"].to_numpy()
    local = hbm_tokens + (C if layout == "+ 3M DRAM each" else 0)
    pool = N * C if layout == "+ 30M pool" else 0
    frame = ism.reuse.partitioned_hit_rate(
        conv_t, N * local, N, assign=lambda wl: placement, unit="tokens", pool=pool, pool_exclusive=False
    )
    return frame.loc["partitioned"]


replays = {key: replay(res, key[1]) for key, res in tier_runs.items()}
replays["least_loaded", "+ 30M pool"]

# %%
simulated["replay_hit"] = [replays[key]["token_hit_ratio"] for key in simulated.index]
simulated["replay_pool"] = [replays[key]["pool_hit_tokens"] / replays[key]["input_len"] for key in simulated.index]
simulated[["hit", "replay_hit", "dram", "pool", "replay_pool"]].round(3)

# %%
fig, (a, b) = plt.subplots(1, 2, figsize=(ism.style.DOUBLE[0], 3.4), layout="constrained")
labels = [f"{ism.style.label(r)}\n{lay}" for r, lay in simulated.index]
y = np.arange(len(simulated))[::-1]
left = np.zeros(len(simulated))
for tier, colour in (("hbm", "#0072B2"), ("dram", "#009E73"), ("pool", "#E69F00")):
    a.barh(y, simulated[tier], left=left, color=colour, label=tier.upper() if tier != "pool" else "pool")
    left += simulated[tier].to_numpy()
a.scatter(simulated["replay_hit"], y, marker="|", s=120, color="black", zorder=3, label="replay, no timing")
a.set_yticks(y, labels, fontsize=7)
a.set_xlabel("token hit ratio (simulated)")
a.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, frameon=False)
b.barh(y + 0.2, simulated["prefill_gpu_ms"], 0.4, color="0.4", label="prefill GPU time")
b.barh(y - 0.2, simulated["ttft_mean_ms"], 0.4, color="#56B4E9", label="TTFT (load wait included)")
b.set_yticks(y, [])
b.set_xlabel("mean per request (ms)")
b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
scope = f"first {TIER_WINDOW_MS / 60_000:.0f} min of the conversation trace" if TIER_WINDOW_MS else "conversation trace"
fig.suptitle(f"{N} replicas, HBM + 3M local DRAM each or + one {N * C / 1e6:.0f}M pool ({scope})")
plt.show()

# %%
sim = simulated
ll, ca = sim.loc["least_loaded"], sim.loc["cache_aware"]
scope_text = (
    f"the first {TIER_WINDOW_MS / 60_000:.0f} minutes of the conversation trace ({len(conv_t):,} requests; "
    f"without CI the whole trace, the grid `benchmarks/tier_table.py` runs for the README)"
    if TIER_WINDOW_MS
    else f"the whole conversation trace ({len(conv_t):,} requests)"
)
display(
    Markdown(
        f"On {scope_text}: with least-loaded routing, 3M tokens of local DRAM per replica lift the token hit "
        f"ratio from {ll.loc['HBM only', 'hit']:.1%} to {ll.loc['+ 3M DRAM each', 'hit']:.1%}, and the same "
        f"memory pooled to {ll.loc['+ 30M pool', 'hit']:.1%} ({ll.loc['+ 30M pool', 'pool']:.1%} from the pool): "
        f"a conversation's turns land on different replicas, and only a pool follows them. Mean prefill GPU "
        f"time per request drops from {ll.loc['HBM only', 'prefill_gpu_ms']:.0f} ms to "
        f"{ll.loc['+ 3M DRAM each', 'prefill_gpu_ms']:.0f} ms (local) and "
        f"{ll.loc['+ 30M pool', 'prefill_gpu_ms']:.0f} ms (pooled); mean TTFT, which includes waiting "
        f"{ll.loc['+ 30M pool', 'load_wait_ms']:.1f} ms on average for pool loads, goes from "
        f"{ll.loc['HBM only', 'ttft_mean_ms']:,.0f} ms to {ll.loc['+ 30M pool', 'ttft_mean_ms']:,.0f} ms.\n\n"
        f"Cache-aware routing keeps a conversation on the replica that holds it, so local DRAM already "
        f"sees its sessions: {ca.loc['+ 3M DRAM each', 'hit']:.1%} local against "
        f"{ca.loc['+ 30M pool', 'hit']:.1%} pooled (HBM only: {ca.loc['HBM only', 'hit']:.1%}), prefill GPU "
        f"time {ca.loc['+ 3M DRAM each', 'prefill_gpu_ms']:.0f} ms and "
        f"{ca.loc['+ 30M pool', 'prefill_gpu_ms']:.0f} ms, the pool's slower link costing "
        f"{ca.loc['+ 30M pool', 'load_wait_ms']:.1f} ms of load wait against "
        f"{ca.loc['+ 3M DRAM each', 'load_wait_ms']:.1f} ms for local DRAM.\n\n"
        f"The timing-free replay with the simulated placements agrees to within "
        f"{100 * (sim['hit'] - sim['replay_hit']).abs().max():.1f} points in every cell: the clock "
        f"changes little about *what* hits, it prices the hits (prefill saved, load time paid)."
    )
)
