"""Local versus global caching: one capacity split across independent caches or pooled."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from inferasim.reuse._refs import BlockRefs, block_refs, check_touch
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
) -> pd.DataFrame:
    """The same total capacity as ``parts`` independent caches versus one pooled cache.

    The local-versus-global question of the Mooncake (FAST'25) paper,
    answered without timing: requests are assigned to ``parts`` caches that
    split ``total_capacity`` (the first ``total_capacity % parts`` caches get
    one block more), each cache replays its requests in arrival order with
    the semantics of :mod:`inferasim.reuse.replay`, and the result is set
    against one cache of ``total_capacity`` serving every request.

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

    Returns
    -------
    pandas.DataFrame
        Index ``cache``: ``"pooled"``, ``"partitioned"`` (all parts
        together) then ``"part 0"``, ``"part 1"``, ...; columns ``caches``,
        ``capacity_blocks`` (per cache), ``requests``, ``blocks``,
        ``hit_blocks``, ``input_len``, ``hit_tokens``, ``block_hit_ratio``
        and ``token_hit_ratio`` (ratios within the row's requests).

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
    """
    check_policy(policy)
    check_touch(touch)
    if isinstance(parts, bool) or int(parts) != parts or parts < 1:
        raise ValueError(f"parts must be a positive integer, got {parts!r}")
    parts = int(parts)
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    total = capacity_in_blocks(total_capacity, unit, refs.block_size)
    where = assign_parts(workload, parts, assign, seed=seed)
    caps = [total // parts + (1 if k < total % parts else 0) for k in range(parts)]
    pooled_hits = _hits(refs, total, policy, touch)
    part_hits = np.zeros(refs.n_requests, dtype=np.int64)
    members = []
    for k in range(parts):
        rows = np.flatnonzero(where == k)
        members.append(rows)
        if rows.size:
            part_hits[rows] = _hits(_subset(refs, rows), caps[k], policy, touch)
    cum = np.concatenate(([0], np.cumsum(refs.tokens)))
    start = refs.offsets[:-1]
    blocks = np.diff(refs.offsets)

    def row(caches: int, capacity: int, rows: np.ndarray, hits: np.ndarray) -> dict[str, float]:
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
        }

    everyone = np.arange(refs.n_requests)
    records = {
        "pooled": row(1, total, everyone, pooled_hits),
        "partitioned": row(parts, total // parts, everyone, part_hits),
    }
    for k, rows in enumerate(members):
        records[f"part {k}"] = row(1, caps[k], rows, part_hits)
    frame = pd.DataFrame.from_dict(records, orient="index")
    frame.index.name = "cache"
    frame.attrs.update(policy=policy, assign=assign if isinstance(assign, str) else "callable")
    return frame
