"""The answer log anyone can verify (docs/crypto.md §4.9): `Agent.export_answer_log` writes it, and
`verify_answer_log` checks it with no key and no relay, as `pacerelle audit verify` does.

The export lists, oldest first, every answer the agent accepted, with the question's exact bytes, the answer,
the device's time of answering, its Ed25519 signature and the device's key as the agent pinned it; changing
any field of a record makes the check fail at that record.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Literal, Union, overload

from . import _native
from ._twin import Flow, flow

State = Literal["pending", "answered", "expired", "cancelled"]
Time = Union[datetime, float]


class AnswerLogApi:
    """The signed export of the answer log, for `Agent` and `AsyncAgent`."""

    _client: _native.AgentClient

    @flow
    def export_answer_log(
        self,
        *,
        state: State | None = None,
        since: Time | None = None,
        until: Time | None = None,
        limit: int | None = None,
        user: str | None = None,
        as_text: bool = False,
    ) -> Flow[Any]:
        """The answer log anyone can verify: a dict (or, with `as_text=True`, the JSON text that
        `pacerelle audit export --format signed` writes) with the agent, its devices (name, time of pairing,
        signing key and fingerprint) and one record per accepted answer, oldest first. Check it with
        `pacerelle.verify_answer_log` or `pacerelle audit verify FILE`. `limit` keeps the newest questions;
        `user` (Partner mode) only the questions addressed to that user."""
        text: str = yield self._client.export_answer_log(
            state=state, since=since, until=until, limit=limit, user=user
        )
        return text if as_text else json.loads(text)


@overload
def verify_answer_log(export: dict[str, Any]) -> int: ...
@overload
def verify_answer_log(export: str | bytes | os.PathLike[str]) -> int: ...
def verify_answer_log(export: dict[str, Any] | str | bytes | os.PathLike[str]) -> int:
    """Verifies every record of an answer-log export and returns how many answers verify.

    `export` is the dict `Agent.export_answer_log` returns, its JSON text (str or bytes), or the path of a
    file holding it. Raises `VerificationFailed` naming the first record that does not verify (`record`,
    from 1, `question_id`, `reason`), or with `record` 0 when the data is not an export. Needs no key and no
    relay.
    """
    if isinstance(export, dict):
        data = json.dumps(export).encode()
    elif isinstance(export, bytes):
        data = export
    elif isinstance(export, str) and export.lstrip().startswith("{"):
        data = export.encode()
    else:
        with open(export, "rb") as file:
            data = file.read()
    return _native.verify_answer_log(data)


__all__ = ["AnswerLogApi", "verify_answer_log"]
