"""`Device` and `AsyncDevice`: the phone's side, for tests, bots and terminals that play the phone.

Written once (`_DeviceApi`); `_twin` makes the calls blocking in `Device` and coroutines in `AsyncDevice`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal, TypeVar, Union

from . import _bridge, _native
from ._twin import Awaiting, Blocking, Flow, call, flow
from ._native import (
    ConversationItem,
    ConversationPage,
    DeviceCredentials,
    DeviceInfo,
    DeviceSelf,
    Question,
    QuestionList,
    Status,
    Stored,
)

#: An answer: True/False for a yes/no question, a list of options for a choice, a str for a text question.
AnswerValue = Union[bool, Sequence[str], str]
State = Literal["pending", "answered", "expired", "cancelled"]
D = TypeVar("D", bound="_Base")

#: Longest single long-poll the relay parks, in seconds.
_MAX_WAIT = 55.0


def _answer_arg(answer: AnswerValue) -> bool | list[str] | str:
    if isinstance(answer, (bool, str)):
        return answer
    return list(answer)


class _Base:
    _client: _native.DeviceClient

    def __init__(self, credentials: DeviceCredentials | str) -> None:
        """A device from stored credentials (a DeviceCredentials or its `pcrdev1_…` string)."""
        self._client = _native.DeviceClient.from_credentials(credentials)

    @classmethod
    def _wrap(cls: type[D], native: _native.DeviceClient) -> D:
        device = cls.__new__(cls)
        device._client = native
        return device

    @property
    def credentials(self) -> DeviceCredentials:
        """What to store to come back later (`.to_secret_string()`); a secret."""
        return self._client.credentials

    @property
    def device_id(self) -> str:
        return self._client.credentials.device_id

    @property
    def agent_id(self) -> str:
        return self._client.credentials.agent_id

    @property
    def signing_fingerprint(self) -> str | None:
        """The fingerprint of this device's signing key, as an answer-log export names it (None for a device
        paired before signing keys)."""
        return self._client.signing_fingerprint

    def __repr__(self) -> str:
        return f"{type(self).__name__}(agent_id={self.agent_id!r}, device_id={self.device_id!r})"


class _DeviceApi(_Base):
    """The device's calls, once: blocking in `Device`, coroutines in `AsyncDevice`."""

    @call
    def send(self, text: str, *, message_id: str | None = None, session: str | None = None) -> _native.Call[Stored]:
        """Sends a task to the agent: to its session named `session` (as `status().sessions` lists them), or to
        whichever session takes it first when None. Idempotent by `message_id`."""
        return self._client.send(text, message_id, session)

    @call
    def conversation(self, cursor: str | None = None, timeout: float = 0.0) -> _native.Call[ConversationPage]:
        """The conversation after `cursor` (from the start when None), parking up to `timeout` seconds
        when there is nothing new."""
        return self._client.conversation(cursor, timeout)

    @call
    def questions(self, state: State | None = None) -> _native.Call[QuestionList]:
        """The questions addressed to this device, oldest first."""
        return self._client.questions(state)

    @call
    def answer(self, question_id: str, answer: AnswerValue) -> _native.Call[Question]:
        """Answers a question: True/False (yes/no), a list of options (choice) or a str (text)."""
        return self._client.answer(question_id, _answer_arg(answer))

    @call
    def approve(self, question_id: str) -> _native.Call[Question]:
        """Answers yes."""
        return self._client.answer(question_id, True)

    @call
    def deny(self, question_id: str) -> _native.Call[Question]:
        """Answers no."""
        return self._client.answer(question_id, False)

    @call
    def status(self) -> _native.Call[Status]:
        """The agent's presence and counts."""
        return self._client.status()

    @call
    def info(self) -> _native.Call[DeviceSelf]:
        """This device and its agent, as the relay knows them."""
        return self._client.info()

    @call
    def leave(self) -> _native.Call[DeviceInfo]:
        """Leaves: this device's credential stops working."""
        return self._client.leave()

    @flow
    def wait_for_reply(self, message_id: str, timeout: float = 30.0) -> Flow[ConversationItem]:
        """Follows the conversation until the agent replies to `message_id`; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        cursor: str | None = None
        while True:
            remaining = deadline - time.monotonic()
            page: ConversationPage = yield self._client.conversation(cursor, max(0.0, min(remaining, _MAX_WAIT)))
            for item in page.items:
                if item.kind == "reply" and item.source_message_id == message_id:
                    return item
            cursor = page.cursor
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no reply to {message_id} within {timeout} s")

    @flow
    def wait_for_question(self, timeout: float = 30.0) -> Flow[Question]:
        """Waits until a question is open for this device and returns the oldest; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        cursor: str | None = None
        while True:
            pending: QuestionList = yield self._client.questions("pending")
            open_now = [q for q in pending.questions if q.is_open]
            if open_now:
                return open_now[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no open question within {timeout} s")
            page: ConversationPage = yield self._client.conversation(cursor, min(remaining, _MAX_WAIT))
            cursor = page.cursor


class Device(_DeviceApi, Blocking):
    """A device, blocking: join an agent by its pairing link, send tasks, read the conversation, answer."""

    @classmethod
    def join(cls, link: str, name: str) -> Device:
        """Pairs with an agent by opening its link (its secret never leaves this process)."""
        return cls._wrap(_native.DeviceClient.join(link, name).wait())


class AsyncDevice(_DeviceApi, Awaiting):
    """A device for asyncio: the methods of `Device`, as coroutines."""

    @classmethod
    async def join(cls, link: str, name: str) -> AsyncDevice:
        """Pairs with an agent by opening its link (its secret never leaves this process)."""
        return cls._wrap(await _bridge.run(_native.DeviceClient.join(link, name)))
