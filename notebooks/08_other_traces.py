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
# # 8. Other traces, and a measured run against the simulator
#
# The FAST'25 Mooncake traces are not the only public LLM serving traces.
# This notebook puts three families side by side:
#
# * **FAST'25 conversation** (Kimi, `conversation_trace.jsonl`): arrivals in
#   ms, lengths, 512-token prefix hash ids;
# * **Alibaba Bailian** (Qwen, ATC'25): arrivals in seconds, explicit
#   session trees (`parent_chat_id`), a request `type`, 16-token hash ids.
#   The files are Git LFS objects that are not on these machines; when the
#   real file is absent this notebook uses a **synthesized stand-in** in the
#   exact Bailian format (labelled as such everywhere below);
# * **Azure LLM inference 2023** (Splitwise, ISCA 2024; code and
#   conversation): date-time arrivals and lengths only, **no hash ids**, so
#   their cache numbers are absent (not zero).
#
# It compares lengths, arrival burstiness and reuse, asks what a fleet sized
# for one trace does on another, and ends with a **calibration** of the cost
# model from a measured run read in AIPerf's `profile_export.jsonl` format.

# %% tags=["parameters"]
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
QUICK = CI or os.environ.get("INFERASIM_QUICK", "").lower() in ("1", "true", "yes")
WINDOW_MIN = 5 if QUICK else 10  # minutes of each trace the fleets replay
STANDIN_REQUESTS = 1500  # requests of the synthesized Bailian stand-in
REPLICAS = 2  # the fleet sized on the conversation trace (Llama-3.1-8B, one H100 each)
KV_TOKENS = 2_000_000  # prefix cache per replica (tokens)

# %%
# %matplotlib inline
import io
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

import inferasim as ism
from inferasim import TraceNotFoundError, traces

conv = ism.Workload.from_trace("conversation")
azure = {name: ism.Workload.from_trace(name) for name in ("azure_code_2023", "azure_conv_2023")}
display(traces.list_traces()[["format", "requests", "license", "holds", "found"]])

# %% [markdown]
# ## The Bailian trace, or a stand-in in its format
#
# The real Bailian traces are read with `Workload.from_bailian`. Without
# one, the stand-in below takes the first requests of the conversation
# trace, splits each 512-token id into 32 chained 16-token ids (the
# Bailian block size), links each request to the previous turn that
# `ism.reuse.sessions` infers for it (as `parent_chat_id`), draws a request
# type per session (text, search, image, file), writes it as a Bailian file
# and reads it back with the Bailian reader. Its numbers describe the
# conversation trace at 16-token blocks, **not** Qwen's traffic.

