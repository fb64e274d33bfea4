"""The watchdog that leads a LocalFleet's process group (standard library only, run by path).

    python -I -S watchdog.py        # stdin: one JSON line per directory to remove

It is started first, as the leader of a new process group; every engine and Traefik of
the fleet joins that group. It blocks reading stdin. When stdin closes, because the
parent closed it after stopping its children or because the parent died in any way
(SIGKILL included: the kernel closes the parent's end), it sends SIGTERM to the group,
waits for the members to exit, removes the directories it was told about, and SIGKILLs
whatever member is left (itself last). The group cannot be reused by unrelated
processes while the watchdog, its leader, is alive, so the kill never hits a stranger.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time

GRACE_SECONDS = 3.0


def members(pgid: int) -> list[int]:
    """Live processes of the group other than the caller (zombies are already dead)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the end of stdin decides
    dirs = [json.loads(line)["dir"] for line in sys.stdin if line.strip()]
    pgid = os.getpgrp()
    if members(pgid):
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    if members(pgid):
        os.killpg(pgid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
