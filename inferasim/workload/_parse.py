"""Reading raw sources and validating their columns, shared by the file readers.

Every check is vectorised over a whole column and only falls back to Python
to find the first bad row, so the error names the source, the 1-based line
(or record) and the field.
"""

from __future__ import annotations

import gzip
import re
import warnings
import zlib
from os import PathLike, fspath
from typing import IO, Any

import numpy as np
import orjson

from inferasim.errors import WorkloadError
from inferasim.workload._json_structure import (
    Structure,
    check_duplicate_keys,
    lines_are_whole,
    structure,
)

__all__ = [
    "MAX_ARRIVAL_SPAN_MS",
    "excerpt",
    "read_bytes",
    "arrival_column",
    "datetime_column",
    "is_datetime_column",
    "parse_json_records",
    "number_column",
    "length_column",
    "sort_by_arrival",
    "warn_inconsistent",
    "fits_int64",
]


#: Arrivals of one workload must lie within this many ms of each other (and
#: within it of 0): 2**43 ms is about 278 years, where float64 milliseconds
#: still resolve 2 microseconds. Beyond it times added to an arrival (TTFT,
#: step times) would be rounded away.
MAX_ARRIVAL_SPAN_MS = float(2**43)


def excerpt(value: Any, limit: int = 40) -> str:
    """A short printable excerpt of a value from a file, for error messages.

    Examples
    --------
    >>> excerpt("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."
    >>> excerpt("ab")
    "'ab'"
    """
    text = repr(value)
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_bytes(path_or_buffer: str | PathLike[str] | IO[Any]) -> tuple[bytes, str]:
    """Read a file, path or buffer into bytes, un-gzipping if needed.

    Returns the bytes and a name for error messages.

    Examples
    --------
    >>> import io
    >>> read_bytes(io.StringIO("abc"))
    (b'abc', '<buffer>')
    """
    if hasattr(path_or_buffer, "read"):
        data = path_or_buffer.read()  # type: ignore[union-attr]
        name = str(getattr(path_or_buffer, "name", "<buffer>"))
    else:
        name = fspath(path_or_buffer)  # type: ignore[arg-type]
        try:
            with open(name, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            from inferasim.workload.traces import missing_source_message

            raise FileNotFoundError(missing_source_message(name)) from None
        except IsADirectoryError:
            raise WorkloadError(
                "is a directory, not a workload file (give the path of a .jsonl, .json or .csv file)",
                source=name,
            ) from None
    if isinstance(data, str):
        data = data.encode()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise WorkloadError(f"corrupt gzip data: {excerpt(str(exc), 80)}", source=name) from None
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
    if not data.strip():
        raise WorkloadError("empty file: no requests", source=name)
    return data, name


def parse_json_records(data: bytes, source: str) -> tuple[list[Any], np.ndarray, str]:
    """Parse a JSON array or JSON lines into a list of objects.

    Returns the records, their 1-based line (JSON lines) or record number
    (JSON array), and the unit word (``"line"`` or ``"record"``). Blank
    lines are skipped; line numbers still count them. Each line of JSON
    lines must be valid JSON on its own, and no object may give a key twice
    (see :mod:`inferasim.workload._json_structure`).

    Examples
    --------
    >>> recs, lines, unit = parse_json_records(b'{"a": 1}\\n\\n{"a": 2}\\n', "t")
    >>> recs, lines.tolist(), unit
    ([{'a': 1}, {'a': 2}], [1, 3], 'line')
    """
    shape: Structure | None = None  # (the structure of data, once computed)
    stripped = data.lstrip()
    if stripped[:1] == b"[":
        try:
            records = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            line = data[: exc.pos].count(b"\n") + 1 if exc.pos is not None else None
            raise WorkloadError(f"malformed JSON: {exc.msg}", source=source, line=line) from None
        if not isinstance(records, list):
            raise WorkloadError("expected a JSON array of objects", source=source)
        lines = np.arange(1, len(records) + 1, dtype=np.int64)
        unit = "record"
    else:
        raw = data.rstrip().split(b"\n")
        try:  # fast path: one parse of the whole file, one record per line
            records = orjson.loads(b"[" + b",".join(raw) + b"]")
            if len(records) != len(raw):  # e.g. "{...},{...}" on one line
                raise orjson.JSONDecodeError("not one object per line", "", 0)
            shape = structure(data)
            if not lines_are_whole(shape):  # lines invalid alone, valid once joined
                raise orjson.JSONDecodeError("a value spans lines", "", 0)
            lines = np.arange(1, len(records) + 1, dtype=np.int64)
        except orjson.JSONDecodeError:
            records, numbers = [], []
            for number, text in enumerate(raw, start=1):
                if not text.strip():
                    continue
                try:
                    records.append(orjson.loads(text))
                except orjson.JSONDecodeError as exc:
                    raise WorkloadError(
                        f"malformed JSON: {exc.msg}: {excerpt(text[:60])}", source=source, line=number
                    ) from None
                numbers.append(number)
            lines = np.asarray(numbers, dtype=np.int64)
        unit = "line"
    if not records:
        raise WorkloadError("no requests in file", source=source)
    _check_underflow(data, source)
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise WorkloadError(
                f"expected a JSON object, got {type(rec).__name__}",
                source=source,
                line=int(lines[i]),
                unit=unit,
            )
    check_duplicate_keys(data, records, lines, unit, source, shape)
    return records, lines, unit


_TINY = re.compile(rb"(-?[0-9]+(?:\\.[0-9]*)?[eE]-[0-9]{3,})")


def _check_underflow(data: bytes, source: str) -> None:
    """Reject a JSON number written non-zero that float64 reads as zero (``1e-400``)."""
    if b"e-" not in data and b"E-" not in data:  # a byte search; almost every file stops here
        return
    for match in _TINY.finditer(data):
        token = match.group(1)
        mantissa = token.split(b"e")[0].split(b"E")[0]
        if float(token) == 0.0 and mantissa.strip(b"-0.") != b"":
            raise WorkloadError(
                f"the number {excerpt(token.decode())} underflows to 0 in float64; write 0 or a larger value",
                source=source, line=data[: match.start()].count(b"\n") + 1,
            )


def _first_bad(values: list[Any], ok: np.ndarray) -> int:
    return int(np.flatnonzero(~ok)[0])


def number_column(
    values: list[Any], field: str, lines: np.ndarray, source: str, unit: str
) -> np.ndarray:
    """Validate a column of JSON/CSV numbers into ``float64``: finite, not bool.

    Examples
    --------
    >>> number_column([0, 1.5], "timestamp", np.array([1, 2]), "t", "line")
    array([0. , 1.5])
    >>> number_column([0, "x"], "timestamp", np.array([1, 2]), "t", "line")
    Traceback (most recent call last):
    ...
    inferasim.errors.WorkloadError: t, line 2, field 'timestamp': not a number: 'x'
    """
    types = set(map(type, values))
    if not types <= {int, float}:
        ok = np.fromiter((type(v) in (int, float) for v in values), dtype=bool, count=len(values))
        i = _first_bad(values, ok)
        what = "missing value" if values[i] in (None, "") else f"not a number: {excerpt(values[i])}"
        raise WorkloadError(what, source=source, line=int(lines[i]), field=field, unit=unit)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except OverflowError:
        ok = np.fromiter((abs(v) < 2**1000 for v in values), dtype=bool, count=len(values))
        i = _first_bad(values, ok)
        raise WorkloadError(
            f"number out of range: {excerpt(values[i])}", source=source, line=int(lines[i]), field=field, unit=unit
        ) from None
    finite = np.isfinite(arr)
    if not finite.all():
        i = _first_bad(values, finite)
        raise WorkloadError(
            f"not a finite number: {values[i]!r}", source=source, line=int(lines[i]), field=field, unit=unit
        )
    return arr


def arrival_column(
    values: list[Any], field: str, lines: np.ndarray, source: str, unit: str
) -> np.ndarray:
    """Validate arrival times and rebase them so the earliest is 0 ms (``float64``).

    Integer timestamps are rebased in integers before the float conversion,
    so epoch-style values (``1700000000000000001``) keep their differences.
    The rebased times must stay within :data:`MAX_ARRIVAL_SPAN_MS`.

    Examples
    --------
    >>> arrival_column([1700000000000000100, 1700000000000000001], "t", np.array([1, 2]), "f", "line")
    array([99.,  0.])
    >>> arrival_column([0, 1e300], "t", np.array([1, 2]), "f", "line")
    Traceback (most recent call last):
    ...
    inferasim.errors.WorkloadError: f, line 2, field 't': 1e+300 ms after the earliest arrival; ...
    """
    if values and set(map(type, values)) == {int}:
        lo, hi = min(values), max(values)
        if -(2**63) <= lo and hi < 2**63 and hi - lo < 2**63:
            arr = (np.asarray(values, dtype=np.int64) - np.int64(lo)).astype(np.float64)
        else:
            arr = np.asarray([float(min(v - lo, 2**1000)) for v in values])
    else:
        arr = number_column(values, field, lines, source, unit)
        with np.errstate(over="ignore", invalid="ignore"):
            arr = arr - arr.min()
    too_far = ~(arr <= MAX_ARRIVAL_SPAN_MS)
    if too_far.any():
        i = int(np.flatnonzero(too_far)[0])
        raise WorkloadError(
            f"{arr[i]:.4g} ms after the earliest arrival; arrivals must lie within 2**43 ms "
            "(about 278 years) of each other so float64 ms keep microsecond resolution",
            source=source, line=int(lines[i]), field=field, unit=unit,
        )
    return arr


_DATETIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)"
    r"(Z|[+-]\d{2}:?\d{2})?",
    re.ASCII,
)


