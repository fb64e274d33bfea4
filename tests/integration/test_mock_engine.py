"""The mock engine as a real process: OpenAI/Anthropic shapes, health, fault flags, key."""
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from modelplane.runtime.process import Engine

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def engines(tmp_path):
    started = []

    def start(name, *extra, env=None):
        e = Engine(name, tmp_path, deployment="dep", extra=list(extra), env=env)
        started.append(e)
        e.wait_ready()
        return e

    yield start
    for e in started:
        e.stop()


def test_every_endpoint_names_the_replica(engines):
    e = engines("r-1")
    with httpx.Client(base_url=e.url) as c:
        chat = c.post("/v1/chat/completions", json={"model": "m", "messages": []}).json()
        assert chat["choices"][0]["message"]["content"] == "served by r-1" and chat["model"] == "m"
        assert c.post("/v1/completions", json={"prompt": "x"}).json()["choices"][0]["text"] == "served by r-1"
        msg = c.post("/v1/messages", json={"model": "m"}).json()
        assert msg["type"] == "message" and msg["content"][0]["text"] == "served by r-1"
        assert c.get("/v1/models").json()["data"][0]["id"] == "dep"
        assert c.get("/health").status_code == 200
        assert c.post("/v1/embeddings", json={}).status_code == 404


def test_fail_health_after_n_keeps_serving(engines):
    e = engines("r-2", "--fail-health-after", "2")
    with httpx.Client(base_url=e.url) as c:
        for _ in range(2):
            assert c.get("/health").status_code == 200
            assert c.post("/v1/chat/completions", json={}).status_code == 200
        assert c.get("/health").status_code == 503
        assert c.post("/v1/chat/completions", json={}).status_code == 200


def test_exit_after_n_answers_then_exits(engines):
    e = engines("r-3", "--exit-after", "1")
    assert httpx.post(f"{e.url}/v1/chat/completions", json={}).status_code == 200
    deadline = time.monotonic() + 60         # a liveness bound for a loaded machine
    while e.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not e.alive(), "the engine still runs 60 s after its one answer (--exit-after 1)"


def test_api_key_from_the_environment(engines):
    e = engines("saas", "--api-key-env", "K", env={"K": "s3cret", "PATH": "/usr/bin:/bin"})
    assert httpx.post(f"{e.url}/v1/chat/completions", json={}).status_code == 401
    ok = httpx.post(f"{e.url}/v1/chat/completions", json={}, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    assert httpx.get(f"{e.url}/v1/models", headers={"x-api-key": "s3cret"}).status_code == 200
    assert httpx.get(f"{e.url}/health").status_code == 200  # probes need no key


def test_runs_as_a_plain_script_with_the_stdlib_only():
    """The Kind stack mounts the file into a plain python image and runs it by path."""
    out = subprocess.run([sys.executable, "-I", str(ROOT / "modelplane" / "runtime" / "mock_engine.py"), "--help"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and "--fail-health-after" in out.stdout


def test_streaming_answers_arrive_as_server_sent_events(engines):
    e = engines("r-5")
    with httpx.Client(base_url=e.url) as c:
        with c.stream("POST", "/v1/chat/completions", json={"stream": True, "messages": []}) as r:
            assert r.headers["content-type"] == "text/event-stream"
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        import json

        text = "".join(json.loads(line[6:])["choices"][0]["delta"]["content"] for line in lines[:-1])
        assert text == "served by r-5"
        with c.stream("POST", "/v1/messages", json={"stream": True}) as r:
            events = [line for line in r.iter_lines() if line.startswith("event: ")]
        assert events[0] == "event: message_start" and events[-1] == "event: message_stop"
        # keep-alive survives a chunked answer
        assert c.post("/v1/completions", json={}).json()["choices"][0]["text"] == "served by r-5"


@pytest.mark.parametrize("declared, code", [(str(10 ** 12), 413), ("-5", 400), ("12abc", 400)])
def test_30_low_the_mock_engine_never_trusts_content_length(engines, declared, code):
    """A Content-Length of a terabyte is refused unread (it used to be read whole), a malformed one
    is a 400; the engine goes on serving."""
    import socket

    e = engines("r-1")
    host, port = e.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {declared}\r\n\r\n{{}}".encode())
        answer = s.recv(65536).decode()
    assert answer.startswith(f"HTTP/1.0 {code}") or answer.startswith(f"HTTP/1.1 {code}"), answer[:200]
    assert httpx.post(f"{e.url}/v1/chat/completions", json={}).status_code == 200
