"""The compact summary a cluster's workload gateway publishes of the KV blocks its replicas hold, and
the control plane's reading of it.

A summary is a Bloom filter of SUMMARY_BITS bits with SUMMARY_HASHES positions a block (each from a
64-bit mix of the block id, splitmix64's finalizer, so the Traefik plugin can compute the same), the
cluster's prefill backlog in seconds and a sequence number. On the wire it is one JSON object:

    {"cluster": "c0", "seq": 17, "published_ms": 1712, "replicas": 4, "load_s": 0.42,
     "m": 65536, "k": 3, "bits": "<base64 of m/8 bytes>"}

8 KiB of bits, ~11 KB of JSON once base64-encoded: published once a second (PUBLISH_INTERVAL_S) that
is ~11 KB per cluster per second, whatever the number of blocks (4 replicas x 860 blocks fill ~5%
of the bits; a false positive, (1 - e^(-k n / m))^k = 0.3% at that fill, can only lengthen a prefix
match by a block).

A summary comes from outside the control plane, so it is read within bounds and refused (SummaryError,
naming the field) when it is larger than MAX_SUMMARY_BYTES, not the one JSON object above, carries a
NaN, infinite, negative or absurd number, names a cluster the fleet does not have, goes back in
sequence (a replay), is dated in the future, or has more than MAX_FILL of its bits set (a saturated or
forged filter would claim every prefix). One older than MAX_AGE_S is stale: the router then treats the
cluster as holding nothing (it stays routable; health comes from its answers)."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache

from modelplane.redact import outside_text

SUMMARY_BITS = 1 << 16
SUMMARY_HASHES = 3
PUBLISH_INTERVAL_S = 1.0
MAX_AGE_S = 5.0
MAX_SKEW_S = 1.0
MAX_FILL = 0.5
MAX_SUMMARY_BYTES = 16 * 1024
MAX_LOAD_S = 1e6
MAX_REPLICAS = 4096
MAX_SEQ = 2 ** 63 - 1
MAX_NAME = 63
_MASK64 = (1 << 64) - 1
_FIELDS = ("cluster", "seq", "published_ms", "replicas", "load_s", "m", "k", "bits")


class SummaryError(ValueError):
    """A published summary refused: names the publisher (as far as known) and the field."""


def mix64(x: int) -> int:
    """splitmix64's finalizer (Steele, Lea, Flood 2014): a 64-bit avalanche of a block id."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


@lru_cache(maxsize=1 << 20)
def positions(block: int, m: int = SUMMARY_BITS) -> tuple[int, int, int]:
    """The SUMMARY_HASHES bit positions of a block: three 16-bit slices of its mix (m = 2^16)."""
    h = mix64(block)
    mask = m - 1
    return h & mask, (h >> 16) & mask, (h >> 32) & mask


