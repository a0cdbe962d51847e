"""The traces beyond FAST'25: Bailian (session trees, types), Azure (date-time arrivals), BurstGPT.

Bailian and BurstGPT files are not on these machines (Git LFS objects): the
tests write small files in exactly their published format. The Azure 2023
traces are in ``../shared/traces``: their tests fail (never skip) under
``CI=true`` when the files are missing.
"""

from __future__ import annotations

import io
import json
import warnings
from datetime import datetime

import numpy as np
import pytest
from helpers import hypothesis_settings, runner
from hypothesis import given
from hypothesis import strategies as st

from conftest import require_trace
from inferasim import TraceNotFoundError, Workload, WorkloadError, reuse, traces
from inferasim.sim import LinearCostModel

LIN = LinearCostModel()  # 5 ms a step + 0.05 ms a prompt token + 0.1 ms a decoding sequence


def bailian_record(chat: int, parent: int, t: float, inp: int, out: int, kind: str, turn: int,
                   ids: list[int]) -> str:
    return json.dumps({"chat_id": chat, "parent_chat_id": parent, "timestamp": t,
                       "input_length": inp, "output_length": out, "type": kind, "turn": turn,
                       "hash_ids": ids})


# A tree: 10 -> 11 -> 13 and 10 -> 12 (two continuations of one request), and a
# separate root 20. 16-token blocks; lines out of time order on purpose.
TREE = [
    bailian_record(10, -1, 0.0, 32, 3, "text", 1, [1, 2]),
    bailian_record(11, 10, 1.5, 64, 2, "text", 2, [1, 2, 3, 4]),
    bailian_record(20, -1, 0.5, 20, 1, "image", 1, [9, 8]),
    bailian_record(12, 10, 2.0, 48, 2, "search", 2, [1, 2, 5]),
    bailian_record(13, 11, 4.0, 80, 1, "file", 3, [1, 2, 3, 4, 6]),
]


def bailian(lines: list[str]) -> Workload:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lines out of time order: sorted, with a warning
        return Workload.from_bailian(io.StringIO("\n".join(lines) + "\n"))


def test_bailian_reads_the_tree_types_and_seconds():
    wl = bailian(TREE)
    f = wl.frame
    # sorted by arrival: 10 (0 s), 20 (0.5 s), 11 (1.5 s), 12 (2 s), 13 (4 s); seconds -> ms
    assert f["chat_id"].tolist() == [10, 20, 11, 12, 13]
    assert wl.arrival_ms.tolist() == [0.0, 500.0, 1500.0, 2000.0, 4000.0]
    # session = chat_id of the root: 13's parent 11's parent is 10
    assert f["session_id"].tolist() == [10, 20, 10, 10, 10]
    assert f["turn"].tolist() == [1, 1, 2, 2, 3]
    assert f["type"].tolist() == ["text", "image", "text", "search", "file"]
    assert f["line"].tolist() == [1, 3, 2, 4, 5]
    assert wl.block_size == 16 and wl.inconsistent_mask().sum() == 0


def test_bailian_round_trip_keeps_sessions_turns_and_types():
    wl = bailian(TREE)
    buf = io.BytesIO()
    wl.to_bailian(buf)
    back = Workload.from_bailian(io.BytesIO(buf.getvalue()))
    assert back == wl
    # the written records are the published fields, in order
    first = json.loads(buf.getvalue().splitlines()[0])
    assert list(first) == ["chat_id", "parent_chat_id", "timestamp", "input_length",
                           "output_length", "type", "turn", "hash_ids"]
    assert first["timestamp"] == 0.0 and first["hash_ids"] == [1, 2]


