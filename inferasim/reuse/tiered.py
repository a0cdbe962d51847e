"""Tiered prefix caches (HBM, then DRAM, SSD, ...) without timing.

A hierarchy is a list of tier capacities in blocks, top tier first. The
replay semantics of :mod:`inferasim.reuse.replay` carry over: requests in
arrival order, a lookup against the state the previous requests left, then
a touch of the request's distinct ids (tail-first by default). A request
hits the longest leading run of its ids found in *any* tier; a block found
in a lower tier continues the run, and the hit is credited to the first
(highest) tier holding the block.

Exclusive hierarchy (``inclusive=False``, the default)
------------------------------------------------------
A block lives in at most one tier. A touch moves the block to the most
recent end of tier 0 (promotion on hit; insertion on miss); when a tier
goes over its capacity its least recently used block is *demoted* to the
most recent end of the next tier, and the last tier's victim is dropped.

**Theorem.** Tier ``0`` then tier ``1`` ... each listed from most to least
recent, concatenated, is always the top ``C0 + C1 + ...`` of the global
LRU stack. By induction over touches: a touch takes the id out of its
place (or from outside the hierarchy) and puts it on top; every id that was
above it moves one place down, which is exactly the chain of demotions of
each tier's least recent block into the next tier. Hence a reference with
LRU stack depth ``d`` at its request's lookup (see
:mod:`inferasim.reuse._stack`) sits in tier ``k`` exactly when
``C0 + ... + C(k-1) < d <= C0 + ... + Ck``, and the prefix run of a
request is the one of a single LRU cache of capacity ``C0 + C1 + ...``.

Inclusive hierarchy (``inclusive=True``)
----------------------------------------
Every tier is an independent LRU cache of its own capacity that sees every
touch (write-through of every block to every tier; a hit in any tier
refreshes the block in all tiers). By the LRU inclusion property tier
``k`` holds the top ``Ck`` of the *same* global stack, so the tiers nest
when capacities grow downwards, and the first tier holding a reference with
depth ``d`` is tier ``k`` exactly when ``M(k-1) < d <= Mk`` with
``Mk = max(C0, ..., Ck)`` (``M(-1) = 0``). With increasing capacities this
is ``C(k-1) < d <= Ck``; a tier no larger than one above it serves nothing.
The whole hierarchy hits like one LRU cache of ``max(C)``.

Both statements are checked against :func:`replay_tiered`, a direct
per-tier replay sharing no code with the stack-distance path, on generated
workloads and on the FAST'25 traces.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pandas as pd

from inferasim.reuse._refs import BlockRefs, block_refs, check_touch
from inferasim.reuse._result import check_capacity
from inferasim.reuse._stack import lookup_depths, prefix_max
from inferasim.workload import Workload

__all__ = ["tiered_hit_rate", "replay_tiered", "tier_bounds"]


def _tier_capacities(capacities: Sequence[int], unit: str, block_size: int) -> list[int]:
    if unit not in ("blocks", "tokens"):
        raise ValueError(f"unit must be 'blocks' or 'tokens', got {unit!r}")
    if isinstance(capacities, (str, bytes)) or np.isscalar(capacities):
        raise ValueError(
            f"capacities must be a sequence of tier capacities (top tier first), got {capacities!r}"
        )
    values = list(capacities)
    if not values:
        raise ValueError("capacities must name at least one tier")
    blocks = [check_capacity(v, f"capacities[{k}]") for k, v in enumerate(values)]
    if unit == "tokens":
        blocks = [b // block_size for b in blocks]
    return blocks


def tier_bounds(capacities: Sequence[int], inclusive: bool = False) -> np.ndarray:
    """Upper stack-depth bound of every tier: ``d <= bound[k]`` reaches tier ``k``.

    Exclusive: running sums of the capacities; inclusive: running maxima.
    A reference of depth ``d`` is served by the first tier ``k`` with
    ``d <= bound[k]``.

    Examples
    --------
    >>> tier_bounds([2, 3, 4]).tolist(), tier_bounds([2, 3, 4], inclusive=True).tolist()
    ([2, 5, 9], [2, 3, 4])
    >>> tier_bounds([4, 2, 6], inclusive=True).tolist()
    [4, 4, 6]
    """
    caps = np.asarray(capacities, dtype=np.int64)
    return np.maximum.accumulate(caps) if inclusive else np.cumsum(caps)


def _tier_of_refs(
    refs: BlockRefs, caps: list[int], inclusive: bool, touch: str
) -> tuple[np.ndarray, np.ndarray]:
    """(hit mask, tier of each hit reference) from the LRU stack depths."""
    bounds = tier_bounds(caps, inclusive)
    depth, cold = lookup_depths(refs, touch)
    reach = min(int(bounds[-1]), cold - 1)
    hit = prefix_max(depth, refs.offsets) <= reach
    tier = np.searchsorted(bounds, depth[hit], side="left")
    return hit, tier


def tiered_hit_rate(
    workload: Workload,
    capacities: Sequence[int],
    *,
    inclusive: bool = False,
    unit: str = "blocks",
    full_blocks_only: bool = False,
    touch: str = "tail_first",
) -> pd.DataFrame:
    """Hit ratio served by each tier of an LRU cache hierarchy, in one pass.

    Uses the LRU stack depths of :func:`inferasim.reuse.hit_rate_curve`:
    for the exclusive hierarchy a hit reference of depth ``d`` is served by
    tier ``k`` when ``C0 + ... + C(k-1) < d <= C0 + ... + Ck``; for the
    inclusive one when ``max(C0..C(k-1)) < d <= max(C0..Ck)`` (module
    docstring: the model and the proof). Equal to :func:`replay_tiered`
    exactly.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    capacities : sequence of int
        Capacity of every tier in ``unit``, top tier (HBM) first.
    inclusive : bool, default False
        Inclusive hierarchy (every tier an LRU over every touch) instead of
        the exclusive one (promotion on hit, demotion of each tier's LRU
        victim to the next tier).
    unit : {"blocks", "tokens"}, default "blocks"
        Unit of ``capacities``; token capacities round down to whole blocks.
    full_blocks_only : bool, default False
        Never look up nor insert partial last blocks (engine semantics).
    touch : {"tail_first", "head_first"}, default "tail_first"
        Order in which a request touches its blocks after the lookup.

    Returns
    -------
    pandas.DataFrame
        One row per tier (index ``tier``, 0 = top): ``capacity`` (blocks),
        ``capacity_tokens``, ``hit_blocks``, ``hit_tokens``,
        ``block_hit_ratio`` (of all block references considered) and
        ``token_hit_ratio`` (of ``sum(input_len)``). The rows add up to the
        hierarchy's hit ratio, also in ``frame.attrs`` (``block_hit_ratio``,
        ``token_hit_ratio``).

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.
    ValueError
        When ``capacities`` is empty or holds a negative or fractional value.

    Examples
    --------
    Block size 1. R0 [1, 2], R1 [3, 4], R2 [1, 2]; tail-first touches leave
    the stack 3, 4, 1, 2 before R2, so block 1 is at depth 3, block 2 at
    depth 4. With tiers of 2 and 2 blocks (exclusive), both hit in tier 1;
    with an HBM of 3, block 1 hits in HBM and block 2 in the next tier.

    >>> wl = Workload.from_requests([0, 1, 2], [2, 2, 2], [1] * 3,
    ...                             [[1, 2], [3, 4], [1, 2]], block_size=1)
    >>> tiered_hit_rate(wl, [2, 2])["hit_blocks"].tolist()
    [0, 2]
    >>> tiered_hit_rate(wl, [3, 1])["hit_blocks"].tolist()
    [1, 1]

    Inclusive tiers of 3 and 4 blocks: tier 1 serves depths 4 only.

    >>> tiered_hit_rate(wl, [3, 4], inclusive=True)["hit_blocks"].tolist()
    [1, 1]
    """
    check_touch(touch)
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    caps = _tier_capacities(capacities, unit, refs.block_size)
    k = len(caps)
    hit, tier = _tier_of_refs(refs, caps, inclusive, touch)
    hit_blocks = np.bincount(tier, minlength=k).astype(np.int64)
    hit_tokens = np.bincount(tier, weights=refs.tokens[hit], minlength=k).astype(np.int64)
    total_blocks = int(refs.ids.size)
    total_tokens = refs.total_tokens
    cap_arr = np.asarray(caps, dtype=np.int64)
    frame = pd.DataFrame(
        {
            "capacity": cap_arr,
            "capacity_tokens": cap_arr * refs.block_size,
            "hit_blocks": hit_blocks,
            "hit_tokens": hit_tokens,
            "block_hit_ratio": hit_blocks / total_blocks if total_blocks else np.zeros(k),
            "token_hit_ratio": hit_tokens / total_tokens if total_tokens else np.zeros(k),
        },
        index=pd.RangeIndex(k, name="tier"),
    )
    frame.attrs.update(
        inclusive=inclusive,
        touch=touch,
        full_blocks_only=full_blocks_only,
        block_hit_ratio=float(hit_blocks.sum() / total_blocks) if total_blocks else 0.0,
        token_hit_ratio=float(hit_tokens.sum() / total_tokens) if total_tokens else 0.0,
    )
    return frame


# ----------------------------------------------------------- direct replay
def _touch_order(ids: list[int], touch: str) -> list[int]:
    distinct = list(dict.fromkeys(ids))
    return distinct if touch == "head_first" else distinct[::-1]


def _find(tiers: list[OrderedDict[int, None]], x: int) -> int:
    for k, t in enumerate(tiers):
        if x in t:
            return k
    return -1


def _replay_exclusive(
    requests: list[list[int]], caps: list[int], touch: str
) -> list[list[int]]:
    tiers: list[OrderedDict[int, None]] = [OrderedDict() for _ in caps]
    out = []
    for ids in requests:
        where = []
        for x in ids:  # lookup: leading run found in any tier
            k = _find(tiers, x)
            if k < 0:
                break
            where.append(k)
        out.append(where)
        for x in _touch_order(ids, touch):
            k = _find(tiers, x)
            if k >= 0:
                del tiers[k][x]
            carry: int | None = x  # goes on top of tier 0; victims cascade down
            for t, cap in zip(tiers, caps, strict=True):
                t[carry] = None
                if len(t) <= cap:
                    carry = None
                    break
                carry, _ = t.popitem(last=False)
    return out


def _replay_inclusive(
    requests: list[list[int]], caps: list[int], touch: str
) -> list[list[int]]:
    tiers: list[OrderedDict[int, None]] = [OrderedDict() for _ in caps]
    out = []
    for ids in requests:
        where = []
        for x in ids:
            k = _find(tiers, x)
            if k < 0:
                break
            where.append(k)
        out.append(where)
        for x in _touch_order(ids, touch):
            for t, cap in zip(tiers, caps, strict=True):  # every tier sees every touch
                if x in t:
                    t.move_to_end(x)
                else:
                    t[x] = None
                    if len(t) > cap:
                        t.popitem(last=False)
    return out


def replay_tiered(
    workload: Workload,
    capacities: Sequence[int],
    *,
    inclusive: bool = False,
    unit: str = "blocks",
    full_blocks_only: bool = False,
    touch: str = "tail_first",
) -> pd.DataFrame:
    """Per-request hits of every tier, by direct replay of the hierarchy.

    One ``OrderedDict`` per tier, replayed request by request with the
    semantics of the module docstring (exclusive: promotion on touch,
    demotion of each tier's least recent block to the next tier; inclusive:
    every tier an LRU over every touch). It shares no code with the
    stack-distance path of :func:`tiered_hit_rate`, which it equals.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    capacities : sequence of int
        Capacity of every tier in ``unit``, top tier first.
    inclusive : bool, default False
        Inclusive instead of exclusive hierarchy.
    unit : {"blocks", "tokens"}, default "blocks"
        Unit of ``capacities``; token capacities round down to whole blocks.
    full_blocks_only : bool, default False
        Never look up nor insert partial last blocks (engine semantics).
    touch : {"tail_first", "head_first"}, default "tail_first"
        Order in which a request touches its blocks after the lookup.

    Returns
    -------
    pandas.DataFrame
        One row per request (index ``request_id``): ``blocks``,
        ``input_len``, ``hit_blocks`` and ``hit_tokens`` (all tiers), then
        ``tier<k>_hit_blocks`` and ``tier<k>_hit_tokens`` for every tier
        ``k`` (0 = top). A hit block's tokens count in the first tier that
        held it at the lookup.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Block size 1, tiers of 1 and 2 blocks. R0 [1, 2] leaves tier 0 = {1}
    (touched last) and tier 1 = {2}; R1 [1, 2] hits 1 in tier 0 and 2 in
    tier 1.

    >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 2]], block_size=1)
    >>> df = replay_tiered(wl, [1, 2])
    >>> df[["hit_blocks", "tier0_hit_blocks", "tier1_hit_blocks"]].values.tolist()
    [[0, 0, 0], [2, 1, 1]]
    """
    check_touch(touch)
    refs = block_refs(workload, full_blocks_only=full_blocks_only)
    caps = _tier_capacities(capacities, unit, refs.block_size)
    offsets = refs.offsets.tolist()
    flat = refs.ids.tolist()
    tokens = refs.tokens.tolist()
    requests = [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    run = _replay_inclusive if inclusive else _replay_exclusive
    where = run(requests, caps, touch)
    n, k = len(requests), len(caps)
    tier_blocks = np.zeros((n, k), dtype=np.int64)
    tier_tokens = np.zeros((n, k), dtype=np.int64)
    for r, (start, tiers) in enumerate(zip(offsets[:-1], where, strict=True)):
        for j, t in enumerate(tiers):
            tier_blocks[r, t] += 1
            tier_tokens[r, t] += tokens[start + j]
    data: dict[str, np.ndarray] = {
        "blocks": np.diff(refs.offsets),
        "input_len": refs.input_len,
        "hit_blocks": tier_blocks.sum(axis=1),
        "hit_tokens": tier_tokens.sum(axis=1),
    }
    for t in range(k):
        data[f"tier{t}_hit_blocks"] = tier_blocks[:, t]
        data[f"tier{t}_hit_tokens"] = tier_tokens[:, t]
    frame = pd.DataFrame(data)
    frame.index.name = "request_id"
    frame.attrs.update(inclusive=inclusive, touch=touch, capacities=caps)
    return frame
