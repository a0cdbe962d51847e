"""Seeded synthetic workloads: arrivals, length spread and prefix pools.

Everything is generated vectorised (no Python loop per request), so a
million requests take about a second.
"""

from __future__ import annotations

import numpy as np

from inferasim import _ragged
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
        Same seed, same workload.

    Returns
    -------
    Columns
        In arrival order, with a ``prefix_id`` column (0-based rank, most popular first) when
        ``num_prefixes > 0``. Reuse exists only through shared block ids.

    Examples
    --------
    >>> cols = generate(4, rate=2.0, arrival="deterministic", input_len=1024, output_len=8,
    ...                 num_prefixes=1, prefix_len=1024, block_size=512)
    >>> cols.arrival_ms
    array([   0.,  500., 1000., 1500.])
    >>> cols.input_len, cols.hash_id_lists()[:2]
    (array([2048, 2048, 2048, 2048]), [[0, 1, 2, 3], [0, 1, 4, 5]])
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
    mean_gap = 1000.0 / rate
    _check(
        n < 2 or mean_gap * (n - 1) <= MAX_ARRIVAL_SPAN_MS / 4,
        f"rate={rate!r} requests/s spreads {n} requests over about {mean_gap * max(n - 1, 0):.3g} ms, "
        "beyond the 2**43 ms (about 278 years) a workload may span; raise the rate",
    )
    longest = (input_len + prefix_len) * (1 + range_ratio) + 1
    _check(
        n * (longest // block_size + 1) <= MAX_HASH_IDS,
        f"{n} requests of up to {int(longest)} tokens in blocks of {block_size} need up to "
        f"{n * (int(longest) // block_size + 1):,} hash ids, more than the {MAX_HASH_IDS:,} "
        "(2 GiB) limit; use fewer requests, shorter prompts or a larger block_size",
    )

    rng = np.random.default_rng(seed)
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
