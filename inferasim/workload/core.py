"""The :class:`Workload`: one pandas-backed table of LLM requests.

Every traffic source (synthetic generator, CSV/JSON length files, Mooncake
traces) ends up here. A workload holds

* ``frame``: one row per request in arrival order, indexed by ``request_id``
  (0..n-1), with ``arrival_ms`` (float, ms from the first request),
  ``input_len`` and ``output_len`` (tokens) and source-specific columns such
  as ``prefix_id`` (synthetic pools) or ``line`` (1-based source line);
* the block hash ids as one flat ``int64`` array (``hash_ids``) plus row
  ``offsets`` (length n + 1), so hot paths never touch Python lists;
* ``block_size``: tokens per hash id (512 for Mooncake traces).

Block semantics: request ``i`` with ``n`` hash ids covers its prompt in
blocks of ``block_size`` tokens; its last block holds
``input_len - block_size * (n - 1)`` tokens. Each id names the block *and
everything before it*, so two requests share KV only for their common leading
run of ids. A trace line whose id count differs from
``ceil(input_len / block_size)`` is kept as it is and counted by
:meth:`Workload.describe` (``inconsistent_blocks``), never silently fixed.

Workloads are immutable: every method returns a new workload.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from os import PathLike
from typing import IO, Any

import numpy as np
import pandas as pd

from inferasim import _ragged
from inferasim.errors import WorkloadError
from inferasim.workload import bailian, burstgpt, mooncake, synthesize, synthetic, tabular
from inferasim.workload._columns import Columns
from inferasim.workload._parse import (
    MAX_ARRIVAL_SPAN_MS,
    length_column,
    number_column,
    sort_by_arrival,
    warn_inconsistent,
)

__all__ = ["Workload"]

_CORE_COLUMNS = ("arrival_ms", "input_len", "output_len")


class Workload:
    """A table of LLM requests with their prefix block hash ids.

    Build one with :meth:`from_synthetic`, :meth:`from_csv`,
    :meth:`from_mooncake` or :meth:`from_requests`; the constructor itself is
    for those builders and checks only the shape of what it is given.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per request with at least ``arrival_ms``, ``input_len`` and
        ``output_len``, sorted by ``arrival_ms``.
    hash_ids : numpy.ndarray
        Flat ``int64`` array of every request's block hash ids.
    offsets : numpy.ndarray
        ``int64`` row offsets, length ``len(frame) + 1``; request ``i`` owns
        ``hash_ids[offsets[i]:offsets[i + 1]]``.
    block_size : int, default 512
        Tokens per hash id.
    has_hash_ids : bool, default True
        False for sources without content ids (CSV length files): such a
        workload carries no reuse information.
    source : str, optional
        Where the workload came from, shown in ``repr`` and ``describe()``.

    Examples
    --------
    >>> wl = Workload.from_requests(
    ...     arrival_ms=[0, 10], input_len=[1024, 600], output_len=[8, 4],
    ...     hash_ids=[[1, 2], [1, 3]], block_size=512)
    >>> len(wl)
    2
    >>> wl.block_ids(1)
    array([1, 3])
    """

    __slots__ = ("_frame", "_hash_ids", "_offsets", "_block_size", "_has_hash_ids", "_source")

    def __init__(
        self,
        frame: pd.DataFrame,
        hash_ids: np.ndarray,
        offsets: np.ndarray,
        *,
        block_size: int = 512,
        has_hash_ids: bool = True,
        source: str | None = None,
    ) -> None:
        missing = [c for c in _CORE_COLUMNS if c not in frame.columns]
        if missing:
            raise WorkloadError(f"frame lacks required columns {missing}")
        if int(block_size) != block_size or block_size <= 0:
            raise WorkloadError(f"block_size must be a positive integer, got {block_size!r}")
        hash_ids = np.ascontiguousarray(hash_ids, dtype=np.int64)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if offsets.shape != (len(frame) + 1,) or offsets[0] != 0 or offsets[-1] != hash_ids.size:
            raise WorkloadError("offsets must have len(frame) + 1 entries from 0 to len(hash_ids)")
        if np.any(np.diff(offsets) < 0):
            raise WorkloadError("offsets must be non-decreasing")
        _check_arrivals(frame["arrival_ms"].to_numpy(), "arrival_ms")
        frame = frame.reset_index(drop=True)
        frame.index.name = "request_id"
        hash_ids.flags.writeable = False
        offsets.flags.writeable = False
        self._frame = frame
        self._hash_ids = hash_ids
        self._offsets = offsets
        self._block_size = int(block_size)
        self._has_hash_ids = bool(has_hash_ids)
        self._source = source

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_requests(
        cls,
        arrival_ms: Sequence[float] | np.ndarray,
        input_len: Sequence[int] | np.ndarray,
        output_len: Sequence[int] | np.ndarray,
        hash_ids: Sequence[Sequence[int]] | None = None,
        *,
        block_size: int = 512,
        source: str | None = None,
        **columns: Sequence[Any],
    ) -> Workload:
        """Build a workload from per-request values (small hand-made cases).

        Requests are sorted by arrival (stably). With ``hash_ids=None`` the
        workload has no content ids (no reuse), like a CSV length file.

        Parameters
        ----------
        arrival_ms, input_len, output_len : array-like
            Arrival time (ms, finite) and prompt / generated lengths (whole
            numbers of tokens, >= 0). A bad value raises
            :class:`~inferasim.WorkloadError` naming its 0-based position
            (``request i``) and column.
        hash_ids : sequence of sequences of int, optional
            Each request's block hash ids.
        block_size : int, default 512
            Tokens per hash id.
        source : str, optional
            A label for ``repr``.
        **columns : array-like
            Extra per-request columns (``session``, ``prefix_id``, ...).
            ``session_id`` and ``turn`` are checked as a file's are (see
            :mod:`inferasim.workload._sessions`; a ``turn`` column is added
            when only ``session_id`` is given) and must survive
            :meth:`to_csv` then :meth:`from_csv`: a string id that a CSV reads
            back as another (``"01"``, ``" a"``, ``"nan"``) is an error here.

        Returns
        -------
        Workload

        Examples
        --------
        >>> wl = Workload.from_requests([5, 0], [10, 20], [1, 2], [[1], [2]], block_size=16)
        >>> wl.frame["input_len"].tolist(), wl.block_ids(0).tolist()
        ([20, 10], [2])
        """
        where = source or "from_requests"
        n = len(arrival_ms)
        index = np.arange(n, dtype=np.int64)
        for name, values in (("input_len", input_len), ("output_len", output_len)):
            if len(values) != n:
                raise WorkloadError(f"column {name!r} has {len(values)} values, expected {n}")
        data = {
            "arrival_ms": number_column(np.asarray(arrival_ms).tolist(), "arrival_ms", index, where, "request"),
            "input_len": length_column(np.asarray(input_len).tolist(), "input_len", index, where, "request"),
            "output_len": length_column(np.asarray(output_len).tolist(), "output_len", index, where, "request"),
        }
        _check_arrivals(data["arrival_ms"], where)
        for name in ("session_id", "turn"):
            if name in columns and len(columns[name]) != n:
                raise WorkloadError(f"column {name!r} has {len(columns[name])} values, expected {n}")
        session = columns.pop("session_id", None)
        turn = columns.pop("turn", None)
        data.update(tabular.session_columns_as_csv(
            None if session is None else list(session), None if turn is None else list(turn),
            data["arrival_ms"], where,
        ))
        for name, values in columns.items():
            data[name] = np.asarray(values)
        for name, values in data.items():
            if values.shape != (n,):
                raise WorkloadError(f"column {name!r} has {values.shape[0]} values, expected {n}")
        frame = pd.DataFrame(data)
        if hash_ids is None:
            flat = np.zeros(0, dtype=np.int64)
            offsets = np.zeros(n + 1, dtype=np.int64)
            has = False
        else:
            if len(hash_ids) != n:
                raise WorkloadError(f"hash_ids has {len(hash_ids)} rows, expected {n}")
            blocks = [np.asarray(h) for h in hash_ids]
            for i, block in enumerate(blocks):
                if block.ndim != 1 or (block.size and block.dtype.kind not in "iu"):
                    raise WorkloadError(
                        f"must be a list of integers, got {hash_ids[i]!r:.60}",
                        source=where, line=i, field="hash_ids", unit="request",
                    )
                if block.dtype.kind == "u" and block.size and int(block.max()) >= 2**63:
                    raise WorkloadError(
                        "hash id outside the 64-bit integer range",
                        source=where, line=i, field="hash_ids", unit="request",
                    )
            lengths = np.fromiter((b.size for b in blocks), dtype=np.int64, count=n)
            offsets = np.concatenate(([0], np.cumsum(lengths)))
            flat = (
                np.concatenate([b.astype(np.int64) for b in blocks]) if n else np.zeros(0, np.int64)
            )
            has = True
        order = np.argsort(frame["arrival_ms"].to_numpy(), kind="stable")
        wl = cls(frame, flat, offsets, block_size=block_size, has_hash_ids=has, source=source)
        if np.any(order != np.arange(n)):
            wl = wl._take(order)
        return wl

    @classmethod
    def from_synthetic(cls, num_requests: int, rate: float, **kwargs: Any) -> Workload:
        """Generate a seeded synthetic workload; see :func:`inferasim.workload.synthetic.generate`.

        Examples
        --------
        >>> wl = Workload.from_synthetic(100, rate=5.0, input_len=1024, output_len=64,
        ...                              num_prefixes=4, prefix_len=512, seed=1)
        >>> len(wl), wl.block_size
        (100, 512)
        """
        return cls._from_columns(synthetic.generate(num_requests, rate, **kwargs), warn=False)

    @classmethod
    def from_csv(cls, path_or_buffer: str | PathLike[str] | IO[Any], **kwargs: Any) -> Workload:
        """Read a CSV or JSON length-and-arrival file; see :func:`inferasim.workload.tabular.read_table`.

        Examples
        --------
        >>> import io
        >>> wl = Workload.from_csv(io.StringIO("time,isl,osl\\n0,100,10\\n5,200,20\\n"))
        >>> wl.frame[["arrival_ms", "input_len", "output_len"]].values.tolist()
        [[0.0, 100.0, 10.0], [5.0, 200.0, 20.0]]
        """
        return cls._from_columns(tabular.read_table(path_or_buffer, **kwargs))

    @classmethod
    def from_mooncake(cls, path_or_name: str | PathLike[str] | IO[Any], **kwargs: Any) -> Workload:
        """Read a Mooncake trace (file or FAST'25 name); see :func:`inferasim.workload.mooncake.read_mooncake`.

        Examples
        --------
        >>> import io
        >>> text = '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}\\n'
        >>> Workload.from_mooncake(io.StringIO(text)).block_ids(0)
        array([0, 1])
        """
        return cls._from_columns(mooncake.read_mooncake(path_or_name, **kwargs))

    @classmethod
    def from_bailian(cls, path_or_name: str | PathLike[str] | IO[Any], **kwargs: Any) -> Workload:
        """Read an Alibaba Bailian trace (file or name); see :func:`inferasim.workload.bailian.read_bailian`.

        Examples
        --------
        >>> import io
        >>> text = ('{"chat_id": 3, "parent_chat_id": -1, "timestamp": 1.25, "input_length": 20, '
        ...         '"output_length": 4, "type": "file", "turn": 1, "hash_ids": [7, 8]}\\n')
        >>> wl = Workload.from_bailian(io.StringIO(text))
        >>> wl.block_size, wl.frame[["session_id", "turn", "type"]].values.tolist()
        (16, [[3, 1, 'file']])
        """
        return cls._from_columns(bailian.read_bailian(path_or_name, **kwargs))

    @classmethod
    def from_burstgpt(cls, path_or_name: str | PathLike[str] | IO[Any], **kwargs: Any) -> Workload:
        """Read a BurstGPT CSV (file or name); see :func:`inferasim.workload.burstgpt.read_burstgpt`.

        Examples
        --------
        >>> import io
        >>> text = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\\n"
        ...         "0,ChatGPT,472,0,472,Conversation log\\n")
        >>> Workload.from_burstgpt(io.StringIO(text)).frame["status"].tolist()
        ['failed']
        """
        return cls._from_columns(burstgpt.read_burstgpt(path_or_name, **kwargs))

    @classmethod
    def from_trace(cls, name: str, **kwargs: Any) -> Workload:
        """Load any known trace by name with its own reader (see :func:`inferasim.traces.list_traces`).

        Parameters
        ----------
        name : str
            A key of :data:`inferasim.workload.traces.TRACES`.
        **kwargs
            Passed to the reader (``verify``, ``block_size``, ...).

        Raises
        ------
        KeyError
            For an unknown name (the message lists the known ones).
        TraceNotFoundError
            When the file is not on this machine and cannot be downloaded;
            the message names the upstream location.

        Examples
        --------
        >>> from inferasim.workload.traces import TRACES
        >>> TRACES["bailian_traceA"].format
        'bailian'
        >>> Workload.from_trace("azure_code_2023")  # doctest: +SKIP
        """
        from inferasim.workload.traces import TRACES, _info

        _info(name)
        reader = {
            "mooncake": cls.from_mooncake, "bailian": cls.from_bailian,
            "azure": cls.from_csv, "burstgpt": cls.from_burstgpt,
        }[TRACES[name].format]
        return reader(name, **kwargs)

    @classmethod
    def synthesize(cls, like: Workload | synthesize.TraceModel, num_requests: int | None = None, **kwargs: Any) -> Workload:
        """New traffic with ``like``'s prefix tree, sessions and arrivals; see :mod:`inferasim.workload.synthesize`.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 5], [4, 8], [1, 1], [[1, 2], [1, 2, 3, 4]], block_size=2)
        >>> new = Workload.synthesize(like=wl, num_requests=4, seed=0)
        >>> len(new), "session_id" in new.frame
        (4, True)
        """
        return cls._from_columns(synthesize.synthesize(like, num_requests, **kwargs), warn=False)

    @classmethod
    def _from_columns(cls, cols: Columns, *, warn: bool = True) -> Workload:
        """Build a workload from a source's columns: sort by arrival (stably), check id counts.

        With ``warn`` (file sources) an unsorted source and id counts other
        than ``ceil(input_len / block_size)`` are reported as warnings.
        """
        n = len(cols)
        frame = pd.DataFrame(
            {
                "arrival_ms": cols.arrival_ms,
                "input_len": cols.input_len,
                "output_len": cols.output_len,
                **cols.extra,
            }
        )
        if cols.hash_ids is None or cols.offsets is None:
            flat, offsets, has = np.zeros(0, np.int64), np.zeros(n + 1, np.int64), False
        else:
            flat, offsets, has = cols.hash_ids, cols.offsets, True
        wl = cls(frame, flat, offsets, block_size=cols.block_size, has_hash_ids=has, source=cols.source)
        if warn:
            order = sort_by_arrival(cols.arrival_ms, cols.where)
        else:
            order = np.argsort(cols.arrival_ms, kind="stable")
            if np.array_equal(order, np.arange(n)):
                order = None
        if order is not None:
            wl = wl._take(order)
        if warn:
            warn_inconsistent(int(wl.inconsistent_mask().sum()), cols.where, cols.block_size)
        return wl

    def _columns(self) -> Columns:
        """This workload's columns (the writers' input)."""
        extra = {c: self._frame[c].to_numpy() for c in self._frame.columns if c not in _CORE_COLUMNS}
        return Columns(
            self.arrival_ms,
            self.input_len,
            self.output_len,
            self._hash_ids if self._has_hash_ids else None,
            self._offsets if self._has_hash_ids else None,
            extra,
            block_size=self._block_size,
            source=self._source,
        )

    # ---------------------------------------------------------------- accessors
    @property
    def frame(self) -> pd.DataFrame:
        """The request table (one row per request, no list column).

        A copy-on-write view: changing it never changes the workload.

        Examples
        --------
        >>> Workload.from_requests([0], [10], [2]).frame.columns.tolist()
        ['arrival_ms', 'input_len', 'output_len']
        """
        return self._frame.copy(deep=False)

    @property
    def hash_ids(self) -> np.ndarray:
        """Flat read-only ``int64`` array of every request's block hash ids.

        Examples
        --------
        >>> Workload.from_requests([0, 1], [4, 4], [1, 1], [[1, 2], [3]], block_size=2).hash_ids
        array([1, 2, 3])
        """
        return self._hash_ids

    @property
    def offsets(self) -> np.ndarray:
        """Read-only ``int64`` row offsets into :attr:`hash_ids` (length n + 1).

        Examples
        --------
        >>> Workload.from_requests([0, 1], [4, 4], [1, 1], [[1, 2], [3]], block_size=2).offsets
        array([0, 2, 3])
        """
        return self._offsets

    @property
    def block_size(self) -> int:
        """Tokens per hash id.

        Examples
        --------
        >>> Workload.from_requests([0], [10], [2], block_size=16).block_size
        16
        """
        return self._block_size

    @property
    def has_hash_ids(self) -> bool:
        """Whether the source carried content ids (False for CSV length files).

        Examples
        --------
        >>> Workload.from_requests([0], [10], [2]).has_hash_ids
        False
        """
        return self._has_hash_ids

    @property
    def source(self) -> str | None:
        """Where the workload came from (a path, ``"synthetic"``, ...).

        Examples
        --------
        >>> Workload.from_requests([0], [10], [2], source="hand").source
        'hand'
        """
        return self._source

    @property
    def num_blocks(self) -> np.ndarray:
        """Hash ids per request (``int64`` array).

        Examples
        --------
        >>> Workload.from_requests([0, 1], [4, 4], [1, 1], [[1, 2], [3]], block_size=2).num_blocks
        array([2, 1])
        """
        return np.diff(self._offsets)

    @property
    def arrival_ms(self) -> np.ndarray:
        """Arrival times in ms (``float64`` array).

        Examples
        --------
        >>> Workload.from_requests([0, 2.5], [1, 1], [1, 1]).arrival_ms
        array([0. , 2.5])
        """
        return self._frame["arrival_ms"].to_numpy()

    @property
    def input_len(self) -> np.ndarray:
        """Prompt lengths in tokens (``int64`` array).

        Examples
        --------
        >>> Workload.from_requests([0], [7], [1]).input_len
        array([7])
        """
        return self._frame["input_len"].to_numpy()

    @property
    def output_len(self) -> np.ndarray:
        """Generated lengths in tokens (``int64`` array).

        Examples
        --------
        >>> Workload.from_requests([0], [7], [3]).output_len
        array([3])
        """
        return self._frame["output_len"].to_numpy()

    def block_ids(self, i: int) -> np.ndarray:
        """The hash ids of request ``i`` (a read-only view).

        Examples
        --------
        >>> Workload.from_requests([0], [4], [1], [[5, 6]], block_size=2).block_ids(0)
        array([5, 6])
        """
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"request {i} out of range for {n} requests")
        i %= n
        return self._hash_ids[self._offsets[i] : self._offsets[i + 1]]

    def block_tokens(self) -> np.ndarray:
        """Tokens covered by each entry of :attr:`hash_ids` (flat ``int64`` array).

        Every block holds ``block_size`` tokens but a request's last, which
        holds ``input_len - block_size * (n - 1)``.

        Examples
        --------
        >>> Workload.from_requests([0], [1100], [1], [[1, 2, 3]]).block_tokens()
        array([512, 512,  76])
        """
        return _ragged.block_tokens(self.input_len, self._offsets, self._block_size)

    def inconsistent_mask(self) -> np.ndarray:
        """True for requests whose id count is not ``ceil(input_len / block_size)``.

        Always all False for a workload without hash ids.

        Examples
        --------
        >>> Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [3]]).inconsistent_mask()
        array([False,  True])
        """
        if not self._has_hash_ids:
            return np.zeros(len(self), dtype=bool)
        expected = -(-self.input_len // self._block_size)
        return self.num_blocks != expected

    def __len__(self) -> int:
        return len(self._frame)

    # ------------------------------------------------------------------ display
    def to_frame(self) -> pd.DataFrame:
        """The request table with a ``hash_ids`` list column, for people and export.

        Examples
        --------
        >>> Workload.from_requests([0], [4], [1], [[5, 6]], block_size=2).to_frame()["hash_ids"][0]
        [5, 6]
        """
        out = self._frame.copy()
        if self._has_hash_ids:
            out["hash_ids"] = self._hash_id_lists()
        return out

    def _hash_id_lists(self) -> list[list[int]]:
        flat = self._hash_ids.tolist()
        bounds = self._offsets.tolist()
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=False)]

    def _display_frame(self, max_rows: int = 10) -> pd.DataFrame:
        """The rows a person sees (first and last), hash ids as a short list column.

        A ``line`` column that only repeats the index (one request per line,
        in file order: line = request_id + a constant) is left out of the view; the
        frame keeps it.

        Examples
        --------
        >>> import io
        >>> wl = Workload.from_csv(io.StringIO("time,isl,osl\\n0,10,1\\n5,20,2\\n"))
        >>> wl.frame["line"].tolist(), list(wl._display_frame().columns)
        ([2, 3], ['arrival_ms', 'input_len', 'output_len'])
        """
        n = len(self)
        rows = np.arange(n) if n <= max_rows else np.r_[0 : max_rows // 2, n - max_rows // 2 : n]
        shown = self._frame.iloc[rows].copy()
        if "line" in self._frame.columns:
            line = self._frame["line"].to_numpy()
            # CSV counts the header as line 1; JSON lines start at 1: either way an offset
            if np.array_equal(line - line[0], np.arange(n)) if n else True:
                shown = shown.drop(columns="line")
        if self._has_hash_ids:
            ids = []
            for i in rows:
                block = self.block_ids(int(i)).tolist()
                ids.append(str(block) if len(block) <= 6 else f"[{block[0]}, {block[1]}, ... {block[-1]}] ({len(block)})")
            shown["hash_ids"] = ids
        return shown

    def _header(self) -> str:
        src = f" from {self._source}" if self._source else ""
        ids = "" if self._has_hash_ids else ", no hash ids"
        return f"Workload{src}: {len(self):,} requests, block_size={self._block_size}{ids}"

    def _key_numbers(self) -> list[tuple[str, str, str]]:
        """(name, value, unit) rows of the cheap headline numbers, for the reprs."""
        from inferasim._format import format_metric

        n = len(self)
        arr, inp, out = self.arrival_ms, self.input_len, self.output_len
        duration = float(arr[-1] - arr[0]) if n else 0.0
        rate = n * 1000.0 / duration if duration > 0 else float("nan")
        rows = [
            ("duration", format_metric("duration_ms", duration), ""),  # carries its unit: "59 min"
            ("offered rate", format_metric("offered_rate_rps", rate), "req/s"),
            ("input mean / max", _pair(inp), "tokens"),
            ("output mean / max", _pair(out), "tokens"),
        ]
        if self._has_hash_ids:
            rows.append(("block ids", f"{self._hash_ids.size:,}", "blocks"))
        return rows

    def __repr__(self) -> str:
        from inferasim._format import card_text

        preview = self._display_frame(max_rows=6).to_string()
        text = card_text(self._header(), self._key_numbers())
        return f"{text}\n{preview}"

    def _repr_html_(self) -> str:
        from inferasim._format import card_html

        preview = self._display_frame(max_rows=6).to_html(max_cols=12)
        more = (
            f"<details><summary>first and last requests</summary>{preview}</details>"
            if len(self)
            else ""
        )
        return card_html(self._header(), self._key_numbers(), extra_html=more)

    # -------------------------------------------------------------- summaries
    def describe(self) -> pd.Series:
        """Summary statistics of the workload as a tidy, labelled Series.

        Entries: ``requests``; ``duration_ms`` (last minus first arrival);
        ``offered_rate_rps``; ``input_mean``/``_p50``/``_p99``/``_max`` and the
        same for ``output`` (tokens); ``blocks_total`` and ``blocks_unique``;
        ``inconsistent_blocks`` (requests whose id count disagrees with their
        length); ``infinite_block_hit_ratio`` and ``infinite_token_hit_ratio``
        (the share of blocks and of prompt tokens an infinite prefix cache
        would serve, replaying requests in order). Without hash ids
        (:attr:`has_hash_ids` is False) the block entries are NaN and a note
        says the cache numbers are absent, not zero.

        Returns
        -------
        pandas.Series
            ``float64`` values at full precision labelled by statistic; it
            displays them rounded (counts and lengths as integers, ratios to
            4 decimals, with units).

        Examples
        --------
        >>> wl = Workload.from_requests([0, 1000], [1024, 1024], [10, 30], [[1, 2], [1, 3]])
        >>> d = wl.describe()
        >>> int(d["requests"]), float(d["offered_rate_rps"]), float(d["infinite_block_hit_ratio"])
        (2, 2.0, 0.25)
        >>> Workload.from_requests([0], [10], [2]).describe().notes[0][:40]
        'no hash ids: the cache numbers (blocks, '
        """
        n = len(self)
        arr = self.arrival_ms
        duration = float(arr[-1] - arr[0]) if n else 0.0
        stats: dict[str, Any] = {
            "requests": n,
            "duration_ms": duration,
            "offered_rate_rps": (n * 1000.0 / duration) if duration > 0 else float("nan"),
        }
        for name, values in (("input", self.input_len), ("output", self.output_len)):
            if n:
                p50, p99 = np.percentile(values, [50, 99])
                stats.update(
                    {
                        f"{name}_mean": float(values.mean()),
                        f"{name}_p50": float(p50),
                        f"{name}_p99": float(p99),
                        f"{name}_max": int(values.max()),
                    }
                )
            else:
                stats.update({f"{name}_{s}": float("nan") for s in ("mean", "p50", "p99", "max")})
        if self._has_hash_ids:
            hits = _ragged.leading_run(
                _ragged.first_seen_earlier(self._hash_ids, self._offsets), self._offsets
            )
            tokens = self.block_tokens()
            total_tokens = int(self.input_len.sum())
            stats.update(
                {
                    "blocks_total": int(self._hash_ids.size),
                    "blocks_unique": int(np.unique(self._hash_ids).size),
                    "inconsistent_blocks": int(self.inconsistent_mask().sum()),
                    "infinite_block_hit_ratio": float(hits.mean()) if hits.size else 0.0,
                    "infinite_token_hit_ratio": (
                        float(tokens[hits].sum() / total_tokens) if total_tokens else 0.0
                    ),
                }
            )
        else:
            stats.update(
                {
                    k: float("nan")
                    for k in (
                        "blocks_total",
                        "blocks_unique",
                        "inconsistent_blocks",
                        "infinite_block_hit_ratio",
                        "infinite_token_hit_ratio",
                    )
                }
            )
        from inferasim._format import Summary

        notes = () if self._has_hash_ids else (
            "no hash ids: the cache numbers (blocks, hit ratios) are absent (NaN), not zero; "
            "this source carries no prefix-reuse information",
        )
        return Summary(
            stats, name=self._source or "workload", dtype=np.float64, title=self._header(),
            notes=[*notes, *self._column_notes()],
        )

    def _column_notes(self) -> list[str]:
        """Notes on extra columns named like an accepted column (likely misspellings).

        Examples
        --------
        >>> import io
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     wl = Workload.from_csv(io.StringIO("time,isl,osl,hash_id\\n0,10,2,1\\n"))
        >>> wl._column_notes()
        ["column 'hash_id' is kept as an extra column, not read (did you mean hash_ids?)"]
        """
        extra = [c for c in self._frame.columns if c not in _CORE_COLUMNS]
        return [
            f"column {c!r} is kept as an extra column, not read (did you mean {m}?)"
            for c, m in tabular.misspelt_columns(extra).items()
        ]

    # ------------------------------------------------------------ selections
    def _take(self, rows: np.ndarray, frame: pd.DataFrame | None = None) -> Workload:
        """A new workload of the given rows (in the given order)."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = np.diff(self._offsets)[rows]
        new_offsets = np.concatenate(([0], np.cumsum(lengths)))
        starts = self._offsets[:-1][rows]
        gather = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
        if frame is None:
            frame = self._frame.iloc[rows]
        return Workload(
            frame,
            self._hash_ids[gather],
            new_offsets,
            block_size=self._block_size,
            has_hash_ids=self._has_hash_ids,
            source=self._source,
        )

    def head(self, n: int = 5) -> Workload:
        """The first ``n`` requests.

        Examples
        --------
        >>> len(Workload.from_requests([0, 1, 2], [1, 1, 1], [1, 1, 1]).head(2))
        2
        """
        return self._take(np.arange(min(max(n, 0), len(self))))

    def window(self, start_ms: float, end_ms: float, *, rebase: bool = True) -> Workload:
        """Requests arriving in ``[start_ms, end_ms)``.

        Parameters
        ----------
        start_ms, end_ms : float
            Window bounds in ms.
        rebase : bool, default True
            Shift arrivals so the window's first request arrives at 0.

        Examples
        --------
        >>> wl = Workload.from_requests([0, 10, 20, 30], [1] * 4, [1] * 4)
        >>> wl.window(10, 30).arrival_ms
        array([ 0., 10.])
        """
        arr = self.arrival_ms
        rows = np.flatnonzero((arr >= start_ms) & (arr < end_ms))
        out = self._take(rows)
        if rebase and len(out):
            out = out.shift_time(-out.arrival_ms[0])
        return out

    def sample(self, n: int, seed: int = 0) -> Workload:
        """``n`` requests drawn without replacement, kept in arrival order.

        Examples
        --------
        >>> wl = Workload.from_requests(list(range(10)), [1] * 10, [1] * 10)
        >>> s = wl.sample(3, seed=0)
        >>> len(s), bool((s.arrival_ms[1:] >= s.arrival_ms[:-1]).all())
        (3, True)
        """
        if not 0 <= n <= len(self):
            raise ValueError(f"cannot sample {n} of {len(self)} requests")
        rows = np.sort(np.random.default_rng(seed).choice(len(self), size=n, replace=False))
        return self._take(rows)

    def shift_time(self, offset_ms: float) -> Workload:
        """Add ``offset_ms`` to every arrival.

        Examples
        --------
        >>> Workload.from_requests([0, 5], [1, 1], [1, 1]).shift_time(100).arrival_ms
        array([100., 105.])
        """
        if not np.isfinite(offset_ms):
            raise ValueError(f"offset_ms must be a finite number, got {offset_ms!r}")
        arrival = self.arrival_ms + float(offset_ms)
        _check_arrivals(arrival, f"shift_time({offset_ms!r})", error=ValueError)
        frame = self._frame.assign(arrival_ms=arrival)
        return self._take(np.arange(len(self)), frame=frame)

    def scale_time(self, factor: float) -> Workload:
        """Multiply every arrival time by ``factor``: the load knob.

        ``factor < 1`` compresses the trace (higher offered rate, by
        ``1 / factor``); ``factor > 1`` stretches it.

        Examples
        --------
        >>> Workload.from_requests([0, 10], [1, 1], [1, 1]).scale_time(0.5).arrival_ms
        array([0., 5.])
        """
        if isinstance(factor, bool) or not np.isfinite(factor) or factor <= 0:
            raise ValueError(f"factor must be a positive finite number, got {factor!r}")
        arrival = self.arrival_ms * float(factor)
        _check_arrivals(arrival, f"scale_time({factor!r})", error=ValueError)
        frame = self._frame.assign(arrival_ms=arrival)
        return self._take(np.arange(len(self)), frame=frame)

    # ----------------------------------------------------------- combination
    @staticmethod
    def concat(
        workloads: Iterable[Workload], *, how: str = "merge", disjoint_ids: bool = False
    ) -> Workload:
        """Combine workloads into one.

        Parameters
        ----------
        workloads : iterable of Workload
            All with the same ``block_size``.
        how : {"merge", "append"}, default "merge"
            ``"merge"`` superposes the streams by arrival time (stable: ties
            keep the input order); ``"append"`` starts each workload where
            the previous one's last arrival was.
        disjoint_ids : bool, default False
            Offset each workload's hash ids so different sources can never
            share a block. By default ids are kept as they are, so a trace
            combined with itself shares its prefixes.

        Returns
        -------
        Workload

        Examples
        --------
        >>> a = Workload.from_requests([0, 20], [1, 1], [1, 1])
        >>> b = Workload.from_requests([10], [2], [2])
        >>> Workload.concat([a, b]).arrival_ms
        array([ 0., 10., 20.])
        >>> (a + b).input_len
        array([1, 2, 1])
        """
        parts = list(workloads)
        if not parts:
            raise ValueError("concat needs at least one workload")
        if how not in ("merge", "append"):
            raise ValueError(f"how must be 'merge' or 'append', got {how!r}")
        sizes = {w.block_size for w in parts}
        if len(sizes) > 1:
            raise ValueError(f"cannot combine workloads with block sizes {sorted(sizes)}")
        frames, ids, lengths = [], [], []
        shift, id_base = 0.0, 0
        for w in parts:
            frame = w.frame
            if how == "append" and len(w):
                frame = frame.assign(arrival_ms=w.arrival_ms - w.arrival_ms[0] + shift)
                shift = float(frame["arrival_ms"].iloc[-1])
            frames.append(frame)
            block = w.hash_ids
            if disjoint_ids and block.size:
                block = block - block.min() + id_base
                id_base = int(block.max()) + 1
            ids.append(block)
            lengths.append(w.num_blocks)
        frame = pd.concat(frames, ignore_index=True)
        lens = np.concatenate(lengths)
        merged = Workload(
            frame,
            np.concatenate(ids),
            np.concatenate(([0], np.cumsum(lens))),
            block_size=parts[0].block_size,
            has_hash_ids=all(w.has_hash_ids for w in parts),
            source=" + ".join(str(w.source) for w in parts),
        )
        order = np.argsort(merged.arrival_ms, kind="stable")
        return merged._take(order)

    def __add__(self, other: object) -> Workload:
        """Superpose two workloads by arrival time (``Workload.concat([a, b])``)."""
        if not isinstance(other, Workload):
            return NotImplemented
        return Workload.concat([self, other])

    def __eq__(self, other: object) -> bool:
        """Same requests, columns, hash ids and block size.

        The provenance column ``line`` is ignored, so a workload equals its
        own round trip through a file.
        """
        if not isinstance(other, Workload):
            return NotImplemented
        return (
            self._block_size == other._block_size
            and self._has_hash_ids == other._has_hash_ids
            and np.array_equal(self._hash_ids, other._hash_ids)
            and np.array_equal(self._offsets, other._offsets)
            and self._frame.drop(columns="line", errors="ignore").equals(
                other._frame.drop(columns="line", errors="ignore")
            )
        )

    __hash__ = None  # type: ignore[assignment]

    # ---------------------------------------------------------------- export
    def to_mooncake(self, path: str | PathLike[str] | IO[Any], *, exact: bool = False) -> None:
        """Write the workload as a Mooncake JSON-lines trace that NVIDIA AIPerf reads as it is.

        Whole-ms integer timestamps and string session ids, as AIPerf's
        ``MooncakeTrace`` model takes them; ``exact=True`` keeps sub-ms
        arrivals and session-id types for an exact round trip instead. See
        :func:`inferasim.workload.mooncake.write_mooncake`.

        Examples
        --------
        >>> import io
        >>> buf = io.StringIO()
        >>> Workload.from_requests([0], [600], [3], [[0, 1]]).to_mooncake(buf)
        >>> buf.getvalue()
        '{"timestamp":0,"input_length":600,"output_length":3,"hash_ids":[0,1]}\\n'
        """
        mooncake.write_mooncake(self._columns(), path, exact=exact)

    def to_bailian(self, path: str | PathLike[str] | IO[Any]) -> None:
        """Write the workload in the Bailian format; see :func:`inferasim.workload.bailian.write_bailian`.

        Examples
        --------
        >>> import io
        >>> wl = Workload.from_requests([0], [20], [4], [[7, 8]], block_size=16, chat_id=[5],
        ...                             parent_chat_id=[-1], session_id=[5], turn=[1],
        ...                             type=["text"])
        >>> buf = io.StringIO()
        >>> wl.to_bailian(buf)
        >>> _ = buf.seek(0)
        >>> Workload.from_bailian(buf).frame[["chat_id", "session_id", "type"]].values.tolist()
        [[5, 5, 'text']]
        """
        bailian.write_bailian(self._columns(), path)

    def to_csv(self, path: str | PathLike[str] | IO[Any]) -> None:
        """Write the workload as CSV that :meth:`from_csv` reads back exactly.

        Hash ids go in a ``hash_ids`` column as space-separated integers.

        Examples
        --------
        >>> import io
        >>> buf = io.StringIO()
        >>> wl = Workload.from_requests([0, 1.5], [600, 10], [3, 1], [[0, 1], [0]])
        >>> wl.to_csv(buf)
        >>> _ = buf.seek(0)
        >>> Workload.from_csv(buf) == wl
        True
        """
        tabular.write_table(self._columns(), path)


def _check_arrivals(arrival: np.ndarray, what: str, error: type[ValueError] = WorkloadError) -> None:
    """Every arrival finite and within ``MAX_ARRIVAL_SPAN_MS`` of 0: the workload invariant.

    Beyond that float64 milliseconds lose the resolution that time-to-first
    token and step times need (``1e18 + 5 == 1e18``).
    """
    if arrival.size and not float(np.max(np.abs(arrival))) <= MAX_ARRIVAL_SPAN_MS:
        i = int(np.flatnonzero(~(np.abs(arrival) <= MAX_ARRIVAL_SPAN_MS))[0])
        raise error(
            f"{what}: arrival {float(arrival[i]):.4g} ms of request {i} is not a finite time within 2**43 ms "
            "(about 278 years) of 0, where float64 ms keep microsecond resolution; "
            "subtract the first arrival (rebase) or use a smaller factor"
        )


def _pair(values: np.ndarray) -> str:
    """``"mean / max"`` of integer lengths, as integers ('-' when empty)."""
    if not values.size:
        return "-"
    return f"{round(float(values.mean())):,} / {int(values.max()):,}"


def _warn(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=3)
