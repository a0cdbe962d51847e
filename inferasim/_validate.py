"""Checks of user-given numbers: one rule each, one message naming the parameter.

Every entry point (constructors, ``Simulator.run``, ``summary``, ``sweep``,
``plan``, widgets, the command line) checks its numbers with these
functions, so the same value gets the same answer everywhere:

* :func:`real` -- a finite real number (never a bool) within bounds;
* :func:`integer` -- an integer (never a bool, never a float) within bounds;
* :func:`duration_ms`, :func:`duration_us` -- a time a parameter makes the
  simulator wait: finite, ``>= 0`` (or ``> 0``), at most :data:`MAX_TIME_MS`;
* :func:`bandwidth_gbps` -- a link bandwidth, at least :data:`MIN_GBPS`;
* :func:`transfer_ms` -- the time a bandwidth and a latency give a byte
  count, checked against :data:`MAX_TIME_MS`;
* :func:`rate` -- a positive finite rate (requests a second, ...);
* :func:`slo_ms` -- a latency objective: None, or ``0 < v <= MAX_TIME_MS``;
* :func:`percentile` -- in ``(0, 100]``;
* :func:`seed` -- a random seed: an integer in ``[0, 2**64)``;
* :func:`choice` -- one of a fixed set of names (a string, never coerced);
* :func:`total_ms` -- a sum of durations (a run's worst case) within the limit.

The name passed in is the parameter's public name (``"slo_ttft_ms"``,
``"--slo-ttft-ms"``, ``"Tier 'dram': read_gbps"``): it starts the message.
Every error is a :class:`ValueError`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = [
    "MAX_TIME_MS",
    "MIN_GBPS",
    "real",
    "integer",
    "duration_ms",
    "duration_us",
    "bandwidth_gbps",
    "transfer_ms",
    "rate",
    "slo_ms",
    "percentile",
    "seed",
    "choice",
    "total_ms",
]

#: Times a run produces stay within this many ms (2**43 ms, about 278 years):
#: float64 ms keep microsecond resolution there. Every duration a parameter
#: gives (a latency, a transfer, a think time, an objective) is at most this.
MAX_TIME_MS = float(2**43)

#: The smallest bandwidth a link may have, in GB/s (1 byte a second): below
#: it one byte alone takes longer than a second, and a subnormal bandwidth
#: would turn a transfer time into inf.
MIN_GBPS = 1e-9


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def real(
    value: Any,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float within ``[low, high]`` (open ends by flag).

    Parameters
    ----------
    value : object
        The user's value. Bools, strings, None, NaN and infinities are refused.
    name : str
        The parameter's public name, at the start of the message.
    low, high : float
        Bounds, closed unless ``low_open`` / ``high_open``.

    Returns
    -------
    float

    Examples
    --------
    >>> real(2, "scale", low=0, low_open=True)
    2.0
    >>> real(True, "scale")
    Traceback (most recent call last):
    ...
    ValueError: scale must be a finite number, got True
    >>> real(float("nan"), "scale", low=0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: scale must be a finite number > 0, got nan
    """
    bound = _bound_text(low, high, low_open, high_open)
    if not _is_real(value):
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    v = float(value)
    ok = math.isfinite(v)
    ok = ok and (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return v


def _bound_text(low: float, high: float, low_open: bool, high_open: bool) -> str:
    parts = []
    if low > -math.inf:
        parts.append(f"{'>' if low_open else '>='} {_num(low)}")
    if high < math.inf:
        parts.append(f"{'<' if high_open else '<='} {_num(high)}")
    return (" " + " and ".join(parts)) if parts else ""


def _num(x: float) -> str:
    """A bound as a reader wants it: ``2**43`` for the time limit, else ``%g``."""
    if x == MAX_TIME_MS:
        return "2**43"
    if x == MAX_TIME_MS * 1000:
        return "2**43 * 1000"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:g}"


