"""Loader fuzz: byte-level mutations of small valid traces, CSVs and gzip files.

The only exceptions allowed out of a loader are :class:`WorkloadError` and,
for paths, ``FileNotFoundError``/``IsADirectoryError``. Whatever loads
satisfies the Workload invariants, round-trips through ``to_mooncake``, and
(for Mooncake traces) equals what an independent reference parser built on
the standard :mod:`json` module reads from the same bytes.

Bounded for CI (a few seconds); ``INFERASIM_FUZZ=long`` runs 20 times more.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples
from inferasim import Workload
from inferasim.errors import WorkloadError
from inferasim.workload.loaders import load_workload

ALLOWED = (WorkloadError, FileNotFoundError, IsADirectoryError)

MOONCAKE = (
    b'{"timestamp": 0, "input_length": 1024, "output_length": 3, "hash_ids": [0, 1]}\n'
    b'{"timestamp": 27, "input_length": 700, "output_length": 1, "hash_ids": [0, 2]}\n'
    b'{"timestamp": 27, "input_length": 100, "output_length": 9, "hash_ids": [5]}\n'
)
CSV = b"time,isl,osl,hash_ids,tenant\n0,1024,3,0 1,a\n27,700,1,0 2,b\n27,100,9,5,c\n"
TOKENS = [
    b"1e308", b"-1e308", b"1e-400", b"NaN", b"Infinity", b"-0", b"0", b"18446744073709551616",
    b"9223372036854775807", b"1_000", "\u0663".encode(), b'"x"', b"[]", b"{}", b"true", b"null",
    b",", b"\n", b'"', b"Timestamp", b"isl", b"\xff", b"\x00", b"1.5", b"-1",
]


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "insert", "delete", "token", "dup", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "replace" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = bytes([draw(st.integers(0, 255))])
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "token":
            end = pos + draw(st.integers(0, 6))
            data[pos:end] = draw(st.sampled_from(TOKENS))
        elif op == "dup":
            end = pos + draw(st.integers(1, 40))
            data[pos:pos] = data[pos:end]
        else:
            del data[pos:]
    return bytes(data)


def check_invariants(wl: Workload, *, rebased: bool = True) -> None:
    n = len(wl)
    assert n >= 1
    a = wl.arrival_ms
    assert a.dtype == np.float64 and np.isfinite(a).all() and np.all(np.abs(a) <= 2.0**43)
    assert np.all(a[1:] >= a[:-1])
    if rebased:
        assert a.min() == 0.0
    for col in (wl.input_len, wl.output_len):
        assert col.dtype == np.int64 and (col >= 0).all()
    off = wl.offsets
    assert off[0] == 0 and off[-1] == wl.hash_ids.size and np.all(np.diff(off) >= 0)
    assert wl.hash_ids.dtype == np.int64
    line = wl.frame["line"].to_numpy()
    assert (line >= 1).all() and len(set(line.tolist())) == n
    assert wl.frame.index.tolist() == list(range(n))
    d = wl.describe()
    assert d["requests"] == n
    if wl.has_hash_ids:  # a written trace reads back as the same requests and ids
        buf = io.BytesIO()
        wl.to_mooncake(buf, exact=True)
        buf.seek(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            back = Workload.from_mooncake(buf)
        core = ["arrival_ms", "input_len", "output_len"]
        assert back.frame[core].equals(wl.frame[core])
        assert np.array_equal(back.hash_ids, wl.hash_ids) and np.array_equal(back.offsets, wl.offsets)


# ------------------------------------------------ an independent reference

_REF_FIELDS = {
    "timestamp": ("timestamp", "arrival", "time", "arrival_ms"),
    "input_length": ("input_length", "input_len", "isl"),
    "output_length": ("output_length", "output_len", "osl"),
    "hash_ids": ("hash_ids", "block_hashes", "blocks"),
}


def reference_mooncake(data: bytes) -> dict:
    """The Mooncake format read with the standard json module, record by record.

    Written from the format description, not from the reader: case-insensitive
    keys with aliases, timestamps rebased (integers exactly), a stable sort by
    arrival. JSON integers beyond 64 bits are read as floats (as orjson does).
    """
    text = data.decode("utf-8").removeprefix("\ufeff")

    def number(x):
        if isinstance(x, int) and not -(2**63) <= x < 2**64:
            return float(x)
        return x

    if text.lstrip().startswith("["):
        records = json.loads(text, parse_int=lambda s: number(int(s)))
        lines = list(range(1, len(records) + 1))
    else:
        records, lines = [], []
        for i, raw in enumerate(text.rstrip().split("\n"), start=1):
            if raw.strip():
                records.append(json.loads(raw, parse_int=lambda s: number(int(s))))
                lines.append(i)
    rows = []
    for rec in records:
        row = {}
        for key, value in rec.items():
            for canon, names in _REF_FIELDS.items():
                if key.lower() in names:
                    assert canon not in row
                    row[canon] = value
        rows.append(row)
    ts = [r["timestamp"] for r in rows]
    if all(type(t) is int for t in ts):
        base = min(ts)
        arrival = [float(t - base) for t in ts]
    else:
        base = min(float(t) for t in ts)
        arrival = [float(t) - base for t in ts]
    order = sorted(range(len(rows)), key=lambda i: arrival[i])  # sorted() is stable
    return {
        "arrival_ms": [arrival[i] for i in order],
        "input_len": [int(rows[i]["input_length"]) for i in order],
        "output_len": [int(rows[i]["output_length"]) for i in order],
        "hash_ids": [list(rows[i]["hash_ids"]) for i in order],
        "line": [lines[i] for i in order],
    }


def assert_matches_reference(wl: Workload, data: bytes) -> None:
    ref = reference_mooncake(data)
    assert wl.arrival_ms.tolist() == ref["arrival_ms"]
    assert wl.input_len.tolist() == ref["input_len"]
    assert wl.output_len.tolist() == ref["output_len"]
    assert wl.frame["line"].tolist() == ref["line"]
    assert [wl.block_ids(i).tolist() for i in range(len(wl))] == ref["hash_ids"]


def load(reader, data: bytes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return reader(io.BytesIO(data))
        except ALLOWED:
            return None


FUZZ = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@FUZZ
@given(data=mutated(MOONCAKE))
def test_fuzz_mooncake_bytes(data):
    wl = load(Workload.from_mooncake, data)
    if wl is not None:
        check_invariants(wl)
        assert_matches_reference(wl, data)


@FUZZ
@given(data=mutated(CSV))
def test_fuzz_csv_bytes(data):
    wl = load(Workload.from_csv, data)
    if wl is not None:
        check_invariants(wl)


@FUZZ
@given(data=mutated(gzip.compress(MOONCAKE, mtime=0)))
def test_fuzz_gzip_bytes(data):
    wl = load(Workload.from_mooncake, data)
    if wl is not None:
        check_invariants(wl)
        assert_matches_reference(wl, gzip.decompress(data))


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.one_of(mutated(MOONCAKE), mutated(CSV)), suffix=st.sampled_from([".jsonl", ".csv", ".json", ".gz"]))
def test_fuzz_files_through_load_workload(tmp_path, data, suffix):
    path = tmp_path / f"w{suffix}"
    path.write_bytes(gzip.compress(data) if suffix == ".gz" else data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            wl = load_workload(path)
        except ALLOWED:
            return
    check_invariants(wl)


def test_reference_parser_agrees_on_the_seed_and_ties():
    # the unmutated seed, with a tie at 27 ms kept in file order (lines 2, 3)
    wl = Workload.from_mooncake(io.BytesIO(MOONCAKE))
    assert_matches_reference(wl, MOONCAKE)
    assert wl.frame["line"].tolist() == [1, 2, 3] and wl.arrival_ms.tolist() == [0.0, 27.0, 27.0]
    assert math.isclose(reference_mooncake(MOONCAKE)["arrival_ms"][1], 27.0)


@pytest.mark.parametrize("seed", [MOONCAKE, CSV], ids=["mooncake", "csv"])
def test_every_truncation_is_handled(seed):
    # exhaustive over one small seed: every prefix of the file
    reader = Workload.from_mooncake if seed is MOONCAKE else Workload.from_csv
    for k in range(len(seed) + 1):
        wl = load(reader, seed[:k])
        if wl is not None:
            check_invariants(wl)
