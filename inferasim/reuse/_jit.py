"""The numba kernels behind :mod:`inferasim.reuse._kernels` (imported lazily: needs numba).

Compiled on first call and cached on disk (``cache=True``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def lookup(look: Any, a: int, b: int, state: Any, absent: int) -> int:
    """Leading run of ``look[a:b]`` whose state is not ``absent``."""
    h = 0
    for i in range(a, b):
        if state[look[i]] == absent:
            break
        h += 1
    return h


@njit(cache=True, nogil=True)
def fifo(look: Any, lo: Any, touch: Any, to: Any, capacity: int, n_ids: int) -> Any:
    n = lo.size - 1
    hits = np.zeros(n, dtype=np.int64)
    inserted = np.zeros(n_ids, dtype=np.int64)  # latest insertion number, 0 = never
    count = 0
    for r in range(n):
        h = 0
        for i in range(lo[r], lo[r + 1]):
            k = inserted[look[i]]
            if k == 0 or k <= count - capacity:
                break
            h += 1
        hits[r] = h
        for i in range(to[r], to[r + 1]):
            x = touch[i]
            k = inserted[x]
            if k == 0 or k <= count - capacity:
                count += 1
                inserted[x] = count
    return hits


@njit(cache=True, nogil=True)
def heap_push(heap: Any, size: int, value: int) -> int:
    i = size
    heap[i] = value
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= value:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = value
    return size + 1


@njit(cache=True, nogil=True)
def heap_pop(heap: Any, size: int) -> Any:
    top = heap[0]
    size -= 1
    last = heap[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= last:
            break
        heap[i] = heap[child]
        i = child
    if size > 0:
        heap[i] = last
    return top, size


@njit(cache=True, nogil=True)
def lfu(look: Any, lo: Any, touch: Any, to: Any, capacity: int, n_ids: int) -> Any:
    # entry = (uses * T + clock) * U + id: the heap pops the fewest uses, then the
    # least recent touch; the id and the use count decode from the entry.
    n = lo.size - 1
    u = n_ids
    t = touch.size + 1
    hits = np.zeros(n, dtype=np.int64)
    live = np.full(n_ids, -1, dtype=np.int64)  # id -> its live entry, -1 = not cached
    heap = np.empty(touch.size + 1, dtype=np.int64)
    size = 0
    cached = 0
    clock = 0
    for r in range(n):
        hits[r] = lookup(look, lo[r], lo[r + 1], live, -1)
        for i in range(to[r], to[r + 1]):
            x = touch[i]
            clock += 1
            old = live[x]
            if old < 0:
                uses = 1
                if cached >= capacity:
                    while True:
                        entry, size = heap_pop(heap, size)
                        victim = entry % u
                        if live[victim] == entry:
                            live[victim] = -1
                            cached -= 1
                            break
                cached += 1
            else:
                uses = old // (t * u) + 1
            entry = (uses * t + clock) * u + x
            live[x] = entry
            size = heap_push(heap, size, entry)
    return hits


@njit(cache=True, nogil=True)
def opt(
    look: Any, lo: Any, touch: Any, to: Any, capacity: int, n_ids: int, nxt: Any, never: int
) -> Any:
    # nxt[i]: flat position of the next use of touch i (never: none); look[k] is the
    # id at flat position k. The heap holds negated positions (a max-heap).
    n = lo.size - 1
    hits = np.zeros(n, dtype=np.int64)
    cur = np.full(n_ids, -1, dtype=np.int64)  # id -> next use while cached, -1 = not cached
    heap = np.empty(touch.size + 1, dtype=np.int64)
    size = 0
    cached = 0
    for r in range(n):
        hits[r] = lookup(look, lo[r], lo[r + 1], cur, -1)
        for i in range(to[r], to[r + 1]):
            x = touch[i]
            k = nxt[i]
            if k == never:
                if cur[x] >= 0:
                    cur[x] = -1
                    cached -= 1
            else:
                if cur[x] < 0:
                    cached += 1
                cur[x] = k
                size = heap_push(heap, size, -k)
        while cached > capacity:
            neg, size = heap_pop(heap, size)
            k = -neg
            x = look[k]
            if cur[x] == k:
                cur[x] = -1
                cached -= 1
    return hits
