"""Exceptions raised by inferasim."""

from __future__ import annotations

__all__ = ["WorkloadError", "TraceNotFoundError"]


class WorkloadError(ValueError):
    """A workload source is malformed.

    The message names the source (file path or ``<buffer>``), the 1-based line
    (or record) and the field at fault, so the user can open the file there.

    Parameters
    ----------
    message : str
        What is wrong.
    source : str, optional
        The file, or ``"<buffer>"`` for an in-memory source.
    line : int, optional
        1-based line (JSON lines, CSV) or record number (JSON array).
    field : str, optional
        The field (column or key) at fault.

    Examples
    --------
    >>> err = WorkloadError("must be >= 0, got -3", source="t.jsonl", line=4, field="input_length")
    >>> str(err)
    "t.jsonl, line 4, field 'input_length': must be >= 0, got -3"
    >>> isinstance(err, ValueError)
    True
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        unit: str = "line",
    ) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.reason = message
        where = []
        if source is not None:
            where.append(str(source))
        if line is not None:
            where.append(f"{unit} {line}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(", ".join(where) + ": " + message if where else message)


class TraceNotFoundError(FileNotFoundError):
    """A named trace is not on disk and could not be downloaded.

    Examples
    --------
    >>> issubclass(TraceNotFoundError, FileNotFoundError)
    True
    """
