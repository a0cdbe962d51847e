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
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

import inferasim as ism

ism.style.use()
KV_BLOCKS = ism.studies.TEACHING_KV_BLOCKS
base = pd.Series(ism.studies.TEACHING_BASE | {"kv_blocks": KV_BLOCKS}, name="base setting")
base.to_frame()

# %% [markdown]
# One configuration is a workload and a one-replica simulation; this is what
# every point of the experiments below does, here at the base setting:

# %%
wl = ism.studies.teaching_workload(num_requests=400 if QUICK else None)
res = ism.Simulator(replicas=1, kv_tokens=KV_BLOCKS * wl.block_size, seed=0).run(wl)
ceiling = ism.reuse.infinite_hit_ratio(wl).token_hit_ratio
summary = res.summary()
display(
    Markdown(
        f"Base setting: {len(wl):,} requests; an infinite cache would serve {ceiling:.0%} of prompt "
        f"tokens, the {KV_BLOCKS}-block cache serves {summary['token_hit_ratio']:.0%}; TTFT p99 "
        f"{summary['ttft_ms_p99']:,.0f} ms."
    )
)


# %%
def show(table: pd.DataFrame) -> None:
    """Hit ratio (left) and TTFT (right) of one experiment against its knob."""
    exp = ism.studies.TEACHING[table["experiment"].iloc[0]]
    cache = "LRU cache" if exp.knob == "kv_blocks" else f"{KV_BLOCKS}-block LRU cache"
    fig, (a, b) = plt.subplots(1, 2, figsize=(ism.style.DOUBLE[0], 2.2))
    for ax, what in ((a, "hit"), (b, "ttft")):
        ism.plots.teaching(
            table, what, ax=ax, axis_label=exp.axis_label, log_x=exp.log_x, cache_label=cache
        )
    plt.show()


def at(table: pd.DataFrame, value: float, column: str) -> float:
    return float(table.loc[table["value"] == value, column].iloc[0])


# %% [markdown]
# ## 1. Popularity skew

# %%
zipf = ism.studies.teaching("zipf", quick=QUICK)
zipf

# %%
show(zipf)

# %%
display(
    Markdown(
        f"With uniform popularity (s = 0) each of the {ism.studies.TEACHING_BASE['num_prefixes']} prefixes "
        f"is equally likely, and the {KV_BLOCKS}-block cache cannot hold them all: it "
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
prefixes = ism.studies.teaching("prefixes", quick=QUICK)
show(prefixes)

# %%
display(
    Markdown(
        f"Few prefixes fit in cache together: with 4 the cache serves {at(prefixes, 4, 'token_hit_ratio'):.0%} "
        f"of prompt tokens. With 256 distinct prefixes the working set "
        f"({256 * ism.studies.TEACHING_BASE['prefix_len'] // 512:,} blocks) dwarfs the {KV_BLOCKS}-block "
        f"cache and the hit ratio drops to {at(prefixes, 256, 'token_hit_ratio'):.0%}, while TTFT p99 grows "
        f"from {at(prefixes, 4, 'ttft_p99_ms'):,.0f} ms to {at(prefixes, 256, 'ttft_p99_ms'):,.0f} ms."
    )
)

# %% [markdown]
# ## 3. Prefix length

# %%
plen = ism.studies.teaching("prefix_len", quick=QUICK)
show(plen)

# %%
display(
    Markdown(
        f"A longer shared prefix is a larger share of every prompt, so each hit saves more work: the "
        f"ceiling rises from {at(plen, 512, 'infinite_token_hit_ratio'):.0%} (512-token prefix) to "
        f"{at(plen, 4096, 'infinite_token_hit_ratio'):.0%} (4,096 tokens). But the pool of "
        f"{ism.studies.TEACHING_BASE['num_prefixes']} prefixes grows with them, and once it outgrows the "
        f"{KV_BLOCKS}-block cache the served share stalls "
        f"({at(plen, 2048, 'token_hit_ratio'):.0%} at 2,048 tokens, {at(plen, 4096, 'token_hit_ratio'):.0%} at "
        f"4,096) while prompts keep getting longer: TTFT p99 climbs from {at(plen, 512, 'ttft_p99_ms'):,.0f} ms "
        f"to {at(plen, 4096, 'ttft_p99_ms'):,.0f} ms. Reuse only pays if the cache can hold it."
    )
)

# %% [markdown]
# ## 4. Burstiness

# %%
burst = ism.studies.teaching("burstiness", quick=QUICK)
show(burst)

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
size = ism.studies.teaching("cache_size", quick=QUICK)
show(size)

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
