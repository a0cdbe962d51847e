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
# widget is `inferasim.widgets.cache_sizing`: embed it in your own notebook
# with your own workloads.

# %% tags=["parameters"]
# The simulate button replays the whole trace; under CI (QUICK) only its
# first 10 minutes.
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
QUICK = CI

# %%
# %matplotlib inline
from IPython.display import Markdown, display

from inferasim import figures

# The widget at its defaults (figures.SIZING_DEFAULTS: conversation trace, 3M
# tokens, 4 replicas, cache + load cost routing), already simulated once; the
# same object draws the `sizing_*` figures of `inferasim figures`.
study = figures.Study(quick=QUICK)
widget = study.sizing
widget

# %% [markdown]
# ## Driving the widget from code
#
# Every control is reachable as `widget.controls[name]`, so the same widget
# answers questions in a script. Here we move the slider over a few
# capacities and read the hit ratio each gives, on both traces.

# %%
import pandas as pd

rows = []
for trace in study.workloads:
    widget.controls["trace"].value = trace
    for capacity in (1e5, 1e6, 3e6, 1e7, 3e7):
        widget.controls["capacity"].value = capacity
        rows.append(
            {"trace": trace, "capacity_tokens": capacity, "token_hit_ratio": widget.hit_ratio}
        )
sizing = pd.DataFrame(rows).pivot(
    index="capacity_tokens", columns="trace", values="token_hit_ratio"
)
(100 * sizing).round(1).rename_axis(columns="token hit ratio (%)")

# %%
conv_gain = sizing.loc[3e7, "conversation"] - sizing.loc[3e6, "conversation"]
display(
    Markdown(
        f"Ten times more cache than one node's 3M tokens (30M, a pooled cache of ten nodes) adds "
        f"{conv_gain:.1%} of prompt tokens on the conversation trace and "
        f"{sizing.loc[3e7, 'synthetic'] - sizing.loc[3e6, 'synthetic']:.1%} on the synthetic one: "
        f"the curve is still climbing at 3M tokens."
    )
)

# %% [markdown]
# ## A simulation, as the button runs it
#
# `widget.simulate()` is what the **simulate** button calls. It replays the
# chosen trace (see the parameter cell for the slice) through the
# simulator with the controls' settings and redraws the latency plots below
# the button; the result frame is `widget.result`.

# %%
widget.controls["trace"].value = "conversation"
widget.controls["capacity"].value = 3e6
result = widget.simulate()
summary = widget.summary()
display(widget.snapshot())  # a copy: later runs of the widget leave it as it is
summary

# %%
req = result.requests
display(
    Markdown(
        f"On {widget.controls['replicas'].value} replicas with {figures.label(widget.controls['routing'].value)} "
        f"routing and a 3M-token cache each, the simulated fleet serves {req['cached_tokens'].sum() / req['input_len'].sum():.1%} "
        f"of prompt tokens from cache; TTFT is {summary.loc['ttft_ms', 'p50']:,.0f} ms at the median and "
        f"{summary.loc['ttft_ms', 'p99']:,.0f} ms at p99, TPOT {summary.loc['tpot_ms', 'p50']:,.1f} ms at the median."
    )
)
