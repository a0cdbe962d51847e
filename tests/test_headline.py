"""The committed figures' headline numbers are what the code computes now (issue 24).

``figures/headline.json`` records every number ``figures/README.md`` quotes;
the README's tables are generated from it. This module recomputes the
numbers from the traces with the figures' own studies and compares values
(not bytes, not PNGs). When a deliberate change moves them, re-record the
JSON and the README in one step::

    python -m inferasim figures --headline figures/headline.json
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from inferasim import figures, headline
from inferasim.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "figures" / "headline.json"
README = REPO / "figures" / "README.md"
HOW = f"re-record with `{headline.RECORD_COMMAND}` if the change is meant"


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(RECORD.read_text())


@pytest.fixture(scope="module")
def computed(conversation_path: Path, synthetic_trace_path: Path, recorded: dict) -> dict:
    # The figures' studies on the full traces (the record is never a --quick one):
    # about 15 s here, most of it the routing simulations.
    assert recorded["settings"]["quick"] is False
    folder = conversation_path.parent if synthetic_trace_path.parent == conversation_path.parent else None
    return headline.headline_numbers(figures.FigureData(folder, quick=False))


def test_the_headline_numbers_are_what_the_code_computes(recorded, computed):
    drift = headline.compare_numbers(recorded, computed, rtol=1e-6)
    assert not drift, f"{len(drift)} headline numbers drifted ({HOW}):\n" + "\n".join(drift[:40])


def test_the_readme_tables_are_the_recorded_numbers(recorded):
    # no traces needed: the README's generated blocks against the JSON
    stale = headline.readme_is_current(README.read_text(), recorded)
    assert not stale, f"figures/README.md blocks {stale} are not what headline.json gives ({HOW})"


def test_a_drifted_number_is_reported_by_its_path(recorded):
    changed = copy.deepcopy(recorded)
    changed["sizing"]["ttft_p99_ms"] *= 1.001  # beyond the 1e-6 tolerance
    changed["routing"]["conversation"]["random"]["rejected"] += 1
    drift = headline.compare_numbers(recorded, changed)
    assert [d.split(":")[0] for d in drift] == [
        "sizing.ttft_p99_ms", "routing.conversation.random.rejected"
    ]
    assert headline.compare_numbers(recorded, copy.deepcopy(recorded)) == []


def test_a_changed_table_cell_is_caught(recorded):
    text = README.read_text()
    row = "| conversation | random |"
    assert row in text
    assert headline.readme_is_current(text.replace(row, "| conversation | random (edited) |", 1),
                                      recorded) == ["notebook03"]


def test_the_record_command_is_the_cli():
    argv = headline.RECORD_COMMAND.split()[3:]  # after "python -m inferasim"
    args = build_parser(argv).parse_args(argv)
    assert args.command == "figures" and args.headline == "figures/headline.json"
    assert headline.RECORD_COMMAND in " ".join(README.read_text().split())  # documented there


def test_the_readme_quotes_the_record(recorded):
    # spot checks, formatted as a reader sees them
    text = README.read_text()
    s = recorded["sizing"]
    assert f"{100 * s['token_hit_ratio']:.1f}% of prompt tokens served from cache" in text
    assert f"p99 {s['ttft_p99_ms']:,.0f} ms" in text
    lru = recorded["hit_rate_at_3m"]["conversation"]
    assert f"| conversation | {100 * lru['ceiling']:.1f}% | {100 * lru['lru']:.1f}%" in text
