"""The figure registry: figure name -> (study, plot, notebook).

Every figure of the companion notebooks is one :class:`FigureSpec`: a
*study* (a function of :class:`FigureData`, calling :mod:`inferasim.studies`)
that returns tidy frames, and a *plot* that builds a figure from them with
the axes-level functions of :mod:`inferasim.plots`. :data:`FIGURES` lists
them; :func:`make_figures` (``inferasim figures``) draws them in the paper
style of :mod:`inferasim.style` and writes PDF and PNG.

:class:`FigureData` loads the traces once and keeps every study's frame, so
figures that share data (the routing simulations feed three figures, the
hit-rate curves two) compute it once.

Examples
--------
>>> [spec.name for spec in FIGURES][:2]
['trace_lengths', 'trace_arrivals']
>>> spec = FIGURES[0]
>>> spec.notebook
'01_trace_reuse_structure'
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from inferasim import plots, studies, style
from inferasim._cli_types import integer
from inferasim.studies import settings
from inferasim.workload import Workload

__all__ = [
    "FIGURES",
    "FigureSpec",
    "FigureData",
    "make_figures",
    "add_arguments",
    "run",
]

#: Default model and GPU of the simulated fleets, for captions.
FLEET_CAPTION = "Llama-3.1-8B on H100, roofline cost model"


# ----------------------------------------------------------------- data
class FigureData:
    """The traces and every study's frame, computed on first use and kept.

    Parameters
    ----------
    traces_dir : path, optional
        Where the traces are (see :func:`inferasim.studies.load_traces`).
    quick : bool, optional
        Smaller simulator slices (default: :func:`inferasim.studies.ci_mode`):
        the first 20 minutes of each trace for the routing simulations and
        10 for the sizing one, 400 instead of 800 requests per teaching
        run. Reuse analyses always run on the full traces.
    workloads : mapping of str to Workload, optional
        Use these instead of loading traces (tests, your own traffic).
    executor : concurrent.futures.Executor, optional
        Where the studies run their independent configurations (routing
        simulations, teaching runs, and the hit-rate replays when numba is
        missing: with it they take about a second here); this process by
        default. The frames are the same either way (every run is seeded).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> data = FigureData(workloads={"tiny": wl})
    >>> float(data.get("overview")["ceiling_token_hit_ratio"].iloc[0])
    0.5
    >>> data.get("overview") is data.get("overview")
    True
    """

    def __init__(
        self,
        traces_dir: str | os.PathLike[str] | None = None,
        *,
        quick: bool | None = None,
        workloads: Mapping[str, Workload] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.traces_dir = traces_dir
        self.executor = executor
        self.quick = settings.ci_mode() if quick is None else bool(quick)
        self._given = dict(workloads) if workloads is not None else None
        self._frames: dict[str, Any] = {}
        self._pending: dict[str, Future[Any]] = {}
        #: Seconds spent computing each study (first use only).
        self.timings: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"FigureData(traces_dir={self.traces_dir!r}, quick={self.quick})"

    @cached_property
    def workloads(self) -> dict[str, Workload]:
        """The traces by name (conversation, synthetic, and toolagent when present).

        Examples
        --------
        >>> wl = Workload.from_requests([0], [10], [1])
        >>> list(FigureData(workloads={"t": wl}).workloads)
        ['t']
        """
        if self._given is not None:
            return self._given
        return studies.load_traces(self.traces_dir)

    def get(self, name: str) -> Any:
        """The frame of study ``name`` (see :data:`STUDIES`), computed once.

        Examples
        --------
        >>> FigureData(workloads={}).get("nope")
        Traceback (most recent call last):
        ...
        KeyError: "unknown study 'nope'; known: ['overview', 'requests', 'reuse_distances', 'block_popularity', 'hit_rates', 'local_vs_pooled', 'routing', 'sizing']"
        """
        if name in self._pending:
            self._frames[name] = self._pending.pop(name).result()
        if name not in self._frames:
            self._frames[name] = self._compute(name)
        return self._frames[name]

    def _compute(self, name: str) -> Any:
        if name.startswith("teaching:"):
            compute: Callable[[FigureData], Any] = lambda d: studies.teaching(  # noqa: E731
                name.split(":", 1)[1], quick=d.quick, executor=d.executor
            )
        elif name in STUDIES:
            compute = STUDIES[name]
        else:
            raise KeyError(f"unknown study {name!r}; known: {list(STUDIES)}")
        start = time.perf_counter()
        out = compute(self)
        self.timings[name] = time.perf_counter() - start
        return out

    def prefetch(self, names: Iterable[str]) -> None:
        """Start computing these studies in the background, on the executor.

        Each study runs in a thread of this process that hands its runs to
        :attr:`executor`, so the worker processes compute while this process
        draws and saves the figures whose data is ready; :meth:`get` waits
        for a prefetched study. Without an executor this does nothing.

        Examples
        --------
        >>> from concurrent.futures import ThreadPoolExecutor
        >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
        >>> with ThreadPoolExecutor(2) as ex:
        ...     data = FigureData(workloads={"t": wl}, executor=ex)
        ...     data.prefetch(["overview"])
        ...     float(data.get("overview")["ceiling_token_hit_ratio"].iloc[0])
        0.5
        """
        if self.executor is None:
            return
        wanted = [n for n in names if n not in self._frames and n not in self._pending]
        if not wanted:
            return
        self.workloads  # load the traces once, before the threads start  # noqa: B018
        threads = ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="study")
        for name in wanted:
            self._pending[name] = threads.submit(self._compute, name)
        threads.shutdown(wait=False)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on the executor (one task), or here without one.

        Examples
        --------
        >>> FigureData(workloads={}).run(max, 2, 3)
        3
        """
        if self.executor is None:
            return fn(*args, **kwargs)
        return self.executor.submit(fn, *args, **kwargs).result()

    @property
    def routing_window_ms(self) -> float | None:
        """The slice of each trace the routing simulations run on (None: whole trace).

        Examples
        --------
        >>> FigureData(workloads={}, quick=True).routing_window_ms
        1200000
        >>> FigureData(workloads={}, quick=False).routing_window_ms is None
        True
        """
        return settings.QUICK_WINDOW_MS if self.quick else None


