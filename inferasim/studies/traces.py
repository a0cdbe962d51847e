"""Studies of a trace's structure: what reuse it holds, before any cache.

Each function takes one workload or a mapping ``{name: workload}`` and
returns a tidy frame with a ``trace`` column: one row per trace
(:func:`overview`), per request (:func:`requests`), per block reference
(:func:`reuse_distances`), per distinct block (:func:`block_popularity`) or
per statistic (:func:`structure_stats`).

Examples
--------
>>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
>>> overview({"t": wl})[["trace", "requests", "ceiling_token_hit_ratio"]]
  trace  requests  ceiling_token_hit_ratio
0     t         3                      0.5
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from inferasim import _ragged, reuse
from inferasim.studies._run import named
from inferasim.studies.settings import REQUIRED_TRACES, TRACE_NAMES
from inferasim.workload import Workload

__all__ = [
    "load_traces",
    "overview",
    "requests",
    "reuse_distances",
    "block_popularity",
    "structure_stats",
    "cached_prefix_tokens",
]

Workloads = Workload | Mapping[str, Workload]


def _trace_path(name: str, traces_dir: str | os.PathLike[str] | None) -> Path | None:
    from inferasim.workload.traces import TRACES, find_trace

    if traces_dir is not None:
        path = Path(traces_dir) / TRACES[name].filename
        if path.is_file():
            return path
        if name in REQUIRED_TRACES:
            info = TRACES[name]
            raise FileNotFoundError(
                f"trace {name!r} ({info.filename}) is not in {Path(traces_dir)}; download "
                f"{info.url} into it"
            )
        return None
    try:
        # Required traces may be downloaded; the tool-and-agent one is used
        # only when it is already on disk.
        return find_trace(name, download=name in REQUIRED_TRACES)
    except FileNotFoundError:
        if name in REQUIRED_TRACES:
            raise
        return None


def load_traces(
    traces_dir: str | os.PathLike[str] | None = None, names: Iterable[str] = TRACE_NAMES
) -> dict[str, Workload]:
    """Load the FAST'25 traces that are present, by name.

    Parameters
    ----------
    traces_dir : path, optional
        Folder holding ``<name>_trace.jsonl``; by default
        :func:`inferasim.workload.traces.find_trace` searches
        ``$INFERASIM_TRACE_DIR``, ``./traces``, ``../shared/traces`` and the
        user cache.
    names : iterable of str
        Traces to load. ``conversation`` and ``synthetic`` must exist;
        ``toolagent`` is loaded only when it is on disk.

    Returns
    -------
    dict of str to Workload

    Raises
    ------
    FileNotFoundError
        When a required trace is missing, naming it.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as empty:  # toolagent is optional: absent, left out
    ...     load_traces(empty, names=["toolagent"])
    {}
    >>> load_traces(names=["conversation"])  # doctest: +SKIP
    {'conversation': Workload from conversation_trace.jsonl: 12,031 requests, ...}
    """
    out: dict[str, Workload] = {}
    for name in names:
        path = _trace_path(name, traces_dir)
        if path is not None:
            out[name] = Workload.from_mooncake(path)
    return out


def overview(workloads: Workloads) -> pd.DataFrame:
    """One row per trace: size, duration, rate and the infinite-cache hit ratios.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``requests``, ``duration_min``, ``rate_rps``,
        ``prompt_tokens``, ``unique_tokens`` (tokens of distinct blocks),
        ``ceiling_block_hit_ratio``, ``ceiling_token_hit_ratio`` (what an
        infinite cache serves, :func:`inferasim.reuse.infinite_hit_ratio`).

    Examples
    --------
    r0 [1,2], r1 [1,3], r2 [1,2], 1024 tokens each: r1 hits block 1 and r2
    blocks 1, 2, so 3 of 6 blocks and 1536 of 3072 tokens hit; the distinct
    blocks 1, 2, 3 hold 1536 tokens.

    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [4] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> overview(wl)[["prompt_tokens", "unique_tokens", "ceiling_block_hit_ratio"]]
       prompt_tokens  unique_tokens  ceiling_block_hit_ratio
    0           3072           1536                      0.5
    """
    rows = []
    for name, wl in named(workloads).items():
        ceiling = reuse.infinite_hit_ratio(wl)
        tokens = wl.block_tokens()
        _, first = np.unique(wl.hash_ids, return_index=True)
        duration = float(wl.arrival_ms[-1] - wl.arrival_ms[0]) if len(wl) else 0.0
        rows.append(
            {
                "trace": name,
                "requests": len(wl),
                "duration_min": duration / 60_000,
                "rate_rps": len(wl) * 1000 / duration if duration > 0 else float("nan"),
                "prompt_tokens": int(wl.input_len.sum()),
                "unique_tokens": int(tokens[first].sum()),
                "ceiling_block_hit_ratio": float(ceiling.block_hit_ratio),
                "ceiling_token_hit_ratio": float(ceiling.token_hit_ratio),
            }
        )
    return pd.DataFrame(rows)


def cached_prefix_tokens(wl: Workload) -> np.ndarray:
    """Prompt tokens of each request an infinite prefix cache would serve.

    The leading run of the request's blocks that appeared in any earlier
    request (in arrival order), counted in tokens.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1], [1024, 1000], [1, 1], [[1, 2], [1, 3]])
    >>> cached_prefix_tokens(wl).tolist()
    [0, 512]
    """
    hits = _ragged.leading_run(_ragged.first_seen_earlier(wl.hash_ids, wl.offsets), wl.offsets)
    tokens = wl.block_tokens()
    rows = _ragged.row_of(wl.offsets)
    return np.bincount(rows[hits], weights=tokens[hits], minlength=len(wl)).astype(np.int64)


def requests(workloads: Workloads) -> pd.DataFrame:
    """One row per request of every trace: lengths, arrival, reusable prefix, conversation turn.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``request_id``, ``arrival_ms``, ``input_len`` and
        ``output_len`` (tokens), ``reusable_tokens`` (what an infinite
        prefix cache serves, :func:`cached_prefix_tokens`; NaN, like the
        other reuse columns, for a workload without hash ids),
        ``reusable_share`` (of the prompt), and the inferred conversation
        chain of :func:`inferasim.reuse.sessions`: ``session``, ``turn``,
        ``gap_ms`` (since the previous turn; NaN for a first turn),
        ``growth_tokens`` (prompt tokens added since the previous turn).

    Examples
    --------
    Request 1 extends request 0 (a second turn 1 s later) and reuses its
    two blocks: 1024 of 2048 tokens.

    >>> wl = Workload.from_requests([0, 1000], [1024, 2048], [1, 1], [[1, 2], [1, 2, 3, 4]])
    >>> requests(wl)[["request_id", "reusable_tokens", "reusable_share", "turn", "gap_ms"]]
       request_id  reusable_tokens  reusable_share  turn  gap_ms
    0           0              0.0             0.0     1     NaN
    1           1           1024.0             0.5     2  1000.0
    """
    frames = []
    for name, wl in named(workloads).items():
        if wl.has_hash_ids:
            cached = cached_prefix_tokens(wl).astype(float)
            chains = reuse.sessions(wl).requests
        else:  # lengths and arrivals only: the reuse columns are NaN
            cached = np.full(len(wl), np.nan)
            chains = pd.DataFrame(
                {"session": np.arange(len(wl)), "turn": 1, "gap_ms": np.nan},
                index=np.arange(len(wl)),
            ).assign(growth_tokens=np.nan)
        frames.append(
            pd.DataFrame(
                {
                    "trace": name,
                    "request_id": np.arange(len(wl)),
                    "arrival_ms": wl.arrival_ms,
                    "input_len": wl.input_len,
                    "output_len": wl.output_len,
                    "reusable_tokens": cached,
                    "reusable_share": cached / np.maximum(wl.input_len, 1),
                    "session": chains["session"].to_numpy(),
                    "turn": chains["turn"].to_numpy(),
                    "gap_ms": chains["gap_ms"].to_numpy(dtype=float),
                    "growth_tokens": chains["growth_tokens"].to_numpy(dtype=float),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def reuse_distances(workloads: Workloads) -> pd.DataFrame:
    """One row per block reference: how much other traffic since the block's last use.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``request_id``, ``position`` (block index in the prompt),
        ``stack_distance_tokens`` (LRU stack distance of
        :func:`inferasim.reuse.reuse_distance` times ``block_size``: an LRU
        cache of at least this many tokens still holds the block; ``inf``
        for a first use) and ``time_since_ms`` (NaN for a first use).

    Examples
    --------
    Blocks 1, 2, 1: the third reference finds block 1 under block 2, at
    stack distance 2 blocks (1024 tokens), 2 ms after its first use.

    >>> wl = Workload.from_requests([0, 1, 2], [512] * 3, [1] * 3, [[1], [2], [1]])
    >>> reuse_distances(wl)[["request_id", "stack_distance_tokens", "time_since_ms"]]
       request_id  stack_distance_tokens  time_since_ms
    0           0                    inf            NaN
    1           1                    inf            NaN
    2           2                 1024.0            2.0
    """
    frames = []
    for name, wl in named(workloads).items():
        rows = _ragged.row_of(wl.offsets)
        n = wl.hash_ids.size
        dist = np.full(n, np.inf)
        since = np.full(n, np.nan)
        frame = reuse.reuse_distance(wl)
        flat = wl.offsets[frame["request_id"].to_numpy()] + frame["position"].to_numpy()
        dist[flat] = frame["stack_distance"].to_numpy(dtype=float) * wl.block_size
        since[flat] = frame["time_since_ms"].to_numpy(dtype=float)
        frames.append(
            pd.DataFrame(
                {
                    "trace": name,
                    "request_id": rows,
                    "position": np.arange(n) - wl.offsets[rows],
                    "stack_distance_tokens": dist,
                    "time_since_ms": since,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def block_popularity(workloads: Workloads) -> pd.DataFrame:
    """One row per distinct block: how many requests reference it, by popularity rank.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``rank`` (1 = most popular), ``hash_id``, ``requests``,
        from :func:`inferasim.reuse.popularity`.

    Examples
    --------
    >>> wl = Workload.from_requests([0, 1, 2], [1024] * 3, [1] * 3, [[1, 2], [1, 3], [1, 2]])
    >>> block_popularity(wl)[["rank", "hash_id", "requests"]].values.tolist()
    [[1, 1, 3], [2, 2, 2], [3, 3, 1]]
    """
    frames = []
    for name, wl in named(workloads).items():
        blocks = reuse.popularity(wl).blocks[["rank", "hash_id", "requests"]]
        frames.append(blocks.assign(trace=name)[["trace", "rank", "hash_id", "requests"]])
    return pd.concat(frames, ignore_index=True)


def structure_stats(workloads: Workloads) -> pd.DataFrame:
    """Prefix-tree and multi-turn statistics, one row per (trace, statistic).

    Statistics: ``requests reusing more than one block`` (share), ``mean
    reused share of a prompt``, ``multi-turn sessions`` (chains of two turns
    or more, :func:`inferasim.reuse.sessions`), ``requests in multi-turn
    sessions`` (share), ``mean turns per multi-turn session``, ``median gap
    between turns (s)``, ``distinct first blocks``, ``radix nodes``,
    ``shared prefixes`` (radix nodes on two requests' paths or more,
    :func:`inferasim.reuse.prefix_tree`) and ``mean leaf depth (tokens)``.

    Returns
    -------
    pandas.DataFrame
        ``trace``, ``statistic``, ``value``.

    Examples
    --------
    Request 1 continues request 0 two seconds later; request 2 is alone.

    >>> wl = Workload.from_requests([0, 2000, 5000], [1024, 2048, 512], [1] * 3,
    ...                             [[1, 2], [1, 2, 3, 4], [9]])
    >>> s = structure_stats(wl).set_index("statistic")["value"]
    >>> s[["multi-turn sessions", "median gap between turns (s)", "distinct first blocks"]].tolist()
    [1.0, 2.0, 2.0]
    """
    rows = []
    for name, wl in named(workloads).items():
        cached = cached_prefix_tokens(wl)
        chains = reuse.sessions(wl)
        multi = chains.sessions[chains.sessions["turns"] >= 2]
        gaps = chains.requests["gap_ms"].dropna()
        tree = reuse.prefix_tree(wl).summary()
        stats = {
            "requests reusing more than one block": float((cached > wl.block_size).mean()),
            "mean reused share of a prompt": float((cached / np.maximum(wl.input_len, 1)).mean()),
            "multi-turn sessions": float(len(multi)),
            "requests in multi-turn sessions": float(multi["turns"].sum() / max(len(wl), 1)),
            "mean turns per multi-turn session": float(multi["turns"].mean())
            if len(multi)
            else 0.0,
            "median gap between turns (s)": float(gaps.median() / 1000.0)
            if len(gaps)
            else float("nan"),
            "distinct first blocks": float(tree["root_children"]),
            "radix nodes": float(tree["nodes"]),
            "shared prefixes": float(tree["shared_nodes"]),
            "mean leaf depth (tokens)": float(tree["mean_leaf_depth_blocks"] * wl.block_size),
        }
        rows += [{"trace": name, "statistic": k, "value": v} for k, v in stats.items()]
    return pd.DataFrame(rows)