def test_sessions_follow_parent_chat_id_not_inference():
    wl = bailian(TREE)
    s = reuse.sessions(wl)
    r = s.requests
    # rows: 0 = chat 10, 1 = 20, 2 = 11, 3 = 12, 4 = 13
    assert r["parent"].tolist() == [-1, -1, 0, 0, 2]
    assert r["session"].tolist() == [0, 1, 0, 0, 0]
    assert r["turn"].tolist() == [1, 1, 2, 2, 3]
    # shared leading ids with the parent: 11 and 12 share [1, 2]; 13 shares [1, 2, 3, 4] with 11
    assert r["shared_blocks"].tolist()[2:] == [2.0, 2.0, 4.0]
    assert r["type"].tolist() == ["text", "image", "text", "search", "file"]
    assert s.sessions["turns"].tolist() == [4, 1]
    # a link the ids cannot show (a continuation with a new prompt) is kept as given;
    # inference from the ids alone finds no chain there
    lone = bailian([bailian_record(30, -1, 0, 32, 3, "text", 1, [1, 2]),
                    bailian_record(31, 30, 1, 48, 2, "search", 2, [7, 8, 9])])
    assert reuse.sessions(lone).requests["parent"].tolist() == [-1, 0]
    assert reuse.sessions(lone).requests["shared_blocks"].tolist()[1] == 0.0
    assert reuse.sessions(lone, links="hash_ids").requests["parent"].tolist() == [-1, -1]


def test_reuse_and_sim_frames_carry_the_type():
    wl = bailian(TREE)
    hits = reuse.replay_cache(wl, 100)
    assert hits["type"].tolist() == wl.frame["type"].tolist()
    # 12 and 11 hit [1, 2] (32 tokens), 13 hits [1, 2, 3, 4] (64)
    assert hits.groupby("type")["hit_tokens"].sum().to_dict() == {
        "file": 64, "image": 0, "search": 32, "text": 32}
    res = runner(cost_model=LIN, kv_blocks=64)(wl)
    assert res.requests["type"].tolist() == wl.frame["type"].tolist()


def test_closed_loop_issues_each_child_after_its_parent_plus_think_time():
    wl = bailian(TREE)
    res = runner(cost_model=LIN, kv_blocks=64, closed_loop=True, think_time=100.0)(wl)
    r = res.requests
    parent = [-1, -1, 0, 0, 2]
    for j, p in enumerate(parent):
        if p < 0:  # roots keep their recorded arrivals
            assert r["arrival_ms"][j] == wl.arrival_ms[j]
        else:  # 11 and 12 both wait for 10; 13 waits for 11
            assert r["arrival_ms"][j] == pytest.approx(r["finish_ms"][p] + 100.0)
    # chat 10 alone: prefill 5 + 0.05 * 32 = 6.6, two decode steps of 5.1 -> finishes at 16.8
    assert r["finish_ms"][0] == pytest.approx(16.8)
    assert r["arrival_ms"][2] == pytest.approx(116.8) and r["arrival_ms"][3] == pytest.approx(116.8)


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        ([bailian_record(1, -1, 0, 16, 1, "text", 1, [1]),
          bailian_record(1, -1, 1, 16, 1, "text", 1, [2])], r"line 2, field 'chat_id': chat_id 1 repeats line 1"),
        ([bailian_record(1, -1, 5, 16, 1, "text", 1, [1]),
          bailian_record(2, 1, 1, 16, 1, "text", 2, [2])], r"line 2, field 'timestamp': arrives before its parent"),
        ([bailian_record(1, 2, 0, 16, 1, "text", 1, [1]),
          bailian_record(2, 1, 0, 16, 1, "text", 2, [2])], r"field 'parent_chat_id': parent_chat_id links form a cycle"),
        ([bailian_record(1, -1, 0, 16, 1, "", 1, [1])], r"line 1, field 'type': must be a non-empty string"),
        ([bailian_record(1, -1, 0, 16, 1, "text", 0, [1])], r"line 1, field 'turn': must be an integer >= 1"),
        (['{"chat_id": 1, "timestamp": 0}'], r"line 1, field 'parent_chat_id': missing required field"),
    ],
)
def test_bailian_bad_input_names_line_and_field(lines, match):
    with pytest.raises(WorkloadError, match=match):
        Workload.from_bailian(io.StringIO("\n".join(lines) + "\n"))


