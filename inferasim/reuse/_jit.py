"""The numba kernels behind :mod:`inferasim.reuse._kernels` (imported lazily: needs numba).

Compiled on first call and cached on disk (``cache=True``). The helpers are
inlined (``inline="always"``): a call between compiled functions that passes
arrays pays reference counting on each of them, which doubled the LFU loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
def unlink(x: int, f: int, prev: Any, nxt: Any, head: Any, tail: Any) -> None:
    p, q = prev[x], nxt[x]
    if p >= 0:
        nxt[p] = q
    else:
        head[f] = q
    if q >= 0:
        prev[q] = p
    else:
        tail[f] = p


@njit(cache=True, nogil=True, inline="always")
def append(x: int, f: int, prev: Any, nxt: Any, head: Any, tail: Any) -> None:
    last = tail[f]
    prev[x] = last
    nxt[x] = -1
    if last >= 0:
        nxt[last] = x
    else:
        head[f] = x
    tail[f] = x


@njit(cache=True, nogil=True)
def lfu(look: Any, lo: Any, touch: Any, to: Any, capacity: int, n_ids: int) -> Any:
    # The Python loop's buckets as doubly linked lists: one list per use count,
    # oldest entry first (head), threaded through prev/nxt indexed by id.
    n = lo.size - 1
    hits = np.zeros(n, dtype=np.int64)
    uses = np.zeros(n_ids, dtype=np.int64)  # 0 = not cached
    prev = np.full(n_ids, -1, dtype=np.int64)
    nxt = np.full(n_ids, -1, dtype=np.int64)
    head = np.full(n + 2, -1, dtype=np.int64)  # a block is touched at most once a request
    tail = np.full(n + 2, -1, dtype=np.int64)
    cached = 0
    min_uses = 0
    for r in range(n):
        hits[r] = lookup(look, lo[r], lo[r + 1], uses, 0)
        for i in range(to[r], to[r + 1]):
            x = touch[i]
            f = uses[x]
            if f > 0:
                unlink(x, f, prev, nxt, head, tail)
                if head[f] < 0 and min_uses == f:
                    min_uses = f + 1
                uses[x] = f + 1
                append(x, f + 1, prev, nxt, head, tail)
            else:
                if cached >= capacity:
                    victim = head[min_uses]
                    unlink(victim, min_uses, prev, nxt, head, tail)
                    uses[victim] = 0
                    cached -= 1
                uses[x] = 1
                append(x, 1, prev, nxt, head, tail)
                cached += 1
                min_uses = 1
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


@njit(cache=True, nogil=True, inline="always")
def block_tokens_at(r: int, k: int, n: int, input_len: Any, block_size: int) -> int:
    """Tokens of block ``k`` of the ``n`` blocks of request ``r`` (:func:`inferasim._ragged.block_tokens`)."""
    left = input_len[r] - k * block_size
    if left < 0:
        return 0
    if k == n - 1 or left < block_size:
        return left
    return block_size


@njit(cache=True, nogil=True)
def id_range(ids: Any) -> Any:
    """Smallest and largest of non-empty ``ids`` in one pass."""
    lo = ids[0]
    hi = ids[0]
    for i in range(ids.size):  # min/max without branches: vectorised, 2x the if/elif loop
        lo = min(lo, ids[i])
        hi = max(hi, ids[i])
    return lo, hi


@njit(cache=True, nogil=True, inline="always")
def full_blocks_before(r: int, n: int, input_len: Any, block_size: int) -> int:
    """Leading blocks of request ``r`` that are full and not its last: ``block_tokens_at`` is ``block_size`` there."""
    return max(min(n - 1, input_len[r] // block_size), 0)


@njit(cache=True, nogil=True, inline="always")
def tokens_after_full(r: int, k: int, n: int, n_full: int, input_len: Any, block_size: int) -> int:
    """:func:`block_tokens_at`, with no token count below ``n_full``
    (:func:`full_blocks_before`: the bulk of a small-block trace)."""
    return block_size if k < n_full else block_tokens_at(r, k, n, input_len, block_size)


@njit(cache=True, nogil=True)
def chain_links(codes: Any, offsets: Any, input_len: Any, block_size: int, full_only: bool, links: Any) -> int:
    """The successor and predecessor every occurrence of each code shares (see ``_chains``).

    ``links`` (one row per code, successor then predecessor side by side, so
    that one cache line serves both) comes filled with -3 (never seen). The
    pass stores in ``links[c, 0]`` the code that follows every occurrence of
    ``c`` in its request and in ``links[c, 1]`` the one that precedes every
    occurrence (-2 when occurrences disagree, when ``c`` ends a request or,
    for the successor, holds other than ``block_size`` tokens somewhere; -1
    as predecessor when every occurrence starts its request). ``x`` is linked
    to ``y`` when ``links[x, 0] == y`` and ``links[y, 1] == x``. Returns the
    number of distinct codes seen.
    """
    seen = 0
    for r in range(offsets.size - 1):
        a = offsets[r]
        n = offsets[r + 1] - a
        n_full = full_blocks_before(r, n, input_len, block_size)
        prev = -1
        for k in range(n):
            tok = tokens_after_full(r, k, n, n_full, input_len, block_size)
            if full_only and tok < block_size:
                continue
            c = codes[a + k]
            p = links[c, 1]
            if p == -3:
                links[c, 1] = prev
                seen += 1
            elif p != prev:
                links[c, 1] = -2
            if prev >= 0:
                q = links[prev, 0]
                if q == -3:
                    links[prev, 0] = c
                elif q != c:
                    links[prev, 0] = -2
            if tok != block_size:
                links[c, 0] = -2
            prev = c
        if prev >= 0:
            links[prev, 0] = -2
    return seen


@njit(cache=True, nogil=True)
def chain_refs(codes: Any, offsets: Any, input_len: Any, block_size: int, full_only: bool, links: Any) -> Any:
    """One reference per run of linked codes (``links`` from :func:`chain_links`).

    The predecessor column receives the group of each run's first code as
    ``-4 - group`` (a run's first code is never linked from its predecessor,
    so the links of the other codes stay readable). Returns the group of each
    run (numbered by first appearance), its length in blocks, its tokens,
    the runs per request, the number of groups and the number of block
    references. A group seen before is skipped over whole (it always occurs
    whole, see ``_chains``), unless ``full_only`` drops blocks in between.
    """
    n_rows = offsets.size - 1
    size = offsets[n_rows] - offsets[0]
    gid = np.empty(size, dtype=np.int64)
    width = np.empty(size, dtype=np.int64)
    tokens = np.empty(size, dtype=np.int64)
    counts = np.zeros(n_rows, dtype=np.int64)
    weight = np.empty(size, dtype=np.int64)  # blocks of each group, by group
    j = -1
    n_groups = 0
    n_refs = 0
    for r in range(n_rows):
        a = offsets[r]
        n = offsets[r + 1] - a
        n_full = full_blocks_before(r, n, input_len, block_size)
        prev = -1
        k = 0
        while k < n:
            c = codes[a + k]
            tok = tokens_after_full(r, k, n, n_full, input_len, block_size)
            if full_only and tok < block_size:
                k += 1
                continue
            if prev >= 0 and links[prev, 0] == c and links[c, 1] == prev:  # linked
                width[j] += 1
                tokens[j] += tok
                n_refs += 1
                prev = c
                k += 1
                continue
            if j >= 0:  # the previous run is complete: its group's weight
                weight[gid[j]] = width[j]
            j += 1
            counts[r] += 1
            g = links[c, 1]
            if g <= -4 and not full_only:  # a known group: take its run whole
                g = -4 - g
                w = weight[g]
                gid[j] = g
                width[j] = w
                tokens[j] = (w - 1) * block_size + tokens_after_full(r, k + w - 1, n, n_full, input_len, block_size)
                n_refs += w
                k += w
                prev = -1  # a run ends unlinked
                continue
            if g <= -4:
                g = -4 - g
            else:
                g = n_groups
                links[c, 1] = -4 - g
                n_groups += 1
            gid[j] = g
            width[j] = 1
            tokens[j] = tok
            n_refs += 1
            prev = c
            k += 1
    return gid[: j + 1], width[: j + 1], tokens[: j + 1], counts, n_groups, n_refs
