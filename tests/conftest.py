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

import os
from pathlib import Path

import matplotlib
import pytest
from hypothesis import HealthCheck, settings

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

REPO = Path(__file__).resolve().parents[1]
TRACE_FILES = {
    "conversation": "conversation_trace.jsonl",
    "synthetic": "synthetic_trace.jsonl",
}


def trace_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("INFERASIM_TRACE_DIR"):
        dirs.append(Path(os.environ["INFERASIM_TRACE_DIR"]))
    dirs += [REPO / "traces", REPO.parent / "shared" / "traces"]
    return dirs


def require_trace(name: str) -> Path:
    """Path of a FAST'25 trace; skip (fail under CI=true) when it is missing."""
    filename = TRACE_FILES[name]
    for d in trace_dirs():
        if (d / filename).is_file():
            return d / filename
    message = f"trace {filename} not found in {[str(d) for d in trace_dirs()]}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: the traces must be present)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def conversation_path() -> Path:
    return require_trace("conversation")


@pytest.fixture(scope="session")
def synthetic_trace_path() -> Path:
    return require_trace("synthetic")
