"""ipywidgets controls for sizing a prefix KV cache, embeddable in any notebook.

:func:`cache_sizing` returns a :class:`CacheSizing` widget: a trace picker, a
log slider for the cache capacity (tokens), the eviction policy, and the
simulator's fleet settings (replicas, routing, load scale). The hit-rate view
updates on every change from a curve computed once per (trace, policy) in
one pass over the trace (:func:`inferasim.reuse.hit_rate_curve` on a dense
capacity grid), so moving the slider only moves a marker. The "simulate"
button runs :class:`inferasim.Simulator` and shows TTFT/TPOT distributions and
per-replica load.

Figures are plain matplotlib figures rendered to PNG into ``Image`` widgets,
so the widget works with any matplotlib backend, and headless: tests set
``widget.controls[...].value`` and read ``widget.marker.get_xdata()``,
``widget.hit_ratio``, ``widget.readout.value`` or ``widget.result``.
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from inferasim import style
from inferasim.plots import hit_rate_line as draw_hit_rate_curve
from inferasim.studies import policy_curve as hit_rate_curve
from inferasim.studies.settings import (
    CAPACITY_RANGE,
    NODE_CACHE_TOKENS,
    capacity_grid,
    curve_points,
)
from inferasim.style import label
from inferasim.workload import Workload

__all__ = ["CacheSizing", "cache_sizing"]

#: Policies offered by the widget (``opt`` is the offline optimum: reuse analysis only).
WIDGET_POLICIES: tuple[str, ...] = ("lru", "fifo", "lfu", "opt")
#: Routing policies offered by the widget.
WIDGET_ROUTINGS: tuple[str, ...] = (
    "round_robin",
    "random",
    "least_loaded",
    "cache_aware",
    "kv_cost",
)
#: Points per decade of the precomputed LRU hit-rate curves (one pass); the
#: replayed policies use :func:`inferasim.figures.curve_points`.
CURVE_POINTS_PER_DECADE: int = 24


def _png(fig: Figure, dpi: int = 96, *, relayout: bool = True) -> bytes:
    """Render ``fig`` to PNG bytes.

    With ``relayout=False`` the axes keep their last positions (constrained
    layout is skipped), which makes a redraw where only data moved about a
    third faster.
    """
    if relayout:
        fig.set_layout_engine("constrained")
    buf = io.BytesIO()
    # Ticks of cleared axes are created at draw time: draw in the paper style.
    with style.paper_style(**{"savefig.bbox": None}):
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    if relayout:
        fig.set_layout_engine("none")
    return buf.getvalue()


class CacheSizing(W.VBox):
    """Cache-sizing controls and live plots; build one with :func:`cache_sizing`.

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
        ``trace``, ``capacity`` (tokens, log slider), ``policy``,
        ``replicas``, ``routing``, ``load`` (arrival-rate multiplier) and the
        ``simulate`` button.
    hit_figure : matplotlib.figure.Figure
        The hit-rate view; ``curve_line`` and ``marker`` are its artists.
    readout : ipywidgets.HTML
        The hit ratio at the chosen capacity, in words.
    result : SimResult or None
        The last simulation, or None before the first click.
    sim_figure : matplotlib.figure.Figure
        TTFT and TPOT ECDFs and per-replica load of the last simulation.

    Examples
    --------
    >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
    >>> sorted(w.controls)
    ['capacity', 'load', 'policy', 'replicas', 'routing', 'simulate', 'trace']
    """

    def __init__(
        self,
        workloads: Mapping[str, Workload],
        *,
        capacity_tokens: float,
        policy: str,
        replicas: int,
        routing: str,
        load: float,
        sim_window_ms: float | None,
        policies: Sequence[str],
        routings: Sequence[str],
    ) -> None:
        self.workloads = dict(workloads)
        self.sim_window_ms = sim_window_ms
        self._curves: dict[tuple[str, str], pd.DataFrame] = {}
        self._ceilings: dict[str, float] = {}
        self._relayout = True
        self.result: Any = None
        self.result_settings: dict[str, Any] | None = None
        lo, hi = np.log10(CAPACITY_RANGE[0]), np.log10(CAPACITY_RANGE[1])
        self.controls: dict[str, W.Widget] = {
            "trace": W.Dropdown(options=list(self.workloads), description="trace"),
            "capacity": W.FloatLogSlider(
                value=float(capacity_tokens),
                base=10,
                min=lo,
                max=hi,
                step=0.05,
                description="cache (tokens)",
                readout_format=".3s",
                continuous_update=True,
                style={"description_width": "initial"},
            ),
            "policy": W.Dropdown(
                options=[(label(p), p) for p in policies], value=policy, description="eviction"
            ),
            "replicas": W.IntSlider(value=int(replicas), min=1, max=32, description="replicas"),
            "routing": W.Dropdown(
                options=[(label(r), r) for r in routings], value=routing, description="routing"
            ),
            "load": W.FloatLogSlider(
                value=float(load),
                base=2,
                min=-3,
                max=3,
                step=0.25,
                description="load x",
                readout_format=".3g",
            ),
            "simulate": W.Button(description="simulate", button_style="primary", icon="play"),
        }
        self.readout = W.HTML()
        self.progress = W.FloatProgress(
            value=0.0, min=0.0, max=1.0, description="", layout={"width": "200px"}
        )
        self.status = W.HTML("press <b>simulate</b> to run the fleet simulator")
        self.hit_image = W.Image(format="png")
        self.sim_image = W.Image(format="png")
        self.sim_table = W.HTML()
        self._build_hit_figure()
        self._build_sim_figure()

        c = self.controls
        for name in ("trace", "policy"):
            c[name].observe(self._on_curve_change, names="value")
        c["capacity"].observe(self._on_capacity_change, names="value")
        for name in ("replicas", "routing", "load", "capacity", "policy", "trace"):
            c[name].observe(self._on_sim_setting_change, names="value")
        c["simulate"].on_click(lambda _button: self.simulate())

        analysis = W.HBox([c["trace"], c["policy"], c["capacity"]])
        fleet = W.HBox([c["replicas"], c["routing"], c["load"]])
        self.sim_progress = W.Output()
        run = W.HBox([c["simulate"], self.progress, self.status, self.sim_progress])
        super().__init__(
            [analysis, self.readout, self.hit_image, fleet, run, self.sim_image, self.sim_table]
        )
        self._on_curve_change()

    # ------------------------------------------------------------- hit rate
    @property
    def workload(self) -> Workload:
        """The selected trace.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> len(w.workload)
        200
        """
        return self.workloads[self.controls["trace"].value]

    def curve(self, trace: str | None = None, policy: str | None = None) -> pd.DataFrame:
        """The hit-rate curve of ``trace`` under ``policy`` (computed once, then cached).

        Columns as :func:`inferasim.reuse.hit_rate_curve`: ``capacity_blocks``,
        ``capacity_tokens``, ``block_hit_ratio``, ``token_hit_ratio``.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> bool(w.curve(policy="lru")["capacity_tokens"].min() <= 1e4)
        True
        """
        trace = trace or self.controls["trace"].value
        policy = policy or self.controls["policy"].value
        key = (trace, policy)
        if key not in self._curves:
            wl = self.workloads[trace]
            per_decade = CURVE_POINTS_PER_DECADE if policy == "lru" else curve_points(policy)
            # Start a little below the slider's minimum so it is inside the grid.
            grid = capacity_grid(
                CAPACITY_RANGE[0] * 0.9,
                CAPACITY_RANGE[1],
                per_decade=per_decade,
                block_size=wl.block_size,
            )
            self._curves[key] = hit_rate_curve(wl, grid, policy)
        return self._curves[key]

    @property
    def capacity_tokens(self) -> float:
        """The chosen capacity in tokens.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> w.capacity_tokens
        100000.0
        """
        return float(self.controls["capacity"].value)

    @property
    def hit_ratio(self) -> float:
        """Token hit ratio at the chosen capacity, read off the cached curve.

        The capacity rounds down to whole blocks; between the curve's points
        (24 per decade for LRU, 4 for the replayed policies) the ratio is
        interpolated linearly in log capacity.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e4)
        >>> small = w.hit_ratio
        >>> w.controls["capacity"].value = 1e6
        >>> w.hit_ratio > small
        True
        """
        curve = self.curve()
        blocks = max(self.capacity_tokens // self.workload.block_size, 1)
        return float(
            np.interp(
                np.log10(blocks),
                np.log10(curve["capacity_blocks"].to_numpy(dtype=float)),
                curve["token_hit_ratio"].to_numpy(dtype=float),
            )
        )

    @property
    def ceiling(self) -> float:
        """Token hit ratio of an infinite cache on the selected trace.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> bool(w.ceiling == w.workload.describe()["infinite_token_hit_ratio"])
        True
        """
        trace = self.controls["trace"].value
        if trace not in self._ceilings:
            self._ceilings[trace] = float(self.workload.describe()["infinite_token_hit_ratio"])
        return self._ceilings[trace]

    def _build_hit_figure(self) -> None:
        with style.paper_style():
            fig = Figure(figsize=(style.DOUBLE[0], 2.6), layout="constrained")
            ax = fig.add_subplot()
            self.curve_line = draw_hit_rate_curve(
                ax,
                pd.DataFrame({"capacity_tokens": [1.0], "token_hit_ratio": [0.0]}),
                color=style.color("lru"),
            )
            self.ceiling_line = ax.axhline(0.0, color="0.3", ls=":", lw=0.9, label="infinite cache")
            (self.marker,) = ax.plot(
                [np.nan],
                [np.nan],
                "o",
                ms=7,
                mfc="white",
                mew=1.6,
                color=style.color("cache_aware"),
                zorder=5,
            )
            self.node_line = ax.axvline(NODE_CACHE_TOKENS, color="0.6", ls="--", lw=0.7)
            ax.text(
                NODE_CACHE_TOKENS / 1.08,
                0.02,
                "3M tokens\n(one node's DRAM)",
                fontsize=6.5,
                color="0.4",
                ha="right",
            )
            ax.set_xlim(*CAPACITY_RANGE)
        self.hit_figure, self.hit_ax = fig, ax

    def _on_curve_change(self, _change: Any = None) -> None:
        curve = self.curve()
        policy = self.controls["policy"].value
        self.curve_line.set_data(
            curve["capacity_tokens"].to_numpy(dtype=float),
            curve["token_hit_ratio"].to_numpy(dtype=float),
        )
        self.curve_line.set_color(style.color(policy))
        self.curve_line.set_label(label(policy))
        ceiling = self.ceiling
        self.ceiling_line.set_ydata([ceiling, ceiling])
        with style.paper_style():
            self.hit_ax.set_ylim(0, min(1.0, ceiling + 0.1))
            self.hit_ax.set_title(f"{self.controls['trace'].value}: token hit ratio of one cache")
            self.hit_ax.legend(loc="lower right")
        self._relayout = True  # titles or limits changed: lay the figure out again
        self._on_capacity_change()

    def _on_capacity_change(self, _change: Any = None) -> None:
        cap, hit = self.capacity_tokens, self.hit_ratio
        self.marker.set_data([cap], [hit])
        ceiling = self.ceiling
        block = self.workload.block_size
        share = hit / ceiling if ceiling else float("nan")
        self.readout.value = (
            f"<b>{label(self.controls['policy'].value)}</b> cache of <b>{cap:,.0f}</b> tokens "
            f"({int(cap // block):,} blocks of {block}): token hit ratio <b>{hit:.1%}</b>, "
            f"{share:.0%} of the {ceiling:.1%} an infinite cache reaches"
        )
        self.hit_image.value = _png(self.hit_figure, relayout=self._relayout)
        self._relayout = False

    # ------------------------------------------------------------- simulation
    def settings(self) -> dict[str, Any]:
        """The simulator settings the controls currently describe.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> w.settings()["kv_blocks"], w.settings()["routing"]
        (195, 'kv_cost')
        """
        c = self.controls
        return {
            "trace": c["trace"].value,
            "replicas": int(c["replicas"].value),
            "routing": c["routing"].value,
            "eviction": c["policy"].value,
            "kv_blocks": max(int(self.capacity_tokens // self.workload.block_size), 1),
            "load": float(c["load"].value),
        }

    def _on_sim_setting_change(self, _change: Any = None) -> None:
        if self.result is not None and self.result_settings != self.settings():
            self.status.value = "settings changed: press <b>simulate</b> to update the plots below"

    def simulation_workload(self) -> Workload:
        """The selected trace, cut to ``sim_window_ms`` and compressed by the load factor.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> w.controls["load"].value = 2.0
        >>> bool(w.simulation_workload().arrival_ms[-1] == w.workload.arrival_ms[-1] / 2)
        True
        """
        wl = self.workload
        if self.sim_window_ms is not None:
            wl = wl.window(0, self.sim_window_ms)
        return wl.scale_time(1.0 / float(self.controls["load"].value))

    def simulate(self) -> Any:
        """Run the simulator with the current settings and redraw the lower plots.

        Returns
        -------
        SimResult

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5, replicas=2)
        >>> len(w.simulate().requests)
        200
        """
        from inferasim.sim import Simulator

        s = self.settings()
        eviction = s["eviction"] if s["eviction"] in _sim_evictions() else "lru"
        wl = self.simulation_workload()
        button = self.controls["simulate"]
        button.disabled = True
        self.progress.bar_style = "info"
        self.progress.value = 0.1
        self.status.value = f"simulating {len(wl):,} requests on {s['replicas']} replicas ..."
        start = time.perf_counter()
        # In a live kernel the simulator's own per-request bar (tqdm, shown on
        # runs over a second) goes into this Output; headless, no bar.
        live = _in_kernel()
        try:
            sim = Simulator(
                replicas=s["replicas"],
                routing=s["routing"],
                eviction=eviction,
                kv_blocks=s["kv_blocks"],
                seed=0,
                progress=live,
            )
            if live:
                with self.sim_progress:
                    self.sim_progress.clear_output()
                    self.result = sim.run(wl)
                self.sim_progress.clear_output()
            else:
                self.result = sim.run(wl)
        except Exception as exc:
            self.progress.bar_style = "danger"
            self.status.value = f"simulation failed: {exc}"
            raise
        finally:
            button.disabled = False
        elapsed = time.perf_counter() - start
        self.result_settings = s
        self.progress.value = 1.0
        self.progress.bar_style = "success"
        note = (
            ""
            if eviction == s["eviction"]
            else f" (the simulator has no {s['eviction']} eviction: used LRU)"
        )
        self.status.value = f"simulated {len(wl):,} requests in {elapsed:.1f} s{note}"
        self._draw_sim()
        return self.result

    def _build_sim_figure(self) -> None:
        with style.paper_style():
            fig = Figure(figsize=(style.DOUBLE[0], 2.3), layout="constrained")
            self.sim_axes = fig.subplots(1, 3)
        self.sim_figure = fig

    def summary(self) -> pd.DataFrame:
        """Latency percentiles (ms) and hit ratio of the last simulation.

        Returns
        -------
        pandas.DataFrame
            Index ``ttft_ms``, ``tpot_ms``, ``e2e_ms``; columns ``p50``,
            ``p90``, ``p99``.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> _ = w.simulate()
        >>> w.summary().columns.tolist()
        ['p50', 'p90', 'p99']
        """
        if self.result is None:
            raise RuntimeError("no simulation yet: call simulate() first")
        req = self.result.requests
        cols = ["ttft_ms", "tpot_ms", "e2e_ms"]
        q = req[cols].quantile([0.5, 0.9, 0.99]).T
        q.columns = ["p50", "p90", "p99"]
        return q

    def _draw_sim(self) -> None:
        from inferasim import plots

        req = self.result.requests
        routing = self.result_settings["routing"]
        with style.paper_style():
            for ax in self.sim_axes:
                ax.clear()
            a, b, c = self.sim_axes
            q = self.summary()["p99"]
            for ax, metric in ((a, "ttft_ms"), (b, "tpot_ms")):
                plots.plot_latency_cdf({routing: req}, metric, ax=ax, quantile=0.99)
                ax.get_legend().remove()  # one run: the title gives its p99 (the dot)
                ax.set_title(f"{metric[:4].upper()} p99: {q[metric]:,.0f} ms")
            plots.plot_replica_load(self.result, ax=c, color=style.color(routing))
            c.set_title("requests per replica")
        self.sim_image.value = _png(self.sim_figure)
        hit = float(req["cached_tokens"].sum() / req["input_len"].sum())
        table = self.summary().map(lambda v: f"{v:,.1f}")
        self.sim_table.value = (
            f"<p>simulated token hit ratio <b>{hit:.1%}</b> "
            f"(the reuse analysis above says {self.hit_ratio:.1%} for one cache of this size)</p>"
            + table.to_html()
        )


def _demo_workload() -> Workload:
    """A small seeded prefix-pool workload for the examples."""
    return Workload.from_synthetic(
        200, rate=20.0, input_len=512, output_len=8, num_prefixes=8, prefix_len=1024, seed=0
    )


def _in_kernel() -> bool:
    """True inside a running IPython kernel (where widget output is shown)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _sim_evictions() -> tuple[str, ...]:
    """Eviction policies the simulator accepts."""
    try:
        from inferasim.sim.cache import EVICTION_POLICIES
    except ImportError:  # pragma: no cover - older simulator
        return ("lru",)
    return tuple(EVICTION_POLICIES)