def is_datetime_column(values: list[Any]) -> bool:
    """Whether the first value is a date and time string (the column is then read as one).

    Examples
    --------
    >>> is_datetime_column(["2023-11-16 18:17:03.9799600"]), is_datetime_column([5, 6])
    (True, False)
    """
    return bool(values) and isinstance(values[0], str) and _DATETIME.fullmatch(values[0].strip()) is not None


def datetime_column(
    values: list[Any], field: str, lines: np.ndarray, source: str, unit: str
) -> np.ndarray:
    """Date-time strings to ms after the earliest, exactly (``float64``).

    Each value is ``YYYY-MM-DD HH:MM[:SS[.f...]]`` (``T`` may separate date
    and time) with up to 9 fractional digits, read exactly to the nanosecond
    (:class:`numpy.datetime64`) and rebased in integer nanoseconds before the
    conversion to ms, so 7-digit Azure timestamps keep their 100 ns steps.

    Time zones: a value without an offset is taken as written (every value
    in the same, unstated zone; no conversion); a value with ``Z`` or
    ``+HH:MM`` is converted to UTC first. Mixing the two is an error (their
    differences would be meaningless), as is any value that is not a date and
    time; the message names the line.

    Examples
    --------
    >>> datetime_column(["2023-11-16 18:17:03.9799600", "2023-11-16 18:17:04.0000001"],
    ...                 "TIMESTAMP", np.array([2, 3]), "f", "line")
    array([ 0.    , 20.0401])
    >>> datetime_column(["2024-01-01T10:00:00+01:00", "2024-01-01T09:00:01Z"],
    ...                 "t", np.array([2, 3]), "f", "line")
    array([   0., 1000.])
    """
    n = len(values)
    stamps = []
    offsets = np.zeros(n, dtype=np.int64)  # ns to subtract (UTC = local - offset)
    aware: bool | None = None
    for i, v in enumerate(values):
        m = _DATETIME.fullmatch(v.strip()) if isinstance(v, str) else None
        if m is None:
            what = "missing value" if v in (None, "") else f"not a date and time: {excerpt(v)}"
            raise WorkloadError(what, source=source, line=int(lines[i]), field=field, unit=unit)
        tz = m.group(3)
        if aware is None:
            aware = tz is not None
        elif aware != (tz is not None):
            raise WorkloadError(
                f"{excerpt(v)} {'has' if tz else 'lacks'} a time zone, unlike {unit} "
                f"{int(lines[0])}; give every arrival an offset or none",
                source=source, line=int(lines[i]), field=field, unit=unit,
            )
        if tz and tz != "Z":
            sign = 1 if tz[0] == "+" else -1
            hh, mm = int(tz[1:3]), int(tz[-2:])
            offsets[i] = sign * (hh * 3600 + mm * 60) * 10**9
        stamps.append(f"{m.group(1)}T{m.group(2)}")
    try:
        ns = np.array(stamps, dtype="datetime64[ns]").astype(np.int64) - offsets
    except ValueError:
        for i, text in enumerate(stamps):
            try:
                np.datetime64(text, "ns")
            except ValueError:
                raise WorkloadError(
                    f"not a valid date and time: {excerpt(values[i])}",
                    source=source, line=int(lines[i]), field=field, unit=unit,
                ) from None
        raise
    arr = (ns - ns.min()).astype(np.float64) / 1e6
    too_far = ~(arr <= MAX_ARRIVAL_SPAN_MS)
    if too_far.any():
        i = int(np.flatnonzero(too_far)[0])
        raise WorkloadError(
            f"{arr[i]:.4g} ms after the earliest arrival; arrivals must lie within 2**43 ms",
            source=source, line=int(lines[i]), field=field, unit=unit,
        )
    return arr


