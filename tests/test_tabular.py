"""Tests of CSV / JSON length-and-arrival files (``Workload.from_csv`` / ``to_csv``).

Bad-input errors live in test_bad_input.py.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferasim import Workload


def read(text: str, **kw) -> Workload:
    return Workload.from_csv(io.StringIO(text), **kw)


def read_quiet(text: str, **kw) -> Workload:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        return read(text, **kw)


# ------------------------------------------------------------------ aliases


@pytest.mark.parametrize("name", ["arrival", "arrival_ms", "time", "step", "Time", "ARRIVAL_MS",
                                  "Step", "timestamp"])
def test_arrival_aliases(name):
    wl = read_quiet(f"{name},isl,osl\n100,10,1\n250,20,2\n")
    assert wl.arrival_ms.tolist() == [0.0, 150.0]  # rebased to the first arrival


@pytest.mark.parametrize("name", ["isl", "input_len", "input_length", "prompt_len", "ISL",
                                  "Input_Length", "PROMPT_LEN"])
def test_input_aliases(name):
    wl = read_quiet(f"time,{name},osl\n0,10,1\n5,20,2\n")
    assert wl.input_len.tolist() == [10, 20]
    assert wl.input_len.dtype == np.int64


@pytest.mark.parametrize("name", ["osl", "output_len", "output_length", "OSL", "Output_Len"])
def test_output_aliases(name):
    wl = read_quiet(f"time,isl,{name}\n0,10,1\n5,20,2\n")
    assert wl.output_len.tolist() == [1, 2]


def test_header_whitespace_and_cell_spaces():
    wl = read_quiet(" Time , ISL , OSL \n0, 10, 1\n5, 20, 2\n")
    assert wl.input_len.tolist() == [10, 20] and wl.arrival_ms.tolist() == [0, 5]


def test_crlf_bom_and_quoted_cells():
    data = '\ufefftime,isl,osl\r\n"0","10",1\r\n5,"20",2\r\n'.encode()
    wl = Workload.from_csv(io.BytesIO(data))
    assert wl.arrival_ms.tolist() == [0, 5] and wl.input_len.tolist() == [10, 20]
    assert wl.frame["line"].tolist() == [2, 3]


# ---------------------------------------------------------- missing columns


def test_missing_arrival_column_defaults_to_zero_with_warning():
    with pytest.warns(UserWarning, match="no arrival_ms column"):
        wl = read("isl,osl\n10,1\n20,2\n")
    assert wl.arrival_ms.tolist() == [0.0, 0.0]
    assert wl.input_len.tolist() == [10, 20]


def test_missing_input_column_defaults_to_one_with_warning():
    with pytest.warns(UserWarning, match="no input_len column"):
        wl = read("time,osl\n0,5\n1,6\n")
    assert wl.input_len.tolist() == [1, 1]
    assert wl.output_len.tolist() == [5, 6]


def test_missing_output_column_defaults_to_one_with_warning():
    with pytest.warns(UserWarning, match="no output_len column"):
        wl = read("time,isl\n0,5\n1,6\n")
    assert wl.output_len.tolist() == [1, 1]
    assert wl.input_len.dtype == np.int64 and wl.output_len.dtype == np.int64


# ----------------------------------------------------- misspelt column names


@pytest.mark.parametrize(("header", "column", "match"), [
    ("time,isl,output_lne", "output_lne", "output_len"),   # the file
    ("time,isl,outputlen", "outputlen", "output_len"),
    ("arival_ms,isl,osl", "arival_ms", "arrival_ms"),
    ("time,input_lenght,osl", "input_lenght", "input_length"),
])
def test_a_misspelt_required_column_is_an_error_not_a_default(header, column, match):
    # Before: a warning that never named the column, and 1 for every output length.
    from inferasim.errors import WorkloadError

    with pytest.raises(WorkloadError) as err:
        read(f"{header}\n0,100,5\n10,200,7\n")
    text = str(err.value)
    assert f"{column!r}" in text and f"did you mean {match}?" in text and "line 1" in text


def column_notes(wl):
    """The notes of ``describe()`` on columns (the no-hash-ids note left out)."""
    return [n for n in wl.describe().notes if not n.startswith("no hash ids")]


def test_a_misspelt_optional_column_is_kept_with_a_warning_and_a_describe_note():
    with pytest.warns(UserWarning, match=r"column 'hash_id' is not an accepted name \(did you mean hash_ids\?\)"):
        wl = read("time,isl,osl,hash_id\n0,100,5,1\n10,200,7,2\n")
    assert not wl.has_hash_ids and wl.frame["hash_id"].tolist() == [1, 2]
    # (after the note that a workload without hash ids has no cache numbers)
    assert column_notes(wl) == [
        "column 'hash_id' is kept as an extra column, not read (did you mean hash_ids?)",
    ]
    assert "did you mean hash_ids?" in repr(wl.describe())


def test_a_misspelling_of_a_column_that_is_present_warns_and_keeps_both():
    # osl gives output_len; "output_lne" beside it is extra data with a suspicious name
    with pytest.warns(UserWarning, match="did you mean output_len"):
        wl = read("time,isl,osl,output_lne\n0,100,5,9\n")
    assert wl.output_len.tolist() == [5] and wl.frame["output_lne"].tolist() == [9]


def test_a_missing_column_with_no_lookalike_still_defaults_and_names_the_other_columns():
    with pytest.warns(UserWarning, match=r"using 1 for every request \(other columns, kept as they are: priority\)"):
        wl = read("time,isl,priority\n0,100,1\n")
    assert wl.output_len.tolist() == [1] and column_notes(wl) == []


def test_plain_extra_columns_are_not_taken_for_misspellings():
    # "session" is an extra column on purpose; "priority", "tenant" resemble nothing
    wl = read_quiet("time,isl,osl,session,priority,tenant\n0,100,5,a,1,2\n")
    assert column_notes(wl) == []


def test_a_header_of_misspellings_only_names_each_close_match():
    from inferasim.errors import WorkloadError

    with pytest.raises(WorkloadError, match=r"did you mean isl for 'isll'\?"):
        read("tme,isll\n0,100\n")


def test_json_records_with_a_misspelt_key_fail_the_same_way():
    from inferasim.errors import WorkloadError

    text = json.dumps({"timestamp": 0, "input_length": 10, "output_lenght": 3}) + "\n"
    with pytest.raises(WorkloadError, match=r"'output_lenght'.*did you mean output_length\?"):
        read(text)


# ------------------------------------------------------------- no hash ids


def test_no_hash_ids_describe_says_so():
    wl = read_quiet("time,isl,osl\n0,100,10\n500,300,30\n")
    assert not wl.has_hash_ids
    d = wl.describe()
    for key in ("blocks_total", "blocks_unique", "infinite_block_hit_ratio",
                "infinite_token_hit_ratio"):
        assert math.isnan(d[key])
    assert d["requests"] == 2 and d["input_mean"] == 200 and d["offered_rate_rps"] == 4.0
    assert "no hash ids" in repr(wl)


# ---------------------------------------------------------------- hash ids


@pytest.mark.parametrize("cell", ["1 2", "[1, 2]", "1,2", " 1  2 "])
def test_hash_id_column_formats(cell):
    quoted = f'"{cell}"'
    wl = read_quiet(f"time,isl,osl,hash_ids\n0,1024,1,{quoted}\n1,512,1,3\n")
    assert wl.has_hash_ids
    assert [wl.block_ids(i).tolist() for i in range(2)] == [[1, 2], [3]]


@pytest.mark.parametrize("name", ["block_hashes", "Blocks", "HASH_IDS"])
def test_hash_id_aliases(name):
    wl = read_quiet(f"time,isl,osl,{name}\n0,512,1,7\n1,512,1,7\n")
    assert wl.describe()["infinite_block_hit_ratio"] == 0.5


def test_empty_hash_id_cell_is_an_empty_list():
    wl = read_quiet("time,isl,osl,hash_ids\n0,0,1,\n1,512,1,7\n")
    assert wl.num_blocks.tolist() == [0, 1]


def test_inconsistent_hash_id_count_is_kept_and_counted():
    # ceil(1024 / 512) = 2 ids expected, the row has 1: kept as is, counted by describe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wl = read("time,isl,osl,hash_ids\n0,1024,1,1\n1,1024,1,1 2\n")
    assert wl.num_blocks.tolist() == [1, 2]
    assert wl.describe()["inconsistent_blocks"] == 1


def test_inconsistent_hash_id_count_warns():
    with pytest.warns(UserWarning, match="len\\(hash_ids\\)"):
        read("time,isl,osl,hash_ids\n0,1024,1,1\n")


# -------------------------------------------------------------------- JSON


def test_json_array_of_objects():
    text = json.dumps([{"time": 5, "ISL": 10, "osl": 1}, {"time": 9, "ISL": 20, "osl": 2}])
    wl = read_quiet(text)
    assert wl.arrival_ms.tolist() == [0, 4] and wl.input_len.tolist() == [10, 20]
    assert wl.frame["line"].tolist() == [1, 2]
    assert not wl.has_hash_ids


def test_json_lines_of_objects_with_hash_ids():
    text = ('{"arrival": 0, "input_len": 600, "output_len": 2, "hash_ids": [1, 2]}\n'
            '\n'
            '{"arrival": 3, "input_len": 512, "output_len": 1, "hash_ids": [1]}\n')
    wl = read_quiet(text)
    assert wl.has_hash_ids and wl.hash_ids.tolist() == [1, 2, 1]
    assert wl.frame["line"].tolist() == [1, 3]


# ------------------------------------------------------------ other columns


def test_extra_columns_kept_and_typed_reserved_renamed():
    # issue 12 class 6: reserved names used to be dropped without a word
    with pytest.warns(UserWarning, match="reserved") as record:
        wl = read("time,isl,osl,session,weight,tenant,line,request_id\n"
                  "0,10,1,a,1.5,3,99,7\n1,20,2,b,2,4,98,8\n")
    assert {"'line'", "'request_id'"} <= {w for r in record for w in str(r.message).split() if w.startswith("'")}
    f = wl.frame
    assert f["user_line"].tolist() == [99, 98] and f["user_request_id"].tolist() == [7, 8]
    assert f["session"].tolist() == ["a", "b"]
    assert f["weight"].dtype == np.float64 and f["weight"].tolist() == [1.5, 2.0]
    assert f["tenant"].dtype == np.int64
    # "line" is the provenance column: the file's own line numbers, header = line 1
    assert f["line"].tolist() == [2, 3]
    assert "request_id" not in f.columns and f.index.name == "request_id"


def test_unsorted_rows_sorted_with_warning_keeping_line():
    with pytest.warns(UserWarning, match="not in time order"):
        wl = read("time,isl,osl\n20,1,1\n10,2,1\n20,3,1\n0,4,1\n")
    # by time: 0 (line 5), 10 (line 3), 20 (line 2), 20 (line 4)
    assert wl.frame["line"].tolist() == [5, 3, 2, 4]
    assert wl.input_len.tolist() == [4, 2, 1, 3]


def test_gzip_csv_and_path_source(tmp_path):
    path = tmp_path / "lens.csv.gz"
    path.write_bytes(gzip.compress(b"time,isl,osl\n0,10,1\n"))
    wl = Workload.from_csv(path)
    assert wl.input_len.tolist() == [10] and wl.source == "lens.csv.gz"


def test_block_size_argument():
    wl = read_quiet("time,isl,osl,hash_ids\n0,20,1,1 2\n", block_size=16)
    assert wl.block_size == 16 and wl.block_tokens().tolist() == [16, 4]


# ---------------------------------------------------------------- writing


def test_to_csv_text():
    buf = io.StringIO()
    Workload.from_requests([0, 1.5], [600, 10], [3, 1], [[0, 1], [0]], session=["x", "y"]).to_csv(buf)
    assert buf.getvalue().splitlines() == [
        "arrival_ms,input_len,output_len,session,hash_ids",
        "0.0,600,3,x,0 1",
        "1.5,10,1,y,0",
    ]


def test_csv_round_trip_synthetic_with_prefix_id(tmp_path):
    wl = Workload.from_synthetic(300, rate=7.0, arrival="gamma", burstiness=0.3, input_len=700,
                                 output_len=50, range_ratio=0.4, num_prefixes=4, prefix_len=512,
                                 prefix_zipf=1.1, seed=9)
    path = tmp_path / "w.csv"
    wl.to_csv(path)
    back = Workload.from_csv(path)
    assert back == wl
    assert back.frame["prefix_id"].dtype == np.int64
    assert back.arrival_ms.tolist() == wl.arrival_ms.tolist()


def test_csv_gzip_round_trip(tmp_path):
    wl = Workload.from_synthetic(50, rate=3.0, input_len=900, output_len=5, seed=1)
    path = tmp_path / "w.csv.gz"
    wl.to_csv(path)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert Workload.from_csv(path) == wl


def test_csv_round_trip_without_hash_ids():
    wl = Workload.from_requests([0, 3.25, 10], [1, 2, 3], [4, 5, 6])
    buf = io.StringIO()
    wl.to_csv(buf)
    buf.seek(0)
    back = Workload.from_csv(buf)
    assert back == wl and not back.has_hash_ids


@st.composite
def csv_workloads(draw):
    n = draw(st.integers(1, 15))
    bs = draw(st.sampled_from([1, 16, 512]))
    times = draw(st.lists(st.floats(0, 1e9, allow_nan=False, allow_infinity=False),
                          min_size=n, max_size=n))
    inputs = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(0, 10**5), min_size=n, max_size=n))
    with_ids = draw(st.booleans())
    ids = (draw(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
                         min_size=n, max_size=n)) if with_ids else None)
    extra = {}
    if draw(st.booleans()):
        extra["session"] = draw(st.lists(st.sampled_from(["a", "b c", "x,y", 'q"uote']),
                                         min_size=n, max_size=n))
    if draw(st.booleans()):
        extra["prefix_id"] = draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))
    wl = Workload.from_requests(times, inputs, outputs, ids, block_size=bs, **extra)
    return wl.shift_time(-wl.arrival_ms[0])  # readers rebase to the first arrival


@settings(max_examples=80, deadline=None)
@given(wl=csv_workloads())
def test_csv_round_trip_is_exact(wl):
    buf = io.StringIO()
    wl.to_csv(buf)
    buf.seek(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random id counts are mostly inconsistent
        back = Workload.from_csv(buf, block_size=wl.block_size)
    assert back == wl
    assert back.arrival_ms.tolist() == wl.arrival_ms.tolist()


def test_csv_round_trip_rebases_a_nonzero_first_arrival():
    # documented: the round trip is exact when the first request arrives at 0 ms;
    # otherwise arrivals come back shifted so the first is at 0 (0.3 - 0.1 in floats)
    wl = Workload.from_requests([0.1, 0.3], [600, 10], [3, 1], [[0, 1], [0]])
    buf = io.StringIO()
    wl.to_csv(buf)
    buf.seek(0)
    back = Workload.from_csv(buf)
    assert back.arrival_ms.tolist() == [0.0, 0.3 - 0.1]
    assert back == wl.shift_time(-0.1)


# ------------------------------------------------- cross-check of the readers


def test_table_reader_agrees_with_mooncake_reader_on_a_trace(synthetic_trace_path):
    # two independent parsers (record loop in tabular.py, column fast path in mooncake.py)
    a = Workload.from_csv(synthetic_trace_path)
    b = Workload.from_mooncake(synthetic_trace_path)
    assert a == b
    assert a.frame["line"].tolist() == b.frame["line"].tolist()
    assert a.describe().equals(b.describe())
