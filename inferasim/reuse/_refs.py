"""The block references a reuse analysis replays, and their touch order.

Every analysis in :mod:`inferasim.reuse` starts from :func:`block_refs`: the
workload's flat hash ids (optionally without partial last blocks), their
token counts, compact ids ``0..U-1`` and the per-request *touch sequence*:
each request's distinct ids, in the order the cache touches them after the
lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferasim import _ragged
from inferasim.errors import WorkloadError
from inferasim.workload import Workload

__all__ = ["BlockRefs", "TouchSequence", "block_refs", "check_refs_input", "touch_sequence", "TOUCH_ORDERS"]

#: Accepted values of the ``touch`` argument.
TOUCH_ORDERS = ("tail_first", "head_first")


@dataclass(frozen=True)
class BlockRefs:
    """The block references of a workload, ready for cache replay.

    Attributes
    ----------
    ids : numpy.ndarray
        Flat ``int64`` hash ids considered, request after request.
    offsets : numpy.ndarray
        Row offsets into ``ids`` (length ``n + 1``).
    tokens : numpy.ndarray
        Tokens held by each entry of ``ids``.
    compact : numpy.ndarray
        ``ids`` renumbered ``0..U-1`` (``U`` distinct ids).
    unique_ids : numpy.ndarray
        The distinct hash ids, sorted; ``unique_ids[compact] == ids``.
    rows : numpy.ndarray
        Request index of each entry of ``ids``.
    input_len : numpy.ndarray
        Prompt tokens of every request (the token-ratio denominators).
    arrival_ms : numpy.ndarray
        Arrival time of every request (ms).
    block_size : int
        Tokens per full block.
    """

    ids: np.ndarray
    offsets: np.ndarray
    tokens: np.ndarray
    compact: np.ndarray
    unique_ids: np.ndarray
    rows: np.ndarray
    input_len: np.ndarray
    arrival_ms: np.ndarray
    block_size: int

    @property
    def n_requests(self) -> int:
        """Number of requests.

        Examples
        --------
        >>> block_refs(Workload.from_requests([0, 1], [1, 1], [1, 1], [[1], [1]])).n_requests
        2
        """
        return int(self.offsets.size - 1)

    @property
    def n_unique(self) -> int:
        """Number of distinct ids considered (the working set, in blocks).

        Examples
        --------
        >>> block_refs(Workload.from_requests([0, 1], [1, 1], [1, 1], [[1], [1]])).n_unique
        1
        """
        return int(self.unique_ids.size)

    @property
    def total_tokens(self) -> int:
        """Sum of ``input_len``: the denominator of every token ratio.

        Examples
        --------
        >>> block_refs(Workload.from_requests([0, 1], [7, 9], [1, 1], [[1], [1]])).total_tokens
        16
        """
        return int(self.input_len.sum())


def block_refs(workload: Workload, *, full_blocks_only: bool = False) -> BlockRefs:
    """Collect the block references of ``workload``.

    Parameters
    ----------
    workload : Workload
        Must carry hash ids.
    full_blocks_only : bool, default False
        Drop every block holding fewer than ``block_size`` tokens (a
        request's partial last block), as engines cache full blocks only.

    Returns
    -------
    BlockRefs

    Raises
    ------
    WorkloadError
        When the workload has no hash ids (a CSV length file).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [1024, 700], [1, 1], [[1, 2], [1, 3]])
    >>> r = block_refs(wl, full_blocks_only=True)
    >>> r.ids.tolist(), r.offsets.tolist(), r.tokens.tolist()
    ([1, 2, 1], [0, 2, 3], [512, 512, 512])
    """
    check_refs_input(workload)
    ids = workload.hash_ids
    offsets = workload.offsets
    tokens = workload.block_tokens()
    if full_blocks_only:
        keep = tokens >= workload.block_size
        if not keep.all():
            rows = _ragged.row_of(offsets)
            counts = np.bincount(rows[keep], minlength=len(workload))
            offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
            ids = ids[keep]
            tokens = tokens[keep]
    unique_ids, compact = np.unique(ids, return_inverse=True)
    return BlockRefs(
        ids=ids,
        offsets=offsets,
        tokens=tokens.astype(np.int64),
        compact=compact.astype(np.int64).reshape(-1),
        unique_ids=unique_ids,
        rows=_ragged.row_of(offsets),
        input_len=workload.input_len.astype(np.int64),
        arrival_ms=workload.arrival_ms.astype(np.float64),
        block_size=workload.block_size,
    )


def check_refs_input(workload: Workload) -> None:
    """Raise a clear error unless ``workload`` is a Workload with hash ids.

    Examples
    --------
    >>> check_refs_input([1, 2])
    Traceback (most recent call last):
    ...
    TypeError: expected a Workload, got list
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"expected a Workload, got {type(workload).__name__}")
    if not workload.has_hash_ids:
        raise WorkloadError(
            "this workload has no block hash ids (e.g. it was read from a CSV length file), "
            "so it carries no prefix-reuse information: its cache numbers are absent, not zero; "
            "use a Mooncake or Bailian trace or a synthetic workload with prefixes"
        )


