"""SaaS overflow: a hand-written external endpoint behind the same service URL.

The provider is another local mock engine that insists on an API key; the gateway
attaches the key from a secret on the way out.
"""
import secrets
import stat

import httpx

from modelplane.commands.traffic import format_result, run_split
from modelplane.routing import Credential, Endpoint, RouteEntry
from modelplane.runtime.process import Traefik

from .helpers import NS, SVC, replica, select, wait_only

PROVIDER_LABEL = {"modelplane.ai/provider": "together"}


def _saas_fleet(fleet, key_in_secret: str):
    key = secrets.token_urlsafe(24)
    provider = fleet.start_engine("together-api", extra=["--api-key-env", "PROVIDER_KEY"],
                                  env={"PROVIDER_KEY": key})
    fleet.secrets[(NS, "together-key", "apiKey")] = key if key_in_secret == "right" else "wrong"
    saas = Endpoint(NS, "together", PROVIDER_LABEL, url=provider.url, external=True,
                    credential=Credential("together-key"))
    eps = fleet.start_engines([replica("qwen", 0, "east")]) + [saas]
    fleet.route({SVC: [select("qwen", 3), RouteEntry("overflow", 1, PROVIDER_LABEL)]}, eps)
    return key, provider


def test_overflow_takes_its_weight_with_the_key_from_the_secret(fleet, capsys):
    key, provider = _saas_fleet(fleet, "right")
    url = fleet.service_url(*SVC)

    res = run_split(url, 200)
    print(format_result(res))
    assert res.failed == 0, res.errors
    assert res.by_replica == {"qwen-0": 150, "together-api": 50}

    # Without the gateway the provider refuses: the key really came from the secret.
    assert httpx.post(f"{provider.url}/v1/chat/completions", json={}).status_code == 401
    # A caller's own key is replaced, never forwarded.
    with httpx.Client(headers={"Authorization": "Bearer caller-key"}) as c:
        got = {c.post(f"{url}/v1/chat/completions", json={}).headers.get("x-served-by") for _ in range(8)}
    assert got == {"qwen-0", "together-api"}

    # The key appears in no output, no process log, and not in the ConfigMap-bound file.
    assert key not in capsys.readouterr().out
    for log in fleet.work_dir.glob("*.log"):
        assert key not in log.read_text(errors="replace"), log.name
    dyn = fleet.control.dynamic_dir
    assert key not in (dyn / Traefik.DYNAMIC).read_text()
    assert key in (dyn / Traefik.SECRET).read_text()
    assert stat.S_IMODE((dyn / Traefik.SECRET).stat().st_mode) == 0o600
    # The Traefik API (which would serve the headers) is not enabled.
    api = f"http://127.0.0.1:{fleet.control.internal_port}/api/rawdata"
    assert httpx.get(api).status_code == 404


def test_overflow_with_a_bad_key_is_taken_out_of_rotation(fleet):
    """The provider's health (checked with the key) fails, so its share moves home."""
    _saas_fleet(fleet, "wrong")
    wait_only(fleet.service_url(*SVC), "qwen-0")
    res = run_split(fleet.service_url(*SVC), 100)
    assert (res.failed, res.by_replica) == (0, {"qwen-0": 100})