def integer(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int within ``[low, high]`` (numpy integers accepted; bools
    and floats, even whole ones, refused).

    Examples
    --------
    >>> integer(3, "replicas", low=1)
    3
    >>> integer(2.0, "replicas", low=1)
    Traceback (most recent call last):
    ...
    ValueError: replicas must be an integer >= 1, got 2.0
    """
    parts = []
    if low is not None:
        parts.append(f">= {low}")
    if high is not None:
        parts.append(f"<= {_num(high)}")
    bound = (" " + " and ".join(parts)) if parts else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer{bound}, got {value!r}")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer{bound}, got {value!r}")
    return v


def duration_ms(
    value: Any, name: str, *, positive: bool = False, high: float = MAX_TIME_MS
) -> float:
    """A time in ms a parameter gives: finite, ``>= 0`` (``> 0`` when
    ``positive``), at most ``high`` (default :data:`MAX_TIME_MS`).

    Examples
    --------
    >>> duration_ms(5, "think_time")
    5.0
    >>> duration_ms(1e300, "think_time")
    Traceback (most recent call last):
    ...
    ValueError: think_time must be a finite number >= 0 and <= 2**43 (ms), got 1e+300
    """
    try:
        return real(value, name, low=0.0, high=high, low_open=positive)
    except ValueError as e:
        raise ValueError(_with_unit(str(e), "ms")) from None


def duration_us(value: Any, name: str, *, positive: bool = False) -> float:
    """A time in microseconds a parameter gives: as :func:`duration_ms`, at most
    ``MAX_TIME_MS * 1000`` µs.

    Examples
    --------
    >>> duration_us(5.0, "handoff_latency_us")
    5.0
    >>> duration_us(1e300, "Tier 'dram': latency_us")
    Traceback (most recent call last):
    ...
    ValueError: Tier 'dram': latency_us must be a finite number >= 0 and <= 2**43 * 1000 (µs), got 1e+300
    """
    try:
        return real(value, name, low=0.0, high=MAX_TIME_MS * 1000, low_open=positive)
    except ValueError as e:
        raise ValueError(_with_unit(str(e), "µs")) from None


def _with_unit(message: str, unit: str) -> str:
    head, sep, tail = message.rpartition(", got ")
    return f"{head} ({unit}){sep}{tail}"


def bandwidth_gbps(value: Any, name: str) -> float:
    """A link bandwidth in GB/s: finite and at least :data:`MIN_GBPS` (1 byte/s).

    Examples
    --------
    >>> bandwidth_gbps(50, "handoff_gbps")
    50.0
    >>> bandwidth_gbps(1e-300, "Tier 'dram': read_gbps")
    Traceback (most recent call last):
    ...
    ValueError: Tier 'dram': read_gbps must be a finite number >= 1e-09 (GB/s, 1 byte a second at least), got 1e-300
    """
    try:
        return real(value, name, low=MIN_GBPS)
    except ValueError as e:
        raise ValueError(_with_unit(str(e), "GB/s, 1 byte a second at least")) from None


def transfer_ms(num_bytes: float, gbps: float, latency_us: float, name: str, what: str) -> float:
    """Milliseconds to move ``num_bytes`` over a link of ``gbps`` GB/s with
    ``latency_us`` µs per transfer; a ValueError naming the link when beyond
    :data:`MAX_TIME_MS`.

    Parameters
    ----------
    num_bytes : float
        Bytes moved (the largest transfer a run can make, or all of them).
    gbps, latency_us : float
        The link, already checked by :func:`bandwidth_gbps` and :func:`duration_us`.
    name : str
        The link's public parameters, e.g. ``"Tier 'dram': read_gbps / latency_us"``.
    what : str
        What the bytes are, for the message.

    Examples
    --------
    >>> transfer_ms(1e9, 1.0, 1000.0, "handoff_gbps / handoff_latency_us", "one request's KV")
    1001.0
    >>> transfer_ms(1e10, 1e-9, 0.0, "handoff_gbps", "one request's KV (1e10 bytes)")
    Traceback (most recent call last):
    ...
    ValueError: handoff_gbps: moving one request's KV (1e10 bytes) takes 1e+13 ms, beyond the 2**43 ms (~278 years) a run's times stay within
    """
    ms = float(num_bytes) / (float(gbps) * 1e6) + float(latency_us) / 1000.0
    if not ms <= MAX_TIME_MS:
        raise ValueError(
            f"{name}: moving {what} takes {ms:.3g} ms, beyond the 2**43 ms (~278 years) "
            "a run's times stay within"
        )
    return ms


def total_ms(value: float, name: str, what: str) -> float:
    """A run's worst-case sum of durations ``value`` (ms), checked against
    :data:`MAX_TIME_MS`; the message names the parameter and says what was summed.

    Examples
    --------
    >>> total_ms(10.0, "think_time", "the think times of one session")
    10.0
    >>> total_ms(2.0**44, "think_time", "the think times of session 3")
    Traceback (most recent call last):
    ...
    ValueError: think_time: the think times of session 3 sum to 1.76e+13 ms, beyond the 2**43 ms (~278 years) a run's times stay within
    """
    v = float(value)
    if not v <= MAX_TIME_MS:
        raise ValueError(
            f"{name}: {what} sum to {v:.3g} ms, beyond the 2**43 ms (~278 years) "
            "a run's times stay within"
        )
    return v


def rate(value: Any, name: str) -> float:
    """A rate (requests a second, a load multiplier, a scale): finite and > 0.

    Examples
    --------
    >>> rate(20, "rate")
    20.0
    >>> rate(float("inf"), "rate")
    Traceback (most recent call last):
    ...
    ValueError: rate must be a finite number > 0, got inf
    """
    return real(value, name, low=0.0, low_open=True)


def slo_ms(value: Any, name: str, *, optional: bool = True) -> float | None:
    """A latency objective in ms: None (no objective) when ``optional``, else a
    finite number with ``0 < value <= MAX_TIME_MS``. Bools are refused (``True``
    is not 1 ms).

    Examples
    --------
    >>> slo_ms(None, "slo_ttft_ms") is None
    True
    >>> slo_ms(200, "slo_ttft_ms")
    200.0
    >>> slo_ms(True, "slo_ttft_ms")
    Traceback (most recent call last):
    ...
    ValueError: slo_ttft_ms must be None or a finite number > 0 and <= 2**43 (ms), got True
    >>> slo_ms(-5, "--slo-ttft-ms", optional=False)
    Traceback (most recent call last):
    ...
    ValueError: --slo-ttft-ms must be a finite number > 0 and <= 2**43 (ms), got -5
    """
    if value is None and optional:
        return None
    try:
        return real(value, name, low=0.0, high=MAX_TIME_MS, low_open=True)
    except ValueError as e:
        msg = _with_unit(str(e), "ms")
        if optional:
            msg = msg.replace(f"{name} must be a", f"{name} must be None or a", 1)
        raise ValueError(msg) from None


def percentile(value: Any, name: str = "percentile") -> float:
    """A percentile in ``(0, 100]``.

    Examples
    --------
    >>> percentile(99)
    99.0
    >>> percentile(0)
    Traceback (most recent call last):
    ...
    ValueError: percentile must be a finite number > 0 and <= 100, got 0
    """
    return real(value, name, low=0.0, high=100.0, low_open=True)


def seed(value: Any, name: str = "seed", *, optional: bool = False) -> int | None:
    """A random seed: an integer in ``[0, 2**64)`` (None too when ``optional``).

    Examples
    --------
    >>> seed(7)
    7
    >>> seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer >= 0 and < 2**64, got -1
    >>> seed("7")
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer >= 0 and < 2**64, got '7'
    """
    if value is None and optional:
        return None
    alt = "None or " if optional else ""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not 0 <= int(value) < 2**64
    ):
        raise ValueError(f"{name} must be {alt}an integer >= 0 and < 2**64, got {value!r}")
    return int(value)


def choice(value: Any, name: str, options: Any) -> str:
    """``value`` if it is one of the strings ``options`` (no coercion, no other type).

    Parameters
    ----------
    value : object
        The user's value.
    name : str
        The parameter's public name, at the start of the message.
    options : iterable of str
        The accepted names, in the order the message lists them.

    Returns
    -------
    str

    Examples
    --------
    >>> choice("lmcache", "system", ("custom", "lmcache"))
    'lmcache'
    >>> choice(["lmcache"], "system", ("custom", "lmcache"))
    Traceback (most recent call last):
    ...
    ValueError: system must be one of ['custom', 'lmcache'], got ['lmcache']
    """
    names = list(options)
    if not isinstance(value, str) or value not in names:
        raise ValueError(f"{name} must be one of {names}, got {value!r}")
    return value
