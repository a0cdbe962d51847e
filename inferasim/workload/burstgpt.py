"""BurstGPT traces (HPMLL/BurstGPT): CSV of ChatGPT and GPT-4 requests via Azure OpenAI.

Columns: ``Timestamp`` (**seconds** from the trace start), ``Model``,
``Request tokens``, ``Response tokens``, ``Total tokens``, ``Log Type``
(``Conversation log`` or ``API log``). A request with zero response tokens
failed; it is kept, never dropped, with ``status`` ``"failed"`` (else
``"ok"``), so a replay can keep or filter it on purpose
(``wl.frame["status"] == "ok"``). No hash ids: BurstGPT carries no
prefix-reuse information.
"""

from __future__ import annotations

from os import PathLike
from typing import IO, Any

import numpy as np

from inferasim.workload._columns import Columns
from inferasim.workload.tabular import read_table

__all__ = ["read_burstgpt"]


def read_burstgpt(
    path_or_name: str | PathLike[str] | IO[Any], *, block_size: int = 512, verify: bool = True
) -> Columns:
    """Read a BurstGPT CSV into :class:`~inferasim.workload._columns.Columns`.

    Parameters
    ----------
    path_or_name : str, path or file-like
        A BurstGPT CSV, or the name of a known one (``"burstgpt_1"``,
        alias ``"burstgpt"``, ``"burstgpt_2"``, ``"burstgpt_3"``).
    block_size : int, default 512
        Tokens per block for the simulator (there are no hash ids).
    verify : bool, default True
        For a trace name: check the file found against its pinned sha256.

    Returns
    -------
    Columns
        ``arrival_ms`` (``Timestamp * 1000`` from the first request),
        ``input_len`` (``Request tokens``), ``output_len`` (``Response
        tokens``), the other columns as they are and ``status``.

    Examples
    --------
    >>> import io
    >>> text = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\\n"
    ...         "5,ChatGPT,472,18,490,Conversation log\\n"
    ...         "45,GPT-4,1087,0,1087,API log\\n")
    >>> cols = read_burstgpt(io.StringIO(text))
    >>> cols.arrival_ms, cols.output_len, cols.extra["status"].tolist()
    (array([    0., 40000.]), array([18,  0]), ['ok', 'failed'])
    """
    from inferasim.workload.traces import resolve_source

    source = resolve_source(path_or_name, "burstgpt", verify=verify)
    cols = read_table(source, block_size=block_size, time_unit="s")
    status = np.where(cols.output_len == 0, "failed", "ok").astype(object)
    extra = {k: v for k, v in cols.extra.items() if k != "line"}
    extra.update({"status": status, "line": cols.extra["line"]})
    return Columns(cols.arrival_ms, cols.input_len, cols.output_len, None, None, extra,
                   block_size=block_size, source=cols.source, where=cols.where)
