"""Hit rate against cache capacity: the whole LRU curve in one pass.

For LRU, every block reference gets its stack depth at its request's lookup
(:func:`inferasim.reuse._stack.lookup_depths`, Mattson's algorithm,
vectorised). Block ``k`` of a request hits at capacity ``C`` exactly when
the request's blocks ``0..k`` all have depth ``<= C``, i.e. when the
running maximum ``D_k`` of the depths within the request is ``<= C``. One
sort of ``D`` then gives the hits at every capacity. This equals the direct
replay of :func:`inferasim.reuse.replay_cache` (same semantics, documented
in :mod:`inferasim.reuse.replay`) at every capacity; the tests prove it on
the real traces and on generated workloads.

Runs of ids that always occur together (the 32 16-token ids of a 512-token
prompt chunk) are replayed as one weighted block (:mod:`inferasim.reuse._chains`):
the same hits at every capacity, in time nearly independent of the block size.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from inferasim.reuse._chains import chain_refs, lru_hits
from inferasim.reuse._partial import check_partial, divergences
from inferasim.reuse._refs import BlockRefs, block_refs, check_touch
from inferasim.reuse._result import check_capacity
from inferasim.reuse._stack import depth_at, lookup_depths, prefix_max
from inferasim.reuse.replay import check_policy, iter_replay_hits
from inferasim.workload import Workload

__all__ = ["hit_rate_curve", "prefix_depths", "CURVE_COLUMNS"]

#: Columns of :func:`hit_rate_curve`.
CURVE_COLUMNS = (
    "capacity_blocks",
    "capacity_tokens",
    "block_hit_ratio",
    "token_hit_ratio",
    "hit_blocks",
    "hit_tokens",
    "policy",
    "partial_tokens",
)


def prefix_depths(refs: BlockRefs, touch: str = "tail_first") -> tuple[np.ndarray, int]:
    """Smallest LRU capacity at which each block reference is a prefix hit.

    Returns ``(D, cold)``: reference ``k`` hits at capacity ``C`` exactly when
    ``D[k] <= C``; ``D[k] == cold`` means it never hits (a predecessor or the
    block itself was never seen before).

    Examples
    --------
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1, 2], [2, 2, 2], [1, 1, 1],
    ...                             [[1, 2], [3, 4], [1, 2]], block_size=1)
    >>> d, cold = prefix_depths(block_refs(wl), "head_first")
    >>> d[4:].tolist()  # after [3, 4] the stack is 4, 3, 2, 1: block 1 at depth 4
    [4, 4]
    """
    depths, cold = lookup_depths(refs, touch)
    return prefix_max(depths, refs.offsets), cold


def _capacities(
    capacities: Iterable[float] | None, unit: str, n_unique: int, block_size: int, points: int
) -> np.ndarray:
    if unit not in ("blocks", "tokens"):
        raise ValueError(f"unit must be 'blocks' or 'tokens', got {unit!r}")
    if capacities is None:
        top = max(n_unique, 1)
        grid = np.unique(np.round(np.geomspace(1, top, points)).astype(np.int64))
        return grid
    values = np.atleast_1d(np.asarray(capacities if not np.isscalar(capacities) else [capacities]))
    if values.ndim != 1 or values.size == 0:
        raise ValueError("capacities must be a non-empty 1-D sequence of numbers")
    blocks = np.array([check_capacity(v, "every capacity") for v in values.tolist()], np.int64)
    if unit == "tokens":
        blocks = blocks // block_size
    return np.unique(blocks)


def _partial_credit(
    refs: BlockRefs,
    depth: np.ndarray,
    cold: int,
    touch: str,
    partial_block: str,
    reach: np.ndarray,
) -> np.ndarray:
    """Divergence-block credit at every capacity in ``reach`` (see ``_partial``)."""
    infinite = np.bincount(refs.rows[depth < cold], minlength=refs.n_requests)
    div = divergences(refs, infinite, partial_block)
    if div.rows.size == 0:
        return np.zeros(reach.size, dtype=np.int64)
    has_prefix = div.ref > refs.offsets[div.rows]
    prefix_need = np.where(has_prefix, depth[np.maximum(div.ref - 1, 0)], 0)
    sibling_need = depth_at(refs, refs.compact[div.sibling], div.rows, touch)
    need = np.maximum(prefix_need, sibling_need)
    order = np.argsort(need, kind="stable")
    cum = np.concatenate(([0], np.cumsum(div.credit[order])))
    return cum[np.searchsorted(need[order], reach, side="right")].astype(np.int64)


def hit_rate_curve(
    workload: Workload,
    capacities: Iterable[float] | None = None,
    *,
    policy: str = "lru",
    unit: str = "blocks",
    touch: str = "tail_first",
    full_blocks_only: bool = False,
    partial_block: str = "none",
) -> pd.DataFrame:
    """Prefix-cache hit ratio against cache capacity.

    For ``policy="lru"`` the whole curve comes from one pass over the trace
    (LRU stack distances, see the module docstring) and equals direct replay
    exactly; other policies replay the cache once per capacity with
    :func:`inferasim.reuse.replay_cache` (same semantics).

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    capacities : sequence of int, optional
        Cache sizes in ``unit``. Default: a dense log-spaced grid from 1
        block up to the working set (the number of distinct blocks), about
        200 points for LRU and 16 for the replayed policies.
    policy : {"lru", "fifo", "lfu", "opt", "length_aware"}, default "lru"
        Eviction policy.
    unit : {"blocks", "tokens"}, default "blocks"
        Unit of ``capacities``; token capacities round down to whole blocks.
    touch : {"tail_first", "head_first"}, default "tail_first"
        Order in which a request touches its blocks after the lookup.
    full_blocks_only : bool, default False
        Never look up nor insert partial last blocks (engine semantics).
    partial_block : {"none", "half", "upper"}, default "none"
        Token-level estimate inside divergence blocks, as in
        :func:`inferasim.reuse.infinite_hit_ratio` (``policy="lru"`` only).
        At capacity ``C`` a request's credit counts when its hit run
        reaches its divergence block and the sibling block is cached at
        its lookup (LRU stack depth ``<= C``); so the curve meets the
        credited ceiling at the working set. Only token columns change;
        ``partial_tokens`` holds the credit.

    Returns
    -------
    pandas.DataFrame
        One row per distinct capacity in blocks, ascending:
        ``capacity_blocks``, ``capacity_tokens`` (``capacity_blocks *
        block_size``), ``block_hit_ratio`` (hit block references / block
        references considered), ``token_hit_ratio`` (hit tokens /
        ``sum(input_len)``), ``hit_blocks``, ``hit_tokens`` and ``policy``.
        Capacity 0 gives 0; a capacity at or above the working set gives
        :func:`inferasim.reuse.infinite_hit_ratio` exactly.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Three requests of two 512-token blocks; the third repeats the first.
    With tail-first touches the LRU stack before request 2 is 3, 4, 1, 2, so
    its blocks 1 and 2 sit at depths 3 and 4: block 1 hits from capacity 3
    on, block 2 (whose predecessor is block 1) from capacity 4 on. The
    token denominator is 3 * 1024 tokens.

    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [1] * 3, [[1, 2], [3, 4], [1, 2]])
    >>> hit_rate_curve(wl, [0, 2, 3, 4])[["capacity_blocks", "hit_blocks", "token_hit_ratio"]]
       capacity_blocks  hit_blocks  token_hit_ratio
    0                0           0         0.000000
    1                2           0         0.000000
    2                3           1         0.166667
    3                4           2         0.333333
    """
    check_policy(policy)
    check_touch(touch)
    check_partial(partial_block)
    if partial_block != "none" and policy != "lru":
        raise ValueError(f"partial_block={partial_block!r} needs policy='lru', got {policy!r}")
    if policy == "lru" and partial_block == "none":
        # linked runs of blocks replayed as one weighted block: the same hits (see _chains)
        chains = chain_refs(workload, full_blocks_only=full_blocks_only)
        caps = _capacities(capacities, unit, chains.n_ids, workload.block_size, 200)
        hit_blocks, hit_tokens = lru_hits(chains, caps, touch)
        totals = (chains.n_blocks, int(chains.refs.total_tokens), chains.n_ids)
        return _frame(caps, hit_blocks, hit_tokens, policy, None, workload.block_size, totals,
                      touch, full_blocks_only, partial_block)
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    caps = _capacities(capacities, unit, refs.n_unique, refs.block_size, 200 if policy == "lru" else 16)
    partial = np.zeros(caps.size, dtype=np.int64)
    if policy == "lru":
        depth, cold = prefix_depths(refs, touch)
        order = np.argsort(depth, kind="stable")
        sorted_depth = depth[order]
        cum_tokens = np.concatenate(([0], np.cumsum(refs.tokens[order])))
        # a cold reference never hits, however large the cache
        reach = np.minimum(caps, cold - 1)
        hit_blocks = np.searchsorted(sorted_depth, reach, side="right").astype(np.int64)
        hit_tokens = cum_tokens[hit_blocks].astype(np.int64)
        if partial_block != "none":
            partial = _partial_credit(refs, depth, cold, touch, partial_block, reach)
            hit_tokens = hit_tokens + partial
    else:
        hit_blocks, hit_tokens = replayed_hits(refs, caps, policy, touch)
    totals = (int(refs.ids.size), refs.total_tokens, refs.n_unique)
    return _frame(caps, hit_blocks, hit_tokens, policy, partial, refs.block_size, totals,
                  touch, full_blocks_only, partial_block)


def _frame(
    caps: np.ndarray,
    hit_blocks: np.ndarray,
    hit_tokens: np.ndarray,
    policy: str,
    partial: np.ndarray | None,
    block_size: int,
    totals: tuple[int, int, int],
    touch: str,
    full_blocks_only: bool,
    partial_block: str,
) -> pd.DataFrame:
    """The curve frame with its attrs; ``totals`` = (block refs, prompt tokens, working set)."""
    frame = _curve_table(caps, hit_blocks, hit_tokens, policy, partial, block_size, *totals[:2])
    frame.attrs.update(
        touch=touch,
        full_blocks_only=full_blocks_only,
        working_set=totals[2],
        partial_block=partial_block,
    )
    return frame


def replayed_hits(
    refs: BlockRefs,
    caps: np.ndarray,
    policy: str,
    touch: str = "tail_first",
    *,
    stop_at_blocks: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Hit blocks and hit tokens of the whole workload at each capacity, by replay.

    With ``stop_at_blocks``, the capacities are replayed in the order given
    until one reaches that many hit blocks, and the later ones get its
    numbers (right for a stack policy whose ceiling that is).

    Examples
    --------
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 2]])
    >>> blocks, tokens = replayed_hits(block_refs(wl), np.array([1, 2, 3]), "fifo")
    >>> blocks.tolist(), tokens.tolist()
    ([1, 2, 2], [512, 1024, 1024])
    """
    hit_blocks = np.empty(caps.size, dtype=np.int64)
    hit_tokens = np.empty(caps.size, dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(refs.tokens)))
    start = refs.offsets[:-1]
    for j, per_request in enumerate(iter_replay_hits(refs, caps.tolist(), policy, touch)):
        hit_blocks[j] = per_request.sum()
        hit_tokens[j] = (cum[start + per_request] - cum[start]).sum()
        if stop_at_blocks is not None and hit_blocks[j] >= stop_at_blocks:
            hit_blocks[j + 1 :] = hit_blocks[j]
            hit_tokens[j + 1 :] = hit_tokens[j]
            break
    return hit_blocks, hit_tokens


