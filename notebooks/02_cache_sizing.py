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
# # 2. Sizing a prefix KV cache, interactively
#
# Pick a trace, drag the capacity slider and watch where the hit-rate curve
# puts you; then press **simulate** to see what that cache does to latency
# on a fleet of replicas with the routing policy and load of your choice.
#
# The hit-rate view reads a curve that is computed once per trace and
# eviction policy (for LRU in a single pass over the trace, for the others
# by replaying 17 capacities), so slider moves only move the marker. The
# widget is `ism.widgets.cache_sizing`: embed it in your own notebook with
# your own workloads. Below it, the same questions answered in code with
# `ism.reuse` and `ism.Simulator`.

# %% tags=["parameters"]
# The simulate buttons replay the whole trace; under CI (QUICK) only its
# first 10 minutes.
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
QUICK = CI
WINDOW_MS = 10 * 60_000 if QUICK else None

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

import inferasim as ism

ism.style.use()
traces = {name: ism.Workload.from_mooncake(name) for name in ("conversation", "synthetic")}
conv = traces["conversation"]

# The widget at its defaults: conversation trace, 3M tokens, LRU, 4 replicas,
# cache + load cost routing (the `sizing_*` figures of `inferasim figures`).
widget = ism.widgets.cache_sizing(
    traces, capacity_tokens=3e6, replicas=4, routing="kv_cost", sim_window_ms=WINDOW_MS
)
widget

# %% [markdown]
# ## The same numbers in code
#
# The hit-rate view is `ism.reuse.hit_rate_curve`: the exact LRU hit ratio
# of one cache at every capacity, in one pass over the trace. Read a few
# capacities off it, for both traces.

# %%
capacities = [1e5, 1e6, 3e6, 1e7, 3e7]
curves = pd.concat(
    ism.reuse.hit_rate_curve(wl, capacities, unit="tokens").assign(trace=name)
    for name, wl in traces.items()
)
curves.head()

# %%
sizing = curves.pivot(index="capacity_tokens", columns="trace", values="token_hit_ratio")
# capacities round down to whole 512-token blocks: label the rows as asked
sizing.index = [ism.style.tokens_text(c) for c in capacities]
sizing.index.name = "cache (tokens)"
(100 * sizing).round(1).rename_axis(columns="token hit ratio (%)")

# %%
gain = sizing.loc["30M"] - sizing.loc["3M"]
display(
    Markdown(
        f"Ten times more cache than one node's 3M tokens (30M, a pooled cache of ten nodes) adds "
        f"{gain['conversation']:.1%} of prompt tokens on the conversation trace and "
        f"{gain['synthetic']:.1%} on the synthetic one: the curve is still climbing at 3M tokens."
    )
)

# %% [markdown]
# The widget's controls are reachable from code too: `widget.controls["capacity"].value = 1e7`
# moves the slider and its marker, `widget.simulate()` presses the button.

# %% [markdown]
# ## A simulation, as the button runs it
#
# The **simulate** button runs `ism.Simulator` with the controls' settings
# on the chosen trace (see the parameter cell for the slice). Here is that
# run written out: four replicas, a 3M-token LRU cache each (`kv_tokens`,
# whole blocks of 512 tokens), Dynamo-style cache + load cost routing.

# %%
wl = conv.window(0, WINDOW_MS) if WINDOW_MS else conv
kv_tokens = 3_000_000 // conv.block_size * conv.block_size  # whole 512-token blocks, as the widget counts
sim = ism.Simulator(replicas=4, routing="kv_cost", kv_tokens=kv_tokens, seed=0)
res = sim.run(wl)
res.requests.head()

# %%
# Pressing the widget's button (here from code) runs exactly this simulation;
# the widget above now shows its plots, and moving a control marks them stale.
button_run = widget.simulate()
assert button_run.requests.equals(res.requests)
print(f"widget.simulate(): the same {len(button_run.requests):,} requests, frame for frame, as the run above")

# %%
summary = res.summary()
summary

# %%
fig, (a, b, c) = plt.subplots(1, 3, figsize=ism.style.DOUBLE)
ism.plots.latency_cdf(res, "ttft_ms", ax=a)
ism.plots.latency_cdf(res, "tpot_ms", ax=b)
ism.plots.replica_load(res, ax=c).set_title("requests per replica")
plt.show()

