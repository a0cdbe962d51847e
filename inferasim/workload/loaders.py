"""Open any workload source by name: a FAST'25 trace name, a file, or the default synthetic mix.

Shared by the command-line interface (whose options live in
:mod:`inferasim._cli_workload`) and by notebooks that take a source as a
parameter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from inferasim.errors import WorkloadError
from inferasim.workload._parse import parse_json_records, read_bytes
from inferasim.workload.core import Workload
from inferasim.workload.tabular import ALIASES

__all__ = ["DEFAULT_SYNTHETIC", "load_workload"]

#: The embedded default workload: a seeded synthetic mix with a 16-prefix Zipf
#: pool (system prompts shared by many requests), so every command works offline.
DEFAULT_SYNTHETIC: dict[str, Any] = {
    "num_requests": 2000,
    "rate": 8.0,
    "arrival": "gamma",
    "burstiness": 0.5,
    "input_len": 2048,
    "output_len": 128,
    "range_ratio": 0.5,
    "num_prefixes": 16,
    "prefix_len": 4096,
    "prefix_zipf": 1.0,
    "seed": 0,
}


def _looks_like_mooncake(path: Path) -> bool:
    """Whether a JSON file's first record carries hash ids (else it is a length file).

    Malformed or empty files answer True so the Mooncake reader reports them
    with the file, line and field.
    """
    data, source = read_bytes(path)
    head = data.lstrip()
    if head[:1] == b"[":
        records, _, _ = parse_json_records(data, source)
        first = records[0]
    else:
        try:
            first = orjson.loads(head.split(b"\n", 1)[0])
        except orjson.JSONDecodeError:
            return True
    if not isinstance(first, dict):
        return True
    return bool({str(k).lower() for k in first} & set(ALIASES["hash_ids"]))


def load_workload(source: str | Path | None = None, **synthetic: Any) -> Workload:
    """Open a workload from a trace name, a file path, or the default synthetic mix.

    Parameters
    ----------
    source : str or path, optional
        ``"conversation"``, ``"synthetic"`` or ``"toolagent"`` (FAST'25
        traces, see :mod:`inferasim.workload.traces`); a ``.csv`` file
        (:meth:`Workload.from_csv`); a JSON/JSON-lines file, read as a
        Mooncake trace when its records carry hash ids and as a length file
        otherwise. ``None`` gives the synthetic workload
        :data:`DEFAULT_SYNTHETIC` updated with ``synthetic``.
    **synthetic
        Overrides of :data:`DEFAULT_SYNTHETIC` (only with ``source=None``).

    Returns
    -------
    Workload

    Examples
    --------
    >>> len(load_workload(num_requests=50))
    50
    """
    if source is None:
        return Workload.from_synthetic(**{**DEFAULT_SYNTHETIC, **synthetic})
    if synthetic:
        raise ValueError("synthetic options apply only when no source is given")
    from inferasim.workload.traces import is_trace_name, missing_source_message

    path = Path(source)
    if is_trace_name(str(source)):
        return Workload.from_mooncake(str(source))
    if path.is_dir():
        raise WorkloadError("is a directory, not a workload file", source=str(path))
    if not path.exists():
        raise FileNotFoundError(missing_source_message(source))
    suffixes = [s.lower() for s in path.suffixes]
    if ".csv" in suffixes:
        return Workload.from_csv(path)
    if _looks_like_mooncake(path):
        return Workload.from_mooncake(path)
    return Workload.from_csv(path)
