"""The simulator's compiled core (mypyc, see setup.py) against its interpreted source.

* CI runs the compiled build (what the benchmarks measure);
* the compiled and interpreted modules give bit-identical frames on 45
  configurations (40 drawn small ones that reach preemption, every eviction
  and routing policy, tiers, loads, admission and the step loop, and five on
  the conversation trace: aggregated, tiered, P/D, closed loop, step loop);
* the docstring examples of the compiled modules run on their interpreted
  source (mypyc drops docstrings, so pytest's --doctest-modules skips them);
* the ``instrumented`` tests, which wrap the core's methods to check every
  step (a wrapper never sees the calls compiled code makes), run on an
  interpreted copy of the package (the compiled run deselects them).
"""

from __future__ import annotations

import doctest
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import inferasim
from conftest import CI, REPO, load_interpreted
from inferasim.sim.native import NATIVE_MODULES, native_modules

PACKAGE = Path(inferasim.__file__).parent


def test_ci_runs_the_compiled_core():
    status = native_modules()
    assert list(status) == list(NATIVE_MODULES)
    compiled = sorted(PACKAGE.glob("sim/*.so")) + sorted(PACKAGE.glob("sim/*.pyd"))
    if CI:
        assert set(status.values()) == {"compiled"}, status
    # whatever the build, the status follows the files beside the sources
    for name, how in status.items():
        stem = name.rsplit(".", 1)[1]
        assert (how == "compiled") == any(p.name.startswith(stem + ".") for p in compiled)


def _interpreted_copy(dest: Path) -> Path:
    """A copy of the package without its extensions, beside the tests; returns its root."""
    shutil.copytree(PACKAGE, dest / "inferasim", ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    shutil.copytree(REPO / "tests", dest / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    # (tests/test_docs.py reads the site's sources when it is collected)
    shutil.copytree(REPO / "docs", dest / "docs",
                    ignore=shutil.ignore_patterns("_build", "generated", "notebooks", "__pycache__"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(REPO / name, dest / name)
    check = subprocess.run(
        [sys.executable, "-c", "import inferasim.sim as s; print(sorted(set(s.native_modules().values())))"],
        cwd=dest, env={**os.environ, "PYTHONPATH": str(dest)}, capture_output=True, text=True,
    )
    assert check.stdout.strip() == "['interpreted']", check.stderr
    return dest


def _compiled_or_skip() -> None:
    if set(native_modules().values()) != {"compiled"}:
        pytest.skip("the package is not compiled here (CI=true requires it)")


def _digests(pythonpath: Path, cwd: Path, trace: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "_frames_digest.py"), "native", "vllm", str(trace)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_compiled_and_interpreted_frames_are_identical(tmp_path, conversation_path):
    _compiled_or_skip()
    copy = _interpreted_copy(tmp_path / "interpreted")
    compiled = _digests(PACKAGE.parent, tmp_path, conversation_path)
    interpreted = _digests(copy, tmp_path, conversation_path)
    assert len(compiled) == 45
    assert compiled == interpreted


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    for name in NATIVE_MODULES:
        module = load_interpreted(name)
        for test in finder.find(module, module.__name__):
            if test.examples:
                yield pytest.param(test, id=test.name.replace("__interpreted", ""))


@pytest.mark.parametrize("test", list(_doctests()))
def test_docstring_examples_of_compiled_modules(test):
    runner = doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False
    )
    out: list[str] = []
    result = runner.run(test, out=out.append)
    assert result.failed == 0, "".join(out)


def test_instrumented_tests_pass_on_the_interpreted_core(tmp_path, request):
    _compiled_or_skip()
    copy = _interpreted_copy(tmp_path / "interpreted")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "instrumented", "-p", "no:randomly", "tests"],
        cwd=copy, env={**os.environ, "PYTHONPATH": str(copy)}, capture_output=True, text=True,
        timeout=1800,
    )
    tail = proc.stdout[-3000:]
    assert proc.returncode == 0, tail
    # every instrumented test ran and passed: as many passed as the marker selects
    # (none skipped, none xfailed), and at least the nine marked today
    # (test_sim_properties 2, _tiers_properties 1, _tiers_coupled 1, _disagg_sync 3,
    # test_reliability_expectations 1, test_sim_stretch_evictions 1)
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "instrumented", "tests"],
        cwd=copy, env={**os.environ, "PYTHONPATH": str(copy)}, capture_output=True, text=True,
        timeout=600,
    )
    marked = sum("::" in line for line in listed.stdout.splitlines())
    assert marked >= 9, listed.stdout[-3000:]
    summary = tail.strip().splitlines()[-1]
    assert re.match(rf"{marked} passed, \d+ deselected in ", summary), tail
