"""Find, verify and if needed fetch the public Mooncake traces by name.

The traces are data, not part of the package. :func:`find_trace` looks for
a trace, in order, in

1. ``$INFERASIM_TRACE_DIR``;
2. ``./traces/`` and ``../shared/traces/`` relative to the working
   directory, to its parent (so notebooks run from ``notebooks/`` find them
   too) and to the source checkout of an editable install;
3. the user cache directory (``pooch.os_cache("inferasim") / "traces"``);

and otherwise downloads it from the upstream Mooncake repository into the
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


@dataclass(frozen=True)
class TraceInfo:
    """A known trace: name, file name, size, pinned sha256 and upstream URL.

    Parameters
    ----------
    name : str
        The name :func:`find_trace` and ``Workload.from_mooncake`` accept.
    filename : str
        The file looked for in each search folder.
    requests : int
        Requests (lines) in the published file.
    sha256 : str or None
        Pinned checksum; None when no copy was ever available to pin it
        (a download is then accepted with a warning printing its sha256).
    url : str
        Upstream location.
    size_bytes : int or None
        Size of the published file in bytes, when known.
    aliases : tuple of str
        Other names for the same trace.

    Examples
    --------
    >>> TRACES["conversation"].requests
    12031
    >>> TRACES["arxiv"].filename
    'mooncake_trace.jsonl'
    """

    name: str
    filename: str
    requests: int
    sha256: str | None
    url: str
    size_bytes: int | None = None
    aliases: tuple[str, ...] = ()


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
    ),
    TraceInfo(
        "synthetic",
        "synthetic_trace.jsonl",
        3_993,
        "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
        UPSTREAM + "traces/synthetic_trace.jsonl",
        1_136_313,
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
        ``"toolagent"``, ``"arxiv"`` (alias ``"mooncake"``).
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


def list_traces() -> pd.DataFrame:
    """Known traces and where each was found, or where to put it, as a DataFrame.

    Never downloads or hashes anything: ``found`` is the first file of that
    name in the search folders (or empty) and ``verified`` says whether a
    cached verdict already vouches for it (``"pending"`` until first loaded).

    Returns
    -------
    pandas.DataFrame
        Indexed by name: ``file``, ``requests``, ``size_bytes``, ``sha256``
        (empty when none is pinned), ``aliases``, ``found``, ``verified``,
        ``url``.

    Examples
    --------
    >>> df = list_traces()
    >>> list(df.index)
    ['conversation', 'synthetic', 'toolagent', 'arxiv']
    >>> int(df.loc["arxiv", "requests"]), df.loc["arxiv", "aliases"]
    (23608, 'mooncake')
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
                "found": str(path) if path else "",
                "verified": verified,
                "url": info.url,
            }
        )
    return pd.DataFrame(rows).set_index("name")


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
        When the trace has no pinned sha256: the message prints the
        downloaded file's sha256.

    Examples
    --------
    >>> sorted(TRACES)  # the names it can fetch
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
        warnings.warn(
            f"{info.filename}: no pinned checksum; downloaded file has sha256 {digest}",
            UserWarning,
            stacklevel=2,
        )
    return got
