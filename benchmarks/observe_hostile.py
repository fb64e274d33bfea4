"""`plan --observe` against each hostile API server mode, one mode per run (the bounds
of the live-cluster hardening): peak memory of the plan process under 200 MB, wall time within the read timeout
plus 2 s on top of the same plan against an honest cluster (the baseline, measured in the same
run: interpreter start-up and the plan itself are not the read's). And 300 refusing plain-http
clusters (every cluster's SSL context used to cost 11.5 s in all).

    .venv/bin/python benchmarks/observe_hostile.py            # every mode, timeout 2 s
    .venv/bin/python benchmarks/observe_hostile.py --timeout 5 --modes huge,drip

Prints one row per mode: reading, seconds, seconds over the baseline, peak MB, verdict.
Exit 1 when any mode breaks a bound.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from modelplane.api import load_documents  # noqa: E402
from sim.pki import serving_cert  # noqa: E402
from tests import manifests as g  # noqa: E402
from tests.hostile.conftest import EXPECTED, closed_port, fleet_documents, kubeconfig  # noqa: E402
from tests.hostile.measure import run_modelplane  # noqa: E402
from tests.hostile.server import HostileServer, Objects  # noqa: E402
from tests.unit.observe.objects import cluster_objects  # noqa: E402

PEAK_MB = 200.0
OVER_S = 2.0


def _url(server: HostileServer, mode: str, cert: Path) -> tuple[str, bytes | None]:
    if mode == "tls-honest":
        return f"https://127.0.0.1:{server.tls_port}/tls-honest", cert.read_bytes()
    if mode == "tls-untrusted":
        return f"https://127.0.0.1:{server.tls_port}/honest", None    # the system store does not trust it
    if mode == "tls-plain":
        return f"https://127.0.0.1:{server.port}/honest", cert.read_bytes()
    if mode == "tls-stall":
        return f"https://127.0.0.1:{server.silent_port}", cert.read_bytes()
    if mode == "refused":
        return f"http://127.0.0.1:{closed_port()}", None
    return server.url(mode), None


def one_mode(base: Path, server: HostileServer, mode: str, cert: Path, timeout: float) -> tuple[str, float, float]:
    """(reading, seconds, peak MB) of `plan --observe` on a fleet whose one cluster is `mode`."""
    work = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=base))
    (work / "fleet.yaml").write_text(g.to_yaml(fleet_documents([mode])))
    (work / "kube").mkdir()
    url, ca = _url(server, mode, cert)
    kubeconfig(work / "kube" / f"{mode}.yaml", url, ca)
    run = run_modelplane("plan", str(work / "fleet.yaml"), "--observe", str(work / "kube"), "--observe-timeout",
                         str(timeout), "--json")
    if run.code != 0:
        return f"exit {run.code}", run.seconds, run.peak_mb
    capacity = json.loads(run.stdout)["capacity"][mode]
    reading = "observed" if capacity["source"] == "observed" else capacity["reason"].split(":")[0].split(" (")[0]
    return reading, run.seconds, run.peak_mb


def refusing(base: Path, count: int, timeout: float) -> tuple[float, float]:
    work = base / "refusing"
    (work / "kube").mkdir(parents=True)
    names = [f"r{i}" for i in range(count)]
    (work / "fleet.yaml").write_text(g.to_yaml(fleet_documents(names)))
    port = closed_port()
    for name in names:
        kubeconfig(work / "kube" / f"{name}.yaml", f"http://127.0.0.1:{port}", None)
    run = run_modelplane("plan", str(work / "fleet.yaml"), "--observe", str(work / "kube"), "--observe-timeout",
                         str(timeout), "--json")
    assert run.code == 0, run.stderr[-1000:]
    return run.seconds, run.peak_mb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--modes", help="comma-separated (default: every mode)")
    parser.add_argument("--refusing", type=int, default=300, help="refusing http clusters in one plan (0: skip)")
    args = parser.parse_args()
    modes = args.modes.split(",") if args.modes else sorted(EXPECTED)
    base = Path(tempfile.mkdtemp(prefix="observe-hostile-"))
    cert, key = serving_cert(base / "cert", "127.0.0.1")
    server = HostileServer((cert, key)).start()
    server.bomb()
    failed = False
    try:
        for mode in {*modes, "honest"}:
            fleet = load_documents(fleet_documents([mode]))
            server.objects[mode] = Objects(*cluster_objects(fleet, mode))
        one_mode(base, server, "honest", cert, args.timeout)            # warm the page cache first
        _, baseline, base_mb = one_mode(base, server, "honest", cert, args.timeout)
        print(f"baseline (honest cluster): {baseline:.2f} s, {base_mb:.0f} MB peak; timeout {args.timeout:g} s\n")
        print(f"{'mode':<26} {'reading':<20} {'seconds':>8} {'over':>6} {'peak MB':>8}  verdict")
        for mode in modes:
            reading, seconds, peak = one_mode(base, server, mode, cert, args.timeout)
            over = seconds - baseline
            ok = peak < PEAK_MB and over < args.timeout + OVER_S and not reading.startswith("exit")
            failed = failed or not ok
            print(f"{mode:<26} {reading[:20]:<20} {seconds:8.2f} {over:6.2f} {peak:8.0f}  {'ok' if ok else 'OVER'}")
        if args.refusing:
            seconds, peak = refusing(base, args.refusing, args.timeout)
            print(f"\n{args.refusing} refusing http clusters: {seconds:.2f} s, {peak:.0f} MB peak "
                  f"({seconds - baseline:.2f} s over the one-cluster baseline)")
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
