"""Closed-loop sessions: which request waits for which, and how long users think.

In a closed loop (``Simulator.run(workload, closed_loop=True)``) the next turn of a
conversation is sent when the previous answer has arrived, plus a think
time, instead of at its recorded timestamp:

* **Which request is whose next turn** (:func:`session_links`): with
  ``chat_id`` and ``parent_chat_id`` columns (a Bailian trace), the
  explicit tree: each request waits for its parent (two may wait for the
  same one); else with a
  ``session_id`` column (and optionally ``turn``) in the workload, the
  turns of a session in turn order (or arrival order, then request order,
  without ``turn``) form a chain, each turn the parent of the next;
  otherwise the chains :func:`inferasim.reuse.sessions` infers from the
  hash ids (a request whose prompt extends an earlier prompt and its
  answer), which may branch (two requests continuing one turn: both wait
  for it).
* **When turn k+1 is sent**: at the finish of turn k (its parent) plus its
  think time; a rejected turn k counts as answered at its rejection time
  (the user gets the error and moves on). First turns keep their recorded
  arrivals.
* **Think time** (:func:`think_times`): by default the recorded gap minus
  turn k's idle service time, ``max(0, (arrival[k+1] - arrival[k]) -
  est[k])``: what the user spent after the answer, if the recorded fleet
  had served turn k like an idle replica of this fleet. ``est[k]``
  (:func:`idle_service_ms`) is turn k's first-arrival-to-finish time alone
  on an idle replica under the run's cost model: its uncached prompt
  tokens (the full blocks it shares with its own parent's prompt are
  cached; none for a first turn) in chunks of ``max_batched_tokens``
  (one step without chunked prefill), then ``output_len - 1`` batch-1
  decode steps. So on an idle, fast enough fleet the closed loop replays
  the recorded arrivals (exactly when every recorded gap covers the
  estimate); a slower or busier fleet pushes later turns back.
  Alternatively a constant (ms), one value per request, or a callable.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from inferasim._validate import MAX_TIME_MS
from inferasim.workload import Workload

__all__ = ["SessionLinks", "idle_service_ms", "session_links", "think_times"]


@dataclass(frozen=True)
class SessionLinks:
    """Which request is the next turn of which (one entry per request).

    Attributes
    ----------
    parent : numpy.ndarray
        The request whose answer this one waits for, -1 for a first turn.
    session_id : numpy.ndarray
        The session: the workload's ``session_id`` values, or (inferred
        chains) the request id of the session's first turn.
    turn : numpy.ndarray
        1-based turn number (the depth in an inferred chain).
    source : str
        ``"parent_chat_id"`` (explicit tree), ``"columns"`` (``session_id`` /
        ``turn``) or ``"hash_ids"`` (inferred).

    Examples
    --------
    >>> links = session_links(Workload.from_requests([0, 1, 2], [4, 4, 4], [1, 1, 1],
    ...                                              session_id=["a", "b", "a"]))
    >>> links.parent.tolist(), links.turn.tolist(), links.source
    ([-1, -1, 0], [1, 1, 2], 'columns')
    """

    parent: np.ndarray
    session_id: np.ndarray
    turn: np.ndarray
    source: str


def _show(v: Any) -> str:
    return repr(v.item() if isinstance(v, np.generic) else v)


def _check_session_values(sid: np.ndarray, turn: np.ndarray | None) -> None:
    """No missing session id (None, NaN, empty) and whole turns >= 1: a frame
    built by hand (not by a loader or ``from_requests``, which check them)
    must not chain its unlabelled requests into one session."""
    missing = pd.isna(sid) | np.array([isinstance(v, str) and not v.strip() for v in sid], bool)
    if missing.any():
        j = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"closed_loop: request {j} has no session_id ({_show(sid[j])}); give every request "
            "a session id, or leave the column out to infer sessions from the hash ids"
        )
    if turn is not None:
        t = pd.to_numeric(pd.Series(turn), errors="coerce").to_numpy(dtype=np.float64)
        bad = ~(np.isfinite(t) & (t >= 1) & (np.mod(t, 1.0) == 0))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"closed_loop: request {j} has turn {_show(turn[j])}; turns are whole numbers >= 1"
            )


def session_links(wl: Workload) -> SessionLinks:
    """The session chains of a workload (see the module docstring).

    Parameters
    ----------
    wl : Workload
        With ``chat_id`` / ``parent_chat_id`` columns, a ``session_id``
        column (optionally ``turn``), or with hash ids.

    Returns
    -------
    SessionLinks

    Raises
    ------
    ValueError
        When the workload has neither session columns nor hash ids, a turn
        number repeats within a session, or a turn's recorded arrival comes
        before its previous turn's.

    Examples
    --------
    Request 1 extends request 0's prompt and answer (inferred from the ids):

    >>> wl = Workload.from_requests([0, 5], [4, 8], [2, 1], [[1, 2], [1, 2, 3, 4]], block_size=2)
    >>> links = session_links(wl)
    >>> links.parent.tolist(), links.session_id.tolist(), links.source
    ([-1, 0], [0, 0], 'hash_ids')
    """
    n = len(wl)
    frame = wl.frame
    arrival = wl.arrival_ms.astype(np.float64)
    from inferasim.workload._sessions import explicit_parents

    tree = explicit_parents(frame)
    if tree is not None:
        late = np.flatnonzero((tree >= 0) & (arrival < arrival[np.maximum(tree, 0)]))
        if late.size:
            j = int(late[0])
            raise ValueError(
                f"closed_loop: request {j} arrives at {arrival[j]:g} ms, before its parent "
                f"(parent_chat_id), request {tree[j]}, at {arrival[tree[j]]:g} ms"
            )
        depth = np.ones(n, dtype=np.int64)  # 1 + ancestors
        up = tree.copy()
        for _ in range(n):
            active = up >= 0
            if not active.any():
                break
            depth[active] += 1
            up[active] = tree[up[active]]
        sid = frame["session_id"].to_numpy() if "session_id" in frame.columns else frame["chat_id"].to_numpy()
        turn = frame["turn"].to_numpy().astype(np.int64) if "turn" in frame.columns else depth
        return SessionLinks(tree, sid, turn, "parent_chat_id")
    if "session_id" in frame.columns:
        sid = frame["session_id"].to_numpy()
        _check_session_values(sid, frame["turn"].to_numpy() if "turn" in frame.columns else None)
        has_turn = "turn" in frame.columns
        _, code = np.unique(sid.astype(str), return_inverse=True)
        code = code.ravel()
        idx = np.arange(n)
        if has_turn:
            turn_in = frame["turn"].to_numpy().astype(np.int64)
            order = np.lexsort((idx, turn_in, code))
        else:
            order = np.lexsort((idx, arrival, code))
        same = np.r_[False, code[order][1:] == code[order][:-1]]
        parent = np.full(n, -1, dtype=np.int64)
        parent[order[same]] = order[np.flatnonzero(same) - 1]
        if has_turn:
            rep = same & np.r_[False, turn_in[order][1:] == turn_in[order][:-1]]
            if rep.any():
                j = order[np.flatnonzero(rep)[0]]
                raise ValueError(
                    f"closed_loop: turn {turn_in[j]} of session {_show(sid[j])} appears twice "
                    f"(requests {parent[j]} and {j})"
                )
        linked = parent >= 0
        late = np.flatnonzero(linked & (arrival < arrival[np.maximum(parent, 0)]))
        if late.size:
            j = int(late[0])
            raise ValueError(
                f"closed_loop: request {j} (session {_show(sid[j])}) arrives at {arrival[j]:g} ms, "
                f"before its previous turn, request {parent[j]}, at {arrival[parent[j]]:g} ms"
            )
        # turn numbers: position in the chain
        turn = np.empty(n, dtype=np.int64)
        starts = np.flatnonzero(~same)
        pos = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
        turn[order] = pos + 1
        return SessionLinks(parent, sid, turn, "columns")
    if not wl.has_hash_ids:
        raise ValueError(
            "closed_loop needs to know the sessions: give the workload a session_id column "
            "(and optionally turn), or hash ids to infer them from"
        )
    from inferasim.reuse import sessions

    req = sessions(wl).requests
    return SessionLinks(
        req["parent"].to_numpy().astype(np.int64),
        req["session"].to_numpy().astype(np.int64),
        req["turn"].to_numpy().astype(np.int64),
        "hash_ids",
    )


def _cached_blocks(wl: Workload, parent: np.ndarray) -> np.ndarray:
    """Full prompt blocks each request shares with its parent's prompt (what it
    finds cached on the replica that served the parent), within the simulator's
    lookup limit ``(input_len - 1) // block_size``."""
    n = len(wl)
    out = np.zeros(n, dtype=np.int64)
    if not wl.has_hash_ids:
        return out
    bs = wl.block_size
    P = wl.input_len.astype(np.int64)
    nh = np.minimum(wl.num_blocks, P // bs)
    off = wl.offsets
    flat = wl.hash_ids
    for j in np.flatnonzero(parent >= 0).tolist():
        p = int(parent[j])
        k = int(min(nh[j], nh[p], (P[j] - 1) // bs))
        if k <= 0:
            continue
        a = flat[off[j] : off[j] + k]
        b = flat[off[p] : off[p] + k]
        diff = np.flatnonzero(a != b)
        out[j] = int(diff[0]) if diff.size else k
    return out


def idle_service_ms(
    wl: Workload,
    cost: Any,
    *,
    cached_blocks: np.ndarray | None = None,
    max_batched_tokens: int = 8192,
    chunked_prefill: bool = True,
    which: np.ndarray | None = None,
) -> np.ndarray:
    """Each request's arrival-to-finish time alone on an idle replica.

    The steps the simulator's scheduler runs for a request with nothing else
    on its replica: the ``input_len - c`` uncached prompt tokens (``c =
    cached_blocks * block_size``) in chunks of at most ``max_batched_tokens``
    (one step of the whole rest without ``chunked_prefill``), a chunk of
    ``m`` tokens after ``x`` computed ones costing ``step_time_ms(m, m * x +
    m * (m + 1) / 2, 0, 0)``; the last chunk samples the first token; then
    ``output_len - 1`` decode steps of one sequence whose context is
    ``input_len + 1``, ``input_len + 2``, ... tokens. Never negative.

    Parameters
    ----------
    wl : Workload
    cost : cost model
        Anything with an elementwise ``step_time_ms`` (see :mod:`inferasim.sim.cost`).
    cached_blocks : numpy.ndarray, optional
        Prompt blocks found cached per request (default none).
    max_batched_tokens : int, default 8192
    chunked_prefill : bool, default True
    which : numpy.ndarray, optional
        Request indices to price (default all); the others get NaN.

    Returns
    -------
    numpy.ndarray
        Milliseconds per request.

    Examples
    --------
    32 prompt tokens in one step (5 + 0.05 * 32 = 6.6 ms), then 2 decode
    steps of 5.1 ms:

    >>> from inferasim.sim.cost import LinearCostModel
    >>> wl = Workload.from_requests([0], [32], [3], block_size=16)
    >>> idle_service_ms(wl, LinearCostModel()).round(6).tolist()
    [16.8]
    """
    n = len(wl)
    bs = wl.block_size
    P = wl.input_len.astype(np.int64)
    outs = np.maximum(wl.output_len.astype(np.int64), 1)
    cached = np.zeros(n, np.int64) if cached_blocks is None else np.asarray(cached_blocks, np.int64)
    idx = np.arange(n) if which is None else np.asarray(which, dtype=np.int64)
    est = np.full(n, np.nan)
    if not idx.size:
        return est
    # prefill chunks: (request, tokens, computed before)
    rows, toks, before = [], [], []
    M = int(max_batched_tokens)
    for i in idx.tolist():
        c = int(cached[i]) * bs
        p = int(P[i])
        if c >= p:  # (cannot happen with the lookup limit; one token is always computed)
            c = p - 1
        while c < p:
            m = p - c if not chunked_prefill else min(p - c, M)
            rows.append(i)
            toks.append(m)
            before.append(c)
            c += m
    toks_a = np.asarray(toks, dtype=np.float64)
    before_a = np.asarray(before, dtype=np.float64)
    pair = toks_a * before_a + toks_a * (toks_a + 1.0) / 2.0
    zero = np.zeros_like(toks_a)
    pre = np.broadcast_to(
        np.asarray(cost.step_time_ms(toks_a, pair, zero, zero), np.float64), toks_a.shape
    )
    total = np.zeros(n)
    np.add.at(total, np.asarray(rows, dtype=np.int64), pre)
    # decode: O - 1 steps, context P + 1 + j
    steps = outs[idx] - 1
    if steps.sum():
        owner = np.repeat(idx, steps)
        first = np.cumsum(steps) - steps
        j = np.arange(int(steps.sum())) - np.repeat(first, steps)
        ctx = (P[owner] + 1 + j).astype(np.float64)
        ones = np.ones_like(ctx)
        dec = np.broadcast_to(
            np.asarray(cost.step_time_ms(np.zeros_like(ctx), np.zeros_like(ctx), ones, ctx), np.float64),
            ctx.shape,
        )
        np.add.at(total, owner, dec)
    est[idx] = np.maximum(total[idx], 0.0)
    return est


ThinkTime = float | np.ndarray | Callable[[pd.DataFrame], Any] | None


def think_times(
    wl: Workload,
    links: SessionLinks,
    cost: Any,
    think_time: ThinkTime = None,
    *,
    max_batched_tokens: int = 8192,
    chunked_prefill: bool = True,
) -> np.ndarray:
    """Think time (ms) before each later turn is sent; NaN for first turns.

    Parameters
    ----------
    wl : Workload
    links : SessionLinks
        From :func:`session_links`.
    cost : cost model
        Prices the idle service estimate of the default rule.
    think_time : None, float, array or callable, default None
        None: ``max(0, recorded gap - idle_service_ms(parent))`` (the
        parent's cached prefix is what it shares with its own parent).
        A number: that many ms after every answer. An array with one value
        per request (first turns' values unused). A callable receives a
        frame with one row per later turn (``request_id``, ``parent``,
        ``session_id``, ``turn``, ``recorded_gap_ms``,
        ``service_estimate_ms``) and returns one think time per row.
    max_batched_tokens, chunked_prefill
        The fleet's scheduler settings (for the estimate).

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValueError
        On a think time that is negative, not finite, or of the wrong length.

    Examples
    --------
    Turn 2 was recorded 100 ms after turn 1, which takes 16.8 ms alone:

    >>> from inferasim.sim.cost import LinearCostModel
    >>> wl = Workload.from_requests([0, 100], [32, 48], [3, 1], session_id=[7, 7], block_size=16)
    >>> links = session_links(wl)
    >>> think_times(wl, links, LinearCostModel()).round(6).tolist()
    [nan, 83.2]
    >>> think_times(wl, links, LinearCostModel(), 5.0).tolist()
    [nan, 5.0]
    """
    n = len(wl)
    parent = links.parent
    later = np.flatnonzero(parent >= 0)
    out = np.full(n, np.nan)
    if not later.size:
        return out
    arrival = wl.arrival_ms.astype(np.float64)
    gap = arrival[later] - arrival[parent[later]]
    if think_time is None or callable(think_time):
        par = np.unique(parent[later])
        est = idle_service_ms(
            wl,
            cost,
            cached_blocks=_cached_blocks(wl, parent),
            max_batched_tokens=max_batched_tokens,
            chunked_prefill=chunked_prefill,
            which=par,
        )[parent[later]]
    if think_time is None:
        out[later] = np.maximum(gap - est, 0.0)
        return out
    if callable(think_time):
        frame = pd.DataFrame(
            {
                "request_id": later,
                "parent": parent[later],
                "session_id": links.session_id[later],
                "turn": links.turn[later],
                "recorded_gap_ms": gap,
                "service_estimate_ms": est,
            }
        )
        values = np.asarray(think_time(frame), dtype=np.float64).ravel()
        if values.shape != (later.size,):
            raise ValueError(
                f"think_time callable returned {values.size} values for {later.size} later turns"
            )
        what = "think_time callable"
    elif isinstance(think_time, numbers.Real) and not isinstance(think_time, bool):
        values = np.full(later.size, float(think_time))
        what = "think_time"
    else:
        arr = np.asarray(think_time, dtype=np.float64)
        if arr.shape != (n,):
            raise ValueError(
                f"think_time must be None, a number of ms, one value per request ({n}) or a "
                f"callable, got shape {arr.shape}"
            )
        values = arr[later]
        what = "think_time array"
    bad = np.flatnonzero(~(np.isfinite(values) & (values >= 0) & (values <= MAX_TIME_MS)))
    if bad.size:
        raise ValueError(
            f"{what}: the think time of request {int(later[bad[0]])} is {float(values[bad[0]])!r}; "
            "it must be a finite number of ms >= 0 and <= 2**43"
        )
    out[later] = values
    return out