# %%
def expand_blocks(wl, factor=32):
    """Each id split into ``factor`` chained ids of ``block_size / factor`` tokens."""
    bs = wl.block_size // factor
    counts = np.minimum(wl.num_blocks * factor, -(-wl.input_len // bs))
    offsets = np.concatenate(([0], np.cumsum(counts)))
    row = np.repeat(np.arange(len(wl)), counts)
    k = np.arange(offsets[-1]) - offsets[:-1][row]
    ids = wl.hash_ids[wl.offsets[:-1][row] + k // factor] * factor + k % factor
    return ism.Workload(wl.frame, ids, offsets, block_size=bs)


def bailian_standin(n):
    base = conv.head(n)
    chains = ism.reuse.sessions(base).requests
    rng = np.random.default_rng(0)
    kinds = rng.choice(["text", "search", "image", "file"], p=[0.7, 0.15, 0.1, 0.05],
                       size=len(base))
    chat = np.arange(len(base)) + 1
    wide = expand_blocks(base)
    frame = wide.frame.assign(
        chat_id=chat,
        parent_chat_id=np.where(chains["parent"] >= 0, chat[chains["parent"].clip(lower=0)], -1),
        turn=chains["turn"].to_numpy(),
        type=kinds[chains["session"].to_numpy()],  # one type per session
    )
    buf = io.BytesIO()
    ism.Workload(frame, wide.hash_ids, wide.offsets, block_size=16).to_bailian(buf)
    return ism.Workload.from_bailian(io.BytesIO(buf.getvalue()))


try:
    bailian = ism.Workload.from_bailian(traces.find_trace("bailian_traceA", download=False))
    BAILIAN = "Bailian trace A"
except TraceNotFoundError:
    bailian = bailian_standin(STANDIN_REQUESTS)
    BAILIAN = "Bailian-format stand-in (synthesized)"
conv_name = "FAST'25 conversation"
workloads = {conv_name: conv, BAILIAN: bailian,
             "Azure code 2023": azure["azure_code_2023"], "Azure conv 2023": azure["azure_conv_2023"]}
tree = ism.reuse.sessions(bailian)
display(Markdown(
    f"**{BAILIAN}**: {len(bailian):,} requests in {tree.sessions.shape[0]:,} sessions "
    f"(longest {int(tree.sessions['turns'].max())} turns), "
    f"{bailian.hash_ids.size:,} hash ids of {bailian.block_size} tokens; "
    f"session links from `parent_chat_id` "
    f"({int((bailian.frame['parent_chat_id'] >= 0).sum()):,} requests continue another)."
))

# %% [markdown]
# ## Lengths, arrivals and reuse side by side
#
# Burstiness is the coefficient of variation of the gaps between arrivals
# (1 for a Poisson process) and the peak-to-mean ratio of requests per
# second. The reuse ceiling is the share of prompt tokens an infinite prefix
# cache would serve; a trace without hash ids has none to report.

# %%
def burst(wl):
    gaps = np.diff(wl.arrival_ms)
    per_s = np.bincount((wl.arrival_ms // 1000).astype(int))
    return gaps.std() / gaps.mean(), per_s.max() / per_s.mean()


rows = []
for name, wl in workloads.items():
    d = wl.describe()
    cv, peak = burst(wl)
    rows.append({
        "trace": name, "requests": len(wl), "minutes": d["duration_ms"] / 60000,
        "rate_rps": d["offered_rate_rps"], "input_mean": d["input_mean"], "input_p99": d["input_p99"],
        "output_mean": d["output_mean"], "gap_cv": cv, "peak_to_mean_1s": peak,
        "reuse_ceiling": d["infinite_token_hit_ratio"],
    })
table = pd.DataFrame(rows).set_index("trace")
display(table.round(3).astype(object).where(table.notna(), "absent (no hash ids)"))
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
ism.plots.lengths({k: w.frame for k, w in workloads.items()}, ax=axes[0])
ism.plots.arrivals({k: w.frame for k, w in workloads.items()}, bin_s=60, ax=axes[1])
plt.show()
burstiest = table["gap_cv"].idxmax()
display(Markdown(
    f"Prompts are longest in the conversation trace (mean {table.loc[conv_name, 'input_mean']:,.0f} "
    f"tokens) and shortest in Azure conversation ({table.loc['Azure conv 2023', 'input_mean']:,.0f}); "
    f"the burstiest arrivals are {burstiest}'s (gap CV {table.loc[burstiest, 'gap_cv']:.2f}, "
    f"peak second {table.loc[burstiest, 'peak_to_mean_1s']:.1f}x the mean). Only the traces with hash ids "
    f"have a reuse ceiling: {table.loc[conv_name, 'reuse_ceiling']:.1%} of the conversation trace's "
    f"prompt tokens; the Azure traces' cache numbers are absent, not zero."
))

# %% [markdown]
# ## Reuse by request type (Bailian format)
#
# The ATC'25 paper analyses reuse per request category; with the `type`
# column every reuse frame groups that way. Here: the per-request hits of an
# LRU prefix cache of 1M tokens.

# %%
hits = ism.reuse.replay_cache(bailian, 1_000_000, unit="tokens")
hits = hits.assign(input_len=bailian.input_len)
by_type = hits.groupby("type")[["hit_tokens", "input_len"]].sum()
by_type["token_hit_ratio"] = by_type["hit_tokens"] / by_type["input_len"]
display(by_type)
best = by_type["token_hit_ratio"].idxmax()
display(Markdown(
    f"In the {BAILIAN}, `{best}` requests reuse the most of their prompts at 1M tokens of cache "
    f"({by_type.loc[best, 'token_hit_ratio']:.1%}); overall {hits.attrs['token_hit_ratio']:.1%}."
))

# %% [markdown]
# ## A fleet sized for one trace, on another
#
# A fleet of `REPLICAS` replicas is sized on a window of the conversation
# trace; the same fleet then serves the same length of each Azure trace.
# The Azure traces have no hash ids: the simulator serves them without any
# prefix reuse, and says so (their hit ratios are NaN, not 0).

# %%
sim = ism.Simulator(replicas=REPLICAS, kv_tokens=KV_TOKENS, routing="cache_aware")
window = WINDOW_MIN * 60_000
runs = {name: sim.run(workloads[name].window(0, window), progress=False)
        for name in (conv_name, "Azure code 2023", "Azure conv 2023")}
keys = ["requests", "throughput_rps", "token_hit_ratio", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
        "saturated"]
fleet = pd.DataFrame({name: r.summary()[keys] for name, r in runs.items()}).T
display(fleet.round(3))
print(runs["Azure conv 2023"].summary().notes)
worst = fleet["ttft_ms_p99"].idxmax()
display(Markdown(
    f"On {WINDOW_MIN} minutes of each trace the {REPLICAS}-replica fleet has a TTFT p99 of "
    f"{fleet.loc[conv_name, 'ttft_ms_p99']:,.0f} ms on the conversation trace it was sized for "
    f"(token hit ratio {fleet.loc[conv_name, 'token_hit_ratio']:.1%}) and "
    f"{fleet.loc[worst, 'ttft_ms_p99']:,.0f} ms at worst ({worst})."
))

# %% [markdown]
# ## Validating against a measurement: calibration
#
# A measured run comes in from a load generator: NVIDIA AIPerf replays a
# Mooncake trace (`Workload.to_mooncake(path)` writes one it reads as it
# is) and exports `profile_export.jsonl`; `ism.read_aiperf`
# reads it into a frame with the simulator's column names.
#
# There is no GPU here, so the "measured" run below is **synthetic**: the
# simulator with a hidden "true" cost model (a slower GPU: lower compute and
# bandwidth efficiency, more overhead per step), written in AIPerf's format
# and read back. The procedure is the one for a real run:
#
# 1. compare the default model's simulation with the measurement;
# 2. calibrate the cost model on the measured *isolated* requests (sent one at
#    a time): each TTFT is one prefill step, each TPOT one batch-1 decode
#    step (`RooflineCostModel.calibrate`);
# 3. simulate again and compare.

# %%
truth = ism.RooflineCostModel(mfu=0.6, mbu=0.75, overhead_ms=2.5)


def aiperf_export(result):
    """A run's requests as AIPerf 0.1.1 MetricRecordInfo lines (what a real export holds)."""
    lines = []
    for i, r in enumerate(result.requests.itertuples()):
        metrics = {"input_sequence_length": {"value": int(r.input_len), "unit": "tokens"},
                   "output_sequence_length": {"value": int(r.output_len), "unit": "tokens"},
                   "time_to_first_token": {"value": r.ttft_ms, "unit": "ms"},
                   "request_latency": {"value": r.e2e_ms, "unit": "ms"}}
        if r.output_len > 1:
            metrics["inter_token_latency"] = {"value": r.tpot_ms, "unit": "ms"}
        start = 1_759_813_207_000_000_000 + int(round(r.arrival_ms * 1e6))
        lines.append(json.dumps({"metadata": {"session_num": i, "x_request_id": f"r{i}",
                                              "request_start_ns": start, "benchmark_phase": "profiling"},
                                 "metrics": metrics, "error": None}))
    return io.StringIO("\n".join(lines) + "\n")


# isolated requests: one at a time, 10 s apart, prompts from 256 to 16k tokens
lengths = np.geomspace(256, 16384, 12).astype(int)
isolated = ism.Workload.from_requests(np.arange(lengths.size) * 10_000.0, lengths, [64] * lengths.size)
measured_isolated = ism.read_aiperf(aiperf_export(ism.Simulator(cost_model=truth).run(isolated, progress=False)))
# the trace replay, measured
replay = conv.window(0, window)
measured = ism.read_aiperf(aiperf_export(ism.Simulator(
    replicas=REPLICAS, kv_tokens=KV_TOKENS, routing="cache_aware", cost_model=truth).run(replay, progress=False)))
before = ism.compare(measured, runs[conv_name])

points = pd.concat([
    pd.DataFrame({"kind": "prefill", "tokens": measured_isolated["input_len"], "batch": 1, "context": 0,
                  "ms": measured_isolated["ttft_ms"]}),
    pd.DataFrame({"kind": "decode", "tokens": 1, "batch": 1,
                  "context": measured_isolated["input_len"] + measured_isolated["output_len"] // 2,
                  "ms": measured_isolated["tpot_ms"]}),
], ignore_index=True)
fit = ism.RooflineCostModel().calibrate(points)
calibrated = ism.Simulator(replicas=REPLICAS, kv_tokens=KV_TOKENS, routing="cache_aware",
                           cost_model=fit.model).run(replay, progress=False)
after = ism.compare(measured, calibrated)
side = pd.concat({"before": before.set_index(["metric", "stat"])["rel_error"],
                  "after": after.set_index(["metric", "stat"])["rel_error"]}, axis=1)
display(pd.Series(fit.params).round(4).rename("fitted"))
display(side.round(4))
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
ism.plots.measured_vs_simulated(before, metrics=["ttft_ms", "tpot_ms"], ax=axes[0])
axes[0].set_title("default cost model")
ism.plots.measured_vs_simulated(after, metrics=["ttft_ms", "tpot_ms"], ax=axes[1])
axes[1].set_title("calibrated on isolated requests")
plt.tight_layout()
plt.show()
b = before.set_index(["metric", "stat"])
a = after.set_index(["metric", "stat"])
display(Markdown(
    f"Before calibration the simulated TTFT p50 is off by {b.loc[('ttft_ms', 'p50'), 'rel_error']:+.1%} "
    f"and the TPOT p50 by {b.loc[('tpot_ms', 'p50'), 'rel_error']:+.1%} (simulated vs measured); "
    f"calibrated on {len(points)} isolated steps (fitted mfu {fit.params['mfu']:.3f}, mbu "
    f"{fit.params['mbu']:.3f}, overhead {fit.params['overhead_ms']:.2f} ms; the hidden truth was "
    f"{truth.mfu}, {truth.mbu}, {truth.overhead_ms:.2f}) the errors are {a.loc[('ttft_ms', 'p50'), 'rel_error']:+.1%} and "
    f"{a.loc[('tpot_ms', 'p50'), 'rel_error']:+.1%}; per request the mean TTFT error goes from "
    f"{b.loc[('ttft_ms', 'per_request'), 'rel_error']:.1%} to {a.loc[('ttft_ms', 'per_request'), 'rel_error']:.1%}."
))
