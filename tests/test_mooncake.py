"""Tests of the Mooncake trace reader and writer, and of the real FAST'25 traces.

Bad-input errors live in test_bad_input.py.
"""

from __future__ import annotations

import gzip
import io
import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload


def line(t, i, o, ids, **keys) -> str:
    rec = {"timestamp": t, "input_length": i, "output_length": o, "hash_ids": ids}
    for old, new in keys.items():
        rec[new] = rec.pop(old)
    return json.dumps(rec)


def read(text: str, **kw) -> Workload:
    return Workload.from_mooncake(io.StringIO(text), **kw)


def replay(wl: Workload) -> tuple[float, float]:
    """Infinite-cache hit ratios by a plain set replay (see test_workload_core.replay)."""
    seen: set[int] = set()
    hb = tb = ht = 0
    bs = wl.block_size
    for i in range(len(wl)):
        ids = wl.block_ids(i).tolist()
        n, length = len(ids), int(wl.input_len[i])
        tb += n
        for j, h in enumerate(ids):
            if h not in seen:
                break
            hb += 1
            ht += bs if j < n - 1 else length - bs * (n - 1)
        seen.update(ids)
    return hb / tb, ht / int(wl.input_len.sum())


# ------------------------------------------------------------------ reading


def test_reads_jsonl_and_rebases_time():
    text = "\n".join([line(100, 1024, 2, [0, 1]), line(150.5, 700, 4, [0, 2])]) + "\n"
    wl = read(text)
    assert wl.arrival_ms.tolist() == [0.0, 50.5]
    assert wl.input_len.tolist() == [1024, 700]
    assert wl.output_len.tolist() == [2, 4]
    assert wl.hash_ids.tolist() == [0, 1, 0, 2]
    assert wl.offsets.tolist() == [0, 2, 4]
    assert wl.frame["line"].tolist() == [1, 2]
    assert wl.has_hash_ids and wl.block_size == 512


def test_reads_json_array():
    text = json.dumps([
        {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [5]},
        {"timestamp": 3, "input_length": 16, "output_length": 2, "hash_ids": [5]},
    ], indent=2)
    wl = read(text, block_size=16)
    assert wl.input_len.tolist() == [10, 16]
    assert wl.hash_ids.tolist() == [5, 5]
    assert wl.frame["line"].tolist() == [1, 2]  # record numbers for an array
    assert wl.block_size == 16


def test_blank_lines_skipped_but_counted(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n" + line(0, 1, 1, [1]) + "\n\n" + line(5, 1, 1, [2]) + "\n\n")
    wl = Workload.from_mooncake(path, block_size=16)
    assert len(wl) == 2
    assert wl.frame["line"].tolist() == [2, 4]
    assert wl.source == "t.jsonl"


def test_crlf_line_endings():
    text = line(0, 1, 1, [1]) + "\r\n" + line(5, 2, 1, [1]) + "\r\n"
    assert read(text, block_size=16).input_len.tolist() == [1, 2]


@pytest.mark.parametrize(
    ("ts", "isl", "osl", "ids"),
    [
        ("Timestamp", "Input_Length", "OUTPUT_LENGTH", "Hash_Ids"),
        ("arrival", "input_len", "output_len", "block_hashes"),
        ("TIME", "ISL", "OSL", "Blocks"),
        ("arrival_ms", "isl", "osl", "blocks"),
    ],
)
def test_case_insensitive_aliases(ts, isl, osl, ids):
    keys = dict(timestamp=ts, input_length=isl, output_length=osl, hash_ids=ids)
    text = line(10, 20, 3, [7, 8], **keys) + "\n" + line(30, 16, 5, [7], **keys) + "\n"
    wl = read(text, block_size=16)
    assert wl.arrival_ms.tolist() == [0, 20]
    assert wl.input_len.tolist() == [20, 16]
    assert wl.output_len.tolist() == [3, 5]
    assert wl.hash_ids.tolist() == [7, 8, 7]


def test_mixed_keys_across_lines_and_extra_keys_ignored():
    text = (line(0, 16, 1, [1]) + "\n"
            + json.dumps({"TIME": 4, "isl": 32, "osl": 2, "blocks": [1, 2], "note": "x"}) + "\n")
    wl = read(text, block_size=16)
    assert wl.input_len.tolist() == [16, 32]
    assert wl.hash_ids.tolist() == [1, 1, 2]


def test_gzip_file(tmp_path):
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress((line(0, 600, 3, [0, 1]) + "\n").encode()))
    wl = Workload.from_mooncake(path)
    assert wl.input_len.tolist() == [600] and wl.hash_ids.tolist() == [0, 1]


