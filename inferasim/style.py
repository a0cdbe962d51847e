"""Paper style for inferasim figures: fonts, sizes, a colour-blind-safe palette.

Every figure of the notebooks and of ``inferasim figures`` is drawn inside
:func:`paper_style`, so they share one look: the Okabe-Ito palette (safe for
the common colour-vision deficiencies), 8-9 pt fonts at print size, light
grids, no top/right spines, and figure sizes that fit a two-column paper
(:data:`SINGLE` column, :data:`DOUBLE` column). :func:`save_figure` writes
PDF and PNG deterministically (no creation date, fixed hash salt), so
regenerating a figure from the same data gives byte-identical files.

Examples
--------
>>> import matplotlib.pyplot as plt
>>> with paper_style():
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

__all__ = [
    "OKABE_ITO",
    "SINGLE",
    "DOUBLE",
    "DOUBLE_TALL",
    "RC_PARAMS",
    "color",
    "marker",
    "paper_style",
    "save_figure",
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

#: Matplotlib rc parameters of the paper style.
RC_PARAMS: dict[str, Any] = {
    "figure.figsize": SINGLE,
    "figure.dpi": 100,
    "savefig.dpi": 200,
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


@contextmanager
def paper_style(**overrides: Any) -> Iterator[None]:
    """Draw inside this context to get the paper style.

    Parameters
    ----------
    **overrides
        Extra rc parameters, e.g. ``**{"font.size": 9}``.

    Examples
    --------
    >>> import matplotlib as mpl
    >>> with paper_style(**{"font.size": 9}):
    ...     mpl.rcParams["font.size"]
    9.0
    """
    params = {**RC_PARAMS, **overrides}
    with mpl.rc_context(params):
        yield


def save_figure(
    fig: Figure, out_dir: str | Path, name: str, *, formats: tuple[str, ...] = ("pdf", "png")
) -> list[Path]:
    """Write ``fig`` as ``out_dir/name.<fmt>`` for each format, deterministically.

    PDF files carry no creation date and the producer is fixed; PNG files
    carry no software tag; so the same figure gives the same bytes.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    out_dir : str or Path
        Created if missing.
    name : str
        File stem.
    formats : tuple of str, default ("pdf", "png")

    Returns
    -------
    list of Path
        The files written.

    Examples
    --------
    >>> import tempfile, matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> with tempfile.TemporaryDirectory() as d:
    ...     [p.name for p in save_figure(fig, d, "demo")]
    ['demo.pdf', 'demo.png']
    >>> plt.close(fig)
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
    with mpl.rc_context({"svg.hashsalt": "inferasim"}):
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            fig.savefig(path, format=fmt, metadata=metadata.get(fmt))
            paths.append(path)
    return paths
