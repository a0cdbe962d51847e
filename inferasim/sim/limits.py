"""The time limits of a run, checked where it starts and once at its end.

Every duration a parameter makes a run wait must keep the run's times
within the README's limits (float64 milliseconds keep microsecond
resolution below 2**43 ms):

* at the start (:func:`check_run_durations`): moving every request's KV
  once over each tier link and each handoff link (bytes / bandwidth + one
  latency per request), and each session's think times summed, end within
  :data:`~inferasim._validate.MAX_TIME_MS`; the error names the parameter;
* at the end (:func:`check_frame_times`): no time of the request frame lies
  beyond :data:`MAX_FRAME_MS` (arrivals within 2**43 ms of 0 plus a run's
  durations within 2**43 ms); a cost model whose step times add up beyond
  it is the one way left to get there, and the error says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from inferasim._validate import MAX_TIME_MS, total_ms, transfer_ms

__all__ = ["MAX_FRAME_MS", "check_run_durations", "check_frame_times"]

#: No time in a run's frames lies beyond this (2**44 ms): arrivals within
#: 2**43 ms of 0 plus the run's durations within 2**43 ms.
MAX_FRAME_MS = 2.0 * MAX_TIME_MS


def check_run_durations(
    input_len: np.ndarray,
    output_len: np.ndarray,
    kv_bytes_per_token: float,
    tiers: Sequence[Any] = (),
    handoff: tuple[float, float] | None = None,
    think: np.ndarray | None = None,
    session_id: np.ndarray | None = None,
) -> None:
    """Raise a ValueError naming the parameter whose durations pass 2**43 ms.

    Parameters
    ----------
    input_len, output_len : numpy.ndarray
        The workload's lengths (tokens).
    kv_bytes_per_token : float
        The cost model's KV bytes per token (0 when no link moves KV).
    tiers : sequence of Tier
        The KV tiers below HBM.
    handoff : (gbps, latency_us), optional
        A disaggregated fleet's handoff links.
    think : numpy.ndarray, optional
        Closed loop: each request's think time (NaN for first turns).
    session_id : numpy.ndarray, optional
        Closed loop: each request's session.

    Examples
    --------
    Two requests of 1,000 tokens at 1,000 bytes a token over a 1e-9 GB/s
    handoff link: 2e6 bytes at 1 byte a second take 2e9 ms (fine); at 1e9
    bytes a token, 2e12 s = 2e15 ms (beyond 2**43 = 8.8e12 ms):

    >>> lens = np.array([900, 900]), np.array([100, 100])
    >>> check_run_durations(*lens, 1000.0, handoff=(1e-9, 0.0))
    >>> check_run_durations(*lens, 1e9, handoff=(1e-9, 0.0))
    Traceback (most recent call last):
    ...
    ValueError: replicas.handoff_gbps: moving every request's KV once (2e+12 bytes in 2 transfers) takes 2e+15 ms, beyond the 2**43 ms (~278 years) a run's times stay within
    """
    n = int(input_len.size)
    if kv_bytes_per_token > 0 and n:
        tokens = float(np.sum(input_len, dtype=np.float64) + np.sum(output_len, dtype=np.float64))
        num_bytes = tokens * float(kv_bytes_per_token)
        what = f"every request's KV once ({num_bytes:.3g} bytes in {n} transfers)"
        for t in tiers:
            if t.capacity_tokens <= 0:
                continue
            for field in ("read_gbps", "write_gbps", "pool_gbps"):
                gbps = getattr(t, field, None)
                if gbps is None:  # (no fleet-wide link)
                    continue
                culprit = field if _bytes_dominate(num_bytes, gbps, t.latency_us * n) else "latency_us"
                transfer_ms(num_bytes, gbps, t.latency_us * n, f"Tier {t.name!r}: {culprit}", what)
        if handoff is not None:
            gbps, latency_us = handoff
            culprit = "handoff_gbps" if _bytes_dominate(num_bytes, gbps, latency_us * n) else (
                "handoff_latency_us")
            transfer_ms(num_bytes, gbps, latency_us * n, f"replicas.{culprit}", what)
    if think is not None and think.size:
        values = np.nan_to_num(np.asarray(think, dtype=np.float64), nan=0.0)
        if session_id is None:
            total_ms(float(values.sum()), "think_time", "the think times of the run")
            return
        _, code = np.unique(np.asarray(session_id).astype(str), return_inverse=True)
        sums = np.bincount(code.ravel(), weights=values)
        k = int(np.argmax(sums))
        sid = np.asarray(session_id)[np.flatnonzero(code.ravel() == k)[0]]
        sid = sid.item() if isinstance(sid, np.generic) else sid
        total_ms(float(sums[k]), "think_time", f"the think times of session {sid!r}")


def _bytes_dominate(num_bytes: float, gbps: float, latency_us: float) -> bool:
    """Whether the bandwidth (not the latency) gives most of a transfer's time."""
    return num_bytes / (gbps * 1e6) >= latency_us / 1000.0


def check_frame_times(finish: np.ndarray, first_token: np.ndarray) -> None:
    """Raise a ValueError when a finished request's time lies beyond :data:`MAX_FRAME_MS`.

    Examples
    --------
    >>> check_frame_times(np.array([1.0, np.nan]), np.array([0.5, np.nan]))
    >>> check_frame_times(np.array([2.0**45]), np.array([1.0]))
    Traceback (most recent call last):
    ...
    ValueError: request 0 finishes at 3.52e+13 ms, beyond the 2**44 ms the frames' times stay within: the cost model's step times (or the run's tier, handoff and think-time parameters) add up beyond the README's limits; no result frames were built
    """
    worst = np.fmax(np.abs(finish), np.abs(first_token))
    over = np.flatnonzero(worst > MAX_FRAME_MS)
    if over.size:
        i = int(over[0])
        raise ValueError(
            f"request {i} finishes at {float(finish[i]):.3g} ms, beyond the 2**44 ms the "
            "frames' times stay within: the cost model's step times (or the run's tier, "
            "handoff and think-time parameters) add up beyond the README's limits; no "
            "result frames were built"
        )