def length_column(
    values: list[Any], field: str, lines: np.ndarray, source: str, unit: str
) -> np.ndarray:
    """Validate a column of token lengths into ``int64``: whole numbers >= 0.

    Examples
    --------
    >>> length_column([3, 4.0], "input_length", np.array([1, 2]), "t", "line")
    array([3, 4])
    >>> length_column([3, -1], "input_length", np.array([1, 2]), "t", "line")
    Traceback (most recent call last):
    ...
    inferasim.errors.WorkloadError: t, line 2, field 'input_length': must be >= 0, got -1
    """
    arr = number_column(values, field, lines, source, unit)
    whole = arr == np.floor(arr)
    if not whole.all():
        i = _first_bad(values, whole)
        raise WorkloadError(
            f"must be a whole number of tokens, got {excerpt(values[i])}",
            source=source, line=int(lines[i]), field=field, unit=unit,
        )
    in_range = np.abs(arr) < 2.0**62
    if not in_range.all():
        i = _first_bad(values, in_range)
        raise WorkloadError(
            f"out of range for a token count: {excerpt(values[i])}",
            source=source, line=int(lines[i]), field=field, unit=unit,
        )
    nonneg = arr >= 0
    if not nonneg.all():
        i = _first_bad(values, nonneg)
        raise WorkloadError(
            f"must be >= 0, got {excerpt(values[i])}", source=source, line=int(lines[i]), field=field, unit=unit
        )
    return arr.astype(np.int64)


