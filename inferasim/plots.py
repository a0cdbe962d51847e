"""Axes-level plots of inferasim's frames: each takes ``ax=None`` and returns the Axes.

One plotting layer for the notebooks, the widgets and ``inferasim figures``,
in seaborn's convention: a function draws one kind of plot on one Axes
(a new figure when ``ax`` is None) from a tidy frame, labels its axes with
units, and returns the Axes. Figures with several panels are built from
these by :mod:`inferasim.figures`. No function sets the style: call
:func:`inferasim.style.use` once (a notebook) or draw inside
``with inferasim.style.context():``. Colours follow
:func:`inferasim.style.color`, so LRU and the conversation trace look the
same in every plot.

==========================  ==================================================
reuse analysis              :func:`hit_rate`, :func:`mark_capacity`,
                            :func:`popularity`, :func:`reuse_distance`,
                            :func:`sessions`
trace structure             :func:`lengths`, :func:`arrivals`,
                            :func:`reusable_share`
simulator results           :func:`latency_cdf`, :func:`quantile_dots`,
                            :func:`replica_load`
measured against simulated  :func:`measured_vs_simulated`
studies                     :func:`local_vs_pooled`, :func:`teaching`
==========================  ==================================================

Frames with a ``trace`` column (the :mod:`inferasim.studies` frames) draw
one line per trace; a mapping ``{label: frame_or_result}`` does the same
for results computed separately. The former names (``plot_hit_rate_curve``,
``plot_popularity``, ``plot_reuse_distance_cdf``, ``plot_sessions``,
``plot_latency_cdf``, ``plot_replica_load``) still work.

Examples
--------
>>> from inferasim import Workload
>>> from inferasim.reuse import hit_rate_curve
>>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 2]])
>>> ax = hit_rate(hit_rate_curve(wl, [1, 2]))
>>> ax.get_xlabel(), ax.get_ylabel()
('cache capacity (tokens)', 'token hit ratio')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter

from inferasim import style

__all__ = [
    "hit_rate",
    "hit_rate_line",
    "mark_capacity",
    "popularity",
    "reuse_distance",
    "sessions",
    "lengths",
    "arrivals",
    "reusable_share",
    "latency_cdf",
    "quantile_dots",
    "replica_load",
    "measured_vs_simulated",
    "local_vs_pooled",
    "teaching",
    "ecdf",
    "thin",
    "MAX_POINTS",
    "PLACEMENT_COLORS",
    # former names
    "plot_hit_rate_curve",
    "plot_popularity",
    "plot_reuse_distance_cdf",
    "plot_sessions",
    "plot_latency_cdf",
    "plot_replica_load",
]

T = TypeVar("T")


# ===================================================================== shared
def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.figure().add_subplot()


def _named(data: Any, label: str | None, by: str = "trace") -> list[tuple[str | None, Any]]:
    """``[(label, item), ...]`` from one item, a mapping, or a frame with a ``by`` column."""
    if isinstance(data, Mapping):
        return [(str(k), v) for k, v in data.items()]
    if isinstance(data, pd.DataFrame) and by in data.columns:
        return [(str(k), g) for k, g in data.groupby(by, sort=False)]
    return [(label, data)]


def ecdf(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF: sorted values and the fraction of values at or below each.

    Examples
    --------
    >>> x, y = ecdf([3, 1, 2])
    >>> x.tolist(), y.round(3).tolist()
    ([1.0, 2.0, 3.0], [0.333, 0.667, 1.0])
    """
    x = np.sort(np.asarray(values, dtype=float))
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


#: Longest line drawn as is; longer ECDFs and rank plots are thinned to this
#: many points (a double-column figure is 1,400 pixels wide at 200 dpi).
MAX_POINTS: int = 2000


