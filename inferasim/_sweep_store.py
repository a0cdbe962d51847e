"""The sweep store: a folder of one-row Parquet files, written crash-safe.

Each finished run is one file ``part-<key>.parquet``:

- **Atomic.** It is written under a temporary name (``.part-<key>.<pid>.tmp``,
  which no reader looks at), flushed to disk (``fsync``), then renamed into
  place (``os.replace``, atomic on POSIX and Windows); the folder is synced
  too. A sweep killed at any instant leaves whole parts or none.
- **Checked on resume.** The file's Parquet metadata holds
  ``inferasim.row_sha256``: the sha256 of the row's values as Arrow stores
  them. A part is used only when pyarrow can read it, it holds one row,
  its ``key`` column equals the key in its name and the digest matches
  (parts written before the digest existed are checked without it).
- **A bad part is named and set aside.** A truncated, corrupted or
  mismatching part is moved to ``<store>/quarantine/`` with a
  :class:`StoreWarning` naming it and saying why; its run is then simply
  missing, so the sweep runs it again (and only it).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

__all__ = ["StoreWarning", "require_pyarrow", "store_dir", "read_rows", "write_row"]

_DIGEST_KEY = b"inferasim.row_sha256"
QUARANTINE = "quarantine"


class StoreWarning(UserWarning):
    """A part of a sweep store could not be used (it names the file and why).

    Examples
    --------
    >>> issubclass(StoreWarning, UserWarning)
    True
    """


def require_pyarrow() -> None:
    """Raise ImportError with the install hint when pyarrow is missing.

    Examples
    --------
    >>> require_pyarrow()  # pyarrow is installed here
    """
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ImportError("store= needs pyarrow: pip install 'inferasim[parquet]'") from None


def store_dir(store: str | os.PathLike[str]) -> Path:
    """The store folder (it may not exist yet); a path that is a file is refused.

    Examples
    --------
    >>> store_dir("runs.parquet").name
    'runs.parquet'
    """
    path = Path(store)
    if path.exists() and not path.is_dir():
        raise ValueError(
            f"store {str(path)!r} is a file; a sweep store is a folder of Parquet files "
            "(a Parquet dataset): give a new path"
        )
    return path


def _row_digest(table: Any) -> str:
    """sha256 of a table's rows as Python values (floats exactly, by repr)."""
    text = json.dumps(table.to_pylist(), sort_keys=True, default=repr, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_part(part: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """(rows, "") for a good part, (None, why) for a bad one."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(part)
    except Exception as exc:  # ArrowInvalid, OSError: truncated, not Parquet, unreadable
        return None, f"unreadable ({type(exc).__name__}: {exc})"
    if table.num_rows != 1:
        return None, f"not one run (it holds {table.num_rows} rows)"
    if "key" not in table.column_names:
        return None, "without a 'key' column"
    key = str(table.column("key")[0].as_py())
    if part.name != f"part-{key}.parquet":
        return None, f"the run with key {key}, not the one its name says"
    meta = table.schema.metadata or {}
    if _DIGEST_KEY in meta:
        stored = meta[_DIGEST_KEY].decode()
        plain = table.replace_schema_metadata(None)
        if _row_digest(plain) != stored:
            return None, "corrupted: its values fail the content check (not the ones written)"
    return table.to_pandas().to_dict("records"), ""


def _quarantine(path: Path, part: Path, why: str) -> None:
    folder = path / QUARANTINE
    folder.mkdir(exist_ok=True)
    dest = folder / part.name
    n = 1
    while dest.exists():
        dest = folder / f"{part.stem}.{n}{part.suffix}"
        n += 1
    try:
        os.replace(part, dest)
        where = f"moved to {dest}"
    except OSError as exc:  # read-only store: skip it in place
        where = f"left in place (could not move it: {exc})"
    warnings.warn(
        f"sweep store part {part} is {why}: {where}; its run is missing and runs again",
        StoreWarning,
        stacklevel=4,
    )


def read_rows(path: Path, *, quarantine: bool) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    """The good rows of a store by key, and the bad parts found.

    With ``quarantine`` a bad part is moved to ``<store>/quarantine/``;
    without, it is skipped. Either way a :class:`StoreWarning` names it.

    Examples
    --------
    >>> import tempfile
    >>> read_rows(Path(tempfile.mkdtemp()) / "none", quarantine=False)
    ({}, [])
    """
    rows: dict[str, dict[str, Any]] = {}
    bad: list[Path] = []
    if not path.is_dir():
        return rows, bad
    for part in sorted(path.glob("part-*.parquet")):
        records, why = _check_part(part)
        if records is None:
            bad.append(part)
            if quarantine:
                _quarantine(path, part, why)
            else:
                warnings.warn(
                    f"sweep store part {part} is {why}: skipped", StoreWarning, stacklevel=3
                )
            continue
        for rec in records:
            rows[str(rec["key"])] = {k: (v.item() if hasattr(v, "item") else v)
                                     for k, v in rec.items()}
    return rows, bad


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # (Windows cannot open a folder)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_row(path: Path, row: dict[str, Any]) -> None:
    """Write one run as ``part-<key>.parquet``: temporary file, fsync, rename.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_row(folder, {"replicas": 2, "p99": 1.5, "error": None, "key": "abc"})
    >>> rows, bad = read_rows(folder, quarantine=False)
    >>> rows["abc"]["p99"], bad
    (1.5, [])
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    final = path / f"part-{row['key']}.parquet"
    tmp = path / f".part-{row['key']}.{os.getpid()}.tmp"
    table = pa.Table.from_pandas(pd.DataFrame([row]), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[_DIGEST_KEY] = _row_digest(table.replace_schema_metadata(None)).encode()
    table = table.replace_schema_metadata(meta)
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path)