def curve_frame(
    refs: BlockRefs,
    caps: np.ndarray,
    hit_blocks: np.ndarray,
    hit_tokens: np.ndarray,
    policy: str,
    partial: np.ndarray | None = None,
) -> pd.DataFrame:
    """The frame of :func:`hit_rate_curve` from the hits at each capacity.

    Examples
    --------
    >>> from inferasim.reuse._refs import block_refs
    >>> refs = block_refs(Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 2]]))
    >>> curve_frame(refs, np.array([2]), np.array([2]), np.array([1024]), "fifo")["token_hit_ratio"].tolist()
    [0.5]
    """
    return _curve_table(caps, hit_blocks, hit_tokens, policy, partial, refs.block_size,
                        int(refs.ids.size), refs.total_tokens)


def _curve_table(
    caps: np.ndarray,
    hit_blocks: np.ndarray,
    hit_tokens: np.ndarray,
    policy: str,
    partial: np.ndarray | None,
    block_size: int,
    total_blocks: int,
    total_tokens: int,
) -> pd.DataFrame:
    if partial is None:
        partial = np.zeros(caps.size, dtype=np.int64)
    frame = pd.DataFrame(
        {
            "capacity_blocks": caps,
            "capacity_tokens": caps * block_size,
            "block_hit_ratio": hit_blocks / total_blocks if total_blocks else np.zeros(caps.size),
            "token_hit_ratio": hit_tokens / total_tokens if total_tokens else np.zeros(caps.size),
            "hit_blocks": hit_blocks,
            "hit_tokens": hit_tokens,
            "policy": policy,
            "partial_tokens": partial,
        }
    )
    return frame
