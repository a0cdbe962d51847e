"""The typed columns every workload source returns and every writer takes.

Readers (:mod:`~inferasim.workload.mooncake`, :mod:`~inferasim.workload.tabular`,
:mod:`~inferasim.workload.synthetic`) never build a
:class:`~inferasim.workload.core.Workload` themselves: they return
:class:`Columns`, and ``Workload`` builds itself from them (sorting by
arrival, warning about inconsistent id counts). So the readers do not import
the Workload and there is no import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = ["Columns"]


@dataclass(frozen=True, eq=False)
class Columns:
    """One workload's columns as validated arrays, in source order.

    Parameters
    ----------
    arrival_ms : numpy.ndarray
        ``float64`` arrival times, finite, rebased so the earliest is 0
        (source order, not necessarily sorted).
    input_len, output_len : numpy.ndarray
        ``int64`` token counts, >= 0.
    hash_ids : numpy.ndarray or None
        Flat ``int64`` block hash ids; None when the source has no content ids.
    offsets : numpy.ndarray or None
        ``int64`` row offsets into ``hash_ids`` (length n + 1); None with ``hash_ids``.
    extra : dict of str to numpy.ndarray
        Other per-request columns (``line``, ``prefix_id``, ...), in order.
    block_size : int
        Tokens per hash id.
    source : str, optional
        A label for ``repr`` (file name, ``"synthetic"``).
    where : str
        The name messages and warnings use (a path or ``"<buffer>"``).

    Examples
    --------
    >>> cols = Columns(np.array([0.0]), np.array([3]), np.array([1]), None, None)
    >>> len(cols), cols.has_hash_ids
    (1, False)
    """

    arrival_ms: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    hash_ids: np.ndarray | None
    offsets: np.ndarray | None
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    block_size: int = 512
    source: str | None = None
    where: str = "workload"

    def __len__(self) -> int:
        return int(self.arrival_ms.shape[0])

    @property
    def has_hash_ids(self) -> bool:
        """Whether the source carried content ids.

        Examples
        --------
        >>> Columns(np.zeros(1), np.ones(1, int), np.ones(1, int),
        ...         np.array([7]), np.array([0, 1])).has_hash_ids
        True
        """
        return self.hash_ids is not None

    def hash_id_lists(self) -> list[list[int]]:
        """Each request's hash ids as a Python list (for writers).

        Examples
        --------
        >>> Columns(np.zeros(2), np.ones(2, int), np.ones(2, int),
        ...         np.array([7, 8, 9]), np.array([0, 2, 3])).hash_id_lists()
        [[7, 8], [9]]
        """
        if self.hash_ids is None or self.offsets is None:
            return [[] for _ in range(len(self))]
        flat = self.hash_ids.tolist()
        bounds = self.offsets.tolist()
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=False)]


class RequestTable(Protocol):
    """What the generators that learn from a trace read of it (a ``Workload`` is one).

    Examples
    --------
    >>> from inferasim import Workload
    >>> wl = Workload.from_requests([0], [4], [1], [[5]], block_size=4)
    >>> isinstance(wl.arrival_ms, np.ndarray), wl.block_size
    (True, 4)
    """

    arrival_ms: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    hash_ids: np.ndarray
    offsets: np.ndarray
    block_size: int
    source: str