def _sizing(d: FigureData) -> pd.DataFrame:
    wl = d.workloads["conversation"]
    if d.quick:
        wl = wl.window(0, 10 * 60_000)
    return d.run(_sizing_requests, wl)


def _sizing_requests(wl: Workload) -> pd.DataFrame:
    cfg = settings.SIZING_DEFAULTS
    res = studies.run_routing(
        wl.scale_time(1.0 / cfg["load"]),
        cfg["routing"],
        replicas=cfg["replicas"],
        capacity_tokens=cfg["capacity_tokens"],
        eviction=cfg["policy"],
    )
    return res.requests.assign(
        trace="conversation", routing=cfg["routing"], replicas=cfg["replicas"]
    )


# Heavy studies each figure reads (for prefetching).
_USES: dict[str, tuple[str, ...]] = {
    "hit_rate_capacity": ("hit_rates",),
    "sizing_hit_rate": ("hit_rates",),
    "sizing_simulation": ("sizing",),
    "local_vs_global": ("local_vs_pooled", "routing"),
    "ttft_by_routing": ("routing",),
    "replica_load": ("routing",),
}

#: Studies worth computing in the background, longest first.
HEAVY_STUDIES: tuple[str, ...] = ("hit_rates", "routing", "local_vs_pooled", "sizing")

#: The studies behind the figures, by name (``teaching:<experiment>`` too).
STUDIES: dict[str, Callable[[FigureData], Any]] = {
    "overview": lambda d: studies.overview(d.workloads),
    "requests": lambda d: studies.requests(d.workloads),
    "reuse_distances": lambda d: studies.reuse_distances(d.workloads),
    "block_popularity": lambda d: studies.block_popularity(d.workloads),
    "hit_rates": lambda d: studies.hit_rate_vs_capacity(d.workloads, executor=d.executor),
    "local_vs_pooled": lambda d: d.run(studies.local_vs_pooled, d.workloads),
    "routing": lambda d: studies.compare_routing(
        {t: d.workloads[t] for t in settings.REQUIRED_TRACES},
        window_ms=d.routing_window_ms,
        executor=d.executor,
    ),
    "sizing": _sizing,
}


# ------------------------------------------------------------------ plots
def _traces(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["trace"]))


def plot_trace_lengths(requests: pd.DataFrame) -> Figure:
    """Prompt and output length ECDFs, one line per trace.

    Examples
    --------
    >>> req = studies.requests(Workload.from_requests([0, 1], [100, 3000], [5, 50]))
    >>> [ax.get_xlabel() for ax in plot_trace_lengths(req).axes]
    ['prompt length (tokens)', 'output length (tokens)']
    """
    fig, axes = style.figure(style.DOUBLE, ncols=2)
    with style.context():
        plots.lengths(requests, "input_len", ax=axes[0, 0]).set_title("prompt lengths")
        plots.lengths(requests, "output_len", ax=axes[0, 1]).set_title("output lengths")
        axes[0, 1].get_legend().remove()
    return fig