def test_bailian_parent_outside_the_file_is_a_root_with_a_warning():
    lines = [bailian_record(5, 99, 0, 16, 1, "text", 4, [1])]
    with pytest.warns(UserWarning, match="1 request\\(s\\) name a parent_chat_id that is not in the file"):
        wl = Workload.from_bailian(io.StringIO(lines[0]))
    assert wl.frame["session_id"].tolist() == [5] and wl.frame["parent_chat_id"].tolist() == [99]
    assert reuse.sessions(wl).requests["parent"].tolist() == [-1]


# ------------------------------------------------------------------ BurstGPT


BURST = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,GPT-4,1087,0,1087,API log\n"
    "46.5,ChatGPT,300,12,312,Conversation log\n"
)


def test_burstgpt_keeps_failed_requests_with_a_status():
    wl = Workload.from_burstgpt(io.StringIO(BURST))
    f = wl.frame
    assert len(wl) == 3  # the failure is kept
    assert wl.arrival_ms.tolist() == [0.0, 40_000.0, 41_500.0]  # seconds after the first, in ms
    assert f["status"].tolist() == ["ok", "failed", "ok"]
    assert f["Model"].tolist() == ["ChatGPT", "GPT-4", "ChatGPT"]
    assert f["Log Type"].tolist()[1] == "API log" and f["Total tokens"].tolist() == [490, 1087, 312]
    assert not wl.has_hash_ids


def test_burstgpt_part_3_columns_are_kept():
    # BurstGPT_3.csv (README of HPMLL/BurstGPT, commit e92f533) adds `Session ID` (conversation
    # logs only) and `Elapsed time` (s, submission to complete response): kept as extra columns
    text = ("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,"
            "Log Type\n5,101,2.5,ChatGPT,472,18,490,Conversation log\n7,,1.0,GPT-4,100,0,100,API log\n")
    with pytest.warns(UserWarning, match="Session ID"):
        wl = Workload.from_burstgpt(io.StringIO(text))
    assert wl.arrival_ms.tolist() == [0.0, 2000.0]
    assert wl.frame["Elapsed time"].tolist() == [2.5, 1.0]
    assert wl.frame["status"].tolist() == ["ok", "failed"]


# ------------------------------------------------------------------ no hash ids: absent, not zero


def test_without_hash_ids_cache_numbers_are_absent_not_zero():
    wl = Workload.from_burstgpt(io.StringIO(BURST))
    d = wl.describe()
    assert np.isnan(d["infinite_token_hit_ratio"]) and "absent" in d.notes[0]
    assert "absent" in repr(d)
    with pytest.raises(WorkloadError, match="cache numbers are absent, not zero"):
        reuse.hit_rate_curve(wl, [10])
    s = runner(cost_model=LIN, kv_tokens=1 << 20)(wl).summary()
    assert np.isnan(s["token_hit_ratio"]) and np.isnan(s["block_hit_ratio"])
    assert any("absent (NaN), not zero" in n for n in s.notes)
    # a workload with ids keeps real zeros
    ids = Workload.from_requests([0], [32], [2], [[1, 2]], block_size=16)
    assert runner(cost_model=LIN, kv_tokens=1024)(ids).summary()["token_hit_ratio"] == 0.0


# ------------------------------------------------------------------ Azure


AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    "2023-11-16 18:15:46.6805900,374,44\r\n"
    "2023-11-16 18:15:50.9951690,396,109\r\n"
    "2023-11-16 18:15:51.0000001,879,20\r\n"
)


