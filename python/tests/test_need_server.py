"""The one rule for a test whose server is down (conftest.need_server):
under CI=true it fails, elsewhere it skips loudly; a server that answers
lets the test go on."""
import socket

import pytest

import conftest


def test_a_server_that_answers_lets_the_test_run():
    with socket.create_server(("127.0.0.1", 0)) as listening:
        conftest.need_server(f"redis://127.0.0.1:{listening.getsockname()[1]}/0")


def test_a_down_server_skips_loudly_outside_ci(monkeypatch, capsys):
    monkeypatch.setattr(conftest, "CI", False)
    with pytest.raises(pytest.skip.Exception, match="127.0.0.1:1/x unreachable"):
        conftest.need_server("postgresql://postgres@127.0.0.1:1/x")
    assert "*** SKIPPING: postgresql://postgres@127.0.0.1:1/x unreachable" in capsys.readouterr().err


def test_a_down_server_fails_under_ci(monkeypatch):
    monkeypatch.setattr(conftest, "CI", True)
    # A skip here would hide the very thing this checks: catch both.
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as stopped:
        conftest.need_server("amqp://guest:guest@127.0.0.1:1//")
    assert stopped.type is pytest.fail.Exception, f"skipped under CI: {stopped.value}"
    assert "CI=true" in str(stopped.value)
