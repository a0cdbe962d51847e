"""ipywidgets controls for sizing a prefix KV cache, embeddable in any notebook.

:func:`cache_sizing` returns a :class:`CacheSizing` widget: a trace picker, a
log slider for the cache capacity (tokens), the eviction policy, and the
simulator's fleet settings (replicas, routing, load scale). The hit-rate view
updates on every change from a curve computed once per (trace, policy) in
one pass over the trace (:func:`inferasim.reuse.hit_rate_curve` on a dense
capacity grid), so moving the slider only moves a marker. The "simulate"
button runs :class:`inferasim.Simulator` and shows TTFT/TPOT distributions and
per-replica load in the widget's own output area: a cell that showed an
earlier result (:meth:`CacheSizing.snapshot`) keeps showing it.

The capacity slider steps through round capacities (1, 1.5, 2, 3, 4, 5 and
7 per decade, from 10k to 100M tokens), so a capacity is exactly what the
readout says (3e6 stays 3,000,000); a capacity set from code that is not
on the list is added to it.

Figures are plain matplotlib figures rendered to PNG into ``Image`` widgets,
so the widget works with any matplotlib backend, and headless: tests set
``widget.controls[...].value`` and read ``widget.marker.get_xdata()``,
``widget.hit_ratio``, ``widget.readout.value`` or ``widget.result``.
``widget.capacity_tokens = x`` sets any capacity in range.
"""

from __future__ import annotations

import base64
import html
import io
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from inferasim import style
from inferasim._format import count_noun
from inferasim._validate import choice, duration_ms, rate, real
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

__all__ = [
    "CacheSizing",
    "TieredCacheSizing",
    "cache_sizing",
    "capacity_options",
    "tier_shares",
    "tiered_cache_sizing",
    "TIER_SYSTEMS",
]

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
#: Round capacities per decade offered by the capacity slider (mantissas).
CAPACITY_STEPS: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)
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
    style.group_thousands(fig)
    buf = io.BytesIO()
    # Ticks of cleared axes are created at draw time: draw in the paper style.
    with style.paper_style(**{"savefig.bbox": None}):
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    if relayout:
        fig.set_layout_engine("none")
    return buf.getvalue()


def capacity_options(low: float = CAPACITY_RANGE[0], high: float = CAPACITY_RANGE[1]) -> list[float]:
    """The slider's capacities (tokens): :data:`CAPACITY_STEPS` in every decade from ``low`` to ``high``.

    Examples
    --------
    >>> capacity_options(1e4, 1e5)
    [10000.0, 15000.0, 20000.0, 30000.0, 40000.0, 50000.0, 70000.0, 100000.0]
    """
    out = []
    for exp in range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1):
        for m in CAPACITY_STEPS:
            v = float(m * 10**exp)
            if low <= v <= high:
                out.append(v)
    return out


