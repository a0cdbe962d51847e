"""The ``inferasim`` command as a user meets it: entry points, help, errors."""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys

import pytest

import inferasim
from inferasim.cli import build_parser, main
from inferasim.sim.presets import GPUS, MODELS

RECORD = {"timestamp": 0, "input_length": 1024, "output_length": 4, "hash_ids": [1, 2]}


def python_m(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inferasim", *argv], capture_output=True,
                          text=True, timeout=120)


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"inferasim": parser, **dict(action.choices)}


def test_python_dash_m_and_version():
    proc = python_m("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"inferasim {inferasim.__version__}"
    proc = python_m("describe", "--num-requests", "12")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.splitlines()[0] == "Workload from generator (seed 0): 12 requests, block_size=512"


@pytest.mark.parametrize("command", ["inferasim", "describe", "simulate", "figures"])
def test_every_option_has_help_and_a_visible_default(command):
    parser = subparsers()[command]
    text = parser.format_help()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
        takes_value = action.nargs != 0
        has_default = action.default is not None and action.default is not argparse.SUPPRESS
        if action.option_strings and takes_value and has_default:
            # the default shows in the help text (the formatter appends it when not stated)
            shown = action.default
            if isinstance(shown, (list, tuple)):  # as typed on the command line: pdf png
                shown = " ".join(map(str, shown))
            assert str(shown) in text or f"default: {shown}" in text, action.dest
    if command == "describe":
        # generator options: default None (so "given" is detectable), real default in the help
        assert "--rate FLOAT" in text and "(default: 8.0)" in text


def test_model_and_gpu_presets_are_listed_and_checked(capsys):
    text = subparsers()["simulate"].format_help()
    flat = " ".join(text.split())
    for name in [*MODELS, *GPUS]:
        assert name in flat
    assert main(["simulate", "--gpu", "tpu-v9"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "h100-80gb" in err and "invalid choice" in err


def test_trace_and_generator_are_told_apart_in_the_help():
    text = " ".join(subparsers()["describe"].format_help().split())
    assert "'synthetic' is the published trace, not a generated workload" in text
    assert "It is not the FAST'25 'synthetic' trace" in text


def test_corrupt_gzip_is_one_line_exit_1_and_debug_shows_the_traceback(tmp_path):
    data = gzip.compress((json.dumps(RECORD) + "\n").encode() * 200)
    # Flip a byte of the deflate stream (after the 10-byte header): the stream is broken.
    broken = data[:20] + bytes([data[20] ^ 0xFF]) + data[21:]
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(broken)
    proc = python_m("describe", str(path))
    assert proc.returncode == 1 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("inferasim: error:") and "Traceback" not in proc.stderr
    proc = python_m("--debug", "describe", str(path))
    assert proc.returncode == 1 and "Traceback (most recent call last)" in proc.stderr
    proc = python_m("describe", str(path), "--debug")  # after the subcommand too
    assert proc.returncode == 1 and "Traceback (most recent call last)" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["describe", "{dir}/none.jsonl"], 1),  # missing file
        (["describe", "{dir}/bad.jsonl"], 1),  # bad line
        (["describe", "{dir}"], 1),  # a directory
        (["simulate", "--num-requests", "5", "--out", "{dir}/x.txt"], 2),
        (["simulate", "--replicas", "two"], 2),
        (["describe", "synthetic", "--seed", "3"], 2),
        (["nosuchcommand"], 2),
        (["simulate", "--num-requests", "5", "--replicas", "0", "--no-progress"], 2),
    ],
)
def test_every_error_is_one_line_on_stderr(tmp_path, capsys, argv, code):
    (tmp_path / "bad.jsonl").write_text(json.dumps({**RECORD, "input_length": -5}) + "\n")
    argv = [a.format(dir=tmp_path) for a in argv]
    assert main(argv) == code
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("simulate", "--replicas", "-2"),
        ("simulate", "--replicas", "2.5"),
        ("simulate", "--tp", "0"),
        ("simulate", "--kv-tokens", "-5"),
        ("simulate", "--max-num-seqs", "0"),
        ("simulate", "--max-batched-tokens", "0"),
        ("simulate", "--overlap-weight", "-1"),
        ("simulate", "--slo-ttft-ms", "-1"),  # was accepted (a negative objective)
        ("simulate", "--slo-tpot-ms", "inf"),
        ("simulate", "--routing-seed", "-1"),
        ("simulate", "--time-scale", "0"),
        ("describe", "--num-requests", "-1"),
        ("describe", "--rate", "0"),
        ("describe", "--rate", "nan"),
        ("describe", "--burstiness", "-0.5"),
        ("describe", "--range-ratio", "1"),
        ("describe", "--input-len", "0"),
        ("describe", "--prefix-zipf", "-1"),
        ("figures", "--jobs", "0"),
    ],
)
def test_a_bad_flag_value_is_a_usage_error_naming_the_flag(capsys, command, flag, value):
    # exit 2 (usage), one line naming the flag as typed, before any work starts
    assert main([command, flag, value]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"inferasim {command}: error: argument {flag}: ") and repr(value) in err


def test_the_lowest_accepted_flag_values_run(capsys):
    # the bounds are inclusive where the library's are: 1 replica, 0 prefixes, range ratio 0
    argv = ["simulate", "--num-requests", "5", "--replicas", "1", "--num-prefixes", "0",
            "--range-ratio", "0", "--overlap-weight", "0", "--routing-seed", "0", "--no-progress"]
    assert main(argv) == 0
    assert "requests" in capsys.readouterr().out


def test_help_exits_0(capsys):
    assert main(["simulate", "--help"]) == 0
    assert "--slo-ttft-ms" in capsys.readouterr().out


def test_no_slo_means_no_goodput_rows(capsys):
    assert main(["simulate", "--num-requests", "30", "--replicas", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "goodput_rps" not in out and "slo_attainment" not in out and "no SLO given" in out
    assert main(["simulate", "--num-requests", "30", "--replicas", "2", "--no-progress",
                 "--slo-ttft-ms", "1e9"]) == 0
    out = capsys.readouterr().out
    # every request meets a 1e9 ms objective: attainment 1, no "no SLO" note
    rows = dict(line.split()[:2] for line in out.splitlines() if line.startswith("  "))
    assert rows["slo_attainment"] == "1.0000" and "no SLO given" not in out


@pytest.mark.parametrize(
    "statement",
    [
        "import inferasim",
        "import inferasim as ism; ism.Simulator; ism.reuse; ism.Workload.from_synthetic(5, 1.0)",
        "import inferasim.cli as c; c.build_parser(['describe']); c.main(['describe', '--num-requests', '5'])",
    ],
)
def test_import_leaves_matplotlib_and_ipywidgets_unloaded(statement):
    # A fresh interpreter: this test process has imported them already.
    code = (
        f"{statement}\nimport sys\n"
        "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'IPython') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"


def test_plotting_parts_still_load_on_first_use():
    code = "import inferasim as ism, sys; ism.plots; print('matplotlib' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr
