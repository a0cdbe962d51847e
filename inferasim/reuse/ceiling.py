"""The reuse ceiling: what an infinite prefix cache would serve."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from inferasim import _ragged
from inferasim._format import CardRepr, metric_rows
from inferasim.reuse._refs import block_refs
from inferasim.reuse._result import per_request_frame
from inferasim.workload import Workload

__all__ = ["ReuseCeiling", "infinite_hit_ratio"]


@dataclass(frozen=True, repr=False)
class ReuseCeiling(CardRepr):
    """Hit ratios of an infinite prefix cache.

    Attributes
    ----------
    block_hit_ratio : float
        Hit block references / block references considered.
    token_hit_ratio : float
        Hit tokens / ``sum(input_len)``.
    hit_blocks, blocks : int
        Hit and considered block references.
    hit_tokens, tokens : int
        Hit tokens and ``sum(input_len)``.
    per_request : pandas.DataFrame
        The per-request distribution, with the columns of
        :func:`inferasim.reuse.replay_cache`.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [1024, 600], [1, 1], [[1, 2], [1, 3]])
    >>> c = infinite_hit_ratio(wl)
    >>> c.hit_tokens, c.tokens, c.per_request["hit_blocks"].tolist()
    (512, 1624, [0, 1])
    """

    block_hit_ratio: float
    token_hit_ratio: float
    hit_blocks: int
    blocks: int
    hit_tokens: int
    tokens: int
    per_request: pd.DataFrame = field(repr=False, compare=False)

    def _card(self) -> tuple[str, list[tuple[str, str, str]], list[str]]:
        title = (
            f"ReuseCeiling: an infinite prefix cache serves {self.token_hit_ratio:.2%} "
            f"of prompt tokens"
        )
        rows = metric_rows(
            {
                "token_hit_ratio": self.token_hit_ratio,
                "block_hit_ratio": self.block_hit_ratio,
                "hit_tokens": self.hit_tokens,
                "tokens": self.tokens,
                "hit_blocks": self.hit_blocks,
                "blocks": self.blocks,
            }
        )
        return title, rows, [f"per-request frame: .per_request ({len(self.per_request):,} rows)"]

    def to_series(self) -> pd.Series:
        """The scalar fields as a Series.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 3]])
        >>> infinite_hit_ratio(wl).to_series()[["hit_blocks", "blocks"]].tolist()
        [1.0, 4.0]
        """
        return pd.Series(
            {
                "block_hit_ratio": self.block_hit_ratio,
                "token_hit_ratio": self.token_hit_ratio,
                "hit_blocks": self.hit_blocks,
                "blocks": self.blocks,
                "hit_tokens": self.hit_tokens,
                "tokens": self.tokens,
            },
            dtype=float,
        )


def infinite_hit_ratio(workload: Workload, *, full_blocks_only: bool = False) -> ReuseCeiling:
    """The reuse ceiling: hit ratios of a prefix cache that never evicts.

    A block reference hits when it and every earlier block of its request
    were referenced by an earlier request (see :mod:`inferasim.reuse.replay`
    for the semantics). No finite cache of any policy can do better, and
    :func:`inferasim.reuse.hit_rate_curve` reaches this value exactly at
    capacities at or above the working set.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    full_blocks_only : bool, default False
        Never look up nor insert partial last blocks (engine semantics,
        as vLLM and SGLang cache full blocks only).

    Returns
    -------
    ReuseCeiling
        Block and token ratios, counts and the per-request frame.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Request 1 reuses block 1 (512 tokens) of request 0 but not block 3;
    request 2 reuses blocks 1 and 3 and its partial last block 4 is new:

    >>> wl = Workload.from_requests([0, 1, 2], [1024, 1024, 1100], [1, 1, 1],
    ...                             [[1, 2], [1, 3], [1, 3, 4]])
    >>> c = infinite_hit_ratio(wl)
    >>> c.hit_blocks, c.blocks, c.hit_tokens, c.tokens
    (3, 7, 1536, 3148)
    >>> c.per_request["hit_blocks"].tolist()
    [0, 1, 2]
    """
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    seen = _ragged.first_seen_earlier(refs.ids, refs.offsets)
    hits = _ragged.leading_run(seen, refs.offsets)
    hit_blocks = np.bincount(refs.rows[hits], minlength=refs.n_requests)
    frame = per_request_frame(refs, hit_blocks)
    total_blocks = int(refs.ids.size)
    total_tokens = refs.total_tokens
    hit_tokens = int(frame["hit_tokens"].sum())
    return ReuseCeiling(
        block_hit_ratio=float(hit_blocks.sum() / total_blocks) if total_blocks else 0.0,
        token_hit_ratio=float(hit_tokens / total_tokens) if total_tokens else 0.0,
        hit_blocks=int(hit_blocks.sum()),
        blocks=total_blocks,
        hit_tokens=hit_tokens,
        tokens=total_tokens,
        per_request=frame,
    )
