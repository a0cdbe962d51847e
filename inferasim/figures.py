"""The figure pipeline: every figure of the companion notebooks, as functions.

The notebooks and ``inferasim figures`` share this module, so the command
regenerates exactly the notebooks' figures. The work splits in two:

* :class:`Study` loads the traces and computes, lazily and once, the data
  behind the figures (hit-rate curves, local-vs-global hit rates, routing
  simulations, teaching experiments) as plain DataFrames;
* ``plot_*`` functions draw one figure each from those frames and return a
  :class:`matplotlib.figure.Figure` (built without pyplot, so nothing leaks
  into pyplot's global state and a notebook shows it exactly once).

:data:`FIGURES` lists every figure with its notebook and a one-line
description; :func:`make_figures` writes them all as PDF and PNG in the paper
style of :mod:`inferasim.style`.

Examples
--------
>>> [spec.name for spec in FIGURES][:2]
['trace_lengths', 'trace_arrivals']
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
    PercentFormatter,
)

from inferasim import style
from inferasim.workload import Workload

__all__ = [
    "FIGURES",
    "FigureSpec",
    "Study",
    "ci_mode",
    "load_traces",
    "capacity_grid",
    "make_figures",
    "add_arguments",
    "run",
]

#: The FAST'25 traces, in display order; the first two are required.
TRACE_NAMES: tuple[str, ...] = ("conversation", "synthetic", "toolagent")
REQUIRED_TRACES: tuple[str, ...] = ("conversation", "synthetic")
#: Capacity range of the hit-rate curves (tokens).
CAPACITY_RANGE: tuple[float, float] = (1e4, 1e8)
#: One prefill node's DRAM cache in the FAST'25 paper (tokens).
NODE_CACHE_TOKENS: int = 3_000_000
#: Prefill nodes in the FAST'25 local-vs-global comparison.
FLEET_REPLICAS: int = 10
#: Eviction policies of the hit-rate study (``opt`` is Belady's offline optimum).
POLICIES: tuple[str, ...] = ("lru", "fifo", "lfu", "opt")
#: Settings of the notebook-02 widget (``inferasim.widgets.cache_sizing`` kwargs).
SIZING_DEFAULTS: dict[str, Any] = {
    "capacity_tokens": NODE_CACHE_TOKENS,
    "policy": "lru",
    "replicas": 4,
    "routing": "kv_cost",
    "load": 1.0,
}
#: Routing policies of the TTFT study (``longest_match``: :class:`inferasim.sim.router.LongestMatchRouter`).
ROUTING_POLICIES: tuple[str, ...] = (
    "random",
    "least_loaded",
    "cache_aware",
    "longest_match",
    "kv_cost",
)

_LABELS = {
    "lru": "LRU",
    "fifo": "FIFO",
    "lfu": "LFU",
    "opt": "offline optimum",
    "round_robin": "round-robin",
    "random": "random",
    "least_loaded": "least-loaded",
    "cache_aware": "cache-aware",
    "longest_match": "pure longest-match",
    "kv_cost": "cache + load cost",
    "hash_first_block": "sticky (first block)",
}


def label(name: str) -> str:
    """Display label of a policy or routing name.

    Examples
    --------
    >>> label("kv_cost"), label("mine")
    ('cache + load cost', 'mine')
    """
    return _LABELS.get(name, name)


def _two_lines(text: str, width: int = 13) -> str:
    """Break a long title at the space nearest its middle.

    Examples
    --------
    >>> _two_lines("cache + load cost"), _two_lines("random")
    ('cache +\\nload cost', 'random')
    """
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    if len(text) <= width or not spaces:
        return text
    cut = min(spaces, key=lambda i: abs(i - len(text) / 2))
    return text[:cut] + "\n" + text[cut + 1 :]


def ci_mode() -> bool:
    """True when the ``CI`` environment variable is set to a true value.

    Notebooks and :class:`Study` then take smaller simulator slices.

    Examples
    --------
    >>> import os
    >>> old = os.environ.pop("CI", None)
    >>> ci_mode()
    False
    >>> if old is not None: os.environ["CI"] = old
    """
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def capacity_grid(
    low: float = CAPACITY_RANGE[0],
    high: float = CAPACITY_RANGE[1],
    *,
    per_decade: int = 8,
    block_size: int = 512,
) -> np.ndarray:
    """Log-spaced cache capacities in blocks, covering ``[low, high]`` tokens.

    Parameters
    ----------
    low, high : float
        Range in tokens.
    per_decade : int, default 8
        Points per factor of ten.
    block_size : int, default 512
        Tokens per block.

    Returns
    -------
    numpy.ndarray
        Sorted unique ``int64`` capacities in blocks (at least 1).

    Examples
    --------
    >>> capacity_grid(1024, 10240, per_decade=1, block_size=512).tolist()
    [2, 20]
    """
    decades = np.log10(high) - np.log10(low)
    points = max(int(round(decades * per_decade)) + 1, 2)
    tokens = np.logspace(np.log10(low), np.log10(high), points)
    return np.unique(np.maximum(np.round(tokens / block_size), 1).astype(np.int64))


def _trace_path(name: str, traces_dir: str | os.PathLike[str] | None) -> Path | None:
    from inferasim.workload.traces import TRACES, find_trace

    if traces_dir is not None:
        path = Path(traces_dir) / TRACES[name].filename
        if path.is_file():
            return path
        if name in REQUIRED_TRACES:
            raise FileNotFoundError(f"trace {name!r} not found: {path} does not exist")
        return None
    try:
        # Required traces may be downloaded; the tool-and-agent one is used
        # only when it is already on disk.
        return find_trace(name, download=name in REQUIRED_TRACES)
    except FileNotFoundError:
        if name in REQUIRED_TRACES:
            raise
        return None


def load_traces(
    traces_dir: str | os.PathLike[str] | None = None, names: Iterable[str] = TRACE_NAMES
) -> dict[str, Workload]:
    """Load the FAST'25 traces that are present, by name.

    Parameters
    ----------
    traces_dir : path, optional
        Folder holding ``<name>_trace.jsonl``; by default
        :func:`inferasim.workload.traces.find_trace` searches ``$INFERASIM_TRACE_DIR``,
        ``./traces``, ``../shared/traces`` and the user cache.
    names : iterable of str
        Traces to load. ``conversation`` and ``synthetic`` must exist;
        ``toolagent`` is loaded only when it is on disk.

    Returns
    -------
    dict of str to Workload

    Examples
    --------
    >>> callable(load_traces)
    True
    >>> load_traces(names=["conversation"])  # doctest: +SKIP
    {'conversation': Workload from conversation_trace.jsonl: 12,031 requests, ...}
    """
    out: dict[str, Workload] = {}
    for name in names:
        path = _trace_path(name, traces_dir)
        if path is not None:
            out[name] = Workload.from_mooncake(path)
    return out


# --------------------------------------------------------------------------- data
class Study:
    """The data behind every figure, computed lazily and cached.

    Parameters
    ----------
    traces_dir : path, optional
        Where the traces are (see :func:`load_traces`).
    quick : bool, optional
        Smaller simulator slices (default: :func:`ci_mode`). Reuse analyses
        always run on the full traces.
    workloads : mapping of str to Workload, optional
        Use these instead of loading traces (tests, your own traffic).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> study = Study(workloads={"tiny": wl})
    >>> float(study.ceilings.loc["tiny", "ceiling_token_hit_ratio"])
    0.5
    """

    def __init__(
        self,
        traces_dir: str | os.PathLike[str] | None = None,
        *,
        quick: bool | None = None,
        workloads: Mapping[str, Workload] | None = None,
    ) -> None:
        self.traces_dir = traces_dir
        self.quick = ci_mode() if quick is None else bool(quick)
        self._given = dict(workloads) if workloads is not None else None

    def __repr__(self) -> str:
        return f"Study(traces_dir={self.traces_dir!r}, quick={self.quick})"

    @cached_property
    def workloads(self) -> dict[str, Workload]:
        """The traces by name (conversation, synthetic, and toolagent when present)."""
        if self._given is not None:
            return self._given
        return load_traces(self.traces_dir)

    # ---- notebook 1
    @cached_property
    def ceilings(self) -> pd.DataFrame:
        """Per trace: requests, unique blocks and the infinite-cache hit ratios.

        Columns ``requests``, ``prompt_tokens``, ``unique_tokens``,
        ``ceiling_block_hit_ratio``, ``ceiling_token_hit_ratio``; indexed by
        trace.
        """
        rows = {}
        for name, wl in self.workloads.items():
            d = wl.describe()
            tokens = wl.block_tokens()
            _, first = np.unique(wl.hash_ids, return_index=True)
            rows[name] = {
                "requests": len(wl),
                "prompt_tokens": int(wl.input_len.sum()),
                "unique_tokens": int(tokens[first].sum()),
                "ceiling_block_hit_ratio": float(d["infinite_block_hit_ratio"]),
                "ceiling_token_hit_ratio": float(d["infinite_token_hit_ratio"]),
            }
        out = pd.DataFrame.from_dict(rows, orient="index")
        out.index.name = "trace"
        return out

    @cached_property
    def hit_rates(self) -> pd.DataFrame:
        """Hit ratio of one cache against its capacity, per trace and policy.

        Columns ``trace``, ``policy``, ``capacity_blocks``,
        ``capacity_tokens``, ``block_hit_ratio``, ``token_hit_ratio``.
        """
        frames = []
        for name, wl in self.workloads.items():
            for policy in POLICIES:
                grid = capacity_grid(per_decade=curve_points(policy), block_size=wl.block_size)
                curve = hit_rate_curve(wl, grid, policy)
                frames.append(curve.assign(trace=name, policy=policy))
        cols = [
            "trace",
            "policy",
            "capacity_blocks",
            "capacity_tokens",
            "block_hit_ratio",
            "token_hit_ratio",
        ]
        return pd.concat(frames, ignore_index=True)[cols]

    @cached_property
    def node_cache(self) -> pd.DataFrame:
        """Hit ratio of a 3M-token cache per trace and policy, and its share of the ceiling."""
        rows = []
        for name, wl in self.workloads.items():
            blocks = NODE_CACHE_TOKENS // wl.block_size
            ceiling = self.ceilings.loc[name, "ceiling_token_hit_ratio"]
            for policy in POLICIES:
                curve = hit_rate_curve(wl, np.array([blocks]), policy)
                hit = float(curve["token_hit_ratio"].iloc[0])
                rows.append(
                    {
                        "trace": name,
                        "policy": policy,
                        "capacity_tokens": blocks * wl.block_size,
                        "token_hit_ratio": hit,
                        "ceiling_token_hit_ratio": ceiling,
                        "share_of_ceiling": hit / ceiling if ceiling else float("nan"),
                    }
                )
        return pd.DataFrame(rows)

    # ---- notebook 2
    @cached_property
    def sizing(self) -> Any:
        """The notebook-02 cache-sizing widget at its defaults, simulated once.

        :data:`SIZING_DEFAULTS` (conversation trace, 3M tokens, 4 replicas,
        cache + load cost routing); the simulation covers the first 10 minutes
        under ``quick``, else the whole trace. Its ``hit_figure`` and
        ``sim_figure`` are the ``sizing_*`` figures.

        Examples
        --------
        >>> wl = Workload.from_synthetic(50, rate=10.0, input_len=1024, output_len=8,
        ...                              num_prefixes=4, prefix_len=1024, seed=0)
        >>> len(Study(workloads={"conversation": wl}).sizing.result.requests)
        50
        """
        from inferasim.widgets import cache_sizing

        widget = cache_sizing(
            self.workloads,
            sim_window_ms=10 * 60_000 if self.quick else None,
            **SIZING_DEFAULTS,
        )
        widget.simulate()
        return widget

    # ---- notebook 3
    @cached_property
    def local_global(self) -> pd.DataFrame:
        """10 local caches of 3M tokens against one pooled 30M-token cache.

        Columns ``trace``, ``assign`` (how requests are spread over nodes),
        ``local_token_hit_ratio``, ``global_token_hit_ratio``,
        ``ceiling_token_hit_ratio``.
        """
        return local_vs_global(self.workloads, FLEET_REPLICAS, NODE_CACHE_TOKENS)

    def routing_workload(self, trace: str = "conversation") -> Workload:
        """The slice of a trace the routing simulations run on (20 min under ``quick``).

        Examples
        --------
        >>> wl = Workload.from_requests([0, 60_000 * 30], [512, 512], [1, 1], [[1], [1]])
        >>> len(Study(workloads={"conversation": wl}, quick=True).routing_workload())
        1
        """
        wl = self.workloads[trace]
        if self.quick:
            wl = wl.window(0, 20 * 60_000)
        return wl

    @cached_property
    def routing(self) -> dict[tuple[str, str], Any]:
        """Simulator results by (trace, routing policy): 10 replicas x 3M-token caches."""
        out = {}
        for trace in REQUIRED_TRACES:
            wl = self.routing_workload(trace)
            for policy in ROUTING_POLICIES:
                out[trace, policy] = simulate(
                    wl,
                    replicas=FLEET_REPLICAS,
                    routing=policy,
                    kv_blocks=NODE_CACHE_TOKENS // wl.block_size,
                )
        return out

    @cached_property
    def routing_table(self) -> pd.DataFrame:
        """Per (trace, routing): TTFT p50/p99, TPOT p50, hit ratio, busiest replica's share."""
        return routing_summary(self.routing)

    # ---- notebook 4
    def teaching(self, experiment: str) -> pd.DataFrame:
        """One teaching experiment's table (see :data:`TEACHING`, :func:`run_teaching`).

        Computed on first use, then cached on the study.

        Examples
        --------
        >>> study = Study(workloads={}, quick=True)
        >>> study.teaching("zipf")["value"].tolist()  # doctest: +SKIP
        [0.0, 0.5, 1.0, 1.5, 2.0]
        >>> study.teaching("nope")
        Traceback (most recent call last):
        ...
        KeyError: "unknown teaching experiment 'nope'; known: ['zipf', 'prefixes', 'prefix_len', 'burstiness', 'cache_size']"
        """
        if experiment not in TEACHING:
            raise KeyError(f"unknown teaching experiment {experiment!r}; known: {list(TEACHING)}")
        cache = self.__dict__.setdefault("_teaching", {})
        if experiment not in cache:
            cache[experiment] = run_teaching(experiment, quick=self.quick)
        return cache[experiment]


