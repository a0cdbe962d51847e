"""LRU stack distances (Mattson et al. 1970) for prefix-cache lookups, vectorised.

The LRU stack after a sequence of touches lists the distinct ids from the
most to the least recently touched; an LRU cache of capacity ``C`` holds
exactly the top ``C`` ids (the inclusion property). The *depth* of an id is
its 1-based position in that stack, so the id is cached at capacity ``C``
exactly when ``depth <= C``.

A request looks all its ids up against the stack left by the previous
requests, then touches them. For a touch at sequence position ``p`` of
request ``r`` (whose touches start at ``T``) with previous touch of the same
id at ``q < T``, the depth is the number of distinct ids whose latest touch
before ``T`` lies in ``[q, T)``::

    depth = #{s in [q, T) : next(s) >= T}
          = (T - q) - #{s in [q, T) : next(s) < T}

where ``next(s)`` is the position of the next touch of the id touched at
``s``. The last count is a 2-D dominance count, answered for all queries at
once by a wavelet matrix over ``next``: ``O((M + Q) log M)`` numpy work for
``M`` touches and ``Q`` queries, with no Python loop per reference.
"""

from __future__ import annotations

import numpy as np

from inferasim.reuse._refs import BlockRefs, touch_sequence

__all__ = ["count_less", "lookup_depths", "prefix_max", "depth_at"]


