"""Where an agent's credentials come from: the environment, else the file `pacerelle agent create` writes."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from . import _native


def home(environ: Mapping[str, str]) -> Path:
    """`PACERELLE_HOME`, else the user's config folder + `pacerelle` (as the CLI resolves it)."""
    explicit = environ.get("PACERELLE_HOME")
    if explicit:
        return Path(explicit)
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    else:
        base = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "pacerelle"


def agent_credentials(environ: Mapping[str, str]) -> tuple[str, str, str]:
    """(relay URL, agent id, token) from `PACERELLE_AGENT_ID`/`PACERELLE_AGENT_TOKEN`/`PACERELLE_RELAY_URL`,
    else from `agent.json` in the credentials folder."""
    relay = environ.get("PACERELLE_RELAY_URL") or None
    agent_id = environ.get("PACERELLE_AGENT_ID") or None
    token = environ.get("PACERELLE_AGENT_TOKEN") or None
    if agent_id and token:
        return relay or _native.DEFAULT_RELAY_URL, agent_id, token
    if agent_id or token:
        raise _native.InvalidInput("set both PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN, or neither")
    path = home(environ) / "agent.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _native.InvalidInput(
            "no agent credentials: set PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN (and PACERELLE_RELAY_URL), "
            f"or run `pacerelle agent create --name NAME` (writes {path})"
        ) from None
    except (OSError, ValueError) as e:
        raise _native.InvalidInput(f"{path} is not readable agent credentials: {e}") from None
    try:
        return relay or data["relayUrl"], data["agentId"], data["token"]
    except (KeyError, TypeError):
        raise _native.InvalidInput(f"{path} lacks relayUrl, agentId or token") from None


def default_host() -> str:
    """Where this session runs, as a second session is told: `hostname / program (pid N)`."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return f"{socket.gethostname()} / {program or 'python'} (pid {os.getpid()})"
