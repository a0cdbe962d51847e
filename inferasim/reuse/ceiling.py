"""The reuse ceiling: what an infinite prefix cache would serve."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from inferasim import _ragged
from inferasim._format import CardRepr, metric_rows
from inferasim.reuse._partial import check_partial, divergences
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
        Hit tokens (including ``partial_tokens``) and ``sum(input_len)``.
    per_request : pandas.DataFrame
        The per-request distribution, with the columns of
        :func:`inferasim.reuse.replay_cache` plus ``partial_tokens``.
    partial_tokens : int
        Tokens credited inside divergence blocks by ``partial_block``.
    partial_block : str
        The token-level estimate used (``"none"``, ``"half"``, ``"upper"``).

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
    partial_tokens: int = 0
    partial_block: str = "none"

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
        notes = [f"per-request frame: .per_request ({len(self.per_request):,} rows)"]
        if self.partial_block != "none":
            rows.append(("partial_tokens", f"{self.partial_tokens:,}", "tokens"))
            notes.insert(0, f"partial_block={self.partial_block!r}: token-level credit included")
        return title, rows, notes

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


def infinite_hit_ratio(
    workload: Workload, *, full_blocks_only: bool = False, partial_block: str = "none"
) -> ReuseCeiling:
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
    partial_block : {"none", "half", "upper"}, default "none"
        Token-level estimate of the reuse hidden inside the block where a
        prompt diverges from the earlier ones (block ratios never change).
        ``"none"``: block level. At a request's *divergence block* (the
        first block past its hit run) whose *sibling* exists (the most
        recent earlier reference at the same index after the same leading
        ids), ``"upper"`` credits ``min(tokens of the block, tokens of the
        sibling)`` (an upper bound on the tokens the two share) and
        ``"half"`` half of it, rounded down. Exact rule:
        :mod:`inferasim.reuse._partial`.

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

    Token-level estimate: request 1 diverges in its block 3 after block 1;
    its sibling is request 0's block 2, so ``"upper"`` credits 512 tokens
    and ``"half"`` 256. Request 2 diverges in block 4 (76 tokens), with no
    sibling: no earlier prompt went past [1, 3]. Request 0 has no earlier
    request at all.

    >>> infinite_hit_ratio(wl, partial_block="upper").partial_tokens
    512
    >>> infinite_hit_ratio(wl, partial_block="half").hit_tokens
    1792
    """
    check_partial(partial_block)
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    seen = _ragged.first_seen_earlier(refs.ids, refs.offsets)
    hits = _ragged.leading_run(seen, refs.offsets)
    hit_blocks = np.bincount(refs.rows[hits], minlength=refs.n_requests)
    frame = per_request_frame(refs, hit_blocks)
    div = divergences(refs, hit_blocks, partial_block)
    partial = np.bincount(div.rows, weights=div.credit, minlength=refs.n_requests).astype(np.int64)
    frame["partial_tokens"] = partial
    if partial_block != "none":
        frame["hit_tokens"] += partial
        with np.errstate(invalid="ignore", divide="ignore"):
            frame["token_hit_ratio"] = np.where(
                refs.input_len > 0, frame["hit_tokens"] / np.maximum(refs.input_len, 1), np.nan
            )
    total_blocks = int(refs.ids.size)
    total_tokens = refs.total_tokens
    hit_tokens = int(frame["hit_tokens"].sum())
    frame.attrs["token_hit_ratio"] = float(hit_tokens / total_tokens) if total_tokens else 0.0
    return ReuseCeiling(
        block_hit_ratio=float(hit_blocks.sum() / total_blocks) if total_blocks else 0.0,
        token_hit_ratio=float(hit_tokens / total_tokens) if total_tokens else 0.0,
        hit_blocks=int(hit_blocks.sum()),
        blocks=total_blocks,
        hit_tokens=hit_tokens,
        tokens=total_tokens,
        per_request=frame,
        partial_tokens=int(partial.sum()),
        partial_block=partial_block,
    )
