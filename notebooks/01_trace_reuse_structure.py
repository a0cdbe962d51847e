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
# Every cell is the code you would write yourself with `inferasim`: load a
# trace, compute a tidy frame (`ism.reuse`, `ism.studies`), draw it with an
# axes-level function of `ism.plots`. `inferasim figures` draws the same
# figures from the same functions; every number in the text is computed
# below, not typed in.

# %% tags=["parameters"]
# Under CI (QUICK) the replayed policies (FIFO, LFU, optimum) get 2 capacities
# per decade instead of 4; LRU curves are exact at any density (one pass).
import os

QUICK = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

import inferasim as ism

ism.style.use()  # the paper style for every figure below

# Found in $INFERASIM_TRACE_DIR, ./traces, ../shared/traces or the user cache.
traces = {name: ism.Workload.from_mooncake(name) for name in ("conversation", "synthetic")}
conv, syn = traces["conversation"], traces["synthetic"]
conv

# %% [markdown]
# One row per trace: size, duration, rate, and the *ceiling*, the share of
# prompt tokens an infinite cache would serve.

# %%
overview = ism.studies.overview(traces)
overview

# %% [markdown]
# ## Prompt and output lengths
#
# `ism.studies.requests` gives one row per request of every trace: lengths,
# arrival, the reusable prefix and the request's place in a conversation.

# %%
requests = ism.studies.requests(traces)
requests.head()

# %%
fig, (a, b) = plt.subplots(1, 2, figsize=ism.style.DOUBLE)
ism.plots.lengths(requests, "input_len", ax=a).set_title("prompt lengths")
ism.plots.lengths(requests, "output_len", ax=b).set_title("output lengths")
plt.show()


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
fig, (a, b) = plt.subplots(1, 2, figsize=ism.style.DOUBLE)
ism.plots.arrivals(requests, "requests", ax=a).set_title("arrival rate (60 s bins)")
ism.plots.arrivals(requests, "tokens", ax=b).set_title("prompt token rate")
plt.show()

