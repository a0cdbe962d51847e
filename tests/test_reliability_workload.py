"""Regression tests for issue 12 (reliability), workload and reuse side.

One test (or parametrised group) per defect class; each asserts the error
names what is wrong (file/line/field or parameter) and that nothing is
silently dropped or changed.
"""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pytest

from inferasim import Workload, reuse
from inferasim.errors import WorkloadError


def moon(*records: dict) -> io.StringIO:
    return io.StringIO("".join(json.dumps(r) + "\n" for r in records))


def rec(**kw) -> dict:
    base = {"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]}
    base.update(kw)
    return base


# ----------------------------------------------------- class 1: non-finite times


@pytest.mark.parametrize(
    "build",
    [
        lambda: Workload.from_synthetic(5, rate=1e-320),
        lambda: Workload.from_requests([0, 10], [1, 1], [1, 1]).scale_time(1e305),
        lambda: Workload.from_requests([0, 10], [1, 1], [1, 1]).shift_time(1e300),
        lambda: Workload.from_requests([0, float("inf")], [1, 1], [1, 1]),
        lambda: Workload.from_requests([1e18, 1e18 + 5], [1, 1], [1, 1]),
    ],
    ids=["synthetic-rate", "scale_time", "shift_time", "from_requests-inf", "from_requests-1e18"],
)
def test_times_that_float64_cannot_carry_are_rejected_where_they_enter(build):
    # before: accepted; the simulator then marked rows finished with NaN times
    # (or TTFT 0 at 1e18, where 1e18 + 5 == 1e18 in float64)
    with pytest.raises(ValueError, match=r"rate|2\*\*43|finite"):
        build()


def test_file_timestamps_near_float_limits_are_an_error_naming_the_line():
    # before: 1e308 and -1e308 rebased to [0, inf] without a word
    with pytest.raises(WorkloadError, match=r"line 1, field 'timestamp'.*2\*\*43"):
        Workload.from_mooncake(moon(rec(timestamp=1e308), rec(timestamp=-1e308)))


def test_workload_invariant_holds_for_every_builder():
    # the constructor is the backstop: no Workload holds a non-finite arrival
    wl = Workload.from_requests([0, 1], [1, 1], [1, 1])
    frame = wl.frame.assign(arrival_ms=[0.0, np.nan])
    with pytest.raises(WorkloadError, match="finite"):
        Workload(frame, wl.hash_ids, wl.offsets, has_hash_ids=False)


# ---------------------------------------------------- class 4: conflicting keys


@pytest.mark.parametrize(
    ("extra", "first", "second"),
    [
        ({"Timestamp": 77}, "timestamp", "Timestamp"),
        ({"arrival": 3}, "timestamp", "arrival"),
        ({"isl": 512}, "input_length", "isl"),
        ({"BLOCKS": [2]}, "hash_ids", "BLOCKS"),
    ],
)
def test_mooncake_conflicting_keys_name_the_line_and_both_keys(extra, first, second):
    # before: one value kept silently; which one could depend on other lines
    r = rec(**extra)
    with pytest.raises(WorkloadError) as info:
        Workload.from_mooncake(moon(rec(), r))
    msg = str(info.value)
    assert "line 2" in msg and f"'{first}'" in msg and f"'{second}'" in msg and "both" in msg, msg


def test_a_lines_meaning_does_not_depend_on_other_lines():
    # line 1 uses the canonical keys only, line 2 only an upper-case alias:
    # both are read the same way whatever the other line looks like
    a = {"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]}
    b = {"TIME": 0, "ISL": 1024, "OSL": 2, "Blocks": [1, 2]}
    for records in ([a, b], [b, a]):
        wl = Workload.from_mooncake(moon(*records))
        assert sorted(wl.input_len.tolist()) == [512, 1024]
    tab = Workload.from_csv(io.StringIO(json.dumps({"time": 0, "isl": 5, "osl": 1}) + "\n"
                                        + json.dumps({"TIME": 3, "input_len": 7, "OSL": 2}) + "\n"))
    assert tab.input_len.tolist() == [5, 7] and tab.arrival_ms.tolist() == [0.0, 3.0]


@pytest.mark.parametrize("header", ["time,TIME,isl,osl", "time,isl,osl,Time"])
def test_csv_duplicate_columns_differing_in_case(header):
    # before: `time,TIME` silently used TIME and kept `time` as an extra column
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(io.StringIO(header + "\n0,5,1,1\n"))
    msg = str(info.value)
    assert "line 1" in msg and "'time'" in msg and ("'TIME'" in msg or "'Time'" in msg), msg


def test_json_table_conflicting_keys():
    with pytest.raises(WorkloadError, match=r"line 2.*'osl' and 'output_len' both"):
        Workload.from_csv(io.StringIO('{"time": 0, "isl": 5, "osl": 1}\n'
                                      '{"time": 1, "isl": 5, "osl": 1, "output_len": 2}\n'))


# --------------------------------------------- class 5: integer timestamps


def test_integer_timestamps_rebase_in_integers():
    # before: both became 1.7e18 in float64 and rebased to [0, 0]
    wl = Workload.from_mooncake(moon(rec(timestamp=1700000000000000001),
                                     rec(timestamp=1700000000000000100)))
    assert wl.arrival_ms.tolist() == [0.0, 99.0]
    with pytest.warns(UserWarning, match="not in time order"):
        csv = Workload.from_csv(io.StringIO("time,isl,osl\n1700000000000000100,1,1\n1700000000000000001,1,1\n"))
    assert csv.arrival_ms.tolist() == [0.0, 99.0] and csv.frame["line"].tolist() == [3, 2]


# ------------------------------------------------ class 6: reserved names


def test_csv_reserved_column_names_are_kept_under_another_name():
    with pytest.warns(UserWarning, match="'line' is a reserved name.*'user_line'"):
        wl = Workload.from_csv(io.StringIO("time,isl,osl,line\n0,1,1,99\n"))
    assert wl.frame["user_line"].tolist() == [99] and wl.frame["line"].tolist() == [2]
    with pytest.raises(WorkloadError, match="reserved"):
        Workload.from_csv(io.StringIO("time,isl,osl,line,user_line\n0,1,1,99,3\n"))


# -------------------------------------------- class 7: lesser silent cases


@pytest.mark.parametrize(
    ("cell", "words"),
    [("1_000", "not a number: '1_000'"), ("\u0661\u0662", "not a number"),
     ("1e-400", "underflows to 0"), ("\uff11", "not a number")],
)
def test_csv_numbers_must_be_plain_ascii(cell, words):
    # before: int("1_000") == 1000, int("١٢") == 12, float("1e-400") == 0.0 were accepted
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(io.StringIO(f"time,isl,osl\n0,{cell},1\n"))
    assert "line 2" in str(info.value) and "field 'isl'" in str(info.value) and words in str(info.value)


def test_csv_hash_ids_must_be_plain_ascii():
    with pytest.raises(WorkloadError, match="line 2.*hash_ids"):
        Workload.from_csv(io.StringIO("time,isl,osl,hash_ids\n0,512,1,1_0\n"))


def test_json_number_that_underflows_is_an_error():
    text = json.dumps(rec()) + '\n{"timestamp": 1, "input_length": 1e-400, "output_length": 1, "hash_ids": [1]}\n'
    with pytest.raises(WorkloadError, match="line 2.*1e-400.*underflows"):
        Workload.from_mooncake(io.StringIO(text))
    # a zero written with an exponent is still zero, not an underflow
    ok = '{"timestamp": 0e-500, "input_length": 512, "output_length": 1, "hash_ids": [1]}\n'
    assert Workload.from_mooncake(io.StringIO(ok)).arrival_ms.tolist() == [0.0]


@pytest.mark.parametrize("capacity", [True, False, np.bool_(True)])
def test_replay_cache_rejects_a_bool_capacity(capacity):
    wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 3]])
    with pytest.raises(ValueError, match="bool"):
        reuse.replay_cache(wl, capacity)


