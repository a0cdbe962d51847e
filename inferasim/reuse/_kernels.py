"""Compiled replay loops for the FIFO, LFU and offline-optimum caches.

The same caches as the pure-Python loops of :mod:`inferasim.reuse.replay`
(which stay as the reference implementation the tests compare against),
written over dense compact ids ``0..U-1`` in numpy arrays and compiled with
numba, about fifty times faster. numba is imported on first use only, and
the compiled code is cached on disk (``cache=True``), so only the very first
replay on a machine pays the compilation (a few seconds). Without numba,
:func:`available` is False and the callers use the Python loops (same
numbers, slower).

Every kernel takes the lookup ids (``look``, one row per request, rows at
``look_offsets``), the touch sequence (``touch`` at ``touch_offsets``) and
the capacity in blocks (at least 1), and returns the hit blocks of every
request.

- FIFO: the cache always holds the last ``min(insertions, C)`` inserted
  ids, so an id is cached exactly when its latest insertion number is above
  ``insertions - C``: one counter and one array, no queue.
- LFU: the Python loop's buckets (one list per use count, oldest first) as
  doubly linked lists threaded through arrays indexed by id: O(1) a touch.
- OPT: a max-heap of next-use positions, stale entries skipped, exactly the
  Python loop.

Examples
--------
>>> import numpy as np
>>> look = np.array([0, 1, 0, 2], dtype=np.int64)   # r0 [0, 1], r1 [0, 2]
>>> off = np.array([0, 2, 4], dtype=np.int64)
>>> tail = np.array([1, 0, 2, 0], dtype=np.int64)   # tail-first touches
>>> replay_kernel("fifo", look, off, tail, off, 1).tolist() if available() else [0, 1]
[0, 1]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

__all__ = ["available", "replay_kernel", "KERNEL_POLICIES"]

#: Policies with a compiled kernel.
KERNEL_POLICIES: tuple[str, ...] = ("fifo", "lfu", "opt")


@cache
def _compiled() -> dict[str, Callable[..., Any]] | None:
    """The jitted kernels, or None when numba cannot be imported."""
    if os.environ.get("INFERASIM_NO_NUMBA", "").strip() not in ("", "0"):
        return None
    try:
        from inferasim.reuse import _jit
    except ImportError:
        return None
    return {"fifo": _jit.fifo, "lfu": _jit.lfu, "opt": _jit.opt}


def available() -> bool:
    """True when the compiled kernels can run (numba importable, not disabled).

    Setting ``INFERASIM_NO_NUMBA=1`` before the first replay disables them.

    Examples
    --------
    >>> isinstance(available(), bool)
    True
    """
    return _compiled() is not None


def replay_kernel(
    policy: str,
    look: np.ndarray,
    look_offsets: np.ndarray,
    touch: np.ndarray,
    touch_offsets: np.ndarray,
    capacity: int,
    next_use: np.ndarray | None = None,
) -> np.ndarray:
    """Hit blocks of every request under ``policy`` at ``capacity`` blocks, compiled.

    Parameters
    ----------
    policy : {"fifo", "lfu", "opt"}
    look, look_offsets : numpy.ndarray
        Compact id of every block reference and the request row offsets.
    touch, touch_offsets : numpy.ndarray
        The touch sequence (:func:`inferasim.reuse._refs.touch_sequence`).
    capacity : int
        At least 1.
    next_use : numpy.ndarray, optional
        For ``"opt"``: flat position of each touch's next use, ``look.size``
        when none.

    Returns
    -------
    numpy.ndarray
        ``int64`` hit blocks per request.

    Examples
    --------
    >>> look = np.array([0, 1, 0, 1], dtype=np.int64)
    >>> off = np.array([0, 2, 4], dtype=np.int64)
    >>> replay_kernel("lfu", look, off, look, off, 2).tolist() if available() else [0, 2]
    [0, 2]
    """
    kernels = _compiled()
    if kernels is None:
        raise RuntimeError("the compiled replay kernels need numba")
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1 block, got {capacity}")
    args = [np.ascontiguousarray(a, dtype=np.int64) for a in (look, look_offsets, touch, touch_offsets)]
    n_ids = int(max(int(args[0].max(initial=-1)), int(args[2].max(initial=-1)))) + 1
    if policy == "opt":
        if next_use is None:
            raise ValueError("policy 'opt' needs next_use")
        nxt = np.ascontiguousarray(next_use, dtype=np.int64)
        return kernels["opt"](*args, int(capacity), n_ids, nxt, int(args[0].size))
    if policy not in kernels:
        raise ValueError(f"no compiled kernel for policy {policy!r}; have {KERNEL_POLICIES}")
    return kernels[policy](*args, int(capacity), n_ids)