def plot_trace_arrivals(requests: pd.DataFrame, bin_s: float = 60.0) -> Figure:
    """Requests/s and prompt tokens/s over time, per trace.

    Examples
    --------
    >>> req = studies.requests(Workload.from_requests([0, 30_000, 90_000], [100] * 3, [5] * 3))
    >>> plot_trace_arrivals(req).axes[0].get_xlabel()
    'time since first request (min)'
    """
    fig, axes = style.figure(style.DOUBLE, ncols=2)
    with style.context():
        plots.arrivals(requests, "requests", bin_s=bin_s, ax=axes[0, 0])
        plots.arrivals(requests, "tokens", bin_s=bin_s, ax=axes[0, 1]).get_legend().remove()
        axes[0, 0].set_title(f"arrival rate ({bin_s:g} s bins)")
        axes[0, 1].set_title("prompt token rate")
    return fig


def plot_block_popularity(popularity: pd.DataFrame) -> Figure:
    """References per block by popularity rank (log-log), one line per trace.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 3]])
    >>> plot_block_popularity(studies.block_popularity(wl)).axes[0].get_ylabel()
    'requests per block'
    """
    fig, axes = style.figure(style.SINGLE)
    with style.context():
        plots.popularity(popularity, ax=axes[0, 0], fit=False)
    return fig


def plot_reuse_distance(distances: pd.DataFrame) -> Figure:
    """CDF of block reuse distances in tokens; dashed line at one node's 3M-token cache.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [512] * 3, [1] * 3, [[1], [2], [1]])
    >>> plot_reuse_distance(studies.reuse_distances(wl)).axes[0].get_ylabel()
    'fraction of block references'
    """
    fig, axes = style.figure(style.SINGLE)
    with style.context():
        plots.reuse_distance(distances, ax=axes[0, 0], mark_tokens=settings.NODE_CACHE_TOKENS)
    return fig


def plot_prefix_structure(requests: pd.DataFrame) -> Figure:
    """Reusable share of each prompt, turns per conversation, time between turns.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1000], [1024, 2048], [1, 1], [[1, 2], [1, 2, 3, 4]])
    >>> [ax.get_xlabel() for ax in plot_prefix_structure(studies.requests(wl)).axes]
    ['prompt share served by an infinite cache', 'turns per session', 'time between turns (s)']
    """
    fig, axes = style.figure(style.DOUBLE, ncols=3)
    a, b, c = axes[0]
    with style.context():
        plots.reusable_share(requests, ax=a).set_title("reusable prefix per prompt")
        plots.sessions(requests, kind="turns", ax=b).set_title("multi-turn chains")
        plots.sessions(requests, kind="gap", ax=c).set_title("gap before the next turn")
        for ax in (b, c):
            if ax.get_legend() is not None:
                ax.get_legend().remove()
    return fig


def plot_hit_rate_capacity(hit_rates: pd.DataFrame, overview: pd.DataFrame) -> Figure:
    """Hit ratio of one cache from 1e4 to 1e8 tokens per policy, one panel per trace, 3M marked.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> hr = studies.hit_rate_vs_capacity(wl, ["lru", "opt"])
    >>> len(plot_hit_rate_capacity(hr.assign(trace="t"), studies.overview({"t": wl})).axes)
    1
    """
    traces = _traces(hit_rates)
    at = studies.at_capacity(hit_rates, settings.NODE_CACHE_TOKENS, overview)
    ceilings = overview.set_index("trace")["ceiling_token_hit_ratio"]
    fig, axes = style.figure((style.DOUBLE[0], 2.8), ncols=len(traces), sharey=True)
    with style.context():
        for ax, trace in zip(axes[0], traces, strict=True):
            plots.hit_rate(
                hit_rates[hit_rates["trace"] == trace].drop(columns="trace"),
                ax=ax,
                secondary_axis=False,
                ceiling=float(ceilings[trace]),
            )
            ax.get_legend().remove()
            top = min(1.0, float(ceilings.max()) + 0.12)
            point = at[(at["trace"] == trace) & (at["policy"] == "lru")]
            if len(point):
                plots.mark_capacity(point.iloc[0], ax=ax)
            ax.set_xlim(*settings.CAPACITY_RANGE)
            ax.set_ylim(0, top)
            ax.set_title(f"{trace} trace")
        for ax in axes[0, 1:]:
            ax.set_ylabel("")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return fig