@dataclass(frozen=True)
class TouchSequence:
    """Every request's distinct ids in the order the cache touches them.

    Attributes
    ----------
    compact : numpy.ndarray
        Compact id of each touch, request after request.
    flat_pos : numpy.ndarray
        Position in ``BlockRefs.ids`` of each touch (the id's first
        occurrence in its request).
    offsets : numpy.ndarray
        Row offsets into the sequence (length ``n + 1``).
    of_ref : numpy.ndarray
        For every entry of ``BlockRefs.ids``, the index of its touch (a
        repeated id inside a request maps to its single touch).
    """

    compact: np.ndarray
    flat_pos: np.ndarray
    offsets: np.ndarray
    of_ref: np.ndarray


def check_touch(touch: str) -> None:
    """Raise a clear error for an unknown touch order.

    Examples
    --------
    >>> check_touch("random")
    Traceback (most recent call last):
    ...
    ValueError: touch must be one of ('tail_first', 'head_first'), got 'random'
    """
    if touch not in TOUCH_ORDERS:
        raise ValueError(f"touch must be one of {TOUCH_ORDERS}, got {touch!r}")


def touch_sequence(refs: BlockRefs, touch: str = "tail_first") -> TouchSequence:
    """The touch sequence of ``refs``.

    A request touches each of its distinct ids once. ``"head_first"``
    touches them in the order of their first occurrence (the last block
    becomes the most recent); ``"tail_first"`` in the reverse order (the
    first block becomes the most recent, as when vLLM frees a finished
    request's blocks tail-first).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [3, 2], [1, 1], [[5, 6, 5], [6, 7]], block_size=1)
    >>> s = touch_sequence(block_refs(wl), "head_first")
    >>> s.flat_pos.tolist(), s.offsets.tolist(), s.of_ref.tolist()
    ([0, 1, 3, 4], [0, 2, 4], [0, 1, 0, 2, 3])
    >>> touch_sequence(block_refs(wl), "tail_first").flat_pos.tolist()
    [1, 0, 4, 3]
    """
    check_touch(touch)
    n_ref = refs.ids.size
    u = max(refs.n_unique, 1)
    key = refs.rows * u + refs.compact
    order = np.argsort(key, kind="stable")
    skey = key[order]
    starts = np.ones(n_ref, dtype=bool)
    if n_ref:
        starts[1:] = skey[1:] != skey[:-1]
    group = np.cumsum(starts) - 1
    first_of_group = order[starts]  # flat position of each (row, id) first occurrence
    rep_flat = np.empty(n_ref, dtype=np.int64)
    rep_flat[order] = first_of_group[group]
    is_first = np.zeros(n_ref, dtype=bool)
    is_first[first_of_group] = True
    flat_pos = np.flatnonzero(is_first).astype(np.int64)
    seq_index_of_flat = np.cumsum(is_first) - 1
    of_ref = seq_index_of_flat[rep_flat].astype(np.int64)
    counts = np.bincount(refs.rows[flat_pos], minlength=refs.n_requests)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    if touch == "tail_first" and flat_pos.size:
        lengths = np.diff(offsets)
        row = np.repeat(np.arange(lengths.size), lengths)
        idx = np.arange(flat_pos.size, dtype=np.int64)
        perm = offsets[:-1][row] + offsets[1:][row] - 1 - idx  # an involution
        flat_pos = flat_pos[perm]
        of_ref = perm[of_ref]
    return TouchSequence(
        compact=refs.compact[flat_pos], flat_pos=flat_pos, offsets=offsets, of_ref=of_ref
    )
