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
# # 1. The reuse structure of the FAST'25 traces
#
# Mooncake's FAST'25 paper released request traces from Kimi's serving fleet:
# for each request, its arrival time, prompt and output lengths, and one hash
# id per 512-token block of the prompt. A hash id names the block *and
# everything before it*, so two requests can share KV cache only for their
# common leading run of ids. This notebook looks at what that structure means
# for a prefix KV cache: how long prompts are, how traffic arrives, how often
# blocks come back and after how much other traffic, and which hit rate a
# single cache reaches as it grows from 10 thousand to 100 million tokens.
#
# Every figure here is drawn by a function of `inferasim.figures`, so
# `inferasim figures` regenerates exactly these plots; every number in the
# text is computed below, not typed in.

# %%
# %matplotlib inline
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from inferasim import figures

study = figures.Study()  # finds the traces ($INFERASIM_TRACE_DIR, ../shared/traces, cache)
workloads = study.workloads
conv, syn = workloads["conversation"], workloads["synthetic"]
overview = pd.DataFrame({name: wl.describe() for name, wl in workloads.items()}).T
overview[
    [
        "requests",
        "duration_ms",
        "offered_rate_rps",
        "input_mean",
        "output_mean",
        "blocks_total",
        "blocks_unique",
        "infinite_token_hit_ratio",
    ]
].astype(float).round(3)

# %% [markdown]
# ## Prompt and output lengths

# %%
figures.plot_trace_lengths(workloads)


# %%
def share_below(values: np.ndarray, limit: float) -> float:
    return float((values < limit).mean())


display(
    Markdown(
        f"Conversation prompts are long and regular: the median is "
        f"{np.median(conv.input_len):,.0f} tokens and the 99th percentile "
        f"{np.percentile(conv.input_len, 99):,.0f}, because each turn re-sends the "
        f"whole dialogue so far. The synthetic trace mixes very short prompts "
        f"({share_below(syn.input_len, 512):.0%} fit in less than one 512-token block, "
        f"which no engine can cache) with long documents (median "
        f"{np.median(syn.input_len):,.0f} tokens). Outputs are short next to the prompts "
        f"(medians {np.median(conv.output_len):,.0f} and {np.median(syn.output_len):,.0f} "
        f"tokens), so prefill dominates the work and prefix caching matters."
    )
)

# %% [markdown]
# ## Arrivals over time

# %%
figures.plot_trace_arrivals(workloads)


