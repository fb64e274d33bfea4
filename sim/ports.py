"""Loopback ports for simulated clusters that no two processes pick at once.

Binding port 0 and closing the socket (what the sim did) names a port that is free *now*: a second
process (another pytest-xdist worker, another user's `sim up`) can be handed the same one before
our etcd binds it, and the kernel may give it to any outgoing connection as its source port.
So ports are reserved in a ledger instead:

* the ledger is one file per user, `$TMPDIR/modelplane-ports-<uid>`, read and rewritten under an
  exclusive `flock` (LOCK_TIMEOUT_S at most, then an error naming the file);
* a reservation holds a port for HOLD_S seconds (long enough for a slow `sim up` to bind it;
  once bound, the port is no longer free and nobody else takes it anyway);
* ports are drawn from below the start of the kernel's ephemeral range
  (/proc/sys/net/ipv4/ip_local_port_range), so no outgoing connection is ever given one, and each
  is checked free (nothing listens) before it is handed out;
* the ledger is untrusted input: a symlink, a file of another user or one anyone may write is
  refused with an error naming it and the fix; lines that do not parse, non-finite or far-future
  times, ports out of range are dropped; past MAX_LEDGER_BYTES it is read no further (and
  rewritten with the live reservations only)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import random
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import SimError

HOLD_S = 900.0
LOCK_TIMEOUT_S = 30.0
MAX_LEDGER_BYTES = 1 << 20
# Ports below the ephemeral range, above the registered services most often run locally.
LOW_PORT = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_START = 32768


def ledger_path() -> Path:
    return Path(tempfile.gettempdir()) / f"modelplane-ports-{os.getuid()}"


def port_range() -> range:
    """LOW_PORT up to the start of the kernel's ephemeral range (exclusive)."""
    try:
        start = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        start = DEFAULT_EPHEMERAL_START
    if start - LOW_PORT < 1000:  # a kernel whose ephemeral ports start low: use the top instead
        return range(61000, 65536)
    return range(LOW_PORT, start)


def _parse(text: str, now: float, ports: range, hold_s: float) -> dict[int, float]:
    """port -> expiry of the live, well-formed reservations."""
    held: dict[int, float] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 2:
            continue
        try:
            port, expiry = int(fields[0]), float(fields[1])
        except ValueError:
            continue
        if port in ports and math.isfinite(expiry) and now < expiry <= now + max(hold_s, HOLD_S):
            held[port] = max(expiry, held.get(port, 0.0))
    return held


@contextlib.contextmanager
def _locked(path: Path, timeout_s: float) -> Iterator[int]:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SimError(f"the port ledger {path} is a symbolic link; the sim does not follow it. "
                           f"Remove it (rm {path}) and start again.") from None
        raise SimError(f"cannot open the port ledger {path}: {exc.strerror}. "
                       f"Check {path.parent} is writable, or set TMPDIR to a directory that is.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise SimError(f"the port ledger {path} is not a regular file of this user, writable by it alone; "
                           f"remove it (rm {path}) and start again.")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SimError(f"the port ledger {path} stayed locked for {timeout_s:.0f} s by another "
                                   "process; stop a stuck `sim up` or test run, or remove the file.") from None
                time.sleep(0.05)
        yield fd
    finally:
        os.close(fd)


def reserve_ports(count: int, is_free: Callable[[int], bool], *, ledger: Path | None = None,
                  hold_s: float = HOLD_S, lock_timeout_s: float = LOCK_TIMEOUT_S) -> list[int]:
    """`count` distinct loopback ports, free now and reserved for `hold_s` seconds against every
    other process using the same ledger. `is_free(port)`: nothing listens there."""
    path = ledger or ledger_path()
    ports = port_range()
    with _locked(path, lock_timeout_s) as fd:
        raw = os.pread(fd, MAX_LEDGER_BYTES, 0).decode("ascii", errors="replace")
        now = time.time()
        held = _parse(raw, now, ports, hold_s)
        chosen: list[int] = []
        # Random probes, then a sweep: a full ledger or busy range still finds the last free ports.
        rng = random.SystemRandom()
        probes = [rng.randrange(ports.start, ports.stop) for _ in range(4 * count + 64)]
        sweep_from = rng.randrange(ports.start, ports.stop)
        sweep = [ports.start + (sweep_from - ports.start + i) % len(ports) for i in range(len(ports))]
        for port in (*probes, *sweep):
            if len(chosen) == count:
                break
            if port in held or port in chosen or not is_free(port):
                continue
            chosen.append(port)
        if len(chosen) < count:
            raise SimError(f"only {len(chosen)} of the {count} loopback ports needed are free in "
                           f"{ports.start}-{ports.stop - 1}; stop other simulated clusters (`sim down`).")
        for port in chosen:
            held[port] = now + hold_s
        data = "".join(f"{port} {expiry:.3f}\n" for port, expiry in sorted(held.items())).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    return chosen
