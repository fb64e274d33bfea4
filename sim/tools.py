"""Where the control-plane binaries, kwok stages and CRDs built by scripts/bootstrap-tools live."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import SimError

REPO = Path(__file__).resolve().parents[1]
BOOTSTRAP = REPO / "scripts" / "bootstrap-tools"
REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
LWS_CONTROLLER = "lws-controller"
BUILD_HINT = "build them with `scripts/bootstrap-tools --only sim` (about 12 min cold; docs/sim.md)"


@dataclass(frozen=True)
class SimTools:
    """The sim tools directory: bin/, stages/ (kwok Stage YAMLs), crds/lws, crds/nvidia."""

    root: Path

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    @property
    def stages(self) -> list[Path]:
        return sorted((self.root / "stages").glob("*.yaml"))

    @property
    def lws_dir(self) -> Path | None:
        """LeaderWorkerSet controller + CRDs + webhook manifests, when they were built."""
        crds = self.root / "crds" / "lws"
        return crds if self.bin(LWS_CONTROLLER).exists() and (crds / "manifests.yaml").exists() else None

    @property
    def nvidia_crds(self) -> list[Path]:
        return sorted((self.root / "crds" / "nvidia").glob("*.yaml"))

    def missing(self) -> list[str]:
        gone = [name for name in REQUIRED if not os.access(self.bin(name), os.X_OK)]
        if not self.stages:
            gone.append("stages/*.yaml (kwok Stage YAMLs)")
        return gone


def tools_dir() -> Path:
    """$MODELPLANE_SIM_TOOLS, else the directory scripts/bootstrap-tools builds into (no network)."""
    override = os.environ.get("MODELPLANE_SIM_TOOLS")
    if override:
        return Path(override)
    if not BOOTSTRAP.exists():
        raise SimError(f"cannot locate the sim tools: {BOOTSTRAP} is missing and MODELPLANE_SIM_TOOLS is unset")
    proc = subprocess.run([sys.executable, str(BOOTSTRAP), "--print-sim-dir"], capture_output=True, text=True,
                          timeout=60, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SimError(f"`scripts/bootstrap-tools --print-sim-dir` failed: {proc.stderr.strip()[-300:]}")
    return Path(proc.stdout.strip())


def find_tools() -> SimTools:
    """The built tools, or a SimError naming what is missing and how to build it."""
    tools = SimTools(tools_dir())
    gone = tools.missing()
    if gone:
        raise SimError(f"the simulated clusters need tools that are not built in {tools.root}: "
                       f"{', '.join(gone)}; {BUILD_HINT}")
    return tools
