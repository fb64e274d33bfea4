"""Properties over generated kubeconfig documents and API object shapes: whatever they hold,
`plan --observe` exits 0 or 2, each cluster read ends in bounded time, nothing raises, and no
credential or control character reaches stdout, stderr, --json, a reason or the placement
state; a cluster's objects never place more than its class holds."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelplane.observe.read import ClusterRead, read_cluster
from providers.placement import compute_placement
from tests.hostile.checks import assert_clean, assert_clean_json
from tests.hostile.conftest import GPUS_PER_NODE, GPUS_PER_REPLICA, TOKEN, HostileFleet
from tests.unit.observe.test_hardening import run

pytestmark = pytest.mark.integration

SLOW = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Values a kubeconfig field may hold: the credential itself in every position, text with
# escapes and newlines, numbers of every kind, booleans as strings.
TEXTS = st.sampled_from([TOKEN, TOKEN + "\n", f"Bearer {TOKEN}", "\x1b[31mx\x1b[0m\n", "false", "no", "0", "",
                         "%%%%", "http://127.0.0.1:9", "https://u:p@127.0.0.1:9", "ctx", "c", "u", "ä\u202e"])
SCALARS = st.one_of(TEXTS, st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.booleans(), st.none())
JSONISH = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
                       max_leaves=8)
USER_KEYS = ["token", "tokenFile", "exec", "client-certificate-data", "client-key-data", "client-certificate",
             "client-key", "username", "password", "auth-provider"]
CLUSTER_KEYS = ["server", "certificate-authority-data", "certificate-authority", "insecure-skip-tls-verify"]


def safe_files(tmp: Path) -> list[str]:
    """Paths a generated kubeconfig may name: never anything whose reading or running matters."""
    fifo = tmp / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    (tmp / "shadow").write_text(f"root:{TOKEN}:1\nx:y\n")
    return ["/dev/zero", str(fifo), str(tmp / "shadow"), str(tmp / "missing"), str(tmp)]


def exec_blocks() -> st.SearchStrategy[Any]:
    scripts = [f"print({TOKEN!r})", "import time; time.sleep(30)", "import sys\nwhile 1: sys.stdout.write('x'*9999)",
               f"import json; print(json.dumps({{'status': {{'token': {TOKEN + chr(10)!r}}}}}))",
               f"import json; print(json.dumps({{'status': {{'token': {TOKEN!r}}}}}))", "raise SystemExit(3)"]
    return st.fixed_dictionaries({
        "apiVersion": st.sampled_from(["client.authentication.k8s.io/v1beta1", "v9", 5]),
        "command": st.sampled_from([sys.executable, "/nonexistent/plugin"]),
        "args": st.one_of(st.builds(lambda s: ["-c", s, f"--secret={TOKEN}"], st.sampled_from(scripts)), JSONISH),
        "env": st.one_of(st.just([{"name": "X", "value": TOKEN}]), JSONISH)})


def kubeconfigs(server: str, files: list[str]) -> st.SearchStrategy[Any]:
    value = st.one_of(SCALARS, st.sampled_from(files), JSONISH)
    user = st.one_of(st.dictionaries(st.sampled_from(USER_KEYS), value, max_size=3),
                     st.fixed_dictionaries({"exec": exec_blocks()}), JSONISH)
    cluster = st.one_of(st.fixed_dictionaries({"server": st.just(server)},
                                              optional={k: value for k in CLUSTER_KEYS[1:]}),
                        st.dictionaries(st.sampled_from(CLUSTER_KEYS), value, max_size=3), JSONISH)
    doc = st.fixed_dictionaries({
        "apiVersion": st.just("v1"), "kind": st.just("Config"),
        "current-context": st.one_of(st.just("ctx"), SCALARS),
        "clusters": st.one_of(st.builds(lambda c: [{"name": "c", "cluster": c}], cluster), JSONISH),
        "users": st.one_of(st.builds(lambda u: [{"name": "u", "user": u}], user), JSONISH),
        "contexts": st.one_of(st.just([{"name": "ctx", "context": {"cluster": "c", "user": "u"}}]), JSONISH)})
    return st.one_of(doc, JSONISH)






def test_19_generated_kubeconfigs_never_leak_a_credential_or_raise(hostile: HostileFleet, tmp_path: Path) -> None:
    files = safe_files(tmp_path)
    manifests = hostile.manifests / "fleet.yaml"
    observe = tmp_path / "observe"
    observe.mkdir()

    @SLOW
    @given(doc=kubeconfigs(hostile.server.url("honest"), files))
    def check(doc: Any) -> None:
        text = yaml.safe_dump(doc)
        (observe / "honest.yaml").write_text(text)
        start = time.monotonic()
        found = read_cluster("honest", observe / "honest.yaml", timeout=1.0)
        assert time.monotonic() - start < 4
        assert_clean(getattr(found, "reason", ""))
        code, out, err = run("plan", str(manifests), "--observe", str(observe), "--observe-timeout", "1", "--json")
        assert code in (0, 2), err
        assert_clean(out, err)
        if code == 0:
            assert_clean_json(json.loads(out))

    check()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 2 * 1024 * 1024      # KiB: under 2 GiB


def mutate(objects: list[dict[str, Any]], path: list[str | int], value: Any) -> list[dict[str, Any]]:
    """`objects` (copied) with the value at `path` (keys and indexes, wrapped around) replaced."""
    out: Any = json.loads(json.dumps(objects))
    node: Any = out
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, list) and node:
            key: Any = int(step) % len(node) if isinstance(step, int) else 0
        elif isinstance(node, dict) and node:
            key = step if isinstance(step, str) else sorted(node)[step % len(node)]
        else:
            return out
        if last or not isinstance(node[key] if not isinstance(node, dict) or key in node else None, (dict, list)):
            node[key] = value
            return out
        node = node[key]
    return out


PATHS = st.lists(st.one_of(st.integers(0, 20), st.sampled_from(
    ["metadata", "spec", "status", "items", "devices", "pool", "generation", "labels", "taints", "conditions",
     "nodeName", "driver", "name", "allocation", "results", "ownerReferences", "unschedulable"])), min_size=1,
    max_size=6)


def test_19_generated_api_objects_never_raise_leak_or_overplace(hostile: HostileFleet) -> None:
    server = hostile.server
    honest = server.objects["honest"]
    kubeconfig = hostile.kubeconfigs / "fuzz.yaml"
    kubeconfig.write_text((hostile.kubeconfigs / "honest.yaml").read_text().replace("/honest", "/fuzz"))
    documents = [d for d in hostile.documents if d["kind"] != "InferenceCluster" or d["metadata"]["name"] == "honest"]

    @SLOW
    @given(which=st.sampled_from(["/api/v1/nodes", "/apis/resource.k8s.io/v1/resourceslices",
                                  "/apis/resource.k8s.io/v1/resourceclaims", "/api/v1/pods"]),
           path=PATHS, value=JSONISH, raw=st.sampled_from([None, b"[", b"{\"items\": NaN}", b"\xff\xfe"]))
    def check(which: str, path: list[str | int], value: Any, raw: bytes | None) -> None:
        base = {"/api/v1/nodes": honest.nodes, "/apis/resource.k8s.io/v1/resourceslices": honest.slices}
        server.fuzz = {p: json.dumps({"items": objs}).encode() for p, objs in base.items()}
        body = {"items": base.get(which, [])}
        server.fuzz[which] = raw if raw is not None else json.dumps(mutate([body], path, value)[0]).encode()
        start = time.monotonic()
        found = read_cluster("honest", kubeconfig, timeout=2.0)
        assert time.monotonic() - start < 4
        assert_clean(getattr(found, "reason", ""))
        news = {"fleet": documents, "accounting": "Device",
                "observe": {"kubeconfigs": {"honest": str(kubeconfig)}, "timeoutSeconds": 2}}
        outputs, failures = compute_placement({}, news, now=1_800_000_000.0)
        assert not failures, failures
        assert outputs is not None
        assert_clean_json(outputs)
        if isinstance(found, ClusterRead):
            placed = [r for d in outputs["placement"]["deployments"] for r in d["replicas"]]
            assert len(placed) <= GPUS_PER_NODE // GPUS_PER_REPLICA

    check()
