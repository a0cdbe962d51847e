"""Tests of the FAST'25 trace finder and downloader (no network: file:// URLs only)."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import threading
import time
from pathlib import Path

import pytest

from inferasim import TraceNotFoundError, Workload, traces

TRACE_TEXT = (
    json.dumps({"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [0, 1]}) + "\n"
    + json.dumps({"timestamp": 7, "input_length": 512, "output_length": 3, "hash_ids": [0]}) + "\n"
)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """An empty world: no env dir, cwd with no traces nearby, a private cache dir."""
    cwd = tmp_path / "work" / "main"
    cwd.mkdir(parents=True)
    cache = tmp_path / "cache" / "traces"
    monkeypatch.delenv("INFERASIM_TRACE_DIR", raising=False)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(traces, "cache_dir", lambda: cache)
    monkeypatch.setattr(traces, "checkout_dir", lambda: None)
    # In this world the published "conversation" trace is TRACE_TEXT: the search
    # tests below put copies of it around, and a found copy is now verified
    # against the pinned sha256 (issue 12 item 3).
    real = traces.TRACES["conversation"]
    fake = traces.TraceInfo(real.name, real.filename, 2, sha(TRACE_TEXT), real.url)
    monkeypatch.setitem(traces.TRACES, "conversation", fake)
    return tmp_path


def put(directory: Path, name: str = "conversation_trace.jsonl", text: str = TRACE_TEXT) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def fake_trace(monkeypatch, url: str, sha256: str | None, name: str = "conversation") -> None:
    info = traces.TraceInfo(name, f"{name}_trace.jsonl", 2, sha256, url)
    monkeypatch.setitem(traces.TRACES, name, info)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------ search


def test_trace_dirs_order(sandbox, monkeypatch):
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(sandbox / "env"))
    cwd = sandbox / "work" / "main"
    assert traces.trace_dirs() == [
        sandbox / "env",
        cwd / "traces",
        sandbox / "work" / "shared" / "traces",
        sandbox / "work" / "traces",
        sandbox / "shared" / "traces",
        sandbox / "cache" / "traces",
    ]


def test_source_checkout_is_searched_after_the_working_directory(sandbox, monkeypatch):
    # an editable install finds traces beside its checkout whatever the cwd
    checkout = sandbox / "src" / "inferasim-repo"
    monkeypatch.setattr(traces, "checkout_dir", lambda: checkout)
    dirs = traces.trace_dirs()
    assert dirs.index(checkout / "traces") > dirs.index(sandbox / "work" / "main" / "traces")
    assert dirs[-1] == sandbox / "cache" / "traces"
    shared = put(sandbox / "src" / "shared" / "traces")
    assert traces.find_trace("conversation", download=False) == shared


def test_trace_dirs_have_no_repeats(sandbox, monkeypatch):
    monkeypatch.chdir("/")  # at the root, cwd.parent is cwd: the same folders twice
    dirs = traces.trace_dirs()
    assert len(dirs) == len(set(dirs))


def test_env_dir_is_searched_first(sandbox, monkeypatch):
    shared = put(sandbox / "work" / "shared" / "traces")
    local = put(sandbox / "work" / "main" / "traces")
    env = put(sandbox / "env")
    put(sandbox / "cache" / "traces")
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(sandbox / "env"))
    assert traces.find_trace("conversation") == env
    monkeypatch.delenv("INFERASIM_TRACE_DIR")
    assert traces.find_trace("conversation") == local
    local.unlink()
    assert traces.find_trace("conversation") == shared


def test_parent_dirs_then_cache(sandbox, monkeypatch):
    # run from a notebooks/ folder: ../traces is found
    nb = sandbox / "work" / "main" / "notebooks"
    nb.mkdir()
    monkeypatch.chdir(nb)
    parent = put(sandbox / "work" / "main" / "traces")
    assert traces.find_trace("conversation") == parent
    parent.unlink()
    cached = put(sandbox / "cache" / "traces")
    assert traces.find_trace("conversation", download=False) == cached


def test_env_dir_with_tilde(sandbox, monkeypatch):
    monkeypatch.setenv("HOME", str(sandbox / "home"))
    path = put(sandbox / "home" / "tr")
    monkeypatch.setenv("INFERASIM_TRACE_DIR", "~/tr")
    assert traces.find_trace("conversation") == path


def test_not_found_without_download(sandbox):
    with pytest.raises(TraceNotFoundError) as info:
        traces.find_trace("synthetic", download=False)
    msg = str(info.value)
    assert "synthetic_trace.jsonl" in msg and "download=False" in msg
    assert "INFERASIM_TRACE_DIR" in msg
    assert str(sandbox / "cache" / "traces") in msg
    assert traces.TRACES["synthetic"].url in msg
    assert isinstance(info.value, FileNotFoundError)


def test_unknown_name():
    with pytest.raises(KeyError, match="unknown trace 'chat'.*conversation"):
        traces.find_trace("chat")


def test_registry_knows_the_four_traces():
    # arxiv (alias mooncake) and toolagent: 23,608 requests each (dataset card of
    # the Hugging Face conversion valeriol29/mooncake-traces)
    fast25 = {n: t.requests for n, t in traces.TRACES.items() if t.format == "mooncake"}
    assert fast25 == {
        "conversation": 12_031, "synthetic": 3_993, "toolagent": 23_608,
        "arxiv": 23_608, "mooncake": 23_608}
    assert traces.TRACES["mooncake"] is traces.TRACES["arxiv"]
    assert traces.TRACES["arxiv"].url.endswith("/FAST25-release/arxiv-trace/mooncake_trace.jsonl")
    for info in traces.TRACES.values():
        assert info.url.endswith("/" + info.filename)
        assert info.url.startswith("https://")


def test_pinned_checksums_match_the_real_traces(conversation_path, synthetic_trace_path):
    assert traces.sha256_of(conversation_path) == traces.TRACES["conversation"].sha256
    assert traces.sha256_of(synthetic_trace_path) == traces.TRACES["synthetic"].sha256


def test_sha256_of(tmp_path):
    path = tmp_path / "big.bin"
    data = bytes(range(256)) * 10_000  # > 1 MiB chunk, so several reads
    path.write_bytes(data)
    assert traces.sha256_of(path) == hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- download


def test_download_verifies_and_is_then_found(sandbox, monkeypatch):
    src = put(sandbox / "upstream", "source.jsonl")
    fake_trace(monkeypatch, src.as_uri(), sha(TRACE_TEXT))
    got = traces.find_trace("conversation")
    assert got == sandbox / "cache" / "traces" / "conversation_trace.jsonl"
    assert got.read_text() == TRACE_TEXT
    assert not got.with_suffix(".jsonl.part").exists()
    # the name now loads from the cache without downloading again
    src.unlink()
    wl = Workload.from_mooncake("conversation")
    assert len(wl) == 2 and wl.arrival_ms.tolist() == [0, 7]


def test_download_checksum_mismatch_raises_and_removes_the_file(sandbox, monkeypatch):
    src = put(sandbox / "upstream", "source.jsonl")
    fake_trace(monkeypatch, src.as_uri(), "0" * 64)
    with pytest.raises(ValueError, match="sha256 mismatch") as info:
        traces.find_trace("conversation")
    assert sha(TRACE_TEXT) in str(info.value)
    cache = sandbox / "cache" / "traces"
    assert list(cache.iterdir()) == []  # neither the file nor a .part remains


def test_no_network_says_where_to_put_the_file(sandbox, monkeypatch):
    fake_trace(monkeypatch, "file:///nonexistent/conversation_trace.jsonl", sha(TRACE_TEXT))
    with pytest.raises(TraceNotFoundError) as info:
        traces.find_trace("conversation")
    msg = str(info.value)
    assert "conversation_trace.jsonl" in msg
    assert "file:///nonexistent/conversation_trace.jsonl" in msg  # where to get it
    assert str(sandbox / "work" / "main" / "traces") in msg      # where to put it
    assert str(sandbox / "cache" / "traces") in msg
    assert "INFERASIM_TRACE_DIR" in msg
    assert list((sandbox / "cache" / "traces").iterdir()) == []


def test_download_trace_with_dest_and_url_override(sandbox):
    # the real entry's checksum, served from a local copy with the wrong content -> mismatch
    src = put(sandbox / "upstream", "x.jsonl")
    with pytest.raises(ValueError, match="sha256 mismatch"):
        traces.download_trace("synthetic", sandbox / "dest", url=src.as_uri())
    assert not (sandbox / "dest" / "synthetic_trace.jsonl").exists()


def test_download_of_real_trace_from_local_mirror(conversation_path, tmp_path):
    got = traces.download_trace("conversation", tmp_path, url=conversation_path.as_uri())
    assert got == tmp_path / "conversation_trace.jsonl"
    assert traces.sha256_of(got) == traces.TRACES["conversation"].sha256


def test_unpinned_download_warns_with_checksum(sandbox, monkeypatch):
    src = put(sandbox / "upstream", "t.jsonl")
    fake_trace(monkeypatch, src.as_uri(), None, name="toolagent")
    with pytest.warns(UserWarning, match=sha(TRACE_TEXT)):
        got = traces.find_trace("toolagent")
    assert got.read_text() == TRACE_TEXT


# ------------------------------------------------------ verification wherever found


def test_edited_local_copy_is_an_error_naming_the_file_and_the_fix(sandbox):
    # a truncated copy (first line only) where the search finds it first
    bad = put(sandbox / "work" / "main" / "traces", text=TRACE_TEXT.splitlines(True)[0])
    with pytest.raises(traces.TraceChecksumError) as info:
        traces.find_trace("conversation")
    msg = str(info.value)
    assert str(bad) in msg and sha(bad.read_text()) in msg and "verify=False" in msg
    assert "Delete it" in msg and traces.TRACES["conversation"].url in msg
    with pytest.raises(traces.TraceChecksumError):
        Workload.from_mooncake("conversation")
    # the explicit opt-out loads the one-request copy as is
    assert len(Workload.from_mooncake("conversation", verify=False)) == 1


def test_verdict_is_cached_by_path_size_and_mtime(sandbox):
    good = put(sandbox / "work" / "main" / "traces")
    assert traces.find_trace("conversation") == good
    stored = json.loads((sandbox / "cache" / "traces" / "verified.json").read_text())
    assert stored[str(good.resolve())]["sha256"] == sha(TRACE_TEXT)
    # same size, same mtime, other bytes: the cached verdict stands (what the cache keys on)
    st = good.stat()
    good.write_text(TRACE_TEXT.replace('"output_length": 2', '"output_length": 9'))
    os.utime(good, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert good.stat().st_size == st.st_size
    traces._VERDICTS.clear()  # a new process: the verdict comes from verified.json
    assert traces.find_trace("conversation") == good
    # touching the file invalidates the verdict and the edit is caught
    os.utime(good, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(traces.TraceChecksumError):
        traces.find_trace("conversation")


def test_folder_named_like_a_trace_does_not_shadow_it(sandbox):
    (sandbox / "work" / "main" / "conversation").mkdir()  # ./conversation/ in the cwd
    put(sandbox / "work" / "main" / "traces" / "conversation_trace.jsonl")  # a folder here too
    good = put(sandbox / "work" / "shared" / "traces")
    assert traces.find_trace("conversation") == good
    assert len(Workload.from_mooncake("conversation")) == 2
    from inferasim.workload.loaders import load_workload

    assert len(load_workload("conversation")) == 2


def test_arxiv_trace_by_name_and_alias_downloads_unpinned_with_a_warning(sandbox, monkeypatch):
    src = put(sandbox / "upstream", "mooncake_trace.jsonl")
    real = traces.TRACES["arxiv"]
    info = traces.TraceInfo("arxiv", real.filename, 2, None, src.as_uri(), aliases=("mooncake",))
    monkeypatch.setitem(traces.TRACES, "arxiv", info)
    monkeypatch.setitem(traces.TRACES, "mooncake", info)
    with pytest.warns(UserWarning, match=sha(TRACE_TEXT)):
        wl = Workload.from_mooncake("mooncake")
    assert len(wl) == 2
    assert (sandbox / "cache" / "traces" / "mooncake_trace.jsonl").read_text() == TRACE_TEXT
    assert traces.find_trace("arxiv", download=False).name == "mooncake_trace.jsonl"


def test_cli_traces_lists_where_each_trace_is(sandbox, capsys):
    from inferasim.cli import main

    found = put(sandbox / "work" / "main" / "traces")
    assert main(["traces"]) == 0
    out = capsys.readouterr().out
    assert f"found: {found}" in out
    for name in ("conversation", "synthetic", "toolagent", "arxiv (alias mooncake)"):
        assert name in out
    assert "not found; download: " + traces.TRACES["arxiv"].url in out
    assert str(sandbox / "cache" / "traces") in out  # where to put a missing one


# ------------------------------------------------------------ real HTTP on 127.0.0.1


@contextlib.contextmanager
def http_server(body: bytes, *, trickle_s: float | None = None):
    """Serve ``body`` on 127.0.0.1; with ``trickle_s``, one byte every ``trickle_s`` seconds."""
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if trickle_s is None:
                    self.wfile.write(body)
                    return
                for i in range(len(body)):
                    if stop.wait(trickle_s):
                        return
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/trace.jsonl"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_http_download_is_verified_and_found(sandbox, monkeypatch):
    with http_server(TRACE_TEXT.encode()) as url:
        fake_trace(monkeypatch, url, sha(TRACE_TEXT))
        got = traces.find_trace("conversation")
    assert got.read_text() == TRACE_TEXT
    assert traces.find_trace("conversation", download=False) == got


def test_http_checksum_mismatch_keeps_nothing(sandbox, monkeypatch):
    with http_server(TRACE_TEXT.encode()) as url:
        fake_trace(monkeypatch, url, "1" * 64)
        with pytest.raises(ValueError, match="sha256 mismatch"):
            traces.download_trace("conversation", retries=0)
    assert not (sandbox / "cache" / "traces" / "conversation_trace.jsonl").exists()


def test_trickling_server_hits_the_deadline(sandbox, monkeypatch):
    # 1 byte every 0.2 s: never idle long enough for a socket timeout, so only an
    # overall deadline ends it
    with http_server(TRACE_TEXT.encode(), trickle_s=0.2) as url:
        fake_trace(monkeypatch, url, sha(TRACE_TEXT))
        t0 = time.monotonic()
        with pytest.raises(TraceNotFoundError) as info:
            traces.download_trace("conversation", timeout_s=1.5, min_rate=0, retries=0)
        elapsed = time.monotonic() - t0
    assert elapsed < 4
    msg = str(info.value)
    assert "too slow" in msg and "not finished within 1.5 s" in msg
    assert str(sandbox / "cache" / "traces") in msg  # still says where to put the file
    assert list((sandbox / "cache" / "traces").iterdir()) == []


def test_trickling_server_is_below_the_minimum_rate(sandbox, monkeypatch):
    monkeypatch.setattr(traces, "DOWNLOAD_GRACE_S", 0.5)
    with http_server(TRACE_TEXT.encode(), trickle_s=0.1) as url:
        fake_trace(monkeypatch, url, sha(TRACE_TEXT))
        t0 = time.monotonic()
        with pytest.raises(TraceNotFoundError, match=r"below the minimum rate of 1,000 bytes/s"):
            traces.download_trace("conversation", timeout_s=60, min_rate=1000, retries=2)
        assert time.monotonic() - t0 < 3  # a too-slow transfer is not retried


def test_unreachable_server_says_where_to_put_the_file(sandbox, monkeypatch):
    with http_server(b"") as url:
        pass  # the port is closed again: connection refused
    fake_trace(monkeypatch, url, sha(TRACE_TEXT))
    with pytest.raises(TraceNotFoundError, match="INFERASIM_TRACE_DIR"):
        traces.download_trace("conversation", retries=0)


def test_checkout_dir_is_the_repository_root():
    # an editable install runs from this checkout: traces/ beside pyproject.toml is searched
    # (after the move into inferasim/workload/ it pointed at inferasim/ and found nothing)
    root = Path(__file__).resolve().parents[1]
    assert traces.checkout_dir() == root
    assert root / "traces" in traces.trace_dirs()


# ------------------------------------------------- one short message (issue 24)


def test_a_failed_download_is_one_line_without_pooch_noise(sandbox, monkeypatch, capfd, caplog):
    # Before: "Downloading file ..." and two "Failed to download ... Will attempt the
    # download again" lines from pooch, then ~900 characters over several lines with
    # a nested exception repr.
    with http_server(b"") as url:
        pass  # closed port: connection refused on every attempt
    fake_trace(monkeypatch, url, sha(TRACE_TEXT))
    with caplog.at_level("DEBUG"), pytest.raises(TraceNotFoundError) as info:
        traces.download_trace("conversation", retries=1, progressbar=False)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("trace 'conversation' (conversation_trace.jsonl) is not in ")
    assert str(sandbox / "cache" / "traces") in msg and url in msg and "INFERASIM_TRACE_DIR" in msg
    assert "(cannot connect to 127.0.0.1)" in msg
    assert "HTTPConnectionPool" not in msg and ".)." not in msg and ":;" not in msg
    assert [r for r in caplog.records if r.name == "pooch"] == []
    assert capfd.readouterr().err == ""


def test_a_misspelt_trace_name_gets_the_close_match_everywhere(sandbox):
    with pytest.raises(KeyError, match=r"unknown trace 'conversaton' \(did you mean 'conversation'\?\)"):
        traces.find_trace("conversaton")
    for source in ("conversaton", "Conversation", "conversation_trace.jsonl"):
        with pytest.raises(FileNotFoundError) as info:
            Workload.from_mooncake(source)
        msg = str(info.value)
        # what was looked for and where, the close match, where to see the downloads
        assert msg.startswith(f"no workload file {sandbox / 'work' / 'main' / source} and no trace named")
        assert "(did you mean 'conversation'?)" in msg and "`inferasim traces`" in msg
    with pytest.raises(FileNotFoundError) as info:
        Workload.from_csv("nothing_like_a_trace.csv")
    assert "did you mean" not in str(info.value)


def test_the_cli_says_the_same_in_one_line(sandbox, capsys):
    from inferasim.cli import main

    assert main(["describe", "conversaton"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert "no trace named 'conversaton' (did you mean 'conversation'?)" in err