def plot_sizing_hit_rate(hit_rates: pd.DataFrame, overview: pd.DataFrame) -> Figure:
    """The cache-sizing view: the conversation trace's LRU curve with 3M tokens marked.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> hr = studies.hit_rate_vs_capacity({"conversation": wl}, ["lru"])
    >>> plot_sizing_hit_rate(hr, studies.overview({"conversation": wl})).axes[0].get_title()
    'conversation trace: token hit ratio of one LRU cache'
    """
    cfg = settings.SIZING_DEFAULTS
    curve = hit_rates[(hit_rates["trace"] == "conversation") & (hit_rates["policy"] == "lru")]
    at = studies.at_capacity(curve, cfg["capacity_tokens"], overview)
    fig, axes = style.figure((style.DOUBLE[0], 2.6))
    ax = axes[0, 0]
    with style.context():
        ceiling = float(at["ceiling_token_hit_ratio"].iloc[0])
        plots.hit_rate(curve.drop(columns="trace"), ax=ax, ceiling=ceiling, label="LRU")
        plots.mark_capacity(at.iloc[0], ax=ax)
        ax.set_xlim(*settings.CAPACITY_RANGE)
        ax.set_title("conversation trace: token hit ratio of one LRU cache")
    return fig


def plot_sizing_simulation(requests: pd.DataFrame) -> Figure:
    """The cache-sizing simulation: TTFT and TPOT ECDFs and requests per replica, fleet in the title.

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> req = studies.run_routing(wl, "kv_cost", replicas=2).requests.assign(
    ...     trace="demo", routing="kv_cost", replicas=2)
    >>> plot_sizing_simulation(req).get_suptitle()  # doctest: +ELLIPSIS
    'demo trace (20 requests, none rejected), 2 replicas x 3M-token LRU cache, cache + load cost routing,\\n...'
    """
    cfg = settings.SIZING_DEFAULTS
    routing = str(requests["routing"].iloc[0])
    n = int(requests["replicas"].iloc[0])
    fig, axes = style.figure((style.DOUBLE[0], 2.5), ncols=3)
    a, b, c = axes[0]
    with style.context():
        fin = requests[requests["status"] == "finished"]
        for ax, metric in ((a, "ttft_ms"), (b, "tpot_ms")):
            plots.latency_cdf({routing: requests}, metric, ax=ax, quantile=0.99)
            ax.get_legend().remove()  # one run: the title gives its p99 (the dot)
            p99 = float(fin[metric].quantile(0.99))
            ax.set_title(f"{metric[:4].upper()} p99: {style.duration_text(p99)}")
        plots.replica_load(requests, ax=c, color=style.color(routing), replicas=n)
        c.set_title("requests per replica")
        routed = requests[requests["replica"] >= 0]
        hit = routed["cached_tokens"].sum() / routed["input_len"].sum()
        rejected = len(requests) - len(fin)
        fig.suptitle(
            f"{requests['trace'].iloc[0]} trace ({len(requests):,} requests, "
            f"{'none' if not rejected else f'{rejected:,}'} rejected), {n} replicas x "
            f"{style.tokens_text(cfg['capacity_tokens'])}-token {cfg['policy'].upper()} cache, "
            f"{style.label(routing)} routing,\n{FLEET_CAPTION}: {hit:.1%} of prompt tokens cached",
            fontsize=7.5,
        )
    return fig


def plot_local_vs_global(table: pd.DataFrame, routing: pd.DataFrame | None = None) -> Figure:
    """10 local 3M-token caches (by placement rule and by routing) against one pooled 30M cache.

    Examples
    --------
    >>> t = pd.DataFrame({"trace": "a", "cache": ["local", "pooled"], "placement": ["random", "any"],
    ...                   "token_hit_ratio": [0.3, 0.5], "ceiling_token_hit_ratio": 0.6})
    >>> r = pd.DataFrame({"trace": ["a"], "routing": ["kv_cost"], "token_hit_ratio": [0.4]})
    >>> [round(float(p.get_height()), 2) for p in plot_local_vs_global(t, r).axes[0].patches]
    [0.3, 0.4, 0.5]
    """
    traces = _traces(table)
    fig, axes = style.figure((style.DOUBLE[0], 2.9), ncols=len(traces), sharey=True)
    with style.context():
        for k, (ax, trace) in enumerate(zip(axes[0], traces, strict=True)):
            routed = None if routing is None else routing[routing["trace"] == trace]
            plots.local_vs_pooled(table[table["trace"] == trace], routed, ax=ax)
            ax.set_xlabel(f"how requests reach the {settings.FLEET_REPLICAS} local caches")
            ax.set_title(f"{trace} trace")
            if k:
                ax.set_ylabel("")
    return fig


