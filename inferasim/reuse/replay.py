"""Direct simulation of one prefix cache over a workload, request by request.

Replay semantics (shared by every function of :mod:`inferasim.reuse`)
---------------------------------------------------------------------
Requests are replayed in arrival order, without timing. For each request:

1. **Lookup.** The hit is the longest *leading* run of the request's hash
   ids present in the cache: a prefix cache cannot reuse a block whose
   predecessor missed. The lookup sees the cache as the previous requests
   left it (a repeated id inside a request hits only if it was already
   cached).
2. **Touch.** Then the request's distinct ids are touched one by one, each
   inserted if missing (evicting one block when the cache is over capacity)
   or refreshed if present. ``touch="tail_first"`` (the default) touches the
   last block first and the first block last, so a request's head is the
   most recent (as vLLM frees a finished request's blocks tail-first and
   SGLang's radix tree keeps parents at least as recent as children);
   ``touch="head_first"`` touches them in request order, so the last block
   is the most recent. No block is pinned: a request with more distinct
   blocks than the capacity evicts its own earlier-touched blocks, and the
   cache ends holding the last ``capacity`` ones it touched.

Block ``k`` of a request holds ``block_size`` tokens, except the last, which
holds ``input_len - block_size * (n - 1)``. With ``full_blocks_only=True``
a block holding fewer than ``block_size`` tokens (a partial last block) is
never looked up nor inserted, as engines cache full blocks only. Token
ratios divide by ``sum(input_len)``; block ratios by the number of block
references considered.

Policies
--------
``"lru"``
    Evict the least recently touched block.
``"fifo"``
    Evict the block inserted longest ago; a hit does not refresh it.
``"lfu"``
    Evict the block with the fewest touches since it was inserted (one
    touch per request), the least recently touched among ties; a new block
    is always inserted.
``"opt"``
    Belady's offline optimum with bypass. After each request the cache
    keeps, out of its blocks and the request's blocks, the ``capacity``
    ones whose next use comes soonest (a use is ordered by request, then by
    position inside the request); blocks never used again are dropped. On
    a *prefix-closed* workload (every id always has the same predecessor,
    as in the Mooncake traces) a block's predecessor is always used no
    later than the block itself, so this cache is closed under
    predecessors and every cached block a request references is a prefix
    hit. Keeping the soonest-used blocks maximises the number of cached
    references (interval scheduling on ``capacity`` machines), an upper
    bound on the prefix hits of any policy, so on such workloads OPT's
    block hits are the exact optimum; its token hits are optimal when all
    blocks are full. On other workloads it remains a strong heuristic.
``"length_aware"``
    The LengthAwareCache of the Mooncake paper (FAST'25, section 4.2 and
    Table 1 of the arXiv version: "similar to LFU but prioritizing eviction
    of cache blocks occurring later in requests"). Precisely: every cached
    block carries its use count (touches since it was inserted, one per
    request, as ``"lfu"``), its *position* (0-based index of its first
    occurrence in the request that touched it last: block ``k`` of a prompt
    has position ``k``) and its last touch. The victim is the block with
    the fewest uses; among those, the one deepest in its prompt (largest
    position); among those, the least recently touched. A new block is
    always inserted (the victim is chosen among the blocks already cached).
    On a prefix-closed trace a block is used at most as often as its
    predecessor, so ties in use count are common and the rule evicts
    prompt tails before the heads they hang off.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from inferasim.reuse import _kernels
from inferasim.reuse._refs import BlockRefs, block_refs, check_touch, touch_sequence
from inferasim.reuse._result import check_capacity, per_request_frame
from inferasim.workload import Workload

__all__ = ["replay_cache", "POLICIES"]

#: Cache policies accepted by :func:`replay_cache`.
POLICIES = ("lru", "fifo", "lfu", "opt", "length_aware")


def _split(flat: list[int], offsets: list[int]) -> list[list[int]]:
    return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def _lookup(cache: object, ids: list[int]) -> int:
    h = 0
    for x in ids:
        if x in cache:  # type: ignore[operator]
            h += 1
        else:
            break
    return h


def _lru(look: list[list[int]], touch: list[list[int]], capacity: int) -> list[int]:
    cache: OrderedDict[int, None] = OrderedDict()
    move = cache.move_to_end
    pop = cache.popitem
    hits = []
    for ids, order in zip(look, touch, strict=True):
        hits.append(_lookup(cache, ids))
        for x in order:
            if x in cache:
                move(x)
            else:
                cache[x] = None
                if len(cache) > capacity:
                    pop(last=False)
    return hits


def _fifo(look: list[list[int]], touch: list[list[int]], capacity: int) -> list[int]:
    cache: set[int] = set()
    queue: deque[int] = deque()
    hits = []
    for ids, order in zip(look, touch, strict=True):
        hits.append(_lookup(cache, ids))
        for x in order:
            if x not in cache:
                cache.add(x)
                queue.append(x)
                if len(cache) > capacity:
                    cache.remove(queue.popleft())
    return hits


def _lfu(look: list[list[int]], touch: list[list[int]], capacity: int) -> list[int]:
    freq: dict[int, int] = {}
    buckets: dict[int, OrderedDict[int, None]] = {}
    min_freq = 0
    hits = []
    for ids, order in zip(look, touch, strict=True):
        hits.append(_lookup(freq, ids))
        for x in order:
            f = freq.get(x)
            if f is not None:
                bucket = buckets[f]
                del bucket[x]
                if not bucket:
                    del buckets[f]
                    if min_freq == f:
                        min_freq = f + 1
                f += 1
                freq[x] = f
                target = buckets.get(f)
                if target is None:
                    target = buckets[f] = OrderedDict()
                target[x] = None
            else:
                if len(freq) >= capacity:
                    bucket = buckets[min_freq]
                    victim, _ = bucket.popitem(last=False)
                    del freq[victim]
                    if not bucket:
                        del buckets[min_freq]
                freq[x] = 1
                target = buckets.get(1)
                if target is None:
                    target = buckets[1] = OrderedDict()
                target[x] = None
                min_freq = 1
    return hits


def _length_aware(
    look: list[list[int]],
    touch: list[list[int]],
    where: list[list[int]],
    capacity: int,
    sizes: tuple[int, int, int],
) -> list[int]:
    # One int per heap entry, ((uses * P + (P - 1 - position)) * T + clock) * U + id,
    # so the heap pops (fewest uses, deepest, least recent) first and the id and
    # the use count decode from the entry. Stale entries (a later touch) are skipped.
    u, t, p = sizes  # distinct ids, touches + 1, positions
    per_use = p * t * u
    state: dict[int, int] = {}  # id -> its live entry
    heap: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    clock = 0
    hits = []
    for ids, order, positions in zip(look, touch, where, strict=True):
        hits.append(_lookup(state, ids))
        for x, pos in zip(order, positions, strict=True):
            clock += 1
            old = state.get(x)
            if old is None:
                uses = 1
                if len(state) >= capacity:
                    while True:
                        entry = pop(heap)
                        victim = entry % u
                        if state.get(victim) == entry:
                            del state[victim]
                            break
            else:
                uses = old // per_use + 1
            entry = ((uses * p + (p - 1 - pos)) * t + clock) * u + x
            state[x] = entry
            push(heap, entry)
    return hits


def _next_use(refs: BlockRefs, compact: np.ndarray, flat_pos: np.ndarray) -> np.ndarray:
    """For each touch, the flat position of the same id's next use (a later request).

    Never-used-again touches get ``refs.ids.size`` (past every position).
    """
    order = np.argsort(compact, kind="stable")  # by id, then by request
    same = compact[order[1:]] == compact[order[:-1]]
    key = np.full(compact.size, refs.ids.size, dtype=np.int64)
    key[order[:-1][same]] = flat_pos[order[1:][same]]
    return key


def _opt(
    look: list[list[int]],
    touch: list[list[int]],
    keys: list[list[int]],
    capacity: int,
    id_at: list[int],
    never: int,
) -> list[int]:
    cache: dict[int, int] = {}  # id -> flat position of its next use
    heap: list[int] = []  # negated next-use positions (max-heap), stale entries skipped
    push, pop = heapq.heappush, heapq.heappop
    hits = []
    for ids, order, nexts in zip(look, touch, keys, strict=True):
        hits.append(_lookup(cache, ids))
        for x, k in zip(order, nexts, strict=True):
            if k == never:
                cache.pop(x, None)
            else:
                cache[x] = k
                push(heap, -k)
        while len(cache) > capacity:
            k = -pop(heap)
            x = id_at[k]
            if cache.get(x) == k:
                del cache[x]
    return hits


def replay_hits(
    refs: BlockRefs,
    capacity: int,
    policy: str = "lru",
    touch: str = "tail_first",
    *,
    compiled: bool | None = None,
) -> np.ndarray:
    """Hit blocks of every request by direct simulation (see the module docstring).

    ``compiled`` picks the loop of ``"fifo"``, ``"lfu"`` and ``"opt"``: the
    numba kernels of :mod:`inferasim.reuse._kernels` (True), the Python
    loops of this module, the reference (False), or the kernels when numba
    is there (None, the default). Both give the same hits.

    Examples
    --------
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
    >>> replay_hits(block_refs(wl), 1).tolist()
    [0, 1]
    """
    return replay_hits_many(refs, [capacity], policy, touch, compiled=compiled)[0]


def replay_hits_many(
    refs: BlockRefs,
    capacities: Iterable[int],
    policy: str = "lru",
    touch: str = "tail_first",
    *,
    compiled: bool | None = None,
) -> np.ndarray:
    """:func:`replay_hits` at several capacities, one row each, preparing the replay once.

    Examples
    --------
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
    >>> replay_hits_many(block_refs(wl), [0, 1, 3], "fifo").tolist()
    [[0, 0], [0, 1], [0, 1]]
    """
    caps = [int(c) for c in capacities]
    out = np.zeros((len(caps), refs.n_requests), dtype=np.int64)
    for j, hits in enumerate(iter_replay_hits(refs, caps, policy, touch, compiled=compiled)):
        out[j] = hits
    return out


def iter_replay_hits(
    refs: BlockRefs,
    capacities: Iterable[int],
    policy: str = "lru",
    touch: str = "tail_first",
    *,
    compiled: bool | None = None,
) -> Iterator[np.ndarray]:
    """:func:`replay_hits` at each capacity in turn, lazily, preparing the replay once.

    A caller may stop early (a stack policy that reached its ceiling).

    Examples
    --------
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
    >>> [h.tolist() for h in iter_replay_hits(block_refs(wl), [1, 2], "opt")]
    [[0, 1], [0, 1]]
    """
    check_policy(policy)
    check_touch(touch)
    caps = [int(c) for c in capacities]
    zeros = np.zeros(refs.n_requests, dtype=np.int64)
    if refs.ids.size == 0 or not any(caps):
        for _ in caps:
            yield zeros.copy()
        return
    seq = touch_sequence(refs, touch)
    use_kernel = policy in _kernels.KERNEL_POLICIES and (
        _kernels.available() if compiled is None else compiled
    )
    nxt = _next_use(refs, seq.compact, seq.flat_pos) if policy == "opt" else None
    run: Callable[[int], Sequence[int] | np.ndarray]
    if use_kernel:
        def run(c: int) -> np.ndarray:
            return _kernels.replay_kernel(
                policy, refs.compact, refs.offsets, seq.compact, seq.offsets, c, nxt
            )
    else:
        offsets = refs.offsets.tolist()
        look = _split(refs.compact.tolist(), offsets)
        seq_offsets = seq.offsets.tolist()
        order = _split(seq.compact.tolist(), seq_offsets)
        if policy == "length_aware":
            position = seq.flat_pos - refs.offsets[refs.rows[seq.flat_pos]]
            where = _split(position.tolist(), seq_offsets)
            sizes = (refs.n_unique, int(seq.compact.size) + 1, int(position.max()) + 1)
            run = lambda c: _length_aware(look, order, where, c, sizes)  # noqa: E731
        elif policy == "opt":
            never = int(refs.ids.size)
            keys = _split(nxt.tolist(), seq_offsets)  # type: ignore[union-attr]
            id_at = refs.compact.tolist()
            run = lambda c: _opt(look, order, keys, c, id_at, never)  # noqa: E731
        else:
            loop = {"lru": _lru, "fifo": _fifo, "lfu": _lfu}[policy]
            run = lambda c: loop(look, order, c)  # noqa: E731
    for capacity in caps:
        yield np.asarray(run(capacity), dtype=np.int64) if capacity else zeros.copy()


def check_policy(policy: str) -> None:
    """Raise a clear error for an unknown policy.

    Examples
    --------
    >>> check_policy("arc")
    Traceback (most recent call last):
    ...
    ValueError: policy must be one of ('lru', 'fifo', 'lfu', 'opt', 'length_aware'), got 'arc'
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")