# ------------------------------------------------ class 8: corrupt gzip


def test_corrupt_gzip_is_a_workload_error(tmp_path):
    data = bytearray(gzip.compress(b'{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n' * 50))
    data[20:30] = b"\x00" * 10  # damage the deflate stream (zlib.error before)
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(WorkloadError, match="t.jsonl.gz.*corrupt gzip"):
        Workload.from_mooncake(path)


# ------------------------------------------------ class 9: integer overflow


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"input_len": 10**30}, "input_len"), ({"output_len": 2**70}, "output_len"),
     ({"num_requests": 10**20}, "num_requests"), ({"prefix_len": 10**30, "num_prefixes": 1}, "prefix_len")],
)
def test_synthetic_ranges_checked_up_front(kwargs, name):
    # before: numpy OverflowError deep in the generator
    kwargs = dict(kwargs)
    n = kwargs.pop("num_requests", 5)
    with pytest.raises(ValueError, match=name):
        Workload.from_synthetic(n, rate=1.0, **kwargs)


def test_hit_rate_curve_capacity_beyond_int64():
    wl = Workload.from_requests([0, 1], [1024, 1024], [1, 1], [[1, 2], [1, 3]])
    with pytest.raises(ValueError, match=r"2\*\*62"):
        reuse.hit_rate_curve(wl, [2**63])


