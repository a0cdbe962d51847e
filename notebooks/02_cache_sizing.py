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
# The simulate button replays the whole trace; under CI (QUICK) only its
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
# run written out: four replicas, a 3M-token LRU cache each (in blocks of
# 512 tokens), Dynamo-style cache + load cost routing.

# %%
wl = conv.window(0, WINDOW_MS) if WINDOW_MS else conv
sim = ism.Simulator(replicas=4, routing="kv_cost", kv_blocks=3_000_000 // wl.block_size, seed=0)
res = sim.run(wl)
res.requests.head()

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
display(
    Markdown(
        f"On 4 replicas with {ism.style.label('kv_cost')} routing and a 3M-token cache each, the "
        f"simulated fleet serves {summary['token_hit_ratio']:.1%} of prompt tokens from cache "
        f"(the reuse analysis above says {sizing.loc['3M', 'conversation']:.1%} for one cache of that size "
        f"that sees every request of the whole trace); TTFT is {summary['ttft_ms_p50']:,.0f} ms at the median and "
        f"{summary['ttft_ms_p99']:,.0f} ms at p99, TPOT {summary['tpot_ms_p50']:,.1f} ms at the median. "
        f"The busiest replica takes {summary['max_replica_share']:.0%} of the {len(req):,} requests."
    )
)
