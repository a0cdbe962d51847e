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
# # 5. Reproducing the Mooncake (FAST'25) experiments
#
# Mooncake serves Kimi on a disaggregated fleet: prefill nodes, decode nodes,
# a KV cache pooled over the nodes' DRAM, and a global scheduler (Conductor)
# that sends each request where its prefix is and turns away early what
# would miss its SLO. This notebook repeats the paper's experiments on the
# traces the paper released, with every number computed here next to the
# paper's published value and the difference explained.
#
# **Sources of the paper's values.** The workload table (Table 2 of the
# FAST'25 paper: requests, average input and output lengths, cache ratio) is
# checked against the traces themselves below. The eviction-policy table
# (Table 1), the scheduling TTFTs and the overload rejection counts come
# from the paper's arXiv version (2407.00079), which ran them on a
# 23,608-request trace that is not among the released FAST'25 traces, with a
# LLaMA2-70B-shaped model on 8x A800 nodes; we read them from a published
# summary of that version, so treat them as the paper's reported values,
# not as numbers we re-derived.
#
# **Setup here.** The closest presets: `llama-3.1-70b` (the same shape as
# LLaMA2-70B: 80 layers, 8 KV heads of 128, hidden 8192; only the
# vocabulary differs) with tensor parallelism 8 on `a100-80gb` (the A800 is
# an A100 with a slower NVLink), one 8-GPU node per instance, the roofline
# cost model; block size 512 tokens as in the traces.

# %% tags=["parameters"]
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Under CI the fleet simulations replay the first 5 minutes of the
# conversation trace (about 900 requests); otherwise the first hour (all).
WINDOW_MIN = 5 if CI else 60

# %%
# %matplotlib inline
import re
import warnings

import pandas as pd
from IPython.display import Markdown, display

import inferasim as ism
from inferasim.reuse import hit_rate_curve, infinite_hit_ratio, partitioned_hit_rate
from inferasim.sim import RooflineCostModel, Tier

traces = {name: ism.Workload.from_mooncake(name) for name in ("conversation", "synthetic")}
conv = traces["conversation"]
cost = RooflineCostModel("llama-3.1-70b", "a100-80gb", tp=8)
sim_wl = conv.window(0, WINDOW_MIN * 60_000)
display(Markdown(f"Fleet simulations use {len(sim_wl):,} requests ({WINDOW_MIN} minutes)."))

# %% [markdown]
# ## 1. The workloads and their hit ceilings (Table 2)
#
# The *cache ratio* of Table 2 is the share of prompt tokens an unbounded
# prefix cache would serve: the ceiling no eviction policy or scheduler can
# pass.

# %%
PAPER_T2 = {  # FAST'25 Table 2: requests, avg input, avg output, cache ratio
    "conversation": (12031, 12035, 343, 0.40),
    "synthetic": (3993, 15325, 149, 0.66),
}
rows = []
for name, wl in traces.items():
    ceil = infinite_hit_ratio(wl)
    n, i, o, c = PAPER_T2[name]
    rows.append(
        {
            "trace": name,
            "requests": len(wl),
            "paper requests": n,
            "avg input": wl.input_len.mean(),
            "paper avg input": i,
            "avg output": wl.output_len.mean(),
            "paper avg output": o,
            "token ceiling": ceil.token_hit_ratio,
            "block ceiling": ceil.block_hit_ratio,
            "paper cache ratio": c,
        }
    )
t2 = pd.DataFrame(rows).set_index("trace")
t2.round(3)

# %%
display(
    Markdown(
        f"Request counts and average lengths match Table 2 exactly (conversation: "
        f"{t2.loc['conversation', 'avg input']:,.0f} / {t2.loc['conversation', 'avg output']:,.0f} "
        f"tokens), so these are the paper's traces. The ceilings differ a little: we find "
        f"{t2.loc['conversation', 'token ceiling']:.1%} of conversation prompt tokens reusable "
        f"(paper: {PAPER_T2['conversation'][3]:.0%}) and {t2.loc['synthetic', 'token ceiling']:.1%} of "
        f"synthetic ones (paper: {PAPER_T2['synthetic'][3]:.0%}). Our ceiling counts whole 512-token "
        f"blocks of the leading matched run only, and at least one token of every prompt is always "
        f"computed; the block ceiling ({t2.loc['conversation', 'block ceiling']:.1%} and "
        f"{t2.loc['synthetic', 'block ceiling']:.1%}) is the same measure in blocks. A ratio that "
        f"credits partial last blocks or counts matches per block rather than per prefix would "
        f"land a few points higher, which is the likely source of the gap."
    )
)