# %%
def per_minute(wl):
    minutes = (wl.arrival_ms // 60_000).astype(int)
    return np.bincount(minutes)[:-1]  # drop the last, partial minute


conv_rpm, syn_rpm = per_minute(conv), per_minute(syn)
display(
    Markdown(
        f"The conversation trace covers {conv.describe()['duration_ms'] / 60_000:.0f} minutes at "
        f"{conv.describe()['offered_rate_rps']:.2f} requests/s on average, the synthetic one "
        f"{syn.describe()['duration_ms'] / 60_000:.0f} minutes at {syn.describe()['offered_rate_rps']:.2f} "
        f"requests/s. Minute-to-minute load varies by a factor of {conv_rpm.max() / conv_rpm.min():.1f} "
        f"(conversation) and {syn_rpm.max() / syn_rpm.min():.1f} (synthetic) between the quietest and "
        f"busiest minute; the prompt-token rate, which sets the prefill work, follows the request rate."
    )
)

# %% [markdown]
# ## Block popularity

# %%
figures.plot_block_popularity(workloads)


# %%
def popularity_stats(wl):
    _, counts = np.unique(wl.hash_ids, return_counts=True)
    return (
        counts.max(),
        (counts == 1).mean(),
        np.sort(counts)[::-1][: max(len(counts) // 100, 1)].sum() / counts.sum(),
    )


conv_top, conv_once, conv_top1 = popularity_stats(conv)
syn_top, syn_once, syn_top1 = popularity_stats(syn)
display(
    Markdown(
        f"A few blocks are everywhere and most are never seen again. In the conversation trace the most "
        f"popular block appears in {conv_top:,} of {len(conv):,} requests (a shared system prompt), while "
        f"{conv_once:.0%} of distinct blocks are referenced once; the top 1% of blocks take "
        f"{conv_top1:.0%} of all references. The synthetic trace is flatter at the head (top block in "
        f"{syn_top:,} requests) but has the same long tail ({syn_once:.0%} referenced once)."
    )
)

# %% [markdown]
# ## Reuse distance
#
# The reuse distance of a block reference is the number of distinct tokens
# touched since the block's previous use; an LRU cache larger than that
# distance serves the reference. The dashed line is a 3M-token cache, one
# prefill node's DRAM in the paper.

# %%
figures.plot_reuse_distance(workloads)


# %%
def reuse_within(wl, tokens):
    d = figures.reuse_distance_tokens(wl)  # inf for first uses
    again = np.isfinite(d)
    return again.mean(), (d[again] <= tokens).mean()


conv_again, conv_within = reuse_within(conv, figures.NODE_CACHE_TOKENS)
syn_again, syn_within = reuse_within(syn, figures.NODE_CACHE_TOKENS)
display(
    Markdown(
        f"{conv_again:.0%} of conversation block references and {syn_again:.0%} of synthetic ones "
        f"repeat an earlier block. Of those repeats, {conv_within:.0%} (conversation) and "
        f"{syn_within:.0%} (synthetic) come back within 3M tokens of other traffic, which bounds what "
        f"a 3M-token LRU cache can serve; the rest need a cache an order of magnitude larger."
    )
)

# %% [markdown]
# ## Prefix-tree and multi-turn structure

# %%
figures.plot_prefix_structure(workloads)


# %%
def structure_of(wl):
    cached = figures.cached_prefix_tokens(wl)
    return {
        "requests reusing more than one block": float((cached > wl.block_size).mean()),
        "mean reused share of a prompt": float((cached / wl.input_len).mean()),
        **figures.session_stats(wl),
        **figures.tree_stats(wl),
    }


structure = pd.DataFrame({name: structure_of(wl) for name, wl in workloads.items()})
structure

# %%
st = structure
display(
    Markdown(
        f"Every conversation request starts with the same block (the radix tree has "
        f"{st.loc['distinct first blocks', 'conversation']:.0f} distinct first block against "
        f"{st.loc['distinct first blocks', 'synthetic']:,.0f} in the synthetic trace), but only "
        f"{st.loc['requests reusing more than one block', 'conversation']:.0%} of conversation requests reuse "
        f"more than that block. That deeper reuse is multi-turn: "
        f"{st.loc['multi-turn sessions', 'conversation']:,.0f} chains of "
        f"{st.loc['mean turns per multi-turn session', 'conversation']:.1f} turns on average hold "
        f"{st.loc['requests in multi-turn sessions', 'conversation']:.0%} of the requests, and the median "
        f"gap between turns is {st.loc['median gap between turns (s)', 'conversation']:.0f} s, so a cache "
        f"must keep a dialogue for minutes to serve its next turn. The synthetic trace has fewer chains "
        f"({st.loc['requests in multi-turn sessions', 'synthetic']:.0%} of requests) and reuses long shared "
        f"documents instead: {st.loc['requests reusing more than one block', 'synthetic']:.0%} of its requests "
        f"reuse more than one block, but with a mean reused share of "
        f"{st.loc['mean reused share of a prompt', 'synthetic']:.0%} per prompt, close to the conversation "
        f"trace's {st.loc['mean reused share of a prompt', 'conversation']:.0%}."
    )
)

# %% [markdown]
# ## Hit rate against cache capacity
#
# One cache, capacities from 10 thousand to 100 million tokens (log scale),
# four eviction policies: LRU, FIFO, LFU and Belady's offline optimum (evict
# the block used furthest in the future), which no online policy can beat.
# The dotted line is the ceiling, the hit ratio of an infinite cache; the
# dashed line marks a 3M-token cache.

# %%
figures.plot_hit_rate_capacity(study.hit_rates, study.ceilings, study.node_cache)

# %%
node = study.node_cache.set_index(["trace", "policy"])
curves = study.hit_rates


def capacity_for(trace, policy, share):
    c = curves[(curves["trace"] == trace) & (curves["policy"] == policy)]
    target = share * study.ceilings.loc[trace, "ceiling_token_hit_ratio"]
    reached = c[c["token_hit_ratio"] >= target]
    return reached["capacity_tokens"].min() if len(reached) else float("nan")


def lru_capacity_for(trace, target):
    """Smallest LRU capacity (tokens) on the curve reaching a hit ratio of ``target``."""
    c = curves[(curves["trace"] == trace) & (curves["policy"] == "lru")]
    reached = c[c["token_hit_ratio"] >= target - 1e-9]
    return reached["capacity_tokens"].min() if len(reached) else float("nan")


lines = []
for trace in study.ceilings.index:
    ceiling = study.ceilings.loc[trace, "ceiling_token_hit_ratio"]
    lru, opt = node.loc[(trace, "lru")], node.loc[(trace, "opt")]
    online = node.loc[trace].drop("opt")["token_hit_ratio"]
    lines.append(
        f"* **{trace}**: the ceiling is {ceiling:.1%} of prompt tokens. A 3M-token LRU cache reaches "
        f"{lru['token_hit_ratio']:.1%}, that is **{lru['share_of_ceiling']:.0%} of the ceiling**; FIFO and "
        f"LFU do no better (the three online policies span {online.min():.1%} to {online.max():.1%}). The "
        f"offline optimum reaches {opt['token_hit_ratio']:.1%} ({opt['share_of_ceiling']:.0%} of the "
        f"ceiling) with the same 3M tokens; LRU needs "
        f"{lru_capacity_for(trace, opt['token_hit_ratio']) / 1e6:,.0f}M tokens to match it and "
        f"{capacity_for(trace, 'lru', 0.9) / 1e6:,.0f}M to get within 10% of the ceiling."
    )
display(Markdown("\n".join(lines)))
study.node_cache

# %% [markdown]
# The online policies barely differ from each other, and all of them sit far
# below the offline optimum at a few million tokens: most blocks are used
# once (the long tail of the popularity plot), and a recency or frequency
# rule cannot tell the one-off blocks from the start of a conversation that
# will come back in two minutes. Capacity closes the gap; so would knowing
# which requests will return. That is why the FAST'25 design pools the DRAM
# of many nodes into one distributed cache (notebook 3).
