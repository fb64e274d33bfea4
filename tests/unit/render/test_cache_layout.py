"""The staging Job's script and the engines' wait, run for real against a directory standing in
for the PVC (fake `pip` and `hf` on PATH that write Hugging Face's cache layout).

Contract (k8s-api-shapes.md §8, huggingface_hub docs guides/manage-cache.md): `hf download
--cache-dir D` writes `D/models--org--repo/snapshots/<sha>/<files>` as symlinks into `blobs/`
and `refs/<name>` holding the sha when the revision is a name. The reference's engines run
`vllm serve /mnt/models` over a `--local-dir` tree (modelplane-semantics.md §5); ours name the
repo id through HF_HUB_CACHE. One staged copy must serve both."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from modelplane.render.cache import CACHE_MOUNT, staged_marker, staging_script, wait_for_cache_container

from .fleets import full_fleet

FAKE_HF = r"""#!/bin/sh
# hf download REPO --revision REV --cache-dir DIR: the cache layout, one blob per revision
set -eu
repo=$2; rev=$4; dir=$6
case "$rev" in
  [0-9a-f][0-9a-f][0-9a-f][0-9a-f]*) sha=$rev ;;
  *) sha=$(printf '%s' "$rev" | sha1sum | cut -c1-40) ;;
esac
base="$dir/models--$(echo "$repo" | sed 's#/#--#g')"
mkdir -p "$base/blobs" "$base/snapshots/$sha" "$base/refs"
printf '{"revision": "%s"}' "$rev" > "$base/blobs/$sha-config"
ln -sfn "../../blobs/$sha-config" "$base/snapshots/$sha/config.json"
printf 'weights-%s' "$rev" > "$base/blobs/$sha-weights"
ln -sfn "../../blobs/$sha-weights" "$base/snapshots/$sha/model.safetensors"
case "$rev" in [0-9a-f][0-9a-f][0-9a-f][0-9a-f]*) ;; *) printf '%s' "$sha" > "$base/refs/$rev" ;; esac
echo "hf called" >> "$HF_CALLS"
"""


def _tools(tmp: Path) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, body in (("hf", FAKE_HF), ("pip", "#!/bin/sh\nexit 0\n")):
        path = bin_dir / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HF_CALLS": str(tmp / "calls")}


def _run(script: str, pvc: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", script.replace(CACHE_MOUNT, str(pvc))], env=env,
                          capture_output=True, text=True, timeout=30, check=False)


def test_cache_layout_serves_both_a_local_path_engine_and_a_repo_id_engine(tmp_path: Path) -> None:
    pvc = tmp_path / "pvc"
    pvc.mkdir()
    env = _tools(tmp_path)
    done = _run(staging_script("Qwen/Qwen3-0.6B", "main"), pvc, env)
    assert done.returncode == 0, done.stderr
    # `vllm serve /mnt/models` style: the files are at the root, readable through the links.
    assert (pvc / "config.json").read_text() == '{"revision": "main"}'
    assert (pvc / "model.safetensors").read_text() == "weights-main"
    assert not os.path.isabs(os.readlink(pvc / "config.json"))   # relative: any mount path works
    # repo-id style with HF_HUB_CACHE=/mnt/models/.hf/hub and --revision main, offline: refs/main
    # names the snapshot that holds the same files.
    hub = pvc / ".hf" / "hub" / "models--Qwen--Qwen3-0.6B"
    sha = (hub / "refs" / "main").read_text()
    assert (hub / "snapshots" / sha / "config.json").read_text() == '{"revision": "main"}'
    assert Path(staged_marker("Qwen/Qwen3-0.6B", "main").replace(CACHE_MOUNT, str(pvc))).exists()


def test_a_new_revision_switches_the_view_and_a_rerun_downloads_nothing(tmp_path: Path) -> None:
    pvc = tmp_path / "pvc"
    pvc.mkdir()
    env = _tools(tmp_path)
    commit = "1605565b47bb9346c5515c34102e054115b4f98b"
    assert _run(staging_script("org/m", "main"), pvc, env).returncode == 0
    assert _run(staging_script("org/m", commit), pvc, env).returncode == 0
    assert (pvc / "config.json").read_text() == f'{{"revision": "{commit}"}}'
    calls = (tmp_path / "calls").read_text().count("hf called")
    rerun = _run(staging_script("org/m", commit), pvc, env)
    assert rerun.returncode == 0 and "already staged" in rerun.stdout
    assert (tmp_path / "calls").read_text().count("hf called") == calls


def test_engines_wait_for_the_staged_marker_instead_of_starting_offline(tmp_path: Path) -> None:
    fleet = full_fleet()
    cache = fleet.caches[("ml-team", "qwen")]
    hf = cache.spec.hugging_face
    assert hf is not None and hf.revision
    wait = wait_for_cache_container(cache, "ml-team")
    assert wait["volumeMounts"] == [{"name": "model-cache", "mountPath": CACHE_MOUNT, "readOnly": True}]
    script = wait["args"][0].replace("sleep 10", "exit 3")   # one round of the loop
    pvc = tmp_path / "pvc"
    pvc.mkdir()
    pending = _run(script, pvc, dict(os.environ))
    assert pending.returncode == 3 and "waiting for ModelCache ml-team/qwen" in pending.stdout
    assert _run(staging_script(hf.repo, hf.revision), pvc, _tools(tmp_path)).returncode == 0
    assert _run(script, pvc, dict(os.environ)).returncode == 0
