"""Tests of the FAST'25 trace finder and downloader (no network: file:// URLs only)."""

from __future__ import annotations

import hashlib
import json
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


def test_registry_knows_the_three_traces():
    assert {n: t.requests for n, t in traces.TRACES.items()} == {
        "conversation": 12_031, "synthetic": 3_993, "toolagent": 23_608}
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
