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
# # 4. Why cache reuse matters: five small experiments
#
# A prefix cache pays off when many requests start with the same tokens: a
# system prompt, a shared document, the earlier turns of a conversation. How
# much it pays depends on the traffic. Here we build synthetic traffic from a
# *prefix pool*: every request starts with one of `num_prefixes` shared
# prefixes of `prefix_len` tokens, picked with Zipf skew `prefix_zipf` (0 is
# uniform, larger concentrates on a few favourites), followed by its own
# ~1,000 tokens. Requests arrive with gamma-distributed gaps whose shape sets
# the burstiness.
#
# Each experiment changes **one** knob and keeps everything else at the base
# setting below, then replays the traffic through one simulated replica
# (Llama-3.1-8B on an H100, roofline cost model) with a small LRU prefix
# cache. Left panels: the share of prompt tokens served from cache (dotted:
# what an infinite cache would serve). Right panels: time to first token,
# median and 99th percentile.

# %% tags=["parameters"]
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
QUICK = CI  # half as many requests per experiment under CI

# %%
# %matplotlib inline
import pandas as pd
from IPython.display import Markdown, display

from inferasim import figures

study = figures.Study(quick=QUICK)
base = pd.Series(
    figures.TEACHING_BASE | {"kv_blocks": figures.TEACHING_KV_BLOCKS}, name="base setting"
)
base.to_frame()


# %%
def at(table, value, column):
    return float(table.loc[table["value"] == value, column].iloc[0])


# %% [markdown]
# ## 1. Popularity skew

# %%
zipf = study.teaching("zipf")
figures.plot_teaching(zipf, "zipf")

# %%
display(
    Markdown(
        f"With uniform popularity (s = 0) each of the {figures.TEACHING_BASE['num_prefixes']} prefixes "
        f"is equally likely, and the {figures.TEACHING_KV_BLOCKS}-block cache cannot hold them all: it "
        f"serves {at(zipf, 0.0, 'token_hit_ratio'):.0%} of prompt tokens. Skew concentrates traffic on a few "
        f"prefixes that stay resident: at s = 2 the cache serves {at(zipf, 2.0, 'token_hit_ratio'):.0%} and "
        f"the TTFT p99 falls from {at(zipf, 0.0, 'ttft_p99_ms'):,.0f} ms to {at(zipf, 2.0, 'ttft_p99_ms'):,.0f} ms. "
        f"The infinite-cache ceiling barely moves ({at(zipf, 0.0, 'infinite_token_hit_ratio'):.0%} to "
        f"{at(zipf, 2.0, 'infinite_token_hit_ratio'):.0%}): skew matters because the cache is finite."
    )
)

# %% [markdown]
# ## 2. Number of distinct prefixes

# %%
prefixes = study.teaching("prefixes")
figures.plot_teaching(prefixes, "prefixes")

# %%
display(
    Markdown(
        f"Few prefixes fit in cache together: with 4 the cache serves {at(prefixes, 4, 'token_hit_ratio'):.0%} "
        f"of prompt tokens. With 256 distinct prefixes the working set ({256 * figures.TEACHING_BASE['prefix_len'] // 512:,} "
        f"blocks) dwarfs the {figures.TEACHING_KV_BLOCKS}-block cache and the hit ratio drops to "
        f"{at(prefixes, 256, 'token_hit_ratio'):.0%}, while TTFT p99 grows from "
        f"{at(prefixes, 4, 'ttft_p99_ms'):,.0f} ms to {at(prefixes, 256, 'ttft_p99_ms'):,.0f} ms."
    )
)

# %% [markdown]
# ## 3. Prefix length

# %%
plen = study.teaching("prefix_len")
figures.plot_teaching(plen, "prefix_len")

# %%
display(
    Markdown(
        f"A longer shared prefix is a larger share of every prompt, so each hit saves more work: the "
        f"ceiling rises from {at(plen, 512, 'infinite_token_hit_ratio'):.0%} (512-token prefix) to "
        f"{at(plen, 4096, 'infinite_token_hit_ratio'):.0%} (4,096 tokens). But the pool of "
        f"{figures.TEACHING_BASE['num_prefixes']} prefixes grows with them, and once it outgrows the "
        f"{figures.TEACHING_KV_BLOCKS}-block cache the served share stalls "
        f"({at(plen, 2048, 'token_hit_ratio'):.0%} at 2,048 tokens, {at(plen, 4096, 'token_hit_ratio'):.0%} at "
        f"4,096) while prompts keep getting longer: TTFT p99 climbs from {at(plen, 512, 'ttft_p99_ms'):,.0f} ms "
        f"to {at(plen, 4096, 'ttft_p99_ms'):,.0f} ms. Reuse only pays if the cache can hold it."
    )
)

# %% [markdown]
# ## 4. Burstiness

# %%
burst = study.teaching("burstiness")
figures.plot_teaching(burst, "burstiness")

# %%
display(
    Markdown(
        f"Burstiness leaves the hit ratio almost unchanged ({at(burst, 0.1, 'token_hit_ratio'):.0%} at gamma "
        f"shape 0.1, {at(burst, 4.0, 'token_hit_ratio'):.0%} at 4): the cache sees the same requests in the "
        f"same order. The tail is another story: the same average load arriving in bursts queues up, and "
        f"TTFT p99 goes from {at(burst, 4.0, 'ttft_p99_ms'):,.0f} ms (smooth) to "
        f"{at(burst, 0.1, 'ttft_p99_ms'):,.0f} ms (bursty). Caching lowers the work per request; it does "
        f"not absorb bursts."
    )
)

# %% [markdown]
# ## 5. Cache size

# %%
size = study.teaching("cache_size")
figures.plot_teaching(size, "cache_size")

# %%
small, large = min(size["value"]), max(size["value"])
display(
    Markdown(
        f"Growing the KV cache from {small:g} to {large:g} blocks raises the served share from "
        f"{at(size, small, 'token_hit_ratio'):.0%} to {at(size, large, 'token_hit_ratio'):.0%}, close to the "
        f"{at(size, large, 'infinite_token_hit_ratio'):.0%} ceiling once the popular prefixes fit, and TTFT "
        f"p99 falls from {at(size, small, 'ttft_p99_ms'):,.0f} ms to {at(size, large, 'ttft_p99_ms'):,.0f} ms. "
        f"The smallest caches hurt twice: the same memory also holds the running requests' KV, so a "
        f"{small:g}-block replica runs few requests at once and queues the rest. Past the working set, "
        f"more cache buys little: {at(size, large // 2, 'token_hit_ratio'):.0%} at {large // 2:g} blocks."
    )
)
