"""Block popularity: requests per block, rank-frequency with a Zipf fit, most shared prefixes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from inferasim._format import CardRepr, metric_rows
from inferasim.reuse._refs import block_refs, touch_sequence
from inferasim.reuse._trie import build_trie
from inferasim.reuse.tree import radix_nodes
from inferasim.workload import Workload

__all__ = ["Popularity", "popularity", "fit_zipf"]


@dataclass(frozen=True, repr=False)
class Popularity(CardRepr):
    """How often each block and prefix is shared.

    Attributes
    ----------
    blocks : pandas.DataFrame
        One row per distinct hash id, most shared first: ``rank``
        (1-based), ``hash_id``, ``requests`` (distinct requests
        referencing it), ``first_use_ms`` and ``last_use_ms``.
    zipf_exponent : float
        ``s`` of the fitted ``requests ~ C * rank ** -s`` (see
        :func:`fit_zipf`); NaN when fewer than two blocks are shared.
    zipf_constant : float
        ``C`` of the same fit.
    top_prefixes : pandas.DataFrame
        The most shared prefixes: radix-tree nodes (see
        :func:`inferasim.reuse.prefix_tree`) used by at least two
        requests, by ``requests`` then ``prefix_blocks`` descending:
        ``prefix_blocks`` (length), ``requests``, ``first_use_ms``,
        ``last_use_ms`` and ``hash_id`` (the prefix's last id).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
    >>> p = popularity(wl)
    >>> p.blocks["requests"].tolist(), p.top_prefixes["prefix_blocks"].tolist()
    ([2, 1, 1], [1])
    """

    blocks: pd.DataFrame
    zipf_exponent: float
    zipf_constant: float
    top_prefixes: pd.DataFrame

    def _card(self) -> tuple[str, list[tuple[str, str, str]], list[str]]:
        b = self.blocks
        shared = int((b["requests"] >= 2).sum())
        title = f"Popularity: {len(b):,} distinct blocks, {shared:,} shared by 2+ requests"
        values = {
            "distinct_blocks": len(b),
            "shared_blocks": shared,
            "max_requests_per_block": int(b["requests"].max()) if len(b) else 0,
            "zipf_exponent": self.zipf_exponent,
        }
        rows = metric_rows(values)
        if len(self.top_prefixes):
            top = self.top_prefixes.iloc[0]
            rows.append(
                (
                    "top prefix",
                    f"{int(top['prefix_blocks']):,} block(s), in {int(top['requests']):,}",
                    "requests",
                )
            )
        return title, rows, ["frames: .blocks, .top_prefixes, .rank_frequency"]

    @property
    def rank_frequency(self) -> pd.DataFrame:
        """``rank`` against ``requests`` (the rank plot's data).

        Examples
        --------
        >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
        >>> popularity(wl).rank_frequency.values.tolist()
        [[1, 2], [2, 1], [3, 1]]
        """
        return self.blocks[["rank", "requests"]]


def fit_zipf(requests: np.ndarray, *, min_requests: int = 2) -> tuple[float, float]:
    """Fit ``requests ~ C * rank ** -s`` to a rank-frequency sequence.

    Least squares of ``log(requests)`` on ``log(rank)`` over the ranks
    whose count is at least ``min_requests`` (the long tail of blocks used
    once would otherwise dominate), sampled at about 100 log-spaced ranks
    so every decade of rank weighs the same.

    Parameters
    ----------
    requests : numpy.ndarray
        Counts sorted in descending order.
    min_requests : int, default 2
        Smallest count included in the fit.

    Returns
    -------
    (s, C) : tuple of float
        NaN when fewer than two ranks qualify.

    Examples
    --------
    >>> ranks = np.arange(1, 1001)
    >>> s, c = fit_zipf(np.floor(1e4 * ranks ** -1.2))
    >>> round(s, 2)
    1.2
    """
    counts = np.asarray(requests, dtype=np.float64)
    top = int(np.searchsorted(-counts, -min_requests, side="right"))
    if top < 2:
        return float("nan"), float("nan")
    ranks = np.unique(np.round(np.geomspace(1, top, 100)).astype(np.int64))
    x = np.log(ranks)
    y = np.log(counts[ranks - 1])
    slope, intercept = np.polyfit(x, y, 1)
    return float(-slope), float(np.exp(intercept))


def popularity(workload: Workload, *, top: int = 20) -> Popularity:
    """Requests per block, its rank-frequency Zipf fit and the most shared prefixes.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    top : int, default 20
        Rows of ``top_prefixes``.

    Returns
    -------
    Popularity
        ``blocks``, ``zipf_exponent``, ``zipf_constant``,
        ``top_prefixes`` and the ``rank_frequency`` view.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Three requests start with blocks 1, 2; two of them continue with 3:

    >>> wl = Workload.from_requests([0, 10, 20], [3, 3, 2], [1] * 3,
    ...                             [[1, 2, 3], [1, 2, 3], [1, 2]], block_size=1)
    >>> p = popularity(wl)
    >>> p.blocks[["rank", "hash_id", "requests"]].values.tolist()
    [[1, 1, 3], [2, 2, 3], [3, 3, 2]]
    >>> p.top_prefixes[["prefix_blocks", "requests", "first_use_ms", "last_use_ms"]]
       prefix_blocks  requests  first_use_ms  last_use_ms
    0              2         3           0.0         20.0
    1              3         2           0.0         10.0
    """
    if int(top) != top or top < 0:
        raise ValueError(f"top must be a non-negative integer, got {top!r}")
    refs = block_refs(workload)
    seq = touch_sequence(refs, "head_first")  # one touch per (request, id)
    u = refs.n_unique
    requests = np.bincount(seq.compact, minlength=u)
    rows = refs.rows[seq.flat_pos]
    first = np.full(u, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(u, -1, dtype=np.int64)
    np.minimum.at(first, seq.compact, rows)
    np.maximum.at(last, seq.compact, rows)
    order = np.lexsort((refs.unique_ids, -requests))  # most shared first, ties by id
    arrival = refs.arrival_ms
    blocks = pd.DataFrame(
        {
            "rank": np.arange(1, u + 1, dtype=np.int64),
            "hash_id": refs.unique_ids[order],
            "requests": requests[order],
            "first_use_ms": arrival[first[order]] if u else np.zeros(0),
            "last_use_ms": arrival[last[order]] if u else np.zeros(0),
        }
    )
    s, c = fit_zipf(blocks["requests"].to_numpy())
    nodes = radix_nodes(refs, build_trie(refs))
    shared = nodes[nodes["requests"] >= 2]
    shared = shared.sort_values(["requests", "depth_blocks"], ascending=False, kind="stable")
    top_prefixes = (
        shared.head(int(top))[
            ["depth_blocks", "requests", "first_use_ms", "last_use_ms", "hash_id"]
        ]
        .rename(columns={"depth_blocks": "prefix_blocks"})
        .reset_index(drop=True)
    )
    return Popularity(blocks=blocks, zipf_exponent=s, zipf_constant=c, top_prefixes=top_prefixes)