def test_azure_columns_and_exact_datetime_arrivals():
    wl = Workload.from_csv(io.StringIO(AZURE))
    # 50.9951690 - 46.6805900 = 4.3145790 s; 51.0000001 - 46.6805900 = 4.3194101 s (100 ns digit kept)
    assert wl.arrival_ms.tolist() == [0.0, 4314.579, 4319.4101]
    assert wl.input_len.tolist() == [374, 396, 879] and wl.output_len.tolist() == [44, 109, 20]


def test_datetime_time_zones():
    text = "time,isl,osl\n2024-03-31T01:30:00+01:00,1,1\n2024-03-31T01:00:00Z,1,1\n"
    # 01:30 at +01:00 is 00:30 UTC, 30 minutes before 01:00 UTC
    assert Workload.from_csv(io.StringIO(text)).arrival_ms.tolist() == [0.0, 1_800_000.0]
    mixed = "time,isl,osl\n2024-03-31T01:30:00+01:00,1,1\n2024-03-31T01:00:00,1,1\n"
    with pytest.raises(WorkloadError, match="line 3, field 'time'.*lacks a time zone"):
        Workload.from_csv(io.StringIO(mixed))
    bad = "time,isl,osl\n2024-03-31 01:30:00,1,1\n2024-02-30 01:00:00,1,1\n"
    with pytest.raises(WorkloadError, match="line 3, field 'time': not a valid date and time"):
        Workload.from_csv(io.StringIO(bad))


@pytest.mark.parametrize(("name", "requests"), [("azure_code_2023", 8_819), ("azure_conv_2023", 19_366)])
def test_azure_traces_by_name_match_a_plain_datetime_parse(name, requests, monkeypatch):
    path = require_trace(name)
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(path.parent))
    wl = Workload.from_trace(name)
    assert len(wl) == requests and wl.arrival_ms[0] == 0.0
    assert Workload.from_csv(name) == wl
    # an independent parse: the standard library (fromisoformat truncates to microseconds)
    rows = path.read_text().splitlines()[1:]
    stamps = [datetime.fromisoformat(r.split(",")[0]) for r in rows]
    expected = np.array([(t - min(stamps)).total_seconds() * 1000 for t in stamps])
    assert np.max(np.abs(np.sort(wl.arrival_ms) - np.sort(expected))) < 1e-3  # within 1 us
    span = (max(stamps) - min(stamps)).total_seconds() * 1000
    assert wl.arrival_ms[-1] == pytest.approx(span, abs=1e-3)
    assert wl.input_len.sum() == sum(int(r.split(",")[1]) for r in rows)


# ------------------------------------------------------------------ registry


def test_every_named_trace_is_known_with_its_location_and_reader():
    for name in ("bailian_traceA", "bailian_traceB", "bailian_coder", "bailian_thinking",
                 "azure_code_2023", "azure_conv_2023", "azure_code_2024", "azure_conv_2024",
                 "burstgpt", "burstgpt_2", "burstgpt_3", "toolagent", "arxiv"):
        info = traces.TRACES[name]
        assert info.url.startswith("https://") and info.url.endswith("/" + info.filename)
        assert info.format in traces.FORMATS
    assert traces.TRACES["azure_conv_2024"].sha256 is None  # week-long: not pinned
    assert traces.TRACES["bailian_coder"].format == "bailian"
    df = traces.list_traces()
    assert df.loc["azure_code_2023", "license"] == "CC-BY-4.0"
    # HPMLL/BurstGPT's LICENSE (commit e92f533): Creative Commons Attribution 4.0 International
    assert {traces.TRACES[n].license for n in ("burstgpt", "burstgpt_2", "burstgpt_3")} == {"CC-BY-4.0"}