# %% [markdown]
# ## 2. Hit ratio against capacity for LRU, LFU and length-aware eviction (Table 1)
#
# One cache serving every request (the paper's "single global cache pool"),
# capacities in 512-token blocks, block hit ratio. `length_aware` is the
# paper's LengthAwareCache: like LFU (fewest uses first) but, among equally
# used blocks, the one deepest in its prompt goes first, then the least
# recently used.

# %%
CAPS = [1000, 10000, 30000, 50000, 100000]
PAPER_T1 = {  # arXiv Table 1, 23,608-request trace, block capacity -> hit ratio
    "lru": [0.30, 0.40, 0.48, 0.50, 0.51],
    "lfu": [0.30, 0.35, 0.43, 0.49, 0.51],
    "length_aware": [0.30, 0.35, 0.42, 0.48, 0.50],
}
curves = []
for policy in ("lru", "lfu", "length_aware"):
    c = hit_rate_curve(conv, CAPS, policy=policy)
    for cap, ours, paper in zip(CAPS, c["block_hit_ratio"], PAPER_T1[policy], strict=True):
        curves.append({"policy": policy, "capacity_blocks": cap, "ours": ours, "paper": paper})
t1 = pd.DataFrame(curves)
t1_wide = t1.pivot(index="policy", columns="capacity_blocks", values=["ours", "paper"])
t1_wide.round(3)

# %%
ours = t1.set_index(["policy", "capacity_blocks"])["ours"]
best_mid = ours.xs(10000, level="capacity_blocks").idxmax()
lru_wins = [c for c in CAPS if ours.xs(c, level="capacity_blocks").idxmax() == "lru"]
spread_1k = ours.xs(1000, level="capacity_blocks")
display(
    Markdown(
        f"At 10,000 blocks LRU serves {ours['lru', 10000]:.1%}, LFU "
        f"{ours['lfu', 10000]:.1%} and length-aware {ours['length_aware', 10000]:.1%} "
        f"(best: {best_mid}); the paper reports 40%, 35% and 35%, and LRU best throughout, which it "
        f"attributes to the temporal locality of the requests. Here LRU is best at "
        f"{', '.join(f'{c:,}' for c in lru_wins) or 'no'} blocks; at 1,000 blocks the three are within "
        f"{spread_1k.max() - spread_1k.min():.1%} of each other (the paper: all 30%). Our levels are lower "
        f"({ours['lru', 1000]:.1%} at 1,000 blocks against the paper's 30%, "
        f"{ours['lru', 100000]:.1%} at 100,000 against 51%) because the trace differs: Table 1 used the "
        f"arXiv trace (23,608 requests, ceiling about 51%) while the conversation trace released for "
        f"FAST'25 has a {t2.loc['conversation', 'block ceiling']:.1%} block ceiling, and its "
        f"{len(set(conv.hash_ids.tolist())):,} distinct blocks need a larger cache before the curve "
        f"flattens. Length-aware and LFU track each other, as in the paper: both rank by use count, "
        f"and only the tie-break differs."
    )
)

# %% [markdown]
# ## 3. Local versus global cache: 10 prefill nodes x 3M tokens
#
# Ten prefill nodes with 3M tokens of cache each, used locally (requests
# placed at random, as a cache-oblivious scheduler would) against the same
# 30M tokens pooled. Prefill compute is the roofline prefill time of the
# tokens left to compute, each request's uncached suffix on its own.

# %%
NODE_TOKENS = 3_000_000
lg = partitioned_hit_rate(conv, 10 * NODE_TOKENS, 10, unit="tokens", assign="random")
lg_hit = lg["token_hit_ratio"]  # indexed by cache: pooled, partitioned, part k
local_hit, global_hit = float(lg_hit["partitioned"]), float(lg_hit["pooled"])