def plot_ttft_by_routing(requests: pd.DataFrame, collapsing: str = "longest_match") -> Figure:
    """TTFT per routing policy: ECDFs per trace, the collapsing policy apart, p99 dots by policy.

    Panels: one ECDF panel per trace without ``collapsing`` (its TTFT is
    hours where the others' is seconds), one panel for ``collapsing`` on
    every trace, and the p99 of every (trace, policy) as dots on a log
    axis with the policy names on the y axis.

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> req = studies.compare_routing({"t": wl}, ["round_robin", "longest_match"], replicas=2)
    >>> [ax.get_xlabel() for ax in plot_ttft_by_routing(req).axes]
    ['TTFT (ms)', 'TTFT (ms)', 'TTFT p99 (ms)']
    """
    traces = _traces(requests)
    summary = studies.routing_summary(requests)
    normal = requests[requests["routing"] != collapsing]
    apart = requests[requests["routing"] == collapsing]
    top = [*traces, *(["apart"] if len(apart) else [])]
    with style.context():
        fig = Figure(figsize=(style.DOUBLE[0], 4.4), layout="constrained")
        panels = fig.subplot_mosaic([top, ["dots"] * len(top)], height_ratios=[1.25, 1])
        axes = np.array([[panels[k] for k in top]])
        for ax, trace in zip(axes[0], traces, strict=False):
            plots.latency_cdf(
                normal[normal["trace"] == trace], ax=ax, labels=style.label, quantile=0.99
            )
            ax.get_legend().remove()
            ax.set_title(f"{trace} trace")
        # Traces told apart by grey levels here, so no trace takes a policy's colour.
        shades = {t: g for t, g in zip(traces, ("0.1", "0.55", "0.8"), strict=False)}
        if len(apart):
            ax = axes[0, len(traces)]
            # each trace in its grey level, as in the dot panel below
            plots.latency_cdf(apart, ax=ax, hue="trace", quantile=0.99, palette=shades)
            ax.legend(loc="center", fontsize=5.5)
            ax.set_title(style.label(collapsing))
        dots = panels["dots"]
        plots.quantile_dots(summary, "ttft_p99_ms", ax=dots, palette=shades)
        rejected = int(summary["rejected"].sum())
        dots.set_title(
            "TTFT p99 of the finished requests by routing policy (log scale; "
            + (f"{rejected:,} rejected)" if rejected else "none rejected)")
        )
        dots.legend(loc="lower right", fontsize=6.5)
        policies = list(dict.fromkeys(normal["routing"]))
        handles = [
            Line2D([], [], color=style.color(p, j), lw=2, label=style.label(p))
            for j, p in enumerate(policies)
        ]
        handles.append(
            Line2D([], [], color="0.3", marker="o", ls="", ms=3.5, label="dot: p99")
        )
        fig.legend(handles=handles, loc="outside lower center", ncol=len(handles))
    return fig


def plot_replica_load(requests: pd.DataFrame, trace: str = "conversation") -> Figure:
    """Requests per replica under each routing policy on one trace, fleet in the title.

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> req = studies.compare_routing({"t": wl}, ["round_robin"], replicas=2)
    >>> fig = plot_replica_load(req, trace="t")
    >>> len(fig.axes), fig.get_suptitle()  # doctest: +ELLIPSIS
    (1, 't trace (20 requests, none rejected), 2 replicas x 3M-token LRU cache...')
    """
    runs = requests[requests["trace"] == trace]
    policies = list(dict.fromkeys(runs["routing"]))
    n = int(runs["replicas"].iloc[0])
    fig, axes = style.figure((style.DOUBLE[0], 2.2), ncols=len(policies), sharey=True)
    with style.context():
        for j, (ax, routing) in enumerate(zip(axes[0], policies, strict=True)):
            run = runs[runs["routing"] == routing]
            plots.replica_load(run, ax=ax, color=style.color(routing, j), replicas=n)
            ax.set_title(style.two_lines(style.label(routing)))
            if j:
                ax.set_ylabel("")
        cap = int(runs["capacity_tokens"].iloc[0])
        rejected = int((runs["status"] == "rejected").sum()) if "status" in runs else 0
        fig.suptitle(
            f"{trace} trace ({len(run):,} requests, "
            f"{'none' if not rejected else f'{rejected:,} in all'} rejected), {n} replicas x "
            f"{style.tokens_text(cap)}-token LRU cache, {FLEET_CAPTION}",
            fontsize=7.5,
        )
    return fig


def plot_teaching(table: pd.DataFrame) -> Figure:
    """One teaching experiment: hit ratio (left) and TTFT (right) against the knob.

    Examples
    --------
    >>> t = pd.DataFrame({"experiment": "zipf", "knob": "prefix_zipf", "value": [1, 2],
    ...                   "infinite_token_hit_ratio": [0.5, 0.6], "token_hit_ratio": [0.4, 0.5],
    ...                   "ttft_p50_ms": [10, 9], "ttft_p99_ms": [40, 30]})
    >>> plot_teaching(t).axes[1].get_ylabel()
    'TTFT (ms)'
    """
    exp = studies.TEACHING[str(table["experiment"].iloc[0])]
    cache = (
        "LRU cache"
        if exp.knob == "kv_blocks"
        else f"{studies.TEACHING_KV_BLOCKS}-block LRU cache"
    )
    fig, axes = style.figure((style.DOUBLE[0], 2.4), ncols=2)
    with style.context():
        for ax, what in zip(axes[0], ("hit", "ttft"), strict=True):
            plots.teaching(
                table, what, ax=ax, axis_label=exp.axis_label, log_x=exp.log_x, cache_label=cache
            )
        fig.suptitle(teaching_load_caption(exp.knob), fontsize=7.5)
    return fig


def teaching_load_caption(knob: str) -> str:
    """The offered load of a teaching figure, in words (its title).

    Every experiment offers :data:`inferasim.studies.TEACHING_BASE`'s request
    rate; the prompt-token rate is the base workload's (it grows with the
    prefix length in that experiment).

    Examples
    --------
    >>> teaching_load_caption("prefix_zipf")  # doctest: +ELLIPSIS
    'one replica (Llama-3.1-8B on H100, roofline cost model), offered load 4 req/s = ... prompt tokens/s'
    """
    base = studies.TEACHING_BASE
    prompt = float(studies.teaching_workload().input_len.mean())
    tokens = f"{base['rate'] * prompt:,.0f} prompt tokens/s"
    if knob == "prefix_len":
        tokens += f" at the {base['prefix_len']:,}-token prefix"
    return f"one replica ({FLEET_CAPTION}), offered load {base['rate']:g} req/s = {tokens}"


# ------------------------------------------------------------------- registry
@dataclass(frozen=True)
class FigureSpec:
    """A figure of the registry: file stem, notebook, description, study and plot.

    ``study`` takes a :class:`FigureData` and returns the plot's arguments
    (a tuple of frames); ``plot`` draws the figure from them.

    Examples
    --------
    >>> spec = FIGURES[0]
    >>> spec.name, spec.notebook
    ('trace_lengths', '01_trace_reuse_structure')
    >>> wl = Workload.from_requests([0, 1], [100, 300], [5, 7])
    >>> spec.make(FigureData(workloads={"t": wl})).axes[0].get_xlabel()
    'prompt length (tokens)'
    """

    name: str
    notebook: str
    description: str
    study: Callable[[FigureData], tuple[Any, ...]]
    plot: Callable[..., Figure]

    def make(self, data: FigureData) -> Figure:
        """Compute (or reuse) the study and draw the figure.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 1], [100, 300], [5, 7])
        >>> len(FIGURES[1].make(FigureData(workloads={"t": wl})).axes)
        2
        """
        return self.plot(*self.study(data))