# %%
req = res.requests
# the four caches together: one LRU cache of their summed size over the same requests
summed = ism.reuse.hit_rate_curve(wl, [4 * 3e6], unit="tokens")["token_hit_ratio"].iloc[0]
display(
    Markdown(
        f"On 4 replicas with {ism.style.label('kv_cost')} routing and a 3M-token cache each, the "
        f"simulated fleet serves {summary['token_hit_ratio']:.1%} of prompt tokens from cache. "
        f"The reuse analysis above gives {sizing.loc['3M', 'conversation']:.1%} for one cache of "
        f"3M tokens that sees every request of the whole trace; the four replicas hold 12M tokens "
        f"between them, and one LRU cache of 12M tokens over the simulated requests would serve "
        f"{summed:.1%}. TTFT is {summary['ttft_ms_p50']:,.0f} ms at the median and "
        f"{summary['ttft_ms_p99']:,.0f} ms at p99, TPOT {summary['tpot_ms_p50']:,.1f} ms at the median. "
        f"The busiest replica takes {summary['max_replica_share']:.0%} of the {len(req):,} requests; "
        + (
            "none was rejected, so the latencies cover every request."
            if not summary["rejected"]
            else f"{int(summary['rejected']):,} were rejected (they never fit in a replica's KV memory) "
            f"and the latencies cover the {int(summary['finished']):,} finished ones."
        )
    )
)

# %% [markdown]
# ## Tiers behind HBM: host DRAM per replica and a shared pool
#
# A replica's prefix cache lives in the HBM its model leaves free. Behind
# it, blocks evicted from HBM can go to host DRAM (each replica its own) and
# to a pool the whole fleet shares (Mooncake Store, LMCache); a request that
# finds its prefix there loads it back over a link instead of recomputing
# it. Without timing, such a hierarchy is `ism.reuse.tiered_hit_rate`: one
# row per tier, top tier first, capacities in blocks. The HBM of one
# replica comes from the model (Llama-3.1-8B on one H100-80GB, the
# roofline preset); below it, 3M tokens of DRAM.

# %%
cost = ism.sim.RooflineCostModel("llama-3.1-8b", "h100-80gb")
hbm_blocks = cost.kv_capacity_blocks(conv.block_size)  # KV blocks the model leaves free in HBM
dram_blocks = 3_000_000 // conv.block_size
by_tier = ism.reuse.tiered_hit_rate(conv, [hbm_blocks, dram_blocks])
by_tier.head()

# %%
hbm_share, dram_share = by_tier["token_hit_ratio"]
display(
    Markdown(
        f"One replica's HBM holds {hbm_blocks * conv.block_size:,} tokens of KV; on its own, as one cache "
        f"that sees the whole conversation trace, it serves {hbm_share:.1%} of prompt tokens. A 3M-token "
        f"DRAM tier behind it serves another {dram_share:.1%}, {by_tier.attrs['token_hit_ratio']:.1%} in "
        f"all: in an exclusive LRU hierarchy (a block lives in one tier, evicted blocks move down, hits "
        f"move up) the tiers together hit exactly like one LRU cache of their summed size, and the HBM "
        f"takes the most recent part of that stack."
    )
)

# %% [markdown]
# The tiered widget, `ism.widgets.tiered_cache_sizing`, wraps exactly that:
# the HBM slider starts at the model's KV capacity (move it to override),
# DRAM is per replica, the pool is one capacity for the fleet. The stacked
# view shows, against DRAM per replica, which tier serves the hits in the
# exclusive hierarchy above; the readout first gives the chosen stack's own
# timing-free limit (`tiered.limit_shares`: `ism.reuse.replay_tiers` on one
# replica, each tier written as its system writes it), then the plot's
# shares at the chosen sizes. **simulate** runs the fleet
# twice, with the tiers and with HBM only (same trace slice as above), and
# shows TTFT with the time spent loading blocks from the tiers included.

# %%
tiered = ism.widgets.tiered_cache_sizing(
    traces, dram_tokens=3e6, pool_tokens=3e7, replicas=4, routing="kv_cost", sim_window_ms=WINDOW_MS
)
tiered

# %% [markdown]
# What the stacked view draws, as a frame (one row per DRAM size on the
# slider; the HBM and pool as chosen) and as the figure:

# %%
stack = tiered.stack_curve()
stack.head()

# %%
display(tiered.stack_figure)

# %%
cap, shares = tiered.capacities(), tiered.shares
check = ism.reuse.tiered_hit_rate(conv, [cap["hbm"], cap["dram"], cap["pool"]], unit="tokens")
assert abs(check["token_hit_ratio"].sum() - sum(shares.values())) < 1e-12
best = stack.iloc[-1]
display(
    Markdown(
        f"At {ism.style.tokens_text(cap['dram'])} tokens of DRAM per replica and a "
        f"{ism.style.tokens_text(cap['pool'])}-token pool, one replica's hierarchy serves "
        f"{shares['hbm']:.1%} from HBM, {shares['dram']:.1%} from DRAM and {shares['pool']:.1%} from the pool "
        f"({sum(shares.values()):.1%} in all; `tiered_hit_rate` with the three capacities gives the same "
        f"{check['token_hit_ratio'].sum():.1%}). With the largest DRAM on the slider "
        f"({ism.style.tokens_text(best['dram_tokens'])} tokens) DRAM alone serves {best['dram']:.1%}. "
        f"The widget's own stack ({tiered.tier_text()}) has the timing-free limit "
        + " + ".join(f"{name} {share:.1%}" for name, share in tiered.limit_shares.items())
        + f" = {sum(tiered.limit_shares.values()):.1%} on one replica (`limit_shares`, the readout's "
        "first numbers): its pool is written through, so it takes every computed block, not only "
        "DRAM's evictions."
    )
)

