"""Seeded synthetic workloads: arrivals, length spread and prefix pools.

Everything is generated vectorised (no Python loop per request), so a
million requests take about a second.
"""

from __future__ import annotations

import numpy as np

from inferasim import _ragged
from inferasim._validate import seed as check_seed
from inferasim.workload._columns import Columns
from inferasim.workload._parse import MAX_ARRIVAL_SPAN_MS

__all__ = ["generate", "ARRIVALS", "MAX_TOKENS", "MAX_PREFIXES", "MAX_HASH_IDS"]

ARRIVALS = ("poisson", "deterministic", "gamma")


#: Largest token length a generator accepts (2**40, about 10**12 tokens).
MAX_TOKENS = 2**40
#: Largest prefix pool: its popularity table is tabulated (8 bytes a prefix).
MAX_PREFIXES = 2**20
#: Most hash ids one generated workload may hold (8 bytes each: 2 GiB).
MAX_HASH_IDS = 2**28


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _whole(name: str, value: object, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]``, or a ValueError naming the parameter."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        ok = True
    if not ok or not low <= value <= high:  # type: ignore[operator]
        raise ValueError(f"{name} must be a whole number in [{low}, {high}], got {value!r}")
    return int(value)  # type: ignore[arg-type]


def _real(name: str, value: object, low: float, *, strict: bool) -> float:
    """``value`` as a finite float ``> low`` (``>= low`` when not strict), or a ValueError naming it."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or (value <= low if strict else value < low):  # type: ignore[operator]
        bound = f"> {low:g}" if strict else f">= {low:g}"
        raise ValueError(f"{name} must be {bound} (a finite number), got {value!r}")
    return float(value)  # type: ignore[arg-type]


def _arrivals(rng: np.random.Generator, n: int, rate: float, arrival: str, burstiness: float) -> np.ndarray:
    mean_gap = 1000.0 / rate
    if n == 0:
        return np.zeros(0)
    if arrival == "deterministic":
        gaps = np.full(n - 1, mean_gap)
    elif arrival == "poisson":
        gaps = rng.exponential(mean_gap, size=n - 1)
    else:  # gamma with shape = burstiness keeps the mean gap at 1000 / rate
        gaps = rng.gamma(burstiness, mean_gap / burstiness, size=n - 1)
    return np.concatenate(([0.0], np.cumsum(gaps)))


def _lengths(rng: np.random.Generator, n: int, mean: int, range_ratio: float) -> np.ndarray:
    if range_ratio == 0:
        return np.full(n, mean, dtype=np.int64)
    low = max(int(round(mean * (1 - range_ratio))), 1)
    high = max(int(round(mean * (1 + range_ratio))), low)
    return rng.integers(low, high + 1, size=n, dtype=np.int64)


def _prefix_choice(rng: np.random.Generator, n: int, num_prefixes: int, zipf: float) -> np.ndarray:
    ranks = np.arange(1, num_prefixes + 1, dtype=np.float64)
    weights = ranks**-zipf
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64)


def generate(
    num_requests: int,
    rate: float,
    *,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    input_len: int = 1024,
    output_len: int = 128,
    range_ratio: float = 0.0,
    num_prefixes: int = 0,
    prefix_len: int = 0,
    prefix_zipf: float = 0.0,
    block_size: int = 512,
    seed: int = 0,
    num_turns: int = 1,
    think_time_ms: float = 0.0,
) -> Columns:
    """Generate a seeded synthetic workload's columns.

    :meth:`Workload.from_synthetic <inferasim.Workload.from_synthetic>`
    builds the workload from them.

    Parameters
    ----------
    num_requests : int
        Requests to generate.
    rate : float
        Mean arrival rate in requests per second.
    arrival : {"poisson", "deterministic", "gamma"}, default "poisson"
        Inter-arrival law: exponential, constant ``1000 / rate`` ms, or gamma
        with shape ``burstiness`` and the same mean (shape 1 is Poisson,
        lower is burstier: the coefficient of variation is
        ``1 / sqrt(burstiness)``). The first request arrives at 0 ms.
    burstiness : float, default 1.0
        Gamma shape; only used with ``arrival="gamma"``.
    input_len : int, default 1024
        Mean length (tokens) of each prompt's own part. With a prefix pool
        the prompt is ``prefix_len`` shared tokens followed by this part, so
        the ``input_len`` column holds ``prefix_len + own part`` (as vLLM's
        random dataset with a prefix does).
    output_len : int, default 128
        Mean generated length (tokens).
    range_ratio : float, default 0.0
        Spread of both lengths: each is drawn uniformly from the integers in
        ``[round((1 - r) * len), round((1 + r) * len)]`` (at least 1), a
        symmetric spread that keeps the mean; 0 gives fixed lengths.
    num_prefixes : int, default 0
        Size of the shared-prefix pool; 0 gives no pool (no reuse at all).
    prefix_len : int, default 0
        Tokens of each pooled prefix. Its first ``prefix_len // block_size``
        blocks carry the prefix's ids; a partial prefix block mixes in the
        request's own tokens, so it gets a fresh id.
    prefix_zipf : float, default 0.0
        Popularity of the pool: prefix ``k`` (1-based rank) is drawn with
        probability proportional to ``k ** -prefix_zipf`` (0 is uniform).
    block_size : int, default 512
        Tokens per hash id.
    seed : int, default 0
        Same seed, same workload; an integer in ``[0, 2**64)``.
    num_turns : int, default 1
        Turns per session (multi-turn conversations when > 1; the last
        session is cut when ``num_requests`` is not a multiple). Turn ``k+1``
        of a session sends turn ``k``'s prompt, its answer (``output_len``
        tokens) and a new message (drawn like the own part of
        ``input_len``), so its prompt grows turn by turn and its hash ids
        start with turn ``k``'s full blocks, as in the FAST'25 conversation
        trace. A pooled prefix is chosen once per session. Sessions start by
        the ``arrival`` law at ``rate / num_turns`` per second, so in steady
        state requests still arrive at ``rate`` (the first and last sessions
        ramp the rate up and down over one session's length).
    think_time_ms : float, default 0.0
        Mean gap (exponential) between a turn's arrival and the next turn's
        (open loop: a closed-loop replay would start the next turn after
        the answer).

    Returns
    -------
    Columns
        In arrival order, with a ``prefix_id`` column (0-based rank, most popular first) when
        ``num_prefixes > 0``, and ``session_id`` (0-based, by start) and
        ``turn`` (1-based) when ``num_turns > 1``. Reuse exists only through
        shared block ids.

    Examples
    --------
    >>> cols = generate(4, rate=2.0, arrival="deterministic", input_len=1024, output_len=8,
    ...                 num_prefixes=1, prefix_len=1024, block_size=512)
    >>> cols.arrival_ms
    array([   0.,  500., 1000., 1500.])
    >>> cols.input_len, cols.hash_id_lists()[:2]
    (array([2048, 2048, 2048, 2048]), [[0, 1, 2, 3], [0, 1, 4, 5]])

    Two turns: the second prompt holds the first (1024), its answer (8) and
    a new message (1024); its ids start with the first turn's 2 full blocks:

    >>> cols = generate(2, rate=1.0, num_turns=2, think_time_ms=1000, output_len=8)
    >>> cols.input_len.tolist(), cols.extra["turn"].tolist(), cols.hash_id_lists()
    ([1024, 2056], [1, 2], [[0, 1], [0, 1, 2, 3, 4]])
    """
    n = _whole("num_requests", num_requests, 0, 2**40)
    rate = _real("rate", rate, 0.0, strict=True)
    _check(arrival in ARRIVALS, f"arrival must be one of {ARRIVALS}, got {arrival!r}")
    burstiness = _real("burstiness", burstiness, 0.0, strict=True)
    input_len = _whole("input_len", input_len, 1, MAX_TOKENS)
    output_len = _whole("output_len", output_len, 1, MAX_TOKENS)
    _check(
        isinstance(range_ratio, (int, float, np.integer, np.floating)) and 0 <= range_ratio < 1,
        f"range_ratio must be in [0, 1), got {range_ratio!r}",
    )
    range_ratio = float(range_ratio)
    num_prefixes = _whole("num_prefixes", num_prefixes, 0, MAX_PREFIXES)
    prefix_len = _whole("prefix_len", prefix_len, 0, MAX_TOKENS)
    _check(num_prefixes == 0 or prefix_len > 0, "a prefix pool (num_prefixes > 0) needs prefix_len > 0")
    prefix_zipf = _real("prefix_zipf", prefix_zipf, 0.0, strict=False)
    block_size = _whole("block_size", block_size, 1, 2**40)
    num_turns = _whole("num_turns", num_turns, 1, 2**20)
    think_time_ms = _real("think_time_ms", think_time_ms, 0.0, strict=False)
    _check(
        think_time_ms * num_turns <= MAX_ARRIVAL_SPAN_MS / 4,
        f"think_time_ms={think_time_ms!r} over {num_turns} turns goes beyond the 2**43 ms a "
        "workload may span",
    )
    mean_gap = 1000.0 / rate
    _check(
        n < 2 or mean_gap * (n - 1) <= MAX_ARRIVAL_SPAN_MS / 4,
        f"rate={rate!r} requests/s spreads {n} requests over about {mean_gap * max(n - 1, 0):.3g} ms, "
        "beyond the 2**43 ms (about 278 years) a workload may span; raise the rate",
    )
    longest = (input_len + prefix_len) * (1 + range_ratio) + 1
    if num_turns > 1:
        longest = prefix_len + num_turns * (input_len + output_len) * (1 + range_ratio) + 1
    _check(
        n * (longest // block_size + 1) <= MAX_HASH_IDS,
        f"{n} requests of up to {int(longest)} tokens in blocks of {block_size} need up to "
        f"{n * (int(longest) // block_size + 1):,} hash ids, more than the {MAX_HASH_IDS:,} "
        "(2 GiB) limit; use fewer requests, shorter prompts or a larger block_size",
    )

    rng = np.random.default_rng(check_seed(seed, "seed"))
    if num_turns > 1:
        return _multi_turn(
            rng, n, float(rate), arrival, float(burstiness), int(input_len), int(output_len),
            range_ratio, int(num_prefixes), int(prefix_len), float(prefix_zipf), int(block_size),
            int(num_turns), float(think_time_ms),
        )
    arrival_ms = _arrivals(rng, n, float(rate), arrival, float(burstiness))
    own = _lengths(rng, n, int(input_len), float(range_ratio))
    out = _lengths(rng, n, int(output_len), float(range_ratio))
    columns: dict[str, np.ndarray] = {"input_len": own}

    prefix_blocks = int(prefix_len) // int(block_size) if num_prefixes else 0
    if num_prefixes:
        prefix_id = _prefix_choice(rng, n, int(num_prefixes), float(prefix_zipf))
        columns["input_len"] = own + int(prefix_len)
        columns["prefix_id"] = prefix_id
    total = columns["input_len"]
    lengths = -(-total // int(block_size))
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    pos = _ragged.position_in_row(offsets)
    ids = np.empty(int(offsets[-1]), dtype=np.int64)
    in_prefix = pos < prefix_blocks
    if prefix_blocks:
        owner = np.repeat(columns["prefix_id"], lengths)
        ids[in_prefix] = owner[in_prefix] * prefix_blocks + pos[in_prefix]
    fresh = ~in_prefix
    first_fresh = int(num_prefixes) * prefix_blocks
    ids[fresh] = first_fresh + np.arange(int(fresh.sum()), dtype=np.int64)
    extra = {"prefix_id": columns["prefix_id"]} if num_prefixes else {}
    return Columns(
        arrival_ms, total, out, ids, offsets, extra,
        block_size=int(block_size), source="synthetic", where="from_synthetic",
    )


def _multi_turn(
    rng: np.random.Generator,
    n: int,
    rate: float,
    arrival: str,
    burstiness: float,
    input_len: int,
    output_len: int,
    range_ratio: float,
    num_prefixes: int,
    prefix_len: int,
    prefix_zipf: float,
    block_size: int,
    num_turns: int,
    think_time_ms: float,
) -> Columns:
    """Sessions of ``num_turns`` turns whose prompts grow turn by turn (see :func:`generate`)."""
    t = num_turns
    s = -(-n // t) if n else 0
    starts = _arrivals(rng, s, rate / t, arrival, burstiness)
    think = rng.exponential(think_time_ms, size=(s, t - 1)) if think_time_ms > 0 else np.zeros((s, t - 1))
    offset = np.concatenate((np.zeros((s, 1)), np.cumsum(think, axis=1)), axis=1)
    own = _lengths(rng, s * t, input_len, range_ratio).reshape(s, t)
    out = _lengths(rng, s * t, output_len, range_ratio).reshape(s, t)
    prefix_id = _prefix_choice(rng, s, num_prefixes, prefix_zipf) if num_prefixes else None
    # prompt of turn k = prefix + own_1 + out_1 + ... + own_{k-1} + out_{k-1} + own_k
    grown = np.cumsum(own, axis=1) + np.concatenate(
        (np.zeros((s, 1), dtype=np.int64), np.cumsum(out[:, :-1], axis=1)), axis=1
    )
    total = (grown + (prefix_len if num_prefixes else 0)).astype(np.int64)
    blocks = -(-total // block_size)
    full = total // block_size
    prefix_blocks = prefix_len // block_size if num_prefixes else 0
    # ids turn by turn (vectorised over sessions): carried blocks, then fresh ones
    ids_by_turn: list[np.ndarray] = []
    offs_by_turn: list[np.ndarray] = []
    next_id = num_prefixes * prefix_blocks
    for k in range(t):
        lengths = blocks[:, k]
        offs = np.concatenate(([0], np.cumsum(lengths)))
        pos = _ragged.position_in_row(offs)
        row = _ragged.row_of(offs)
        ids = np.empty(int(offs[-1]), dtype=np.int64)
        if k == 0:
            carried = pos < prefix_blocks
            if prefix_blocks:
                ids[carried] = prefix_id[row[carried]] * prefix_blocks + pos[carried]
        else:
            carried = pos < full[row, k - 1]
            prev_ids, prev_offs = ids_by_turn[-1], offs_by_turn[-1]
            ids[carried] = prev_ids[prev_offs[row[carried]] + pos[carried]]
        fresh = ~carried
        ids[fresh] = next_id + np.arange(int(fresh.sum()), dtype=np.int64)
        next_id += int(fresh.sum())
        ids_by_turn.append(ids)
        offs_by_turn.append(offs)
    # requests session-major (turn 1..t of session 0, ...), cut to n, then by arrival
    sess = np.repeat(np.arange(s, dtype=np.int64), t)[:n]
    turn = np.tile(np.arange(1, t + 1, dtype=np.int64), s)[:n]
    arrival_ms = (starts[:, None] + offset).ravel()[:n]
    order = np.argsort(arrival_ms, kind="stable")
    sess, turn, arrival_ms = sess[order], turn[order], arrival_ms[order]
    lengths = blocks[sess, turn - 1]
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    pos = _ragged.position_in_row(offsets)
    src_turn = np.repeat(turn - 1, lengths)
    src_sess = np.repeat(sess, lengths)
    flat = np.concatenate(ids_by_turn) if ids_by_turn else np.zeros(0, np.int64)
    base = np.cumsum([0] + [a.size for a in ids_by_turn])[:-1]
    turn_offs = np.stack(offs_by_turn) if offs_by_turn else np.zeros((0, 1), np.int64)
    hash_ids = flat[base[src_turn] + turn_offs[src_turn, src_sess] + pos]
    extra: dict[str, np.ndarray] = {"session_id": sess, "turn": turn}
    if num_prefixes:
        extra = {"prefix_id": prefix_id[sess], **extra}
    return Columns(
        arrival_ms, total[sess, turn - 1], out[sess, turn - 1], hash_ids, offsets, extra,
        block_size=int(block_size), source="synthetic", where="from_synthetic",
    )
