"""Find, verify and if needed fetch the public LLM serving traces by name.

Known traces (:data:`TRACES`, listed with :func:`list_traces`): the FAST'25
Mooncake traces, the Alibaba Bailian traces (ATC'25), the Azure LLM
inference traces (2023 and the 2024 week-long ones) and BurstGPT. Each
:class:`TraceInfo` says which reader loads it (``format``), its licence and
its upstream location; :meth:`Workload.from_trace <inferasim.Workload.from_trace>`
loads any of them by name.

The traces are data, not part of the package. :func:`find_trace` looks for
a trace, in order, in

1. ``$INFERASIM_TRACE_DIR``;
2. ``./traces/`` and ``../shared/traces/`` relative to the working
   directory, to its parent (so notebooks run from ``notebooks/`` find them
   too) and to the source checkout of an editable install;
3. the user cache directory (``pooch.os_cache("inferasim") / "traces"``);

and otherwise downloads it from its upstream location into the
cache with `pooch <https://www.fatiando.org/pooch/>`_ (sha256 registry,
temporary file moved in place only when the checksum matches, retries), a
progress bar, an overall deadline and a minimum transfer rate.

A file found on disk under a known name is checked against the pinned
sha256 wherever it was found (a truncated or edited copy is an error, not
a smaller trace); the verdict is cached by path, size and modification
time, in memory and in ``verified.json`` of the cache directory, so only
the first load of a file pays for hashing it. ``verify=False`` opts out.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

from inferasim.errors import TraceNotFoundError

__all__ = [
    "TraceInfo",
    "TRACES",
    "TraceChecksumError",
    "find_trace",
    "download_trace",
    "list_traces",
    "trace_dirs",
    "cache_dir",
    "sha256_of",
    "checkout_dir",
    "closest_trace",
    "missing_source_message",
]

UPSTREAM = "https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release/"

#: Overall deadline of one download attempt, seconds.
DOWNLOAD_TIMEOUT_S = 600.0
#: Minimum average rate (bytes/s) once ``DOWNLOAD_GRACE_S`` have passed.
DOWNLOAD_MIN_RATE = 8_192.0
DOWNLOAD_GRACE_S = 10.0
#: Further attempts after a failed download (network error or checksum mismatch).
DOWNLOAD_RETRIES = 2


#: Upstream folders of the other trace families.
BAILIAN = "https://media.githubusercontent.com/media/alibaba-edu/qwen-bailian-usagetraces-anon/main/"
AZURE_2023 = "https://raw.githubusercontent.com/Azure/AzurePublicDataset/master/data/"
AZURE_2024 = "https://azurepublicdatasettraces.blob.core.windows.net/azurellminfererencetrace/"
BURSTGPT = "https://media.githubusercontent.com/media/HPMLL/BurstGPT/main/data/"
BURSTGPT_RELEASE = "https://github.com/HPMLL/BurstGPT/releases/download/v1.2/"

#: The readers a trace's ``format`` names (``Workload.from_<format>``).
FORMATS = ("mooncake", "bailian", "azure", "burstgpt")


@dataclass(frozen=True)
class TraceInfo:
    """A known trace: name, file, size, pinned sha256, reader, licence and upstream URL.

    Parameters
    ----------
    name : str
        The name :func:`find_trace` and :meth:`Workload.from_trace
        <inferasim.Workload.from_trace>` accept.
    filename : str
        The file looked for in each search folder.
    requests : int or None
        Requests (lines) in the published file; None when not known.
    sha256 : str or None
        Pinned checksum; None when no copy was ever available to pin it
        (a download is then accepted, its sha256 printed so it can be pinned).
    url : str
        Upstream location.
    size_bytes : int or None
        Size of the published file in bytes, when known.
    aliases : tuple of str
        Other names for the same trace.
    format : str, default "mooncake"
        The reader (one of :data:`FORMATS`): ``"mooncake"``
        (:meth:`~inferasim.Workload.from_mooncake`), ``"bailian"``
        (:meth:`~inferasim.Workload.from_bailian`), ``"azure"``
        (:meth:`~inferasim.Workload.from_csv`), ``"burstgpt"``
        (:meth:`~inferasim.Workload.from_burstgpt`).
    license : str
        The data's licence.
    holds : str
        What the trace holds, in a few words.
    source : str
        Where it was published (repository and paper).

    Examples
    --------
    >>> TRACES["conversation"].requests
    12031
    >>> TRACES["arxiv"].filename
    'mooncake_trace.jsonl'
    >>> TRACES["azure_conv_2023"].format, TRACES["azure_conv_2023"].requests
    ('azure', 19366)
    """

    name: str
    filename: str
    requests: int | None
    sha256: str | None
    url: str
    size_bytes: int | None = None
    aliases: tuple[str, ...] = ()
    format: str = "mooncake"
    license: str = "Apache-2.0"
    holds: str = ""
    source: str = "kvcache-ai/Mooncake (FAST'25)"


_BAILIAN_SOURCE = "alibaba-edu/qwen-bailian-usagetraces-anon (ATC'25, KVCache Cache in the Wild)"
_BAILIAN_HOLDS = "{} requests, parent_chat_id session trees, type, 16-token hash ids"
_AZURE_2023_SOURCE = "Azure/AzurePublicDataset (Splitwise, ISCA 2024)"
_AZURE_2024_SOURCE = "Azure/AzurePublicDataset (DynamoLLM, HPCA 2025)"
_AZURE_HOLDS = "{}: date-time arrivals, context and generated tokens, no hash ids"

_KNOWN = (
    # Pinned from the copies in /work/shared/traces (identical to upstream;
    # sizes from `ls -l`).
    TraceInfo(
        "conversation",
        "conversation_trace.jsonl",
        12_031,
        "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
        UPSTREAM + "traces/conversation_trace.jsonl",
        3_029_533,
        holds="Kimi chat: arrivals (ms), lengths, 512-token hash ids",
    ),
    TraceInfo(
        "synthetic",
        "synthetic_trace.jsonl",
        3_993,
        "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
        UPSTREAM + "traces/synthetic_trace.jsonl",
        1_136_313,
        holds="synthetic mix: arrivals (ms), lengths, 512-token hash ids",
    ),
    # No checksum is pinned for the next two: neither file was ever available
    # on the machines this package was built on (no network), so a download is
    # accepted as is and its sha256 printed so the user can pin it. Request
    # counts (23,608 each) are from the valeriol29/mooncake-traces dataset card
    # on Hugging Face, which converted both upstream files.
    TraceInfo(
        "toolagent",
        "toolagent_trace.jsonl",
        23_608,
        None,
        UPSTREAM + "traces/toolagent_trace.jsonl",
        holds="Kimi tool and agent calls: arrivals (ms), lengths, 512-token hash ids",
    ),
    # The historical single-file release of the arXiv technical report
    # (July 2024; first at the repository root, now under FAST25-release/).
    TraceInfo(
        "arxiv",
        "mooncake_trace.jsonl",
        23_608,
        None,
        UPSTREAM + "arxiv-trace/mooncake_trace.jsonl",
        aliases=("mooncake",),
        holds="the arXiv report's trace: arrivals (ms), lengths, 512-token hash ids",
    ),
    # Bailian (Qwen) traces: Git LFS objects, so the upstream URL is GitHub's
    # media host. The sha256 and sizes of the coder and thinking files are the
    # `oid sha256:` and `size` of their LFS pointer files in the repository
    # (an LFS oid is the sha256 of the content); the pointers of traces A and
    # B were not available, so those two are not pinned. Request counts: not
    # known without the files.
    TraceInfo(
        "bailian_traceA", "qwen_traceA_blksz_16.jsonl", None, None,
        BAILIAN + "qwen_traceA_blksz_16.jsonl", format="bailian",
        holds=_BAILIAN_HOLDS.format("to-C chat"), source=_BAILIAN_SOURCE,
    ),
    TraceInfo(
        "bailian_traceB", "qwen_traceB_blksz_16.jsonl", None, None,
        BAILIAN + "qwen_traceB_blksz_16.jsonl", format="bailian",
        holds=_BAILIAN_HOLDS.format("to-B API"), source=_BAILIAN_SOURCE,
    ),
    TraceInfo(
        "bailian_coder", "qwen_coder_blksz_16.jsonl", None,
        "3d74974cebb7bccb69b1ca6ea210a44d9a3033443c0271ed015327284dea1aff",
        BAILIAN + "qwen_coder_blksz_16.jsonl", 132_054_902, format="bailian",
        holds=_BAILIAN_HOLDS.format("coder"), source=_BAILIAN_SOURCE,
    ),
    TraceInfo(
        "bailian_thinking", "qwen_thinking_blksz_16.jsonl", None,
        "41ac36d9d1b54d084eeb6b05e9d142ba9d02f8bf79cfc9fff418d8ab7cdee906",
        BAILIAN + "qwen_thinking_blksz_16.jsonl", 27_901_454, format="bailian",
        holds=_BAILIAN_HOLDS.format("thinking"), source=_BAILIAN_SOURCE,
    ),
    # Azure 2023: pinned from the copies in /work/shared/traces (README there).
    TraceInfo(
        "azure_code_2023", "AzureLLMInferenceTrace_code.csv", 8_819,
        "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
        AZURE_2023 + "AzureLLMInferenceTrace_code.csv", 320_117,
        aliases=("azure_code",), format="azure", license="CC-BY-4.0",
        holds=_AZURE_HOLDS.format("one hour of code completion"), source=_AZURE_2023_SOURCE,
    ),
    TraceInfo(
        "azure_conv_2023", "AzureLLMInferenceTrace_conv.csv", 19_366,
        "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
        AZURE_2023 + "AzureLLMInferenceTrace_conv.csv", 719_188,
        aliases=("azure_conv",), format="azure", license="CC-BY-4.0",
        holds=_AZURE_HOLDS.format("one hour of conversation"), source=_AZURE_2023_SOURCE,
    ),
    # Azure 2024 (a week, May 2024): hosted on Azure blob storage (the links of
    # AzureLLMInferenceDataset2024Links.txt); never available here, not pinned.
    TraceInfo(
        "azure_code_2024", "AzureLLMInferenceTrace_code_1week.csv", None, None,
        AZURE_2024 + "AzureLLMInferenceTrace_code_1week.csv",
        aliases=("azure_code_1week",), format="azure", license="CC-BY-4.0",
        holds=_AZURE_HOLDS.format("a week of code completion"), source=_AZURE_2024_SOURCE,
    ),
    TraceInfo(
        "azure_conv_2024", "AzureLLMInferenceTrace_conv_1week.csv", None, None,
        AZURE_2024 + "AzureLLMInferenceTrace_conv_1week.csv",
        aliases=("azure_conv_1week",), format="azure", license="CC-BY-4.0",
        holds=_AZURE_HOLDS.format("a week of conversation"), source=_AZURE_2024_SOURCE,
    ),
    # BurstGPT (HPMLL/BurstGPT, checked at commit e92f533, February 2026): licence
    # CC-BY-4.0 (the repository's LICENSE: Creative Commons Attribution 4.0
    # International). BurstGPT_1.csv stays in data/ (Git LFS; sha256 and size from
    # its LFS pointer); the other parts left data/ in commit 8345c82 (July 2024)
    # for the v1.2 release assets, not pinned here (their bytes were not
    # available). Line counts from the upstream README, rounded there to 0.1k,
    # so no exact request count is recorded.
    TraceInfo(
        "burstgpt_1", "BurstGPT_1.csv", None,
        "4bb3783693d0a435686fbfc885615d2349bd067239079fa4b749f2e679e12122",
        BURSTGPT + "BurstGPT_1.csv", 52_283_111, aliases=("burstgpt",), format="burstgpt",
        license="CC-BY-4.0", source="HPMLL/BurstGPT",
        holds="ChatGPT/GPT-4 via Azure OpenAI, 2 months, ~1,429.7k requests: arrivals (s), "
        "tokens, model, log type, failures",
    ),
    TraceInfo(
        "burstgpt_2", "BurstGPT_2.csv", None, None,
        BURSTGPT_RELEASE + "BurstGPT_2.csv", format="burstgpt",
        license="CC-BY-4.0", source="HPMLL/BurstGPT",
        holds="BurstGPT's next 2 months, ~3,858.4k requests: arrivals (s), tokens, model, "
        "log type, failures",
    ),
    TraceInfo(
        "burstgpt_3", "BurstGPT_3.csv", None, None,
        BURSTGPT_RELEASE + "BurstGPT_3.csv", format="burstgpt",
        license="CC-BY-4.0", source="HPMLL/BurstGPT",
        holds="BurstGPT's later 110 days, ~5,344.0k requests: arrivals (s), tokens, model, "
        "log type, Session ID, Elapsed time, failures",
    ),
)

#: Known traces by name and alias.
TRACES: dict[str, TraceInfo] = {n: info for info in _KNOWN for n in (info.name, *info.aliases)}


class TraceChecksumError(ValueError):
    """A file found under a known trace's name does not match its pinned sha256.

    Examples
    --------
    >>> issubclass(TraceChecksumError, ValueError)
    True
    """


def cache_dir() -> Path:
    """The per-user cache directory traces are downloaded to.

    Examples
    --------
    >>> cache_dir().name
    'traces'
    """
    import pooch

    return Path(pooch.os_cache("inferasim")) / "traces"


def checkout_dir() -> Path | None:
    """The source checkout this package runs from (an editable install), else None.

    Examples
    --------
    >>> checkout_dir() is None or (checkout_dir() / "pyproject.toml").is_file()
    True
    """
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "inferasim").is_dir() else None


def trace_dirs() -> list[Path]:
    """Directories searched for traces, in order (see the module docstring).

    Examples
    --------
    >>> trace_dirs()[-1] == cache_dir()
    True
    """
    dirs: list[Path] = []
    env = os.environ.get("INFERASIM_TRACE_DIR")
    if env:
        dirs.append(Path(env).expanduser())
    cwd = Path.cwd()
    bases = [cwd, cwd.parent]
    checkout = checkout_dir()
    if checkout is not None:
        bases.append(checkout)
    for base in bases:
        dirs += [base / "traces", base.parent / "shared" / "traces"]
    dirs.append(cache_dir())
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def _info(name: str) -> TraceInfo:
    try:
        return TRACES[name]
    except KeyError:
        close = closest_trace(name)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise KeyError(f"unknown trace {name!r}{hint}; known: {sorted(TRACES)}") from None


def closest_trace(name: object) -> str | None:
    """The known trace ``name`` most likely means: a misspelt name or a trace's file name.

    Examples
    --------
    >>> closest_trace("conversaton"), closest_trace("conversation_trace.jsonl"), closest_trace("x.csv")
    ('conversation', 'conversation', None)
    """
    import difflib

    text = Path(str(name)).name
    for info in _KNOWN:
        if text == info.filename:
            return info.name
    match = difflib.get_close_matches(text.lower(), list(TRACES), n=1, cutoff=0.7)
    return match[0] if match else None


def missing_source_message(source: object) -> str:
    """One line for a workload source that is neither a file on disk nor a trace name.

    It says what was looked for and where (the file's full path), the trace
    it most likely means, and where to see the traces and their downloads.

    Examples
    --------
    >>> print(missing_source_message("conversaton"))  # doctest: +ELLIPSIS
    no workload file .../conversaton and no trace named 'conversaton' (did you mean 'conversation'?); traces: ...
    """
    close = closest_trace(source)
    hint = f" (did you mean {close!r}?)" if close else ""
    names = ", ".join(info.name for info in _KNOWN)
    return (
        f"no workload file {Path(str(source)).absolute()} and no trace named {str(source)!r}{hint}; "
        f"traces: {names} (`inferasim traces` lists where each is looked for and downloaded from)"
    )


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     _ = f.write(b"abc"); f.flush()
    ...     sha256_of(Path(f.name))[:16]
    'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ------------------------------------------------------------------ verification
_VERDICTS: dict[tuple[str, int, int], str] = {}


def _verdict_file() -> Path:
    return cache_dir() / "verified.json"


def _stat_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def _cached_sha(key: tuple[str, int, int]) -> str | None:
    if key in _VERDICTS:
        return _VERDICTS[key]
    try:
        stored = json.loads(_verdict_file().read_text())
        entry = stored.get(key[0])
        if entry and entry["size"] == key[1] and entry["mtime_ns"] == key[2]:
            _VERDICTS[key] = str(entry["sha256"])
            return _VERDICTS[key]
    except (OSError, ValueError, TypeError, KeyError):
        pass  # no cache yet, or unreadable: hash the file
    return None


def _remember_sha(key: tuple[str, int, int], digest: str) -> None:
    _VERDICTS[key] = digest
    path = _verdict_file()
    try:
        try:
            stored = json.loads(path.read_text())
            if not isinstance(stored, dict):
                stored = {}
        except (OSError, ValueError):
            stored = {}
        stored[key[0]] = {"size": key[1], "mtime_ns": key[2], "sha256": digest}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(stored, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs a re-hash next time


def verify_trace(path: Path, name: str) -> None:
    """Check ``path`` against the pinned sha256 of trace ``name`` (cached by path, size, mtime).

    Parameters
    ----------
    path : pathlib.Path
        The file found for the trace.
    name : str
        A key of :data:`TRACES`.

    Raises
    ------
    TraceChecksumError
        When the file's sha256 is not the pinned one; the message names the
        file and how to fix it. Traces with no pinned sha256 always pass.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d) / "conversation_trace.jsonl"
    ...     _ = p.write_text("{}\\n")
    ...     verify_trace(p, "conversation")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    inferasim.workload.traces.TraceChecksumError: .../conversation_trace.jsonl is not the published 'conversation' trace: ...
    """
    info = _info(name)
    if info.sha256 is None:
        return
    key = _stat_key(path)
    digest = _cached_sha(key)
    if digest is None:
        digest = sha256_of(path)
        _remember_sha(key, digest)
    if digest != info.sha256:
        size = f"{key[1]:,} bytes" + (f" (published: {info.size_bytes:,})" if info.size_bytes else "")
        raise TraceChecksumError(
            f"{path} is not the published {info.name!r} trace: its sha256 is {digest}, "
            f"expected {info.sha256}; {size}. The copy is truncated or edited. Delete it "
            f"(or replace it with {info.url}) to use the published trace, load it by path "
            f"(Workload.from_mooncake({str(path)!r})), or pass verify=False to use it as "
            f"{info.name!r} anyway."
        )


# ------------------------------------------------------------------ finding
def find_trace(name: str, *, download: bool = True, verify: bool = True) -> Path:
    """Path of a known trace by name, downloading it when it is nowhere on disk.

    Parameters
    ----------
    name : str
        A key of :data:`TRACES`: ``"conversation"``, ``"synthetic"``,
        ``"toolagent"``, ``"arxiv"`` (alias ``"mooncake"``), the Bailian,
        Azure and BurstGPT names (:func:`list_traces`).
    download : bool, default True
        Fetch from upstream into :func:`cache_dir` when not found.
    verify : bool, default True
        Check a file found on disk against the pinned sha256 (see
        :func:`verify_trace`). Downloads are always checked.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    TraceNotFoundError
        Not found and not downloadable (no network, too slow, or
        ``download=False``); the message lists where to put the file.
    TraceChecksumError
        The file found does not match the pinned sha256.

    Examples
    --------
    >>> "conversation" in TRACES
    True
    >>> find_trace("conversation").name  # doctest: +SKIP
    'conversation_trace.jsonl'
    """
    info = _info(name)
    path = _on_disk(info)
    if path is not None:
        if verify:
            verify_trace(path, name)
        return path
    if not download:
        raise TraceNotFoundError(_not_found_message(info, reason="download=False"))
    return download_trace(name)


def _on_disk(info: TraceInfo) -> Path | None:
    for d in trace_dirs():
        candidate = d / info.filename
        if candidate.is_file():  # a folder of that name is skipped, never an error
            return candidate
    return None


def is_trace_name(source: object) -> bool:
    """True when ``source`` names a known trace and no file of that name exists.

    A folder named like a trace does not shadow it.

    Examples
    --------
    >>> is_trace_name("conversation"), is_trace_name("x.jsonl"), is_trace_name(3)
    (True, False, False)
    """
    return isinstance(source, str) and source in TRACES and not Path(source).is_file()


def resolve_source(source: Any, fmt: str, *, verify: bool = True) -> Any:
    """``source`` itself, or the path of the known trace it names when its format is ``fmt``.

    Parameters
    ----------
    source : str, path or file-like
        What a reader was given.
    fmt : str
        The reader's format (one of :data:`FORMATS`).
    verify : bool, default True
        Check a found file against its pinned sha256.

    Raises
    ------
    ValueError
        When ``source`` names a known trace of another format; the message
        names the reader that loads it.

    Examples
    --------
    >>> resolve_source("my.csv", "azure")
    'my.csv'
    >>> resolve_source("azure_conv_2023", "mooncake")
    Traceback (most recent call last):
    ...
    ValueError: trace 'azure_conv_2023' is in the azure format: load it with Workload.from_csv('azure_conv_2023') or Workload.from_trace('azure_conv_2023')
    """
    if not is_trace_name(source):
        return source
    info = _info(str(source))
    if info.format != fmt:
        reader = {"mooncake": "from_mooncake", "bailian": "from_bailian", "azure": "from_csv",
                  "burstgpt": "from_burstgpt"}[info.format]
        raise ValueError(
            f"trace {source!r} is in the {info.format} format: load it with "
            f"Workload.{reader}({source!r}) or Workload.from_trace({source!r})"
        )
    return find_trace(str(source), verify=verify)


def list_traces() -> pd.DataFrame:
    """Known traces and where each was found, or where to put it, as a DataFrame.

    Never downloads or hashes anything: ``found`` is the first file of that
    name in the search folders (or empty) and ``verified`` says whether a
    cached verdict already vouches for it (``"pending"`` until first loaded).

    Returns
    -------
    pandas.DataFrame
        Indexed by name: ``file``, ``requests`` (``<NA>`` when not known),
        ``size_bytes``, ``sha256`` (empty when none is pinned), ``aliases``,
        ``format`` (the reader), ``license``, ``holds``, ``source``,
        ``found``, ``verified``, ``url``.

    Examples
    --------
    >>> df = list_traces()
    >>> list(df.index)[:4]
    ['conversation', 'synthetic', 'toolagent', 'arxiv']
    >>> int(df.loc["arxiv", "requests"]), df.loc["arxiv", "aliases"]
    (23608, 'mooncake')
    >>> df.loc["azure_conv_2023", ["format", "license"]].tolist()
    ['azure', 'CC-BY-4.0']
    """
    import pandas as pd

    rows = []
    for info in _KNOWN:
        path = _on_disk(info)
        if path is None:
            verified = ""
        elif info.sha256 is None:
            verified = "no pinned sha256"
        else:
            sha = _cached_sha(_stat_key(path))
            verified = "pending" if sha is None else ("yes" if sha == info.sha256 else "MISMATCH")
        rows.append(
            {
                "name": info.name,
                "file": info.filename,
                "requests": info.requests,
                "size_bytes": info.size_bytes,
                "sha256": info.sha256 or "",
                "aliases": ", ".join(info.aliases),
                "format": info.format,
                "license": info.license,
                "holds": info.holds,
                "source": info.source,
                "found": str(path) if path else "",
                "verified": verified,
                "url": info.url,
            }
        )
    frame = pd.DataFrame(rows).set_index("name")
    frame["requests"] = frame["requests"].astype("Int64")  # <NA> when not known
    frame["size_bytes"] = frame["size_bytes"].astype("Int64")
    return frame


def _not_found_message(info: TraceInfo, reason: str) -> str:
    """One line: the trace, the folders searched, why it was not downloaded, what to do.

    Examples
    --------
    >>> msg = _not_found_message(TRACES["synthetic"], "download=False")
    >>> msg.startswith("trace 'synthetic' (synthetic_trace.jsonl) is not in ") and len(msg.splitlines()) == 1
    True
    """
    places = ", ".join(str(d) for d in trace_dirs())
    return (
        f"trace {info.name!r} ({info.filename}) is not in {places} and was not downloaded "
        f"({reason}); download {info.url} into one of those folders, or set "
        f"$INFERASIM_TRACE_DIR to the folder that holds it"
    )


def _download_failure(exc: BaseException) -> str:
    """Why a download failed, in a few words (no nested exception reprs).

    Examples
    --------
    >>> _download_failure(OSError(2, "No such file or directory"))
    'No such file or directory'
    """
    import requests

    text = str(exc)
    if isinstance(exc, requests.exceptions.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code} {exc.response.reason}".strip()
    if isinstance(exc, requests.exceptions.Timeout):
        return "the server did not answer in time"
    if isinstance(exc, requests.exceptions.ConnectionError):
        url = getattr(exc.request, "url", None) or ""
        host = urllib.parse.urlparse(url).hostname or "the server"
        if "resolve" in text.lower() or "name or service" in text.lower():
            return f"no network: cannot resolve {host}"
        return f"cannot connect to {host}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return text.splitlines()[0][:120] if text else type(exc).__name__


# ------------------------------------------------------------------ downloading
class _TooSlow(Exception):
    """Raised by the downloader: deadline passed or rate below the minimum (not retried)."""


@dataclass
class _BoundedDownloader:
    """A pooch downloader with an overall deadline and a minimum average rate.

    Reads with ``read1`` (whatever bytes arrived, never waiting to fill a
    buffer), so a server trickling one byte at a time cannot hold it past
    the deadline. ``file://`` URLs are copied with the same limits.
    """

    timeout_s: float
    min_rate: float
    grace_s: float
    progressbar: bool

    def __call__(self, url: str, output_file: Any, pooch: Any, check_only: bool = False) -> None:
        start = time.monotonic()
        deadline = start + self.timeout_s
        if url.startswith("file:"):
            local = urllib.request.url2pathname(urllib.parse.urlparse(url).path)
            with open(local, "rb") as src:
                self._copy(src.read1, os.path.getsize(local), output_file, start, deadline)
            return
        import requests

        read_timeout = max(0.1, min(30.0, self.timeout_s))
        with requests.get(url, stream=True, timeout=(min(10.0, read_timeout), read_timeout)) as r:
            r.raise_for_status()
            total = int(r.headers.get("Content-Length") or 0) or None

            def read1(n: int) -> bytes:
                return r.raw.read1(n, decode_content=True)

            self._copy(read1, total, output_file, start, deadline)

    def _copy(self, read1: Any, total: int | None, output_file: Any, start: float, deadline: float) -> None:
        from tqdm.auto import tqdm

        got = 0
        with open(output_file, "wb") as out, tqdm(
            total=total, unit="B", unit_scale=True, disable=not self.progressbar, leave=False
        ) as bar:
            while True:
                chunk = read1(1 << 16)
                if not chunk:
                    return
                out.write(chunk)
                got += len(chunk)
                bar.update(len(chunk))
                now = time.monotonic()
                elapsed = now - start
                if now > deadline:
                    raise _TooSlow(
                        f"not finished within {self.timeout_s:g} s ({got:,} bytes received)"
                    )
                if elapsed > self.grace_s and got / elapsed < self.min_rate:
                    raise _TooSlow(
                        f"{got:,} bytes in {elapsed:.1f} s, below the minimum rate of "
                        f"{self.min_rate:,.0f} bytes/s"
                    )


def download_trace(
    name: str,
    dest_dir: str | os.PathLike[str] | None = None,
    *,
    url: str | None = None,
    timeout_s: float | None = None,
    min_rate: float | None = None,
    retries: int | None = None,
    progressbar: bool = True,
) -> Path:
    """Download a trace into ``dest_dir`` (default :func:`cache_dir`) with pooch and verify it.

    Parameters
    ----------
    name : str
        A key of :data:`TRACES`.
    dest_dir : path, optional
        Where to store the file.
    url : str, optional
        Override the upstream URL (a mirror, or a ``file://`` URL).
    timeout_s : float, optional
        Overall deadline of one attempt (default :data:`DOWNLOAD_TIMEOUT_S`).
    min_rate : float, optional
        Minimum average bytes/s after the first ``DOWNLOAD_GRACE_S`` seconds
        (default :data:`DOWNLOAD_MIN_RATE`).
    retries : int, optional
        Further attempts after a network error or a checksum mismatch
        (default :data:`DOWNLOAD_RETRIES`); a too-slow transfer is not retried.
    progressbar : bool, default True
        Show a tqdm progress bar.

    Returns
    -------
    pathlib.Path
        The verified file.

    Raises
    ------
    TraceNotFoundError
        When the download fails (no network, a server error, or slower than
        the deadline or minimum rate allow); the message says where to put
        the file by hand.
    ValueError
        When the sha256 does not match the pinned one; nothing is kept.

    Warns
    -----
    UserWarning
        When the trace has no pinned sha256: the downloaded file's sha256
        is printed (so it can be pinned) and given in the warning.

    Examples
    --------
    >>> sorted(n for n in TRACES if TRACES[n].format == "mooncake")  # some names it can fetch
    ['arxiv', 'conversation', 'mooncake', 'synthetic', 'toolagent']
    >>> download_trace("conversation")  # doctest: +SKIP
    PosixPath('/root/.cache/inferasim/traces/conversation_trace.jsonl')
    """
    import pooch
    import requests

    info = _info(name)
    dest = Path(dest_dir) if dest_dir is not None else cache_dir()
    source = url or info.url
    registry = {info.filename: None if info.sha256 is None else f"sha256:{info.sha256}"}
    fetcher = pooch.create(
        path=dest,
        base_url="",
        registry=registry,
        urls={info.filename: source},
        retry_if_failed=DOWNLOAD_RETRIES if retries is None else int(retries),
    )
    grace = DOWNLOAD_GRACE_S
    timeout = DOWNLOAD_TIMEOUT_S if timeout_s is None else float(timeout_s)
    downloader = _BoundedDownloader(
        timeout_s=timeout,
        min_rate=DOWNLOAD_MIN_RATE if min_rate is None else float(min_rate),
        grace_s=min(grace, timeout / 2),
        progressbar=progressbar,
    )
    # pooch logs each attempt ("Downloading ...", "Failed to download ... Will
    # attempt again"); the progress bar and the one error below say it all.
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        got = Path(fetcher.fetch(info.filename, downloader=downloader))
    except _TooSlow as exc:
        raise TraceNotFoundError(
            _not_found_message(info, reason=f"download from {source} too slow: {exc}")
        ) from None
    except (requests.exceptions.RequestException, OSError) as exc:
        raise TraceNotFoundError(_not_found_message(info, reason=_download_failure(exc))) from None
    except ValueError as exc:  # pooch: hash mismatch (file already deleted)
        raise ValueError(
            f"sha256 mismatch for {info.filename} from {source}: {exc}"
        ) from None
    finally:
        logger.setLevel(level)
    if info.sha256 is None:
        digest = sha256_of(got)
        message = f"{info.filename}: no pinned checksum; downloaded file has sha256 {digest}"
        print(f"{message} (pin it with verify_trace or compare it with upstream)")
        warnings.warn(message, UserWarning, stacklevel=2)
    return got