def prefill_seconds(wl: ism.Workload, hit_ratio: float) -> float:
    """Roofline prefill time of every prompt with ``hit_ratio`` of its tokens cached."""
    total = 0.0
    for p in wl.input_len.tolist():
        cached = int(p * hit_ratio)
        n = p - cached
        total += float(cost.step_time_ms(n, n * cached + n * (n + 1) // 2, 0, 0))
    return total / 1000.0


t_none = prefill_seconds(conv, 0.0)
t_local = prefill_seconds(conv, local_hit)
t_global = prefill_seconds(conv, global_hit)
lvg = pd.DataFrame(
    {
        "token hit ratio": [local_hit, global_hit],
        "prefill compute s": [t_local, t_global],
        "compute saved vs no cache": [1 - t_local / t_none, 1 - t_global / t_none],
    },
    index=["10 local x 3M", "global 30M"],
)
lvg.round(3)

# %%
display(
    Markdown(
        f"Pooled, the same memory serves {global_hit:.1%} of prompt tokens against {local_hit:.1%} "
        f"locally: {global_hit / local_hit:.2f}x the hit ratio (the paper: up to 2.36x), and prefill "
        f"compute drops by {1 - t_global / t_local:.0%} against local caches "
        f"({1 - t_global / t_none:.0%} against no cache; the paper: up to 48% saved). Our ratio is "
        f"{'above' if global_hit / local_hit > 2.36 else 'below'} the paper's: random placement over "
        f"ten nodes splits every conversation's turns, and the 30M-token pool holds the recently "
        f"used part of this trace's {len(set(conv.hash_ids.tolist())) * 512 / 1e6:.0f}M distinct "
        f"block tokens, enough to come close to the ceiling, while each 3M-token node keeps a tenth "
        f"of that and sees a random tenth of every conversation. Our compute "
        f"saving is {'below' if 1 - t_global / t_none < 0.48 else 'above'} the paper's 48% because this "
        f"trace's ceiling ({t2.loc['conversation', 'token ceiling']:.1%}) caps it, and because our prefill "
        f"time applies one average hit ratio to every prompt (long prompts dominate compute, and "
        f"their reuse may differ from the average)."
    )
)

# %% [markdown]
# The same comparison simulated with timing and with the write semantics of
# the systems: ten replicas under `least_loaded` (cache-oblivious), each with
# vLLM's native CPU offload of 3M tokens (`ism.tiers.vllm_offload`: every
# computed block stored in the replica's own DRAM), against one 30M-token
# Mooncake Store (`ism.tiers.mooncake_store`: every prefill publishes its KV
# to the pool, every replica reads it), next to the paper's Fig. 10 global
# cache (about 37.5% of tokens reused).

# %%
SEMANTICS = {
    "10 local x 3M (vLLM CPU offload)": ism.tiers.vllm_offload(NODE_TOKENS),
    "global 30M (Mooncake Store)": ism.tiers.mooncake_store(10 * NODE_TOKENS),
}
sem_rows = {}
for label, stack in SEMANTICS.items():
    res = ism.Simulator(replicas=10, routing="least_loaded", tiers=stack, cost_model=cost).run(
        sim_wl, progress=False
    )
    req = res.requests
    sem_rows[label] = {
        "token hit ratio": float(req["cached_tokens"].sum() / req["input_len"].sum()),
        "HBM": float(req["hbm_hit_tokens"].sum() / req["input_len"].sum()),
        "TTFT mean ms": float(req["ttft_ms"].mean()),
    }
semantics = pd.DataFrame(sem_rows).T
semantics.round(3)

# %%
sem_local, sem_global = semantics["token hit ratio"]
display(
    Markdown(
        f"Simulated over {len(sim_wl):,} requests, the local offload serves {sem_local:.1%} of prompt "
        f"tokens and the Mooncake Store {sem_global:.1%} (the paper's Fig. 10 global cache: about "
        f"37.5%; the timing-free pooled replay above: {global_hit:.1%}), "
        f"{sem_global / sem_local:.2f}x the local hit. The pool is written through, so a turn that "
        f"lands on another replica finds the previous turn's blocks at once; the local offload "
        f"stores every block too, but only its own replica ever reads it."
    )
)


# %% [markdown]
# ## 4. Scheduling: random, load balancing, local and global cache-aware
#
# A disaggregated fleet of 10 prefill and 10 decode instances (the paper's
# real-workload configuration), replaying the conversation trace at its own
# pace: busy but stable (no queue grows without bound). Prefill instances
# hold 3M tokens of host DRAM cache each (local), or share a 30M-token pool
# (global):
#
# * **random** and **load balancing** (`least_loaded`) with local DRAM;
# * **local cache-aware**: the `conductor` (smallest estimated TTFT: queue +
#   prefill of the tokens not cached on that instance) with local DRAM;
# * **global cache-aware**: the `conductor` with the pool (a block in the
#   pool is a hit on every instance, paid by its load time).

# %%
DRAM = [Tier("dram", NODE_TOKENS, read_gbps=50.0, write_gbps=50.0, latency_us=5.0)]
POOL = [Tier("pool", 10 * NODE_TOKENS, read_gbps=25.0, write_gbps=25.0, latency_us=10.0, shared=True)]
SCHEDULERS = {
    "random": ("random", DRAM),
    "load balancing": ("least_loaded", DRAM),
    "local cache-aware": ("conductor", DRAM),
    "global cache-aware": ("conductor", POOL),
}
PAPER_TTFT_S = {"random": 92.07, "load balancing": 60.41, "global cache-aware": 6.26}
sched_rows = []
for label, (routing, tiers) in SCHEDULERS.items():
    res = ism.Simulator(
        replicas=ism.Disaggregated(prefill=10, decode=10),
        routing=routing,
        tiers=tiers,
        cost_model=cost,
    ).run(sim_wl, progress=False)
    s = res.summary()
    sched_rows.append(
        {
            "scheduler": label,
            "ttft_mean_s": s["ttft_ms_mean"] / 1000,
            "ttft_p99_s": s["ttft_ms_p99"] / 1000,
            "token_hit_ratio": s["token_hit_ratio"],
            "prefill_busy": s["prefill_busy_fraction"],
            "saturated": s["saturated"],
            "paper_ttft_mean_s": PAPER_TTFT_S.get(label, float("nan")),
        }
    )
sched = pd.DataFrame(sched_rows).set_index("scheduler")
sched.round(3)

# %%
sc = sched
display(
    Markdown(
        f"Average TTFT: random {sc.loc['random', 'ttft_mean_s']:.2f} s, load balancing "
        f"{sc.loc['load balancing', 'ttft_mean_s']:.2f} s, local cache-aware "
        f"{sc.loc['local cache-aware', 'ttft_mean_s']:.2f} s, global cache-aware "
        f"{sc.loc['global cache-aware', 'ttft_mean_s']:.2f} s (p99 "
        f"{sc.loc['random', 'ttft_p99_s']:.1f}, {sc.loc['load balancing', 'ttft_p99_s']:.1f}, "
        f"{sc.loc['local cache-aware', 'ttft_p99_s']:.1f} and "
        f"{sc.loc['global cache-aware', 'ttft_p99_s']:.1f} s). The paper's ordering (random worst, "
        f"load balancing better, KV-centric scheduling best) holds; its absolute values (92.07 s, "
        f"60.41 s and 6.26 s in the arXiv version) come from a heavier load on another trace, where "
        f"random and load-balancing queues grow for the whole run. Cache awareness is what pays: "
        f"the conductor serves {sc.loc['local cache-aware', 'token_hit_ratio']:.1%} of prompt tokens "
        f"from cache against {sc.loc['load balancing', 'token_hit_ratio']:.1%} for load balancing, "
        f"and the prefill instances are busy {sc.loc['local cache-aware', 'prefill_busy']:.0%} of the "
        f"time instead of {sc.loc['load balancing', 'prefill_busy']:.0%}. The pool changes the hit "
        f"ratio by {sc.loc['global cache-aware', 'token_hit_ratio'] - sc.loc['local cache-aware', 'token_hit_ratio']:+.1%} "
        f"over local DRAM here ({sc.loc['global cache-aware', 'token_hit_ratio']:.1%} against "
        f"{sc.loc['local cache-aware', 'token_hit_ratio']:.1%}): blocks reach a lower tier only when HBM "
        f"evicts them, and the conductor already keeps each conversation's turns where its prefix "
        f"is, which recovers by routing most of what section 3's pool gives placement-blind caches."
        + (f" (Under CI the replay is {WINDOW_MIN} minutes, too short for HBM to evict much.)" if CI else "")
    )
)

# %% [markdown]
# ## 5. Overload: early rejection against admitting everything
#
# 8 prefill and 8 decode instances, the trace replayed faster than it
# arrived (the paper replays at 2x; our model of an 8-GPU A100 node is
# faster than the paper's testbed, so we replay at 4x to overload the
# prefill pool), and the paper's SLOs: TTFT 30 s, TBT 0.1 s per token.
# `admission=ism.SloAdmission(ttft_ms=..., tpot_ms=...)` rejects at arrival
# a request whose predicted TTFT on the chosen prefill instance exceeds 30 s
# or whose predicted decode step on the least loaded decode instance with
# room exceeds 0.1 s.

# %%
fast_wl = sim_wl.scale_time(0.25)
SLO_TTFT, SLO_TPOT = 30_000.0, 100.0
over = {}
beyond_hbm = {}  # run -> (KV tokens one step priced, tokens that fit in HBM), when it happened
early_rejection = ism.SloAdmission(ttft_ms=SLO_TTFT, tpot_ms=SLO_TPOT)
for label, admission in (("admit all", None), ("early rejection", early_rejection)):
    # A fresh cost model per run: it warns once per model when a step it prices holds
    # more KV than fits in HBM. The warning is caught here and explained below.
    run_cost = RooflineCostModel("llama-3.1-70b", "a100-80gb", tp=8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = ism.Simulator(
            replicas=ism.Disaggregated(prefill=8, decode=8),
            routing="conductor",
            tiers=POOL,
            cost_model=run_cost,
            admission=admission,
        ).run(fast_wl, progress=False)
    for w in caught:
        m = re.search(r"at least ([\d,]+) tokens of KV .* than the ([\d,]+) that fit", str(w.message))
        if m:
            beyond_hbm[label] = tuple(int(g.replace(",", "")) for g in m.groups())
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)  # not that one: show it
    s = res.summary(slo_ttft_ms=SLO_TTFT, slo_tpot_ms=SLO_TPOT)
    over[label] = {
        "requests": int(s["requests"]),
        "rejected": int(s["rejected"]),
        "ttft_mean_s": s["ttft_ms_mean"] / 1000,
        "ttft_p99_s": s["ttft_ms_p99"] / 1000,
        "tpot_mean_ms": s["tpot_ms_mean"],
        "tpot_p99_ms": s["tpot_ms_p99"],
        "slo_attainment": s["slo_attainment"],
        "goodput_rps": s["goodput_rps"],
    }
overload = pd.DataFrame.from_dict(over, orient="index")  # one row per run; counts stay integers
overload.round(3)

# %%
a, e = overload.loc["admit all"], overload.loc["early rejection"]
display(
    Markdown(
        f"Admitting everything, the prefill queue grows through the run: TTFT averages "
        f"{a['ttft_mean_s']:,.1f} s (p99 {a['ttft_p99_s']:,.1f} s) and "
        f"{a['slo_attainment']:.1%} of requests meet both SLOs. Early rejection turns away "
        f"{int(e['rejected']):,} of {int(e['requests']):,} requests "
        f"({e['rejected'] / e['requests']:.1%}) at arrival; the admitted ones see TTFT "
        f"{e['ttft_mean_s']:,.1f} s on average (p99 {e['ttft_p99_s']:,.1f} s) and TPOT "
        f"{e['tpot_mean_ms']:.1f} ms (admit-all: {a['tpot_mean_ms']:.1f} ms), and SLO attainment over "
        f"all requests, rejected ones counted as misses, is {e['slo_attainment']:.1%} "
        f"(goodput {e['goodput_rps']:.2f} against {a['goodput_rps']:.2f} requests/s). The paper's "
        f"Table 3 counts rejections on its 23k-request trace at 2x: 4,183 for its baseline, 3,771 with "
        f"early rejection and 3,589 with prediction-based early rejection (the baseline there "
        f"rejects at the decode side after prefill, wasting that prefill; ours admits everything "
        f"and lets the queue grow, so the two baselines are not the same policy). Our rejector "
        f"predicts the queue from the instance's state at arrival, like the paper's "
        f"prediction-based variant, but knows neither future arrivals nor output lengths."
        + "".join(
            f"\n\nIn the \"{run}\" run one engine step priced {kv:,} tokens of KV (its new tokens plus "
            f"one sequence's context, counted without prefix sharing), more than the {fit:,} that "
            f"fit in an instance's HBM after the weights ({kv / fit - 1:.1%} over). That count "
            f"ignores prefix sharing, so the step may well fit; the roofline model prices it "
            f"anyway and marks its time as a what-if (the warning it gives is caught above)."
            for run, (kv, fit) in beyond_hbm.items()
        )
    )
)
