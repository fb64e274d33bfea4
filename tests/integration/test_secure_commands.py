"""`demo` on the secured example and `split --api-key`, as a user runs them."""
import io

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
                            (f"file:{tmp_path / 'missing'}", "cannot be read")):
        with pytest.raises(split_command.ApiKeySourceError, match=problem):
            split_command.read_api_key(source)
