"""session_id / turn columns in workload sources, and multi-turn synthetic sessions."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from inferasim import Workload, WorkloadError, reuse


def csv(text: str) -> Workload:
    return Workload.from_csv(io.StringIO(text))


def jsonl(*records: dict) -> Workload:
    return Workload.from_mooncake(io.StringIO("".join(json.dumps(r) + "\n" for r in records)))


def rec(t, n, ids, **extra):
    return {"timestamp": t, "input_length": n, "output_length": 1, "hash_ids": ids, **extra}


# ------------------------------------------------------------------ CSV


def test_csv_aliases_and_explicit_turns():
    wl = csv("time,isl,osl,Conversation_ID,round\n0,10,1,7,1\n4,20,1,7,2\n5,3,1,8,1\n")
    assert wl.frame["session_id"].tolist() == [7, 7, 8]
    assert wl.frame["turn"].tolist() == [1, 2, 1]


def test_csv_turns_numbered_by_arrival_when_absent():
    # rows out of order: b@0, a@5, a@2, a@2 (tie: source order), b@9
    with pytest.warns(UserWarning, match="arrivals are not in time order; sorted them"):
        wl = csv("time,isl,osl,chat_id\n0,1,1,b\n5,1,1,a\n2,1,1,a\n2,1,1,a\n9,1,1,b\n")
    f = wl.frame.sort_values("line")
    # a: lines 4 and 5 arrive at 2 (turns 1, 2), line 3 at 5 (turn 3); b: 1, 2
    assert f["turn"].tolist() == [1, 3, 1, 2, 2]
    assert f["session_id"].tolist() == ["b", "a", "a", "a", "b"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("time,isl,osl,turn\n0,1,1,1\n", "turn column needs a session_id"),
        ("time,isl,osl,session_id,turn\n0,1,1,a,1\n3,1,1,a,1\n", r"line 3, field 'turn': turn 1 of session 'a' repeats line 2"),
        ("time,isl,osl,session_id,turn\n5,1,1,a,1\n3,1,1,a,2\n", r"line 3, field 'turn': turn 2 of session 'a' arrives before its turn 1 \(line 2\)"),
        ("time,isl,osl,session_id,turn\n0,1,1,a,1.5\n", r"line 2, field 'turn': must be a whole number >= 1"),
        ("time,isl,osl,session_id,turn\n0,1,1,a,0\n", r"line 2, field 'turn'"),
        ("time,isl,osl,session_id\n0,1,1,a\n1,1,1,\n", r"line 3, field 'session_id'"),
        ("time,isl,osl,chat_id,session_id\n0,1,1,a,a\n", "both give session_id"),
    ],
)
def test_csv_bad_session_columns_name_the_line(text, match):
    with pytest.raises(WorkloadError, match=match):
        csv(text)


def test_csv_round_trip_keeps_sessions():
    wl = csv("time,isl,osl,session_id,turn\n0,10,1,x,1\n4,20,1,x,2\n5,3,1,y,1\n")
    buf = io.StringIO()
    wl.to_csv(buf)
    buf.seek(0)
    assert Workload.from_csv(buf) == wl


# ------------------------------------------------------------------ Mooncake


def test_mooncake_extra_fields():
    wl = jsonl(rec(0, 600, [0, 1], session_id="s1"), rec(5, 1100, [0, 1, 2], session_id="s1"),
               rec(6, 10, [9], Session_ID="s2"))
    assert wl.frame["session_id"].tolist() == ["s1", "s1", "s2"]
    assert wl.frame["turn"].tolist() == [1, 2, 1]
    buf = io.StringIO()
    wl.to_mooncake(buf)
    assert '"session_id":"s1","turn":2' in buf.getvalue()
    buf.seek(0)
    assert Workload.from_mooncake(buf) == wl


def test_mooncake_without_session_fields_has_no_columns():
    wl = jsonl(rec(0, 600, [0, 1]))
    assert "session_id" not in wl.frame and "turn" not in wl.frame


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ([rec(0, 1, [0], session_id=1), rec(1, 1, [1])], r"line 2, field 'session_id': lacks session_id, unlike line 1"),
        ([rec(0, 1, [0]), rec(1, 1, [1], session_id=1)], r"line 2, field 'session_id': has session_id"),
        ([rec(0, 1, [0], session_id=1, conversation_id=2)], "both give session_id"),
        ([rec(0, 1, [0], session_id=[1])], r"line 1, field 'session_id': must be a session id"),
        ([rec(0, 1, [0], session_id=1, turn=2), rec(1, 1, [1], session_id=1, turn=2)], "repeats line 1"),
    ],
)
def test_mooncake_bad_session_fields_name_the_line(records, match):
    with pytest.raises(WorkloadError, match=match):
        jsonl(*records)


# ------------------------------------------------------------------ synthetic sessions


def test_synthetic_sessions_by_hand():
    # 5 requests, 2 turns: sessions start every 1000 ms (rate 2 requests/s = 1 session/s),
    # no think time. Turn 1: 1000 tokens = 2 blocks (1 full); turn 2: 1000 + 24 + 1000
    # = 2024 tokens = 4 blocks, starting with turn 1's full block.
    wl = Workload.from_synthetic(5, rate=2.0, arrival="deterministic", input_len=1000,
                                 output_len=24, num_turns=2, block_size=512)
    f = wl.frame
    assert f["arrival_ms"].tolist() == [0, 0, 1000, 1000, 2000]
    assert f["session_id"].tolist() == [0, 0, 1, 1, 2]
    assert f["turn"].tolist() == [1, 2, 1, 2, 1]
    assert f["input_len"].tolist() == [1000, 2024, 1000, 2024, 1000]
    # fresh ids turn by turn: turn 1 of sessions 0-2 take 0..5, turn 2 takes 6.. (session
    # 2's turn 2 is generated, then cut by num_requests)
    assert [wl.block_ids(i).tolist() for i in range(5)] == [
        [0, 1], [0, 6, 7, 8], [2, 3], [2, 9, 10, 11], [4, 5]]


def test_synthetic_sessions_with_a_prefix_pool_grow_turn_by_turn():
    # pool prefix of 1 block; turn 1 = 512 + 700 = 1212 tokens (3 blocks, 2 full);
    # turn 2 = 1212 + 10 + 700 = 1922 (4 blocks) keeps both full blocks; turn 3 =
    # 1922 + 10 + 700 = 2632 (6 blocks) keeps turn 2's 3 full blocks
    wl = Workload.from_synthetic(3, rate=1.0, input_len=700, output_len=10, num_prefixes=1,
                                 prefix_len=512, num_turns=3, think_time_ms=500, seed=4)
    assert wl.input_len.tolist() == [1212, 1922, 2632]
    a, b, c = (wl.block_ids(i).tolist() for i in range(3))
    assert a[0] == b[0] == c[0] == 0  # the pooled prefix
    assert b[:2] == a[:2] and c[:3] == b[:3] and len(c) == 6
    assert wl.frame["prefix_id"].tolist() == [0, 0, 0]


def test_synthetic_think_time_and_reuse_sessions_agree():
    wl = Workload.from_synthetic(3000, rate=10.0, input_len=2048, output_len=64,
                                 num_turns=4, think_time_ms=20_000, seed=2)
    f = wl.frame
    gaps = f.groupby("session_id")["arrival_ms"].diff().dropna()
    assert (gaps >= 0).all()
    assert gaps.mean() == pytest.approx(20_000, rel=0.05)  # 2250 exponential gaps
    # an independent inference of the chains finds the same sessions and turns
    inferred = reuse.sessions(wl).requests
    assert inferred["turn"].tolist() == f["turn"].tolist()
    assert inferred["session"].nunique() == f["session_id"].nunique() == 750
    # in steady state (sessions start over ~300 s, each lasts ~60 s) requests
    # arrive at `rate`: about 10/s * 240 s between 60 s and 300 s
    steady = ((f["arrival_ms"] >= 60_000) & (f["arrival_ms"] < 300_000)).sum()
    assert steady == pytest.approx(2400, rel=0.1)


def test_synthetic_single_turn_unchanged_and_validated():
    one = Workload.from_synthetic(50, rate=5.0, seed=1)
    assert one == Workload.from_synthetic(50, rate=5.0, seed=1, num_turns=1)
    assert "turn" not in one.frame
    with pytest.raises(ValueError, match="num_turns"):
        Workload.from_synthetic(5, rate=1.0, num_turns=0)
    with pytest.raises(ValueError, match="think_time_ms"):
        Workload.from_synthetic(5, rate=1.0, num_turns=2, think_time_ms=np.nan)
