"""Exec a program with systemd-style socket activation (standard library only, run by path).

    python -I -S listen_fds.py NAME=FD [NAME=FD ...] -- PROGRAM [ARGS ...]

The parent binds the listening sockets (port 0) and passes them open; this moves them to
descriptors 3, 4, ... in the given order, sets LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID
(its own pid, which exec keeps) and execs PROGRAM. Traefik (>= 3.1) then uses the socket
named like an entry point instead of binding that entry point's address itself (Traefik
docs, "EntryPoints: Systemd Socket Activation"; pkg/server/socket_activation.go reads
them with go-systemd's activation.Files, which checks LISTEN_PID). So a port is bound
from the moment it is chosen: no other process on the machine can take it in between.
"""
from __future__ import annotations

import fcntl
import os
import sys

FIRST_FD = 3  # SD_LISTEN_FDS_START


def main(argv: list[str]) -> int:
    split = argv.index("--")
    pairs = [a.split("=", 1) for a in argv[:split]]
    program = argv[split + 1:]
    # Park every socket above the target range first, so no move overwrites another.
    top = FIRST_FD + len(pairs) + 64
    parked = [fcntl.fcntl(int(fd), fcntl.F_DUPFD, top) for _, fd in pairs]
    for _, fd in pairs:
        os.close(int(fd))
    for i, high in enumerate(parked):
        os.dup2(high, FIRST_FD + i, inheritable=True)
        os.close(high)
    env = dict(os.environ, LISTEN_FDS=str(len(pairs)), LISTEN_FDNAMES=":".join(name for name, _ in pairs),
               LISTEN_PID=str(os.getpid()))
    os.execve(program[0], program, env)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