def test_inconsistent_line_is_kept_counted_and_warned():
    # ceil(1024/512) = 2 ids expected: line 2 has 3, line 3 has 1
    text = "\n".join([line(0, 1024, 1, [1, 2]), line(1, 1024, 1, [1, 2, 3]),
                      line(2, 1024, 1, [1])]) + "\n"
    with pytest.warns(UserWarning, match=r"2 request\(s\) have len\(hash_ids\)"):
        wl = read(text)
    assert wl.num_blocks.tolist() == [2, 3, 1]
    assert wl.describe()["inconsistent_blocks"] == 2
    # last block of line 3 holds 1024 - 512 * 0 = 1024 tokens (kept, not fixed)
    assert wl.block_tokens().tolist() == [512, 512, 512, 512, 0, 1024]


def test_consistent_trace_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read(line(0, 1024, 1, [1, 2]) + "\n")


def test_unsorted_timestamps_sorted_stably_with_warning():
    text = "\n".join([line(30, 1, 1, [1]), line(10, 2, 1, [2]), line(30, 3, 1, [3]),
                      line(20, 4, 1, [4])]) + "\n"
    with pytest.warns(UserWarning, match="not in time order"):
        wl = read(text, block_size=16)
    # by time: 10 (line 2), 20 (line 4), 30 (line 1), 30 (line 3: tie keeps file order)
    assert wl.frame["line"].tolist() == [2, 4, 1, 3]
    assert wl.arrival_ms.tolist() == [0, 10, 20, 20]
    assert wl.input_len.tolist() == [2, 4, 1, 3]
    assert wl.hash_ids.tolist() == [2, 4, 1, 3]


def test_trace_name_is_accepted(conversation_path, synthetic_trace_path, monkeypatch, tmp_path):
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(conversation_path.parent))
    monkeypatch.chdir(tmp_path)
    assert len(Workload.from_mooncake("conversation")) == 12_031
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(synthetic_trace_path.parent))
    assert len(Workload.from_mooncake("synthetic")) == 3_993


# ------------------------------------------------------------------ writing


def test_writer_output_format():
    wl = Workload.from_requests([0, 2], [600, 10], [3, 1], [[0, 1], [0]])
    buf = io.StringIO()
    wl.to_mooncake(buf)
    lines = buf.getvalue().splitlines()
    # whole-ms arrivals are written as integers
    assert lines == [
        '{"timestamp":0,"input_length":600,"output_length":3,"hash_ids":[0,1]}',
        '{"timestamp":2,"input_length":10,"output_length":1,"hash_ids":[0]}',
    ]
    buf = io.BytesIO()
    Workload.from_requests([0, 2.25], [1, 1], [1, 1], [[9], [9]]).to_mooncake(buf, exact=True)
    assert [json.loads(x)["timestamp"] for x in buf.getvalue().splitlines()] == [0.0, 2.25]
    buf = io.BytesIO()  # the default: AIPerf's whole ms
    Workload.from_requests([0, 2.25], [1, 1], [1, 1], [[9], [9]]).to_mooncake(buf)
    assert [json.loads(x)["timestamp"] for x in buf.getvalue().splitlines()] == [0, 2]


def test_writer_needs_hash_ids():
    with pytest.raises(ValueError, match="no hash ids"):
        Workload.from_requests([0], [1], [1]).to_mooncake(io.StringIO())


def test_gzip_round_trip(tmp_path):
    wl = Workload.from_synthetic(200, rate=20.0, input_len=1500, output_len=20, range_ratio=0.5,
                                 num_prefixes=3, prefix_len=1024, seed=2)
    path = tmp_path / "out.jsonl.gz"
    wl.to_mooncake(path, exact=True)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    back = Workload.from_mooncake(path)
    # the Mooncake format has no prefix_id: everything else comes back exactly
    assert back == Workload(wl.frame.drop(columns="prefix_id"), wl.hash_ids, wl.offsets)
    assert np.array_equal(back.hash_ids, wl.hash_ids)
    assert np.array_equal(back.arrival_ms, wl.arrival_ms)


