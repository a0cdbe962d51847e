"""Find, and if needed fetch, the FAST'25 Mooncake traces by name.

The traces are data, not part of the package. :func:`find_trace` looks for
a trace, in order, in

1. ``$INFERASIM_TRACE_DIR``;
2. ``./traces/`` and ``../shared/traces/`` relative to the working
   directory, to its parent (so notebooks run from ``notebooks/`` find them
   too) and to the source checkout of an editable install;
3. the user cache directory (``platformdirs.user_cache_dir("inferasim")``);

and otherwise downloads it from the upstream Mooncake repository into the
cache, with a progress bar, verifying its sha256 (a mismatch deletes the
file and raises).
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from inferasim.errors import TraceNotFoundError

__all__ = ["TraceInfo", "TRACES", "find_trace", "download_trace", "trace_dirs", "cache_dir", "sha256_of", "checkout_dir"]

UPSTREAM = "https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release/traces/"


@dataclass(frozen=True)
class TraceInfo:
    """A known trace: file name, size in requests, pinned sha256 and upstream URL.

    Examples
    --------
    >>> TRACES["conversation"].requests
    12031
    """

    name: str
    filename: str
    requests: int
    sha256: str | None
    url: str


TRACES: dict[str, TraceInfo] = {
    info.name: info
    for info in (
        TraceInfo(
            "conversation",
            "conversation_trace.jsonl",
            12_031,
            "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
            UPSTREAM + "conversation_trace.jsonl",
        ),
        TraceInfo(
            "synthetic",
            "synthetic_trace.jsonl",
            3_993,
            "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
            UPSTREAM + "synthetic_trace.jsonl",
        ),
        # No checksum is pinned for the tool-and-agent trace: it was never
        # available on the machines this package was built on. A download
        # is accepted as is and its sha256 printed so the user can pin it.
        TraceInfo(
            "toolagent",
            "toolagent_trace.jsonl",
            23_608,
            None,
            UPSTREAM + "toolagent_trace.jsonl",
        ),
    )
}


def cache_dir() -> Path:
    """The per-user cache directory traces are downloaded to.

    Examples
    --------
    >>> cache_dir().name
    'traces'
    """
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("inferasim")) / "traces"


def checkout_dir() -> Path | None:
    """The source checkout this package runs from (an editable install), else None.

    Examples
    --------
    >>> checkout_dir() is None or (checkout_dir() / "pyproject.toml").is_file()
    True
    """
    root = Path(__file__).resolve().parents[1]
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
        raise KeyError(f"unknown trace {name!r}; known: {sorted(TRACES)}") from None


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


def find_trace(name: str, *, download: bool = True) -> Path:
    """Path of a FAST'25 trace by name, downloading it when it is nowhere on disk.

    Parameters
    ----------
    name : {"conversation", "synthetic", "toolagent"}
    download : bool, default True
        Fetch from upstream into :func:`cache_dir` when not found.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    TraceNotFoundError
        Not found and not downloadable (no network, or ``download=False``);
        the message lists where to put the file.

    Examples
    --------
    >>> "conversation" in TRACES
    True
    >>> find_trace("conversation").name  # doctest: +SKIP
    'conversation_trace.jsonl'
    """
    info = _info(name)
    for d in trace_dirs():
        candidate = d / info.filename
        if candidate.is_file():
            return candidate
    if not download:
        raise TraceNotFoundError(_not_found_message(info, reason="download=False"))
    return download_trace(name)


def _not_found_message(info: TraceInfo, reason: str) -> str:
    places = "\n  ".join(str(d) for d in trace_dirs())
    return (
        f"trace {info.name!r} ({info.filename}) is not on this machine and could not be "
        f"downloaded ({reason}).\nDownload it from {info.url}\nand put it in one of:\n  {places}\n"
        "or point $INFERASIM_TRACE_DIR at the folder that holds it."
    )


def download_trace(name: str, dest_dir: str | os.PathLike[str] | None = None, *, url: str | None = None) -> Path:
    """Download a trace into ``dest_dir`` (default :func:`cache_dir`) and verify its sha256.

    Parameters
    ----------
    name : str
        A key of :data:`TRACES`.
    dest_dir : path, optional
        Where to store the file.
    url : str, optional
        Override the upstream URL (a mirror, or a ``file://`` URL).

    Returns
    -------
    pathlib.Path
        The verified file.

    Raises
    ------
    TraceNotFoundError
        When the download fails (no network).
    ValueError
        When the sha256 does not match the pinned one; the file is removed.

    Examples
    --------
    >>> sorted(TRACES)  # the names it can fetch
    ['conversation', 'synthetic', 'toolagent']
    >>> download_trace("conversation")  # doctest: +SKIP
    PosixPath('/root/.cache/inferasim/traces/conversation_trace.jsonl')
    """
    from tqdm.auto import tqdm

    info = _info(name)
    dest = Path(dest_dir) if dest_dir is not None else cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / info.filename
    partial = target.with_suffix(target.suffix + ".part")
    source = url or info.url
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(source, timeout=30) as response, open(partial, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=info.filename) as bar:
                for chunk in iter(lambda: response.read(1 << 16), b""):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        partial.unlink(missing_ok=True)
        raise TraceNotFoundError(_not_found_message(info, reason=str(exc))) from exc
    got = digest.hexdigest()
    if info.sha256 is not None and got != info.sha256:
        partial.unlink(missing_ok=True)
        raise ValueError(
            f"sha256 mismatch for {info.filename} from {source}: expected {info.sha256}, "
            f"got {got}; the file was removed"
        )
    if info.sha256 is None:
        import warnings

        warnings.warn(
            f"{info.filename}: no pinned checksum; downloaded file has sha256 {got}",
            UserWarning,
            stacklevel=2,
        )
    partial.replace(target)
    return target
