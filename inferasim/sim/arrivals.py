"""Where requests come from in a run: the workload's columns and the arrival
sources of the event loop (internal, compiled).

* :class:`Columns`: the workload as plain lists (what the loop reads per
  request), the requests that can never run, the timeline period.
* :class:`OpenArrivals`: the recorded arrivals in order.
* :class:`SessionArrivals`: a closed loop (see :mod:`inferasim.sim.closed_loop`):
  first turns at their recorded arrivals, every later turn issued when its
  parent is answered (finished, or rejected) plus its think time.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

__all__: list[str] = []

#: The smallest sampling period of the timeline (ms); the default period
#: (1/1000 of the arrival span) is never below it either.
MIN_TIMELINE_MS = 1e-3


def rejection_reasons(
    plen: np.ndarray, olen: np.ndarray, block_size: int, capacity: int
) -> dict[int, str]:
    """Requests that can never run on a replica, with the reason.

    A request needs ``ceil((input_len + output_len - 1) / block_size)`` blocks
    for its last decode step; more than the replica holds can never finish.

    Examples
    --------
    >>> rejection_reasons(np.array([100, 0]), np.array([8, 1]), 16, capacity=5)
    {0: 'needs 7 KV blocks for 100 + 8 tokens; a replica holds 5', 1: 'input_len is 0'}
    """
    P = plen.astype(np.int64)
    out_len = np.maximum(olen.astype(np.int64), 1)
    need = -(-(P + out_len - 1) // block_size)
    reasons: dict[int, str] = {}
    for i in np.flatnonzero((need > capacity) | (P <= 0)).tolist():
        if P[i] <= 0:
            reasons[i] = "input_len is 0"
        else:
            reasons[i] = (
                f"needs {need[i]} KV blocks for {P[i]} + {olen[i]} tokens; "
                f"a replica holds {capacity}"
            )
    return reasons


class Columns:
    """The workload's columns as the loop reads them (plain lists), and the run's start.

    Examples
    --------
    >>> from inferasim import Workload
    >>> wl = Workload.from_requests([5, 9], [40, 16], [2, 2], [[1, 2], [3]], block_size=16)
    >>> c = Columns(wl, capacity=8, sample_ms=None)
    >>> c.t0, c.sample_ms, c.ids(0), c.ids(1)   # limit: (40 - 1) // 16 = 2, (16 - 1) // 16 = 0
    (5.0, 0.004, ([1, 2], 2), ([3], 0))
    """

    def __init__(
        self, wl: Any, capacity: int, sample_ms: float | None, page_tokens: int = 0
    ) -> None:
        n = len(wl)
        bs = int(wl.block_size)
        page = page_tokens if page_tokens > 0 else bs
        arrival = wl.arrival_ms.astype(np.float64)
        P = wl.input_len.astype(np.int64)
        if wl.has_hash_ids:
            nh = np.minimum(wl.num_blocks, P // bs)
        else:
            nh = np.zeros(n, dtype=np.int64)
        if sample_ms is None:
            span = float(arrival[-1] - arrival[0]) if n else 0.0
            sample_ms = span / 1000.0 if span > 0 else 1000.0
            if sample_ms < MIN_TIMELINE_MS:
                sample_ms = MIN_TIMELINE_MS
        self.n = n
        self.bs = bs
        self.page = page  # tokens a KV page (memory)
        self.reasons = rejection_reasons(wl.input_len, wl.output_len, page, capacity)
        self.arrival = arrival
        self.t0 = float(arrival[0]) if n else 0.0
        self.sample_ms = float(sample_ms)
        self.arr: list[float] = arrival.tolist()
        self.plen: list[int] = P.tolist()
        self.olen: list[int] = wl.output_len.astype(np.int64).tolist()
        self.nh: list[int] = nh.tolist()  # reusable (full prompt) blocks of each request
        self.start: list[int] = wl.offsets[:-1].tolist()  # offset of each request's ids
        self.flat: np.ndarray = wl.hash_ids

    def ids(self, i: int) -> tuple[list[int], int]:
        """Request ``i``'s reusable block ids and how many of them a hit may reuse
        (at least one prompt token is always computed)."""
        k = self.nh[i]
        ids: list[int] = self.flat[self.start[i] : self.start[i] + k].tolist() if k else []
        limit = (self.plen[i] - 1) // self.bs
        return ids, limit if limit < k else k


class Arrivals:
    """Where the event loop's requests come from (open or closed loop)."""

    def next_time(self) -> float:
        """When the next request arrives (inf when none is left or issued)."""
        raise NotImplementedError

    def pop(self) -> tuple[int, float]:
        """The next request and its arrival."""
        raise NotImplementedError

    def answered(self, rid: int, t: float) -> None:
        """Request ``rid`` was answered (finished or rejected) at ``t``."""

    def waited_for(self) -> dict[int, list[int]]:
        """The requests whose answer issues others, with those (closed loop)."""
        return {}

    def left(self) -> int:
        """Requests not arrived yet (0 at the end)."""
        raise NotImplementedError


class OpenArrivals(Arrivals):
    """The recorded arrivals in request order, without the requests that can
    never run (they keep their rejection and take no part)."""

    def __init__(self, col: Columns) -> None:
        reasons = col.reasons
        self.order = [i for i in range(col.n) if i not in reasons]
        self.arr = col.arr
        self.k = 0

    def next_time(self) -> float:
        """When the next request arrives (inf when none is left)."""
        return self.arr[self.order[self.k]] if self.k < len(self.order) else math.inf

    def pop(self) -> tuple[int, float]:
        """The next request and its arrival."""
        i = self.order[self.k]
        self.k += 1
        return i, self.arr[i]

    def left(self) -> int:
        """Requests not issued yet (0 at the end)."""
        return len(self.order) - self.k


class SessionArrivals(Arrivals):
    """A closed loop's arrivals: a heap of ``(time, request)``; first turns at
    their recorded times, a later turn when its parent is answered plus its
    think time. ``arrival`` holds the simulated arrival of each request."""

    def __init__(self, col: Columns, parent: np.ndarray, think: np.ndarray) -> None:
        children: dict[int, list[int]] = {}
        for j, p in enumerate(parent.tolist()):
            if p >= 0:
                children.setdefault(p, []).append(j)
        self.children = children
        self.think: list[float] = think.tolist()
        self.queue: list[tuple[float, int]] = [
            (col.arr[j], j) for j in range(col.n) if parent[j] < 0
        ]
        heapq.heapify(self.queue)
        self.arrival = np.full(col.n, np.nan)

    def next_time(self) -> float:
        """When the next request arrives (inf when none is issued)."""
        return self.queue[0][0] if self.queue else math.inf

    def pop(self) -> tuple[int, float]:
        """The next request and its simulated arrival."""
        t, i = heapq.heappop(self.queue)
        self.arrival[i] = t
        return i, t

    def answered(self, rid: int, t: float) -> None:
        """Request ``rid`` was answered (finished or rejected) at ``t``: issue its
        next turns."""
        kids = self.children.get(rid)
        if kids is not None:
            for c in kids:
                heapq.heappush(self.queue, (t + self.think[c], c))

    def waited_for(self) -> dict[int, list[int]]:
        return self.children

    def left(self) -> int:
        """Requests issued and not arrived yet."""
        return len(self.queue)
