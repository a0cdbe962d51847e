"""Bad input: one test per case, asserting what the message names.

Every error is a :class:`WorkloadError` (a ``ValueError``) whose message
names the file, the 1-based line (or record) and the field.
"""

from __future__ import annotations

import gzip
import json

import pytest

from inferasim import Workload, WorkloadError

GOOD = {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}


def jl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def mooncake_error(tmp_path, text: str | bytes, name: str = "trace.jsonl") -> WorkloadError:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(WorkloadError) as info:
        Workload.from_mooncake(path)
    return info.value


def csv_error(tmp_path, text: str, name: str = "lens.csv") -> WorkloadError:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(path)
    return info.value


def with_(**changes):
    rec = dict(GOOD)
    for key, value in changes.items():
        if value is ...:
            del rec[key]
        else:
            rec[key] = value
    return rec


def test_workload_error_is_a_value_error():
    assert issubclass(WorkloadError, ValueError)


# ------------------------------------------------------------ Mooncake: JSON


def test_malformed_json_line(tmp_path):
    e = mooncake_error(tmp_path, jl(GOOD, '{"timestamp": 1, "input_length": 5,', GOOD))
    msg = str(e)
    assert "trace.jsonl" in msg and "line 2" in msg and "malformed JSON" in msg
    assert e.line == 2 and e.source.endswith("trace.jsonl")


def test_malformed_json_array(tmp_path):
    text = "[\n" + json.dumps(GOOD) + ",\n" + '{"timestamp": 1 "input_length": 5}\n]'
    e = mooncake_error(tmp_path, text, name="trace.json")
    assert "trace.json" in str(e) and "line 3" in str(e) and "malformed JSON" in str(e)


def test_nan_literal_is_malformed_json(tmp_path):
    # JSON has no NaN: a "NaN" timestamp is a syntax error, reported on its line
    e = mooncake_error(tmp_path, jl(GOOD, '{"timestamp": NaN, "input_length": 1, '
                                          '"output_length": 1, "hash_ids": [0]}'))
    assert "line 2" in str(e) and "malformed JSON" in str(e)


def test_record_not_an_object(tmp_path):
    e = mooncake_error(tmp_path, jl(GOOD, "[1, 2]"))
    assert "line 2" in str(e) and "expected a JSON object" in str(e)


def test_empty_file(tmp_path):
    e = mooncake_error(tmp_path, "")
    assert "trace.jsonl" in str(e) and "empty" in str(e)


def test_whitespace_only_file(tmp_path):
    assert "empty" in str(mooncake_error(tmp_path, "\n  \n\n"))


def test_empty_gzip_file(tmp_path):
    assert "empty" in str(mooncake_error(tmp_path, gzip.compress(b""), name="t.jsonl.gz"))


def test_corrupt_gzip(tmp_path):
    e = mooncake_error(tmp_path, gzip.compress(jl(GOOD).encode())[:20], name="t.jsonl.gz")
    assert "t.jsonl.gz" in str(e) and "gzip" in str(e)


def test_empty_json_array(tmp_path):
    e = mooncake_error(tmp_path, "[]", name="t.json")
    assert "t.json" in str(e) and "no requests" in str(e)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        Workload.from_mooncake("/nonexistent/dir/nope.jsonl")


# --------------------------------------------------- Mooncake: missing fields


@pytest.mark.parametrize("field", ["timestamp", "input_length", "output_length", "hash_ids"])
def test_missing_required_field(tmp_path, field):
    e = mooncake_error(tmp_path, jl(GOOD, GOOD, with_(**{field: ...})))
    msg = str(e)
    assert "trace.jsonl" in msg and "line 3" in msg and f"field '{field}'" in msg
    assert "missing required field" in msg
    assert e.field == field and e.line == 3
    if field == "input_length":  # the message lists the accepted names
        assert "isl" in msg and "input_len" in msg


def test_missing_field_in_json_array_names_the_record(tmp_path):
    text = json.dumps([GOOD, with_(hash_ids=...)])
    e = mooncake_error(tmp_path, text, name="t.json")
    assert "record 2" in str(e) and "field 'hash_ids'" in str(e)


# ------------------------------------------------------- Mooncake: lengths


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (-3, "must be >= 0"),
        (2.5, "whole number"),
        ("abc", "not a number: 'abc'"),
        ("12", "not a number: '12'"),
        (None, "missing value"),
        (True, "not a number"),
        ([5], "not a number"),
    ],
)
@pytest.mark.parametrize("field", ["input_length", "output_length"])
def test_bad_length(tmp_path, field, value, words):
    e = mooncake_error(tmp_path, jl(GOOD, with_(**{field: value})))
    msg = str(e)
    assert "trace.jsonl" in msg and "line 2" in msg and f"field '{field}'" in msg, msg
    assert words in msg, msg


