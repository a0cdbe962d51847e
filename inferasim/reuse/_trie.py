"""The prefix trie of a workload, built level by level with numpy.

Node ``v`` stands for one distinct leading run of hash ids (a prefix);
every block reference maps to the node of the prefix it ends. Nodes are
numbered level by level (all depth-1 prefixes first), so a parent always
has a smaller number than its children.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferasim import _ragged
from inferasim.reuse._refs import BlockRefs

__all__ = ["Trie", "build_trie"]


@dataclass(frozen=True)
class Trie:
    """Prefix trie of a set of block references.

    Attributes
    ----------
    node_of_ref : numpy.ndarray
        Node of every block reference.
    parent : numpy.ndarray
        Parent node (``-1`` for a first block).
    depth : numpy.ndarray
        Prefix length in blocks (1 for a first block).
    block : numpy.ndarray
        Position in ``refs.ids`` of the first reference to the node (its
        hash id is ``refs.ids[block]``).
    requests : numpy.ndarray
        Requests whose ids pass through the node.
    first_row, last_row : numpy.ndarray
        First and last request passing through the node.
    level_bounds : numpy.ndarray
        Nodes of depth ``d`` are ``level_bounds[d - 1]:level_bounds[d]``.
    """

    node_of_ref: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    block: np.ndarray
    requests: np.ndarray
    first_row: np.ndarray
    last_row: np.ndarray
    level_bounds: np.ndarray

    @property
    def size(self) -> int:
        """Number of nodes.

        Examples
        --------
        >>> from inferasim import Workload
        >>> from inferasim.reuse._refs import block_refs
        >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
        >>> build_trie(block_refs(wl)).size
        3
        """
        return int(self.parent.size)


def build_trie(refs: BlockRefs) -> Trie:
    """Build the prefix trie of ``refs``.

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse._refs import block_refs
    >>> wl = Workload.from_requests([0, 1, 2], [2, 2, 1], [1, 1, 1],
    ...                             [[1, 2], [1, 3], [5]], block_size=1)
    >>> t = build_trie(block_refs(wl))
    >>> t.node_of_ref.tolist(), t.parent.tolist(), t.requests.tolist()
    ([0, 2, 0, 3, 1], [-1, -1, 0, 0], [2, 1, 1, 1])
    """
    n_ref = refs.ids.size
    node_of_ref = np.empty(n_ref, dtype=np.int64)
    pos = _ragged.position_in_row(refs.offsets)
    by_level = np.argsort(pos, kind="stable")  # level by level, rows ascending inside
    level_sizes = np.bincount(pos) if n_ref else np.zeros(0, dtype=np.int64)
    u = max(refs.n_unique, 1)
    parents, blocks, bounds = [], [], [0]
    base = 0
    start = 0
    for size in level_sizes.tolist():
        sel = by_level[start : start + size]
        start += size
        parent = node_of_ref[sel - 1] if parents else np.full(size, -1, dtype=np.int64)
        key = (parent + 1) * u + refs.compact[sel]
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        node_of_ref[sel] = base + inverse.reshape(-1)
        parents.append(uniq // u - 1)
        blocks.append(sel[first])
        base += uniq.size
        bounds.append(base)
    if parents:
        parent_arr = np.concatenate(parents).astype(np.int64)
        block_arr = np.concatenate(blocks).astype(np.int64)
    else:
        parent_arr = np.zeros(0, dtype=np.int64)
        block_arr = np.zeros(0, dtype=np.int64)
    level_bounds = np.asarray(bounds, dtype=np.int64)
    depth = np.repeat(np.arange(1, level_bounds.size, dtype=np.int64), np.diff(level_bounds))
    k = parent_arr.size
    requests = np.bincount(node_of_ref, minlength=k)
    first_row = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    last_row = np.full(k, -1, dtype=np.int64)
    np.minimum.at(first_row, node_of_ref, refs.rows)
    np.maximum.at(last_row, node_of_ref, refs.rows)
    return Trie(
        node_of_ref=node_of_ref,
        parent=parent_arr,
        depth=depth,
        block=block_arr,
        requests=requests,
        first_row=first_row,
        last_row=last_row,
        level_bounds=level_bounds,
    )
