"""`split` against hostile or broken input and servers (issue 9 items 1a, 7, 8 and "Low")."""
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from modelplane.__main__ import main

from .helpers import refused_port


@contextmanager
def serving(handler_class):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


class Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))


class DripsBody(Quiet):
    """Headers at once, then one body byte every 0.2 s for 20 s: every read is quick."""

    def do_POST(self):
        self.read_body()
        self.send_response(200)
        self.send_header("Content-Length", "100")
        self.end_headers()
        for _ in range(100):
            try:
                self.wfile.write(b" ")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)


class DripsHeaders(Quiet):
    def do_POST(self):
        self.read_body()
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100:
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)


@pytest.mark.parametrize("server", [DripsBody, DripsHeaders], ids=["body", "headers"])
def test_split_timeout_bounds_the_whole_request_against_a_dripping_server(server, capsys):
    with serving(server) as url:
        start = time.monotonic()
        assert main(["split", url, "-n", "2", "--timeout", "1"]) == 1
        elapsed = time.monotonic() - start
    assert elapsed < 4, f"2 requests with --timeout 1 took {elapsed:.1f}s"
    assert "failed: 2 (Timeout x2)" in capsys.readouterr().out


class Hostile(Quiet):
    """Names itself with 8-bit terminal controls (CSI, OSC ... ST) and a bidi override, in
    UTF-8 header bytes (the HTTP parser already refuses 7-bit control characters)."""

    def do_POST(self):
        self.read_body()
        served = "evil\u009b2J\u009d0;pwned\u009c-0\u202egnp.exe".encode()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Served-By: " + served
                         + b"\r\nX-Modelplane-Deployment: dep\xc2\x9b31m\r\n\r\n{}")


def test_split_prints_server_headers_without_control_characters(capsys):
    with serving(Hostile) as url:
        assert main(["split", url, "-n", "3"]) == 0
    out = capsys.readouterr().out
    assert not [c for c in out if c != "\n" and (ord(c) < 32 or 0x7f <= ord(c) <= 0x9f or c == "\u202e")]
    assert "evil2J0;pwned-0gnp.exe" in out and "dep31m" in out


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf", "-inf", "1e999", "abc", ""])
def test_split_rejects_timeouts_that_are_not_a_positive_finite_number(timeout, capsys):
    with pytest.raises(SystemExit) as e:
        main(["split", "http://127.0.0.1:1", "-n", "1", "--timeout", timeout])
    assert e.value.code == 2
    assert "--timeout" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1/x", "http://:80/x", "http://host:99999/", "ftp://h/",
                                 "http://exa mple.com/"])
def test_split_rejects_a_bad_url_with_a_message_not_a_traceback(url, capsys):
    assert main(["split", url, "-n", "1", "--timeout", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("split: ") and "Traceback" not in err


def test_split_prints_urls_without_user_info(capsys):
    with refused_port() as port:
        url = f"http://bob:PASSWORD@127.0.0.1:{port}/ml-team/chat"
        assert main(["split", url, "-n", "1", "--timeout", "1"]) == 1
        assert main(["split", "http://bob:PASSWORD@[::1/x", "-n", "1"]) == 2
    out, err = capsys.readouterr()
    assert "PASSWORD" not in out + err and "bob" not in out + err
    assert f"http://127.0.0.1:{port}/ml-team/chat: 1 request in " in out


class DripsBodyAndTells(DripsBody):
    """DripsBody that says when the first request arrived: split is then inside its request loop."""

    arrived = threading.Event()

    def do_POST(self):
        self.arrived.set()
        super().do_POST()


def test_split_interrupted_exits_cleanly_without_a_traceback():
    # Ctrl-C once split is sending, not at a fixed delay: under load a fixed 1.5 s could land
    # while the interpreter was still importing (a KeyboardInterrupt before split runs at all).
    DripsBodyAndTells.arrived.clear()
    with serving(DripsBodyAndTells) as url:
        proc = subprocess.Popen([sys.executable, "-m", "modelplane", "split", url, "-n", "50"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert DripsBodyAndTells.arrived.wait(60), "split sent no request"
        proc.send_signal(2)  # SIGINT, as Ctrl-C
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert err.strip() == "split: interrupted by SIGINT"