def thin(x: np.ndarray, y: np.ndarray, *, log: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """At most :data:`MAX_POINTS` points of a monotone curve, first and last kept.

    Evenly spaced in position (an ECDF: every y step of ``1/MAX_POINTS`` is
    kept, so the curve moves by less than that), or log-spaced with
    ``log=True`` (a rank plot on log axes). Shorter curves come back as they are.

    Examples
    --------
    >>> x = np.arange(10_000.0)
    >>> tx, ty = thin(x, x / 10_000)
    >>> len(tx) <= MAX_POINTS, tx[0], tx[-1]
    (True, np.float64(0.0), np.float64(9999.0))
    """
    n = len(x)
    if n <= MAX_POINTS:
        return x, y
    if log:
        idx = np.unique(np.geomspace(1, n, MAX_POINTS).round().astype(np.int64) - 1)
    else:
        idx = np.unique(np.linspace(0, n - 1, MAX_POINTS).round().astype(np.int64))
    return np.asarray(x)[idx], np.asarray(y)[idx]


def _legend(ax: Axes, **kw: Any) -> None:
    if any(not str(line.get_label()).startswith("_") for line in ax.get_lines()):
        ax.legend(**kw)


# ============================================================== reuse analysis
def hit_rate_line(
    ax: Axes,
    curve: pd.DataFrame,
    *,
    color: str,
    label: str | None = None,
    marker: str | None = None,
    ratio: str = "token_hit_ratio",
) -> Line2D:
    """Draw one hit-rate curve (capacity in tokens, log x) on ``ax``; return the line.

    The building block of :func:`hit_rate` for code that updates the line
    later (the cache-sizing widget moves it with ``set_data``).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> ax = Figure().subplots()
    >>> c = pd.DataFrame({"capacity_tokens": [512, 1024], "token_hit_ratio": [0.1, 0.2]})
    >>> hit_rate_line(ax, c, color="k").get_ydata().tolist()
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
    ax.xaxis.set_major_formatter(style.TOKENS)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_xlabel("cache capacity (tokens)")
    ax.set_ylabel("token hit ratio")
    return line


def hit_rate(
    curves: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    ax: Axes | None = None,
    x: str = "tokens",
    ratio: str = "token",
    label: str | None = None,
    secondary_axis: bool = True,
    ceiling: float | None = None,
    labels: Callable[[str], str] = style.label,
    **line_kw: Any,
) -> Axes:
    """Hit ratio against cache capacity on a log axis, one line per trace and policy.

    Parameters
    ----------
    curves : DataFrame or mapping of str to DataFrame
        Frames of :func:`inferasim.reuse.hit_rate_curve` or
        :func:`inferasim.studies.hit_rate_vs_capacity`; one line per
        ``policy`` and per trace (a ``trace`` column or a mapping's keys).
    ax : matplotlib Axes, optional
        Where to draw; a new figure by default.
    x : {"tokens", "blocks"}, default "tokens"
        Capacity unit of the bottom axis.
    ratio : {"token", "block"}, default "token"
        Plot ``token_hit_ratio`` or ``block_hit_ratio``.
    label : str, optional
        Legend label of a single frame.
    secondary_axis : bool, default True
        Add a top axis in the other capacity unit (when every curve has the
        same block size).
    ceiling : float, optional
        Draw this hit ratio (an infinite cache's) as a dotted line and clip
        the y axis a little above it.
    labels : callable, default :func:`inferasim.style.label`
        Display name of a policy.
    **line_kw
        Passed to ``Axes.plot``.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse import hit_rate_curve
    >>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 2]])
    >>> both = pd.concat([hit_rate_curve(wl, [1, 2]), hit_rate_curve(wl, [1, 2], policy="opt")])
    >>> ax = hit_rate({"demo": both}, x="blocks", ratio="block")
    >>> [line.get_label() for line in ax.get_lines()], ax.get_xscale()
    (['demo LRU', 'demo offline optimum'], 'log')
    """
    if x not in ("tokens", "blocks"):
        raise ValueError(f"x must be 'tokens' or 'blocks', got {x!r}")
    if ratio not in ("token", "block"):
        raise ValueError(f"ratio must be 'token' or 'block', got {ratio!r}")
    ax = _axes(ax)
    xcol = "capacity_tokens" if x == "tokens" else "capacity_blocks"
    ycol = f"{ratio}_hit_ratio"
    items = _named(curves, label)
    sizes: set[float] = set()
    styles = ("-", "--", ":", "-.")
    for t, (name, frame) in enumerate(items):
        missing = {xcol, ycol, "capacity_blocks", "capacity_tokens"} - set(frame.columns)
        if missing:
            raise ValueError(f"curve frame lacks columns {sorted(missing)}: use hit_rate_curve()")
        policies = list(frame["policy"].unique()) if "policy" in frame else [None]
        for p, policy in enumerate(policies):
            part = frame if policy is None else frame[frame["policy"] == policy]
            part = part[part["capacity_blocks"] > 0].sort_values("capacity_blocks")
            sizes.update((part["capacity_tokens"] / part["capacity_blocks"]).unique().tolist())
            show_policy = policy is not None and (len(policies) > 1 or name is None)
            shown = labels(str(policy)) if show_policy else None
            text = " ".join(str(v) for v in (name, shown) if v)
            by_policy = len(policies) > 1 or name is None
            key, index = (str(policy), p) if by_policy else (str(name), t)
            kw: dict[str, Any] = {"color": style.color(key, index)}
            if by_policy and len(items) > 1:
                kw["linestyle"] = styles[t % len(styles)]
            if policy is not None and policy != "lru":
                kw["marker"] = style.marker(str(policy))
                kw["markevery"] = 0.08
                kw["markersize"] = 3
            if policy == "lru":
                # LRU is the reference line: on top, where FIFO (often equal) would hide it
                kw["zorder"] = 3
            ax.plot(part[xcol], part[ycol], label=text or None, **{**kw, **line_kw})
    ax.set_xscale("log")
    if x == "tokens":
        ax.xaxis.set_major_formatter(style.TOKENS)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_xlabel(f"cache capacity ({x})")
    ax.set_ylabel(f"{ratio} hit ratio")
    ax.set_ylim(0, 1)
    if ceiling is not None:
        ax.axhline(ceiling, color="0.3", ls=":", lw=0.9)
        ax.text(
            0.02,
            ceiling + 0.012,
            f"ceiling (infinite cache) {ceiling:.1%}",
            transform=ax.get_yaxis_transform(),
            fontsize=6.5,
            color="0.2",
        )
        ax.set_ylim(0, min(1.0, ceiling + 0.12))
    if secondary_axis and len(sizes) == 1:
        bs = float(sizes.pop())
        other = "blocks" if x == "tokens" else "tokens"
        scale = 1 / bs if x == "tokens" else bs
        top = ax.secondary_xaxis("top", functions=(lambda v: v * scale, lambda v: v / scale))
        top.set_xlabel(f"cache capacity ({other})")
    _legend(ax)
    return ax


def mark_capacity(
    point: Mapping[str, Any] | pd.Series,
    *,
    ax: Axes | None = None,
    text_at: tuple[float, float] | None = None,
    color: str | None = None,
) -> Axes:
    """Mark one capacity on a hit-rate plot: dashed line, a ring at its hit ratio, a note.

    Parameters
    ----------
    point : mapping or Series
        ``capacity_tokens`` and ``token_hit_ratio``; with
        ``share_of_ceiling`` (a row of :func:`inferasim.studies.at_capacity`)
        the note gives the share of the ceiling too.
    ax : matplotlib Axes, optional
    text_at : (float, float), optional
        Where the note goes, in axes fractions (default: at the left, below
        the ceiling when ``point`` has ``ceiling_token_hit_ratio``).
    color : str, optional
        Colour of the ring (default LRU's).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> ax = mark_capacity({"capacity_tokens": 3e6, "token_hit_ratio": 0.14,
    ...                     "share_of_ceiling": 0.37})
    >>> ax.texts[0].get_text()
    '3M-token cache:\\n14.0% = 37% of ceiling'
    """
    ax = _axes(ax)
    cap, hit = float(point["capacity_tokens"]), float(point["token_hit_ratio"])
    ax.axvline(cap, color="0.4", ls="--", lw=0.8)
    ax.plot(
        [cap], [hit], "o", color=color or style.color("lru"), ms=5, mfc="white", mew=1.2, zorder=5
    )
    text = f"{style.tokens_text(cap)}-token cache:\n{hit:.1%}"
    share = point.get("share_of_ceiling") if hasattr(point, "get") else None
    if share is not None and np.isfinite(share):
        text += f" = {share:.0%} of ceiling"
    ceiling = point.get("ceiling_token_hit_ratio") if hasattr(point, "get") else None
    if text_at is None and ceiling is not None and np.isfinite(ceiling):
        # in the empty band below the ceiling line, at the left (y in data units)
        where, coords = (0.04, 0.62 * float(ceiling)), ax.get_yaxis_transform()
    else:
        where, coords = text_at or (0.04, 0.45), "axes fraction"
    ax.annotate(
        text,
        xy=(cap, hit),
        xytext=where,
        textcoords=coords,
        ha="left",
        va="bottom",
        fontsize=6.5,
        arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 0.7, "shrinkB": 4},
    )
    return ax


def popularity(
    popularities: Any,
    *,
    ax: Axes | None = None,
    label: str | None = None,
    fit: bool = True,
    **line_kw: Any,
) -> Axes:
    """Rank-frequency plot of block popularity (log-log), with the fitted Zipf line.

    Parameters
    ----------
    popularities : Popularity, mapping of str to Popularity, or DataFrame
        Results of :func:`inferasim.reuse.popularity`, or the tidy frame of
        :func:`inferasim.studies.block_popularity` (``trace``, ``rank``,
        ``requests``; no fit line).
    ax : matplotlib Axes, optional
    label : str, optional
        Legend label of a single result.
    fit : bool, default True
        Draw ``C * rank ** -s`` dashed, with ``s`` in the legend (for
        Popularity results).
    **line_kw
        Passed to ``Axes.plot``.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse import popularity as pop
    >>> wl = Workload.from_requests([0, 1, 2], [2, 2, 2], [1] * 3,
    ...                             [[1, 2], [1, 3], [1, 2]], block_size=1)
    >>> ax = popularity(pop(wl), label="demo")
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('block rank', 'requests per block')
    """
    ax = _axes(ax)
    for i, (name, pop) in enumerate(_named(popularities, label)):
        colour = style.color(name or "", i)
        blocks = pop if isinstance(pop, pd.DataFrame) else pop.blocks
        freq = blocks["requests"].to_numpy()
        ranks = blocks["rank"].to_numpy()
        ax.plot(*thin(ranks, freq, log=True), label=name, **{"color": colour, **line_kw})
        exponent = getattr(pop, "zipf_exponent", float("nan"))
        if fit and np.isfinite(exponent):
            top = int((freq >= 2).sum())
            r = np.geomspace(1, max(top, 1), 50)
            ax.plot(
                r,
                pop.zipf_constant * r**-exponent,
                linestyle="--",
                linewidth=0.8,
                color=colour,
                label=f"Zipf s={exponent:.2f}" + (f" ({name})" if name else ""),
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(LogLocator(numticks=6))
    ax.set_xlabel("block rank")
    ax.set_ylabel("requests per block")
    _legend(ax)
    return ax


def reuse_distance(
    distances: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    ax: Axes | None = None,
    kind: str = "stack",
    label: str | None = None,
    block_size: int | None = None,
    mark_tokens: float | None = None,
    **line_kw: Any,
) -> Axes:
    """CDF of reuse distances (log x).

    Parameters
    ----------
    distances : DataFrame or mapping of str to DataFrame
        Frames of :func:`inferasim.reuse.reuse_distance` (re-references
        only: the CDF reaches 1), or the tidy frame of
        :func:`inferasim.studies.reuse_distances` (every block reference,
        distances in tokens, ``inf`` for first uses: the CDF tops out at the
        share of references that repeat an earlier block).
    ax : matplotlib Axes, optional
    kind : {"stack", "time"}, default "stack"
        LRU stack distance (blocks, or tokens) or time since the previous
        use (seconds).
    label : str, optional
        Legend label of a single frame.
    block_size : int, optional
        Draw stack distances of :func:`inferasim.reuse.reuse_distance` in
        tokens (distance times ``block_size``).
    mark_tokens : float, optional
        A dashed line at this cache size (tokens), e.g. 3e6.
    **line_kw
        Passed to ``Axes.step``.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse import reuse_distance as rd
    >>> wl = Workload.from_requests([0, 1000, 3000], [2, 1, 2], [1] * 3,
    ...                             [[1, 2], [5], [1, 2]], block_size=1)
    >>> reuse_distance(rd(wl), kind="time").get_xlabel()
    'time since previous use (s)'
    """
    if kind not in ("stack", "time"):
        raise ValueError(f"kind must be 'stack' or 'time', got {kind!r}")
    ax = _axes(ax)
    items = _named(distances, label)
    in_tokens = bool(block_size)
    all_references = False
    for i, (name, frame) in enumerate(items):
        if kind == "stack" and "stack_distance_tokens" in frame.columns:
            values = frame["stack_distance_tokens"].to_numpy(dtype=float)
            in_tokens = True
        elif kind == "stack":
            values = frame["stack_distance"].to_numpy(dtype=float) * (block_size or 1)
        else:
            # a reuse in the same millisecond would vanish on a log axis
            values = frame["time_since_ms"].to_numpy(dtype=float)
            values = np.where(np.isnan(values), np.inf, np.maximum(values, 1.0) / 1000.0)
        total = values.size
        values = values[np.isfinite(values)]
        all_references |= values.size < total
        if values.size == 0:
            continue
        xs = np.sort(values)
        xs, ys = thin(xs, np.arange(1, xs.size + 1) / total)
        ax.step(
            np.maximum(xs, 1e-3) if kind == "time" else xs,
            ys,
            where="post",
            label=name,
            **{"color": style.color(name or "", i), **line_kw},
        )
    if mark_tokens is not None and kind == "stack":
        ax.axvline(mark_tokens, color="0.4", ls="--", lw=0.8)
        ax.text(
            mark_tokens,
            0.02,
            f" {style.tokens_text(mark_tokens)} tokens",
            fontsize=6,
            color="0.3",
        )
    ax.set_xscale("log")
    if kind == "stack":
        ax.set_xlabel(f"LRU stack distance ({'tokens' if in_tokens else 'blocks'})")
        if in_tokens:
            ax.xaxis.set_major_formatter(style.TOKENS)
    else:
        ax.set_xlabel("time since previous use (s)")
    ax.set_ylabel("fraction of block references" if all_references else "fraction of re-references")
    ax.set_ylim(0, 1.01)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    if any(name for name, _ in items):
        ax.legend(loc="upper left")
    return ax


def _session_requests(s: Any) -> pd.DataFrame:
    return s if isinstance(s, pd.DataFrame) else s.requests


def sessions(
    data: Any,
    *,
    ax: Axes | None = None,
    kind: str = "turns",
    label: str | None = None,
    **line_kw: Any,
) -> Axes:
    """Multi-turn structure: turns per session, gaps between turns, or prompt growth per turn.

    Parameters
    ----------
    data : Sessions, mapping of str to Sessions, or DataFrame
        Results of :func:`inferasim.reuse.sessions`, or the tidy frame of
        :func:`inferasim.studies.requests` (``trace``, ``session``,
        ``turn``, ``gap_ms``, ``growth_tokens``).
    ax : matplotlib Axes, optional
    kind : {"turns", "gap", "growth"}, default "turns"
        ``"turns"``: share of sessions by number of turns (log-log);
        ``"gap"``: CDF of the time between consecutive turns (s);
        ``"growth"``: median prompt tokens added per turn, by turn number.
    label : str, optional
        Legend label of a single result.
    **line_kw
        Passed to the plotting call.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse import sessions as chains
    >>> wl = Workload.from_requests([0, 2000], [4, 9], [1, 1], [[1, 2], [1, 2, 3, 4, 5]],
    ...                             block_size=2)
    >>> sessions(chains(wl), kind="growth").get_ylabel()
    'prompt tokens added (median)'
    """
    if kind not in ("turns", "gap", "growth"):
        raise ValueError(f"kind must be 'turns', 'gap' or 'growth', got {kind!r}")
    ax = _axes(ax)
    items = _named(data, label)
    for i, (name, s) in enumerate(items):
        req = _session_requests(s)
        kw = {"color": style.color(name or "", i), **line_kw}
        if kind == "turns":
            turns = req.groupby("session")["turn"].max()
            share = turns.value_counts(normalize=True).sort_index()
            ax.plot(share.index, share.to_numpy(), marker="o", ms=2.5, label=name, **kw)
        elif kind == "gap":
            gaps = req["gap_ms"].dropna().to_numpy() / 1000.0
            if gaps.size:
                xs, ys = thin(*ecdf(np.maximum(gaps, 1e-3)))
                ax.step(xs, ys, where="post", label=name, **kw)
        else:
            linked = req.dropna(subset=["growth_tokens"])
            med = linked.groupby("turn")["growth_tokens"].median()
            ax.plot(med.index, med.to_numpy(), marker="o", label=name, **kw)
    plain = FuncFormatter(lambda v, _p: f"{v:,g}")  # 1,000 s, not 1000
    if kind == "turns":
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(plain)
        ax.set_xlabel("turns per session")
        ax.set_ylabel("share of sessions")
    elif kind == "gap":
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(plain)
        ax.set_xlabel("time between turns (s)")
        ax.set_ylabel("fraction of follow-up turns")
        ax.set_ylim(0, 1.01)
    else:
        ax.set_xlabel("turn")
        ax.set_ylabel("prompt tokens added (median)")
    _legend(ax)
    return ax


# ============================================================ trace structure
_LENGTH_LABELS = {"input_len": "prompt length (tokens)", "output_len": "output length (tokens)"}


def lengths(
    requests: pd.DataFrame | Mapping[str, pd.DataFrame],
    column: str = "input_len",
    *,
    ax: Axes | None = None,
    label: str | None = None,
) -> Axes:
    """ECDF of prompt or output lengths (log x), one line per trace.

    Parameters
    ----------
    requests : DataFrame or mapping of str to DataFrame
        :func:`inferasim.studies.requests`, ``Workload.frame``, or any frame
        with the column.
    column : {"input_len", "output_len"}, default "input_len"
    ax : matplotlib Axes, optional
    label : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> req = pd.DataFrame({"trace": "t", "input_len": [300, 100, 200]})
    >>> line = lengths(req).get_lines()[0]
    >>> line.get_xdata().tolist(), line.get_ydata().round(3).tolist()
    ([100.0, 200.0, 300.0], [0.333, 0.667, 1.0])
    """
    if column not in _LENGTH_LABELS:
        raise ValueError(f"column must be one of {list(_LENGTH_LABELS)}, got {column!r}")
    ax = _axes(ax)
    for i, (name, frame) in enumerate(_named(requests, label)):
        x, y = thin(*ecdf(frame[column].to_numpy()))
        ax.step(x, y, where="post", color=style.color(name or "", i), label=name)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(style.TOKENS)
    ax.set_xlabel(_LENGTH_LABELS[column])
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.01)
    _legend(ax, loc="lower right")
    return ax


def arrivals(
    requests: pd.DataFrame | Mapping[str, pd.DataFrame],
    what: str = "requests",
    *,
    bin_s: float = 60.0,
    ax: Axes | None = None,
    label: str | None = None,
) -> Axes:
    """Offered load over time: requests/s or prompt tokens/s per ``bin_s`` bin.

    The last bin ends at the last arrival and its rate is divided by its
    real width (no artificial drop); a last bin under a quarter of
    ``bin_s`` is left out.

    Parameters
    ----------
    requests : DataFrame or mapping of str to DataFrame
        Frames with ``arrival_ms`` (and ``input_len`` for tokens), e.g.
        :func:`inferasim.studies.requests`.
    what : {"requests", "tokens"}, default "requests"
    bin_s : float, default 60
    ax : matplotlib Axes, optional
    label : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    Arrivals at 0, 10, 20 s and 70, 80 s: 3 requests in [0, 60) is 0.05/s;
    [60, 80] is 20 s wide (it ends at the last arrival) with 2: 0.1/s.

    >>> req = pd.DataFrame({"arrival_ms": [0, 10_000, 20_000, 70_000, 80_000]})
    >>> arrivals(req).get_lines()[0].get_ydata().tolist()
    [0.05, 0.1]
    """
    if what not in ("requests", "tokens"):
        raise ValueError(f"what must be 'requests' or 'tokens', got {what!r}")
    ax = _axes(ax)
    for i, (name, frame) in enumerate(_named(requests, label)):
        t = frame["arrival_ms"].to_numpy(dtype=float) / 1000.0
        end = max(float(t.max()) if t.size else 0.0, 1e-9)
        edges = np.append(np.arange(0.0, end, bin_s), end)
        widths = np.diff(edges)
        weights = frame["input_len"].to_numpy(dtype=float) if what == "tokens" else None
        counts, _ = np.histogram(t, bins=edges, weights=weights)
        keep = widths >= bin_s / 4
        mid = ((edges[:-1] + edges[1:]) / 2 / 60.0)[keep]
        ax.plot(mid, (counts / widths)[keep], color=style.color(name or "", i), label=name)
    if what == "tokens":
        ax.set_ylabel("prompt token rate (tokens/s)")
        ax.yaxis.set_major_formatter(style.TOKENS)
    else:
        ax.set_ylabel("arrival rate (requests/s)")
    ax.set_xlabel("time since first request (min)")
    ax.set_ylim(bottom=0)
    _legend(ax, loc="lower right")
    return ax


def reusable_share(
    requests: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    ax: Axes | None = None,
    label: str | None = None,
) -> Axes:
    """ECDF of the share of each prompt an infinite prefix cache would serve.

    Parameters
    ----------
    requests : DataFrame or mapping of str to DataFrame
        :func:`inferasim.studies.requests` (column ``reusable_share``).
    ax : matplotlib Axes, optional
    label : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> req = pd.DataFrame({"trace": "t", "reusable_share": [0.0, 0.5, 0.5, 1.0]})
    >>> reusable_share(req).get_lines()[0].get_ydata().tolist()
    [0.25, 0.5, 0.75, 1.0]
    """
    ax = _axes(ax)
    for i, (name, frame) in enumerate(_named(requests, label)):
        x, y = thin(*ecdf(frame["reusable_share"].dropna().to_numpy()))
        ax.step(x, y, where="post", color=style.color(name or "", i), label=name)
    ax.set_xlabel("prompt share served by an infinite cache")
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.01)
    _legend(ax, loc="upper left")
    return ax


# ============================================================ simulator results
_LATENCY_LABELS = {
    "ttft_ms": "TTFT (ms)",
    "tpot_ms": "TPOT (ms)",
    "e2e_ms": "end-to-end latency (ms)",
    "queue_ms": "queueing delay (ms)",
}
_LOAD_LABELS = {
    "requests": "requests",
    "input_tokens": "prompt tokens",
    "computed_prefill_tokens": "computed prefill tokens",
    "cached_tokens": "cached prompt tokens",
}


def _request_frame(result: Any) -> pd.DataFrame:
    """The per-request frame of a SimResult (or the frame itself)."""
    frame = getattr(result, "requests", result)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(
            f"expected a SimResult or its .requests DataFrame, got {type(result).__name__}"
        )
    return frame


def latency_cdf(
    results: Any,
    metric: str = "ttft_ms",
    *,
    ax: Axes | None = None,
    hue: str = "routing",
    labels: Callable[[str], str] | None = None,
    quantile: float | None = 0.99,
    log: bool = True,
    palette: Mapping[str, str] | None = None,
) -> Axes:
    """ECDF of a per-request latency for one simulator run or several.

    Parameters
    ----------
    results : SimResult, DataFrame, or mapping of name to either
        One run (its ``.requests`` frame), several to compare (e.g. one per
        routing policy), or a tidy frame with a ``hue`` column
        (:func:`inferasim.studies.compare_routing`, one trace).
    metric : {"ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"}, default "ttft_ms"
        Column of ``SimResult.requests`` (ms). Requests without a value
        (NaN: rejected requests, TPOT of one-token outputs) are left out.
    ax : matplotlib Axes, optional
    hue : str, default "routing"
        Column that names the runs in a tidy frame.
    labels : callable, optional
        Maps a run's name to its legend label.
    quantile : float or None, default 0.99
        Mark this quantile of each run with a dot and put it in the legend.
    log : bool, default True
        Log-scale latency axis.
    palette : mapping of str to colour, optional
        Colour of each run (default :func:`inferasim.style.color`).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> runs = {"a": pd.DataFrame({"ttft_ms": [10.0, 20.0, 40.0]}),
    ...         "b": pd.DataFrame({"ttft_ms": [5.0, 6.0, 7.0]})}
    >>> ax = latency_cdf(runs)
    >>> ax.get_xlabel(), [t.get_text() for t in ax.get_legend().get_texts()]
    ('TTFT (ms)', ['a (p99 39.6 ms)', 'b (p99 7.0 ms)'])
    """
    ax = _axes(ax)
    runs = _named(results, None, by=hue)
    if metric not in _LATENCY_LABELS:
        raise ValueError(f"metric must be one of {list(_LATENCY_LABELS)}, got {metric!r}")
    drawn: list[tuple[int, str | None, np.ndarray, np.ndarray, int]] = []
    finished_only = False
    for i, (name, result) in enumerate(runs):
        frame = _request_frame(result)
        if metric not in frame.columns:
            raise KeyError(f"no column {metric!r} in the request frame; have {list(frame.columns)}")
        rejected = 0
        if "status" in frame.columns:
            finished_only = True
            rejected = int((frame["status"] == "rejected").sum())
        x, y = ecdf(frame[metric].dropna().to_numpy(dtype=float))
        if x.size:
            drawn.append((i, name, x, y, rejected))
    # One unit in the legend: that of the largest quantile shown.
    qs = [float(np.quantile(x, quantile)) for _, _, x, _, _ in drawn] if quantile is not None else []
    unit = style.duration_unit(max(qs))[1] if qs else None
    for k, (i, name, x, y, rejected) in enumerate(drawn):
        text = "" if name is None else (labels(name) if labels is not None else name)
        color = (palette or {}).get(name or "") or style.color(name or "", i)
        extra = [f"{rejected:,} rejected"] if rejected else []
        line_label = text or None
        if quantile is not None:
            q = qs[k]
            stat = "; ".join([f"p{quantile * 100:g} {style.duration_text(q, unit)}", *extra])
            if text:
                line_label = f"{text} ({stat})"
                dot_label = None
            else:  # an unnamed run: the legend names the dot (its p99), not a blank line
                dot_label = stat
            ax.plot([q], [quantile], "o", color=color, ms=3.5, zorder=4, label=dot_label)
        elif extra and text:
            line_label = f"{text} ({extra[0]})"
        ax.step(*thin(x, y), where="post", color=color, label=line_label)
    if log and drawn:
        ax.set_xscale("log")
        low = min(float(x[0]) for _, _, x, _, _ in drawn)
        high = max(float(x[-1]) for _, _, x, _, _ in drawn)
        _log_ticks(ax.xaxis, low, high)
    ax.set_xlabel(_LATENCY_LABELS[metric])
    ax.set_ylabel("fraction of finished requests" if finished_only else "fraction of requests")
    ax.set_ylim(0, 1.01)
    if drawn and ax.get_legend_handles_labels()[1]:
        ax.legend(loc="lower right")
    return ax


def _log_ticks(axis: Any, low: float, high: float) -> None:
    """Readable ticks on a log axis spanning ``low`` to ``high``: plain numbers, no crowding.

    Under about a decade, ticks at 1, 2 and 5 of each decade (matplotlib would
    label its minor ticks there, overlapping); up to four decades, one tick a
    decade as ``10``, ``1,000``; beyond, powers of ten.
    """
    if not (low > 0 and high > low):
        return
    span = np.log10(high / low)
    if span > 4:
        axis.set_minor_formatter(NullFormatter())
        return
    subs = (1.0, 2.0, 5.0) if span <= 1.3 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(style.THOUSANDS)
    axis.set_minor_formatter(NullFormatter())


def quantile_dots(
    summary: pd.DataFrame,
    metric: str = "ttft_p99_ms",
    *,
    ax: Axes | None = None,
    y: str = "routing",
    hue: str = "trace",
    labels: Callable[[str], str] = style.label,
    log: bool = True,
    palette: Mapping[str, str] | None = None,
) -> Axes:
    """A dot plot of one summary number per run: categories on the y axis, values on a log x axis.

    Parameters
    ----------
    summary : DataFrame
        One row per run, e.g. :func:`inferasim.studies.routing_summary`.
    metric : str, default "ttft_p99_ms"
        The column to draw (its unit in the axis label).
    ax : matplotlib Axes, optional
    y : str, default "routing"
        Column of the categories (one row of dots each, named on the axis).
    hue : str, default "trace"
        Column of the series (one colour and marker each).
    labels : callable, default :func:`inferasim.style.label`
        Display name of a category.
    log : bool, default True
    palette : mapping of str to colour, optional
        Colour of each series (default :func:`inferasim.style.color`).

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> s = pd.DataFrame({"trace": ["a", "a", "b", "b"], "routing": ["random", "kv_cost"] * 2,
    ...                   "ttft_p99_ms": [100.0, 50.0, 200.0, 80.0]})
    >>> ax = quantile_dots(s)
    >>> [t.get_text() for t in ax.get_yticklabels()], ax.get_xlabel()
    (['random', 'cache + load cost'], 'TTFT p99 (ms)')
    """
    ax = _axes(ax)
    cats = list(dict.fromkeys(summary[y]))
    series = list(dict.fromkeys(summary[hue])) if hue in summary else [None]
    markers = ("o", "s", "^", "D")
    for k, name in enumerate(series):
        part = summary if name is None else summary[summary[hue] == name]
        pos = [cats.index(c) for c in part[y]]
        offset = (k - (len(series) - 1) / 2) * 0.18
        ax.plot(
            part[metric].to_numpy(dtype=float),
            np.asarray(pos, dtype=float) + offset,
            markers[k % len(markers)],
            ls="",
            ms=4.5,
            color=(palette or {}).get(str(name)) or style.color(str(name or ""), k),
            label=None if name is None else str(name),
        )
    ax.set_yticks(range(len(cats)), [labels(str(c)) for c in cats])
    ax.set_ylim(len(cats) - 0.5, -0.5)
    if log:
        ax.set_xscale("log")
    words = metric.removesuffix("_ms").split("_")
    unit = " (ms)" if metric.endswith("_ms") else ""
    ax.set_xlabel(" ".join([words[0].upper(), *words[1:]]) + unit)
    ax.grid(axis="y", visible=False)
    _legend(ax, loc="best")
    return ax


def measured_vs_simulated(
    comparison: pd.DataFrame,
    *,
    metrics: list[str] | None = None,
    ax: Axes | None = None,
    log: bool = True,
) -> Axes:
    """Measured and simulated statistics side by side: one row per metric and statistic.

    A filled dot is the measured value, an open one the simulated, joined by
    a line whose length is the error; each row is labelled with the relative
    error.

    Parameters
    ----------
    comparison : DataFrame
        The tidy frame of :func:`inferasim.compare` (its ``per_request``
        rows are left out).
    metrics : list of str, optional
        Which metrics to draw (default all of the frame's, in order).
    ax : matplotlib Axes, optional
    log : bool, default True
        A log x axis.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> cmp = pd.DataFrame({"metric": ["ttft_ms", "ttft_ms"], "stat": ["p50", "p99"],
    ...                     "measured": [10.0, 40.0], "simulated": [12.0, 36.0],
    ...                     "rel_error": [0.2, -0.1]})
    >>> ax = measured_vs_simulated(cmp)
    >>> [t.get_text() for t in ax.get_yticklabels()], ax.get_xlabel()
    (['TTFT p50 (+20%)', 'TTFT p99 (-10%)'], 'latency (ms)')
    """
    ax = _axes(ax)
    rows = comparison[comparison["stat"] != "per_request"]
    if metrics is not None:
        rows = rows[rows["metric"].isin(metrics)]
    y = np.arange(len(rows), dtype=float)
    meas = rows["measured"].to_numpy(dtype=float)
    sim = rows["simulated"].to_numpy(dtype=float)
    ax.hlines(y, np.fmin(meas, sim), np.fmax(meas, sim), color="0.6", lw=1)
    ax.plot(meas, y, "o", color=style.color("measured", 0), ms=5, label="measured")
    ax.plot(sim, y, "o", mfc="none", color=style.color("simulated", 1), ms=5, label="simulated")
    labels = []
    for m, st, rel in zip(rows["metric"], rows["stat"], rows["rel_error"], strict=True):
        words = str(m).removesuffix("_ms").split("_")
        labels.append(f"{words[0].upper()} {st} ({float(rel):+.0%})")
    ax.set_yticks(y, labels)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.grid(axis="y", visible=False)
    _legend(ax, loc="best")
    return ax


def replica_load(
    result: Any,
    metric: str = "requests",
    *,
    ax: Axes | None = None,
    color: str | None = None,
    replicas: int | None = None,
    show_rejected: bool = True,
) -> Axes:
    """Bar chart of the load each replica received in one simulator run.

    Parameters
    ----------
    result : SimResult or a request frame
        ``SimResult``, its ``.requests``, or one run of
        :func:`inferasim.studies.compare_routing`.
    metric : {"requests", "input_tokens", "computed_prefill_tokens", "cached_tokens"}
        What to count per replica: requests, or the sum of prompt tokens,
        of computed (uncached) prefill tokens, or of cached prompt tokens.
        Rejected requests (replica -1) are left out.
    ax : matplotlib Axes, optional
    color : str, optional
    replicas : int, optional
        Fleet size, so idle replicas show as empty slots (default: from the
        result's replica frame, the frame's ``replicas`` column, or the
        highest replica seen).
    show_rejected : bool, default True
        With ``metric="requests"``, a hatched bar labelled ``rejected`` after
        the replicas counts the requests no replica took (rejected before
        routing), so the bars add up to every request of the run.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> req = pd.DataFrame({"replica": [0, 0, 1, -1], "input_len": [10, 20, 30, 5]})
    >>> ax = replica_load(req, "input_tokens", replicas=3)
    >>> [float(p.get_height()) for p in ax.patches]
    [30.0, 30.0, 0.0]
    >>> ax = replica_load(req, replicas=3)  # 2 + 0 + 1 routed, 1 rejected
    >>> [float(p.get_height()) for p in ax.patches], ax.get_xticklabels()[-1].get_text()
    ([2.0, 1.0, 0.0, 1.0], 'rejected')
    """
    ax = _axes(ax)
    frame = _request_frame(result)
    rejected = int((frame["replica"] < 0).sum())
    frame = frame[frame["replica"] >= 0]
    column = {"input_tokens": "input_len"}.get(metric, metric)
    if metric == "requests":
        per = frame.groupby("replica").size()
    elif metric in _LOAD_LABELS and column in frame.columns:
        per = frame.groupby("replica")[column].sum()
    else:
        raise ValueError(f"metric must be one of {list(_LOAD_LABELS)}, got {metric!r}")
    fleet = getattr(result, "replicas", None)
    if replicas is not None:
        n = int(replicas)
    elif isinstance(fleet, pd.DataFrame) and len(fleet):
        n = len(fleet)
    elif "replicas" in frame.columns and len(frame):
        n = int(frame["replicas"].iloc[0])
    else:
        n = int(per.index.max()) + 1 if len(per) else 0
    per = per.reindex(range(n), fill_value=0)
    ax.bar(
        per.index.to_numpy(),
        per.to_numpy(dtype=float),
        color=color or style.color("lru"),
        width=0.8,
    )
    ax.set_xlabel("replica")
    ax.set_ylabel(_LOAD_LABELS[metric])
    if n <= 12:
        ax.set_xticks(range(n))
    if rejected and metric == "requests" and show_rejected:
        # the requests no replica took, beside them: the bars add up to the workload
        ax.bar([n + 0.5], [rejected], color="white", edgecolor="0.35", hatch="////", width=0.8)
        ticks = list(range(n)) if n <= 12 else [t for t in ax.get_xticks() if 0 <= t < n]
        ax.set_xticks([*ticks, n + 0.5], [*(f"{t:g}" for t in ticks), "rejected"])
    return ax


# ==================================================================== studies
#: Bar colours of the placement rules of :func:`local_vs_pooled` (one colour per rule).
PLACEMENT_COLORS: dict[str, str] = {
    "random": "0.55",
    "round_robin": style.OKABE_ITO["sky"],
    "hash_first_block": style.OKABE_ITO["yellow"],
}


def local_vs_pooled(
    table: pd.DataFrame,
    routing: pd.DataFrame | None = None,
    *,
    ax: Axes | None = None,
    labels: Callable[[str], str] = style.label,
) -> Axes:
    """Bars of token hit ratio: local caches by placement rule (and by routing), then the pooled cache.

    Parameters
    ----------
    table : DataFrame
        One trace of :func:`inferasim.studies.local_vs_pooled`.
    routing : DataFrame, optional
        The same trace of :func:`inferasim.studies.routing_summary`: one
        solid bar per routing policy (the simulated fleet's local caches).
    ax : matplotlib Axes, optional
    labels : callable, default :func:`inferasim.style.label`

    Returns
    -------
    matplotlib.axes.Axes
        Hatched bars: placement rules (one fixed colour each); solid bars:
        routing policies; black: the pooled cache; dotted: the ceiling.

    Examples
    --------
    >>> t = pd.DataFrame({"cache": ["local", "pooled"], "placement": ["random", "any"],
    ...                   "token_hit_ratio": [0.3, 0.5], "ceiling_token_hit_ratio": 0.6})
    >>> r = pd.DataFrame({"routing": ["kv_cost"], "token_hit_ratio": [0.4]})
    >>> [round(float(p.get_height()), 2) for p in local_vs_pooled(t, r).patches]
    [0.3, 0.4, 0.5]
    """
    ax = _axes(ax)
    local = table[table["cache"] == "local"]
    names = [labels(p) for p in local["placement"]]
    values = local["token_hit_ratio"].tolist()
    colors = [PLACEMENT_COLORS.get(p, style.color(p, j)) for j, p in enumerate(local["placement"])]
    hatches = ["///"] * len(names)
    split = [len(names)]
    if routing is not None:
        for j, r in enumerate(routing.itertuples()):
            names.append(labels(r.routing))
            values.append(r.token_hit_ratio)
            colors.append(style.color(r.routing, j))
            hatches.append("")
        split.append(len(names))
    pooled = table[table["cache"] == "pooled"]
    if len(pooled):
        names.append("pooled cache")
        values.append(float(pooled["token_hit_ratio"].iloc[0]))
        colors.append(style.OKABE_ITO["black"])
        hatches.append("")
    x = np.arange(len(names), dtype=float)
    for cut in split:  # gaps between the groups
        x[cut:] += 0.6
    bars = ax.bar(x, values, 0.8, color=colors, edgecolor="white", linewidth=0.3)
    for bar, hatch in zip(bars, hatches, strict=True):
        bar.set_hatch(hatch)
    ceiling = float(table["ceiling_token_hit_ratio"].iloc[0])
    ax.axhline(ceiling, color="0.2", ls=":", lw=0.9)
    ax.text(x[0] - 0.45, ceiling + 0.015, f"ceiling {ceiling:.0%}", ha="left", fontsize=6.5)
    for xi, v in zip(x, values, strict=True):
        ax.text(xi, v + 0.01, f"{v:.0%}", ha="center", va="bottom", fontsize=5.5)
    groups = [(0, split[0], "placement\n(replay)")]
    if routing is not None:
        groups.append((split[0], split[1], "routing\n(simulated)"))
    for a, b, text in groups:
        if b > a:
            mid = (x[a] + x[b - 1]) / 2
            ax.text(mid, 0.97, text, ha="center", va="top", fontsize=6.5, color="0.3")
    ax.set_xticks(x, names, rotation=40, ha="right", rotation_mode="anchor")
    ax.set_ylabel("token hit ratio")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(0, 1)
    ax.grid(axis="x", visible=False)
    return ax


def teaching(
    table: pd.DataFrame,
    what: str = "hit",
    *,
    ax: Axes | None = None,
    axis_label: str | None = None,
    log_x: bool = False,
    cache_label: str = "LRU cache",
) -> Axes:
    """One teaching experiment against its knob: hit ratios (``"hit"``) or TTFT p50/p99 (``"ttft"``).

    Parameters
    ----------
    table : DataFrame
        :func:`inferasim.studies.teaching`.
    what : {"hit", "ttft"}, default "hit"
        ``"hit"``: the simulated cache's token hit ratio and the infinite
        cache's (dotted); ``"ttft"``: TTFT p50 and p99 (ms, log y).
    ax : matplotlib Axes, optional
    axis_label : str, optional
        Label of the knob axis (default: the ``knob`` column).
    log_x : bool, default False
    cache_label : str, default "LRU cache"
        Legend label of the simulated cache.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> t = pd.DataFrame({"knob": "prefix_zipf", "value": [1, 2],
    ...                   "infinite_token_hit_ratio": [0.5, 0.6], "token_hit_ratio": [0.4, 0.5],
    ...                   "ttft_p50_ms": [10, 9], "ttft_p99_ms": [40, 30]})
    >>> teaching(t, "ttft").get_ylabel(), teaching(t).get_xlabel()
    ('TTFT (ms)', 'prefix_zipf')
    """
    if what not in ("hit", "ttft"):
        raise ValueError(f"what must be 'hit' or 'ttft', got {what!r}")
    ax = _axes(ax)
    x = table["value"].to_numpy(dtype=float)
    if what == "hit":
        ax.plot(
            x,
            table["infinite_token_hit_ratio"],
            ls=":",
            marker="o",
            color="0.3",
            label="infinite cache",
        )
        ax.plot(x, table["token_hit_ratio"], marker="o", color=style.color("lru"), label=cache_label)
        ax.set_ylabel("token hit ratio")
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylim(0, 1)
    else:
        ax.plot(x, table["ttft_p50_ms"], marker="o", color=style.color("kv_cost"), label="p50")
        ax.plot(
            x, table["ttft_p99_ms"], marker="s", color=style.color("cache_aware"), label="p99"
        )
        ax.set_ylabel("TTFT (ms)")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.legend(loc="best")
    knob = str(table["knob"].iloc[0]) if "knob" in table and len(table) else "value"
    ax.set_xlabel(axis_label or knob)
    if log_x:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_minor_locator(LogLocator(subs=()))
    ax.set_xticks(x, [f"{v:,g}" for v in x])  # ticks at the swept values only (1,024)
    return ax


# Former names, kept so existing notebooks and code keep working.
plot_hit_rate_curve = hit_rate
plot_popularity = popularity
plot_reuse_distance_cdf = reuse_distance
plot_sessions = sessions
plot_latency_cdf = latency_cdf
plot_replica_load = replica_load
