"""PrefillDecode with vLLM end to end: the router the renderer puts in front of the phases (the
real vllm-router 0.1.17, the release of its default image), started with the rendered flags, in
front of two mock engines playing prefill and decode. Each request is prefilled by the prefill
engine and answered by the decode engine with the prefill's KV transfer parameters."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelplane.plan import plan_fleet
from modelplane.processes import listen_socket, port_of
from modelplane.runtime.process import Engine, Managed, http_get, wait_until
from modelplane.scheduler import place_fleet
from tests.unit.render.fleets import full_fleet

pytestmark = [pytest.mark.integration]

# Flags that name where the pods are found in a cluster, with how many values follow each.
DISCOVERY = {"--service-discovery": 0, "--service-discovery-namespace": 1, "--service-discovery-port": 1,
             "--prefill-selector": 2, "--decode-selector": 2, "--host": 1, "--port": 1}


def _rendered_router() -> dict:
    """The router container the renderer draws for the vLLM PrefillDecode deployment `pd`."""
    fleet = full_fleet()
    plan = plan_fleet(fleet, place_fleet(fleet))
    [router] = [o for c in plan.clusters.values() for o in c.objects()
                if o["kind"] == "Deployment" and o["metadata"]["labels"].get("modelplane.ai/engine") == "pd-router"
                and o["metadata"]["namespace"] == "ml-team"]
    return router["spec"]["template"]["spec"]["containers"][0]


def _static(args: list[str], prefill: str, decode: str, port: int) -> list[str]:
    """The rendered flags with the cluster's pod discovery replaced by the two local engines."""
    out, i = [], 0
    while i < len(args):
        if args[i] in DISCOVERY:
            i += 1 + DISCOVERY[args[i]]
            continue
        out.append(args[i])
        i += 1
    return [*out, "--host", "127.0.0.1", "--port", str(port), "--prefill", prefill, "--decode", decode,
            "--prometheus-port", str(_free_port())]


def _free_port() -> int:
    with listen_socket() as s:
        return port_of(s)


@pytest.fixture
def pd(tmp_path: Path) -> Iterator[tuple[str, Engine, Engine]]:
    """(router URL, prefill engine, decode engine); every process stopped afterwards."""
    container = _rendered_router()
    assert container["command"] == ["vllm-router"]
    started: list[Managed] = []
    try:
        prefill = Engine("prefill", tmp_path, extra=["--pd-role", "prefill"])
        started.append(prefill)
        decode = Engine("decode", tmp_path, extra=["--pd-role", "decode"])
        started.append(decode)
        prefill.wait_ready()
        decode.wait_ready()
        port = _free_port()
        binary = str(Path(sys.executable).parent / container["command"][0])
        router = Managed("vllm-router", [binary, *_static(container["args"], prefill.url, decode.url, port)], tmp_path)
        started.append(router)
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            if not router.alive():
                raise AssertionError(f"vllm-router exited: {router.log_tail()}")
            return http_get(f"{url}/health", 0.5)[0] == 200

        wait_until(up, 60, f"vllm-router on port {port} ({router.log_tail()})")
        yield url, prefill, decode
    finally:
        for proc in reversed(started):
            proc.stop()


def _seen(engine: Engine) -> list[dict]:
    return httpx.get(f"{engine.url}/debug/pd", timeout=5).json()["requests"]


@pytest.mark.timeout(120)
def test_a_vllm_prefill_decode_request_is_prefilled_by_one_engine_and_decoded_by_the_other(pd) -> None:
    """vllm-project/router (docs/model-routing/pd-disaggregation.md, NIXL mode; the protocol of
    vllm tests/v1/kv_connector/nixl_integration/toy_proxy_server.py): the prefill server gets the
    request with `max_tokens: 1` and `kv_transfer_params.do_remote_decode: true`; the decode
    server gets the original request with the `kv_transfer_params` the prefill answered, and its
    answer is the client's, streamed or not."""
    url, prefill, decode = pd
    answer = httpx.post(f"{url}/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 16}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["text"] == "served by decode"
    [first] = _seen(prefill)
    assert first["max_tokens"] == 1 and first["kv_transfer_params"]["do_remote_decode"] is True
    [second] = _seen(decode)
    assert second["max_tokens"] == 16
    assert second["kv_transfer_params"]["remote_engine_id"] == "prefill"
    assert second["kv_transfer_params"]["do_remote_prefill"] is True
    chunks = []
    with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=30,
                      json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:])["choices"][0]["delta"].get("content", ""))
    assert "".join(chunks) == "served by decode"
    assert len(_seen(prefill)) == 2 and len(_seen(decode)) == 2
    assert _seen(decode)[1]["kv_transfer_params"]["remote_engine_id"] == "prefill"
