"""Where an agent's credentials come from (the client's rule: the environment, else the file `pacerelle agent create`
writes), and how this process names itself to another session."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from . import _native


def agent_client(environ: Mapping[str, str], relay_url: str | None = None) -> _native.AgentClient:
    """The client of the agent found in `PACERELLE_AGENT_ID`/`PACERELLE_AGENT_TOKEN`, else in `agent.json` in the
    credentials folder (the client's one rule, shared with the CLI); the relay is `relay_url` when given, else
    `PACERELLE_RELAY_URL`, else the file's, else the default."""
    return _native.AgentClient.from_environ(dict(environ), relay_url)


def default_host() -> str:
    """Where this session runs, as a second session is told: `hostname / program (pid N)`."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return f"{socket.gethostname()} / {program or 'python'} (pid {os.getpid()})"