# %% [markdown]
# Pressing **simulate** (here from code) runs the fleet with these tiers,
# DRAM over PCIe at 50 GB/s and the pool over a 25 GB/s RDMA link per
# replica, and with HBM only.

# %%
tiered_res = tiered.simulate()
# the first requests that loaded part of their prefix from a tier
tiered_res.requests.query("load_ms > 0")[
    ["replica", "ttft_ms", "cached_tokens", "hbm_hit_tokens", "dram_hit_tokens", "pool_hit_tokens", "load_ms"]
].head()

# %%
display(tiered.sim_figure)

# %%
ts, hs = tiered.result.summary(), tiered.baseline.summary()
hits = tiered.result.tiers["token_hit_ratio"]  # by tier: hbm, dram, pool
display(
    Markdown(
        f"On {len(tiered_res.requests):,} requests "
        f"({'the first ' + f'{WINDOW_MS / 60_000:.0f} minutes' if WINDOW_MS else 'the whole trace'}), "
        f"4 replicas with {ism.style.label('kv_cost')} routing serve {ts['token_hit_ratio']:.1%} of prompt "
        f"tokens from cache with the tiers (HBM {hits['hbm']:.1%}, DRAM "
        f"{hits['dram']:.1%}, pool {hits['pool']:.1%}) against "
        f"{hs['token_hit_ratio']:.1%} with HBM only. TTFT, including a mean wait of "
        f"{ts['load_ms_mean']:.1f} ms for loads, is {ts['ttft_ms_p50']:,.0f} ms at the median "
        f"(HBM only: {hs['ttft_ms_p50']:,.0f} ms) and {ts['ttft_ms_p99']:,.0f} ms at p99 "
        f"(HBM only: {hs['ttft_ms_p99']:,.0f} ms).\n\n"
        f"The simulated pool serves {hits['pool']:.1%} where the reuse analysis above gives "
        f"{shares['pool']:.1%}: that analysis replays the whole trace through one replica's exclusive "
        f"hierarchy (a block in one tier at a time), while the simulated fleet has 4 replicas and "
        f"the widget's own stack (status line: {tiered.tier_text()}), so a block can sit in HBM, DRAM "
        f"and the pool at once"
        + (", and only a slice of the trace is simulated." if WINDOW_MS else ".")
    )
)

# %% [markdown]
# ### The tier stacks of deployed systems
#
# The widget's **system** dropdown builds the tier stack with a preset of
# `ism.tiers` instead (vLLM's CPU offload, LMCache, Mooncake Store, Dynamo
# KVBM, SGLang HiCache; each preset's docstring cites the documentation
# whose write semantics it follows). The DRAM slider feeds the preset's
# per-replica tier and the pool slider its shared one; a slider the system
# has no tier for is turned off. The status line names the tiers and how
# each is written. At the sizes above:

# %%
systems = ism.widgets.TIER_SYSTEMS
stacks = ism.widgets.tiered_cache_sizing(
    traces, dram_tokens=3e6, pool_tokens=3e7, replicas=4, routing="kv_cost", sim_window_ms=WINDOW_MS
)
rows = []
for key in systems:
    stacks.controls["system"].value = key
    rows.append({"system": key, "tiers": stacks.tier_text().split(": ", 1)[1]})
pd.DataFrame(rows).set_index("system")

# %% [markdown]
# LMCache at the same sizes keeps the same two capacities but writes its
# CPU tier through (every computed chunk is stored, not only what HBM
# evicts), on full-duplex links. Simulated on the same requests:

# %%
stacks.controls["system"].value = "lmcache"
lm_res = stacks.simulate()
lm_s = lm_res.summary()
lm_hits = lm_res.tiers["token_hit_ratio"]  # by tier: hbm, cpu, remote
display(
    Markdown(
        f"With LMCache's stack ({stacks.tier_text().split(': ', 1)[1]}) the fleet serves "
        f"{lm_s['token_hit_ratio']:.1%} of prompt tokens from cache (HBM {lm_hits['hbm']:.1%}, CPU "
        f"{lm_hits['cpu']:.1%}, remote {lm_hits['remote']:.1%}) against {ts['token_hit_ratio']:.1%} with "
        f"the widget's own stack, whose DRAM is written on eviction; TTFT p50 "
        f"{lm_s['ttft_ms_p50']:,.0f} ms and p99 {lm_s['ttft_ms_p99']:,.0f} ms (own stack: "
        f"{ts['ttft_ms_p50']:,.0f} and {ts['ttft_ms_p99']:,.0f} ms)."
    )
)
