"""Multi-turn chains: explicit ``parent_chat_id`` trees, or inferred from requests that
extend an earlier request's ids."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from inferasim._format import CardRepr, metric_rows
from inferasim.reuse._refs import block_refs
from inferasim.reuse._trie import build_trie
from inferasim.workload import Workload

__all__ = ["Sessions", "sessions"]


@dataclass(frozen=True, repr=False)
class Sessions(CardRepr):
    """Inferred conversation chains.

    Attributes
    ----------
    requests : pandas.DataFrame
        One row per request (index ``request_id``): ``session`` (request id
        of the chain's first turn), ``turn`` (1-based), ``parent``
        (previous turn, ``-1`` for a first turn), ``shared_blocks`` (the
        previous turn's full blocks this request starts with),
        ``gap_ms`` (arrival minus the previous turn's arrival),
        ``growth_blocks`` and ``growth_tokens`` (this request's blocks and
        ``input_len`` minus the previous turn's); the last three are NaN
        for first turns.
    sessions : pandas.DataFrame
        One row per chain (index ``session``): ``turns``, ``first_ms``,
        ``last_ms``, ``duration_ms``, ``mean_gap_ms``,
        ``first_input_len`` and ``max_input_len`` (tokens).

    Examples
    --------
    >>> wl = Workload.from_requests([0, 5], [4, 7], [1, 1], [[1, 2], [1, 2, 3, 4]], block_size=2)
    >>> s = sessions(wl)
    >>> s.requests["turn"].tolist(), s.sessions["turns"].tolist()
    ([1, 2], [2])
    """

    requests: pd.DataFrame
    sessions: pd.DataFrame

    def _card(self) -> tuple[str, list[tuple[str, str, str]], list[str]]:
        s = self.sessions
        turns = s["turns"] if len(s) else pd.Series([], dtype=float)
        title = f"Sessions: {len(s):,} chains over {len(self.requests):,} requests"
        rows = metric_rows(
            {
                "sessions": len(s),
                "multi_turn_sessions": int((turns > 1).sum()),
                "max_turns": int(turns.max()) if len(s) else 0,
                "mean_turns": float(turns.mean()) if len(s) else float("nan"),
                "mean_gap_ms": float(self.requests["gap_ms"].mean())
                if len(self.requests)
                else float("nan"),
            }
        )
        return title, rows, ["frames: .requests, .sessions; turn_distribution()"]

    def turn_distribution(self) -> pd.Series:
        """Number of chains by turn count.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 5, 9], [4, 7, 2], [1] * 3,
        ...                             [[1, 2], [1, 2, 3, 4], [8]], block_size=2)
        >>> sessions(wl).turn_distribution().to_dict()
        {1: 1, 2: 1}
        """
        out = self.sessions["turns"].value_counts().sort_index()
        out.index.name = "turns"
        return out.rename("sessions")


def _link(
    node_of_ref: list[int],
    offsets: list[int],
    full: list[int],
    need: list[int],
    input_len: list[int],
    min_shared: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Previous turn and shared blocks of every request (``-1``/0 for none)."""
    n = len(full)
    anchors: dict[int, list[int]] = {}  # node -> requests whose full ids end there
    parent = [-1] * n
    shared = [0] * n
    for j in range(n):
        start, stop = offsets[j], offsets[j + 1]
        size = input_len[j]
        for depth in range(stop - start - 1, min_shared - 1, -1):
            candidates = anchors.get(node_of_ref[start + depth - 1])
            if not candidates:
                continue
            for i in reversed(candidates):  # latest first
                if need[i] <= size:
                    parent[j], shared[j] = i, depth
                    break
            if parent[j] >= 0:
                break
        if full[j] >= min_shared:
            anchors.setdefault(node_of_ref[start + full[j] - 1], []).append(j)
    return np.asarray(parent, dtype=np.int64), np.asarray(shared, dtype=np.int64)


def _common_prefix(workload: Workload, parent: np.ndarray) -> np.ndarray:
    """Leading hash ids each request shares with its parent (0 for a root)."""
    off, flat = workload.offsets, workload.hash_ids
    out = np.zeros(len(parent), dtype=np.int64)
    for j in np.flatnonzero(parent >= 0).tolist():
        p = int(parent[j])
        k = int(min(off[j + 1] - off[j], off[p + 1] - off[p]))
        diff = np.flatnonzero(flat[off[j] : off[j] + k] != flat[off[p] : off[p] + k])
        out[j] = int(diff[0]) if diff.size else k
    return out


def _tree_walk(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Root row and 1-based depth of every request of a parent tree (any row order)."""
    root = np.arange(parent.size, dtype=np.int64)
    depth = np.ones(parent.size, dtype=np.int64)
    up = parent.copy()
    for _ in range(parent.size):
        active = up >= 0
        if not active.any():
            break
        root[active] = up[active]
        depth[active] += 1
        up[active] = parent[up[active]]
    return root, depth


def sessions(
    workload: Workload,
    *,
    min_shared_blocks: int = 2,
    contains_answer: bool = True,
    links: str = "auto",
) -> Sessions:
    """Multi-turn chains: explicit ``parent_chat_id`` links, or inferred (a request that extends
    an earlier one is its next turn).

    With ``chat_id`` and ``parent_chat_id`` columns (a Bailian trace, see
    :mod:`inferasim.workload.bailian`) and ``links="auto"`` the sessions are
    those links as they are: each request's parent is the one it names,
    ``shared_blocks`` the leading ids it actually shares with it, ``turn``
    its depth in the tree; ``min_shared_blocks`` and ``contains_answer`` do
    not apply. Otherwise (or with ``links="hash_ids"``) they are inferred:

    A request's *full ids* are its hash ids without a partial last block
    (the next turn appends to that block, so its id changes). Request ``j``
    is a next turn of an earlier request ``i`` when ``i``'s full ids are a
    leading run of ``j``'s ids, ``j`` has more ids than that run, the run
    holds at least ``min_shared_blocks`` blocks (so requests sharing only a
    short system prompt are not chained), and ``j``'s prompt is long enough
    to hold ``i``'s prompt and answer (``input_len[j] >= input_len[i] +
    output_len[i]``; with ``contains_answer=False`` merely longer). The
    last test tells a conversation's next turn from a sibling request that
    shares a document prefix. Among candidates the longest run wins, then
    the latest request. Chains may branch (two requests extending the same
    turn): each request has one parent and ``turn`` is its depth.

    Parameters
    ----------
    workload : Workload
        A workload with hash ids.
    min_shared_blocks : int, default 2
        Shortest previous turn (in full blocks) that can start a chain.
    contains_answer : bool, default True
        Require the next prompt to hold the previous prompt and answer.
    links : {"auto", "hash_ids"}, default "auto"
        ``"auto"``: the explicit ``parent_chat_id`` tree when the workload
        has one, else inferred; ``"hash_ids"``: always inferred.

    Returns
    -------
    Sessions
        ``requests`` (one row per request) and ``sessions`` (one row per
        chain) frames.

    Raises
    ------
    WorkloadError
        When the workload has no hash ids.

    Examples
    --------
    Request 0 holds 3 tokens in 2 blocks (block 2 partial) and answers 1
    token; request 1 (7 tokens >= 3 + 1) starts with request 0's full block
    1 then grows; request 2 is unrelated:

    >>> wl = Workload.from_requests([0, 5, 9], [3, 7, 2], [1] * 3,
    ...                             [[1, 2], [1, 6, 3, 4], [8]], block_size=2)
    >>> s = sessions(wl, min_shared_blocks=1)
    >>> s.requests[["session", "turn", "parent", "shared_blocks", "gap_ms", "growth_tokens"]]
                session  turn  parent  shared_blocks  gap_ms  growth_tokens
    request_id
    0                 0     1      -1            NaN     NaN            NaN
    1                 0     2       0            1.0     5.0            4.0
    2                 2     1      -1            NaN     NaN            NaN
    """
    if int(min_shared_blocks) != min_shared_blocks or min_shared_blocks < 1:
        raise ValueError(f"min_shared_blocks must be a positive integer, got {min_shared_blocks!r}")
    if links not in ("auto", "hash_ids"):
        raise ValueError(f"links must be 'auto' or 'hash_ids', got {links!r}")
    from inferasim.workload._sessions import explicit_parents

    tree = explicit_parents(workload.frame) if links == "auto" else None
    refs = block_refs(workload)
    trie = build_trie(refs)
    n = refs.n_requests
    lengths = np.diff(refs.offsets)
    has = lengths > 0
    last_tokens = np.zeros(n, dtype=np.int64)
    last_tokens[has] = refs.tokens[refs.offsets[1:][has] - 1]
    full = lengths - (has & (last_tokens < refs.block_size))
    need = refs.input_len + (workload.output_len if contains_answer else 1)
    if tree is not None:
        parent, shared = tree, _common_prefix(workload, tree)
    else:
        parent, shared = _link(
            trie.node_of_ref.tolist(),
            refs.offsets.tolist(),
            full.tolist(),
            need.tolist(),
            refs.input_len.tolist(),
            int(min_shared_blocks),
        )
    session, turn = _tree_walk(parent)
    arrival = refs.arrival_ms
    linked = parent >= 0
    pp = np.maximum(parent, 0)
    req = pd.DataFrame(
        {
            "session": session,
            "turn": turn,
            "parent": parent,
            "shared_blocks": np.where(linked, shared, np.nan),
            "gap_ms": np.where(linked, arrival - arrival[pp], np.nan),
            "growth_blocks": np.where(linked, lengths - lengths[pp], np.nan),
            "growth_tokens": np.where(linked, refs.input_len - refs.input_len[pp], np.nan),
        }
    )
    if "type" in workload.frame.columns:  # request types (Bailian) group every frame
        req.insert(0, "type", workload.frame["type"].to_numpy())
    req.index.name = "request_id"
    grouped = pd.DataFrame(
        {"session": session, "arrival_ms": arrival, "input_len": refs.input_len}
    ).groupby("session", sort=True)
    summary = pd.DataFrame(
        {
            "turns": grouped.size(),
            "first_ms": grouped["arrival_ms"].min(),
            "last_ms": grouped["arrival_ms"].max(),
            "first_input_len": grouped["input_len"].first(),
            "max_input_len": grouped["input_len"].max(),
        }
    )
    summary["duration_ms"] = summary["last_ms"] - summary["first_ms"]
    summary["mean_gap_ms"] = req.groupby("session")["gap_ms"].mean()
    summary = summary[
        [
            "turns",
            "first_ms",
            "last_ms",
            "duration_ms",
            "mean_gap_ms",
            "first_input_len",
            "max_input_len",
        ]
    ]
    return Sessions(requests=req, sessions=summary)
