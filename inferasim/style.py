"""Paper style for inferasim figures: fonts, sizes, a colour-blind-safe palette.

Every figure of the notebooks and of ``inferasim figures`` is drawn inside
:func:`context` (or after :func:`use`), so they share one look: the Okabe-Ito palette (safe for
the common colour-vision deficiencies), 8-9 pt fonts at print size, light
grids, no top/right spines, and figure sizes that fit a two-column paper
(:data:`SINGLE` column, :data:`DOUBLE` column). The plotting functions of
:mod:`inferasim.plots` never set the style themselves: a notebook calls
:func:`use` once, a script draws inside ``with style.context():``.
:func:`save_figure` writes PDF and PNG at :data:`DPI` deterministically (no
creation date, fixed hash salt), so regenerating a figure from the same data
gives byte-identical files.

The display names of policies (:func:`label`) and the token-count axis
formatter (:data:`TOKENS`) live here too, so plots, widgets and figures share
them without importing each other.

Examples
--------
>>> import matplotlib.pyplot as plt
>>> with context():
...     fig, ax = plt.subplots(figsize=SINGLE)
...     _ = ax.plot([0, 1], [0, 1], color=color("lru"))
>>> plt.close(fig)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

__all__ = [
    "OKABE_ITO",
    "SINGLE",
    "DOUBLE",
    "DOUBLE_TALL",
    "RC_PARAMS",
    "DPI",
    "LABELS",
    "TOKENS",
    "THOUSANDS",
    "color",
    "duration_text",
    "group_thousands",
    "thousands_text",
    "context",
    "figure",
    "label",
    "marker",
    "paper_style",
    "save_figure",
    "tokens_text",
    "two_lines",
    "use",
]

#: The Okabe-Ito palette (Okabe & Ito 2008), black last.
OKABE_ITO: dict[str, str] = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
}

#: Figure sizes in inches: one column, two columns, two columns with two rows.
SINGLE: tuple[float, float] = (3.4, 2.4)
DOUBLE: tuple[float, float] = (7.0, 2.6)
DOUBLE_TALL: tuple[float, float] = (7.0, 4.8)

# Fixed colours for the things that recur across figures, so LRU is the same
# blue in every plot and the conversation trace the same orange.
_NAMED: dict[str, str] = {
    # eviction policies
    "lru": OKABE_ITO["blue"],
    "fifo": OKABE_ITO["orange"],
    "lfu": OKABE_ITO["green"],
    "opt": OKABE_ITO["black"],
    # traces
    "conversation": OKABE_ITO["blue"],
    "synthetic": OKABE_ITO["vermillion"],
    "toolagent": OKABE_ITO["green"],
    # routing policies
    "round_robin": OKABE_ITO["sky"],
    "random": OKABE_ITO["orange"],
    "least_loaded": OKABE_ITO["green"],
    "cache_aware": OKABE_ITO["vermillion"],
    "longest_match": OKABE_ITO["purple"],
    "kv_cost": OKABE_ITO["blue"],
    # local vs global
    "local": OKABE_ITO["vermillion"],
    "global": OKABE_ITO["blue"],
}
_CYCLE = [OKABE_ITO[k] for k in ("blue", "orange", "green", "vermillion", "sky", "purple", "black")]
_MARKERS = {"lru": "o", "fifo": "s", "lfu": "^", "opt": "D"}

#: Resolution of saved raster files (PNG), dots per inch.
DPI: int = 200

#: Matplotlib rc parameters of the paper style.
RC_PARAMS: dict[str, Any] = {
    "figure.figsize": SINGLE,
    "figure.dpi": 100,
    "savefig.dpi": DPI,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.03,
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "axes.prop_cycle": mpl.cycler(color=_CYCLE),
    "pdf.fonttype": 42,
    "svg.hashsalt": "inferasim",
    "path.simplify": True,
    "figure.constrained_layout.use": True,
}


def color(name: str, index: int = 0) -> str:
    """The palette colour of a named policy, trace or routing rule.

    Unknown names get the ``index``-th colour of the cycle, so a user's own
    routing function still gets a stable colour.

    Parameters
    ----------
    name : str
        ``"lru"``, ``"conversation"``, ``"cache_aware"``, ...
    index : int, default 0
        Fallback position in the palette cycle.

    Returns
    -------
    str
        A hex colour.

    Examples
    --------
    >>> color("lru"), color("my_router", 1)
    ('#0072B2', '#E69F00')
    """
    return _NAMED.get(str(name).lower(), _CYCLE[index % len(_CYCLE)])


def marker(name: str) -> str:
    """The marker of an eviction policy (``"o"`` for anything else).

    Examples
    --------
    >>> marker("opt")
    'D'
    """
    return _MARKERS.get(str(name).lower(), "o")


#: Display names of eviction policies, routing policies and placement rules.
LABELS: dict[str, str] = {
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
    """Display label of a policy or routing name (the name itself when unknown).

    Examples
    --------
    >>> label("kv_cost"), label("mine")
    ('cache + load cost', 'mine')
    """
    return LABELS.get(name, name)


def two_lines(text: str, width: int = 13) -> str:
    """Break a long title at the space nearest its middle.

    Examples
    --------
    >>> two_lines("cache + load cost"), two_lines("random")
    ('cache +\\nload cost', 'random')
    """
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    if len(text) <= width or not spaces:
        return text
    cut = min(spaces, key=lambda i: abs(i - len(text) / 2))
    return text[:cut] + "\n" + text[cut + 1 :]


def tokens_text(x: float, _pos: Any = None) -> str:
    """A token count with a k/M/G suffix, for axis ticks and annotations.

    Examples
    --------
    >>> tokens_text(3_000_000), tokens_text(2_999_808), tokens_text(1500), tokens_text(12)
    ('3M', '3M', '1.5k', '12')
    """
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            text = f"{x / scale:.1f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return f"{x:.0f}"


#: Tick formatter for token counts (``3M``, ``10k``).
TOKENS = FuncFormatter(tokens_text)


def thousands_text(x: float, _pos: Any = None) -> str:
    """A tick value with thousands separators: ``12,500``, ``1,000``, ``0.5``.

    Examples
    --------
    >>> [thousands_text(v) for v in (12500.0, 1000.0, 0.5, 0.0, -2000.0)]
    ['12,500', '1,000', '0.5', '0', '-2,000']
    """
    if float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:,.6g}" if abs(x) < 1000 else f"{x:,.1f}"


def duration_unit(ms: float) -> tuple[float, str]:
    """The unit (divisor from ms, name) a latency of ``ms`` reads best in: ms below 10 s, s above.

    Examples
    --------
    >>> duration_unit(5_780.0), duration_unit(1_193_000.0)
    ((1.0, 'ms'), (1000.0, 's'))
    """
    return (1000.0, "s") if abs(ms) >= 10_000 else (1.0, "ms")


def duration_text(ms: float, unit: str | None = None) -> str:
    """A latency in ``unit`` (``"ms"`` or ``"s"``; default the one :func:`duration_unit` picks).

    Give several latencies shown together (one legend) the same ``unit``:
    the unit of the largest.

    Examples
    --------
    >>> duration_text(7.04), duration_text(5_780.4), duration_text(1_193_123.0)
    ('7.0 ms', '5,780 ms', '1,193 s')
    >>> duration_text(2_361.0, unit="s"), duration_text(0.42, unit="s")
    ('2.4 s', '0.0004 s')
    """
    scale, name = (1000.0, "s") if unit == "s" else (1.0, "ms") if unit == "ms" else duration_unit(ms)
    v = ms / scale
    if abs(v) >= 100:
        return f"{v:,.0f} {name}"
    if abs(v) >= 0.1 or v == 0:
        return f"{v:.1f} {name}"
    return f"{v:.2g} {name}"


#: Tick formatter with thousands separators (linear count axes, plain log axes).
THOUSANDS = FuncFormatter(thousands_text)


def group_thousands(fig: Any) -> None:
    """Give every linear axis of ``fig`` still on matplotlib's default formatter thousands separators.

    Axes with their own formatter (percentages, token counts) and axes
    whose range stays below 1,000 keep theirs; the default
    (``ScalarFormatter``) would print ``12500`` or switch to an offset. Called by :func:`save_figure` and the widgets before drawing.

    Examples
    --------
    >>> fig, axes = figure((3.0, 2.0))
    >>> _ = axes[0, 0].bar([0, 1], [12_500, 3_000])
    >>> group_thousands(fig)
    >>> fig.canvas.draw()
    >>> [t.get_text() for t in axes[0, 0].get_yticklabels()]
    ['0', '5,000', '10,000', '15,000']
    """
    from matplotlib.ticker import ScalarFormatter

    for ax in fig.axes:
        for axis, lims in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if (
                axis.get_scale() == "linear"
                and type(axis.get_major_formatter()) is ScalarFormatter
                and max(abs(v) for v in lims) >= 1000  # below, no separator to add
            ):
                axis.set_major_formatter(THOUSANDS)


def use(**overrides: Any) -> None:
    """Switch matplotlib to the paper style for the rest of the session (a notebook's first cell).

    Parameters
    ----------
    **overrides
        Extra rc parameters, e.g. ``**{"font.size": 9}``.

    Examples
    --------
    >>> import matplotlib as mpl
    >>> with mpl.rc_context():  # keep the doctest session unchanged
    ...     use()
    ...     mpl.rcParams["savefig.dpi"]
    200.0
    """
    mpl.rcParams.update({**RC_PARAMS, **overrides})


@contextmanager
def context(**overrides: Any) -> Iterator[None]:
    """Draw (and save) inside this context to get the paper style; the old settings come back after.

    Parameters
    ----------
    **overrides
        Extra rc parameters, e.g. ``**{"font.size": 9}``.

    Examples
    --------
    >>> import matplotlib as mpl
    >>> with context(**{"font.size": 9}):
    ...     mpl.rcParams["font.size"]
    9.0
    """
    params = {**RC_PARAMS, **overrides}
    with mpl.rc_context(params):
        yield


#: Former name of :func:`context`.
paper_style = context


def figure(
    size: tuple[float, float] = SINGLE, ncols: int = 1, nrows: int = 1, **subplots_kw: Any
) -> tuple[Figure, Any]:
    """A new figure (no pyplot state) and its axes as a 2-D array, in the paper style.

    The figure uses constrained layout; nothing is registered with pyplot, so
    a notebook shows it once, when it is the cell's value.

    Parameters
    ----------
    size : (float, float), default SINGLE
        Width and height in inches.
    ncols, nrows : int, default 1
    **subplots_kw
        Passed to :meth:`matplotlib.figure.Figure.subplots` (``sharey=True``...).

    Returns
    -------
    (Figure, numpy.ndarray of Axes)

    Examples
    --------
    >>> fig, axes = figure(DOUBLE, ncols=2)
    >>> axes.shape, float(fig.get_figwidth())
    ((1, 2), 7.0)
    """
    with context():
        fig = Figure(figsize=size, layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, **subplots_kw)
    return fig, axes


def save_figure(
    fig: Figure,
    out_dir: str | Path,
    name: str,
    *,
    formats: tuple[str, ...] = ("pdf", "png"),
    dpi: int = DPI,
) -> list[Path]:
    """Write ``fig`` as ``out_dir/name.<fmt>`` for each format, deterministically, in the paper style.

    PDF files carry no creation date and the producer is fixed; PNG files
    carry no software tag; so the same figure gives the same bytes. Raster
    files are written at ``dpi`` whatever the caller's rc settings (the
    figure's own ``dpi`` is only its screen resolution): a 7 x 2.6 in figure
    is a 1400 x 520 pixel PNG.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    out_dir : str or Path
        Created if missing.
    name : str
        File stem.
    formats : tuple of str, default ("pdf", "png")
    dpi : int, default DPI (200)
        Resolution of PNG files; the PNG records it.

    Returns
    -------
    list of Path
        The files written.

    Examples
    --------
    >>> import tempfile
    >>> fig, _ = figure((2.0, 1.0))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     [p.name for p in save_figure(fig, d, "demo")]
    ['demo.pdf', 'demo.png']
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metadata = {
        "pdf": {
            "CreationDate": None,
            "ModDate": None,
            "Producer": "inferasim",
            "Creator": "inferasim",
        },
        "png": {"Software": None},
        "svg": {"Date": None},
    }
    paths = []
    # The style's savefig settings apply only while it is active: save inside
    # it, and pass the resolution explicitly (rc "savefig.dpi" outside the
    # context would be matplotlib's default, the figure's 100 dpi). Figures
    # are laid out by constrained layout already: no "tight" bounding box,
    # which would draw every figure twice; the page is the figure's size.
    group_thousands(fig)
    with context(**{"savefig.bbox": None}):
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            fig.savefig(path, format=fmt, dpi=dpi, metadata=metadata.get(fmt))
            paths.append(path)
    return paths
