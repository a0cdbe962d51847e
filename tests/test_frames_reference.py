"""The engine gives the same frames, bit for bit, as the engine before its restructure.

``tests/data/frames_reference.json`` holds the digests (tests/_frames_digest.py:
sha1 of the request, replica and timeline frames) that commit 41ecd0e gave on 71
configurations: 45 drawn small ones and trace ones (the ``native`` set, which
tests/test_native.py also runs interpreted) and 26 on the FAST'25 traces covering
every benchmark row and every feature (the ``reference`` set), all under ``EngineConfig.whole_blocks()``, the
rules of 41ecd0e. ``vllm_native`` and ``vllm_reference`` hold the same configurations'
digests under the default rules (vLLM v1's), recorded when those became the default
(a change detector, not a proof). A change that moves a frame on purpose changes this
file in the same commit, and says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import _frames_digest as fd
import pytest

REFERENCE = json.loads((Path(__file__).parent / "data" / "frames_reference.json").read_text())


def _check(configs: list, expected: dict[str, str], rules: str = "whole_blocks") -> None:
    assert sorted(name for name, *_ in configs) == sorted(expected)
    got = fd.digests(configs, rules)
    moved = [name for name in expected if got[name] != expected[name]]
    assert not moved, f"frames moved for {len(moved)} of {len(expected)} configurations: {moved}"


@pytest.mark.slow
def test_native_set_frames_unchanged(conversation_path):
    _check(fd.native_configs(str(conversation_path)), REFERENCE["native"])


@pytest.mark.slow
def test_reference_set_frames_unchanged(conversation_path, synthetic_trace_path):
    _check(fd.reference_configs(str(conversation_path), str(synthetic_trace_path)),
           REFERENCE["reference"])


@pytest.mark.slow
def test_native_set_frames_under_vllm_rules_unchanged(conversation_path):
    _check(fd.native_configs(str(conversation_path)), REFERENCE["vllm_native"], "vllm")


@pytest.mark.slow
def test_reference_set_frames_under_vllm_rules_unchanged(conversation_path, synthetic_trace_path):
    _check(fd.reference_configs(str(conversation_path), str(synthetic_trace_path)),
           REFERENCE["vllm_reference"], "vllm")
