"""Reuse distance of every re-referenced block: time and LRU stack distance."""

from __future__ import annotations

import numpy as np
import pandas as pd

from inferasim import _ragged
from inferasim.reuse._refs import block_refs, check_touch, touch_sequence
from inferasim.reuse._stack import lookup_depths
from inferasim.workload import Workload

__all__ = ["reuse_distance"]


def reuse_distance(
    workload: Workload, *, touch: str = "tail_first", full_blocks_only: bool = False
) -> pd.DataFrame:
    """Time and LRU stack distance since each re-referenced block's previous use.

    A block reference is a *re-reference* when an earlier request used the
    same hash id. Its time distance is its request's arrival minus the
    arrival of the latest earlier request using the id; its stack distance
    is the number of distinct blocks touched since then, itself included
    (1 = nothing else touched in between), under the replay semantics of
    :mod:`inferasim.reuse.replay`. An LRU cache of ``C`` blocks holds the
    block exactly when ``stack_distance <= C``; a *prefix* hit also needs
    every earlier block of the request to be held (see
    :func:`inferasim.reuse.hit_rate_curve`).

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    touch : {"tail_first", "head_first"}, default "tail_first"
        Order in which a request touches its blocks after the lookup.
    full_blocks_only : bool, default False
        Leave partial last blocks out (engine semantics).

    Returns
    -------
    pandas.DataFrame
        One row per re-reference, in trace order: ``request_id``,
        ``position`` (block index in the request, 0-based), ``hash_id``,
        ``time_since_ms`` and ``stack_distance`` (blocks). Sort a column
        for its CDF; :func:`inferasim.plots.plot_reuse_distance_cdf` draws
        it.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Request 2 reuses block 1 after request 1 touched block 5 (tail-first,
    so the stack before request 2 is 5, 1, 2 and block 1 sits at depth 2),
    and block 2 one block deeper:

    >>> wl = Workload.from_requests([0, 40, 100], [2, 1, 2], [1] * 3,
    ...                             [[1, 2], [5], [1, 2]], block_size=1)
    >>> reuse_distance(wl)
       request_id  position  hash_id  time_since_ms  stack_distance
    0           2         0        1          100.0               2
    1           2         1        2          100.0               3
    """
    check_touch(touch)
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    depths, cold = lookup_depths(refs, touch)
    seq = touch_sequence(refs, "head_first")
    # latest earlier request using each (request, id) touch
    order = np.argsort(seq.compact, kind="stable")
    same = seq.compact[order[1:]] == seq.compact[order[:-1]]
    seq_rows = refs.rows[seq.flat_pos]
    prev_row = np.full(seq.compact.size, -1, dtype=np.int64)
    prev_row[order[1:][same]] = seq_rows[order[:-1][same]]
    prev_of_ref = prev_row[seq.of_ref]
    hit = (depths < cold) & (prev_of_ref >= 0)
    idx = np.flatnonzero(hit)
    rows = refs.rows[idx]
    arrival = refs.arrival_ms
    return pd.DataFrame(
        {
            "request_id": rows,
            "position": _ragged.position_in_row(refs.offsets)[idx],
            "hash_id": refs.ids[idx],
            "time_since_ms": arrival[rows] - arrival[prev_of_ref[idx]],
            "stack_distance": depths[idx],
        }
    )