# ------------------------------------------------ class 10: unbounded work


def test_synthetic_pool_and_id_count_are_bounded():
    # before: num_prefixes=10**9 allocated 7.5 GiB for 5 requests
    with pytest.raises(ValueError, match="num_prefixes"):
        Workload.from_synthetic(5, rate=1.0, num_prefixes=10**9, prefix_len=512)
    with pytest.raises(ValueError, match="hash ids"):
        Workload.from_synthetic(10**6, rate=1.0, input_len=2**30, block_size=1)


# ------------------------------------------------ class 12: messages


def test_hash_id_beyond_int64_says_so():
    # before: "must be a list of integers, found 1.1805916207174113e+21"
    with pytest.raises(WorkloadError, match="line 1.*outside the 64-bit integer range"):
        Workload.from_mooncake(io.StringIO('{"timestamp": 0, "input_length": 1, "output_length": 1, '
                                           '"hash_ids": [1180591620717411303424]}\n'))


def test_folder_named_like_a_trace_does_not_shadow_it(tmp_path, monkeypatch):
    # before: "is a directory"; a folder can never be a trace file, so the
    # name means the trace (here not available: the trace lookup's own error)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERASIM_TRACE_DIR", str(tmp_path / "none"))
    (tmp_path / "toolagent").mkdir()
    with pytest.raises(FileNotFoundError) as info:
        Workload.from_mooncake("toolagent")
    assert "is a directory" not in str(info.value)


def test_a_plain_folder_is_named_in_the_error(tmp_path):
    with pytest.raises(WorkloadError, match="is a directory"):
        Workload.from_mooncake(tmp_path)


def test_unterminated_quote_blames_the_line_it_opens_on():
    # before: blamed the last line of the file (line 5)
    with pytest.raises(WorkloadError, match="line 3: malformed CSV"):
        Workload.from_csv(io.StringIO('time,isl,osl\n0,1,1\n1,"2,1\n2,3,1\n3,4,1\n'))


def test_json_lines_with_a_byte_order_mark(tmp_path):
    # a byte-order mark used to hide the JSON: "header row but no requests"
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(rec()).encode() + b"\n")
    assert len(Workload.from_csv(path)) == 1 and len(Workload.from_mooncake(path)) == 1


@pytest.mark.parametrize("name", ["input_len", "output_len", "rate", "burstiness", "prefix_zipf"])
def test_synthetic_nan_names_the_parameter(name):
    kwargs = {"rate": 1.0, name: float("nan")}
    with pytest.raises(ValueError, match=name):
        Workload.from_synthetic(3, **kwargs)


def test_error_messages_echo_a_short_excerpt():
    huge = "x" * 10_000
    with pytest.raises(WorkloadError) as info:
        Workload.from_csv(io.StringIO(f"time,isl,osl\n0,{huge},1\n"))
    assert len(str(info.value)) < 200
    with pytest.raises(WorkloadError) as info:
        Workload.from_mooncake(io.StringIO('{"timestamp": 0, "input_length": "' + huge + '"}\n'))
    assert len(str(info.value)) < 200
    with pytest.raises(WorkloadError) as info:
        Workload.from_mooncake(io.StringIO("{" + huge + "\n"))
    assert len(str(info.value)) < 200
