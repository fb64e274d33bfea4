"""The sim's port ledger (sim/ports.py): ports no two processes are handed at once, and a ledger
file that is damaged, huge, a symlink or held by someone else never breaks or misleads `sim up`."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.errors import SimError
from sim.fleet import port_free
from sim.ports import MAX_LEDGER_BYTES, port_range, reserve_ports

REPO = Path(__file__).resolve().parents[3]


def always_free(_port: int) -> bool:
    return True


def test_ports_are_below_the_kernels_ephemeral_range_and_free(tmp_path: Path) -> None:
    ports = reserve_ports(7, port_free, ledger=tmp_path / "ledger")
    start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert len(set(ports)) == 7
    assert all(p < start for p in ports) or start - 20000 < 1000, (ports, start)
    assert all(port_free(p) for p in ports)


def test_concurrent_processes_are_never_handed_the_same_port(tmp_path: Path) -> None:
    """Eight processes reserve 21 ports each (a three-cluster fleet) from one ledger at once."""
    ledger = tmp_path / "ledger"
    code = ("import pathlib; from sim.ports import reserve_ports; "
            f"print(*reserve_ports(21, lambda p: True, ledger=pathlib.Path({str(ledger)!r})))")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}) for _ in range(8)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outs
    ports = [int(x) for out in outs for x in out.split()]
    assert len(ports) == 8 * 21
    assert len(set(ports)) == len(ports), "a port was handed to two processes"
    assert len(ledger.read_text().splitlines()) == len(ports)


def test_a_live_reservation_is_skipped_and_an_expired_one_reused(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    a, b = port_range().start + 10, port_range().start + 11
    ledger.write_text(f"{a} {time.time() + 600:.3f}\n")
    assert reserve_ports(1, lambda p: p in (a, b), ledger=ledger) == [b]
    with pytest.raises(SimError, match="only 0 of the 1 loopback ports"):
        reserve_ports(1, lambda p: p in (a, b), ledger=ledger)
    ledger.write_text(f"{a} {time.time() - 1:.3f}\n{b} {time.time() - 1:.3f}\n")
    assert sorted(reserve_ports(2, lambda p: p in (a, b), ledger=ledger)) == [a, b]


@pytest.mark.parametrize("garbage", [
    "not a ledger\n\0\0\xff binary",
    "{port} nan\n", "{port} inf\n", "{port} -inf\n", "{port} 1e400\n",
    "{port} 99999999999\n",  # far past any reservation's hold: forged, not honoured
    "99999999 {future}\n-5 {future}\n", "{port}\n", "{port} {future} extra\n",
], ids=["binary", "nan", "inf", "-inf", "overflow", "far-future", "out-of-range", "short", "long"])
def test_a_corrupt_ledger_is_ignored_and_rewritten_clean(tmp_path: Path, garbage: str) -> None:
    ledger = tmp_path / "ledger"
    port = port_range().start + 5
    ledger.write_text(garbage.format(port=port, future=time.time() + 600), errors="surrogateescape")
    assert reserve_ports(1, lambda p: p == port, ledger=ledger) == [port]
    lines = ledger.read_text().splitlines()
    assert [line.split()[0] for line in lines] == [str(port)]


def test_a_huge_ledger_is_read_no_further_than_its_limit(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    with ledger.open("w") as f:
        f.write("x" * (64 * MAX_LEDGER_BYTES))
    started = time.monotonic()
    assert len(reserve_ports(7, always_free, ledger=ledger)) == 7
    assert time.monotonic() - started < 30  # a liveness bound, not a speed target
    assert ledger.stat().st_size < 1024


def test_a_symlinked_ledger_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    ledger = tmp_path / "ledger"
    ledger.symlink_to(target)
    with pytest.raises(SimError) as err:
        reserve_ports(1, always_free, ledger=ledger)
    assert f"the port ledger {ledger} is a symbolic link" in str(err.value)
    assert f"rm {ledger}" in str(err.value)
    assert target.read_text() == "keep me\n"


def test_a_ledger_anyone_may_write_is_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.write_text("")
    ledger.chmod(0o666)
    with pytest.raises(SimError, match="writable by it alone"):
        reserve_ports(1, always_free, ledger=ledger)


def test_a_ledger_locked_by_a_stuck_process_is_an_error_naming_it(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    with ledger.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(SimError) as err:
            reserve_ports(1, always_free, ledger=ledger, lock_timeout_s=0.3)
    assert f"the port ledger {ledger} stayed locked" in str(err.value)


def test_a_ledger_in_a_directory_it_cannot_write_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SimError) as err:
        reserve_ports(1, always_free, ledger=tmp_path / "missing-dir" / "ledger")
    assert "cannot open the port ledger" in str(err.value)
    assert "TMPDIR" in str(err.value)
