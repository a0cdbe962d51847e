"""Shared fixtures.

Tests that need the FAST'25 traces read them from ``$INFERASIM_TRACE_DIR`` or
``../shared/traces/`` beside the repository. Off CI a missing trace skips the
test; under ``CI=true`` it fails, because CI always has the traces.

Hypothesis profiles: ``ci`` (selected when ``CI=true``: derandomized, so a
run is reproducible, no deadline) and ``long`` (``INFERASIM_FUZZ=long`` or
``INFERASIM_HYPOTHESIS=long``: many more examples, random seeds). Tests that
set their own ``max_examples`` scale it with :func:`examples`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import matplotlib
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

matplotlib.use("Agg")

CI = os.environ.get("CI", "").lower() == "true"
LONG = "long" in (os.environ.get("INFERASIM_FUZZ", ""), os.environ.get("INFERASIM_HYPOTHESIS", ""))

settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
if LONG:
    settings.load_profile("long")
elif CI:
    settings.load_profile("ci")


def examples(n: int) -> int:
    """``n`` examples, or 20 times as many under the long profile."""
    return n * 20 if LONG else n


def family_workload(
    rng: Any,
    n: int,
    gaps: list[float],
    prompt: tuple[int, int],
    output: tuple[int, int],
    families: int,
    shared_max: int,
) -> Any:
    """``n`` requests with 4-token blocks in ``families`` prompt families.

    Gaps between arrivals are drawn from ``gaps``, prompt and output lengths
    uniformly from ``[lo, hi)``; each request shares the first ``0 ..
    shared_max - 1`` blocks of its family's prefix, the rest are its own.
    """
    from inferasim import Workload

    arrival = np.cumsum(rng.choice(gaps, size=n))
    P = rng.integers(*prompt, size=n)
    out = rng.integers(*output, size=n)
    ids = []
    for i, p in enumerate(P):
        fam = int(rng.integers(0, families))
        shared = int(rng.integers(0, shared_max))
        nb = -(-int(p) // 4)
        ids.append([100 * fam + j if j < shared else 10_000 + 100 * i + j for j in range(nb)])
    return Workload.from_requests(arrival, P, out, ids, block_size=4)


def draw_tiers(draw: Any, gbps: Any, lat: Any, dram: int, ssd: int, pool: int) -> list[Any]:
    """A random stack of lower tiers: maybe a DRAM and an SSD tier (up to ``dram``
    and ``ssd`` tokens), and a shared pool (up to ``pool`` tokens) when drawn or
    when neither of the others was; bandwidths from ``gbps``, latencies from ``lat``."""
    from inferasim.sim import Tier

    def policy() -> dict[str, Any]:  # a write policy (publish only when written through)
        write = draw(st.sampled_from(["evict", "through"]))
        publish = draw(st.sampled_from(["computed", "all"])) if write == "through" else "computed"
        return dict(write=write, publish=publish, duplex=draw(st.booleans()))

    tiers = []
    if draw(st.booleans()):
        tiers.append(Tier("dram", draw(st.integers(0, dram)), draw(gbps), draw(gbps), draw(lat),
                          **policy()))
    if draw(st.booleans()):
        tiers.append(Tier("ssd", draw(st.integers(0, ssd)), draw(gbps), draw(gbps), draw(lat),
                          **policy()))
    if draw(st.booleans()) or not tiers:
        tiers.append(
            Tier("pool", draw(st.integers(0, pool)), draw(gbps), draw(gbps), draw(lat), shared=True,
                 **policy())
        )
    return tiers


REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """With the core compiled, deselect the ``instrumented`` tests: wrapping a
    compiled class's methods reaches no call the compiled code makes, so they
    would check nothing; tests/test_native.py runs them on the interpreted core."""
    from inferasim.sim.native import native_modules

    if "compiled" not in native_modules().values():
        return
    drop = [item for item in items if item.get_closest_marker("instrumented")]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [item for item in items if not item.get_closest_marker("instrumented")]


def load_interpreted(name: str) -> ModuleType:
    """Module ``name`` run from its source file, never a compiled extension (a
    fresh copy named ``name + "__interpreted"``; see tests/test_native.py)."""
    import inferasim

    path = Path(inferasim.__file__).parent.parent / (name.replace(".", "/") + ".py")
    alias = name + "__interpreted"
    if alias in sys.modules:
        return sys.modules[alias]
    spec = importlib.util.spec_from_file_location(alias, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    return module

TRACE_FILES = {
    "conversation": "conversation_trace.jsonl",
    "synthetic": "synthetic_trace.jsonl",
    "azure_code_2023": "AzureLLMInferenceTrace_code.csv",
    "azure_conv_2023": "AzureLLMInferenceTrace_conv.csv",
}


def trace_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("INFERASIM_TRACE_DIR"):
        dirs.append(Path(os.environ["INFERASIM_TRACE_DIR"]))
    dirs += [REPO / "traces", REPO.parent / "shared" / "traces"]
    return dirs


def require_trace(name: str) -> Path:
    """Path of a trace of ../shared/traces; skip (fail under CI=true) when it is missing."""
    filename = TRACE_FILES[name]
    for d in trace_dirs():
        if (d / filename).is_file():
            return d / filename
    from inferasim.workload.traces import TRACES

    message = (
        f"trace {filename} not found in {', '.join(str(d) for d in trace_dirs())}; download "
        f"{TRACES[name].url} into one of them (or set INFERASIM_TRACE_DIR to its folder)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: the traces must be present)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def conversation_path() -> Path:
    return require_trace("conversation")


@pytest.fixture(scope="session")
def synthetic_trace_path() -> Path:
    return require_trace("synthetic")


# -- the companion notebooks, executed once per test session --------------------------------

NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOK_KERNEL = "inferasim-test-python"


class ExecutedNotebook(NamedTuple):
    """One companion notebook after nbclient ran it (``nb`` holds the outputs)."""

    nb: Any
    seconds: float
    ipynb: Path  # the executed notebook, written for the docs build and the browser test


@pytest.fixture(scope="session")
def run_notebook(
    tmp_path_factory: pytest.TempPathFactory, conversation_path: Path, synthetic_trace_path: Path
) -> Callable[[Path], ExecutedNotebook]:
    """``run_notebook(path)`` executes ``notebooks/NN_*.py`` once per session and keeps it.

    The notebook tests check the outputs, the docs build renders them and the
    browser test opens notebook 06 from them: CI executes each notebook once.
    The kernel runs this interpreter (a throwaway kernel spec pointing at
    ``sys.executable``, so a fresh virtualenv needs no ``ipykernel install``)
    in the notebooks' folder, with ``MPLBACKEND=Agg`` and the caller's ``CI``
    setting (smaller simulator slices under CI). The trace fixtures skip
    (fail under ``CI=true``) without the FAST'25 traces. A failed execution
    is kept too: the next caller gets the same error, not a second run.
    """
    import jupytext
    import nbclient
    import nbformat

    root = tmp_path_factory.mktemp("notebooks")
    spec_dir = root / "jupyter" / "kernels" / NOTEBOOK_KERNEL
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "inferasim test kernel",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    executed = root / "executed"
    executed.mkdir()
    done: dict[Path, ExecutedNotebook | BaseException] = {}

    def run(path: Path) -> ExecutedNotebook:
        path = Path(path).resolve()
        if path not in done:
            nb = jupytext.read(path)
            client = nbclient.NotebookClient(
                nb,
                kernel_name=NOTEBOOK_KERNEL,
                timeout=600,
                resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
            )
            start = time.perf_counter()
            try:
                with pytest.MonkeyPatch.context() as env:
                    env.setenv("JUPYTER_PATH", str(root / "jupyter"))
                    env.setenv("MPLBACKEND", "Agg")
                    env.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
                    client.execute()  # CellExecutionError names the failing cell
            except Exception as error:
                done[path] = error
            else:
                target = executed / (path.stem + ".ipynb")
                nbformat.write(nb, target)
                done[path] = ExecutedNotebook(nb, time.perf_counter() - start, target)
        result = done[path]
        if isinstance(result, BaseException):
            raise result
        return result

    return run