def _tokens_label(tokens: float) -> str:
    """A capacity as the slider shows it: ``3M``, ``150k``, ``1.5M``, ``12,345``."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if tokens >= scale and (tokens / scale * 10).is_integer():
            return f"{tokens / scale:g}{unit}"
    return f"{tokens:,.0f}"


def _whole_blocks(tokens: float, block_size: int) -> int:
    """``Simulator(kv_tokens=...)`` for a capacity: whole blocks of it in tokens, at least one.

    Examples
    --------
    >>> _whole_blocks(3e6, 512), _whole_blocks(100, 512)
    (2999808, 512)
    """
    return max(int(tokens // block_size), 1) * block_size


class CacheSizing(W.VBox):
    """Cache-sizing controls and live plots; build one with :func:`cache_sizing`.

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
        ``trace``, ``capacity`` (tokens per replica: a slider over round
        capacities, values exact), ``policy``,
        ``replicas``, ``routing``, ``load`` (arrival-rate multiplier) and the
        ``simulate`` button.
    hit_figure : matplotlib.figure.Figure
        The hit-rate view; ``curve_line`` and ``marker`` are its artists.
    readout : ipywidgets.HTML
        The hit ratio at the chosen capacity, each number named.
    result : SimResult or None
        The last simulation, or None before the first click.
    sim_figure : matplotlib.figure.Figure
        TTFT and TPOT ECDFs and per-replica load of the last simulation.
    sim_output : ipywidgets.Output
        The widget's own output area holding the last simulation's plots and
        text (replaced on every run; nothing outside the widget changes).
    sim_text : str
        The last simulation's numbers in words (HTML), as shown in
        ``sim_output``.

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
        self.sim_png: bytes = b""
        self.sim_text: str = ""
        options = capacity_options()
        if float(capacity_tokens) not in options:
            options = sorted([*options, float(capacity_tokens)])
        self.controls: dict[str, W.Widget] = {
            "trace": W.Dropdown(options=list(self.workloads), description="trace"),
            "capacity": W.SelectionSlider(
                options=[(_tokens_label(v), v) for v in options],
                value=float(capacity_tokens),
                description="cache per replica (tokens)",
                # One redraw when the handle is released: the plot (a PNG) and
                # the readout always show the same capacity.
                continuous_update=False,
                style={"description_width": "initial"},
                layout={"width": "420px"},
            ),
            "policy": W.Dropdown(
                options=[(label(p), p) for p in policies], value=policy, description="eviction"
            ),
            "replicas": _replicas_slider(replicas),
            "routing": W.Dropdown(
                options=[(label(r), r) for r in routings], value=routing, description="routing"
            ),
            "load": W.FloatLogSlider(
                value=float(load),
                base=2,
                # the slider spans 1/8 to 8, widened to hold the load given
                min=min(-3, math.floor(math.log2(load))),
                max=max(3, math.ceil(math.log2(load))),
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
        self.sim_output = W.Output()
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
            [analysis, self.readout, self.hit_image, fleet, run, self.sim_output]
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
            if policy == "lru":
                # one pass gives every capacity: the slider's stops too, so the
                # readout there is exact (the notebook's hit_rate_curve number)
                stops = [max(int(c // wl.block_size), 1) for c in capacity_options()]
                grid = np.union1d(grid, stops)
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

    @capacity_tokens.setter
    def capacity_tokens(self, tokens: float) -> None:
        """Set the capacity (tokens), adding it to the slider's stops if needed."""
        tokens = float(tokens)
        if not CAPACITY_RANGE[0] <= tokens <= CAPACITY_RANGE[1]:
            raise ValueError(
                f"capacity_tokens must be in [{CAPACITY_RANGE[0]:g}, {CAPACITY_RANGE[1]:g}], got {tokens!r}"
            )
        slider = self.controls["capacity"]
        values = [v for _, v in slider.options]
        if tokens not in values:
            current = slider.value
            with slider.hold_trait_notifications():
                slider.options = [(_tokens_label(v), v) for v in sorted([*values, tokens])]
                slider.value = current
        slider.value = tokens

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
                clip_on=False,  # at either end of the slider the ring stays whole
            )
            self.node_line = ax.axvline(NODE_CACHE_TOKENS, color="0.6", ls="--", lw=0.7)
            # At the top, left of the line: above the curve, which is low at 3M tokens
            # on every trace (the ceiling line sits below the top margin).
            ax.text(
                NODE_CACHE_TOKENS / 1.08,
                0.985,
                "3M tokens: one node's DRAM",
                fontsize=6.5,
                color="0.4",
                ha="right",
                va="top",
                transform=ax.get_xaxis_transform(),
            )
            # a little room beyond the slider's ends, so the ring is never cut
            ax.set_xlim(CAPACITY_RANGE[0] / 1.25, CAPACITY_RANGE[1] * 1.25)
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
            self.hit_ax.set_ylim(0, min(1.0, ceiling + 0.12))  # room for the note above the ceiling
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
        on_grid = max(int(cap // block), 1) in set(self.curve()["capacity_blocks"].tolist())
        how = "reuse analysis" if on_grid else "reuse analysis, interpolated between its capacities"
        self.readout.value = (
            f"one <b>{label(self.controls['policy'].value)}</b> cache of <b>{cap:,.0f}</b> tokens "
            f"({int(cap // block):,} blocks of {block} tokens), replaying the whole "
            f"{self.controls['trace'].value} trace: token hit ratio <b>{hit:.1%}</b> "
            f"({how}); an infinite cache: {ceiling:.1%}, so this size gets "
            f"{share:.0%} of the reuse there is"
        )
        self.hit_image.value = _png(self.hit_figure, relayout=self._relayout)
        self._relayout = False

    # ------------------------------------------------------------- simulation
    def settings(self) -> dict[str, Any]:
        """The simulator settings the controls currently describe.

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5)
        >>> w.settings()["kv_tokens"], w.settings()["routing"]  # 195 whole blocks of 512 tokens
        (99840, 'kv_cost')
        """
        c = self.controls
        return {
            "trace": c["trace"].value,
            "replicas": int(c["replicas"].value),
            "routing": c["routing"].value,
            "eviction": c["policy"].value,
            "kv_tokens": _whole_blocks(self.capacity_tokens, self.workload.block_size),
            "load": float(c["load"].value),
        }

    def _on_sim_setting_change(self, _change: Any = None) -> None:
        try:
            _checked_load(self.controls["load"].value, {"": self.workload})
        except ValueError as exc:  # a load set from code (NaN, 0): say so now
            self.status.value = _refusal(exc)
            return
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
        trace = self.controls["trace"].value
        wl = self.workload
        load = _checked_load(self.controls["load"].value, {trace: wl})
        if self.sim_window_ms is not None:
            wl = wl.window(0, self.sim_window_ms)
        return wl.scale_time(1.0 / load)

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
        try:
            wl = self.simulation_workload()
        except ValueError as exc:  # a control set from code to a value the widget refuses
            self.progress.bar_style = "danger"
            self.status.value = _refusal(exc)
            raise
        button = self.controls["simulate"]
        button.disabled = True
        self.progress.bar_style = "info"
        self.progress.value = 0.1
        self.status.value = f"simulating {count_noun(len(wl), 'request')} on {count_noun(s['replicas'], 'replica')} ..."
        start = time.perf_counter()
        # In a live kernel the simulator's own per-request bar (tqdm, shown on
        # runs over a second) goes into this Output; headless, no bar.
        live = _in_kernel()
        try:
            sim = Simulator(
                replicas=s["replicas"],
                routing=s["routing"],
                eviction=eviction,
                kv_tokens=s["kv_tokens"],
                seed=0,
            )
            if live:
                with self.sim_progress:
                    self.sim_progress.clear_output()
                    self.result = sim.run(wl, progress=True)
                self.sim_progress.clear_output()
            else:
                self.result = sim.run(wl, progress=False)
        except Exception as exc:
            self.progress.bar_style = "danger"
            self.status.value = f"simulation failed: {html.escape(str(exc))}"
            raise
        finally:
            button.disabled = False
        elapsed = time.perf_counter() - start
        self.result_settings = s
        self._sim_run = (wl, eviction)  # what the simulator actually replayed, and how
        self.progress.value = 1.0
        self.progress.bar_style = "success"
        note = (
            ""
            if eviction == s["eviction"]
            else f" (the simulator has no {s['eviction']} eviction: used LRU)"
        )
        self.status.value = f"simulated {len(wl):,} requests in {elapsed:.1f} s{note}" + _rejected_status(
            self.result.requests
        )
        self._draw_sim()
        return self.result

    def _build_sim_figure(self) -> None:
        with style.paper_style():
            fig = Figure(figsize=(style.DOUBLE[0], 2.3), layout="constrained")
            self.sim_axes = fig.subplots(1, 3)
        self.sim_figure = fig

    def summary(self) -> pd.DataFrame:
        """Latency percentiles (ms) of the last simulation, over its finished requests.

        Rejected requests have no latency: :attr:`status` and the text under
        the plots say how many there were and why.

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
        req = req[req["status"] == "finished"]
        cols = ["ttft_ms", "tpot_ms", "e2e_ms"]
        q = req[cols].quantile([0.5, 0.9, 0.99]).T
        q.columns = ["p50", "p90", "p99"]
        return q

    def _draw_sim(self) -> None:
        from inferasim import plots

        req = self.result.requests
        s = self.result_settings
        routing = s["routing"]
        with style.paper_style():
            for ax in self.sim_axes:
                ax.clear()
            a, b, c = self.sim_axes
            q = self.summary()["p99"]
            finished = int((req["status"] == "finished").sum())
            for ax, metric in ((a, "ttft_ms"), (b, "tpot_ms")):
                if not finished:  # nothing to draw: say so where the curve would be
                    ax.text(0.5, 0.5, "no request finished", ha="center", va="center",
                            transform=ax.transAxes)
                    ax.set_title(f"{metric[:4].upper()}: no latencies")
                    continue
                plots.plot_latency_cdf({routing: req}, metric, ax=ax, quantile=0.99)
                ax.get_legend().remove()  # one run: the title gives its p99 (the dot)
                ax.set_title(f"{metric[:4].upper()} p99 {style.duration_text(q[metric])}")
            plots.plot_replica_load(self.result, ax=c, color=style.color(routing))
            c.set_title("requests per replica")
            rejected = int((req["status"] == "rejected").sum())
            self.sim_figure.suptitle(
                f"{len(req):,} requests: {finished:,} finished (the latencies), {rejected:,} rejected",
                fontsize=8,
                color="black" if not rejected else style.OKABE_ITO["vermillion"],
            )
        self.sim_png = _png(self.sim_figure)
        self.sim_text = self._sim_text()
        table = self.summary().map(lambda v: f"{v:,.1f}").rename_axis(
            f"latency (ms) of the {finished:,} finished requests"
        )
        # Replace the widget's own output area: nothing shown elsewhere changes.
        self.sim_output.outputs = (
            _display_data({"image/png": base64.b64encode(self.sim_png).decode("ascii"),
                           "text/plain": "<simulation plots>"}),
            _display_data({"text/html": self.sim_text + table.to_html(),
                           "text/plain": self.sim_text}),
        )

    def _sim_text(self) -> str:
        """The last simulation's numbers, each named, next to the reuse analysis of the same run."""
        from inferasim.reuse import hit_rate_curve as reuse_curve

        s = self.result_settings
        req = self.result.requests
        wl, eviction = self._sim_run
        routed = req[req["replica"] >= 0]
        hit = float(routed["cached_tokens"].sum() / max(int(routed["input_len"].sum()), 1))
        cap = s["kv_tokens"]
        blocks = [cap // wl.block_size]
        one = float(reuse_curve(wl, blocks, policy=eviction)["token_hit_ratio"].iloc[0])
        whole = float(
            reuse_curve(wl, blocks, policy=eviction, full_blocks_only=True)["token_hit_ratio"].iloc[0]
        )
        scope = (
            f"the first {self.sim_window_ms / 60_000:g} min of {s['trace']}"
            if self.sim_window_ms is not None
            else f"the whole {s['trace']} trace"
        )
        from inferasim.sim.summary import rejection_note

        rejected = rejection_note(req)
        over = f" over the {len(routed):,} routed requests" if rejected else ""
        return (
            f"<p>simulated {len(req):,} requests ({scope}, load x{s['load']:g}) on "
            f"<b>{s['replicas']}</b> replicas, {label(s['routing'])} routing, "
            f"{label(eviction)} cache of {cap:,} tokens each: fleet token hit ratio "
            f"<b>{hit:.1%}</b>{over}. "
            + (f"<b>{rejected[0].upper() + rejected[1:]}</b>. " if rejected else "")
            + f"One {label(eviction)} cache of that size over the same "
            f"requests (reuse analysis, as the readout above): {one:.1%}, or {whole:.1%} caching "
            f"whole blocks only as the simulator does; the simulated fleet comes close to that "
            f"when the cache is large and requests do not overlap (its running requests share "
            f"the cache's memory, and {s['replicas']} replicas each see part of the trace).</p>"
        )

    def snapshot(self) -> Any:
        """A static copy of the last simulation's plots, for showing in a notebook cell.

        Unlike the widget, it never changes when the widget simulates again.

        Returns
        -------
        IPython.display.Image

        Examples
        --------
        >>> w = cache_sizing({"demo": _demo_workload()}, capacity_tokens=1e5, replicas=2)
        >>> _ = w.simulate()
        >>> w.snapshot().data[:4] == b"\\x89PNG"
        True
        """
        from IPython.display import Image

        if self.result is None:
            raise RuntimeError("no simulation yet: call simulate() first")
        return Image(data=self.sim_png, format="png")


def _rejected_status(requests: pd.DataFrame) -> str:
    """The status line's note on rejected requests (empty when none was).

    Examples
    --------
    >>> req = pd.DataFrame({"status": ["rejected", "finished"],
    ...                     "reason": ["needs 7 KV blocks for 100 + 8 tokens; a replica holds 5", ""]})
    >>> _rejected_status(req)
    ": <b>1 rejected</b> (prompt + output longer than a replica's KV memory of 5 blocks); latencies are of the 1 finished"
    """
    from inferasim.sim.summary import reasons_text, rejection_reasons

    reasons = rejection_reasons(requests)
    if reasons.empty:
        return ""
    why = reasons_text(reasons)
    finished = int((requests["status"] == "finished").sum())
    return (
        f": <b>{int(reasons.sum()):,} rejected</b> ({why}); latencies are of the {finished:,} finished"
    )



# ------------------------------------------------------- argument checks
def _checked_workloads(workloads: Any, who: str) -> dict[str, Workload]:
    """``workloads`` as a name -> Workload dict, each with hash ids and requests."""
    if isinstance(workloads, Workload):
        workloads = {workloads.source or "workload": workloads}
    if not isinstance(workloads, Mapping):
        raise TypeError(
            f"workloads must be a Workload or a mapping of name to Workload, got {type(workloads).__name__}"
        )
    if not workloads:
        raise ValueError(f"{who} needs at least one workload")
    for name, wl in workloads.items():
        if not isinstance(wl, Workload):
            raise TypeError(f"workload {name!r} is a {type(wl).__name__}, not a Workload")
        if not len(wl):
            raise ValueError(f"workload {name!r} has no requests")
        if not wl.has_hash_ids:
            raise ValueError(
                f"workload {name!r} has no hash ids: there is no reuse to size a cache for"
            )
    return dict(workloads)


def _checked_window(sim_window_ms: Any, workloads: Mapping[str, Workload]) -> float | None:
    """``sim_window_ms`` checked as every duration, and holding a request of every trace.

    Examples
    --------
    >>> _checked_window(0, {"demo": _demo_workload()})
    Traceback (most recent call last):
    ...
    ValueError: sim_window_ms must be a finite number > 0 and <= 2**43 (ms), got 0
    >>> late = Workload.from_requests([1000.0], [1024], [4], hash_ids=[[1, 2]], block_size=512)
    >>> _checked_window(500, {"late": late})
    Traceback (most recent call last):
    ...
    ValueError: sim_window_ms=500: workload 'late' has no request in its first 500 ms (its first arrives at 1,000.0 ms)
    """
    if sim_window_ms is None:
        return None
    window = duration_ms(sim_window_ms, "sim_window_ms", positive=True)
    for name, wl in workloads.items():
        if not len(wl.window(0, window)):
            raise ValueError(
                f"sim_window_ms={sim_window_ms!r}: workload {name!r} has no request in its first "
                f"{window:g} ms (its first arrives at {float(wl.arrival_ms.min()):,.1f} ms)"
            )
    return window


def _checked_load(load: Any, workloads: Mapping[str, Workload]) -> float:
    """``load`` as a rate, not so low that a trace's arrivals would pass 2**43 ms.

    Examples
    --------
    >>> _checked_load(float("nan"), {"demo": _demo_workload()})
    Traceback (most recent call last):
    ...
    ValueError: load must be a finite number > 0, got nan
    """
    from inferasim.plan import _load_limits

    value = rate(load, "load")
    for name, wl in workloads.items():
        lowest, _ = _load_limits(wl)
        if value < lowest:
            raise ValueError(
                f"load must be >= {lowest:.4g} for workload {name!r} (a lower load puts its "
                f"arrivals past 2**43 ms), got {load!r}"
            )
    return value


def _refusal(exc: Exception) -> str:
    """The status line for a value the widget refuses: not simulated, and why.

    Examples
    --------
    >>> _refusal(ValueError("load must be a finite number > 0, got nan"))
    'not simulated: load must be a finite number &gt; 0, got nan'
    """
    return f"not simulated: {html.escape(str(exc))}"


def _checked_replicas(replicas: Any) -> int:
    """``replicas`` by the simulator's own rule: an integer in [1, 2**62), never a bool or a float.

    Examples
    --------
    >>> _checked_replicas(2.7)
    Traceback (most recent call last):
    ...
    ValueError: replicas must be a positive integer, got 2.7
    """
    from inferasim.sim.config import _positive_int

    return _positive_int(replicas, "replicas")


def _replicas_slider(replicas: int) -> W.IntSlider:
    """The replicas slider: 1 to 32, widened to hold the count given (never clamped)."""
    return W.IntSlider(value=replicas, min=1, max=max(32, replicas), description="replicas")


def _display_data(data: dict[str, str]) -> dict[str, Any]:
    """One ``display_data`` output of an ``ipywidgets.Output``."""
    return {"output_type": "display_data", "data": data, "metadata": {}}


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
    workloads = _checked_workloads(workloads, "cache_sizing")
    if policy not in policies:
        raise ValueError(f"policy {policy!r} is not one of {list(policies)}")
    if routing not in routings:
        raise ValueError(f"routing {routing!r} is not one of {list(routings)}")
    capacity_tokens = real(
        capacity_tokens, "capacity_tokens", low=CAPACITY_RANGE[0], high=CAPACITY_RANGE[1]
    )
    replicas = _checked_replicas(replicas)
    load = _checked_load(load, workloads)
    sim_window_ms = _checked_window(sim_window_ms, workloads)
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


# ------------------------------------------------------------------ KV tiers
#: Link speeds of the tiered widget's tiers (GB/s, µs): host DRAM over PCIe,
#: the pool over RDMA (the README's tiered example).
TIER_LINKS: dict[str, dict[str, float]] = {
    "dram": {"read_gbps": 50.0, "write_gbps": 50.0, "latency_us": 5.0},
    "pool": {"read_gbps": 25.0, "write_gbps": 25.0, "latency_us": 10.0},
}
#: Tier colours of the stacked view.
#: The tiered widget's ``system`` choices: a label, and the argument of the
#: :mod:`~inferasim.sim.tier_presets` function the DRAM slider and the pool
#: slider feed (None: the system has no such tier, the slider is off).
#: ``"custom"`` is the widget's own stack: ``dram`` (written on eviction)
#: and ``pool`` (shared, written through) on :data:`TIER_LINKS`.
TIER_SYSTEMS: dict[str, tuple[str, str | None, str | None]] = {
    "custom": ("custom", "dram", "pool"),
    "vllm_offload": ("vLLM CPU offload", "cpu_tokens", None),
    "lmcache": ("LMCache", "cpu_tokens", "remote_tokens"),
    "mooncake_store": ("Mooncake Store", None, "pool_tokens"),
    "dynamo_kvbm": ("Dynamo KVBM", "host_tokens", "disk_tokens"),
    "sglang_hicache": ("SGLang HiCache", "host_tokens", "storage_tokens"),
}
# the pool slider is a fleet-wide capacity: Dynamo's G3 is then cluster-shared
_SYSTEM_OPTIONS: dict[str, dict[str, Any]] = {"dynamo_kvbm": {"shared_disk": True}}
_WRITE_WORDS = {"through": "written through", "evict": "written on eviction"}

_TIER_COLORS = {"hbm": "#0072B2", "dram": "#009E73", "pool": "#E69F00"}


def _tier_label(name: str) -> str:
    """A tier as every view of the tiered widget names it: ``HBM``, else the tier's own name.

    Examples
    --------
    >>> [_tier_label(n) for n in ("hbm", "dram", "pool")]
    ['HBM', 'dram', 'pool']
    """
    return "HBM" if name == "hbm" else name


def tier_shares(
    curve: pd.DataFrame, hbm_tokens: float, dram_tokens: float, pool_tokens: float, block_size: int
) -> dict[str, float]:
    """Token hit ratio served by HBM, DRAM and the pool of one exclusive LRU hierarchy.

    In an exclusive LRU hierarchy with promotion on hit, a reference at LRU
    stack depth ``d`` is served by the tier whose cumulative capacity first
    reaches ``d`` (see :func:`inferasim.reuse.tiered_hit_rate`), so the share
    of tier ``k`` is the single-cache LRU hit ratio at ``C0 + ... + Ck``
    minus the one at ``C0 + ... + C(k-1)``: every point of the stacked view
    comes from one LRU curve.

    Parameters
    ----------
    curve : pandas.DataFrame
        :func:`inferasim.reuse.hit_rate_curve` (LRU) with every needed
        cumulative capacity (blocks) among its ``capacity_blocks``.
    hbm_tokens, dram_tokens, pool_tokens : float
        Tier capacities in tokens (rounded down to whole blocks each).
    block_size : int

    Examples
    --------
    >>> from inferasim import reuse
    >>> wl = _demo_workload()
    >>> curve = reuse.hit_rate_curve(wl, [1, 3, 5])
    >>> s = tier_shares(curve, 512, 1024, 1024, wl.block_size)
    >>> round(sum(s.values()), 12) == round(float(curve["token_hit_ratio"].iloc[2]), 12)
    True
    """
    ratio = dict(
        zip(curve["capacity_blocks"].astype(int), curve["token_hit_ratio"].astype(float), strict=True)
    )
    c0 = int(hbm_tokens // block_size)
    c1 = c0 + int(dram_tokens // block_size)
    c2 = c1 + int(pool_tokens // block_size)
    at = {c: (ratio[c] if c else 0.0) for c in (c0, c1, c2)}
    return {"hbm": at[c0], "dram": at[c1] - at[c0], "pool": at[c2] - at[c1]}


class TieredCacheSizing(W.VBox):
    """Sizing HBM, DRAM per replica and a shared pool; build one with :func:`tiered_cache_sizing`.

    Attributes
    ----------
    controls : dict of str to ipywidgets.Widget
        ``trace``, ``system`` (a key of :data:`TIER_SYSTEMS`), ``hbm`` (KV
        tokens per replica, from the model preset unless moved), ``dram``
        (tokens per replica, 0 = none), ``pool`` (tokens in all, 0 = none),
        ``replicas``, ``routing``, ``simulate``. A slider the system has no
        tier for is disabled and counts as 0.
    shares : dict of str to float
        Token hit ratio served by each tier of one replica's exclusive LRU
        hierarchy over the whole trace (the stacked plot) at the current
        settings.
    limit_shares : dict of str to float, or str
        The chosen system's own timing-free limit on one replica, by tier
        (:func:`inferasim.reuse.replay_tiers` with each tier's write policy;
        the readout's first numbers).
    stack_figure : matplotlib.figure.Figure
        Where the hits come from (HBM / DRAM / pool) against DRAM per replica.
    result, baseline : SimResult or None
        The last tiered simulation and the same fleet with HBM only.
    sim_output : ipywidgets.Output
        The widget's own area for the simulation (replaced on every run).

    Examples
    --------
    >>> w = tiered_cache_sizing({"demo": _demo_workload()}, dram_tokens=1e5)
    >>> sorted(w.controls)
    ['dram', 'hbm', 'pool', 'replicas', 'routing', 'simulate', 'system', 'trace']
    """

    def __init__(
        self,
        workloads: Mapping[str, Workload],
        *,
        model: str,
        gpu: str,
        tp: int,
        dram_tokens: float,
        pool_tokens: float,
        replicas: int,
        routing: str,
        sim_window_ms: float | None,
        system: str = "custom",
    ) -> None:
        from inferasim.sim.roofline import RooflineCostModel

        self.workloads = dict(workloads)
        self.cost_model = RooflineCostModel(model, gpu, tp=tp)
        self.model_label = f"{model} on {gpu}" + (f", tp={tp}" if tp > 1 else "")
        self.sim_window_ms = sim_window_ms
        self.result: Any = None
        self.baseline: Any = None
        self.sim_png: bytes = b""
        self._curves: dict[tuple[str, int, int], pd.DataFrame] = {}
        self._ceilings: dict[str, float] = {}
        self._limits: dict[tuple[Any, ...], dict[str, float] | str] = {}
        first = next(iter(self.workloads.values()))
        self.model_hbm_tokens = float(self.cost_model.kv_capacity_blocks(first.block_size) * first.block_size)

        def slider(value: float, description: str, zero: bool, high: float) -> W.SelectionSlider:
            values = capacity_options(CAPACITY_RANGE[0], high)
            values = sorted({*values, float(value)} | ({0.0} if zero else set()))
            return W.SelectionSlider(
                options=[(_tokens_label(v) if v else "none", v) for v in values],
                value=float(value),
                description=description,
                continuous_update=False,
                style={"description_width": "initial"},
                layout={"width": "380px"},
            )

        self.controls: dict[str, W.Widget] = {
            "trace": W.Dropdown(options=list(self.workloads), description="trace"),
            "system": W.Dropdown(
                options=[(v[0], k) for k, v in TIER_SYSTEMS.items()], value=system,
                description="system",
            ),
            "hbm": slider(self.model_hbm_tokens, "HBM KV per replica", False, CAPACITY_RANGE[1]),
            "dram": slider(dram_tokens, "DRAM per replica", True, CAPACITY_RANGE[1]),
            "pool": slider(pool_tokens, "shared pool", True, 1e9),
            "replicas": _replicas_slider(replicas),
            "routing": W.Dropdown(
                options=[(label(r), r) for r in WIDGET_ROUTINGS], value=routing, description="routing"
            ),
            "simulate": W.Button(description="simulate", button_style="primary", icon="play"),
        }
        self.readout = W.HTML()
        self.status = W.HTML()
        self.stack_image = W.Image(format="png")
        self.sim_output = W.Output()
        with style.paper_style():
            self.stack_figure = Figure(figsize=(style.DOUBLE[0], 2.6), layout="constrained")
            self.stack_ax = self.stack_figure.add_subplot()
            self.sim_figure = Figure(figsize=(style.DOUBLE[0], 2.2), layout="constrained")
            self.sim_axes = self.sim_figure.subplots(1, 2)
        c = self.controls
        for name in ("trace", "system", "hbm", "dram", "pool"):
            c[name].observe(self._redraw, names="value")
        c["simulate"].on_click(lambda _button: self.simulate())
        super().__init__(
            [
                W.HBox([c["trace"], c["system"], c["hbm"]]),
                W.HBox([c["dram"], c["pool"]]),
                self.readout,
                self.stack_image,
                W.HBox([c["replicas"], c["routing"], c["simulate"], self.status]),
                self.sim_output,
            ]
        )
        self._redraw()

    @property
    def workload(self) -> Workload:
        """The selected trace.

        Examples
        --------
        >>> len(tiered_cache_sizing(_demo_workload()).workload)
        200
        """
        return self.workloads[self.controls["trace"].value]

    def capacities(self) -> dict[str, float]:
        """Tier capacities in tokens: ``hbm`` and ``dram`` per replica, ``pool`` in all.

        Examples
        --------
        >>> w = tiered_cache_sizing(_demo_workload(), dram_tokens=1e5, pool_tokens=0)
        >>> w.capacities()["dram"], w.capacities()["pool"]
        (100000.0, 0.0)
        """
        c = self.controls
        return {k: 0.0 if c[k].disabled else float(c[k].value) for k in ("hbm", "dram", "pool")}

    def _dram_grid(self) -> np.ndarray:
        return np.array([0.0, *capacity_options()])

    def stack_curve(self) -> pd.DataFrame:
        """Token hit ratio of each tier against DRAM per replica (HBM and pool as set).

        Returns
        -------
        pandas.DataFrame
            ``dram_tokens`` and the ``hbm``, ``dram``, ``pool`` shares.

        Examples
        --------
        >>> w = tiered_cache_sizing(_demo_workload(), pool_tokens=0)
        >>> bool(w.stack_curve()["pool"].eq(0).all())
        True
        """
        from inferasim.reuse import hit_rate_curve as reuse_curve

        wl = self.workload
        bs = wl.block_size
        cap = self.capacities()
        h, p = int(cap["hbm"] // bs), int(cap["pool"] // bs)
        key = (self.controls["trace"].value, h, p)
        if key not in self._curves:
            xs = self._dram_grid()
            need = {h} | {h + int(x // bs) for x in xs} | {h + int(x // bs) + p for x in xs}
            need |= {h + int(cap["dram"] // bs), h + int(cap["dram"] // bs) + p}
            curve = reuse_curve(wl, sorted(b for b in need if b > 0))
            rows = [{"dram_tokens": x, **tier_shares(curve, cap["hbm"], x, cap["pool"], bs)} for x in xs]
            frame = pd.DataFrame(rows)
            frame.attrs["curve"] = curve
            self._curves[key] = frame
        return self._curves[key]

    @property
    def shares(self) -> dict[str, float]:
        """Token hit ratio of each tier at the current settings (reuse analysis).

        Examples
        --------
        >>> w = tiered_cache_sizing(_demo_workload(), dram_tokens=1e5)
        >>> sorted(w.shares)
        ['dram', 'hbm', 'pool']
        """
        cap = self.capacities()
        curve = self.stack_curve().attrs["curve"]
        return tier_shares(curve, cap["hbm"], cap["dram"], cap["pool"], self.workload.block_size)

    @property
    def limit_shares(self) -> dict[str, float] | str:
        """The chosen stack's timing-free limit on one replica, share by tier.

        :func:`inferasim.reuse.replay_tiers` of the workload over one HBM of
        the ``hbm`` setting and :meth:`tiers`, with each tier's own write
        policy: what the simulator gives with one replica, unbounded links
        and no latency. Keys ``"hbm"`` and the tiers' names. When the HBM
        cannot hold some request at its peak (the replay's precondition),
        the replay's message instead.

        Examples
        --------
        >>> w = tiered_cache_sizing(_demo_workload(), system="lmcache", dram_tokens=1e5,
        ...                         pool_tokens=1e6)
        >>> sorted(w.limit_shares)
        ['cpu', 'hbm', 'remote']
        """
        from inferasim.reuse import replay_tiers

        cap = self.capacities()
        key = (self.controls["trace"].value, self.controls["system"].value, cap["hbm"],
               cap["dram"], cap["pool"])
        if key not in self._limits:
            try:
                ref = replay_tiers(self.workload, int(cap["hbm"]), self.tiers(), replicas=1)
                self._limits[key] = dict(ref.attrs["tier_hit_ratio"])
            except ValueError as exc:  # an HBM below a request's peak: said, not hidden
                self._limits[key] = str(exc)
        return self._limits[key]

    def _limit_text(self) -> str:
        """The readout's sentence on :attr:`limit_shares`."""
        limit = self.limit_shares
        if isinstance(limit, str):
            return f"Timing-free limit of this stack: none ({html.escape(limit)})"
        parts = " + ".join(f"{_tier_label(k)} <b>{v:.1%}</b>" for k, v in limit.items())
        return (
            f"Timing-free limit of this stack on one replica (reuse.replay_tiers, each tier's "
            f"write policy; what the simulator gives at unbounded bandwidth): {parts} = "
            f"<b>{sum(limit.values()):.1%}</b>"
        )

    def _redraw(self, _change: Any = None) -> None:
        _, dram_arg, pool_arg = TIER_SYSTEMS[self.controls["system"].value]
        self.controls["dram"].disabled = dram_arg is None
        self.controls["pool"].disabled = pool_arg is None
        frame = self.stack_curve()
        cap, shares = self.capacities(), self.shares
        trace = self.controls["trace"].value
        if trace not in self._ceilings:
            self._ceilings[trace] = float(self.workload.describe()["infinite_token_hit_ratio"])
        ceiling = self._ceilings[trace]
        x = frame["dram_tokens"].to_numpy()[1:]  # the log axis starts at the first stop
        ax = self.stack_ax
        with style.paper_style():
            ax.clear()
            ax.stackplot(
                x,
                *(frame[k].to_numpy()[1:] for k in ("hbm", "dram", "pool")),
                labels=[_tier_label(k) for k in ("hbm", "dram", "pool")],
                colors=[_TIER_COLORS[k] for k in ("hbm", "dram", "pool")],
                alpha=0.85,
            )
            ax.axhline(ceiling, color="0.3", ls=":", lw=0.9, label="infinite cache")
            if cap["dram"] > 0:
                ax.axvline(cap["dram"], color="black", lw=1.0, label="chosen DRAM")
            ax.set_xscale("log")
            ax.set_xlim(x[0], x[-1])
            ax.xaxis.set_major_formatter(style.TOKENS)  # 10k, 1M: as the hit-rate view
            ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            ax.set_ylim(0, min(1.0, ceiling + 0.1))
            ax.set_xlabel("DRAM per replica (tokens)")
            ax.set_ylabel("token hit ratio")
            ax.set_title(
                f"{self.controls['trace'].value}: where hits come from "
                f"(HBM {_tokens_label(cap['hbm'])}, pool {_tokens_label(cap['pool']) if cap['pool'] else 'none'})"
            )
            ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)
        self.stack_image.value = _png(self.stack_figure)
        total = sum(shares.values())
        hbm_note = " (from the model)" if cap["hbm"] == self.model_hbm_tokens else " (overridden)"
        self.readout.value = (
            f"per replica: HBM KV <b>{cap['hbm']:,.0f}</b> tokens{hbm_note}, "
            f"DRAM <b>{cap['dram']:,.0f}</b> tokens; shared pool <b>{cap['pool']:,.0f}</b> tokens "
            f"({self.model_label}). {self._limit_text()} of prompt tokens. The plot: one "
            f"replica's exclusive LRU hierarchy over the whole trace (every tier written on "
            f"eviction), HBM <b>{shares['hbm']:.1%}</b> + dram <b>{shares['dram']:.1%}</b> + "
            f"pool <b>{shares['pool']:.1%}</b> = <b>{total:.1%}</b> "
            f"(an infinite cache: {ceiling:.1%})"
        )
        what = self.tier_text()
        if self.result is not None:
            self.status.value = f"{what}. The settings changed: press <b>simulate</b> to update the plots below"
        else:
            self.status.value = f"{what}. Press <b>simulate</b> to run the fleet with and without the tiers"

    def tiers(self) -> list[Any]:
        """The simulator's :class:`~inferasim.sim.Tier` list for the current settings (no empty tier).

        The ``system`` control chooses who builds it: the widget itself
        (``"custom"``: no empty tier) or the :mod:`~inferasim.sim.tier_presets`
        function of that name, given the DRAM and pool sliders as its
        capacity arguments (:data:`TIER_SYSTEMS`).

        Examples
        --------
        >>> [t.name for t in tiered_cache_sizing(_demo_workload(), dram_tokens=1e5).tiers()]
        ['dram']
        >>> w = tiered_cache_sizing(_demo_workload(), system="lmcache", dram_tokens=1e5,
        ...                         pool_tokens=1e6)
        >>> [(t.name, t.capacity_tokens, t.write, t.shared) for t in w.tiers()]
        [('cpu', 100000, 'through', False), ('remote', 1000000, 'through', True)]
        """
        from inferasim.sim import Tier, tier_presets

        cap = self.capacities()
        system = self.controls["system"].value
        if system != "custom":
            _, dram_arg, pool_arg = TIER_SYSTEMS[system]
            sizes = {arg: int(cap[k]) for k, arg in (("dram", dram_arg), ("pool", pool_arg)) if arg}
            return getattr(tier_presets, system)(**sizes, **_SYSTEM_OPTIONS.get(system, {}))
        out = []
        if cap["dram"] > 0:
            out.append(Tier("dram", int(cap["dram"]), **TIER_LINKS["dram"]))
        if cap["pool"] > 0:
            out.append(Tier("pool", int(cap["pool"]), shared=True, **TIER_LINKS["pool"]))
        return out

    def tier_text(self) -> str:
        """The system, its tiers and how each is written, in words (the status line's start).

        Examples
        --------
        >>> tiered_cache_sizing(_demo_workload(), system="mooncake_store", pool_tokens=1e6).tier_text()
        'Mooncake Store: pool 1M tokens shared, written through, publishing loaded blocks too'
        """
        from inferasim.sim.tierconfig import publishes_loaded

        parts = [
            f"{t.name} {_tokens_label(t.capacity_tokens)} tokens "
            f"{'shared' if t.shared else 'per replica'}, {_WRITE_WORDS[t.write]}"
            + (", publishing loaded blocks too" if publishes_loaded(t) else "")
            for t in self.tiers()
        ]
        return f"{TIER_SYSTEMS[self.controls['system'].value][0]}: {'; '.join(parts) or 'HBM only'}"

    def simulate(self) -> Any:
        """Run the fleet with the chosen tiers and with HBM only; draw TTFT and the hit split.

        Returns
        -------
        SimResult
            The tiered run (the HBM-only one is :attr:`baseline`).

        Examples
        --------
        >>> w = tiered_cache_sizing(_demo_workload(), dram_tokens=1e5, replicas=2)
        >>> w.simulate().tiers.index.tolist()
        ['hbm', 'dram']
        """
        from inferasim.sim import Simulator

        c = self.controls
        wl = self.workload
        if self.sim_window_ms is not None:
            wl = wl.window(0, self.sim_window_ms)
        bs = wl.block_size
        common = {
            "replicas": int(c["replicas"].value),
            "routing": c["routing"].value,
            "cost_model": self.cost_model,
            "kv_tokens": _whole_blocks(self.capacities()["hbm"], bs),
            "seed": 0,
        }
        self.status.value = f"simulating {len(wl):,} requests twice (with and without tiers) ..."
        start = time.perf_counter()
        try:
            self.baseline = Simulator(**common).run(wl, progress=False)
            self.result = Simulator(**common, tiers=self.tiers()).run(wl, progress=False)
        except Exception as exc:
            self.status.value = f"simulation failed: {html.escape(str(exc))}"
            raise
        elapsed = time.perf_counter() - start
        rejected = _rejected_status(self.result.requests)
        base = _rejected_status(self.baseline.requests)
        self.status.value = (
            f"{self.tier_text()}. Simulated {len(wl):,} requests twice in {elapsed:.1f} s"
            + (f"; with tiers{rejected}" if rejected else "")
            + (f"; HBM only{base}" if base else "")
        )
        self._draw_sim()
        return self.result

    def sim_text(self) -> str:
        """The last simulation's numbers in words (HTML).

        Examples
        --------
        >>> w = tiered_cache_sizing(_demo_workload(), dram_tokens=1e5, replicas=2)
        >>> _ = w.simulate()
        >>> "load" in w.sim_text()
        True
        """
        if self.result is None:
            raise RuntimeError("no simulation yet: call simulate() first")
        s, b = self.result.summary(), self.baseline.summary()
        hits = self.result.tiers["token_hit_ratio"]
        parts = [f"{_tier_label(n)} {hits[n]:.1%}" for n in ("hbm", *(t.name for t in self.tiers()))]
        load = s["load_ms_mean"] if self.tiers() else 0.0
        c = self.controls
        scope = (
            f"the first {self.sim_window_ms / 60_000:g} min of {c['trace'].value}"
            if self.sim_window_ms is not None
            else f"the whole {c['trace'].value} trace"
        )
        return (
            f"<p>simulated {len(self.result.requests):,} requests ({scope}) on "
            f"{self.result.config['replicas']} replicas, {label(self.result.config['routing'])} "
            f"routing: token hit ratio <b>{s['token_hit_ratio']:.1%}</b> "
            f"({' + '.join(parts)}) against <b>{b['token_hit_ratio']:.1%}</b> with HBM only; "
            f"TTFT p50 <b>{s['ttft_ms_p50']:,.0f}</b> ms (HBM only {b['ttft_ms_p50']:,.0f} ms), "
            f"p99 <b>{s['ttft_ms_p99']:,.0f}</b> ms (HBM only {b['ttft_ms_p99']:,.0f} ms), "
            f"including a mean load time from the tiers of <b>{load:,.1f}</b> ms.</p>"
            + self._rejections_html()
        )

    def _rejections_html(self) -> str:
        """A paragraph on each run's rejected requests (empty when none was)."""
        from inferasim.sim.summary import rejection_note

        notes = [
            f"{run}: {note}"
            for run, res in (("with tiers", self.result), ("HBM only", self.baseline))
            if (note := rejection_note(res.requests)) is not None
        ]
        return f"<p><b>{'. '.join(notes)}.</b></p>" if notes else ""

    def _draw_sim(self) -> None:
        s, b = self.result.summary(), self.baseline.summary()
        names = ["hbm", *(t.name for t in self.tiers())]
        with style.paper_style():
            a, h = self.sim_axes
            a.clear()
            h.clear()
            labels = ["p50", "p99"]
            xs = np.arange(2)
            a.bar(xs - 0.2, [b["ttft_ms_p50"], b["ttft_ms_p99"]], 0.4, label="HBM only", color="0.6")
            a.bar(xs + 0.2, [s["ttft_ms_p50"], s["ttft_ms_p99"]], 0.4, label="with tiers",
                  color=_TIER_COLORS["dram"])
            a.set_xticks(xs, labels)
            a.set_ylabel("TTFT (ms)")
            a.yaxis.set_major_formatter(style.THOUSANDS)
            a.set_title("TTFT of finished requests, load time included")
            a.legend(fontsize=7)
            left = 0.0
            hits = self.result.tiers["token_hit_ratio"]
            for name in names:
                h.barh([0], [hits[name]], left=left, color=_TIER_COLORS.get(name, "0.5"),
                       label=_tier_label(name))
                left += float(hits[name])
            h.barh([1], [b["token_hit_ratio"]], color=_TIER_COLORS["hbm"])
            h.set_yticks([0, 1], ["with tiers", "HBM only"])
            # sized to the data (a hit ratio rarely nears 1): 10% above the longer bar
            h.set_xlim(0, min(1.0, 1.1 * max(left, float(b["token_hit_ratio"]), 0.01)))
            h.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            h.set_xlabel("token hit ratio (simulated fleet)")
            h.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))  # off the bars
        self.sim_png = _png(self.sim_figure)
        text = self.sim_text()
        self.sim_output.outputs = (
            _display_data({"image/png": base64.b64encode(self.sim_png).decode("ascii"),
                           "text/plain": "<tiered simulation plots>"}),
            _display_data({"text/html": text, "text/plain": text}),
        )


def tiered_cache_sizing(
    workloads: Workload | Mapping[str, Workload],
    *,
    model: str = "llama-3.1-8b",
    gpu: str = "h100-80gb",
    tp: int = 1,
    dram_tokens: float = NODE_CACHE_TOKENS,
    pool_tokens: float = 0.0,
    replicas: int = 4,
    routing: str = "kv_cost",
    sim_window_ms: float | None = None,
    system: str = "custom",
) -> TieredCacheSizing:
    """KV-tier sizing widget: HBM (from the model), DRAM per replica and a shared pool.

    The stacked view shows, against DRAM per replica, the share of prompt
    tokens each tier serves (reuse analysis: one exclusive LRU hierarchy,
    see :func:`tier_shares`); **simulate** runs the fleet with the tiers
    (:class:`~inferasim.sim.Tier`, links :data:`TIER_LINKS`) and with HBM
    only, and shows TTFT with the load time included.

    Parameters
    ----------
    workloads : Workload or mapping of name to Workload
    model, gpu : str
        Presets of :class:`~inferasim.sim.RooflineCostModel`; they set the
        HBM KV capacity per replica the ``hbm`` slider starts at.
    tp : int, default 1
    dram_tokens : float, default 3e6
        DRAM per replica (tokens); 0 for none.
    pool_tokens : float, default 0
        Shared pool (tokens in all); 0 for none.
    replicas : int, default 4
    routing : str, default "kv_cost"
    sim_window_ms : float, optional
        Simulate only the first ``sim_window_ms`` of the trace.
    system : str, default "custom"
        Who builds the tier stack (:data:`TIER_SYSTEMS`): ``"custom"``, the
        widget's ``dram`` + ``pool``, or a preset of a deployed system
        (``"vllm_offload"``, ``"lmcache"``, ``"mooncake_store"``,
        ``"dynamo_kvbm"`` with a cluster-shared G3, ``"sglang_hicache"``),
        the DRAM slider feeding its per-replica tier and the pool slider its
        shared one; a slider the system has no tier for is disabled.

    Returns
    -------
    TieredCacheSizing

    Examples
    --------
    >>> w = tiered_cache_sizing(_demo_workload(), dram_tokens=1e5, pool_tokens=1e6)
    >>> w.capacities()["hbm"] == w.model_hbm_tokens
    True
    """
    workloads = _checked_workloads(workloads, "tiered_cache_sizing")
    system = choice(system, "system", TIER_SYSTEMS)
    if routing not in WIDGET_ROUTINGS:
        raise ValueError(f"routing {routing!r} is not one of {list(WIDGET_ROUTINGS)}")
    for name, value, high in (("dram_tokens", dram_tokens, CAPACITY_RANGE[1]), ("pool_tokens", pool_tokens, 1e9)):
        if not (real(value, name, low=0, high=high) == 0 or CAPACITY_RANGE[0] <= value):
            raise ValueError(f"{name} must be 0 or in [{CAPACITY_RANGE[0]:g}, {high:g}], got {value!r}")
    replicas = _checked_replicas(replicas)
    sim_window_ms = _checked_window(sim_window_ms, workloads)
    return TieredCacheSizing(
        workloads,
        model=model,
        gpu=gpu,
        tp=tp,
        dram_tokens=dram_tokens,
        pool_tokens=pool_tokens,
        replicas=replicas,
        routing=routing,
        sim_window_ms=sim_window_ms,
        system=system,
    )
