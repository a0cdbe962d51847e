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
# fleet under four routing policies to see what each does to time to first
# token (TTFT).

# %% tags=["parameters"]
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Under CI (quick) the routing simulations use the first 20 minutes of each
# trace; otherwise the full traces.
QUICK = CI

# %%
# %matplotlib inline
from IPython.display import Markdown, display

from inferasim import figures

study = figures.Study(quick=QUICK)
N, C = figures.FLEET_REPLICAS, figures.NODE_CACHE_TOKENS

# %% [markdown]
# ## Ten local 3M-token caches against one pooled 30M-token cache
#
# Each bar is the share of prompt tokens served from cache; the dotted line is
# the infinite-cache ceiling. The hatched bars replay the trace through ten
# LRU caches with requests placed by a fixed rule: uniformly at random,
# round-robin, or sticky on the first block (requests that start with the same
# block always go to the same node, the simplest locality-aware placement).
# The solid coloured bars are the same ten caches inside the fleet simulator
# under each routing policy (described in the second half of this notebook).
# The black bar is one pooled cache that sees every request.

# %%
figures.plot_local_vs_global(study.local_global, study.routing_table)

# %%
lg = study.local_global.set_index(["trace", "assign"])
conv_lg, syn_lg = lg.loc["conversation"], lg.loc["synthetic"]
first_blocks = {
    name: len(set(wl.hash_ids[wl.offsets[:-1][wl.num_blocks > 0]].tolist()))
    for name, wl in study.workloads.items()
}
display(
    Markdown(
        f"Ten local caches with random placement serve {conv_lg.loc['random', 'local_token_hit_ratio']:.1%} "
        f"of conversation prompt tokens; the same memory pooled serves "
        f"{conv_lg.loc['random', 'global_token_hit_ratio']:.1%}, "
        f"{conv_lg.loc['random', 'global_token_hit_ratio'] / conv_lg.loc['random', 'local_token_hit_ratio']:.1f}x "
        f"more and within reach of the {conv_lg.loc['random', 'ceiling_token_hit_ratio']:.1%} ceiling. On the "
        f"synthetic trace it is {syn_lg.loc['random', 'local_token_hit_ratio']:.1%} against "
        f"{syn_lg.loc['random', 'global_token_hit_ratio']:.1%}. Round-robin placement is no better than "
        f"random ({conv_lg.loc['round_robin', 'local_token_hit_ratio']:.1%} and "
        f"{syn_lg.loc['round_robin', 'local_token_hit_ratio']:.1%}).\n\n"
        f"Sticky placement shows both faces of locality. The synthetic trace has "
        f"{first_blocks['synthetic']:,} distinct first blocks, so keeping each first block on one node keeps "
        f"each document's requests together and reaches {syn_lg.loc['hash_first_block', 'local_token_hit_ratio']:.1%}, "
        f"as much as the pooled cache. Every conversation request starts with the same block "
        f"({first_blocks['conversation']} distinct first block), so sticky placement sends the whole trace to "
        f"one node and gets exactly what one 3M-token cache gets "
        f"({conv_lg.loc['hash_first_block', 'local_token_hit_ratio']:.1%}), with nine nodes idle."
    )
)
study.local_global

# %%
routed = study.routing_table.set_index(["trace", "routing"])["token_hit_ratio"]
display(
    Markdown(
        f"Routing can recover what pooling gives. Ten local caches behind the simulator's cache-aware "
        f"router serve {routed['conversation', 'cache_aware']:.1%} of conversation prompt tokens and "
        f"{routed['synthetic', 'cache_aware']:.1%} of synthetic ones, against "
        f"{conv_lg.loc['random', 'global_token_hit_ratio']:.1%} and "
        f"{syn_lg.loc['random', 'global_token_hit_ratio']:.1%} for the pooled cache: sending each "
        f"request where its prefix already is keeps every conversation's turns on one node, so no node "
        f"needs more than its share of the memory. Load-only routing (least-loaded: "
        f"{routed['conversation', 'least_loaded']:.1%} and {routed['synthetic', 'least_loaded']:.1%}) "
        f"scatters the turns like random placement does."
    )
)

# %% [markdown]
# A random placement divides the reuse: a follow-up turn lands on a node that
# has not seen its conversation nine times out of ten. A pooled cache has no
# such problem, and ten nodes' worth of memory in one place also reaches
# further along the hit-rate curve of notebook 1. Locality-aware routing gets
# the same reuse from local caches, if it does not pay for it in load, which
# is what the latency simulations below measure.
#
# ## TTFT by routing policy
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
#   the naive form of a cache-aware router, as an approximate-tree router
#   without a load term behaves);
# * **cache + load cost**: Dynamo-style, minimising
#   *overlap weight x new prefill blocks + active decode blocks*.

# %%
table = study.routing_table
table.round(
    {"ttft_p50_ms": 0, "ttft_p99_ms": 0, "tpot_p50_ms": 1, "token_hit_ratio": 3, "busiest_share": 3}
)

# %%
figures.plot_ttft_by_routing(study.routing)

# %%
figures.plot_replica_load(study.routing, trace="conversation")

# %%
t = table.set_index(["trace", "routing"])
conv = t.loc["conversation"]
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
        f"it follows conversations and lets load break the ties: busiest replica {conv.loc['cache_aware', 'busiest_share']:.0%}, token hit "
        f"ratio {conv.loc['cache_aware', 'token_hit_ratio']:.1%} (close to the pooled cache above), TTFT p99 "
        f"{conv.loc['cache_aware', 'ttft_p99_ms'] / 1000:,.1f} s. Load-only routing balances as well "
        f"(least-loaded: {conv.loc['least_loaded', 'busiest_share']:.0%}) but reuses little "
        f"({conv.loc['least_loaded', 'token_hit_ratio']:.1%}), like random placement "
        f"({conv.loc['random', 'token_hit_ratio']:.1%}, TTFT p99 {conv.loc['random', 'ttft_p99_ms'] / 1000:,.1f} s). "
        f"The cache-and-load cost trades a little reuse ({conv.loc['kv_cost', 'token_hit_ratio']:.1%}) for "
        f"balance: TTFT p99 {conv.loc['kv_cost', 'ttft_p99_ms'] / 1000:,.1f} s; the lowest tail of the five "
        f"is {figures.label(best_p99)}'s ({conv.loc[best_p99, 'ttft_p99_ms'] / 1000:,.1f} s)."
    )
)
