"""Local versus global caching: one capacity split across independent caches or pooled.

With ``pool=P`` the local caches are backed by one shared pool of ``P``
blocks that takes their evicted blocks, either exclusive of them or keeping
a copy of what it serves (``pool_exclusive=False``, the Mooncake Store /
LMCache shape): see :func:`partitioned_hit_rate` for the exact replay.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import pandas as pd

from inferasim.reuse._refs import BlockRefs, block_refs, check_touch, touch_sequence
from inferasim.reuse._stack import lookup_depths, prefix_max
from inferasim.reuse.replay import capacity_in_blocks, check_policy, replay_hits
from inferasim.workload import Workload

__all__ = ["partitioned_hit_rate", "assign_parts", "ASSIGNERS"]

#: Named request-to-cache assignments.
ASSIGNERS = ("random", "hash_first_block", "round_robin")

Assigner = str | Callable[[Workload], "np.ndarray | list[int]"]


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fixed, well-spread hash of int64 ids."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def assign_parts(
    workload: Workload, parts: int, assign: Assigner = "random", *, seed: int = 0
) -> np.ndarray:
    """Cache index (``0..parts-1``) of every request.

    ``"random"`` draws uniformly with ``seed``; ``"hash_first_block"``
    hashes the first hash id (requests sharing a first block share a
    cache, as a prefix-affinity router would do; empty requests go to
    cache 0); ``"round_robin"`` takes request ``i`` to ``i % parts``; a
    callable gets the workload and returns one index per request.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1, 1, 1], [1] * 3, [[7], [8], [7]], block_size=1)
    >>> a = assign_parts(wl, 4, "hash_first_block")
    >>> bool(a[0] == a[2]), assign_parts(wl, 2, "round_robin").tolist()
    (True, [0, 1, 0])
    """
    n = len(workload)
    if callable(assign):
        out = np.asarray(assign(workload))
        if out.shape != (n,):
            raise ValueError(
                f"assign returned shape {out.shape}, expected ({n},): one cache per request"
            )
        if not np.issubdtype(out.dtype, np.integer):
            raise ValueError(f"assign must return integers, got dtype {out.dtype}")
        if out.size and (out.min() < 0 or out.max() >= parts):
            raise ValueError(f"assign returned cache indices outside 0..{parts - 1}")
        return out.astype(np.int64)
    if assign == "random":
        return np.random.default_rng(seed).integers(parts, size=n).astype(np.int64)
    if assign == "round_robin":
        return np.arange(n, dtype=np.int64) % parts
    if assign == "hash_first_block":
        has = workload.num_blocks > 0
        first = np.zeros(n, dtype=np.int64)
        first[has] = workload.hash_ids[workload.offsets[:-1][has]]
        out = (_mix64(first) % np.uint64(parts)).astype(np.int64)
        return np.where(has, out, 0)
    raise ValueError(f"assign must be one of {ASSIGNERS} or a callable, got {assign!r}")


def _subset(refs: BlockRefs, rows: np.ndarray) -> BlockRefs:
    lengths = np.diff(refs.offsets)[rows]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    gather = np.repeat(refs.offsets[:-1][rows] - offsets[:-1], lengths) + np.arange(offsets[-1])
    ids = refs.ids[gather]
    unique_ids, compact = np.unique(ids, return_inverse=True)
    return BlockRefs(
        ids=ids,
        offsets=offsets,
        tokens=refs.tokens[gather],
        compact=compact.reshape(-1).astype(np.int64),
        unique_ids=unique_ids,
        rows=np.repeat(np.arange(rows.size, dtype=np.int64), lengths),
        input_len=refs.input_len[rows],
        arrival_ms=refs.arrival_ms[rows],
        block_size=refs.block_size,
    )


def _hits(refs: BlockRefs, capacity: int, policy: str, touch: str) -> np.ndarray:
    if policy != "lru":
        return replay_hits(refs, capacity, policy, touch)
    depth, cold = lookup_depths(refs, touch)
    ok = prefix_max(depth, refs.offsets) <= min(capacity, cold - 1)
    return np.bincount(refs.rows[ok], minlength=refs.n_requests).astype(np.int64)


def _pool_replay(
    refs: BlockRefs,
    where: np.ndarray,
    caps: list[int],
    pool: int,
    touch: str,
    exclusive: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Which references hit locally and which in the pool (masks over ``refs.ids``).

    Local LRU caches of ``caps`` blocks, request ``r`` on cache
    ``where[r]``, over one LRU pool of ``pool`` blocks, exclusive or
    keeping a copy of what it serves (the rules are in
    :func:`partitioned_hit_rate`).
    """
    seq = touch_sequence(refs, touch)
    look = refs.compact.tolist()
    offsets = refs.offsets.tolist()
    order = seq.compact.tolist()
    seq_offsets = seq.offsets.tolist()
    locals_: list[OrderedDict[int, None]] = [OrderedDict() for _ in caps]
    shared: OrderedDict[int, None] = OrderedDict()
    in_pool = np.zeros(refs.ids.size, dtype=bool)  # per reference: hit served by the pool
    hit = np.zeros(refs.ids.size, dtype=bool)
    for r, part in enumerate(where.tolist()):
        local = locals_[part]
        cap = caps[part]
        for j in range(offsets[r], offsets[r + 1]):
            x = look[j]
            if x in local:
                hit[j] = True
            elif x in shared:
                hit[j] = in_pool[j] = True
            else:
                break
        for x in order[seq_offsets[r] : seq_offsets[r + 1]]:
            if x in local:
                local.move_to_end(x)
                continue
            if x in shared:
                if exclusive:
                    del shared[x]  # promotion: the pool keeps no copy
                else:
                    shared.move_to_end(x)  # the pool keeps its copy, refreshed
            local[x] = None
            if len(local) > cap:
                victim, _ = local.popitem(last=False)  # demotion to the pool
                if victim in shared:
                    shared.move_to_end(victim)
                else:
                    shared[victim] = None
                    if len(shared) > pool:
                        shared.popitem(last=False)
    return hit & ~in_pool, in_pool


