"""Reading a request trace in the Mooncake format (kvcache-ai/Mooncake FAST'25 release): JSONL, one
object a line, `timestamp` (ms from the start), `input_length` and `output_length` (tokens) and
`hash_ids` (the prompt's KV blocks, block size 512 tokens by default; equal ids = the same block).

The file comes from outside, so every bound is checked before the work it would cause: the file's
bytes (modelplane.files: a regular file, never blocking), each line's length, how many requests and
how many `hash_ids` one request has, integers only (no float, bool, NaN or Infinity) within sane
ranges, timestamps never going back. An error names the file, the line and the field, never quotes
the line (a trace may hold anything)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from modelplane.files import FileReadError, read_regular_file, shown
from modelplane.redact import outside_text
from modelplane.runtime.mock_engine import BLOCK_TOKENS  # the Mooncake release's block size, the engine model's

MAX_TRACE_BYTES = 256 * 1024 * 1024     # the conversation trace is 3 MB
MAX_LINE_CHARS = 256 * 1024             # its longest line is ~2 KB (247 ids)
MAX_REQUESTS = 2_000_000
MAX_HASH_IDS = 8192                     # 4M tokens at 512 a block: past any context length
MAX_INPUT_TOKENS = MAX_HASH_IDS * BLOCK_TOKENS
MAX_OUTPUT_TOKENS = 1_000_000
MAX_TIMESTAMP_MS = 10 ** 12             # ~31 years
MAX_HASH_ID = 2 ** 63 - 1
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


class TraceError(ValueError):
    """A trace that cannot be read: names the file, the line and the field."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    index: int
    arrival_s: float             # timestamp / 1000
    input_tokens: int
    output_tokens: int
    blocks: tuple[int, ...]


def _refuse_constant(name: str) -> object:
    raise TraceError(f"the number {name} is not allowed")


def _refuse_float(_text: str) -> object:
    raise TraceError("a number with a fraction or exponent (the fields are integers)")


def _int_field(obj: dict[str, object], name: str, low: int, high: int, where: str) -> int:
    value = obj.get(name)
    if value is None:
        raise TraceError(f"{where}: field {name} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"{where}: field {name} must be an integer, not {type(value).__name__}")
    if not low <= value <= high:
        raise TraceError(f"{where}: field {name} is {value if abs(value) < 10 ** 20 else 'huge'}, "
                         f"outside {low}..{high}")
    return value


def parse_line(text: str, where: str, index: int, block_tokens: int = BLOCK_TOKENS) -> TraceRequest:
    if len(text) > MAX_LINE_CHARS:
        raise TraceError(f"{where}: the line is longer than {MAX_LINE_CHARS} characters")
    try:
        obj = json.loads(text, parse_constant=_refuse_constant, parse_float=_refuse_float)
    except TraceError as exc:
        raise TraceError(f"{where}: {exc}") from None
    except RecursionError:
        raise TraceError(f"{where}: the line nests too deep (a request is a flat object)") from None
    except ValueError as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "a number too long"
        raise TraceError(f"{where}: not valid JSON: {msg}") from None
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: a request is a JSON object with fields {', '.join(FIELDS)}")
    unknown = [k for k in obj if k not in FIELDS]
    if unknown:
        raise TraceError(f"{where}: unknown field {outside_text(unknown[0], limit=40)!r} "
                         f"(the fields are {', '.join(FIELDS)})")
    ts = _int_field(obj, "timestamp", 0, MAX_TIMESTAMP_MS, where)
    inp = _int_field(obj, "input_length", 1, MAX_INPUT_TOKENS, where)
    out = _int_field(obj, "output_length", 0, MAX_OUTPUT_TOKENS, where)
    ids = obj.get("hash_ids")
    if not isinstance(ids, list):
        raise TraceError(f"{where}: field hash_ids must be a list of integers")
    if len(ids) > MAX_HASH_IDS:
        raise TraceError(f"{where}: field hash_ids has {len(ids)} ids, more than {MAX_HASH_IDS}")
    for i, h in enumerate(ids):
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= MAX_HASH_ID:
            raise TraceError(f"{where}: field hash_ids[{i}] must be an integer in 0..2^63-1")
    if len(ids) > math.ceil(inp / block_tokens):
        raise TraceError(f"{where}: field hash_ids has {len(ids)} blocks, more than input_length {inp} "
                         f"fills at {block_tokens} tokens a block")
    return TraceRequest(index, ts / 1000.0, inp, out, tuple(ids))


def parse_trace(lines: Iterable[str], source: str, *, limit: int | None = None,
                block_tokens: int = BLOCK_TOKENS) -> list[TraceRequest]:
    requests: list[TraceRequest] = []
    last_ts = 0.0
    for number, raw in enumerate(lines, 1):
        if limit is not None and len(requests) >= limit:
            break
        text = raw.strip()
        if not text:
            continue
        where = f"{source}:{number}"
        if len(requests) >= MAX_REQUESTS:
            raise TraceError(f"{where}: more than {MAX_REQUESTS} requests (use --limit)")
        req = parse_line(text, where, len(requests), block_tokens)
        if req.arrival_s < last_ts:
            raise TraceError(f"{where}: field timestamp goes back in time ({int(req.arrival_s * 1000)} after "
                             f"{int(last_ts * 1000)}); a trace is in arrival order")
        last_ts = req.arrival_s
        requests.append(req)
    if not requests:
        raise TraceError(f"{source}: the trace has no requests")
    return requests


def read_trace(path: Path | str, *, limit: int | None = None, block_tokens: int = BLOCK_TOKENS) -> list[TraceRequest]:
    """The requests of the trace file at `path` (at most `limit`); TraceError otherwise."""
    try:
        data = read_regular_file(path, "trace", MAX_TRACE_BYTES)
    except FileReadError as exc:
        raise TraceError(str(exc)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(f"{shown(path)}:{line}: not UTF-8 text") from None
    return parse_trace(text.splitlines(), shown(path), limit=limit, block_tokens=block_tokens)


__all__ = ["BLOCK_TOKENS", "TraceError", "TraceRequest", "parse_trace", "read_trace"]
