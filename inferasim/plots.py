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

from collections.abc import Callable, Mapping
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
# Per-request latency distributions and per-replica load of
# :class:`inferasim.sim.SimResult` runs.

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


def _duration(ms: float) -> str:
    """A latency for a legend: ``7.0 ms``, ``7,067 ms``, ``3,970 s``."""
    if ms >= 10_000:
        return f"{ms / 1000:,.0f} s"
    if ms >= 100:
        return f"{ms:,.0f} ms"
    return f"{ms:.1f} ms"


def plot_latency_cdf(
    results: Any,
    metric: str = "ttft_ms",
    *,
    ax: Axes | None = None,
    labels: Callable[[str], str] | None = None,
    quantile: float | None = 0.99,
    log: bool = True,
) -> Axes:
    """ECDF of a per-request latency for one simulator run or several.

    Parameters
    ----------
    results : SimResult, DataFrame, or mapping of name to either
        One run (its ``.requests`` frame), or several to compare, e.g. one
        per routing policy.
    metric : {"ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"}, default "ttft_ms"
        Column of ``SimResult.requests`` (ms). Requests without a value
        (NaN: rejected requests, TPOT of one-token outputs) are left out.
    ax : matplotlib Axes, optional
    labels : callable, optional
        Maps a run's name to its legend label.
    quantile : float or None, default 0.99
        Mark this quantile of each run with a dot and put it in the legend.
    log : bool, default True
        Log-scale latency axis.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import pandas as pd
    >>> runs = {"a": pd.DataFrame({"ttft_ms": [10.0, 20.0, 40.0]}),
    ...         "b": pd.DataFrame({"ttft_ms": [5.0, 6.0, 7.0]})}
    >>> ax = plot_latency_cdf(runs)
    >>> ax.get_xlabel(), [t.get_text() for t in ax.get_legend().get_texts()]
    ('TTFT (ms)', ['a (p99 39.6 ms)', 'b (p99 7.0 ms)'])
    """
    ax = _axes(ax)
    runs = _named(results, None)
    if metric not in _LATENCY_LABELS:
        raise ValueError(f"metric must be one of {list(_LATENCY_LABELS)}, got {metric!r}")
    drawn = False
    for i, (name, result) in enumerate(runs):
        frame = _request_frame(result)
        if metric not in frame.columns:
            raise KeyError(f"no column {metric!r} in the request frame; have {list(frame.columns)}")
        x, y = _ecdf(frame[metric].dropna().to_numpy(dtype=float))
        if x.size == 0:
            continue
        text = "" if name is None else (labels(name) if labels is not None else name)
        color = style.color(name or "", i)
        if quantile is not None:
            q = float(np.quantile(x, quantile))
            text = f"{text} (p{quantile * 100:g} {_duration(q)})".strip()
            ax.plot([q], [quantile], "o", color=color, ms=3.5, zorder=4)
        ax.step(x, y, where="post", color=color, label=text or None)
        drawn = True
    if log and drawn:
        ax.set_xscale("log")
    ax.set_xlabel(_LATENCY_LABELS[metric])
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.01)
    if drawn and (len(runs) > 1 or runs[0][0] is not None or quantile is not None):
        ax.legend(loc="lower right")
    return ax


def plot_replica_load(
    result: Any,
    metric: str = "requests",
    *,
    ax: Axes | None = None,
    color: str | None = None,
) -> Axes:
    """Bar chart of the load each replica received in one simulator run.

    Parameters
    ----------
    result : SimResult or its ``.requests`` DataFrame
    metric : {"requests", "input_tokens", "computed_prefill_tokens", "cached_tokens"}
        What to count per replica: requests, or the sum of prompt tokens,
        of computed (uncached) prefill tokens, or of cached prompt tokens.
        Rejected requests (replica -1) are left out.
    ax : matplotlib Axes, optional
    color : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import pandas as pd
    >>> req = pd.DataFrame({"replica": [0, 0, 1, -1], "input_len": [10, 20, 30, 5]})
    >>> ax = plot_replica_load(req, "input_tokens")
    >>> [float(p.get_height()) for p in ax.patches]
    [30.0, 30.0]
    """
    ax = _axes(ax)
    frame = _request_frame(result)
    frame = frame[frame["replica"] >= 0]
    column = {"input_tokens": "input_len"}.get(metric, metric)
    if metric == "requests":
        per = frame.groupby("replica").size()
    elif metric in _LOAD_LABELS and column in frame.columns:
        per = frame.groupby("replica")[column].sum()
    else:
        raise ValueError(f"metric must be one of {list(_LOAD_LABELS)}, got {metric!r}")
    replicas = getattr(result, "replicas", None)
    if isinstance(replicas, pd.DataFrame) and len(replicas):
        n = len(replicas)
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
    return ax


__all__ += ["plot_latency_cdf", "plot_replica_load"]