def sort_by_arrival(arrival: np.ndarray, source: str) -> np.ndarray | None:
    """The stable order that sorts ``arrival``, or None when already sorted (warns if not).

    Examples
    --------
    >>> sort_by_arrival(np.array([0.0, 1.0]), "t") is None
    True
    """
    if arrival.size < 2 or bool(np.all(arrival[1:] >= arrival[:-1])):
        return None
    warnings.warn(
        f"{source}: arrivals are not in time order; sorted them (stable), "
        "the 'line' column keeps each request's source line",
        UserWarning,
        stacklevel=4,
    )
    return np.argsort(arrival, kind="stable")



def warn_inconsistent(count: int, source: str, block_size: int) -> None:
    """Warn that ``count`` requests have an id count other than ``ceil(input_len / block_size)``.

    Examples
    --------
    >>> warn_inconsistent(0, "t", 512)  # nothing to say
    """
    if count:
        warnings.warn(
            f"{source}: {count} request(s) have len(hash_ids) != ceil(input_length / {block_size}); "
            "kept as they are (see describe()['inconsistent_blocks'])",
            UserWarning,
            stacklevel=4,
        )


def fits_int64(values: list[int]) -> bool:
    """Whether every Python int fits a signed 64-bit integer.

    Examples
    --------
    >>> fits_int64([0, -(2**63), 2**63 - 1]), fits_int64([2**63])
    (True, False)
    """
    return all(-(2**63) <= v < 2**63 for v in values)