# ------------------------------------------------------------------ reuse wrappers
def curve_points(policy: str) -> int:
    """Capacities per decade of a hit-rate curve: dense for LRU (one pass), 4 for replays.

    LRU curves cost one pass whatever the number of points; the other
    policies replay the trace once per capacity.

    Examples
    --------
    >>> curve_points("lru"), curve_points("opt")
    (16, 4)
    """
    return 16 if policy == "lru" else 4


def hit_rate_curve(wl: Workload, capacities_blocks: np.ndarray, policy: str) -> pd.DataFrame:
    """Hit ratio of one cache at each capacity (blocks) under ``policy``.

    Uses :func:`inferasim.reuse.hit_rate_curve` (one pass over the trace for
    stack policies); columns ``capacity_blocks``, ``capacity_tokens``,
    ``block_hit_ratio``, ``token_hit_ratio``.

    Examples
    --------
    Request 1 repeats request 0's two blocks. Touches go tail-first, so the
    head block is the most recent: one block of cache keeps it (1 of 4
    block references hit), two blocks keep both (2 of 4).

    >>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 2]])
    >>> hit_rate_curve(wl, np.array([1, 2]), "lru")["block_hit_ratio"].tolist()
    [0.25, 0.5]
    """
    from inferasim import reuse

    requested = np.unique(np.asarray(capacities_blocks, dtype=np.int64))
    # A cache at least as large as the working set (distinct blocks) never
    # evicts: compute such capacities at the working set itself.
    working_set = max(int(np.unique(wl.hash_ids).size), 1)
    effective = np.minimum(requested, working_set)
    curve = reuse.hit_rate_curve(wl, np.unique(effective), policy=policy, unit="blocks")
    curve = curve.set_index("capacity_blocks").loc[effective].reset_index()
    curve["capacity_blocks"] = requested
    curve["capacity_tokens"] = requested * wl.block_size
    return curve[["capacity_blocks", "capacity_tokens", "block_hit_ratio", "token_hit_ratio"]]