@st.composite
def mooncake_workloads(draw):
    bs = draw(st.sampled_from([1, 16, 512]))
    n = draw(st.integers(1, 20))
    times = draw(st.lists(
        st.one_of(st.integers(0, 10**9).map(float),
                  st.floats(0, 1e9, allow_nan=False, allow_infinity=False)),
        min_size=n, max_size=n))
    inputs = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(0, 10**5), min_size=n, max_size=n))
    ids = draw(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
                        min_size=n, max_size=n))
    wl = Workload.from_requests(times, inputs, outputs, ids, block_size=bs)
    return wl.shift_time(-wl.arrival_ms[0])  # readers rebase to the first arrival


@settings(max_examples=80, deadline=None)
@given(wl=mooncake_workloads())
def test_round_trip_is_exact(wl):
    buf = io.BytesIO()
    wl.to_mooncake(buf, exact=True)
    buf.seek(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random id counts are mostly inconsistent
        back = Workload.from_mooncake(buf, block_size=wl.block_size)
    assert back == wl
    assert back.arrival_ms.tolist() == wl.arrival_ms.tolist()


def test_round_trip_rebases_a_nonzero_first_arrival():
    # documented: exact when the first request arrives at 0 ms; otherwise rebased to 0
    wl = Workload.from_requests([100, 150], [600, 10], [3, 1], [[0, 1], [0]])
    buf = io.BytesIO()
    wl.to_mooncake(buf)
    assert b'"timestamp":100,' in buf.getvalue()  # written as given
    buf.seek(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = Workload.from_mooncake(buf)
    assert back.arrival_ms.tolist() == [0.0, 50.0]
    assert back == wl.shift_time(-100)


# ------------------------------------------------------------ real traces


def test_conversation_trace(conversation_path):
    wl = Workload.from_mooncake(conversation_path)
    d = wl.describe()
    assert d["requests"] == 12_031
    assert round(d["input_mean"]) == 12_035
    assert round(d["output_mean"]) == 343
    assert d["blocks_total"] == 288_500
    assert d["blocks_unique"] == 182_790
    assert d["inconsistent_blocks"] == 0
    blocks, tokens = replay(wl)
    assert d["infinite_block_hit_ratio"] == pytest.approx(blocks, abs=1e-12)
    assert d["infinite_token_hit_ratio"] == pytest.approx(tokens, abs=1e-12)
    # in this trace every repeat of an id is a prefix hit (checked by the replay above)
    assert blocks == pytest.approx(1 - 182_790 / 288_500, abs=1e-12)


def test_synthetic_trace(synthetic_trace_path):
    wl = Workload.from_mooncake(synthetic_trace_path)
    d = wl.describe()
    assert d["requests"] == 3_993
    assert d["inconsistent_blocks"] == 0
    flat = wl.hash_ids.tolist()
    assert d["blocks_total"] == len(flat) and d["blocks_unique"] == len(set(flat))
    blocks, tokens = replay(wl)
    assert d["infinite_block_hit_ratio"] == pytest.approx(blocks, abs=1e-12)
    assert d["infinite_token_hit_ratio"] == pytest.approx(tokens, abs=1e-12)


@pytest.mark.parametrize(("fixture", "expected"), [("conversation_path", 206),
                                                   ("synthetic_trace_path", 407)])
def test_partial_last_blocks_shared_with_other_requests(fixture, expected, request):
    # cross-check of the block semantics against the brief: requests whose partial last block
    # (input_len not a multiple of 512) carries an id that also appears in another request
    path = request.getfixturevalue(fixture)
    wl = Workload.from_mooncake(path)
    owners: dict[int, set[int]] = {}
    for i in range(len(wl)):
        for h in wl.block_ids(i).tolist():
            owners.setdefault(h, set()).add(i)
    tokens = wl.block_tokens()
    count = 0
    for i in range(len(wl)):
        last = int(wl.offsets[i + 1]) - 1
        if wl.num_blocks[i] and tokens[last] < 512 and len(owners[int(wl.hash_ids[last])]) > 1:
            count += 1
    assert count == expected


def test_real_trace_round_trips_record_for_record(conversation_path, tmp_path):
    wl = Workload.from_mooncake(conversation_path)
    out = tmp_path / "copy.jsonl"
    wl.to_mooncake(out)
    original = [json.loads(x) for x in conversation_path.read_text().splitlines() if x.strip()]
    copied = [json.loads(x) for x in out.read_text().splitlines()]
    assert copied == original
    assert Workload.from_mooncake(out) == wl
