"""Per-request hit frames and capacity checks shared by the reuse analyses."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from inferasim.reuse._refs import BlockRefs

__all__ = ["PER_REQUEST_COLUMNS", "hit_tokens_of", "per_request_frame", "check_capacity"]

#: Columns of every per-request hit frame.
PER_REQUEST_COLUMNS = (
    "blocks",
    "hit_blocks",
    "input_len",
    "hit_tokens",
    "block_hit_ratio",
    "token_hit_ratio",
)


def hit_tokens_of(refs: BlockRefs, hit_blocks: np.ndarray) -> np.ndarray:
    """Tokens of each request's leading ``hit_blocks`` blocks.

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse._refs import block_refs
    >>> refs = block_refs(Workload.from_requests([0], [1100], [1], [[1, 2, 3]]))
    >>> hit_tokens_of(refs, np.array([3])).tolist()
    [1100]
    """
    cum = np.concatenate(([0], np.cumsum(refs.tokens)))
    start = refs.offsets[:-1]
    return (cum[start + hit_blocks] - cum[start]).astype(np.int64)


def per_request_frame(refs: BlockRefs, hit_blocks: np.ndarray) -> pd.DataFrame:
    """One row per request: blocks considered, hit blocks, prompt and hit tokens, ratios.

    Examples
    --------
    >>> from inferasim import Workload
    >>> from inferasim.reuse._refs import block_refs
    >>> refs = block_refs(Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 3]]))
    >>> per_request_frame(refs, np.array([0, 1]))["hit_tokens"].tolist()
    [0, 512]
    """
    hit_blocks = np.asarray(hit_blocks, dtype=np.int64)
    blocks = np.diff(refs.offsets)
    hit_tokens = hit_tokens_of(refs, hit_blocks)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame = pd.DataFrame(
            {
                "blocks": blocks,
                "hit_blocks": hit_blocks,
                "input_len": refs.input_len,
                "hit_tokens": hit_tokens,
                "block_hit_ratio": np.where(blocks > 0, hit_blocks / np.maximum(blocks, 1), np.nan),
                "token_hit_ratio": np.where(
                    refs.input_len > 0, hit_tokens / np.maximum(refs.input_len, 1), np.nan
                ),
            }
        )
    frame.index.name = "request_id"
    total_blocks = int(blocks.sum())
    total_tokens = refs.total_tokens
    frame.attrs["block_hit_ratio"] = float(hit_blocks.sum() / total_blocks) if total_blocks else 0.0
    frame.attrs["token_hit_ratio"] = float(hit_tokens.sum() / total_tokens) if total_tokens else 0.0
    return frame


def check_capacity(capacity: object, name: str = "capacity") -> int:
    """A capacity in blocks as a non-negative ``int``, or a clear error.

    Examples
    --------
    >>> check_capacity(np.int64(3))
    3
    >>> check_capacity(-1)
    Traceback (most recent call last):
    ...
    ValueError: capacity must be a non-negative whole number of blocks, got -1
    """
    if isinstance(capacity, (bool, np.bool_)):  # True is not "1 block"
        raise ValueError(f"{name} must be a whole number of blocks, not a bool ({capacity!r})")
    ok = isinstance(capacity, numbers.Integral)
    if isinstance(capacity, numbers.Real) and not ok:
        ok = bool(np.isfinite(float(capacity))) and float(capacity).is_integer()
    if not ok or int(capacity) < 0:  # type: ignore[call-overload]
        raise ValueError(f"{name} must be a non-negative whole number of blocks, got {capacity!r}")
    if int(capacity) >= 2**62:  # type: ignore[call-overload]
        raise ValueError(
            f"{name} {capacity!r} is beyond 2**62 blocks; any capacity of at least the "
            "workload's unique block count already behaves as an infinite cache"
        )
    return int(capacity)  # type: ignore[call-overload]