class CountingFilter:
    """What a workload gateway keeps to publish its summary: a count per bit position over the blocks
    its replicas hold (a block held by two replicas counts twice), and the bits of the counts > 0."""

    def __init__(self, m: int = SUMMARY_BITS) -> None:
        self.m = m
        self.counts = [0] * m
        self.bits = bytearray(m // 8)

    def add(self, block: int) -> None:
        counts, bits = self.counts, self.bits
        for p in positions(block, self.m):
            if counts[p] == 0:
                bits[p >> 3] |= 1 << (p & 7)
            counts[p] += 1

    def remove(self, block: int) -> None:
        counts, bits = self.counts, self.bits
        for p in positions(block, self.m):
            counts[p] -= 1
            if counts[p] == 0:
                bits[p >> 3] &= ~(1 << (p & 7)) & 0xFF


@dataclass(frozen=True)
class Summary:
    cluster: str
    seq: int
    published_s: float
    replicas: int
    load_s: float
    bits: bytes

    def has(self, block: int) -> bool:
        bits = self.bits
        return all(bits[p >> 3] & (1 << (p & 7)) for p in positions(block, len(bits) * 8))

    def prefix(self, blocks: tuple[int, ...]) -> int:
        n = 0
        for b in blocks:
            if not self.has(b):
                break
            n += 1
        return n

    def encode(self) -> bytes:
        return json.dumps({"cluster": self.cluster, "seq": self.seq, "published_ms": round(self.published_s * 1000),
                           "replicas": self.replicas, "load_s": self.load_s, "m": len(self.bits) * 8,
                           "k": SUMMARY_HASHES, "bits": base64.b64encode(self.bits).decode("ascii")},
                          separators=(",", ":")).encode("ascii")


def _refuse_constant(name: str) -> object:
    raise SummaryError(f"the number {name} is not allowed")


def decode(data: bytes, *, clusters: Collection[str], now_s: float,
           last_seqs: Mapping[str, int] | None = None) -> Summary:
    """A published summary read and checked (see the module's docstring); SummaryError otherwise."""
    if len(data) > MAX_SUMMARY_BYTES:
        raise SummaryError(f"summary: {len(data)} bytes, more than {MAX_SUMMARY_BYTES}")
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except SummaryError as exc:
        raise SummaryError(f"summary: {exc}") from None
    except RecursionError:
        raise SummaryError("summary: nests too deep (a summary is a flat object)") from None
    except (UnicodeDecodeError, ValueError):
        raise SummaryError("summary: not a JSON object in UTF-8") from None
    if not isinstance(obj, dict) or sorted(obj) != sorted(_FIELDS):
        raise SummaryError(f"summary: an object with exactly the fields {', '.join(_FIELDS)}")
    cluster = obj["cluster"]
    if not isinstance(cluster, str) or not 0 < len(cluster) <= MAX_NAME or cluster not in clusters:
        raise SummaryError(f"summary: field cluster {outside_text(str(cluster), limit=MAX_NAME)!r} is not a "
                           "cluster of the fleet")
    who = f"summary of cluster {cluster}"

    def integer(name: str, low: int, high: int) -> int:
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SummaryError(f"{who}: field {name} must be an integer in {low}..{high}")
        return value

    seq = integer("seq", 0, MAX_SEQ)
    published_s = integer("published_ms", 0, 10 ** 15) / 1000.0
    replicas = integer("replicas", 1, MAX_REPLICAS)
    integer("m", SUMMARY_BITS, SUMMARY_BITS)       # one filter shape: the bits are positions of it
    integer("k", SUMMARY_HASHES, SUMMARY_HASHES)
    load = obj["load_s"]
    if isinstance(load, bool) or not isinstance(load, (int, float)) or not math.isfinite(load) \
            or not 0 <= load <= MAX_LOAD_S:
        raise SummaryError(f"{who}: field load_s must be a finite number of seconds in 0..{MAX_LOAD_S:g}")
    last_seq = (last_seqs or {}).get(cluster)
    if last_seq is not None and seq <= last_seq:
        raise SummaryError(f"{who}: field seq {seq} is not after {last_seq} (a replayed or reordered summary)")
    if published_s > now_s + MAX_SKEW_S:
        raise SummaryError(f"{who}: field published_ms is in the future")
    raw = obj["bits"]
    try:
        bits = base64.b64decode(raw, validate=True) if isinstance(raw, str) else b""
    except (binascii.Error, ValueError):
        bits = b""
    if len(bits) != SUMMARY_BITS // 8:
        raise SummaryError(f"{who}: field bits must be base64 of {SUMMARY_BITS // 8} bytes")
    fill = int.from_bytes(bits, "little").bit_count() / SUMMARY_BITS
    if fill > MAX_FILL:
        raise SummaryError(f"{who}: field bits has {fill:.0%} of its bits set, more than {MAX_FILL:.0%} "
                           "(a saturated filter claims every prefix)")
    return Summary(cluster, seq, published_s, replicas, float(load), bits)


def is_stale(summary: Summary, now_s: float) -> bool:
    return now_s - summary.published_s > MAX_AGE_S


__all__ = ["CountingFilter", "MAX_SUMMARY_BYTES", "PUBLISH_INTERVAL_S", "Summary", "SummaryError", "decode",
           "is_stale", "mix64", "positions"]
