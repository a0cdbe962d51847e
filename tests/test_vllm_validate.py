"""The vLLM validation harness's own logic (benchmarks/vllm_validate.py), without vLLM.

Only the parts that need no vLLM are tested here: how prompts become token
ids and how agreement is scored. Driving vLLM itself is not part of CI
(torch is large); its exactness is checked by the script's
``--unique-prefixes`` self-check.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import inferasim as ism

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "vllm_validate.py"


@pytest.fixture(scope="module")
def vv():
    spec = importlib.util.spec_from_file_location("vllm_validate", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


def test_prompt_tokens_follow_hash_ids(vv):
    # request 2 has fewer ids than its length needs: its tail is its own
    wl = ism.Workload.from_requests(
        [0, 0, 0], [1030, 600, 600], [1, 1, 1], [[7, 8, 9], [7, 3], [7]], block_size=512
    )
    toks = vv.prompt_tokens(wl)
    # hash id h owns tokens h*512 .. h*512+511; the largest id is 9, so tokens
    # unique to a request start at 10*512 = 5120, handed out in request order. A
    # partial last block (6 tokens of id 9, 88 of id 3) is tokens of the request's
    # own: the simulator caches full blocks only.
    assert toks[0] == list(range(3584, 4608)) + list(range(5120, 5126))  # ids 7, 8, a 6-token tail
    assert toks[1] == list(range(3584, 4096)) + list(range(5126, 5214))  # id 7, an 88-token tail
    assert toks[2] == list(range(3584, 4096)) + list(range(5214, 5302))  # id 7, an 88-token tail
    assert [len(t) for t in toks] == [1030, 600, 600]


def test_unique_prefixes_share_nothing(vv, monkeypatch):
    wl = ism.Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[5, 6], [5, 6]], block_size=512)
    monkeypatch.setattr(ism.Workload, "from_mooncake", classmethod(lambda cls, p: wl))
    monkeypatch.setitem(sys.modules, "_common", type(sys)("_common"))
    sys.modules["_common"].trace_path = lambda name: name
    out = vv.load_workload(2, unique=True)
    assert [list(out.block_ids(i)) for i in range(2)] == [[0, 1], [2, 3]]


def test_agreement_scores(vv):
    v = pd.DataFrame({"cached_tokens": [0, 512], "ttft_ms": [10.0, 20.0], "e2e_ms": [50.0, 40.0],
                      "first_token_ms": [10.0, 20.0], "preemptions": [0, 1]})
    s = pd.DataFrame({"cached_tokens": [0, 0], "ttft_ms": [10.0, 22.0], "e2e_ms": [50.0, 40.0],
                      "first_token_ms": [10.0, 22.0], "preemptions": [2, 1]})
    row = vv.agreement(v, s)
    assert row["cached_same_%"] == 50.0
    assert row["ttft_same_%"] == 50.0
    # relative differences 0 and 2/20 = 0.1: the p50 of two values is their mean, 5 %;
    # the p99 interpolates 99 % of the way, 0.099 -> 9.9 %
    assert row["ttft_p50_rel_%"] == pytest.approx(5.0)
    assert row["ttft_p99_rel_%"] == pytest.approx(9.9)
    assert row["e2e_same_%"] == 100.0 and row["e2e_p99_rel_%"] == 0.0
    assert row["first_token_tau"] == pytest.approx(1.0)
    assert (row["preempt_vllm"], row["preempt_inferasim"]) == (1, 3)


def test_agreement_tau_sees_reordering(vv):
    a = np.array([1.0, 2.0, 3.0])
    assert vv.kendall_tau(a, a[::-1].copy()) == pytest.approx(-1.0)