# %%
minutes = requests.assign(minute=requests["arrival_ms"] // 60_000).groupby(["trace", "minute"])
per_minute = pd.DataFrame({"requests": minutes.size(), "tok_s": minutes["input_len"].sum() / 60})
# leave out each trace's last, partial minute
full = per_minute.drop(index=per_minute.groupby(level="trace").tail(1).index)
by_trace = full.groupby(level="trace")
swing = by_trace["requests"].max() / by_trace["requests"].min()
# how the token rate moves against the request rate: from the first to the last five minutes
head, tail = by_trace.head(5).groupby(level="trace").mean(), by_trace.tail(5).groupby(level="trace").mean()
growth = tail / head  # columns: requests, tok_s


def token_rate_words(trace: str) -> str:
    g = growth.loc[trace]
    lo, hi = head.loc[trace, "tok_s"], tail.loc[trace, "tok_s"]
    if abs(g["tok_s"] / g["requests"] - 1) < 0.25:  # the two move together (within 25%)
        return (f"on the {trace} trace it follows the request rate "
                f"({lo / 1e3:,.0f}k tokens/s in the first five minutes, {hi / 1e3:,.0f}k in the last five)")
    return (f"on the {trace} trace it does not follow the request rate: it goes from "
            f"{lo / 1e3:,.0f}k to {hi / 1e3:,.0f}k tokens/s between the first and the last five minutes "
            f"while the request rate changes by {g['requests'] - 1:+.0%}, so its later prompts are longer")


ov = overview.set_index("trace")
display(
    Markdown(
        f"The conversation trace covers {ov.loc['conversation', 'duration_min']:.0f} minutes at "
        f"{ov.loc['conversation', 'rate_rps']:.2f} requests/s on average, the synthetic one "
        f"{ov.loc['synthetic', 'duration_min']:.0f} minutes at {ov.loc['synthetic', 'rate_rps']:.2f} "
        f"requests/s. Minute-to-minute load varies by a factor of {swing['conversation']:.1f} "
        f"(conversation) and {swing['synthetic']:.1f} (synthetic) between the quietest and "
        f"busiest minute. The prompt-token rate (right) sets the prefill work: "
        f"{token_rate_words('conversation')}; {token_rate_words('synthetic')}."
    )
)

# %% [markdown]
# ## Block popularity

# %%
popularity = ism.studies.block_popularity(traces)
popularity.head()

# %%
ism.plots.popularity(popularity, fit=False)
plt.show()

# %%
pop = popularity.groupby("trace")["requests"]
top1 = popularity.groupby("trace").apply(
    lambda g: g["requests"].head(max(len(g) // 100, 1)).sum() / g["requests"].sum()
)
once = pop.apply(lambda r: (r == 1).mean())
display(
    Markdown(
        f"A few blocks are everywhere and most are never seen again. In the conversation trace the most "
        f"popular block appears in {pop.max()['conversation']:,} of {len(conv):,} requests (a shared "
        f"system prompt), while {once['conversation']:.0%} of distinct blocks are referenced once; the "
        f"top 1% of blocks take {top1['conversation']:.0%} of all references. The synthetic trace is "
        f"flatter at the head (top block in {pop.max()['synthetic']:,} requests) but has the same long "
        f"tail ({once['synthetic']:.0%} referenced once)."
    )
)

# %% [markdown]
# ## Reuse distance
#
# The reuse distance of a block reference is the number of distinct tokens
# touched since the block's previous use; an LRU cache larger than that
# distance serves the reference. One row per block reference (`inf` for a
# first use); the dashed line is a 3M-token cache, one prefill node's DRAM
# in the paper.

# %%
NODE = ism.studies.NODE_CACHE_TOKENS
distances = ism.studies.reuse_distances(traces)
distances.head()

# %%
ism.plots.reuse_distance(distances, mark_tokens=NODE)
plt.show()

# %%
d = distances.assign(again=np.isfinite(distances["stack_distance_tokens"]))
again = d.groupby("trace")["again"].mean()
within = d[d["again"]].groupby("trace")["stack_distance_tokens"].apply(lambda s: (s <= NODE).mean())
display(
    Markdown(
        f"{again['conversation']:.0%} of conversation block references and {again['synthetic']:.0%} "
        f"of synthetic ones repeat an earlier block. Of those repeats, {within['conversation']:.0%} "
        f"(conversation) and {within['synthetic']:.0%} (synthetic) come back within "
        f"{NODE / 1e6:.0f}M tokens of other traffic, which bounds what a {NODE / 1e6:.0f}M-token LRU "
        f"cache can serve; the rest need a cache an order of magnitude larger."
    )
)

# %% [markdown]
# ## Prefix-tree and multi-turn structure

# %%
fig, (a, b, c) = plt.subplots(1, 3, figsize=ism.style.DOUBLE)
ism.plots.reusable_share(requests, ax=a).set_title("reusable prefix per prompt")
ism.plots.sessions(requests, kind="turns", ax=b).set_title("multi-turn chains")
ism.plots.sessions(requests, kind="gap", ax=c).set_title("gap before the next turn")
plt.show()

# %%
structure = ism.studies.structure_stats(traces).pivot(
    index="statistic", columns="trace", values="value"
)
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
# First one trace and one policy: `ism.reuse.hit_rate_curve` computes the
# exact LRU hit ratio at every capacity in one pass over the trace.

# %%
curve = ism.reuse.hit_rate_curve(conv, unit="tokens")
curve.head()

# %%
ceiling = float(ov.loc["conversation", "ceiling_token_hit_ratio"])
ax = ism.plots.hit_rate(curve, ceiling=ceiling, label="conversation, LRU")
ax.set_xlim(1e4, 1e8)
plt.show()

# %% [markdown]
# Now both traces, capacities from 10 thousand to 100 million tokens (log
# scale), four eviction policies: LRU, FIFO, LFU and Belady's offline optimum
# (evict the block used furthest in the future), which no online policy can
# beat. FIFO, LFU and the optimum replay the trace once per capacity, so
# this cell takes a while (about half a minute); the 3M-token point is on
# every curve.

# %%
replay_points = 2 if QUICK else None  # capacities per decade of FIFO/LFU/optimum (default 4)
hit_rates = ism.studies.hit_rate_vs_capacity(traces, replay_per_decade=replay_points)
hit_rates.head()

# %%
fig, axes = plt.subplots(1, 2, figsize=(ism.style.DOUBLE[0], 2.8), sharey=True)
node = ism.studies.at_capacity(hit_rates, NODE, overview)
for ax, trace in zip(axes, traces, strict=True):
    ism.plots.hit_rate(
        hit_rates.query("trace == @trace").drop(columns="trace"),
        ax=ax,
        secondary_axis=False,
        ceiling=float(ov.loc[trace, "ceiling_token_hit_ratio"]),
    )
    ism.plots.mark_capacity(node.query("trace == @trace and policy == 'lru'").iloc[0], ax=ax)
    ax.set_xlim(1e4, 1e8)
    ax.set_title(f"{trace} trace")
axes[1].get_legend().remove()
axes[1].set_ylabel("")
plt.show()

# %%
node

# %%
lines = []
for trace in traces:
    c = hit_rates.query("trace == @trace")
    at = node.query("trace == @trace").set_index("policy")
    lru, opt = at.loc["lru"], at.loc["opt"]
    online = at.drop("opt")["token_hit_ratio"]
    lru_curve = c.query("policy == 'lru'")
    match = lru_curve.loc[lru_curve["token_hit_ratio"] >= opt["token_hit_ratio"] - 1e-9]
    near = lru_curve.loc[lru_curve["token_hit_ratio"] >= 0.9 * lru["ceiling_token_hit_ratio"]]
    lines.append(
        f"* **{trace}**: the ceiling is {lru['ceiling_token_hit_ratio']:.1%} of prompt tokens. A 3M-token "
        f"LRU cache reaches {lru['token_hit_ratio']:.1%}, that is **{lru['share_of_ceiling']:.0%} of the "
        f"ceiling**; FIFO and LFU do no better (the three online policies span {online.min():.1%} to "
        f"{online.max():.1%}). The offline optimum reaches {opt['token_hit_ratio']:.1%} "
        f"({opt['share_of_ceiling']:.0%} of the ceiling) with the same 3M tokens; LRU needs "
        f"{match['capacity_tokens'].min() / 1e6:,.0f}M tokens to match it and "
        f"{near['capacity_tokens'].min() / 1e6:,.0f}M to get within 10% of the ceiling."
    )
display(Markdown("\n".join(lines)))

# %% [markdown]
# The online policies barely differ from each other, and all of them sit far
# below the offline optimum at a few million tokens: most blocks are used
# once (the long tail of the popularity plot), and a recency or frequency
# rule cannot tell the one-off blocks from the start of a conversation that
# will come back in two minutes. Capacity closes the gap; so would knowing
# which requests will return. That is why the FAST'25 design pools the DRAM
# of many nodes into one distributed cache (notebook 3).

# %% [markdown]
# ## Reuse inside the last block: a token-level estimate
#
# The traces name 512-token blocks, so a cache replayed from them can only
# reuse whole blocks: where a prompt departs from an earlier one, the block
# it departs in counts as a miss, though its first tokens may well be the
# same as the earlier prompt's. `ism.reuse.infinite_hit_ratio(wl,
# partial_block=...)` estimates that hidden reuse for an infinite cache:
# `"none"` is the block-level ceiling used so far; at the block where a
# request diverges from the most recent earlier request that shared its
# prefix up to there, `"upper"` credits all the tokens the two blocks could
# share (the shorter block's length), an upper bound, and `"half"` half of
# them, a middle estimate. Block hit ratios never change.

# %%
estimates = ["none", "half", "upper"]
token_level = pd.DataFrame(
    [
        {
            "trace": name,
            "partial_block": pb,
            "token_hit_ratio": (c := ism.reuse.infinite_hit_ratio(wl, partial_block=pb)).token_hit_ratio,
            "partial_tokens": c.partial_tokens,
            "block_hit_ratio": c.block_hit_ratio,
        }
        for name, wl in traces.items()
        for pb in estimates
    ]
)
token_level.head()

# %%
ceilings = token_level.pivot(index="trace", columns="partial_block", values="token_hit_ratio")[estimates]
(100 * ceilings).round(1).rename_axis(columns="infinite-cache token hit ratio (%)")

# %%
display(
    Markdown(
        f"Counting the tokens a prompt shares inside the block where it diverges raises the conversation "
        f"trace's ceiling from {ceilings.loc['conversation', 'none']:.1%} (whole blocks) to "
        f"{ceilings.loc['conversation', 'half']:.1%} (half of the block credited) and at most "
        f"{ceilings.loc['conversation', 'upper']:.1%} (all of it), and the synthetic trace's from "
        f"{ceilings.loc['synthetic', 'none']:.1%} to {ceilings.loc['synthetic', 'half']:.1%} and at most "
        f"{ceilings.loc['synthetic', 'upper']:.1%}. The block-level numbers in this notebook are what an "
        f"engine caching whole blocks can reach; a token-level (radix-tree) cache such as SGLang's could "
        f"reach up to {100 * (ceilings.loc['conversation', 'upper'] - ceilings.loc['conversation', 'none']):.1f} "
        f"points more on the conversation trace, if the diverging prompts really share those tokens, "
        f"which the block hashes cannot tell."
    )
)

# %% [markdown]
# ## Synthesized traffic with the same structure
#
# Capacity planning needs more traffic than one recorded hour.
# `ism.Workload.synthesize(like=wl, seed=...)` fits the trace's prefix
# tree, its conversations (turns, gaps, growth per turn) and its arrivals,
# and samples new requests with fresh hash ids that reproduce them. At
# scale 1 it draws every conversation family once, so the reuse structure
# should match the original's; `num_sessions_scale=4` starts four times as
# many sessions in the same hour.

# %%
synth = ism.Workload.synthesize(like=conv, seed=0)
synth4 = ism.Workload.synthesize(like=conv, num_sessions_scale=4, seed=0)
synth.frame.head()

# %%
versions = {"original": conv, "synthesized": synth, "synthesized, 4x sessions": synth4}
synth_curves = {name: ism.reuse.hit_rate_curve(wl, unit="tokens") for name, wl in versions.items()}
synth_ceiling = {name: ism.reuse.infinite_hit_ratio(wl).token_hit_ratio for name, wl in versions.items()}
synth_curves["synthesized"].head()

# %%
ax = ism.plots.hit_rate(synth_curves, ceiling=synth_ceiling["original"])
ax.set_xlim(1e4, 1e8)
ax.set_title("conversation trace: original and synthesized, LRU")
plt.show()

# %%
points = [1e4, 1e5, 1e6, 1e7]
at_points = pd.DataFrame(
    {name: ism.reuse.hit_rate_curve(wl, points, unit="tokens")["token_hit_ratio"].to_numpy() for name, wl in versions.items()},
    index=pd.Index([ism.style.tokens_text(p) for p in points], name="cache (tokens)"),
)
at_points.loc["infinite"] = pd.Series(synth_ceiling)
at_points["synthesized - original (points)"] = 100 * (at_points["synthesized"] - at_points["original"])
at_points.round(4)

# %%
gap = at_points["synthesized - original (points)"]
finite = at_points.drop(index="infinite")


def reaches(name: str, share: float = 0.95) -> float:
    """Smallest cache (tokens) whose LRU hit ratio is within `share` of the ceiling."""
    c = synth_curves[name]
    return float(c.loc[c["token_hit_ratio"] >= share * synth_ceiling[name], "capacity_tokens"].min())


display(
    Markdown(
        f"At scale 1 the synthesized trace ({len(synth):,} requests against {len(conv):,}) follows the "
        f"original's hit-rate curve: at 10k, 100k, 1M and 10M tokens of LRU cache the two differ by at most "
        f"{gap.drop('infinite').abs().max():.2f} points, and their infinite-cache ratios are "
        f"{synth_ceiling['original']:.2%} and {synth_ceiling['synthesized']:.2%}. With four times the sessions "
        f"({len(synth4):,} requests in the same {ov.loc['conversation', 'duration_min']:.0f} minutes) every session still reuses its own history, so the "
        f"ceiling stays at {synth_ceiling['synthesized, 4x sessions']:.2%}, but a cache must hold four times "
        f"as many live conversations: at 10M tokens the hit ratio falls from "
        f"{finite.loc['10M', 'original']:.1%} to {finite.loc['10M', 'synthesized, 4x sessions']:.1%}, and "
        f"95% of the ceiling takes {ism.style.tokens_text(reaches('synthesized, 4x sessions'))} tokens of cache "
        f"instead of {ism.style.tokens_text(reaches('original'))}."
    )
)
