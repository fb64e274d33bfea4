"""modelplane.kvroute.trace: the Mooncake trace reader, and every way a trace file can be hostile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from modelplane.kvroute.trace import MAX_HASH_IDS, MAX_LINE_CHARS, MAX_TRACE_BYTES, TraceError, read_trace

GOOD = [{"timestamp": 0, "input_length": 1100, "output_length": 20, "hash_ids": [0, 1, 2]},
        {"timestamp": 1500, "input_length": 600, "output_length": 0, "hash_ids": [0, 3]}]


def write(tmp_path: Path, lines: list[str], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def good_lines() -> list[str]:
    return [json.dumps(r) for r in GOOD]


def test_reads_requests_in_order_with_seconds(tmp_path: Path) -> None:
    reqs = read_trace(write(tmp_path, good_lines()))
    assert [(r.index, r.arrival_s, r.input_tokens, r.output_tokens, r.blocks) for r in reqs] == [
        (0, 0.0, 1100, 20, (0, 1, 2)), (1, 1.5, 600, 0, (0, 3))]


def test_limit_stops_reading(tmp_path: Path) -> None:
    assert len(read_trace(write(tmp_path, good_lines() + ["not json"]), limit=2)) == 2


@pytest.mark.parametrize(("line", "says"), [
    ('{"timestamp": 1.5, "input_length": 10, "output_length": 1, "hash_ids": [0]}', "fraction"),
    ('{"timestamp": NaN, "input_length": 10, "output_length": 1, "hash_ids": [0]}', "NaN"),
    ('{"timestamp": 0, "input_length": Infinity, "output_length": 1, "hash_ids": [0]}', "Infinity"),
    ('{"timestamp": true, "input_length": 10, "output_length": 1, "hash_ids": [0]}',
     "field timestamp must be an integer"),
    ('{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": [0]}', "field input_length is -5"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0, -1]}', "hash_ids[1]"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0, 1]}', "more than input_length"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [false]}', "hash_ids[0]"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1}', "field hash_ids"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": 3}', "field hash_ids"),
    ('{"timestamp": 0, "input_length": 10, "hash_ids": [0]}', "field output_length is missing"),
    ('{"timestamp": 10000000000000000000000000000000, "input_length": 10, "output_length": 1, "hash_ids": [0]}',
     "field timestamp is huge"),
    ('{"timestamp": 1e400, "input_length": 10, "output_length": 1, "hash_ids": [0]}', "fraction or exponent"),
    ('{"timestamp": ' + "9" * 5000 + ', "input_length": 10, "output_length": 1, "hash_ids": [0]}', "too long"),
    ('[1, 2]', "a JSON object"),
    ('{"timestamp": 0', "not valid JSON"),
])
def test_bad_values_name_the_line_and_field(tmp_path: Path, line: str, says: str) -> None:
    path = write(tmp_path, [good_lines()[0], line])
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert f"{path}:2" in str(err.value) and says in str(err.value)


def test_unknown_field_is_named_but_its_value_never_quoted(tmp_path: Path) -> None:
    line = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0], "api_key": "sk-live-SECRET123"}'
    with pytest.raises(TraceError) as err:
        read_trace(write(tmp_path, [line]))
    assert "api_key" in str(err.value) and "SECRET123" not in str(err.value)


def test_bad_json_never_quotes_the_line(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as err:
        read_trace(write(tmp_path, ['{"token": "sk-live-SECRET123" oops']))
    assert "SECRET123" not in str(err.value)


def test_timestamps_never_go_back(tmp_path: Path) -> None:
    lines = good_lines()[::-1]
    with pytest.raises(TraceError, match=r":2: field timestamp goes back"):
        read_trace(write(tmp_path, lines))


def test_deeply_nested_line_is_refused_without_a_traceback(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(TraceError, match="longer than|nests too deep"):
        read_trace(write(tmp_path, [deep]))
    nested = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(TraceError, match="nests too deep|hash_ids"):
        read_trace(write(tmp_path, [nested]))


def test_a_line_longer_than_the_bound_is_refused(tmp_path: Path) -> None:
    line = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]' + " " * MAX_LINE_CHARS + "}"
    with pytest.raises(TraceError, match="longer than"):
        read_trace(write(tmp_path, [line]))


def test_too_many_hash_ids_is_refused(tmp_path: Path) -> None:
    n = MAX_HASH_IDS + 1
    line = json.dumps({"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": list(range(n))})
    with pytest.raises(TraceError, match=f"{n} ids, more than {MAX_HASH_IDS}"):
        read_trace(write(tmp_path, [line]))


def test_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.truncate(MAX_TRACE_BYTES + 1)       # sparse: nothing is written, nothing may be read
    with pytest.raises(TraceError, match="larger than"):
        read_trace(path)


def test_symlink_to_a_device_fifo_or_directory_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(TraceError, match="not a regular file"):
        read_trace(link)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        read_trace(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        read_trace(tmp_path)
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    with pytest.raises(TraceError, match="cannot read trace"):
        read_trace(loop)


def test_symlink_to_a_good_trace_is_read(tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(write(tmp_path, good_lines()))
    assert len(read_trace(link)) == 2


def test_not_utf8_and_empty(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(json.dumps(GOOD[0]).encode() + b"\n\xff\xfe\n")
    with pytest.raises(TraceError, match=r":2: not UTF-8"):
        read_trace(bad)
    with pytest.raises(TraceError, match="no requests"):
        read_trace(write(tmp_path, [""], "empty.jsonl"))
