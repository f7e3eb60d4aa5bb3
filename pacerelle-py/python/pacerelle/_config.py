"""Where an agent's credentials come from (the client's rule: the environment, else the file `pacerelle agent create`
writes), and how this process names itself to another session."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from . import _native


def agent_credentials(environ: Mapping[str, str]) -> tuple[str, str, str]:
    """(relay URL, agent id, token) from `PACERELLE_AGENT_ID`/`PACERELLE_AGENT_TOKEN`/`PACERELLE_RELAY_URL`,
    else from `agent.json` in the credentials folder: the client's one rule, shared with the CLI."""
    return _native.AgentClient.find_credentials(dict(environ))


def default_host() -> str:
    """Where this session runs, as a second session is told: `hostname / program (pid N)`."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return f"{socket.gethostname()} / {program or 'python'} (pid {os.getpid()})"
