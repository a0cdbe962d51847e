"""Plot helpers for notebooks: each takes ``ax=None``, returns the Axes and labels units.

Sections
--------
* Reuse analysis (:mod:`inferasim.reuse` results): hit rate against
  capacity, popularity rank plot, reuse-distance CDF, session structure.
* Simulator results: added by the simulator's plotting helpers.

Every helper accepts one result or a mapping ``{label: result}`` to draw
several traces (or policies) on one axes. Colours follow
:func:`inferasim.style.color`, so LRU and the conversation trace look the
same in every figure.

Examples
--------
>>> from inferasim import Workload
>>> from inferasim.reuse import hit_rate_curve
>>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 2]])
>>> ax = plot_hit_rate_curve(hit_rate_curve(wl, [1, 2]))
>>> ax.get_xlabel(), ax.get_ylabel()
('cache capacity (tokens)', 'token hit ratio')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import PercentFormatter

from inferasim import style

__all__ = [
    "plot_hit_rate_curve",
    "plot_popularity",
    "plot_reuse_distance_cdf",
    "plot_sessions",
]

T = TypeVar("T")


# ===================================================================== shared
def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.figure().add_subplot()


def _named(data: T | Mapping[str, T], label: str | None) -> list[tuple[str | None, T]]:
    """``[(label, item), ...]`` from one item or a mapping of them."""
    if isinstance(data, Mapping):
        return [(str(k), v) for k, v in data.items()]
    return [(label, data)]


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(np.asarray(values, dtype=float))
    return x, np.arange(1, x.size + 1) / max(x.size, 1)


# ============================================================== reuse analysis
def plot_hit_rate_curve(
    curves: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    ax: Axes | None = None,
    x: str = "tokens",
    ratio: str = "token",
    label: str | None = None,
    secondary_axis: bool = True,
    **line_kw: Any,
) -> Axes:
    """Hit ratio against cache capacity on a log axis.

    Parameters
    ----------
    curves : DataFrame or mapping of str to DataFrame
        Frames of :func:`inferasim.reuse.hit_rate_curve`; one line per
        frame and per ``policy`` inside it (a mapping labels the traces).
        Concatenate curves of several policies to draw them together.
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
    >>> ax = plot_hit_rate_curve({"demo": both}, x="blocks", ratio="block")
    >>> [line.get_label() for line in ax.get_lines()], ax.get_xscale()
    (['demo lru', 'demo opt'], 'log')
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
            text = " ".join(str(v) for v in (name, policy if show_policy else None) if v)
            by_policy = len(policies) > 1 or name is None
            key, index = (str(policy), p) if by_policy else (str(name), t)
            kw: dict[str, Any] = {"color": style.color(key, index)}
            if by_policy and len(items) > 1:
                kw["linestyle"] = styles[t % len(styles)]
            if policy is not None and policy != "lru":
                kw["marker"] = style.marker(str(policy))
            ax.plot(part[xcol], part[ycol], label=text or None, **{**kw, **line_kw})
    ax.set_xscale("log")
    ax.set_xlabel(f"cache capacity ({x})")
    ax.set_ylabel(f"{ratio} hit ratio")
    ax.set_ylim(0, 1)
    if secondary_axis and len(sizes) == 1:
        bs = float(sizes.pop())
        other = "blocks" if x == "tokens" else "tokens"
        scale = 1 / bs if x == "tokens" else bs
        top = ax.secondary_xaxis("top", functions=(lambda v: v * scale, lambda v: v / scale))
        top.set_xlabel(f"cache capacity ({other})")
    if any(not str(line.get_label()).startswith("_") for line in ax.get_lines()):
        ax.legend()
    return ax


