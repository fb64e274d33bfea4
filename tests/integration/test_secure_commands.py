"""`demo` on the secured example and `split --api-key`, as a user runs them."""
import io
import os

import pytest

from modelplane.__main__ import main
from modelplane.commands import traffic as split_command

from .helpers import SVC, replica, select
from .test_commands import ROOT, _children

KEY = "sk-split-0123456789abcdef"


def test_demo_runs_the_secure_example_with_tls_keys_and_mtls_and_prints_no_key(traefik, capsys, monkeypatch):
    canaries = iter(f"sk-canary-{i}-0123456789abcdef" for i in range(100))
    made: list[str] = []

    def token(_n=None):
        made.append(next(canaries))
        return made[-1]

    monkeypatch.setattr("modelplane.commands.demo.secrets.token_urlsafe", token)
    assert main(["demo", str(ROOT / "examples" / "secure"), "-n", "20"]) == 0
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "mutual TLS" in out and "SELF-SIGNED" in out
    assert "https://127.0.0.1" in out
    blocks = {b.split(":", 2)[1].rsplit("/", 1)[-1]: b for b in out.split("https://127.0.0.1")[1:]}
    chat = [line.split() for line in blocks["chat"].splitlines()]
    assert ["chat", "18", "90.0%"] in chat and ["chat-canary", "2", "10.0%"] in chat
    assert "ml-team/research: as caller research" in out
    assert out.count("failed: 0") == 2
    # the refusals, each the answer the gateway must give (issue 32, item 8)
    assert "  ml-team/chat without an API key: 401, as expected" in out
    assert "  caller demo on ml-team/research (allowedCallers: research): 403, as expected" in out
    assert ("  caller demo over its rate (lowered to 1/min for this check; the gateway's is 60000/min, 1000 at "
            "once): 429 after 2 requests (Retry-After: ") in out
    assert "EXPECTED" not in out
    assert made and not [k for k in made if k in out], "a caller's key was printed"
    assert _children() == []


@pytest.fixture
def secured_service(secure_fleet):
    secure_fleet.set_callers({"alice": KEY})
    eps = secure_fleet.start_engines([replica("big", 0, "east")])
    secure_fleet.route({SVC: [select("big")]}, eps)
    return secure_fleet, secure_fleet.service_url(*SVC), secure_fleet.edge_cert.cert


def test_split_sends_the_key_from_the_environment_a_file_or_stdin(secured_service, capsys, monkeypatch, tmp_path):
    _, url, cacert = secured_service
    monkeypatch.setenv("MY_KEY", KEY)
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(KEY))
    for source in ("env:MY_KEY", f"file:{key_file}", "-"):
        assert main(["split", url, "-n", "4", "--api-key", source, "--cacert", cacert]) == 0, source
        out = capsys.readouterr().out
        assert "big-0" in out and "failed: 0" in out and KEY not in out


def test_split_without_or_with_a_wrong_key_counts_401s_and_never_takes_a_key_on_the_command_line(
        secured_service, capsys, monkeypatch):
    _, url, cacert = secured_service
    assert main(["split", url, "-n", "3", "--cacert", cacert]) == 1
    assert "HTTP 401 x3" in capsys.readouterr().out
    monkeypatch.setenv("WRONG", "sk-wrong-0123456789abcdef")
    assert main(["split", url, "-n", "2", "--api-key", "env:WRONG", "--cacert", cacert]) == 1
    assert main(["split", url, "-n", "1", "--api-key", KEY, "--cacert", cacert]) == 2
    err = capsys.readouterr().err
    assert "never the key itself" in err and KEY not in err
    assert main(["split", url, "-n", "1", "--api-key", "env:UNSET_VARIABLE_XYZ"]) == 2
    assert "holds no key" in capsys.readouterr().err
    # an edge certificate nobody vouches for is refused unless it is the one given
    assert main(["split", url, "-n", "1", "--api-key", "env:WRONG"]) == 1
    assert "ConnectError" in capsys.readouterr().out


def test_a_huge_or_odd_key_source_is_refused(tmp_path):
    big = tmp_path / "big"
    big.write_text("k" * (split_command.MAX_KEY_BYTES + 1))
    odd = tmp_path / "odd"
    odd.write_text("two words")
    for source, problem in ((f"file:{big}", "more than"), (f"file:{odd}", "holds no key"),
                            (f"file:{tmp_path / 'missing'}", "cannot read")):
        with pytest.raises(split_command.ApiKeySourceError, match=problem):
            split_command.read_api_key(source)


def test_30_low_split_api_key_file_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)                       # no writer: open() used to block split for ever
    with pytest.raises(split_command.ApiKeySourceError, match="is not a regular file"):
        split_command.read_api_key(f"file:{fifo}")
    with pytest.raises(split_command.ApiKeySourceError, match="is not a regular file"):
        split_command.read_api_key("file:/dev/zero")


@pytest.mark.parametrize("key", ["sk-ключ-0123456789", "sk-\u00e9t\u00e9-0123456789", "sk-\u202e-0123456789"])
def test_30_low_split_with_a_non_ascii_key_is_refused_with_the_reason_not_a_traceback(key, capsys, monkeypatch):
    monkeypatch.setenv("MODELPLANE_TEST_KEY", key)
    assert main(["split", "https://127.0.0.1:9/ml/chat", "-n", "1", "--api-key", "env:MODELPLANE_TEST_KEY"]) == 2
    err = capsys.readouterr().err
    assert "visible ASCII" in err and "Traceback" not in err and key not in err


def test_30_7_split_warns_before_sending_a_key_over_plain_http(capsys, monkeypatch):
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    monkeypatch.setenv("MODELPLANE_TEST_KEY", KEY)
    code = main(["split", f"http://127.0.0.1:{port}/ml/chat", "-n", "1", "--timeout", "2",
                 "--api-key", "env:MODELPLANE_TEST_KEY"])
    captured = capsys.readouterr()
    assert code == 1                                    # nothing listens: the request fails
    assert "warning: the API key goes to" in captured.err and "plain http" in captured.err
    assert KEY not in captured.out + captured.err
    assert main(["split", f"http://127.0.0.1:{port}/ml/chat", "-n", "1", "--timeout", "2"]) == 1
    assert "warning" not in capsys.readouterr().err     # no key, no warning
