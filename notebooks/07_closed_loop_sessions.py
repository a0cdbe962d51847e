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
# # 7. Closed-loop sessions: users who wait for the answer
#
# A replayed trace sends every request at its recorded time. In a real
# conversation the user sends the next turn after the previous answer has
# arrived: a slow fleet slows its users down (and so lightens its own
# load), a fast one lets them go on sooner. `Simulator.run(wl, closed_loop=True)`
# replays the FAST'25 conversation trace that way:
#
# * the trace has no session ids, so the turns are the chains
#   `ism.reuse.sessions` infers from the hash ids (a request whose prompt
#   holds an earlier prompt and its answer is that request's next turn);
# * turn k+1 is sent at turn k's finish plus a think time: the recorded gap
#   minus turn k's service time alone on an idle replica of this fleet
#   (never negative); first turns keep their recorded arrivals.
#
# On a fleet that serves every turn as fast as an idle replica, the closed
# loop replays the recorded arrivals; queueing pushes later turns back
# (`arrival_shift_ms`, simulated minus recorded arrival).

# %% tags=["parameters"]
import os

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
QUICK = CI or os.environ.get("INFERASIM_QUICK", "").lower() in ("1", "true", "yes")
# Under CI (quick) the first 20 minutes of the trace; otherwise the whole hour.
FLEETS = [4, 2]  # replicas (Llama-3.1-8B, one H100 each)
KV_TOKENS = 3_000_000  # prefix cache per replica (tokens)

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

import inferasim as ism

wl = ism.Workload.from_mooncake("conversation")
if QUICK:
    wl = wl.window(0, 20 * 60 * 1000)
chains = ism.reuse.sessions(wl)
turns = chains.requests["turn"]
display(
    Markdown(
        f"{len(wl):,} requests in {len(chains.sessions):,} inferred sessions; "
        f"{int((turns > 1).sum()):,} requests ({(turns > 1).mean():.0%}) are a later turn, "
        f"the longest session has {int(turns.max())} turns."
    )
)

# %% [markdown]
# ## Open loop against closed loop
#
# The same fleet (Dynamo-style `kv_cost` routing, 3M tokens of KV per
# replica) replays the trace twice: open loop (recorded arrivals) and
# closed loop. Per run: time to first token (TTFT), the mean arrival shift
# of the requests, and the time a multi-turn session takes from its first
# arrival to its last answer (the same inferred sessions in both runs; the
# closed-loop summary's `session_ms_*` cover every session, most of which
# have one turn).

# %%
def session_times(req: pd.DataFrame, session: pd.Series) -> pd.Series:
    g = req.assign(session=session.to_numpy()).groupby("session")
    span = g["finish_ms"].max() - g["arrival_ms"].min()
    return span[g.size() > 1]


rows, runs = [], {}
for n in FLEETS:
    for closed in (False, True):
        sim = ism.Simulator(replicas=n, routing="kv_cost", kv_tokens=KV_TOKENS, seed=0)
        res = sim.run(wl, closed_loop=closed, progress=False)
        runs[(n, closed)] = res
        s = res.summary()
        span = session_times(res.requests, chains.requests["session"]) / 1000
        rows.append({
            "replicas": n,
            "loop": "closed" if closed else "open",
            "ttft_p50_ms": s["ttft_ms_p50"],
            "ttft_p99_ms": s["ttft_ms_p99"],
            "mean_shift_s": s["arrival_shift_ms_mean"] / 1000 if closed else 0.0,  # (open: none)
            "multi_turn_session_p50_s": span.median(),
            "multi_turn_session_p99_s": span.quantile(0.99),
            "token_hit_ratio": s["token_hit_ratio"],
            "duration_min": s["duration_ms"] / 60_000,
        })
table = pd.DataFrame(rows).set_index(["replicas", "loop"])
table.round(3)

# %%
def row(n: int, loop: str) -> pd.Series:
    return table.loc[(n, loop)]


big, small = FLEETS
display(
    Markdown(
        f"With {big} replicas the closed loop moves later turns back by "
        f"{row(big, 'closed')['mean_shift_s']:.1f} s on average (over all requests) and "
        f"TTFT p50 / p99 go from {row(big, 'open')['ttft_p50_ms']:,.0f} / "
        f"{row(big, 'open')['ttft_p99_ms']:,.0f} ms (open loop) to "
        f"{row(big, 'closed')['ttft_p50_ms']:,.0f} / {row(big, 'closed')['ttft_p99_ms']:,.0f} ms. "
        f"With {small} replicas the fleet is slower and the users wait for it: the mean "
        f"shift grows to {row(small, 'closed')['mean_shift_s']:.1f} s, the median multi-turn "
        f"session takes {row(small, 'closed')['multi_turn_session_p50_s']:.0f} s (open loop "
        f"{row(small, 'open')['multi_turn_session_p50_s']:.0f} s), and TTFT p50 is "
        f"{row(small, 'closed')['ttft_p50_ms']:,.0f} ms against "
        f"{row(small, 'open')['ttft_p50_ms']:,.0f} ms in the open loop (p99 "
        f"{row(small, 'closed')['ttft_p99_ms']:,.0f} against "
        f"{row(small, 'open')['ttft_p99_ms']:,.0f} ms). The whole replay takes "
        f"{row(small, 'closed')['duration_min']:.0f} minutes instead of "
        f"{row(small, 'open')['duration_min']:.0f}: users who wait for a slow fleet send "
        "less per second, so an open-loop replay overstates the load a slow fleet would see."
    )
)

# %% [markdown]
# ## The delay accumulates along a session
#
# Each turn inherits the delay of the turns before it: the mean arrival
# shift by turn number (turns with at least 20 requests), and the TTFT
# distributions of the smaller fleet.

# %%
with ism.style.context():
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for n in FLEETS:
        r = runs[(n, True)].requests
        by = r.groupby("turn")["arrival_shift_ms"].agg(["mean", "size"])
        by = by[by["size"] >= 20]
        ax1.plot(by.index, by["mean"] / 1000, marker="o", label=f"{n} replicas")
    ax1.set_xlabel("turn")
    ax1.set_ylabel("mean arrival shift (s)")
    ax1.set_title("closed loop: later turns come later")
    ax1.legend()
    ism.plots.latency_cdf(
        {"open loop": runs[(small, False)], "closed loop": runs[(small, True)]},
        ax=ax2,
    )
    ax2.set_title(f"TTFT, {small} replicas")
plt.show()

# %% [markdown]
# ## Your own think times
#
# `think_time=` replaces the recorded-gap rule: a constant (ms), one value
# per request, or a callable that receives the later turns (with their
# recorded gap and idle service estimate) and returns their think times,
# e.g. a seeded distribution.

# %%
import numpy as np


def exponential_think(later: pd.DataFrame) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.exponential(30_000.0, size=len(later))  # 30 s on average


res = ism.Simulator(replicas=big, routing="kv_cost", kv_tokens=KV_TOKENS).run(
    wl, closed_loop=True, think_time=exponential_think, progress=False)
s = res.summary()
display(
    Markdown(
        f"With exponential think times of 30 s on average the {len(wl):,} requests take "
        f"{s['duration_ms'] / 60_000:.0f} minutes instead of {row(big, 'closed')['duration_min']:.0f}; "
        f"TTFT p50 / p99 {s['ttft_ms_p50']:,.0f} / {s['ttft_ms_p99']:,.0f} ms, mean arrival shift "
        f"{s['arrival_shift_ms_mean'] / 1000:.1f} s."
    )
)
