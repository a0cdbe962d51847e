"""Synthesize new traffic that keeps a trace's prefix structure.

:func:`fit_trace` reads a workload into a :class:`TraceModel`:

- the **radix tree** of its block hash ids (one node per distinct prefix of
  blocks), each node marked *shared* when requests of two or more sessions
  pass through it (system prompts, shared documents) or *private* when only
  one session's requests do (a conversation's own history);
- its **sessions**: request ``j`` is the next turn of the latest earlier
  request ``i`` whose full blocks (all but a partial last block) are a
  leading run of ``j``'s ids, at least ``min_shared_blocks`` long and
  shorter than ``j``'s ids, when ``j``'s prompt can hold ``i``'s prompt and
  answer (``input_len[j] >= input_len[i] + output_len[i]``); the rule of
  :func:`inferasim.reuse.sessions`, implemented here on the tree. Each
  session keeps its turns' arrival offsets (gaps), lengths and tree paths
  (growth per turn);
- its **arrival process**: the gaps between session starts.

:func:`sample` draws sessions with replacement and replays each with a
fresh identity: shared nodes keep one new id each (so every drawn session
that passed through a shared node still shares it, with the popularity,
fan-out and depth per level of the original tree), private nodes get new
ids per drawn session (so within-session reuse is kept and never leaks
into another session). Families are drawn in rounds of random permutations (at scale 1 every
family appears once, so the infinite-cache hit ratio is exactly the
original's) and start at the original's inter-family gaps, resampled and
stretched over the horizon ``num_requests / rate``; each session's turns
keep their recorded offsets. Time is circular: a turn beyond the horizon
wraps to its start, as if the trace were one period of a stationary
process (the recorded trace's edges cut sessions too).

Scaling: ``num_sessions_scale=k`` starts ``k`` times as many sessions per
unit time (same horizon: ``k`` times the requests and the request rate).
Every session still has the original's structure, so the reuse *within*
sessions is the same, while the working set a cache must hold grows: hit
ratios at a fixed capacity drop. The infinite-cache ratio rises a little,
because shared prefixes are shared by more sessions. ``rate`` instead sets
the request rate (sessions start ``rate / mean turns`` per second).
``prompt_scale=s`` stretches the private part of every prompt: each
private node becomes ``floor(s)`` or ``ceil(s)`` blocks (``s`` on average,
the same for every request through it); shared prefixes are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from inferasim._validate import integer as check_integer
from inferasim._validate import rate as check_rate
from inferasim._validate import seed as check_seed
from inferasim.workload._columns import Columns, RequestTable
from inferasim.workload._parse import MAX_ARRIVAL_SPAN_MS
from inferasim.workload.synthetic import MAX_HASH_IDS, MAX_TOKENS

#: Most requests one synthesis draws.
MAX_REQUESTS = 2**28

__all__ = ["TraceModel", "fit_trace", "sample", "synthesize"]


@dataclass(frozen=True, eq=False)
class TraceModel:
    """What :func:`sample` needs from a trace: tree, sessions, arrivals.

    Attributes
    ----------
    block_size : int
        Tokens per hash id.
    source : str or None
        The fitted workload's label.
    input_len, output_len : numpy.ndarray
        Per request of the trace (arrival order).
    session, turn : numpy.ndarray
        Session index (0-based, by first arrival) and 1-based turn of each request.
    offset_ms : numpy.ndarray
        Arrival minus its session's first arrival.
    path, path_offsets : numpy.ndarray
        Tree node of every block, per request (flat, with row offsets).
    node_parent, node_depth, node_sessions : numpy.ndarray
        Per tree node: parent node (-1 under the root), depth in blocks
        (1 = first block) and how many sessions pass through it.
    session_start_ms : numpy.ndarray
        First arrival of each session (ascending).
    family : numpy.ndarray
        Per session: its family, the sessions linked by shared nodes that
        at most ``max_family_share`` of all sessions pass through (sessions
        sharing a document, not merely the system prompt); families are
        drawn whole, keeping their sessions' relative start times, so
        prefixes shared close in time stay close in time.
    family_cap : float
        Sessions through a node above which it is *global*: one new id
        for all drawn sessions (a system prompt). Nodes of fewer sessions
        get new ids per drawn family (each draw is a new group of users).
    arrival_grid_ms : float or None
        The slot width when the trace's timestamps sit on a grid (the FAST'25
        conversation trace logs arrivals in 3-second slots: 90% of its
        requests share a timestamp with the previous one); synthesized
        arrivals are floored to it. None for continuous timestamps.

    Examples
    --------
    >>> from inferasim import Workload
    >>> wl = Workload.from_requests([0, 5, 9], [4, 8, 4], [1, 1, 1],
    ...                             [[1, 2], [1, 2, 3, 4], [1, 9]], block_size=2)
    >>> m = fit_trace(wl, min_shared_blocks=1)
    >>> m.session.tolist(), m.turn.tolist()  # request 1 extends request 0
    ([0, 0, 1], [1, 2, 1])
    >>> m.node_sessions.tolist()  # block 1 is shared by both sessions
    [2, 1, 1, 1, 1]
    """

    block_size: int
    source: str | None
    input_len: np.ndarray
    output_len: np.ndarray
    session: np.ndarray
    turn: np.ndarray
    offset_ms: np.ndarray
    path: np.ndarray
    path_offsets: np.ndarray
    node_parent: np.ndarray
    node_depth: np.ndarray
    node_sessions: np.ndarray
    session_start_ms: np.ndarray
    family: np.ndarray
    family_cap: float
    arrival_grid_ms: float | None = None

    @property
    def num_requests(self) -> int:
        """Requests in the fitted trace.

        Examples
        --------
        >>> from inferasim import Workload
        >>> fit_trace(Workload.from_requests([0], [3], [1], [[5]], block_size=4)).num_requests
        1
        """
        return int(self.input_len.size)

    @property
    def num_sessions(self) -> int:
        """Sessions in the fitted trace.

        Examples
        --------
        >>> from inferasim import Workload
        >>> fit_trace(Workload.from_requests([0, 1], [3, 3], [1, 1], [[5], [6]],
        ...                                  block_size=4)).num_sessions
        2
        """
        return int(self.session_start_ms.size)

    @property
    def shared(self) -> np.ndarray:
        """Per node: passed through by two or more sessions.

        Examples
        --------
        >>> from inferasim import Workload
        >>> wl = Workload.from_requests([0, 1], [4, 4], [1, 1], [[5, 6], [5, 7]], block_size=2)
        >>> fit_trace(wl).shared.tolist()
        [True, False, False]
        """
        return self.node_sessions >= 2

    def tree_levels(self) -> pd.DataFrame:
        """The shared part of the radix tree by depth: nodes, fan-out, sessions.

        Returns
        -------
        pandas.DataFrame
            Indexed by ``depth`` (blocks): ``shared_nodes``, ``mean_fanout``
            (shared children per shared node with any), ``sessions`` (sum of
            sessions through that level's shared nodes).

        Examples
        --------
        >>> from inferasim import Workload
        >>> wl = Workload.from_requests([0, 1, 2], [6, 6, 4], [1, 1, 1],
        ...     [[5, 6, 7], [5, 6, 8], [5, 9]], block_size=2)
        >>> fit_trace(wl).tree_levels()
               shared_nodes  mean_fanout  sessions
        depth
        1                 1          1.0         3
        2                 1          NaN         2
        """
        shared = self.shared
        depth = self.node_depth[shared]
        sessions = self.node_sessions[shared]
        parent = self.node_parent[shared]
        levels = pd.DataFrame({"depth": depth, "sessions": sessions})
        out = levels.groupby("depth").agg(
            shared_nodes=("sessions", "size"), sessions=("sessions", "sum")
        )
        children = pd.Series(parent[parent >= 0]).value_counts()
        child_depth = pd.Series(self.node_depth[children.index.to_numpy()], index=children.index)
        fan = children.groupby(child_depth).mean()
        out.insert(1, "mean_fanout", fan.reindex(out.index).astype(float))
        return out

    def session_frame(self) -> pd.DataFrame:
        """One row per session: ``turns``, ``start_ms``, ``duration_ms``, ``first_input_len``.

        Examples
        --------
        >>> from inferasim import Workload
        >>> wl = Workload.from_requests([0, 5], [4, 8], [1, 1], [[1, 2], [1, 2, 3, 4]],
        ...                             block_size=2)
        >>> fit_trace(wl, min_shared_blocks=1).session_frame()
                 turns  start_ms  duration_ms  first_input_len
        session
        0            2       0.0          5.0                4
        """
        df = pd.DataFrame(
            {"session": self.session, "offset": self.offset_ms, "input_len": self.input_len}
        )
        g = df.groupby("session")
        out = pd.DataFrame(
            {
                "turns": g.size(),
                "start_ms": self.session_start_ms,
                "duration_ms": g["offset"].max(),
                "first_input_len": g["input_len"].first(),
            }
        )
        out.index.name = "session"
        return out


# ------------------------------------------------------------------ fitting
def _build_tree(
    hash_ids: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node of every block (a node per distinct (parent node, id)), parents, depths."""
    ids = hash_ids.tolist()
    offs = offsets.tolist()
    children: dict[tuple[int, int], int] = {}
    node_of = [0] * len(ids)
    parents: list[int] = []
    depths: list[int] = []
    for r in range(len(offs) - 1):
        node = -1
        depth = 0
        for k in range(offs[r], offs[r + 1]):
            depth += 1
            key = (node, ids[k])
            nxt = children.get(key)
            if nxt is None:
                nxt = len(parents)
                children[key] = nxt
                parents.append(node)
                depths.append(depth)
            node_of[k] = nxt
            node = nxt
    return (
        np.asarray(node_of, dtype=np.int64),
        np.asarray(parents, dtype=np.int64),
        np.asarray(depths, dtype=np.int64),
    )


def _link_sessions(
    path: np.ndarray,
    offsets: np.ndarray,
    input_len: np.ndarray,
    output_len: np.ndarray,
    block_size: int,
    min_shared_blocks: int,
) -> np.ndarray:
    """Previous turn of every request (-1 for a first turn); see the module docstring."""
    n = input_len.size
    nblocks = np.diff(offsets)
    last_tokens = input_len - (nblocks - 1) * block_size
    full = (nblocks - ((nblocks > 0) & (last_tokens < block_size))).tolist()
    nodes = path.tolist()
    offs = offsets.tolist()
    need = (input_len + output_len).tolist()
    inl = input_len.tolist()
    anchors: dict[int, list[int]] = {}
    parent = [-1] * n
    for j in range(n):
        start, stop = offs[j], offs[j + 1]
        for depth in range(stop - start - 1, min_shared_blocks - 1, -1):
            candidates = anchors.get(nodes[start + depth - 1])
            if not candidates:
                continue
            for i in reversed(candidates):
                if full[i] == depth and inl[j] >= need[i]:
                    parent[j] = i
                    break
            if parent[j] >= 0:
                break
        if full[j] >= 1:
            anchors.setdefault(nodes[start + full[j] - 1], []).append(j)
    return np.asarray(parent, dtype=np.int64)


def fit_trace(
    like: RequestTable, *, min_shared_blocks: int = 2, max_family_share: float = 0.05
) -> TraceModel:
    """Fit the prefix tree, sessions and arrival process of a workload.

    Parameters
    ----------
    like : Workload
        A workload with hash ids (a Mooncake trace).
    min_shared_blocks : int, default 2
        Shortest previous turn (full blocks) that can start a session chain
        (as in :func:`inferasim.reuse.sessions`).
    max_family_share : float, default 0.05
        Shared nodes through at most this share of sessions (or 2 sessions,
        whichever is more) tie their sessions into one family (see
        :attr:`TraceModel.family`); more popular nodes (a system prompt
        every session starts with) do not.

    Returns
    -------
    TraceModel

    Raises
    ------
    ValueError
        When the workload is empty or has no hash ids.

    Examples
    --------
    >>> from inferasim import Workload
    >>> wl = Workload.from_requests([0, 5], [4, 8], [1, 1], [[1, 2], [1, 2, 3, 4]], block_size=2)
    >>> fit_trace(wl, min_shared_blocks=1).num_sessions
    1
    """
    if not getattr(like, "has_hash_ids", False):
        raise ValueError("synthesize: the workload to imitate has no hash ids (no prefix structure)")
    if len(like) == 0:
        raise ValueError("synthesize: the workload to imitate is empty")
    if int(min_shared_blocks) != min_shared_blocks or min_shared_blocks < 1:
        raise ValueError(f"min_shared_blocks must be a positive integer, got {min_shared_blocks!r}")
    offsets = np.asarray(like.offsets, dtype=np.int64)
    input_len = np.asarray(like.input_len, dtype=np.int64)
    output_len = np.asarray(like.output_len, dtype=np.int64)
    arrival = np.asarray(like.arrival_ms, dtype=np.float64)
    path, node_parent, node_depth = _build_tree(np.asarray(like.hash_ids), offsets)
    parent = _link_sessions(
        path, offsets, input_len, output_len, like.block_size, int(min_shared_blocks)
    )
    n = input_len.size
    root = np.arange(n, dtype=np.int64)
    turn = np.ones(n, dtype=np.int64)
    par = parent.tolist()
    root_l, turn_l = root.tolist(), turn.tolist()
    for j in range(n):  # parents come first
        p = par[j]
        if p >= 0:
            root_l[j] = root_l[p]
            turn_l[j] = turn_l[p] + 1
    roots = np.asarray(root_l, dtype=np.int64)
    uniq, session = np.unique(roots, return_inverse=True)  # roots ascend = by first arrival
    session = session.astype(np.int64)
    start = arrival[uniq]
    pairs = np.unique(np.repeat(session, np.diff(offsets)) * (path.max(initial=0) + 1) + path)
    node_sessions = np.bincount(pairs % (path.max(initial=0) + 1), minlength=node_parent.size)
    cap = max(2.0, float(max_family_share) * uniq.size)
    family = _families(
        pairs // (path.max(initial=0) + 1),
        pairs % (path.max(initial=0) + 1),
        node_sessions,
        uniq.size,
        cap,
    )
    return TraceModel(
        block_size=int(like.block_size),
        source=like.source,
        input_len=input_len,
        output_len=output_len,
        session=session,
        turn=np.asarray(turn_l, dtype=np.int64),
        offset_ms=arrival - start[session],
        path=path,
        path_offsets=offsets,
        node_parent=node_parent,
        node_depth=node_depth,
        node_sessions=node_sessions.astype(np.int64),
        session_start_ms=start,
        family=family,
        family_cap=cap,
        arrival_grid_ms=_grid(arrival),
    )


def _grid(arrival: np.ndarray) -> float | None:
    """Slot width of gridded timestamps: 90% of distinct gaps within 0.5% of a multiple."""
    gaps = np.diff(np.unique(arrival))
    if gaps.size < 10:
        return None
    q = float(np.median(gaps))
    if q < 10.0:
        return None
    off = np.abs(gaps / q - np.round(gaps / q)) * q
    return q if float(np.mean(off <= 0.005 * q)) >= 0.9 else None


def _families(
    pair_session: np.ndarray, pair_node: np.ndarray, node_sessions: np.ndarray, n: int, cap: float
) -> np.ndarray:
    """Family of each session: components of sessions linked by nodes of 2..cap sessions."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    counts = node_sessions[pair_node]
    link = (counts >= 2) & (counts <= cap)
    nodes, node_col = np.unique(pair_node[link], return_inverse=True)
    size = n + nodes.size
    graph = coo_matrix(
        (np.ones(int(link.sum())), (pair_session[link], n + node_col.ravel())), shape=(size, size)
    )
    _, label = connected_components(graph, directed=False)
    _, family = np.unique(label[:n], return_inverse=True)  # numbered by first session
    return family.astype(np.int64).ravel()


# ------------------------------------------------------------------ sampling
def _mix(x: np.ndarray, seed: int) -> np.ndarray:
    """SplitMix64 of ``x`` xor a seed: a uniform float in [0, 1) per key."""
    z = x.astype(np.uint64) ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _check_size(model: TraceModel, n_out: int, s_scale: float, prompt_scale: Any) -> None:
    """The hash ids and lengths ``n_out`` drawn requests can reach at ``s_scale``,
    bounded before anything is allocated (a ValueError naming the parameter).

    A drawn request copies a template request of the trace: its shared blocks
    once, its private blocks about ``prompt_scale`` times each (at most the
    ceiling). The bound takes the template with the most of each.
    """
    nb = np.diff(model.path_offsets).astype(np.float64)
    node = model.path
    shared_elem = model.node_sessions[node] > model.family_cap
    rows = np.repeat(np.arange(nb.size), np.diff(model.path_offsets))
    shared_nb = np.bincount(rows, weights=shared_elem.astype(np.float64), minlength=nb.size)
    private_nb = nb - shared_nb
    per_request = shared_nb + private_nb * float(math.ceil(s_scale))
    worst = float(per_request.max(initial=0.0))
    ids = n_out * worst
    if not ids <= MAX_HASH_IDS:
        name = "prompt_scale" if s_scale > 1 else "num_requests"
        raise ValueError(
            f"{name}: {n_out:,} requests at prompt_scale={prompt_scale!r} may need up to "
            f"{ids:.3g} hash ids (the longest template: {int(shared_nb[np.argmax(per_request)])} "
            f"shared + {int(private_nb[np.argmax(per_request)])} private blocks x "
            f"{float(math.ceil(s_scale)):.3g}), more than the {MAX_HASH_IDS:,} (2 GiB) a synthesized "
            "workload holds; use fewer requests or a smaller prompt_scale"
        )
    longest = float(model.input_len.max(initial=0)) + worst * model.block_size
    if not longest <= MAX_TOKENS:
        raise ValueError(
            f"prompt_scale={prompt_scale!r} makes prompts of up to {longest:.3g} tokens, beyond "
            f"the {MAX_TOKENS:,} (2**40) a workload's lengths may reach"
        )


def sample(
    model: TraceModel,
    num_requests: int | None = None,
    *,
    rate: float | None = None,
    num_sessions_scale: float = 1.0,
    prompt_scale: float = 1.0,
    seed: int = 0,
) -> Columns:
    """Draw new traffic from a :class:`TraceModel`; see the module docstring.

    Parameters
    ----------
    model : TraceModel
        From :func:`fit_trace`.
    num_requests : int, optional
        Requests to produce (at most 2**28); default the trace's count times
        ``num_sessions_scale`` (the same horizon).
    rate : float, optional
        Request rate (per second); default the trace's times
        ``num_sessions_scale``. Give ``rate`` or ``num_sessions_scale``, not both.
    num_sessions_scale : float, default 1.0
        Sessions started per unit time, relative to the trace.
    prompt_scale : float, default 1.0
        Stretch of the private (per-session) part of every prompt. The hash
        ids the draw can need (``num_requests`` times the longest template's
        shared blocks plus its private blocks times ``ceil(prompt_scale)``)
        are bounded by 2**28 before anything is allocated, and prompt lengths
        by 2**40 tokens.
    seed : int, default 0
        Same inputs and seed give the same columns; an integer in ``[0, 2**64)``.

    Returns
    -------
    Columns
        With ``session_id`` (0-based, by first arrival) and ``turn`` (the
        drawn session's turn number) in ``extra``.

    Examples
    --------
    >>> from inferasim import Workload
    >>> wl = Workload.from_requests([0, 5, 9], [4, 8, 4], [1, 1, 1],
    ...                             [[1, 2], [1, 2, 3, 4], [1, 9]], block_size=2)
    >>> cols = sample(fit_trace(wl, min_shared_blocks=1), 6, seed=1)
    >>> len(cols), sorted(set(cols.extra["turn"].tolist()))
    (6, [1, 2])
    """
    k_scale = check_rate(num_sessions_scale, "num_sessions_scale")
    s_scale = check_rate(prompt_scale, "prompt_scale")
    if rate is not None:
        check_rate(rate, "rate")
        if k_scale != 1.0:
            raise ValueError("give rate or num_sessions_scale, not both")
    seed = check_seed(seed, "seed")
    if num_requests is None:
        drawn = model.num_requests * k_scale
        if not drawn <= MAX_REQUESTS:
            raise ValueError(
                f"num_sessions_scale={num_sessions_scale!r} draws about {drawn:.3g} requests "
                f"({model.num_requests} in the trace), beyond the {MAX_REQUESTS:,} a synthesized "
                "workload holds; give num_requests= or a smaller scale"
            )
        num_requests = max(1, round(drawn))
    n_out = check_integer(num_requests, "num_requests", low=1, high=MAX_REQUESTS)
    _check_size(model, n_out, s_scale, prompt_scale)
    rng = np.random.default_rng(seed)

    # family templates: their requests grouped, with times from the family's start
    fam_of_req = model.family[model.session]
    fam_start = np.full(int(model.family.max()) + 1, np.inf)
    np.minimum.at(fam_start, model.family, model.session_start_ms)
    rel = model.session_start_ms[model.session] - fam_start[fam_of_req] + model.offset_ms
    order = np.lexsort((rel, fam_of_req))
    counts = np.bincount(fam_of_req, minlength=fam_start.size)
    first = np.concatenate(([0], np.cumsum(counts)))
    mean_size = model.num_requests / fam_start.size

    # horizon from the request rate
    arrivals = model.session_start_ms[model.session] + model.offset_ms
    span = float(arrivals.max() - arrivals.min())
    # one mean inter-arrival beyond the last arrival closes the period
    span = span * model.num_requests / (model.num_requests - 1) if model.num_requests > 1 else 0.0
    span = span if span > 0 else 1000.0 * model.num_requests
    per_ms = model.num_requests / span * k_scale if rate is None else float(rate) / 1e3
    horizon = n_out / per_ms if per_ms > 0 else math.inf
    if not horizon <= MAX_ARRIVAL_SPAN_MS:
        name = "rate" if rate is not None else "num_sessions_scale"
        raise ValueError(
            f"{name}={rate if rate is not None else num_sessions_scale!r} spreads {n_out:,} "
            f"requests over {horizon:.3g} ms, beyond the 2**43 ms (about 278 years) a workload "
            f"may span; raise the {'rate' if rate is not None else 'scale'}"
        )
    # families in rounds of permutations until num_requests are drawn (the
    # last one cut after the request that completes the count)
    tmpl = _draw_sessions(rng, fam_start.size, int(n_out / mean_size) + 16, 0)
    while int(counts[tmpl].sum()) < n_out:
        tmpl = np.concatenate((tmpl, _draw_sessions(rng, fam_start.size, tmpl.size, tmpl.size)))
    sizes = counts[tmpl]
    used = int(np.searchsorted(np.cumsum(sizes), n_out)) + 1
    tmpl, sizes = tmpl[:used], sizes[:used].copy()
    sizes[-1] -= int(sizes.sum()) - n_out
    # family starts: the trace's inter-start gaps, resampled, stretched over the horizon
    gaps = np.diff(np.sort(fam_start))
    if gaps.size == 0 or gaps.sum() <= 0:
        gaps = np.ones(1)
    g = rng.choice(gaps, size=used)
    fstart = (np.cumsum(g) - g[0]) * (horizon / float(g.sum()))
    copy = np.repeat(np.arange(used, dtype=np.int64), sizes)
    pos = _ranges(first[tmpl], sizes)
    req = order[pos]  # template request of every drawn request
    # circular time: a turn beyond the horizon wraps to its start, as if the
    # trace were one period of a stationary process (the recorded trace's
    # edges cut sessions too)
    arrival = np.mod(fstart[copy] + rel[req], horizon)
    if model.arrival_grid_ms is not None:
        arrival = np.floor(arrival / model.arrival_grid_ms) * model.arrival_grid_ms
    keep = np.argsort(arrival, kind="stable")
    copy, req, arrival = copy[keep], req[keep], arrival[keep]
    # a drawn session: (family copy, template session)
    sess_key = copy * model.num_sessions + model.session[req]

    # blocks: shared nodes keep one id, private nodes get one per drawn session
    nb = np.diff(model.path_offsets)[req]
    elem = _ranges(model.path_offsets[req], nb)
    node = model.path[elem]
    ecopy = np.repeat(copy, nb)
    n_nodes = int(model.node_parent.size)
    shared = model.node_sessions[node] > model.family_cap  # global nodes
    key = np.where(shared, node, n_nodes + ecopy * n_nodes + node)
    if s_scale == 1.0:
        reps = np.ones(key.size, dtype=np.int64)
    else:
        whole = math.floor(s_scale)
        u = _mix(key, seed + 0x5EED)
        reps = np.where(shared, 1, whole + (u < s_scale - whole)).astype(np.int64)
        last = np.cumsum(nb)[nb > 0] - 1
        lone = np.isin(key, key[last[reps[last] == 0]])
        reps[lone & (reps == 0)] = 1  # a request keeps at least its last block
    width = int(reps.max(initial=1))
    sub = _ranges(np.zeros(key.size, dtype=np.int64), reps)
    expanded = np.repeat(key, reps) * width + sub
    _, first_seen, inverse = np.unique(expanded, return_index=True, return_inverse=True)
    # fresh ids in order of first use, like the Mooncake traces
    rank = np.empty(first_seen.size, dtype=np.int64)
    rank[np.argsort(first_seen, kind="stable")] = np.arange(first_seen.size)
    ids = rank[inverse.ravel()]
    row = np.repeat(np.arange(nb.size, dtype=np.int64), nb)
    new_nb = np.bincount(row, weights=reps, minlength=nb.size).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(new_nb))).astype(np.int64)
    input_len = model.input_len[req] + (new_nb - nb) * model.block_size

    # sessions renumbered by first arrival
    _, sess_first, sess_inv = np.unique(sess_key, return_index=True, return_inverse=True)
    sess_rank = np.empty(sess_first.size, dtype=np.int64)
    sess_rank[np.argsort(sess_first, kind="stable")] = np.arange(sess_first.size)
    session_id = sess_rank[sess_inv.ravel()]
    label = f"synthesized from {model.source}" if model.source else "synthesized"
    return Columns(
        arrival_ms=arrival - arrival[0],
        input_len=input_len.astype(np.int64),
        output_len=model.output_len[req].astype(np.int64),
        hash_ids=ids.astype(np.int64),
        offsets=offsets,
        extra={"session_id": session_id, "turn": model.turn[req]},
        block_size=model.block_size,
        source=label,
        where=label,
    )


def _draw_sessions(rng: np.random.Generator, n: int, size: int, drawn: int) -> np.ndarray:
    """The next ``size`` session templates: rounds of random permutations of all ``n``.

    Each template is used once per round, so at scale 1 every session of the
    trace appears once (in a new order) and shared nodes keep their exact
    popularity; longer or denser traces use further rounds.
    """
    out = []
    need = size
    pos = drawn % n
    while need > 0:
        perm = rng.permutation(n)
        take = perm[pos : pos + need] if pos else perm[:need]
        out.append(take)
        need -= take.size
        pos = 0
    return np.concatenate(out).astype(np.int64)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + n)`` for every ``(s, n)``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    begin = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, dtype=np.int64) - begin, lengths) + np.arange(total)


def synthesize(
    like: RequestTable | TraceModel,
    num_requests: int | None = None,
    *,
    rate: float | None = None,
    num_sessions_scale: float = 1.0,
    prompt_scale: float = 1.0,
    seed: int = 0,
) -> Columns:
    """Fit ``like`` (unless it is already a :class:`TraceModel`) and :func:`sample` from it.

    Examples
    --------
    >>> from inferasim import Workload
    >>> wl = Workload.from_requests([0, 5], [4, 8], [1, 1], [[1, 2], [1, 2, 3, 4]], block_size=2)
    >>> len(synthesize(wl, 4, seed=0))
    4
    """
    model = like if isinstance(like, TraceModel) else fit_trace(like)
    return sample(
        model,
        num_requests,
        rate=rate,
        num_sessions_scale=num_sessions_scale,
        prompt_scale=prompt_scale,
        seed=seed,
    )