def plot_popularity(
    popularities: Any,
    *,
    ax: Axes | None = None,
    label: str | None = None,
    fit: bool = True,
    **line_kw: Any,
) -> Axes:
    """Rank-frequency plot of block popularity (log-log) with the fitted Zipf line.

    Parameters
    ----------
    popularities : Popularity or mapping of str to Popularity
        Results of :func:`inferasim.reuse.popularity`.
    ax : matplotlib Axes, optional
    label : str, optional
        Legend label of a single result.
    fit : bool, default True
        Draw ``C * rank ** -s`` dashed, with ``s`` in the legend.
    **line_kw
        Passed to ``Axes.plot``.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse import popularity
    >>> wl = Workload.from_requests([0, 1, 2], [2, 2, 2], [1] * 3,
    ...                             [[1, 2], [1, 3], [1, 2]], block_size=1)
    >>> ax = plot_popularity(popularity(wl), label="demo")
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('block rank', 'requests per block')
    """
    ax = _axes(ax)
    for i, (name, pop) in enumerate(_named(popularities, label)):
        colour = style.color(name or "", i)
        freq = pop.blocks["requests"].to_numpy()
        ranks = pop.blocks["rank"].to_numpy()
        ax.plot(ranks, freq, label=name, **{"color": colour, **line_kw})
        if fit and np.isfinite(pop.zipf_exponent):
            top = int((freq >= 2).sum())
            r = np.geomspace(1, max(top, 1), 50)
            ax.plot(
                r,
                pop.zipf_constant * r**-pop.zipf_exponent,
                linestyle="--",
                linewidth=0.8,
                color=colour,
                label=f"Zipf s={pop.zipf_exponent:.2f}" + (f" ({name})" if name else ""),
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("block rank")
    ax.set_ylabel("requests per block")
    if any(not str(line.get_label()).startswith("_") for line in ax.get_lines()):
        ax.legend()
    return ax


def plot_reuse_distance_cdf(
    distances: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    ax: Axes | None = None,
    kind: str = "stack",
    label: str | None = None,
    block_size: int | None = None,
    **line_kw: Any,
) -> Axes:
    """CDF of reuse distances (log x).

    Parameters
    ----------
    distances : DataFrame or mapping of str to DataFrame
        Frames of :func:`inferasim.reuse.reuse_distance`.
    ax : matplotlib Axes, optional
    kind : {"stack", "time"}, default "stack"
        LRU stack distance (blocks, or tokens with ``block_size``) or time
        since the previous use (seconds).
    label : str, optional
        Legend label of a single frame.
    block_size : int, optional
        Draw stack distances in tokens (distance times ``block_size``).
    **line_kw
        Passed to ``Axes.step``.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse import reuse_distance
    >>> wl = Workload.from_requests([0, 1000, 3000], [2, 1, 2], [1] * 3,
    ...                             [[1, 2], [5], [1, 2]], block_size=1)
    >>> plot_reuse_distance_cdf(reuse_distance(wl), kind="time").get_xlabel()
    'time since previous use (s)'
    """
    if kind not in ("stack", "time"):
        raise ValueError(f"kind must be 'stack' or 'time', got {kind!r}")
    ax = _axes(ax)
    for i, (name, frame) in enumerate(_named(distances, label)):
        if kind == "stack":
            values = frame["stack_distance"].to_numpy(dtype=float) * (block_size or 1)
        else:
            # a reuse in the same millisecond would vanish on a log axis
            values = np.maximum(frame["time_since_ms"].to_numpy(dtype=float), 1.0) / 1000.0
        if values.size == 0:
            continue
        xs, ys = _ecdf(values)
        ax.step(
            xs, ys, where="post", label=name, **{"color": style.color(name or "", i), **line_kw}
        )
    ax.set_xscale("log")
    if kind == "stack":
        ax.set_xlabel(f"LRU stack distance ({'tokens' if block_size else 'blocks'})")
    else:
        ax.set_xlabel("time since previous use (s)")
    ax.set_ylabel("fraction of re-references")
    ax.set_ylim(0, 1.01)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    if any(name for name, _ in _named(distances, label)):
        ax.legend()
    return ax


def plot_sessions(
    sessions: Any,
    *,
    ax: Axes | None = None,
    kind: str = "turns",
    label: str | None = None,
    **line_kw: Any,
) -> Axes:
    """Multi-turn structure from :func:`inferasim.reuse.sessions`.

    Parameters
    ----------
    sessions : Sessions or mapping of str to Sessions
    ax : matplotlib Axes, optional
    kind : {"turns", "gap", "growth"}, default "turns"
        ``"turns"``: share of chains by number of turns (log-log);
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
    >>> from inferasim.reuse import sessions
    >>> wl = Workload.from_requests([0, 2000], [4, 9], [1, 1], [[1, 2], [1, 2, 3, 4, 5]],
    ...                             block_size=2)
    >>> plot_sessions(sessions(wl), kind="growth").get_ylabel()
    'prompt tokens added (median)'
    """
    if kind not in ("turns", "gap", "growth"):
        raise ValueError(f"kind must be 'turns', 'gap' or 'growth', got {kind!r}")
    ax = _axes(ax)
    items = _named(sessions, label)
    for i, (name, s) in enumerate(items):
        kw = {"color": style.color(name or "", i), **line_kw}
        if kind == "turns":
            share = s.sessions["turns"].value_counts(normalize=True).sort_index()
            ax.plot(share.index, share.to_numpy(), marker="o", label=name, **kw)
        elif kind == "gap":
            gaps = s.requests["gap_ms"].dropna().to_numpy() / 1000.0
            if gaps.size:
                xs, ys = _ecdf(np.maximum(gaps, 1e-3))
                ax.step(xs, ys, where="post", label=name, **kw)
        else:
            linked = s.requests.dropna(subset=["growth_tokens"])
            med = linked.groupby("turn")["growth_tokens"].median()
            ax.plot(med.index, med.to_numpy(), marker="o", label=name, **kw)
    if kind == "turns":
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("turns per session")
        ax.set_ylabel("share of sessions")
    elif kind == "gap":
        ax.set_xscale("log")
        ax.set_xlabel("time between turns (s)")
        ax.set_ylabel("fraction of follow-up turns")
        ax.set_ylim(0, 1.01)
    else:
        ax.set_xlabel("turn")
        ax.set_ylabel("prompt tokens added (median)")
    if any(name for name, _ in items):
        ax.legend()
    return ax


# ============================================================ simulator results
