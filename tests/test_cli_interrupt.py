"""Ctrl-C while the ``inferasim`` command is still importing; the flags' own error messages.

The interrupt is made deterministic: a fresh interpreter gets an import hook
that sends itself SIGINT the moment a given module is first looked for, then
runs the real entry point (what the console script and ``python -m
inferasim`` run). Before the fix every case printed a 20-30 line
KeyboardInterrupt traceback; an interrupt during numpy's C-extension import
even came out as "ImportError: Importing the numpy C-extensions failed".
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import os, signal, sys

class InterruptAt:
    '''Sends this process SIGINT when {module!r} is first imported.'''
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptAt())
sys.argv = ["inferasim", *{argv!r}]
from inferasim._entry import main
sys.exit(main())
"""


def _interrupted_at(module: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    code = _CHILD.format(module=module, argv=argv)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


@pytest.mark.parametrize(
    "module, argv",
    [
        ("inferasim.cli", ["describe", "--num-requests", "5"]),  # the first import of the entry
        ("argparse", ["describe", "--num-requests", "5"]),
        ("numpy", ["describe", "--num-requests", "5"]),
        ("datetime", ["describe", "--num-requests", "5"]),  # inside numpy's C-extension import
        ("pandas", ["describe", "--num-requests", "5"]),
        ("inferasim.sim.simulator", ["simulate", "--num-requests", "5"]),
    ],
)
def test_ctrl_c_while_importing_is_one_line_and_status_130(module, argv):
    proc = _interrupted_at(module, argv)
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "inferasim: interrupted\n", "")


def test_the_same_child_without_the_interrupt_runs_the_command():
    # the harness itself is sound: a module never imported means no interrupt, a normal run
    proc = _interrupted_at("no.such.module", ["describe", "--num-requests", "5"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Workload from generator (seed 0): 5 requests")


def test_ctrl_c_during_the_work_is_still_a_clean_keyboardinterrupt(monkeypatch, capsys):
    # after the imports the entry gives SIGINT back to Python: the command's own handler
    # reports it (and code that cleans up on KeyboardInterrupt still can)
    import signal

    from inferasim import _entry, cli

    seen, before = [], signal.getsignal(signal.SIGINT)

    def work(args):
        seen.append(signal.getsignal(signal.SIGINT))
        raise KeyboardInterrupt

    real = cli.build_parser

    def parser_with_interrupting_describe(argv=None):
        parser = real(argv)
        parser.set_defaults(func=work)
        sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices)
        sub.choices["describe"].set_defaults(func=work)
        return parser

    monkeypatch.setattr(cli, "build_parser", parser_with_interrupting_describe)
    monkeypatch.setattr(sys, "argv", ["inferasim", "describe", "--num-requests", "5"])
    assert _entry.main() == 130
    assert seen == [before]
    assert capsys.readouterr().err == "inferasim: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before


def test_the_console_script_and_python_m_use_the_guarded_entry():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"inferasim": "inferasim._entry:main"}
    assert "from inferasim._entry import main" in (ROOT / "inferasim/__main__.py").read_text()


def test_import_inferasim_loads_neither_numpy_nor_pandas():
    # what runs before the entry's first instruction must be quick
    code = "import inferasim, sys; print(sorted({'numpy', 'pandas'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.stdout.strip() == "[]", proc.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e-400"])
def test_a_bad_time_scale_names_the_flag(value):
    # Before: "inferasim: error: factor must be a positive finite number, got nan" (exit 1)
    proc = subprocess.run(
        [sys.executable, "-m", "inferasim", "describe", "--num-requests", "5",
         f"--time-scale={value}"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"inferasim describe: error: argument --time-scale: must be a finite number > 0, "
        f"got {value!r} (see inferasim describe --help)\n"
    )