def _teaching_spec(name: str, description: str) -> FigureSpec:
    return FigureSpec(
        f"teaching_{name}",
        "04_teaching_cache_reuse",
        description,
        lambda d: (d.get(f"teaching:{name}"),),
        plot_teaching,
    )


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "trace_lengths",
        "01_trace_reuse_structure",
        "prompt and output length ECDFs per trace",
        lambda d: (d.get("requests"),),
        plot_trace_lengths,
    ),
    FigureSpec(
        "trace_arrivals",
        "01_trace_reuse_structure",
        "requests/s and prompt tokens/s over time",
        lambda d: (d.get("requests"),),
        plot_trace_arrivals,
    ),
    FigureSpec(
        "block_popularity",
        "01_trace_reuse_structure",
        "requests per block by popularity rank",
        lambda d: (d.get("block_popularity"),),
        plot_block_popularity,
    ),
    FigureSpec(
        "reuse_distance",
        "01_trace_reuse_structure",
        "CDF of block reuse distance in tokens",
        lambda d: (d.get("reuse_distances"),),
        plot_reuse_distance,
    ),
    FigureSpec(
        "prefix_structure",
        "01_trace_reuse_structure",
        "reused share of each prompt, turns per session, gaps between turns",
        lambda d: (d.get("requests"),),
        plot_prefix_structure,
    ),
    FigureSpec(
        "hit_rate_capacity",
        "01_trace_reuse_structure",
        "hit ratio vs capacity 1e4-1e8 tokens, LRU/FIFO/LFU/optimum, 3M marked",
        lambda d: (d.get("hit_rates"), d.get("overview")),
        plot_hit_rate_capacity,
    ),
    FigureSpec(
        "sizing_hit_rate",
        "02_cache_sizing",
        "the sizing view: LRU curve of the conversation trace, 3M tokens marked",
        lambda d: (d.get("hit_rates"), d.get("overview")),
        plot_sizing_hit_rate,
    ),
    FigureSpec(
        "sizing_simulation",
        "02_cache_sizing",
        "the sizing simulation: TTFT and TPOT ECDFs, requests per replica (4 x 3M, kv_cost)",
        lambda d: (d.get("sizing"),),
        plot_sizing_simulation,
    ),
    FigureSpec(
        "local_vs_global",
        "03_routing_and_locality",
        "10 local 3M-token caches (placement, routing) vs one pooled 30M cache",
        lambda d: (d.get("local_vs_pooled"), studies.routing_summary(d.get("routing"))),
        plot_local_vs_global,
    ),
    FigureSpec(
        "ttft_by_routing",
        "03_routing_and_locality",
        "TTFT ECDF per routing policy, longest-match apart, p99 dots by policy",
        lambda d: (d.get("routing"),),
        plot_ttft_by_routing,
    ),
    FigureSpec(
        "replica_load",
        "03_routing_and_locality",
        "requests per replica per routing policy (conversation, 10 x 3M)",
        lambda d: (d.get("routing"),),
        plot_replica_load,
    ),
    _teaching_spec("zipf", "Zipf skew of prefix popularity vs hit ratio and TTFT"),
    _teaching_spec("prefixes", "number of distinct prefixes vs hit ratio and TTFT"),
    _teaching_spec("prefix_len", "shared prefix length vs hit ratio and TTFT"),
    _teaching_spec("burstiness", "arrival burstiness vs hit ratio and TTFT tail"),
    _teaching_spec("cache_size", "KV cache size vs hit ratio and TTFT"),
)


