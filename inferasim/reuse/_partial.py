"""Token-level reuse inside the block where a prompt diverges (``partial_block``).

Hash ids name whole blocks (512 tokens in the FAST'25 traces), so a block
where two prompts part ways counts as a full miss although its first
tokens are shared. The estimate credits part of that block:

* the *divergence block* of a request is the block at index ``h`` (0-based),
  where ``h`` is the request's block-level hit run with an infinite cache,
  when ``h`` is less than its number of blocks;
* its *sibling* is the most recent block reference of an **earlier**
  request at the same index ``h`` after the same ``h`` leading ids (the same
  parent in the prefix trie; for ``h = 0`` any earlier request's first
  block). Without a sibling (no earlier prompt continued past that prefix)
  there is no credit;
* ``"upper"`` credits ``min(tokens of the divergence block, tokens of the
  sibling)``: the most the two blocks can share, an upper bound;
  ``"half"`` credits half of that, rounded down (the divergence point
  uniform inside the block); ``"none"`` credits nothing (block level).

With a finite LRU cache of ``C`` blocks the credit counts only when the
request's hit run reaches its divergence block (all its ``h`` leading
blocks hit) and the sibling's id is cached at the request's lookup (stack
depth ``<= C``), so the curve reaches the credited ceiling exactly at the
working set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferasim.reuse._refs import BlockRefs
from inferasim.reuse._trie import build_trie

__all__ = ["PARTIAL_BLOCK", "Divergence", "check_partial", "divergences"]

#: Accepted values of ``partial_block``.
PARTIAL_BLOCK = ("none", "half", "upper")


def check_partial(partial_block: str) -> None:
    """Raise a clear error for an unknown ``partial_block``.

    Examples
    --------
    >>> check_partial("quarter")
    Traceback (most recent call last):
    ...
    ValueError: partial_block must be one of ('none', 'half', 'upper'), got 'quarter'
    """
    if partial_block not in PARTIAL_BLOCK:
        raise ValueError(f"partial_block must be one of {PARTIAL_BLOCK}, got {partial_block!r}")


@dataclass(frozen=True)
class Divergence:
    """The credited divergence blocks of a workload.

    Attributes
    ----------
    rows : numpy.ndarray
        Requests that get a credit.
    ref : numpy.ndarray
        Flat index (into ``refs.ids``) of each one's divergence block.
    sibling : numpy.ndarray
        Flat index of its sibling reference.
    credit : numpy.ndarray
        Tokens credited.
    """

    rows: np.ndarray
    ref: np.ndarray
    sibling: np.ndarray
    credit: np.ndarray


def divergences(refs: BlockRefs, hit_blocks: np.ndarray, partial_block: str) -> Divergence:
    """Divergence blocks, siblings and credits (see the module docstring).

    ``hit_blocks`` is every request's block-level hit run with an infinite
    cache.

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1], [1024, 700], [1, 1], [[1, 2], [1, 3]])
    >>> d = divergences(block_refs(wl), np.array([0, 1]), "upper")
    >>> d.rows.tolist(), d.ref.tolist(), d.sibling.tolist(), d.credit.tolist()
    ([1], [3], [1], [188])
    """
    check_partial(partial_block)
    empty = np.zeros(0, dtype=np.int64)
    lengths = np.diff(refs.offsets)
    hit_blocks = np.asarray(hit_blocks, dtype=np.int64)
    cand = np.flatnonzero(hit_blocks < lengths)
    if partial_block == "none" or cand.size == 0:
        return Divergence(empty, empty, empty, empty)
    trie = build_trie(refs)
    parent_of_ref = trie.parent[trie.node_of_ref]
    n_ref = refs.ids.size
    span = n_ref + 1
    key = (parent_of_ref + 1) * span + np.arange(n_ref, dtype=np.int64)
    skey = np.sort(key)
    ref = refs.offsets[cand] + hit_blocks[cand]
    want = parent_of_ref[ref] + 1
    idx = np.searchsorted(skey, want * span + refs.offsets[cand], side="left") - 1
    ok = idx >= 0
    ok[ok] = skey[idx[ok]] // span == want[ok]
    sibling = skey[idx[ok]] % span
    ref = ref[ok]
    upper = np.minimum(refs.tokens[ref], refs.tokens[sibling])
    credit = upper if partial_block == "upper" else upper // 2
    return Divergence(cand[ok], ref, sibling, credit.astype(np.int64))
