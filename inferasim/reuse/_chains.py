"""Runs of blocks that always occur together, replayed as one weighted block.

A trace hashed at a small block size (the Bailian traces' 16 tokens) holds
long runs of ids that every request containing one of them holds whole, in
the same order: the 32 ids of one 512-token block, the unchanged part of a
shared system prompt. Two adjacent ids ``x, y`` are *linked* when every
occurrence of ``x`` (in any request) is directly followed by ``y``, every
occurrence of ``y`` directly preceded by ``x``, and ``x`` holds exactly
``block_size`` tokens everywhere. A maximal run of links is a *group*; the
links depend only on the ids, so a group is the same run of ids wherever
it occurs, and a request holds it whole or not at all.

Under LRU such a group is touched contiguously at every request that touches
any of it, so its ids sit next to each other in the LRU stack, in the
request's touch order. With ``S`` the weighted stack depth of the group (the
ids of the groups touched since it, and its own ``w`` ids), the member
``i = 1..w`` (in request order) lies at depth ``S - w + i`` after
tail-first touches and ``S - i + 1`` after head-first ones. So the group's
block references hit, at capacity ``C`` and with ``P`` the deepest depth
of the request's earlier references (a prefix hit needs every predecessor
cached):

* tail-first: ``#{i : max(P, S - w + i) <= C}``, a ramp from
  ``a = max(P, S - w + 1)`` up to ``f = max(P, S)``;
* head-first: ``w`` when ``max(P, S) <= C``, else none (``a = f``).

:func:`chain_hits` sums these over all references at once (sorts, no loop
per capacity), giving the same hit blocks and hit tokens as the unmerged
stack distances at every capacity. Only LRU is merged: FIFO, LFU and the
rest may evict part of a group, so they replay every block.

Finding the groups takes one compiled pass over the references
(:func:`inferasim.reuse._jit.chain_links`); without numba,
:func:`chain_refs` returns every block as its own group of weight 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from inferasim import _ragged
from inferasim.reuse._refs import BlockRefs, block_refs, check_refs_input
from inferasim.reuse._stack import lookup_depths, prefix_max
from inferasim.workload import Workload

__all__ = ["ChainRefs", "chain_refs", "chain_hits", "lru_hits"]


@dataclass(frozen=True)
class ChainRefs:
    """The block references of a workload with linked runs merged.

    Attributes
    ----------
    refs : BlockRefs
        One reference per group occurrence: ``compact`` numbers the groups,
        ``tokens`` holds the tokens of the whole run in that request.
    weight : numpy.ndarray
        Blocks in each group (indexed by the group's compact id).
    n_ids : int
        Distinct block ids (the working set in blocks).
    n_blocks : int
        Block references before merging.
    """

    refs: BlockRefs
    weight: np.ndarray
    n_ids: int
    n_blocks: int


def _codes(ids: np.ndarray, id_range: Any) -> tuple[np.ndarray, int]:
    """Non-negative integer codes of ``ids``: the ids themselves when dense, else factorised."""
    if ids.size:
        lo, hi = id_range(ids)
        if lo >= 0 and hi < 4 * ids.size + 1024:
            return ids, int(hi) + 1
    codes, uniques = pd.factorize(ids)
    return codes.astype(np.int64), len(uniques)


def chain_refs(workload: Workload, *, full_blocks_only: bool = False, merge: bool = True) -> ChainRefs:
    """The workload's block references with every linked run as one weighted reference.

    Parameters
    ----------
    workload : Workload
        Must carry hash ids.
    full_blocks_only : bool, default False
        As in :func:`inferasim.reuse._refs.block_refs`.
    merge : bool, default True
        False (or numba not available) keeps every block as its own group.

    Returns
    -------
    ChainRefs

    Examples
    --------
    Ids 1, 2 always occur together; 3 follows 2 only once, so it starts its
    own group (as does 4).

    >>> wl = Workload.from_requests([0, 1], [3, 3], [1, 1], [[1, 2, 3], [1, 2, 4]], block_size=1)
    >>> c = chain_refs(wl)
    >>> c.refs.compact.tolist(), c.weight.tolist(), c.n_ids, c.n_blocks
    ([0, 1, 0, 2], [2, 1, 1], 4, 6)
    """
    from inferasim.reuse._kernels import available

    if not (merge and available()):
        plain = block_refs(workload, full_blocks_only=full_blocks_only)
        return ChainRefs(plain, np.ones(plain.n_unique, dtype=np.int64), plain.n_unique, int(plain.ids.size))
    check_refs_input(workload)
    from inferasim.reuse import _jit

    codes, n_codes = _codes(np.ascontiguousarray(workload.hash_ids, dtype=np.int64), _jit.id_range)
    offsets = np.ascontiguousarray(workload.offsets, dtype=np.int64)
    input_len = np.ascontiguousarray(workload.input_len, dtype=np.int64)
    bs = int(workload.block_size)
    dtype = np.int32 if n_codes < 2**31 else np.int64
    links = np.full((n_codes, 2), -3, dtype=dtype)  # successor, predecessor of each code
    n_ids = _jit.chain_links(codes, offsets, input_len, bs, full_blocks_only, links)
    gid, width, tokens, counts, n_groups, n_blocks = _jit.chain_refs(
        codes, offsets, input_len, bs, full_blocks_only, links
    )
    weight = np.zeros(n_groups, dtype=np.int64)
    weight[gid] = width
    group_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    refs = BlockRefs(
        ids=gid,
        offsets=group_offsets,
        tokens=tokens,
        compact=gid,
        unique_ids=np.arange(n_groups, dtype=np.int64),
        rows=_ragged.row_of(group_offsets),
        input_len=input_len,
        arrival_ms=workload.arrival_ms.astype(np.float64),
        block_size=bs,
    )
    return ChainRefs(refs, weight, n_ids, int(n_blocks))


def _count_at(x: np.ndarray, value: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """``sum(value[x <= C])`` for every ``C`` in ``caps``."""
    order = np.argsort(x, kind="stable")
    cum = np.concatenate(([0], np.cumsum(value[order])))
    return cum[np.searchsorted(x[order], caps, side="right")]


def _ramp_at(x: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """``sum(max(C - x, 0))`` for every ``C`` in ``caps``."""
    xs = np.sort(x)
    cum = np.concatenate(([0], np.cumsum(xs)))
    n = np.searchsorted(xs, caps, side="right")
    return caps * n - cum[n]


def chain_hits(
    depth: np.ndarray,
    cold: int,
    weight: np.ndarray,
    tokens: np.ndarray,
    offsets: np.ndarray,
    caps: np.ndarray,
    block_size: int,
    touch: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Hit blocks and hit tokens at every LRU capacity from weighted group depths.

    ``depth`` is each reference's weighted stack depth ``S`` (``cold`` when
    never touched before), ``weight`` its blocks ``w`` and ``tokens`` its
    tokens; see the module docstring for the rule.

    Examples
    --------
    One request of a 3-block group at depth 5 after tail-first touches: its
    members lie at depths 3, 4, 5, so 1 block hits at capacity 3, all 3 at 5.

    >>> d, w, t, off = (np.array([5]), np.array([3]), np.array([3]), np.array([0, 1]))
    >>> chain_hits(d, 99, w, t, off, np.array([2, 3, 4, 5]), 1, "tail_first")[0].tolist()
    [0, 1, 2, 3]
    >>> chain_hits(d, 99, w, t, off, np.array([2, 3, 4, 5]), 1, "head_first")[0].tolist()
    [0, 0, 0, 3]
    """
    caps = np.asarray(caps, dtype=np.int64)
    # the deepest depth among each request's earlier references (0 for its first)
    run = prefix_max(depth, offsets)
    before = np.zeros_like(depth)
    before[1:] = run[:-1]
    before[offsets[:-1][np.diff(offsets) > 0]] = 0
    full = np.maximum(before, depth)
    ok = full < cold
    full, before, depth, weight, tokens = full[ok], before[ok], depth[ok], weight[ok], tokens[ok]
    first = np.maximum(before, depth - weight + 1) if touch == "tail_first" else full
    ramp = full - first
    blocks = _count_at(first, weight - ramp, caps) + _ramp_at(first, caps) - _ramp_at(full, caps)
    extra = _count_at(full, tokens - weight * block_size, caps)
    return blocks.astype(np.int64), (blocks * block_size + extra).astype(np.int64)


def lru_hits(chains: ChainRefs, caps: np.ndarray, touch: str) -> tuple[np.ndarray, np.ndarray]:
    """Hit blocks and hit tokens of the whole workload at every LRU capacity.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [1] * 3, [[1, 2], [3, 4], [1, 2]])
    >>> blocks, tokens = lru_hits(chain_refs(wl), np.array([0, 2, 3, 4]), "tail_first")
    >>> blocks.tolist(), tokens.tolist()
    ([0, 0, 1, 2], [0, 0, 512, 1024])
    """
    refs = chains.refs
    depth, cold = lookup_depths(refs, touch, weights=chains.weight)
    return chain_hits(depth, cold, chains.weight[refs.compact], refs.tokens, refs.offsets, caps,
                      refs.block_size, touch)