def test_whole_float_length_is_accepted(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(jl(with_(input_length=600.0)))
    assert Workload.from_mooncake(path).input_len.tolist() == [600]


# ----------------------------------------------------- Mooncake: timestamps


@pytest.mark.parametrize(
    ("value", "words"),
    [("x", "not a number: 'x'"), ("nan", "not a number: 'nan'"), (None, "missing value"),
     (False, "not a number")],
)
def test_bad_timestamp(tmp_path, value, words):
    e = mooncake_error(tmp_path, jl(GOOD, GOOD, with_(timestamp=value)))
    msg = str(e)
    assert "line 3" in msg and "field 'timestamp'" in msg and words in msg, msg


def test_infinite_timestamp(tmp_path):
    # orjson refuses 1e400 (infinity): reported as malformed JSON on its line
    e = mooncake_error(tmp_path, jl(GOOD, json.dumps(GOOD).replace('"timestamp": 0',
                                                                    '"timestamp": 1e400')))
    assert "line 2" in str(e)


# ------------------------------------------------------- Mooncake: hash ids


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("0 1", "must be a list of integers"),
        ([0, "1"], "found '1'"),
        ([0, 1.0], "found 1.0"),
        ([0, 1.5], "found 1.5"),
        (True, "must be a list of integers"),
        ([0, True], "found True"),
        (None, "must be a list of integers"),
        (7, "must be a list of integers"),
        ({"a": 1}, "must be a list of integers"),
        ([[0]], "found [0]"),
        ([2**63], "64-bit"),
        ([-(2**63) - 1], "outside the 64-bit integer range"),  # orjson reads it as a float (issue 12)
        ([2**70], "outside the 64-bit integer range"),
    ],
)
def test_bad_hash_ids(tmp_path, value, words):
    e = mooncake_error(tmp_path, jl(GOOD, with_(hash_ids=value)))
    msg = str(e)
    assert "trace.jsonl" in msg and "line 2" in msg and "field 'hash_ids'" in msg, msg
    assert words in msg, msg


