"""Mutation check: do the tests catch realistic one-line bugs?

Each mutant replaces one exact snippet of one source file (the snippet must
occur exactly once). For each, the package and tests are copied to a
temporary folder, the mutant is applied there, and the relevant tests run
(``pytest -x``); the mutant is *killed* when they fail. The script prints a
table and the kill rate; a surviving mutant names a gap in the tests.

Run from the repository root::

    python benchmarks/mutation_check.py            # all mutants
    python benchmarks/mutation_check.py p90 tie    # mutants whose name contains a word

A baseline run of every test file used must pass first. Under the ``ci``
hypothesis profile (``CI=true``) the property tests are derandomized, so the
verdicts are reproducible.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository
    old: str
    new: str
    tests: tuple[str, ...]


SIM = ("tests/test_sim_hand.py", "tests/test_reliability_expectations.py", "tests/test_sim_properties.py")
MUTANTS = [
    Mutant("p90 at the 95th percentile", "inferasim/sim/result.py",
           '("p90", 90)', '("p90", 95)', ("tests/test_reliability_expectations.py", "tests/test_sim_hand.py")),
    Mutant("ties flagged as unsorted", "inferasim/workload/_parse.py",
           "np.all(arrival[1:] >= arrival[:-1])", "np.all(arrival[1:] > arrival[:-1])",
           ("tests/test_reliability_expectations.py", "tests/test_mooncake.py")),
    Mutant("kv_cost pruning > becomes >=", "inferasim/sim/router.py",
           "if base + a > low:", "if base + a >= low:",
           ("tests/test_reliability_expectations.py", "tests/test_sim_router.py", "tests/test_sim_properties.py")),
    Mutant("ref count slip on acquire", "inferasim/sim/cache.py",
           "            ref[h] = r + 1\n            policy.hit(h)", "            ref[h] = 1\n            policy.hit(h)",
           SIM),
    Mutant("jump: stretch one step too long", "inferasim/sim/scheduler.py",
           "K = heap[0][0] - D  # steps up to and including the first finish",
           "K = heap[0][0] - D + 1  # steps up to and including the first finish",
           ("tests/test_sim_properties.py",)),
    Mutant("jump: finish step off by one", "inferasim/sim/scheduler.py",
           "fins = [(e[0] - D - 1, e[3]) for e in valid if e[0] - D - 1 < K - 1]",
           "fins = [(e[0] - D, e[3]) for e in valid if e[0] - D < K - 1]",
           ("tests/test_sim_properties.py",)),
    Mutant("jump: block phase off by one", "inferasim/sim/scheduler.py",
           "first = f + 1 + ((seq.d_join - seq.c_join - D - f - 1) % bs)",
           "first = f + 1 + ((seq.d_join - seq.c_join - D - f) % bs)",
           ("tests/test_sim_properties.py",)),
    Mutant("prefix reuse may cover the whole prompt", "inferasim/sim/scheduler.py",
           "limit = (seq.tokens - 1) // bs\n            if limit > len(seq.ids):",
           "limit = seq.tokens // bs\n            if limit > len(seq.ids):",
           SIM),
    Mutant("rejection at capacity instead of above", "inferasim/sim/engine.py",
           "np.flatnonzero((need > capacity) | (P <= 0))", "np.flatnonzero((need >= capacity) | (P <= 0))",
           ("tests/test_sim_hand.py", "tests/test_sim_properties.py")),
    Mutant("aliases become case-sensitive", "inferasim/workload/mooncake.py",
           "canon = _ALIAS.get(str(key).lower())\n            if canon is None:",
           "canon = _ALIAS.get(str(key))\n            if canon is None:",
           ("tests/test_reliability_workload.py", "tests/test_mooncake.py", "tests/test_fuzz_loaders.py")),
    Mutant("integer timestamps rebased as floats", "inferasim/workload/_parse.py",
           "arr = (np.asarray(values, dtype=np.int64) - np.int64(lo)).astype(np.float64)",
           "arr = np.asarray(values, dtype=np.float64) - float(lo)",
           ("tests/test_reliability_workload.py",)),
    Mutant("decode step-time check dropped", "inferasim/sim/scheduler.py",
           "if not (dt.min() >= 0.0 and dt.max() < math.inf):", "if not dt.max() < math.inf or dt.size == 0:",
           ("tests/test_reliability_sim.py",)),
    Mutant("timeline thinning keeps the odd rows", "inferasim/sim/scheduler.py",
           "rep.tl[:] = rep.tl[::factor]", "rep.tl[:] = rep.tl[1::factor]",
           ("tests/test_reliability_sim.py",)),
    Mutant("CSV duplicate check case-sensitive", "inferasim/workload/tabular.py",
           "if h.lower() in by_lower:", "if h in by_lower:",
           ("tests/test_reliability_workload.py", "tests/test_bad_input.py")),
    Mutant("decode group leaves one token short", "inferasim/sim/scheduler.py",
           "self.S -= computed + 1\n", "self.S -= computed\n",
           ("tests/test_sim_hand.py", "tests/test_sim_properties.py")),
    Mutant("partial last block counted in full", "inferasim/_ragged.py",
           "tokens[is_last] = np.maximum(left[is_last], 0)", "tokens[is_last] = block_size",
           ("tests/test_reliability_expectations.py",)),
]


# An editable install puts a finder on sys.meta_path that maps ``inferasim`` to the
# checkout; drop it so the mutated copy on PYTHONPATH is the package imported.
_BOOT = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path "
    "if '__editable__' not in getattr(f, '__module__', '')]; "
)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", _BOOT + code]


def run_tests(root: Path, tests: tuple[str, ...]) -> tuple[bool, float]:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    args = ["-x", "-q", "-p", "no:cacheprovider", *tests]
    t = time.perf_counter()
    proc = subprocess.run(
        _python(f"import pytest; sys.exit(pytest.main({args!r}))"),
        cwd=root, env=env, capture_output=True, text=True,
    )
    return proc.returncode == 0, time.perf_counter() - t


def copy_repo(dest: Path) -> None:
    for part in ("inferasim", "tests"):
        shutil.copytree(REPO / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")


def main(words: list[str]) -> int:
    mutants = list(MUTANTS)
    if words:
        mutants = [m for m in mutants if any(w.lower() in m.name.lower() for w in words)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        copy_repo(root)
        probe = subprocess.run(_python("import inferasim; print(inferasim.__file__)"),
                               cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(root)):
            print(f"the copy is not the imported package: {probe.stdout} {probe.stderr}")
            return 2
        used = tuple(sorted({t for m in mutants for t in m.tests}))
        ok, secs = run_tests(root, used)
        print(f"baseline ({len(used)} test files): {'pass' if ok else 'FAIL'} in {secs:.0f} s")
        if not ok:
            return 2
        rows = []
        for m in mutants:
            target = root / m.path
            original = target.read_text()
            if original.count(m.old) != 1:
                rows.append((m.name, "stale", 0.0))
                continue
            target.write_text(original.replace(m.old, m.new))
            try:
                passed, secs = run_tests(root, m.tests)
            finally:
                target.write_text(original)
            rows.append((m.name, "survived" if passed else "killed", secs))
    width = max(len(r[0]) for r in rows)
    print(f"{'mutant':<{width}}  verdict   seconds")
    for name, verdict, secs in rows:
        print(f"{name:<{width}}  {verdict:<8}  {secs:7.1f}")
    live = [r for r in rows if r[1] != "stale"]
    killed = sum(r[1] == "killed" for r in live)
    print(f"kill rate: {killed}/{len(live)} = {killed / max(len(live), 1):.0%}"
          + (f" ({len(rows) - len(live)} stale)" if len(rows) != len(live) else ""))
    return 0 if killed == len(live) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