def local_vs_global(
    workloads: Mapping[str, Workload],
    replicas: int = FLEET_REPLICAS,
    capacity_tokens: int = NODE_CACHE_TOKENS,
    assigns: Sequence[str] = ("random", "round_robin", "hash_first_block"),
) -> pd.DataFrame:
    """Token hit ratio of ``replicas`` local caches against one pooled cache.

    Each node has ``capacity_tokens`` of LRU cache; requests are spread over
    nodes by each rule in ``assigns`` (see
    :func:`inferasim.reuse.partitioned_hit_rate`: ``random``,
    ``round_robin``, ``hash_first_block``); the pooled cache holds
    ``replicas * capacity_tokens``.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``assign``, ``local_token_hit_ratio``,
        ``global_token_hit_ratio``, ``ceiling_token_hit_ratio``.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2, 3], [512] * 4, [1] * 4, [[1], [1], [1], [1]])
    >>> t = local_vs_global({"t": wl}, replicas=2, capacity_tokens=512, assigns=["round_robin"])
    >>> t[["local_token_hit_ratio", "global_token_hit_ratio"]].values.tolist()
    [[0.5, 0.75]]
    """
    from inferasim import reuse

    rows = []
    for name, wl in workloads.items():
        blocks = int(capacity_tokens) // wl.block_size
        ceiling = float(wl.describe()["infinite_token_hit_ratio"])
        for assign in assigns:
            part = reuse.partitioned_hit_rate(wl, blocks * replicas, replicas, assign=assign)
            rows.append(
                {
                    "trace": name,
                    "assign": assign,
                    "local_token_hit_ratio": float(part.loc["partitioned", "token_hit_ratio"]),
                    "global_token_hit_ratio": float(part.loc["pooled", "token_hit_ratio"]),
                    "ceiling_token_hit_ratio": ceiling,
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------- simulator wrappers
def simulate(wl: Workload, **config: Any) -> Any:
    """Run :class:`inferasim.Simulator` with ``config`` (seed 0) on ``wl``.

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> len(simulate(wl, replicas=2, routing="round_robin").requests)
    20
    """
    from inferasim.sim import Simulator

    config.setdefault("seed", 0)
    config.setdefault("progress", False)
    return Simulator(**config).run(wl)


def routing_summary(results: Mapping[tuple[str, str], Any]) -> pd.DataFrame:
    """One row per (trace, routing) with latency percentiles and load balance.

    Columns ``trace``, ``routing``, ``ttft_p50_ms``, ``ttft_p99_ms``,
    ``tpot_p50_ms``, ``token_hit_ratio`` (cached / prompt tokens),
    ``busiest_share`` (the busiest replica's share of requests) and
    ``rejected`` (requests that can never fit), from
    :meth:`inferasim.sim.SimResult.summary`.

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> r = simulate(wl, replicas=2, routing="round_robin")
    >>> routing_summary({("t", "round_robin"): r})["busiest_share"].tolist()
    [0.5]
    """
    rows = []
    for (trace, routing), result in results.items():
        summary = result.summary()
        rows.append(
            {
                "trace": trace,
                "routing": routing,
                "ttft_p50_ms": float(summary["ttft_ms_p50"]),
                "ttft_p99_ms": float(summary["ttft_ms_p99"]),
                "tpot_p50_ms": float(summary["tpot_ms_p50"]),
                "token_hit_ratio": float(summary["token_hit_ratio"]),
                "busiest_share": float(summary["max_replica_share"]),
                "rejected": int(summary["rejected"]),
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ teaching
@dataclass(frozen=True)
class Experiment:
    """A one-knob teaching experiment on a synthetic prefix pool.

    Examples
    --------
    >>> TEACHING["cache_size"].knob, TEACHING["cache_size"].values[:2]
    ('kv_blocks', (32, 64))
    """

    name: str
    knob: str
    values: tuple[float, ...]
    axis_label: str
    log_x: bool = False


#: Base synthetic workload of the teaching experiments (``from_synthetic`` kwargs).
TEACHING_BASE: dict[str, Any] = {
    "num_requests": 800,
    "rate": 4.0,
    "arrival": "gamma",
    "burstiness": 1.0,
    "input_len": 1024,
    "output_len": 64,
    "range_ratio": 0.25,
    "num_prefixes": 32,
    "prefix_len": 3072,
    "prefix_zipf": 1.0,
    "seed": 0,
}
#: KV blocks of the single teaching replica unless the experiment varies it.
TEACHING_KV_BLOCKS: int = 96

TEACHING: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "zipf", "prefix_zipf", (0.0, 0.5, 1.0, 1.5, 2.0), "prefix popularity skew (Zipf s)"
        ),
        Experiment("prefixes", "num_prefixes", (4, 16, 64, 256), "distinct prefixes", log_x=True),
        Experiment(
            "prefix_len",
            "prefix_len",
            (512, 1024, 2048, 3072, 4096),
            "shared prefix length (tokens)",
        ),
        Experiment(
            "burstiness",
            "burstiness",
            (0.1, 0.25, 0.5, 1.0, 4.0),
            "gamma shape (lower = burstier)",
            log_x=True,
        ),
        Experiment(
            "cache_size",
            "kv_blocks",
            (32, 64, 128, 256, 512, 1024),
            "KV cache (blocks of 512 tokens)",
            log_x=True,
        ),
    )
}


def run_teaching(experiment: str, *, quick: bool = False) -> pd.DataFrame:
    """Run one teaching experiment: sweep one knob, keep everything else fixed.

    For each value of the knob a seeded synthetic workload
    (:data:`TEACHING_BASE`) is replayed through one replica with
    :data:`TEACHING_KV_BLOCKS` blocks of LRU cache.

    Returns
    -------
    pandas.DataFrame
        ``value`` (the knob), ``infinite_token_hit_ratio`` (the workload's
        ceiling), ``token_hit_ratio`` (what the simulated cache served),
        ``ttft_p50_ms``, ``ttft_p99_ms``.

    Examples
    --------
    >>> run_teaching("zipf", quick=True).columns.tolist()  # doctest: +SKIP
    ['value', 'infinite_token_hit_ratio', 'token_hit_ratio', 'ttft_p50_ms', 'ttft_p99_ms']
    """
    exp = TEACHING[experiment]
    rows = []
    for value in exp.values:
        params = dict(TEACHING_BASE)
        kv_blocks = TEACHING_KV_BLOCKS
        if quick:
            params["num_requests"] = params["num_requests"] // 2
        if exp.knob == "kv_blocks":
            kv_blocks = int(value)
        else:
            params[exp.knob] = type(TEACHING_BASE[exp.knob])(value)
        num = params.pop("num_requests")
        rate = params.pop("rate")
        wl = Workload.from_synthetic(num, rate, **params)
        res = simulate(wl, replicas=1, routing="round_robin", kv_blocks=kv_blocks)
        req = res.requests
        rows.append(
            {
                "value": value,
                "infinite_token_hit_ratio": float(wl.describe()["infinite_token_hit_ratio"]),
                "token_hit_ratio": float(req["cached_tokens"].sum() / req["input_len"].sum()),
                "ttft_p50_ms": float(req["ttft_ms"].quantile(0.5)),
                "ttft_p99_ms": float(req["ttft_ms"].quantile(0.99)),
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------- plotting
def _figure(size: tuple[float, float] = style.SINGLE, ncols: int = 1, nrows: int = 1, **kw: Any):
    with style.paper_style():
        fig = Figure(figsize=size, layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _tokens_formatter(x: float, _pos: Any = None) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.0f}{suffix}" if v == int(v) else f"{v:.1f}{suffix}"
    return f"{x:.0f}"


TOKENS = FuncFormatter(_tokens_formatter)


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(np.asarray(values, dtype=float))
    y = np.arange(1, x.size + 1) / max(x.size, 1)
    return x, y


def plot_trace_lengths(workloads: Mapping[str, Workload]) -> Figure:
    """Prompt and output length distributions (ECDF), one line per trace.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [100, 3000], [5, 50])
    >>> len(plot_trace_lengths({"t": wl}).axes)
    2
    """
    with style.paper_style():
        fig, axes = _figure(style.DOUBLE, ncols=2)
        for i, (name, wl) in enumerate(workloads.items()):
            for ax, values in zip(axes[0], (wl.input_len, wl.output_len), strict=True):
                x, y = _ecdf(values)
                ax.step(x, y, where="post", color=style.color(name, i), label=name)
        for ax, what in zip(
            axes[0], ("prompt length (tokens)", "output length (tokens)"), strict=True
        ):
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(TOKENS)
            ax.set_xlabel(what)
            ax.set_ylabel("fraction of requests")
            ax.set_ylim(0, 1.01)
        axes[0, 0].legend(loc="lower right")
        axes[0, 0].set_title("prompt lengths")
        axes[0, 1].set_title("output lengths")
    return fig


def plot_trace_arrivals(workloads: Mapping[str, Workload], bin_s: float = 60.0) -> Figure:
    """Offered load over time: requests/s and prompt tokens/s per ``bin_s`` bin.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 30_000, 90_000], [100] * 3, [5] * 3)
    >>> fig = plot_trace_arrivals({"t": wl})
    >>> fig.axes[0].get_xlabel()
    'time since first request (min)'
    """
    with style.paper_style():
        fig, axes = _figure(style.DOUBLE, ncols=2)
        for i, (name, wl) in enumerate(workloads.items()):
            t = wl.arrival_ms / 1000.0
            end = max(float(t.max()) if t.size else 0.0, 1e-9)
            # Bins of bin_s seconds; the last one ends at the last arrival and
            # its rate is divided by its real width (no artificial drop).
            edges = np.append(np.arange(0.0, end, bin_s), end)
            widths = np.diff(edges)
            reqs, _ = np.histogram(t, bins=edges)
            toks, _ = np.histogram(t, bins=edges, weights=wl.input_len)
            keep = widths >= bin_s / 4
            mid = ((edges[:-1] + edges[1:]) / 2 / 60.0)[keep]
            c = style.color(name, i)
            axes[0, 0].plot(mid, (reqs / widths)[keep], color=c, label=name)
            axes[0, 1].plot(mid, (toks / widths)[keep], color=c, label=name)
        axes[0, 0].set_ylabel("arrival rate (requests/s)")
        axes[0, 1].set_ylabel("prompt token rate (tokens/s)")
        axes[0, 1].yaxis.set_major_formatter(TOKENS)
        for ax in axes[0]:
            ax.set_xlabel("time since first request (min)")
            ax.set_ylim(bottom=0)
        axes[0, 0].legend(loc="lower right")
        axes[0, 0].set_title(f"arrival rate ({bin_s:g} s bins)")
        axes[0, 1].set_title("prompt token rate")
    return fig


def plot_block_popularity(workloads: Mapping[str, Workload]) -> Figure:
    """How often each prefix block is referenced, by popularity rank (log-log).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 3]])
    >>> plot_block_popularity({"t": wl}).axes[0].get_ylabel()
    'references per block'
    """
    with style.paper_style():
        fig, axes = _figure(style.SINGLE)
        ax = axes[0, 0]
        for i, (name, wl) in enumerate(workloads.items()):
            _, counts = np.unique(wl.hash_ids, return_counts=True)
            counts = np.sort(counts)[::-1]
            ranks = np.arange(1, counts.size + 1)
            ax.loglog(ranks, counts, color=style.color(name, i), label=name)
        ax.set_xlabel("block popularity rank")
        ax.set_ylabel("references per block")
        ax.xaxis.set_major_locator(LogLocator(numticks=6))
        ax.legend(loc="upper right")
    return fig


def plot_reuse_distance(
    workloads: Mapping[str, Workload], mark_tokens: float = NODE_CACHE_TOKENS
) -> Figure:
    """CDF of block reuse distances (distinct tokens touched in between).

    A block re-referenced at reuse distance ``d`` tokens (LRU stack
    distance) is still in an LRU cache of ``d`` tokens or more; the curve
    tops out at the share of references that repeat an earlier block. The
    dashed line marks a 3M-token cache.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [512] * 3, [1] * 3, [[1], [2], [1]])
    >>> plot_reuse_distance({"t": wl}).axes[0].get_xlabel()
    'reuse distance (tokens)'
    """
    with style.paper_style():
        fig, axes = _figure(style.SINGLE)
        ax = axes[0, 0]
        for i, (name, wl) in enumerate(workloads.items()):
            dist = reuse_distance_tokens(wl)
            total = dist.size
            finite = np.sort(dist[np.isfinite(dist)])
            if finite.size:
                y = np.arange(1, finite.size + 1) / total
                ax.step(
                    np.maximum(finite, 1), y, where="post", color=style.color(name, i), label=name
                )
        ax.axvline(mark_tokens, color="0.4", ls="--", lw=0.8)
        ax.text(
            mark_tokens, 0.02, f" {_tokens_formatter(mark_tokens)} tokens", fontsize=6, color="0.3"
        )
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(TOKENS)
        ax.set_xlabel("reuse distance (tokens)")
        ax.set_ylabel("fraction of block references")
        ax.set_ylim(0, None)
        ax.legend(loc="upper left")
    return fig


def reuse_distance_tokens(wl: Workload) -> np.ndarray:
    """LRU stack distance in tokens of every block reference (inf for first uses).

    From :func:`inferasim.reuse.reuse_distance` (stack distance in blocks
    times ``block_size``), one value per entry of ``wl.hash_ids``.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [512] * 3, [1] * 3, [[1], [2], [1]])
    >>> reuse_distance_tokens(wl).tolist()
    [inf, inf, 1024.0]
    """
    from inferasim import reuse

    frame = reuse.reuse_distance(wl)
    out = np.full(wl.hash_ids.size, np.inf)
    flat = wl.offsets[frame["request_id"].to_numpy()] + frame["position"].to_numpy()
    out[flat] = frame["stack_distance"].to_numpy(dtype=float) * wl.block_size
    return out


def cached_prefix_tokens(wl: Workload) -> np.ndarray:
    """Prompt tokens of each request an infinite prefix cache would serve.

    The leading run of the request's blocks that appeared in any earlier
    request (in arrival order), counted in tokens.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [1024, 1000], [1, 1], [[1, 2], [1, 3]])
    >>> cached_prefix_tokens(wl).tolist()
    [0, 512]
    """
    from inferasim import _ragged

    hits = _ragged.leading_run(_ragged.first_seen_earlier(wl.hash_ids, wl.offsets), wl.offsets)
    tokens = wl.block_tokens()
    rows = _ragged.row_of(wl.offsets)
    return np.bincount(rows[hits], weights=tokens[hits], minlength=len(wl)).astype(np.int64)


def plot_prefix_structure(workloads: Mapping[str, Workload]) -> Figure:
    """Prefix sharing and multi-turn structure, one line per trace.

    Left: ECDF of the share of each prompt an infinite cache would serve
    (the leading run of already-seen blocks). Middle: share of requests by
    their turn in an inferred conversation chain
    (:func:`inferasim.reuse.sessions`). Right: ECDF of the time between
    consecutive turns, which is how long a cache must keep a conversation.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1000], [1024, 2048], [1, 1], [[1, 2], [1, 2, 3, 4]])
    >>> [ax.get_xlabel() for ax in plot_prefix_structure({"t": wl}).axes]
    ['prompt share served by an infinite cache', 'turn in conversation', 'time between turns (s)']
    """
    from inferasim import reuse

    with style.paper_style():
        fig, axes = _figure(style.DOUBLE, ncols=3)
        a, b, c = axes[0]
        max_turn = 1
        for i, (name, wl) in enumerate(workloads.items()):
            color = style.color(name, i)
            share = cached_prefix_tokens(wl) / np.maximum(wl.input_len, 1)
            x, y = _ecdf(share)
            a.step(x, y, where="post", color=color, label=name)
            turns = reuse.sessions(wl).requests
            by_turn = turns["turn"].value_counts().sort_index() / len(turns)
            b.plot(by_turn.index, by_turn.to_numpy(), marker="o", ms=2.5, color=color, label=name)
            max_turn = max(max_turn, int(by_turn.index.max()))
            gaps = turns["gap_ms"].dropna().to_numpy() / 1000.0
            if gaps.size:
                x, y = _ecdf(gaps)
                c.step(np.maximum(x, 1e-3), y, where="post", color=color, label=name)
        a.set_xlabel("prompt share served by an infinite cache")
        a.xaxis.set_major_formatter(PercentFormatter(1.0))
        a.set_ylabel("fraction of requests")
        a.set_ylim(0, 1.01)
        a.set_title("reusable prefix per prompt")
        a.legend(loc="upper left")
        b.set_xlabel("turn in conversation")
        b.set_ylabel("share of requests")
        b.set_yscale("log")
        b.set_xscale("log")
        b.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        b.set_title("multi-turn chains")
        c.set_xlabel("time between turns (s)")
        c.set_ylabel("fraction of follow-up turns")
        c.set_xscale("log")
        c.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        c.set_ylim(0, 1.01)
        c.set_title("gap before the next turn")
    return fig


def session_stats(wl: Workload) -> dict[str, float]:
    """Multi-turn statistics of a workload from :func:`inferasim.reuse.sessions`.

    Returns
    -------
    dict
        ``multi-turn sessions`` (chains of two turns or more),
        ``requests in multi-turn sessions`` (share), ``mean turns per
        multi-turn session``, ``median gap between turns (s)``.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 2000, 5000], [1024, 2048, 512], [1] * 3,
    ...                             [[1, 2], [1, 2, 3, 4], [9]])
    >>> session_stats(wl)
    {'multi-turn sessions': 1, 'requests in multi-turn sessions': 0.6666666666666666, 'mean turns per multi-turn session': 2.0, 'median gap between turns (s)': 2.0}
    """
    from inferasim import reuse

    s = reuse.sessions(wl)
    multi = s.sessions[s.sessions["turns"] >= 2]
    gaps = s.requests["gap_ms"].dropna()
    return {
        "multi-turn sessions": int(len(multi)),
        "requests in multi-turn sessions": float(multi["turns"].sum() / max(len(wl), 1)),
        "mean turns per multi-turn session": float(multi["turns"].mean()) if len(multi) else 0.0,
        "median gap between turns (s)": float(gaps.median() / 1000.0)
        if len(gaps)
        else float("nan"),
    }


def tree_stats(wl: Workload) -> dict[str, float]:
    """Radix-tree statistics of a workload from :func:`inferasim.reuse.prefix_tree`.

    Returns
    -------
    dict
        ``distinct first blocks``, ``radix nodes``, ``shared prefixes``
        (nodes on two requests' paths or more), ``mean leaf depth (tokens)``.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [1536, 1536], [1, 1], [[1, 2, 3], [1, 2, 4]])
    >>> tree_stats(wl)["shared prefixes"], tree_stats(wl)["mean leaf depth (tokens)"]
    (1, 1536.0)
    """
    from inferasim import reuse

    summary = reuse.prefix_tree(wl).summary()
    return {
        "distinct first blocks": int(summary["root_children"]),
        "radix nodes": int(summary["nodes"]),
        "shared prefixes": int(summary["shared_nodes"]),
        "mean leaf depth (tokens)": float(summary["mean_leaf_depth_blocks"] * wl.block_size),
    }


def draw_hit_rate_curve(
    ax: Any,
    curve: pd.DataFrame,
    *,
    color: str,
    label: str | None = None,
    marker: str | None = None,
    ratio: str = "token_hit_ratio",
) -> Any:
    """Draw one hit-rate curve (capacity in tokens, log x) on ``ax``; return the line.

    Examples
    --------
    >>> fig = Figure()
    >>> ax = fig.subplots()
    >>> c = pd.DataFrame({"capacity_tokens": [512, 1024], "token_hit_ratio": [0.1, 0.2]})
    >>> draw_hit_rate_curve(ax, c, color="k").get_ydata().tolist()
    [0.1, 0.2]
    """
    (line,) = ax.plot(
        curve["capacity_tokens"].to_numpy(),
        curve[ratio].to_numpy(),
        color=color,
        label=label,
        marker=marker,
        markevery=0.08 if marker else None,
        markersize=3,
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(TOKENS)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_xlabel("cache capacity (tokens)")
    ax.set_ylabel("token hit ratio")
    return line


def plot_hit_rate_capacity(
    hit_rates: pd.DataFrame, ceilings: pd.DataFrame, node_cache: pd.DataFrame
) -> Figure:
    """Hit ratio of one cache from 1e4 to 1e8 tokens, per policy, one panel per trace.

    The dotted line is the infinite-cache ceiling; the dashed line marks a
    3M-token cache and the label gives LRU's share of the ceiling there.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> s = Study(workloads={"t": wl})
    >>> len(plot_hit_rate_capacity(s.hit_rates, s.ceilings, s.node_cache).axes)
    1
    """
    traces = list(dict.fromkeys(hit_rates["trace"]))
    with style.paper_style():
        fig, axes = _figure((style.DOUBLE[0], 2.8), ncols=len(traces), sharey=True)
        for ax, trace in zip(axes[0], traces, strict=True):
            sub = hit_rates[hit_rates["trace"] == trace]
            for policy in dict.fromkeys(sub["policy"]):
                curve = sub[sub["policy"] == policy]
                draw_hit_rate_curve(
                    ax,
                    curve,
                    color=style.color(policy),
                    label=label(policy),
                    marker=style.marker(policy),
                )
            ceiling = float(ceilings.loc[trace, "ceiling_token_hit_ratio"])
            ax.axhline(ceiling, color="0.3", ls=":", lw=0.9)
            ax.text(
                CAPACITY_RANGE[0] * 1.2,
                ceiling + 0.012,
                f"ceiling (infinite cache) {ceiling:.1%}",
                fontsize=6.5,
                color="0.2",
            )
            node = node_cache[(node_cache["trace"] == trace) & (node_cache["policy"] == "lru")]
            if len(node):
                row = node.iloc[0]
                ax.axvline(row["capacity_tokens"], color="0.4", ls="--", lw=0.8)
                ax.plot(
                    [row["capacity_tokens"]],
                    [row["token_hit_ratio"]],
                    "o",
                    color=style.color("lru"),
                    ms=5,
                    mfc="white",
                    mew=1.2,
                    zorder=5,
                )
                ax.annotate(
                    f"3M-token LRU cache:\n{row['token_hit_ratio']:.1%} = {row['share_of_ceiling']:.0%} of ceiling",
                    xy=(row["capacity_tokens"], row["token_hit_ratio"]),
                    # Text in the empty band below the ceiling, at the left.
                    xytext=(CAPACITY_RANGE[0] * 1.3, ceiling * 0.62),
                    textcoords="data",
                    ha="left",
                    va="bottom",
                    fontsize=6.5,
                    arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 0.7, "shrinkB": 4},
                )
            ax.set_xlim(*CAPACITY_RANGE)
            ax.set_ylim(0, min(1.0, ceiling + 0.12))
            ax.set_title(f"{trace} trace")
        for ax in axes[0, 1:]:
            ax.set_ylabel("")
        handles, labels_ = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels_, loc="outside lower center", ncol=len(labels_))
    return fig


def plot_local_vs_global(table: pd.DataFrame, routing_table: pd.DataFrame | None = None) -> Figure:
    """Token hit ratio of N local caches of C tokens vs one pooled N*C cache, per trace.

    Each panel shows, for one trace, the local caches under each placement
    rule of the reuse replay (:func:`local_vs_global`: random, round-robin,
    sticky on the first block), then, when ``routing_table`` is given, under
    each simulated routing policy (:func:`routing_summary`, same fleet), then
    the pooled cache; the dotted line is the infinite-cache ceiling.

    Examples
    --------
    >>> t = pd.DataFrame({"trace": ["a"], "assign": ["random"], "local_token_hit_ratio": [0.3],
    ...                   "global_token_hit_ratio": [0.5], "ceiling_token_hit_ratio": [0.6]})
    >>> r = pd.DataFrame({"trace": ["a"], "routing": ["kv_cost"], "token_hit_ratio": [0.4]})
    >>> fig = plot_local_vs_global(t, r)
    >>> [round(float(p.get_height()), 2) for p in fig.axes[0].patches]
    [0.3, 0.4, 0.5]
    """
    traces = list(dict.fromkeys(table["trace"]))
    with style.paper_style():
        fig, axes = _figure((style.DOUBLE[0], 2.9), ncols=len(traces), sharey=True)
        for k, (ax, trace) in enumerate(zip(axes[0], traces, strict=True)):
            rows = table[table["trace"] == trace]
            names, values, colors, hatches = [], [], [], []
            for j, r in enumerate(rows.itertuples()):
                names.append(label(r.assign))
                values.append(r.local_token_hit_ratio)
                colors.append(style.OKABE_ITO["sky"] if j % 2 else "0.55")
                hatches.append("///")
            split = [len(names)]
            if routing_table is not None:
                routed = routing_table[routing_table["trace"] == trace]
                for j, r in enumerate(routed.itertuples()):
                    names.append(label(r.routing))
                    values.append(r.token_hit_ratio)
                    colors.append(style.color(r.routing, j))
                    hatches.append("")
                split.append(len(names))
            names.append("pooled cache")
            values.append(float(rows["global_token_hit_ratio"].iloc[0]))
            colors.append(style.OKABE_ITO["black"])
            hatches.append("")
            # Gaps between the groups.
            x = np.arange(len(names), dtype=float)
            for cut in split:
                x[cut:] += 0.6
            bars = ax.bar(x, values, 0.8, color=colors, edgecolor="white", linewidth=0.3)
            for bar, hatch in zip(bars, hatches, strict=True):
                bar.set_hatch(hatch)
            ceiling = float(rows["ceiling_token_hit_ratio"].iloc[0])
            ax.axhline(ceiling, color="0.2", ls=":", lw=0.9)
            ax.text(x[0] - 0.45, ceiling + 0.015, f"ceiling {ceiling:.0%}", ha="left", fontsize=6.5)
            for xi, v in zip(x, values, strict=True):
                ax.text(xi, v + 0.01, f"{v:.0%}", ha="center", va="bottom", fontsize=5.5)
            groups = [(0, split[0], "placement\n(replay)")]
            if routing_table is not None:
                groups.append((split[0], split[1], "routing\n(simulated)"))
            for a, b, text in groups:
                if b > a:
                    ax.text(
                        (x[a] + x[b - 1]) / 2,
                        0.97,
                        text,
                        ha="center",
                        va="top",
                        fontsize=6.5,
                        color="0.3",
                    )
            ax.set_xticks(x, names, rotation=40, ha="right", rotation_mode="anchor")
            ax.set_xlabel("how requests reach the 10 local caches")
            ax.set_title(f"{trace} trace")
            if k == 0:
                ax.set_ylabel("token hit ratio")
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
            ax.set_ylim(0, 1)
            ax.grid(axis="x", visible=False)
    return fig


def plot_ttft_by_routing(
    results: Mapping[tuple[str, str], Any], traces: Sequence[str] | None = None
) -> Figure:
    """TTFT per routing policy: an ECDF panel per trace (p99 dotted) and the p99s side by side.

    Parameters
    ----------
    results : mapping of (trace, routing) to SimResult
    traces : sequence of str, optional
        Traces to show (default: all in ``results``, in order).

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> r = simulate(wl, replicas=2, routing="round_robin")
    >>> [ax.get_xlabel() for ax in plot_ttft_by_routing({("t", "round_robin"): r}).axes]
    ['TTFT (ms)', 'routing policy']
    """
    from inferasim import plots

    traces = list(traces) if traces is not None else list(dict.fromkeys(t for t, _ in results))
    policies = list(dict.fromkeys(r for _, r in results))
    with style.paper_style():
        fig, axes = _figure((style.DOUBLE[0], 2.6), ncols=len(traces) + 1)
        for ax, trace in zip(axes[0], traces, strict=False):
            runs = {routing: res for (t, routing), res in results.items() if t == trace}
            plots.plot_latency_cdf(runs, metric="ttft_ms", ax=ax, labels=label, quantile=0.99)
            ax.get_legend().remove()
            ax.set_title(f"{trace} trace")
        bars = axes[0, -1]
        width = 0.8 / max(len(traces), 1)
        x = np.arange(len(policies))
        hatches = ["", "///", "..."]
        for k, trace in enumerate(traces):
            p99 = [
                float(np.nanquantile(results[trace, p].requests["ttft_ms"], 0.99))
                if (trace, p) in results
                else np.nan
                for p in policies
            ]
            bars.bar(
                x + (k - (len(traces) - 1) / 2) * width,
                p99,
                width,
                color=[style.color(p, j) for j, p in enumerate(policies)],
                hatch=hatches[k % len(hatches)],
                edgecolor="white",
                linewidth=0.3,
                label=trace,
            )
        bars.set_yscale("log")
        bars.set_xticks(x, [str(j + 1) for j in range(len(policies))])
        bars.set_xlabel("routing policy")
        bars.set_ylabel("TTFT p99 (ms)")
        bars.set_title("TTFT p99 by policy")
        handles: list[Any] = [
            Line2D([], [], color=style.color(p, j), lw=2, label=f"{j + 1}: {label(p)}")
            for j, p in enumerate(policies)
        ]
        handles += [
            Patch(
                facecolor="0.75",
                edgecolor="white",
                hatch=hatches[k % len(hatches)],
                label=f"bars: {t}",
            )
            for k, t in enumerate(traces)
        ]
        handles.append(Line2D([], [], color="0.3", marker="o", ls="", ms=3.5, label="dot: p99"))
        fig.legend(handles=handles, loc="outside lower center", ncol=4)
    return fig


def plot_replica_load(
    results: Mapping[tuple[str, str], Any], trace: str = "conversation"
) -> Figure:
    """Requests per replica under each routing policy (one panel each).

    Examples
    --------
    >>> wl = Workload.from_synthetic(20, rate=5.0, input_len=512, output_len=8, seed=0)
    >>> r = simulate(wl, replicas=2, routing="round_robin")
    >>> len(plot_replica_load({("t", "round_robin"): r}, trace="t").axes)
    1
    """
    from inferasim import plots

    runs = {routing: res for (t, routing), res in results.items() if t == trace}
    with style.paper_style():
        fig, axes = _figure((style.DOUBLE[0], 2.0), ncols=len(runs), sharey=True)
        for j, (ax, (routing, res)) in enumerate(zip(axes[0], runs.items(), strict=True)):
            plots.plot_replica_load(res, ax=ax, color=style.color(routing, j))
            ax.set_title(_two_lines(label(routing)))
            if j:
                ax.set_ylabel("")
    return fig


def plot_teaching(table: pd.DataFrame, experiment: str) -> Figure:
    """One teaching experiment: hit ratio (left) and TTFT (right) against the knob.

    Examples
    --------
    >>> t = pd.DataFrame({"value": [1, 2], "infinite_token_hit_ratio": [0.5, 0.6],
    ...                   "token_hit_ratio": [0.4, 0.5], "ttft_p50_ms": [10, 9], "ttft_p99_ms": [40, 30]})
    >>> plot_teaching(t, "zipf").axes[1].get_ylabel()
    'TTFT (ms)'
    """
    exp = TEACHING[experiment]
    x = table["value"].to_numpy(dtype=float)
    with style.paper_style():
        fig, axes = _figure((style.DOUBLE[0], 2.2), ncols=2)
        a, b = axes[0]
        a.plot(
            x,
            table["infinite_token_hit_ratio"],
            ls=":",
            marker="o",
            color="0.3",
            label="infinite cache",
        )
        a.plot(
            x,
            table["token_hit_ratio"],
            marker="o",
            color=style.color("lru"),
            label=f"{TEACHING_KV_BLOCKS}-block LRU cache"
            if exp.knob != "kv_blocks"
            else "LRU cache",
        )
        a.set_ylabel("token hit ratio")
        a.yaxis.set_major_formatter(PercentFormatter(1.0))
        a.set_ylim(0, 1)
        a.legend(loc="best")
        b.plot(x, table["ttft_p50_ms"], marker="o", color=style.color("kv_cost"), label="p50")
        b.plot(x, table["ttft_p99_ms"], marker="s", color=style.color("cache_aware"), label="p99")
        b.set_ylabel("TTFT (ms)")
        b.set_yscale("log")
        b.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        b.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        b.yaxis.set_minor_formatter(NullFormatter())
        b.legend(loc="best")
        for ax in (a, b):
            ax.set_xlabel(exp.axis_label)
            if exp.log_x:
                ax.set_xscale("log")
                ax.xaxis.set_minor_locator(NullLocator())
            # Ticks at the swept values only.
            ax.set_xticks(x, [f"{v:g}" for v in x])
    return fig


# ------------------------------------------------------------------- registry
@dataclass(frozen=True)
class FigureSpec:
    """A figure of the pipeline: file stem, notebook, description, maker.

    ``make`` draws the figure from a :class:`Study`; :data:`FIGURES` lists
    them all.

    Examples
    --------
    >>> spec = FIGURES[0]
    >>> spec.name, spec.notebook
    ('trace_lengths', '01_trace_reuse_structure')
    >>> wl = Workload.from_requests([0, 1], [100, 300], [5, 7])
    >>> spec.make(Study(workloads={"t": wl})).axes[0].get_xlabel()
    'prompt length (tokens)'
    """

    name: str
    notebook: str
    description: str
    make: Callable[[Study], Figure]


def _teaching_spec(name: str, description: str) -> FigureSpec:
    return FigureSpec(
        f"teaching_{name}",
        "04_teaching_cache_reuse",
        description,
        lambda s: plot_teaching(s.teaching(name), name),
    )


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "trace_lengths",
        "01_trace_reuse_structure",
        "prompt and output length ECDFs per trace",
        lambda s: plot_trace_lengths(s.workloads),
    ),
    FigureSpec(
        "trace_arrivals",
        "01_trace_reuse_structure",
        "requests/s and prompt tokens/s over time",
        lambda s: plot_trace_arrivals(s.workloads),
    ),
    FigureSpec(
        "block_popularity",
        "01_trace_reuse_structure",
        "references per block by popularity rank",
        lambda s: plot_block_popularity(s.workloads),
    ),
    FigureSpec(
        "reuse_distance",
        "01_trace_reuse_structure",
        "CDF of block reuse distance in tokens",
        lambda s: plot_reuse_distance(s.workloads),
    ),
    FigureSpec(
        "prefix_structure",
        "01_trace_reuse_structure",
        "reused share and length of each prompt's prefix",
        lambda s: plot_prefix_structure(s.workloads),
    ),
    FigureSpec(
        "hit_rate_capacity",
        "01_trace_reuse_structure",
        "hit ratio vs capacity 1e4-1e8 tokens, LRU/FIFO/LFU/optimum, 3M marked",
        lambda s: plot_hit_rate_capacity(s.hit_rates, s.ceilings, s.node_cache),
    ),
    FigureSpec(
        "sizing_hit_rate",
        "02_cache_sizing",
        "the widget's hit-rate view: LRU curve of the conversation trace, 3M tokens marked",
        lambda s: s.sizing.hit_figure,
    ),
    FigureSpec(
        "sizing_simulation",
        "02_cache_sizing",
        "the widget's simulation view: TTFT and TPOT ECDFs, requests per replica",
        lambda s: s.sizing.sim_figure,
    ),
    FigureSpec(
        "local_vs_global",
        "03_routing_and_locality",
        "10 local 3M-token caches vs one pooled 30M cache",
        lambda s: plot_local_vs_global(s.local_global, s.routing_table),
    ),
    FigureSpec(
        "ttft_by_routing",
        "03_routing_and_locality",
        "TTFT ECDF per routing policy on both traces, p99 bars",
        lambda s: plot_ttft_by_routing(s.routing),
    ),
    FigureSpec(
        "replica_load",
        "03_routing_and_locality",
        "requests per replica per routing policy",
        lambda s: plot_replica_load(s.routing),
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
    study: Study | None = None,
    verbose: bool = False,
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
        Smaller simulator slices (default: :func:`ci_mode`).
    study : Study, optional
        Reuse already computed data.
    verbose : bool, default False
        Print each file as it is written.

    Returns
    -------
    dict of str to list of Path

    Examples
    --------
    >>> callable(make_figures)
    True
    >>> make_figures("figures")  # doctest: +SKIP
    {'trace_lengths': [PosixPath('figures/trace_lengths.pdf'), ...], ...}
    """
    specs = {s.name: s for s in FIGURES}
    wanted = list(specs) if names is None else list(names)
    unknown = [n for n in wanted if n not in specs]
    if unknown:
        raise ValueError(f"unknown figure(s) {unknown}; known: {list(specs)}")
    study = study if study is not None else Study(traces_dir, quick=quick)
    written: dict[str, list[Path]] = {}
    for name in wanted:
        start = time.perf_counter()
        fig = specs[name].make(study)
        written[name] = style.save_figure(fig, out_dir, name, formats=tuple(formats))
        if verbose:
            print(
                f"{name}: {', '.join(str(p) for p in written[name])} ({time.perf_counter() - start:.1f} s)"
            )
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
    parser.add_argument("--traces", default=None, help="folder holding the FAST'25 traces")
    parser.add_argument(
        "--only", nargs="+", default=None, metavar="NAME", help="figure names to make"
    )
    parser.add_argument(
        "--format", nargs="+", default=["pdf", "png"], dest="formats", help="file formats"
    )
    parser.add_argument(
        "--quick", action="store_true", default=None, help="smaller simulator slices (as under CI)"
    )
    parser.add_argument("--list", action="store_true", help="list the figures and exit")


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
    try:
        make_figures(
            args.out,
            args.traces,
            names=args.only,
            formats=args.formats,
            quick=args.quick,
            verbose=True,
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"inferasim figures: error: {exc}")
        return 2
    return 0