def make_figures(
    out_dir: str | os.PathLike[str] = "figures",
    traces_dir: str | os.PathLike[str] | None = None,
    *,
    names: Iterable[str] | None = None,
    formats: Sequence[str] = ("pdf", "png"),
    quick: bool | None = None,
    data: FigureData | None = None,
    verbose: bool = False,
    jobs: int | None = None,
) -> dict[str, list[Path]]:
    """Regenerate every figure (or ``names``) as PDF and PNG under ``out_dir``.

    Parameters
    ----------
    out_dir : path, default "figures"
    traces_dir : path, optional
        Folder with the traces (default: :func:`inferasim.workload.traces.find_trace`).
    names : iterable of str, optional
        Subset of :data:`FIGURES` by name.
    formats : sequence of str, default ("pdf", "png")
    quick : bool, optional
        Smaller simulator slices (default: :func:`inferasim.studies.ci_mode`).
    data : FigureData, optional
        Reuse already computed studies.
    verbose : bool, default False
        Print each figure's files and a table of seconds per figure (study
        time counted where a study is first used).
    jobs : int, optional
        Worker processes for the studies' independent runs (default: the
        CPU count, at most 4; 1 runs everything in this process). Ignored
        when ``data`` is given. The files are the same for any ``jobs``.

    Returns
    -------
    dict of str to list of Path

    Examples
    --------
    >>> import tempfile
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     files = make_figures(tmp, names=["trace_lengths"], formats=("png",),
    ...                          data=FigureData(workloads={"tiny": wl}))
    ...     [p.name for p in files["trace_lengths"]]
    ['trace_lengths.png']
    >>> make_figures("figures")  # every figure from the FAST'25 traces  # doctest: +SKIP
    {'trace_lengths': [PosixPath('figures/trace_lengths.pdf'), ...], ...}
    """
    specs = {s.name: s for s in FIGURES}
    wanted = list(specs) if names is None else list(names)
    unknown = [n for n in wanted if n not in specs]
    if unknown:
        raise ValueError(f"unknown figure(s) {unknown}; known: {list(specs)}")
    if data is None:
        jobs = min(os.cpu_count() or 1, 4) if jobs is None else int(jobs)
        if jobs > 1:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                data = FigureData(traces_dir, quick=quick, executor=pool)
                return make_figures(
                    out_dir, names=wanted, formats=formats, data=data, verbose=verbose
                )
        data = FigureData(traces_dir, quick=quick)
    # The heavy studies start at once on the workers; the cheap ones run here.
    needed = {study for n in wanted for study in _USES.get(n, ())}
    needed |= {f"teaching:{n[len('teaching_'):]}" for n in wanted if n.startswith("teaching_")}
    data.prefetch([n for n in HEAVY_STUDIES if n in needed] + sorted(n for n in needed if ":" in n))
    written: dict[str, list[Path]] = {}
    seconds: dict[str, tuple[float, float]] = {}
    begin, begin_cpu = time.perf_counter(), time.process_time()
    if verbose:
        start = time.perf_counter()
        n = len(data.workloads)
        print(f"loaded {n} traces in {time.perf_counter() - start:.1f} s")
    for name in wanted:
        start, start_cpu = time.perf_counter(), time.process_time()
        fig = specs[name].make(data)
        written[name] = style.save_figure(fig, out_dir, name, formats=tuple(formats))
        seconds[name] = (time.perf_counter() - start, time.process_time() - start_cpu)
        if verbose:
            files = ", ".join(str(p) for p in written[name])
            print(f"{name}: {files} ({seconds[name][0]:.1f} s)")
    if set(wanted) == set(specs) and not data.quick:
        # every figure from the full traces: their headline numbers and the README's tables
        from inferasim.headline import write_headline

        write_headline(Path(out_dir) / "headline.json", data)
        if verbose:
            print(f"headline numbers: {Path(out_dir) / 'headline.json'}")
    if verbose:
        # CPU: this process only (work handed to an executor's workers is not in it).
        print(f"\n{'figure':<22}{'wall s':>8}{'CPU s':>8}")
        for name, (wall, cpu) in seconds.items():
            print(f"{name:<22}{wall:>8.1f}{cpu:>8.1f}")
        total = (time.perf_counter() - begin, time.process_time() - begin_cpu)
        print(f"{'total':<22}{total[0]:>8.1f}{total[1]:>8.1f}")
    return written


# ------------------------------------------------------------------------ CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``inferasim figures`` options to ``parser``.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_arguments(p)
    >>> p.parse_args(["--out", "x"]).out
    'x'
    """
    parser.add_argument("--out", default="figures", help="output folder (default: figures/)")
    parser.add_argument(
        "--traces", default=None, help="folder holding the FAST'25 traces (default: searched)"
    )
    parser.add_argument(
        "--only", nargs="+", default=None, metavar="NAME", help="figure names to make (default: all)"
    )
    parser.add_argument(
        "--format",
        nargs="+",
        default=["pdf", "png"],
        dest="formats",
        help="file formats (default: pdf png)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        default=None,
        help="smaller simulator slices (default: on when CI is set)",
    )
    parser.add_argument(
        "--jobs",
        type=integer(1),
        default=None,
        help="worker processes for the simulations and replays (default: CPU count, at most 4)",
    )
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    parser.add_argument(
        "--headline",
        default=None,
        metavar="JSON",
        help="only compute the headline numbers (no drawing), write them to JSON and rewrite "
        "the generated tables of the README.md beside it (figures/headline.json: the record "
        "tests/test_headline.py checks)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``inferasim figures`` with parsed ``args``; return the exit code.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_arguments(p)
    >>> run(p.parse_args(["--list"]))  # doctest: +ELLIPSIS
    trace_lengths ...
    0
    """
    if getattr(args, "list", False):
        for spec in FIGURES:
            print(f"{spec.name:<20} {spec.notebook:<26} {spec.description}")
        return 0
    if getattr(args, "headline", None):
        from inferasim.headline import write_headline

        try:
            data = FigureData(args.traces, quick=args.quick)
            write_headline(args.headline, data)
        except (FileNotFoundError, ValueError) as exc:
            print(f"inferasim figures: error: {exc}")
            return 2
        readme = Path(args.headline).parent / "README.md"
        print(f"wrote {args.headline}" + (f" and the tables of {readme}" if readme.is_file() else ""))
        return 0
    try:
        make_figures(
            args.out,
            args.traces,
            names=args.only,
            formats=args.formats,
            quick=args.quick,
            verbose=True,
            jobs=getattr(args, "jobs", None),
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"inferasim figures: error: {exc}")
        return 2
    return 0
