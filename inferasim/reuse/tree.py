"""The radix (compressed prefix) tree of a workload."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from inferasim._format import CardRepr, Summary, metric_rows
from inferasim.reuse._refs import BlockRefs, block_refs
from inferasim.reuse._trie import Trie, build_trie
from inferasim.workload import Workload

__all__ = ["PrefixTree", "prefix_tree", "radix_nodes"]

#: Columns of :attr:`PrefixTree.nodes`.
NODE_COLUMNS = (
    "parent",
    "depth_blocks",
    "edge_blocks",
    "children",
    "requests",
    "ends",
    "first_use_ms",
    "last_use_ms",
    "hash_id",
)


@dataclass(frozen=True, repr=False)
class PrefixTree(CardRepr):
    """The radix tree of a workload's hash ids.

    Attributes
    ----------
    nodes : pandas.DataFrame
        One row per radix node (index ``node``; a parent always has a
        smaller number than its children): ``parent`` (``-1`` under the
        root), ``depth_blocks`` (prefix length in blocks),
        ``edge_blocks`` (blocks on the compressed edge from the parent),
        ``children`` (fan-out), ``requests`` (requests whose ids pass
        through), ``ends`` (requests whose ids end here), ``first_use_ms``
        and ``last_use_ms`` (first and last arrival among those requests)
        and ``hash_id`` (the prefix's last id).
    root_children : int
        Distinct first blocks (the root's fan-out).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
    >>> t = prefix_tree(wl)
    >>> t.nodes["depth_blocks"].tolist(), t.root_children
    ([1, 2, 2], 1)
    """

    nodes: pd.DataFrame
    root_children: int

    def _card(self) -> tuple[str, list[tuple[str, str, str]], list[str]]:
        s = self.summary()
        title = f"PrefixTree: {int(s['nodes']):,} radix nodes, {int(s['leaves']):,} leaves"
        rows = metric_rows(s.to_dict())
        return title, rows, ["frame: .nodes; depth_distribution(), fanout_distribution()"]

    def depth_distribution(self) -> pd.Series:
        """Leaves (prefixes no request extends) by depth in blocks.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 1, 2], [3, 3, 1], [1] * 3,
        ...                             [[1, 2, 3], [1, 2, 4], [5]], block_size=1)
        >>> prefix_tree(wl).depth_distribution().to_dict()
        {1: 1, 3: 2}
        """
        leaves = self.nodes[self.nodes["children"] == 0]
        out = leaves["depth_blocks"].value_counts().sort_index()
        out.index.name = "depth_blocks"
        return out.rename("leaves")

    def fanout_distribution(self) -> pd.Series:
        """Internal radix nodes (the root included) by number of children.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 1, 2], [3, 3, 1], [1] * 3,
        ...                             [[1, 2, 3], [1, 2, 4], [5]], block_size=1)
        >>> prefix_tree(wl).fanout_distribution().to_dict()
        {2: 2}
        """
        fan = self.nodes.loc[self.nodes["children"] > 0, "children"].to_numpy()
        if self.root_children:
            fan = np.append(fan, self.root_children)
        out = pd.Series(fan).value_counts().sort_index()
        out.index.name = "children"
        return out.rename("nodes")

    def summary(self) -> pd.Series:
        """Node, leaf and branching counts, depths and mean fan-out.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 1], [2, 2], [1, 1], [[1, 2], [1, 3]], block_size=1)
        >>> prefix_tree(wl).summary()[["nodes", "leaves", "max_depth_blocks"]].tolist()
        [3.0, 2.0, 2.0]
        """
        nodes = self.nodes
        internal = nodes["children"] > 0
        leaves = nodes[~internal]
        return Summary(
            {
                "nodes": len(nodes),
                "leaves": len(leaves),
                "root_children": self.root_children,
                "max_depth_blocks": nodes["depth_blocks"].max() if len(nodes) else 0,
                "mean_leaf_depth_blocks": leaves["depth_blocks"].mean(),
                "mean_edge_blocks": nodes["edge_blocks"].mean(),
                "mean_fanout": nodes.loc[internal, "children"].mean(),
                "shared_nodes": int((nodes["requests"] >= 2).sum()),
            },
            dtype=float,
            title="PrefixTree summary",
        )


def radix_nodes(refs: BlockRefs, trie: Trie) -> pd.DataFrame:
    """Compress ``trie`` into radix nodes (see :class:`PrefixTree`).

    A trie node is kept when it branches (not exactly one child) or a
    request ends at it; a chain of other nodes merges into the kept node
    below it.

    Examples
    --------
    >>> from inferasim.reuse._refs import block_refs
    >>> from inferasim.reuse._trie import build_trie
    >>> wl = Workload.from_requests([0, 1], [3, 3], [1, 1], [[1, 2, 3], [1, 2, 4]], block_size=1)
    >>> refs = block_refs(wl)
    >>> radix_nodes(refs, build_trie(refs))[["parent", "depth_blocks", "edge_blocks"]].values.tolist()
    [[-1, 2, 2], [0, 3, 1], [0, 3, 1]]
    """
    k = trie.size
    children = np.bincount(trie.parent[trie.parent >= 0], minlength=k)
    last_ref = refs.offsets[1:][np.diff(refs.offsets) > 0] - 1
    ends = np.bincount(trie.node_of_ref[last_ref], minlength=k)
    keep = (children != 1) | (ends > 0)
    # nearest kept strict ancestor, level by level (parents come first)
    up = np.full(k, -1, dtype=np.int64)
    bounds = trie.level_bounds
    for a, b in zip(bounds[1:-1].tolist(), bounds[2:].tolist(), strict=True):
        p = trie.parent[a:b]
        up[a:b] = np.where(keep[p], p, up[p])
    kept = np.flatnonzero(keep)
    number = np.full(k, -1, dtype=np.int64)
    number[kept] = np.arange(kept.size)
    anc = up[kept]
    parent = np.where(anc >= 0, number[np.maximum(anc, 0)], -1)
    depth = trie.depth[kept]
    parent_depth = np.where(anc >= 0, trie.depth[np.maximum(anc, 0)], 0)
    frame = pd.DataFrame(
        {
            "parent": parent,
            "depth_blocks": depth,
            "edge_blocks": depth - parent_depth,
            "children": children[kept],
            "requests": trie.requests[kept],
            "ends": ends[kept],
            "first_use_ms": refs.arrival_ms[trie.first_row[kept]],
            "last_use_ms": refs.arrival_ms[trie.last_row[kept]],
            "hash_id": refs.ids[trie.block[kept]],
        }
    )
    frame.index.name = "node"
    return frame


def prefix_tree(workload: Workload) -> PrefixTree:
    """The radix (compressed prefix) tree of the workload's hash ids.

    Every distinct leading run of ids is a prefix; the radix tree keeps the
    prefixes at which requests branch apart or end and merges the chains
    between them into single edges. Its depth and fan-out distributions
    show how a trace shares KV: a wide root and shallow leaves mean little
    sharing beyond a system prompt; deep shared nodes mean multi-turn or
    document reuse.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.

    Returns
    -------
    PrefixTree
        ``nodes`` frame plus ``depth_distribution()``,
        ``fanout_distribution()`` and ``summary()``.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Two requests share blocks 1, 2 then branch; a third is unrelated:

    >>> wl = Workload.from_requests([0, 1, 2], [3, 3, 1], [1] * 3,
    ...                             [[1, 2, 3], [1, 2, 4], [5]], block_size=1)
    >>> t = prefix_tree(wl)
    >>> t.nodes[["parent", "depth_blocks", "edge_blocks", "children", "requests"]]
          parent  depth_blocks  edge_blocks  children  requests
    node
    0         -1             1            1         0         1
    1         -1             2            2         2         2
    2          1             3            1         0         1
    3          1             3            1         0         1
    >>> t.root_children
    2
    """
    refs = block_refs(workload)
    trie = build_trie(refs)
    nodes = radix_nodes(refs, trie)
    return PrefixTree(nodes=nodes, root_children=int((nodes["parent"] == -1).sum()))