def capacity_in_blocks(capacity: object, unit: str, block_size: int) -> int:
    """A capacity given in ``unit`` as whole blocks (token capacities round down).

    Examples
    --------
    >>> capacity_in_blocks(1500, "tokens", 512)
    2
    """
    if unit not in ("blocks", "tokens"):
        raise ValueError(f"unit must be 'blocks' or 'tokens', got {unit!r}")
    value = check_capacity(capacity)
    return value if unit == "blocks" else value // block_size


def replay_cache(
    workload: Workload,
    capacity: int,
    *,
    policy: str = "lru",
    unit: str = "blocks",
    touch: str = "tail_first",
    full_blocks_only: bool = False,
) -> pd.DataFrame:
    """Replay one prefix cache of fixed capacity over the workload.

    See the module docstring of :mod:`inferasim.reuse.replay` for the exact
    lookup/touch semantics and the five policies.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    capacity : int
        Cache size, in ``unit``. Token capacities round down to whole blocks.
    policy : {"lru", "fifo", "lfu", "opt", "length_aware"}, default "lru"
        Eviction policy; ``"opt"`` is Belady's offline optimum,
        ``"length_aware"`` the Mooncake paper's LengthAwareCache (rule in
        the module docstring).
    unit : {"blocks", "tokens"}, default "blocks"
        Unit of ``capacity``.
    touch : {"tail_first", "head_first"}, default "tail_first"
        Order in which a request touches its blocks after the lookup.
    full_blocks_only : bool, default False
        Never look up nor insert partial last blocks (engine semantics).

    Returns
    -------
    pandas.DataFrame
        One row per request (index ``request_id``): ``blocks`` (block
        references considered), ``hit_blocks``, ``input_len`` and
        ``hit_tokens`` (tokens), ``block_hit_ratio`` and
        ``token_hit_ratio`` (NaN for an empty request). ``frame.attrs``
        holds the workload-level ``block_hit_ratio`` and
        ``token_hit_ratio``.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Capacity 2 blocks of 512 tokens; request 1 reuses block 1 (head of its
    prefix), request 2 reuses blocks 1 and 3:

    >>> wl = Workload.from_requests([0, 1, 2], [1024, 1024, 1100], [1, 1, 1],
    ...                             [[1, 2], [1, 3], [1, 3, 4]])
    >>> df = replay_cache(wl, 2, policy="lru")
    >>> df["hit_blocks"].tolist(), df["hit_tokens"].tolist()
    ([0, 1, 2], [0, 512, 1024])
    >>> round(df.attrs["token_hit_ratio"], 4)
    0.4879
    """
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    blocks = capacity_in_blocks(capacity, unit, refs.block_size)
    check_policy(policy)
    hits = replay_hits(refs, blocks, policy, touch)
    frame = per_request_frame(refs, hits)
    if "type" in workload.frame.columns:  # request types (Bailian): group hits by type
        frame.insert(0, "type", workload.frame["type"].to_numpy())
    frame.attrs.update(policy=policy, capacity_blocks=blocks, touch=touch)
    return frame