def count_less(
    values: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    bound: np.ndarray,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """For every query ``k``, how many of ``values[lo[k]:hi[k]]`` are ``< bound[k]``.

    A wavelet matrix over non-negative integer ``values``, queried for all
    ranges at once (one numpy pass per bit). With ``weights`` (one
    non-negative integer per value), the sum of the weights of those values
    instead of their count.

    Examples
    --------
    >>> v = np.array([5, 1, 4, 2, 8])
    >>> count_less(v, np.array([0, 1, 0]), np.array([5, 4, 0]), np.array([5, 3, 9])).tolist()
    [3, 2, 0]
    >>> count_less(v, np.array([0]), np.array([5]), np.array([5]), np.array([1, 10, 100, 1000, 1])).tolist()
    [1110]
    """
    values = np.asarray(values, dtype=np.int64)
    lo = np.asarray(lo, dtype=np.int64).copy()
    hi = np.asarray(hi, dtype=np.int64).copy()
    bound = np.asarray(bound, dtype=np.int64)
    result = np.zeros(lo.shape, dtype=np.int64)
    if values.size == 0 or lo.size == 0:
        return result
    top = int(max(values.max(), bound.max(), 1)).bit_length()
    cur = values
    w = None if weights is None else np.asarray(weights, dtype=np.int64)
    zeros_before = np.empty(cur.size + 1, dtype=np.int64)
    zeros_before[0] = 0
    weight_before = zeros_before if w is None else np.zeros(cur.size + 1, dtype=np.int64)
    for bit in range(top - 1, -1, -1):
        ones = ((cur >> bit) & 1).astype(bool)
        np.cumsum(~ones, out=zeros_before[1:])
        n_zeros = zeros_before[-1]
        z_lo = zeros_before[lo]
        z_hi = zeros_before[hi]
        go_right = ((bound >> bit) & 1).astype(bool)
        if w is not None:
            np.cumsum(np.where(ones, 0, w), out=weight_before[1:])
            w = np.concatenate((w[~ones], w[ones]))
        result += np.where(go_right, weight_before[hi] - weight_before[lo], 0)
        lo = np.where(go_right, n_zeros + lo - z_lo, z_lo)
        hi = np.where(go_right, n_zeros + hi - z_hi, z_hi)
        cur = np.concatenate((cur[~ones], cur[ones]))
    return result


def lookup_depths(
    refs: BlockRefs, touch: str = "tail_first", weights: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """LRU stack depth of every block reference at its request's lookup.

    Parameters
    ----------
    refs : BlockRefs
        The references to replay.
    touch : {"tail_first", "head_first"}
        Order in which a request touches its distinct ids after the lookup.
    weights : numpy.ndarray, optional
        Blocks in each compact id (a merged run, :mod:`inferasim.reuse._chains`):
        the depth is then the sum of the weights of the distinct ids touched
        since the id's previous touch, its own included. Default: 1 each.

    Returns
    -------
    depths : numpy.ndarray
        ``int64`` depth (1 = most recently touched) for every entry of
        ``refs.ids``; ``cold`` where the id was never touched by an earlier
        request.
    cold : int
        The sentinel, larger than any depth (the weighted touches, plus one).

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1], [2, 1], [1, 1], [[1, 2], [1]], block_size=1)
    >>> d, cold = lookup_depths(block_refs(wl), "head_first")
    >>> d.tolist() == [cold, cold, 2]
    True
    >>> lookup_depths(block_refs(wl), "tail_first")[0][2]
    np.int64(1)
    """
    seq = touch_sequence(refs, touch)
    m = seq.compact.size
    w = None if weights is None else np.asarray(weights, dtype=np.int64)[seq.compact]
    before = np.arange(m + 1, dtype=np.int64) if w is None else np.concatenate(([0], np.cumsum(w)))
    cold = int(before[-1]) + 1
    nxt, prev = _links(seq.compact)
    lengths = np.diff(seq.offsets)
    start = np.repeat(seq.offsets[:-1], lengths)
    touch_depth = np.full(m, cold, dtype=np.int64)
    seen = np.flatnonzero(prev >= 0)
    q = prev[seen]
    t = start[seen]
    touch_depth[seen] = (before[t] - before[q]) - count_less(nxt, q, t, t, w)
    return touch_depth[seq.of_ref], cold


def _links(compact: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Next and previous touch of the same id (``m`` / ``-1`` when none)."""
    m = compact.size
    order = np.argsort(compact, kind="stable")
    same = compact[order[1:]] == compact[order[:-1]]
    nxt = np.full(m, m, dtype=np.int64)
    nxt[order[:-1][same]] = order[1:][same]
    prev = np.full(m, -1, dtype=np.int64)
    prev[order[1:][same]] = order[:-1][same]
    return nxt, prev


def depth_at(
    refs: BlockRefs, compact_ids: np.ndarray, requests: np.ndarray, touch: str = "tail_first"
) -> np.ndarray:
    """LRU stack depth of arbitrary ids at the lookup of arbitrary requests.

    Query ``k`` asks for the depth of compact id ``compact_ids[k]`` in the
    stack left by the requests before ``requests[k]``; a huge value
    (``touches + 1``) when the id was not touched before.

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1, 2], [2, 1, 1], [1] * 3, [[1, 2], [3], [1]],
    ...                             block_size=1)
    >>> r = block_refs(wl)  # compact ids 0, 1, 2 for hash ids 1, 2, 3
    >>> # before R2 the stack is 3, 1, 2; before R0 it is empty (4 touches + 1)
    >>> depth_at(r, np.array([1, 0, 1]), np.array([2, 2, 0]), "tail_first").tolist()
    [3, 2, 5]
    """
    seq = touch_sequence(refs, touch)
    m = seq.compact.size
    compact_ids = np.asarray(compact_ids, dtype=np.int64)
    t = seq.offsets[np.asarray(requests, dtype=np.int64)]
    out = np.full(compact_ids.size, m + 1, dtype=np.int64)
    if m == 0 or compact_ids.size == 0:
        return out
    nxt, _ = _links(seq.compact)
    key = seq.compact * (m + 1) + np.arange(m, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    idx = np.searchsorted(skey, compact_ids * (m + 1) + t, side="left") - 1
    ok = idx >= 0
    ok[ok] = skey[idx[ok]] // (m + 1) == compact_ids[ok]
    q = skey[idx[ok]] % (m + 1)
    tt = t[ok]
    out[ok] = (tt - q) - count_less(nxt, q, tt, tt)
    return out


def prefix_max(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Running maximum of non-negative ``values`` restarted at every row.

    Examples
    --------
    >>> prefix_max(np.array([3, 1, 4, 1, 5, 2]), np.array([0, 3, 6])).tolist()
    [3, 3, 4, 1, 5, 5]
    """
    values = np.asarray(values, dtype=np.int64)
    if values.size == 0:
        return values.copy()
    span = int(values.max()) + 1
    lengths = np.diff(offsets)
    base = np.repeat(np.arange(lengths.size, dtype=np.int64) * span, lengths)
    return np.maximum.accumulate(values + base) - base