@pytest.mark.parametrize("name", ["bailian_traceA", "azure_conv_2024", "burstgpt", "toolagent"])
def test_an_absent_trace_names_its_upstream_location(name, tmp_path, monkeypatch):
    monkeypatch.delenv("INFERASIM_TRACE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(traces, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(traces, "checkout_dir", lambda: None)
    with pytest.raises(TraceNotFoundError) as info:
        traces.find_trace(name, download=False)
    assert traces.TRACES[name].url in str(info.value)


def test_a_name_of_another_format_names_its_reader():
    with pytest.raises(ValueError, match=r"Workload.from_bailian\('bailian_coder'\)"):
        Workload.from_mooncake("bailian_coder")
    with pytest.raises(ValueError, match=r"Workload.from_csv\('azure_code_2023'\)"):
        Workload.from_bailian("azure_code_2023")


def test_a_download_without_a_pinned_hash_prints_its_sha256(tmp_path, monkeypatch, capsys):
    src = tmp_path / "src.jsonl"
    src.write_text(TREE[0] + "\n")
    digest = traces.sha256_of(src)
    with pytest.warns(UserWarning, match=digest):
        got = traces.download_trace("bailian_traceA", tmp_path / "dest", url=src.as_uri(),
                                    progressbar=False)
    assert digest in capsys.readouterr().out
    assert Workload.from_bailian(got).frame["chat_id"].tolist() == [10]


# ------------------------------------------------------------------ property: random session forests


@st.composite
def forests(draw):
    """Bailian records of a random forest: each request continues an earlier one or starts a tree."""
    n = draw(st.integers(1, 30))
    gaps = draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n))  # ms
    parents = [draw(st.integers(-1, i - 1)) if i else -1 for i in range(n)]
    chats = draw(st.permutations(list(range(100, 100 + n))))
    kinds = draw(st.lists(st.sampled_from(["text", "search", "image", "file"]), min_size=n, max_size=n))
    t = np.cumsum(gaps) / 1000.0
    lines = [bailian_record(chats[i], chats[p] if p >= 0 else -1, float(t[i]), 16 * (i + 1), 1 + i % 3,
                            kinds[i], 1 + i, list(range(1, i + 2))) for i, p in enumerate(parents)]
    order = draw(st.permutations(list(range(n))))  # file order need not be time order
    return [lines[i] for i in order], parents, chats, kinds


@hypothesis_settings(60)
@given(case=forests())
def test_random_forests_round_trip_with_their_trees(case):
    lines, parents, chats, kinds = case
    wl = bailian(lines)
    f = wl.frame
    # an independent walk up the generated parents gives each request's root
    def root(i):
        while parents[i] >= 0:
            i = parents[i]
        return chats[i]
    by_chat = {chats[i]: i for i in range(len(chats))}
    gen = [by_chat[c] for c in f["chat_id"]]  # generated index of each workload row
    assert f["session_id"].tolist() == [root(i) for i in gen]
    assert f["type"].tolist() == [kinds[i] for i in gen]
    row_of = {c: r for r, c in enumerate(f["chat_id"])}
    expected_parent = [row_of[chats[parents[i]]] if parents[i] >= 0 else -1 for i in gen]
    assert reuse.sessions(wl).requests["parent"].tolist() == expected_parent
    buf = io.BytesIO()
    wl.to_bailian(buf)
    back = Workload.from_bailian(io.BytesIO(buf.getvalue()))
    assert back.frame[["chat_id", "parent_chat_id", "session_id", "turn", "type"]].equals(
        f[["chat_id", "parent_chat_id", "session_id", "turn", "type"]])
    assert np.array_equal(back.hash_ids, wl.hash_ids)
    assert back.arrival_ms == pytest.approx(wl.arrival_ms, abs=1e-6)


def test_cli_lists_every_trace_with_its_count(capsys):
    from inferasim.cli import main

    main(["traces"])
    out = capsys.readouterr().out
    assert "azure_conv_2023 (alias azure_conv): AzureLLMInferenceTrace_conv.csv, 19,366 requests" in out
    assert "qwen_traceA_blksz_16.jsonl, unknown number of requests" in out
