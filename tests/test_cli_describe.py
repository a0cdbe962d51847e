"""Tests of ``inferasim describe``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inferasim import Workload, traces
from inferasim.cli import main
from inferasim.workload.loaders import DEFAULT_SYNTHETIC

MOONCAKE = (
    json.dumps({"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}) + "\n"
    + json.dumps({"timestamp": 1000, "input_length": 1024, "output_length": 30, "hash_ids": [1, 3]})
    + "\n"
)


def table(text: str) -> dict[str, str]:
    """The printed 'name  value  [unit]' rows as a dict of name to value."""
    rows = {}
    for row in text.splitlines()[1:]:
        parts = row.split()
        if row.startswith("  ") and len(parts) in (2, 3):
            rows[parts[0]] = parts[1]
    return rows


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["describe", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ success


def test_default_is_the_embedded_synthetic_workload(capsys):
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    n = DEFAULT_SYNTHETIC["num_requests"]
    # labelled as generated, never as the FAST'25 "synthetic" trace
    assert out.splitlines()[0] == f"Workload from generator (seed 0): {n:,} requests, block_size=512"
    rows = table(out)
    assert rows["requests"] == f"{n:,}"
    assert rows["inconsistent_blocks"] == "0"
    # the printed hit ratio agrees (4 significant digits) with a set replay of the same workload
    wl = Workload.from_synthetic(**DEFAULT_SYNTHETIC)
    seen: set[int] = set()
    hits = 0
    for i in range(len(wl)):
        ids = wl.block_ids(i).tolist()
        for h in ids:
            if h not in seen:
                break
            hits += 1
        seen.update(ids)
    ratio = hits / wl.hash_ids.size
    assert 0 < ratio < 1  # the prefix pool shares blocks
    assert rows["infinite_block_hit_ratio"] == f"{ratio:.4f}"  # ratios: 4 decimals


def test_synthetic_options(capsys):
    code, out, _ = run(capsys, "--num-requests", "30", "--arrival", "deterministic",
                       "--rate", "10", "--range-ratio", "0", "--input-len", "100",
                       "--num-prefixes", "0", "--output-len", "7")
    assert code == 0
    rows = table(out)
    # 30 requests every 100 ms: last at 2,900 ms; offered rate 30 / 2.9 s = 10.34
    assert rows["requests"] == "30"
    assert rows["duration_ms"] == "2,900"
    assert rows["offered_rate_rps"] == "10.34"
    assert rows["input_mean"] == "100" and rows["output_max"] == "7"
    # no pool: every block is fresh
    assert rows["blocks_total"] == "30" and rows["blocks_unique"] == "30"
    assert rows["infinite_block_hit_ratio"] == "0.0000"


def test_time_scale(capsys):
    args = ["--num-requests", "11", "--arrival", "deterministic", "--rate", "10"]
    _, out, _ = run(capsys, *args, "--time-scale", "0.5")
    assert table(out)["duration_ms"] == "500"  # 1,000 ms compressed by 0.5


def test_mooncake_file(capsys, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(MOONCAKE)
    code, out, err = run(capsys, str(path))
    assert code == 0 and err == ""
    assert out.splitlines()[0] == "Workload from t.jsonl: 2 requests, block_size=512"
    rows = table(out)
    # 4 blocks, ids 1,2,1,3: unique 3; the second request hits block 1 only -> 1/4
    assert rows["blocks_total"] == "4" and rows["blocks_unique"] == "3"
    assert rows["infinite_block_hit_ratio"] == "0.2500"
    assert rows["offered_rate_rps"] == "2"


def test_gzipped_json_array_mooncake_file(capsys, tmp_path):
    import gzip

    path = tmp_path / "t.json.gz"
    records = [json.loads(x) for x in MOONCAKE.splitlines()]
    path.write_bytes(gzip.compress(json.dumps(records).encode()))
    code, out, _ = run(capsys, str(path))
    assert code == 0
    assert out.splitlines()[0] == "Workload from t.json.gz: 2 requests, block_size=512"
    assert table(out)["infinite_block_hit_ratio"] == "0.2500"


def test_csv_file_has_no_hash_ids(capsys, tmp_path):
    path = tmp_path / "lens.csv"
    path.write_text("time,isl,osl\n0,100,10\n500,300,30\n")
    code, out, _ = run(capsys, str(path))
    assert code == 0
    rows = table(out)
    assert rows["requests"] == "2" and rows["input_mean"] == "200"
    assert rows["blocks_total"] == "-" and rows["infinite_block_hit_ratio"] == "-"
    assert "no hash ids" in out


def test_json_length_file_without_hash_ids(capsys, tmp_path):
    path = tmp_path / "lens.jsonl"
    path.write_text('{"arrival": 0, "isl": 5, "osl": 1}\n{"arrival": 250, "isl": 7, "osl": 1}\n')
    code, out, _ = run(capsys, str(path))
    assert code == 0 and table(out)["offered_rate_rps"] == "8" and "no hash ids" in out


def test_trace_names(capsys, monkeypatch, tmp_path, conversation_path, synthetic_trace_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(conversation_path.parent))
    code, out, _ = run(capsys, "conversation")
    assert code == 0
    rows = table(out)
    assert rows["requests"] == "12,031"
    assert rows["blocks_total"] == "288,500" and rows["blocks_unique"] == "182,790"
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(synthetic_trace_path.parent))
    code, out, _ = run(capsys, "--trace", "synthetic")
    assert code == 0 and table(out)["requests"] == "3,993"


# ------------------------------------------------------------------ errors
# A failed command exits 1 with one line on stderr; a usage error exits 2.


def test_bad_file_exits_1_with_message(capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(MOONCAKE + '{"timestamp": 5, "input_length": -1, "output_length": 1, '
                    '"hash_ids": [1]}\n')
    code, out, err = run(capsys, str(path))
    assert code == 1 and out == ""
    assert err.startswith("inferasim: error:")
    assert "bad.jsonl" in err and "line 3" in err and "input_length" in err
    assert "Traceback" not in err


def test_bad_csv_exits_1(capsys, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("foo,bar\n1,2\n")
    code, _, err = run(capsys, str(path))
    assert code == 1 and "bad.csv" in err and "matches no known column" in err


def test_missing_file_exits_1(capsys, tmp_path):
    code, _, err = run(capsys, str(tmp_path / "nope.jsonl"))
    assert code == 1 and "nope.jsonl" in err and "conversation" in err  # lists the trace names


def test_empty_file_exits_1(capsys, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    code, _, err = run(capsys, str(path))
    assert code == 1 and "empty.jsonl" in err and "empty" in err


def test_generated_workload_options_never_apply_to_a_trace(capsys, tmp_path):
    # "synthetic" is the FAST'25 trace; --rate shapes a generated workload: a usage error
    for argv in (["synthetic", "--rate", "4"], ["--trace", "synthetic", "--num-requests", "5"],
                 ["synthetic", "--generate"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert len(err.splitlines()) == 1 and err.startswith("inferasim describe: error:")
        assert "synthetic" in err and "generate" in err
    code, _, err = run(capsys, "conversation", "--trace", "synthetic")
    assert code == 2 and "source once" in err


def test_unreachable_trace_exits_1_and_says_where_to_put_it(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INFERASIM_TRACE_DIR", raising=False)
    monkeypatch.setattr(traces, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(traces, "checkout_dir", lambda: None)
    info = traces.TRACES["synthetic"]
    monkeypatch.setitem(traces.TRACES, "synthetic", traces.TraceInfo(
        info.name, info.filename, info.requests, info.sha256, "file:///nonexistent/x.jsonl"))
    code, _, err = run(capsys, "synthetic")
    assert code == 1
    assert "synthetic_trace.jsonl" in err and "INFERASIM_TRACE_DIR" in err
    assert str(tmp_path / "cache") in err


def test_usage_errors_exit_2_with_one_line(capsys):
    for argv in (["describe", "--no-such-flag"], ["describe", "--arrival", "weibull"], [],
                 ["simulate", "--model", "gpt-17"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and "error:" in err, argv


def test_console_script_in_a_subprocess(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("time,isl,osl\n0,1,1\n1,abc,1\n")
    script = Path(sys.executable).with_name("inferasim")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "inferasim.cli"]
    proc = subprocess.run([*cmd, "describe", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "inferasim: error:" in proc.stderr and "bad.csv" in proc.stderr
    assert "line 3" in proc.stderr and "'isl'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--rate", "0", "rate must be > 0"),
    ("--range-ratio", "1.5", "range_ratio must be in"),
])
def test_bad_synthetic_option_exits_1(capsys, flag, value, words):
    code, out, err = run(capsys, "--num-requests", "5", flag, value)
    assert code == 1 and out == "" and words in err


def test_bad_time_scale_is_a_usage_error_naming_the_flag(capsys):
    # (it used to be exit 1 with "factor must be a positive ..."; see test_cli_interrupt.py)
    code, out, err = run(capsys, "--num-requests", "5", "--time-scale", "-2")
    assert code == 2 and out == "" and "argument --time-scale: must be a positive finite" in err


# ---------------------------------------------- fixed bugs 6a-6c (see notes)


def test_empty_json_array_with_space(capsys, tmp_path):
    path = tmp_path / "e.json"
    path.write_text("[ ]")
    code, _, err = run(capsys, str(path))
    assert code == 1 and "e.json" in err and "no requests" in err


def test_malformed_json_array_names_the_file(capsys, tmp_path):
    path = tmp_path / "m.json"
    path.write_text('[{"timestamp": 0,')
    code, _, err = run(capsys, str(path))
    assert code == 1 and "m.json" in err and "malformed JSON" in err


def test_directory_source(capsys, tmp_path):
    code, _, err = run(capsys, str(tmp_path))
    assert code == 1 and str(tmp_path) in err and "directory" in err