def cache_sizing(
    workloads: Workload | Mapping[str, Workload],
    *,
    capacity_tokens: float = NODE_CACHE_TOKENS,
    policy: str = "lru",
    replicas: int = 4,
    routing: str = "kv_cost",
    load: float = 1.0,
    sim_window_ms: float | None = None,
    policies: Sequence[str] = WIDGET_POLICIES,
    routings: Sequence[str] = WIDGET_ROUTINGS,
) -> CacheSizing:
    """Cache-sizing widget: hit rate vs capacity live, fleet simulation on demand.

    Parameters
    ----------
    workloads : Workload or mapping of name to Workload
        The traces to choose from.
    capacity_tokens : float, default 3e6
        Initial cache capacity per replica (tokens), between 1e4 and 1e8.
    policy : str, default "lru"
        Initial eviction policy (one of ``policies``).
    replicas : int, default 4
    routing : str, default "kv_cost"
    load : float, default 1.0
        Arrival-rate multiplier: 2 replays the trace twice as fast.
    sim_window_ms : float, optional
        Simulate only the first ``sim_window_ms`` of the trace (quick runs).
    policies, routings : sequence of str
        Options of the eviction and routing pickers.

    Returns
    -------
    CacheSizing
        An ``ipywidgets.VBox``; display it, or drive it from code.

    Examples
    --------
    >>> wl = Workload.from_synthetic(200, rate=20.0, input_len=1024, output_len=16,
    ...                              num_prefixes=8, prefix_len=2048, seed=0)
    >>> w = cache_sizing(wl, capacity_tokens=1e5)
    >>> before = w.hit_ratio
    >>> w.controls["capacity"].value = 1e4
    >>> w.hit_ratio < before
    True
    """
    if isinstance(workloads, Workload):
        workloads = {workloads.source or "workload": workloads}
    if not workloads:
        raise ValueError("cache_sizing needs at least one workload")
    for name, wl in workloads.items():
        if not isinstance(wl, Workload):
            raise TypeError(f"workload {name!r} is a {type(wl).__name__}, not a Workload")
        if not wl.has_hash_ids:
            raise ValueError(
                f"workload {name!r} has no hash ids: there is no reuse to size a cache for"
            )
    if policy not in policies:
        raise ValueError(f"policy {policy!r} is not one of {list(policies)}")
    if routing not in routings:
        raise ValueError(f"routing {routing!r} is not one of {list(routings)}")
    if not CAPACITY_RANGE[0] <= capacity_tokens <= CAPACITY_RANGE[1]:
        raise ValueError(
            f"capacity_tokens must be in [{CAPACITY_RANGE[0]:g}, {CAPACITY_RANGE[1]:g}], got {capacity_tokens!r}"
        )
    if not load > 0:
        raise ValueError(f"load must be positive, got {load!r}")
    return CacheSizing(
        workloads,
        capacity_tokens=capacity_tokens,
        policy=policy,
        replicas=replicas,
        routing=routing,
        load=load,
        sim_window_ms=sim_window_ms,
        policies=policies,
        routings=routings,
    )
