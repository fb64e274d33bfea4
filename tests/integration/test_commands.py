"""`split` and `demo` as a user runs them (through modelplane.__main__)."""
import os
from pathlib import Path

from modelplane.__main__ import main

from .helpers import refused_port

ROOT = Path(__file__).resolve().parents[2]


def _children() -> list[int]:
    me, out = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            out.append(int(pid))
    return out


def test_split_prints_counts_per_replica_and_deployment(fleet, capsys):
    eng = fleet.start_engine("solo-7f3a1", deployment="solo")
    assert main(["split", eng.url, "-n", "12"]) == 0
    out = capsys.readouterr().out
    assert "solo-7f3a1        12   100.0%" in out
    assert "solo              12   100.0%" in out
    assert "failed: 0" in out


def test_split_counts_failures_and_exits_nonzero(capsys):
    with refused_port() as port:
        assert main(["split", f"http://127.0.0.1:{port}", "-n", "3", "--timeout", "1"]) == 1
    assert f"failed: 3 (nothing listening at 127.0.0.1:{port} x3)" in capsys.readouterr().out


def test_split_rejects_bad_input(capsys):
    assert main(["split", "not-a-url"]) == 2
    assert main(["split", "http://127.0.0.1:1", "-n", "0"]) == 2


def test_demo_runs_the_kind_example_end_to_end_and_cleans_up(traefik, capsys):
    assert main(["demo", str(ROOT / "examples" / "kind"), "-n", "20"]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert ["chat", "18", "90.0%"] in lines
    assert ["chat-canary", "2", "10.0%"] in lines
    assert "failed: 0" in out
    assert _children() == []  # every engine and Traefik was stopped


def test_demo_on_the_canary_example_shows_pin_and_overflow(traefik, capsys):
    assert main(["demo", str(ROOT / "examples" / "canary"), "-n", "20"]) == 0
    out = capsys.readouterr().out
    blocks = {b.split(":", 2)[1].rsplit("/", 1)[-1]: b for b in out.split("http://127.0.0.1")[1:]}
    rows = {svc: [line.split() for line in b.splitlines()] for svc, b in blocks.items()}
    assert ["chat", "18", "90.0%"] in rows["chat"] and ["chat-canary", "2", "10.0%"] in rows["chat"]
    assert ["qwen", "20", "100.0%"] in rows["qwen-eu"]
    assert sorted(r[1] for r in rows["qwen-eu"] if r and r[0].startswith("qwen-")) == ["0", "20"]  # 20/0
    assert sorted(r[1] for r in rows["qwen"] if r and r[0].startswith("qwen-")) == ["10", "10"]
    assert ["qwen", "15", "75.0%"] in rows["overflow"] and ["together", "5", "25.0%"] in rows["overflow"]
    assert out.count("failed: 0") == 4
    assert _children() == []


def test_split_counts_answers_that_name_no_replica_as_successes(capsys):
    """A provider that does not say who served it: a plain stdlib server, no mock engine."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Plain(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"choices": [{"message": {"content": "hello"}}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        assert main(["split", f"http://127.0.0.1:{srv.server_address[1]}", "-n", "4"]) == 0
    finally:
        srv.shutdown()
        srv.server_close()
    out = capsys.readouterr().out
    assert ["(unidentified)", "4", "100.0%"] in [line.split() for line in out.splitlines()]
    assert "failed: 0" in out


def test_demo_runs_a_cache_aware_canary_through_kvroute(traefik, capsys, tmp_path):
    """examples/kind with its ModelService balanced CacheAware: both gateways load kvroute (the demo
    reads it from the manifests), every request is answered, and the canary keeps about its 10%."""
    for name in ("platform.yaml", "models.yaml"):
        text = (ROOT / "examples" / "kind" / name).read_text()
        if name == "models.yaml":
            assert text.count("    selector:\n") == 2
            text = text.replace("    selector:\n", "    routingPolicy: {balancing: CacheAware}\n    selector:\n")
        (tmp_path / name).write_text(text)
    assert main(["demo", str(tmp_path), "-n", "100"]) == 0
    out = capsys.readouterr().out
    assert "ml-team/chat: (CacheAware: kvroute picks the cluster and the replica)" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert 85 <= int(rows["chat"][1]) <= 95 and 5 <= int(rows["chat-canary"][1]) <= 15, out
    assert "failed: 0" in out
    assert _children() == []