def test_hash_ids_at_int64_bounds_are_accepted(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(jl(with_(hash_ids=[2**63 - 1, -(2**63)])))
    assert Workload.from_mooncake(path).hash_ids.tolist() == [2**63 - 1, -(2**63)]


# ------------------------------------------------------------------- CSV


def test_csv_header_matching_no_known_column(tmp_path):
    e = csv_error(tmp_path, "foo,bar\n1,2\n")
    msg = str(e)
    assert "lens.csv" in msg and "line 1" in msg and "matches no known column" in msg
    assert "'foo'" in msg and "isl" in msg and "arrival" in msg  # says what would be accepted


def test_csv_header_only(tmp_path):
    e = csv_error(tmp_path, "time,isl,osl\n")
    assert "lens.csv" in str(e) and "no requests" in str(e)


def test_csv_empty_file(tmp_path):
    assert "empty" in str(csv_error(tmp_path, ""))


def test_csv_malformed(tmp_path):
    e = csv_error(tmp_path, "time,isl,osl\n0,1,1\n1,2,3,4,5\n")
    msg = str(e)
    assert "lens.csv" in msg and "line 3" in msg and "malformed CSV" in msg
    assert "5 fields" in msg and "header has 3" in msg


def test_csv_unterminated_quote(tmp_path):
    e = csv_error(tmp_path, 'time,isl,osl\n0,1,1\n1,"2,3\n')
    assert "lens.csv" in str(e) and "malformed CSV" in str(e)


def test_csv_duplicate_header(tmp_path):
    e = csv_error(tmp_path, "time,isl,osl,isl\n0,1,1,2\n")
    assert "lens.csv" in str(e) and "line 1" in str(e) and "duplicate" in str(e) and "isl" in str(e)


def test_csv_not_utf8(tmp_path):
    path = tmp_path / "lens.csv"
    path.write_bytes(b"time,isl,osl\n0,1,1\n1,\xff,1\n")
    with pytest.raises(WorkloadError, match="lens.csv.*UTF-8"):
        Workload.from_csv(path)


def test_csv_line_numbers_with_multiline_quoted_field(tmp_path):
    # the quoted note spans lines 2-3, so the bad row is on line 4
    e = csv_error(tmp_path, 'time,isl,osl,note\n0,1,1,"a\nb"\n1,-1,1,x\n')
    assert "line 4" in str(e) and "field 'isl'" in str(e)


@pytest.mark.parametrize(
    ("cell", "words"),
    [("-3", "must be >= 0"), ("2.5", "whole number"), ("abc", "not a number: 'abc'"),
     ("", "missing value"), ("nan", "not a finite number"), ("1e3x", "not a number")],
)
def test_csv_bad_length(tmp_path, cell, words):
    e = csv_error(tmp_path, f"time,ISL,osl\n0,10,1\n1,{cell},1\n")
    msg = str(e)
    assert "lens.csv" in msg and "line 3" in msg and "field 'ISL'" in msg and words in msg, msg


@pytest.mark.parametrize(
    ("cell", "words"),
    [("nan", "not a finite number"), ("NaN", "not a finite number"),
     ("inf", "not a finite number"), ("noon", "not a number: 'noon'"), ("", "missing value")],
)
def test_csv_bad_timestamp(tmp_path, cell, words):
    e = csv_error(tmp_path, f"arrival_ms,isl,osl\n0,10,1\n{cell},10,1\n")
    msg = str(e)
    assert "line 3" in msg and "field 'arrival_ms'" in msg and words in msg, msg


@pytest.mark.parametrize("cell", ["1 x", "1.5", "[1, 2.0]", "true"])
def test_csv_bad_hash_ids(tmp_path, cell):
    e = csv_error(tmp_path, f'time,isl,osl,hash_ids\n0,512,1,0\n1,512,1,"{cell}"\n')
    msg = str(e)
    assert "line 3" in msg and "field 'hash_ids'" in msg and "integers" in msg, msg


def test_json_table_record_missing_a_key(tmp_path):
    path = tmp_path / "lens.jsonl"
    path.write_text(jl({"time": 0, "isl": 5, "osl": 1}, {"time": 1, "osl": 1}))
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(path)
    assert "lens.jsonl" in str(info.value) and "line 2" in str(info.value)
    assert "field 'isl'" in str(info.value)


@pytest.mark.parametrize("ids", [[1, 2.0], "1 2", [True], 5])
def test_json_table_bad_hash_ids(tmp_path, ids):
    path = tmp_path / "lens.jsonl"
    path.write_text(jl({"time": 0, "isl": 512, "osl": 1, "hash_ids": [0]},
                       {"time": 1, "isl": 1024, "osl": 1, "hash_ids": ids}))
    if ids == "1 2":  # a string of integers is the CSV cell format: accepted in JSON too
        assert Workload.from_csv(path).block_ids(1).tolist() == [1, 2]
        return
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(path)
    assert "line 2" in str(info.value) and "field 'hash_ids'" in str(info.value)


def test_json_table_bad_length(tmp_path):
    path = tmp_path / "lens.json"
    path.write_text(json.dumps([{"time": 0, "isl": 5, "osl": 1}, {"time": 1, "isl": -5, "osl": 1}]))
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(path)
    assert "lens.json" in str(info.value) and "record 2" in str(info.value)
    assert "field 'isl'" in str(info.value) and "must be >= 0" in str(info.value)


# ------------------------------------------ fixed bugs 1-4, 9 (see notes)


@pytest.mark.parametrize("cell", ["1e30", "9223372036854775808"])
def test_length_beyond_int64_is_an_error(tmp_path, cell):
    e = csv_error(tmp_path, f"time,isl,osl\n0,{cell},1\n")
    assert "line 2" in str(e) and "field 'isl'" in str(e) and "out of range" in str(e)


def test_mooncake_length_beyond_int64_is_an_error(tmp_path):
    e = mooncake_error(tmp_path, jl(GOOD, with_(input_length=1e30)))
    assert "line 2" in str(e) and "field 'input_length'" in str(e) and "out of range" in str(e)


def test_csv_hash_id_beyond_int64(tmp_path):
    path = tmp_path / "lens.csv"
    path.write_text("time,isl,osl,hash_ids\n0,1,1,99999999999999999999\n")
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(path)
    assert "line 2" in str(info.value) and "field 'hash_ids'" in str(info.value)


def test_csv_line_numbers_count_blank_lines(tmp_path):
    e = csv_error(tmp_path, "time,isl,osl\n0,1,1\n\n5,-1,1\n")
    assert "line 4" in str(e)
    path = tmp_path / "ok.csv"
    path.write_text("\ntime,isl,osl\n0,1,1\n\n5,2,1\n")
    assert Workload.from_csv(path).frame["line"].tolist() == [3, 5]


def test_two_objects_on_one_jsonl_line(tmp_path):
    e = mooncake_error(tmp_path, json.dumps(GOOD) + "," + json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    assert "line 1" in str(e) and "malformed JSON" in str(e)


@pytest.mark.parametrize(
    ("text", "first", "second"),
    [
        ("time,isl,input_len,osl\n0,10,20,1\n5,10,abc,1\n", "isl", "input_len"),
        ("arrival,arrival_ms,isl,osl\n100,7,10,1\n200,3,10,1\n", "arrival", "arrival_ms"),
        ("time,isl,osl,output_len\n0,10,1,x\n5,10,2,y\n", "osl", "output_len"),
    ],
)
def test_two_aliases_of_one_field(tmp_path, text, first, second):
    # the second column used to overwrite the validated one with raw values (bug 9)
    e = csv_error(tmp_path, text)
    msg = str(e)
    assert "lens.csv" in msg and "line 1" in msg
    assert f"'{first}'" in msg and f"'{second}'" in msg and "both" in msg