def partitioned_hit_rate(
    workload: Workload,
    total_capacity: int,
    parts: int,
    *,
    assign: Assigner = "random",
    policy: str = "lru",
    unit: str = "blocks",
    touch: str = "tail_first",
    full_blocks_only: bool = False,
    seed: int = 0,
    pool: int = 0,
    pool_exclusive: bool = True,
) -> pd.DataFrame:
    """The same total capacity as ``parts`` independent caches versus one pooled cache.

    The local-versus-global question of the Mooncake (FAST'25) paper,
    answered without timing: requests are assigned to ``parts`` caches that
    split ``total_capacity`` (the first ``total_capacity % parts`` caches get
    one block more), each cache replays its requests in arrival order with
    the semantics of :mod:`inferasim.reuse.replay`, and the result is set
    against one cache of ``total_capacity`` serving every request.

    **Shared pool** (``pool > 0``, LRU only). The local caches are backed by
    one pool of ``pool`` blocks that every request sees, exclusive of the
    local caches: a request looks its ids up in its local cache, then in
    the pool (a block found in the pool continues the hit run and counts in
    ``pool_hit_*``); then it touches its distinct ids (tail-first by
    default): a locally cached id is refreshed; any other id moves into the
    local cache (out of the pool if it was there: promotion leaves no copy
    behind) and, when the local cache goes over its capacity, its least
    recently used block is demoted to the most recent end of the pool (only
    refreshed if the pool already holds it, e.g. demoted earlier by another
    cache); an over-full pool drops its least recently used block. Two local
    caches may hold the same block; the pool holds one copy. The
    ``"pooled"`` row is then one LRU cache of ``total_capacity + pool``.
    With ``parts=1`` this is the exclusive two-tier hierarchy of
    :func:`inferasim.reuse.tiered_hit_rate` with tiers
    ``[total_capacity, pool]``.

    With ``pool_exclusive=False`` the pool keeps (and refreshes) its copy of
    a block it serves, as a shared store does (Mooncake Store, LMCache): a
    block promoted into one local cache stays visible to every other one.
    Everything else is unchanged.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    total_capacity : int
        Capacity summed over the caches, in ``unit``.
    parts : int
        Number of independent caches (``>= 1``).
    assign : {"random", "hash_first_block", "round_robin"} or callable, default "random"
        Request-to-cache assignment, see :func:`assign_parts`.
    policy : {"lru", "fifo", "lfu", "opt", "length_aware"}, default "lru"
        Eviction policy of every cache.
    unit : {"blocks", "tokens"}, default "blocks"
        Unit of ``total_capacity`` (tokens round down to whole blocks).
    touch : {"tail_first", "head_first"}, default "tail_first"
        Order in which a request touches its blocks after the lookup.
    full_blocks_only : bool, default False
        Never look up nor insert partial last blocks (engine semantics).
    seed : int, default 0
        Seed of the ``"random"`` assignment.
    pool : int, default 0
        Capacity of the shared pool behind the local caches, in ``unit``
        (``policy="lru"`` only).
    pool_exclusive : bool, default True
        A block moves out of the pool when a local cache takes it (``True``)
        or the pool keeps its copy (``False``).

    Returns
    -------
    pandas.DataFrame
        Index ``cache``: ``"pooled"``, ``"partitioned"`` (all parts
        together) then ``"part 0"``, ``"part 1"``, ...; columns ``caches``,
        ``capacity_blocks`` (per cache), ``requests``, ``blocks``,
        ``hit_blocks``, ``input_len``, ``hit_tokens``, ``block_hit_ratio``
        and ``token_hit_ratio`` (ratios within the row's requests), and
        ``pool_hit_blocks`` and ``pool_hit_tokens``: the part of the hits
        served by the shared pool (0 without a pool and in ``"pooled"``).
        ``frame.attrs["pool_blocks"]`` is the pool capacity in blocks.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Four requests sharing block 1, capacity 2 blocks. Pooled, requests 1-3
    hit block 1. Round-robin over two caches of 1 block: each cache sees
    block 1 twice, so only requests 2 and 3 hit.

    >>> wl = Workload.from_requests([0, 1, 2, 3], [2] * 4, [1] * 4,
    ...                             [[1, 2], [1, 3], [1, 4], [1, 5]], block_size=1)
    >>> df = partitioned_hit_rate(wl, 2, 2, assign="round_robin")
    >>> df[["caches", "capacity_blocks", "requests", "hit_blocks"]]
                 caches  capacity_blocks  requests  hit_blocks
    cache
    pooled            1                2         4           3
    partitioned       2                1         4           2
    part 0            1                1         2           1
    part 1            1                1         2           1

    Two caches of 1 block behind a pool of 2, round-robin, requests
    [1, 2], [3], [1, 2], [2]. R0 (cache 0, tail-first touches 2 then 1)
    demotes 2 to the pool; R2 (cache 0) hits 1 locally and 2 in the pool;
    its touches promote 2 then 1, leaving 1 local and 2 back in the pool;
    R3 (cache 1) finds 2 in the pool. Without the pool only R2's block 1
    hits.

    >>> wl = Workload.from_requests([0, 1, 2, 3], [2, 1, 2, 1], [1] * 4,
    ...                             [[1, 2], [3], [1, 2], [2]], block_size=1)
    >>> df = partitioned_hit_rate(wl, 2, 2, assign="round_robin", pool=2)
    >>> df.loc["partitioned", ["hit_blocks", "pool_hit_blocks"]].tolist()
    [3, 2]
    >>> int(partitioned_hit_rate(wl, 2, 2, assign="round_robin").loc["partitioned", "hit_blocks"])
    1
    """
    check_policy(policy)
    check_touch(touch)
    if isinstance(parts, bool) or int(parts) != parts or parts < 1:
        raise ValueError(f"parts must be a positive integer, got {parts!r}")
    parts = int(parts)
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    total = capacity_in_blocks(total_capacity, unit, refs.block_size)
    pool_blocks = capacity_in_blocks(pool, unit, refs.block_size)
    if pool_blocks and policy != "lru":
        raise ValueError(f"pool needs policy='lru' (the shared pool is an LRU), got {policy!r}")
    where = assign_parts(workload, parts, assign, seed=seed)
    caps = [total // parts + (1 if k < total % parts else 0) for k in range(parts)]
    pooled_hits = _hits(refs, total + pool_blocks, policy, touch)
    part_hits = np.zeros(refs.n_requests, dtype=np.int64)
    pool_hits = np.zeros(refs.n_requests, dtype=np.int64)
    pool_tokens = np.zeros(refs.n_requests, dtype=np.int64)
    members = [np.flatnonzero(where == k) for k in range(parts)]
    if pool_blocks:
        local_ref, pool_ref = _pool_replay(refs, where, caps, pool_blocks, touch, pool_exclusive)
        part_hits = np.bincount(refs.rows[local_ref | pool_ref], minlength=refs.n_requests)
        pool_hits = np.bincount(refs.rows[pool_ref], minlength=refs.n_requests)
        pool_tokens = np.bincount(
            refs.rows[pool_ref], weights=refs.tokens[pool_ref], minlength=refs.n_requests
        ).astype(np.int64)
    else:
        for k, rows in enumerate(members):
            if rows.size:
                part_hits[rows] = _hits(_subset(refs, rows), caps[k], policy, touch)
    cum = np.concatenate(([0], np.cumsum(refs.tokens)))
    start = refs.offsets[:-1]
    blocks = np.diff(refs.offsets)
    no_pool = np.zeros(refs.n_requests, dtype=np.int64)

    def row(
        caches: int,
        capacity: int,
        rows: np.ndarray,
        hits: np.ndarray,
        from_pool: np.ndarray = no_pool,
        from_pool_tokens: np.ndarray = no_pool,
    ) -> dict[str, float]:
        hb = int(hits[rows].sum())
        ht = int((cum[start[rows] + hits[rows]] - cum[start[rows]]).sum())
        nb = int(blocks[rows].sum())
        tok = int(refs.input_len[rows].sum())
        return {
            "caches": caches,
            "capacity_blocks": capacity,
            "requests": int(rows.size),
            "blocks": nb,
            "hit_blocks": hb,
            "input_len": tok,
            "hit_tokens": ht,
            "block_hit_ratio": hb / nb if nb else 0.0,
            "token_hit_ratio": ht / tok if tok else 0.0,
            "pool_hit_blocks": int(from_pool[rows].sum()),
            "pool_hit_tokens": int(from_pool_tokens[rows].sum()),
        }

    everyone = np.arange(refs.n_requests)
    records = {
        "pooled": row(1, total + pool_blocks, everyone, pooled_hits),
        "partitioned": row(parts, total // parts, everyone, part_hits, pool_hits, pool_tokens),
    }
    for k, rows in enumerate(members):
        records[f"part {k}"] = row(1, caps[k], rows, part_hits, pool_hits, pool_tokens)
    frame = pd.DataFrame.from_dict(records, orient="index")
    frame.index.name = "cache"
    frame.attrs.update(
        policy=policy,
        assign=assign if isinstance(assign, str) else "callable",
        pool_blocks=pool_blocks,
        pool_exclusive=pool_exclusive,
    )
    return frame
