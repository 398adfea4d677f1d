"""`--host` says ssh's own error, not "the engine closed the connection during the
hello" (issue 36, item 8): the user's real ssh client, through the product's own
ssh settings, to a port nothing listens on (the sshd fixture's closed alias)."""

from __future__ import annotations

import pytest

from sshkit import ALIAS, CLOSED_ALIAS, needs_sshd, sshd  # noqa: F401 - sshd is a fixture
from tui.service.client import EngineUnavailable
from tui.service.remote import remote_client


@needs_sshd
@pytest.mark.slow
def test_a_refused_ssh_connection_is_said_in_ssh_s_words(sshd, monkeypatch):  # noqa: F811
    for key, value in sshd.client_env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(EngineUnavailable) as refused:
        remote_client(f"{CLOSED_ALIAS}:camp")
    said = str(refused.value)
    assert "Connection refused" in said and said.startswith("ssh ended with status 255"), said
    assert "the engine closed the connection" not in said
