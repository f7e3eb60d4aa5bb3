"""`Agent` (blocking) and `AsyncAgent` (asyncio): the agent side of Pacerelle.

The API is written once (`_AgentApi`): each method returns one call of the native client
(`pacerelle._native.AgentClient`, over the Rust pacerelle-client), and `_twin` runs it with the GIL released
(`Agent`) or awaits it without blocking the event loop (`AsyncAgent`).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, overload

from . import _approval, _bridge, _config, _native, _runner
from ._audit import AnswerLogApi
from ._device import AnswerValue, _answer_arg
from ._twin import Awaiting, Blocking, call
from ._native import (
    AgentInfo,
    AnswerOutcome,
    Asked,
    AuditEntry,
    Checkpoint,
    Delivery,
    DeviceInfo,
    Inbox,
    PairingLink,
    Processed,
    SessionInfo,
    Status,
    Stored,
    User,
    WebhookInfo,
)

if TYPE_CHECKING:
    from types import TracebackType

    from ._runner import AsyncRunContext, RunContext

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A", bound="_Base")
Kind = Literal["yes_no", "choice", "text"]
Level = Literal["info", "warning", "error", "success"]
State = Literal["pending", "answered", "expired", "cancelled"]
Time = Union[datetime, float]
Handler = Callable[..., Any]
Icon = Union[str, "os.PathLike[str]"]
"""A branding icon: a `data:image/(png|svg+xml|jpeg);base64,…` URL, or the path of a .png, .svg or .jpg file."""

_ICON_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def _icon_arg(icon: Icon | None) -> str | None:
    """A branding icon as the data URL the pairing offer carries (the core checks its type and size)."""
    if icon is None or (isinstance(icon, str) and icon.startswith("data:")):
        return icon
    path = os.fspath(icon)
    media = _ICON_TYPES.get(os.path.splitext(path)[1].lower())
    if media is None:
        raise _native.InvalidInput(f"the icon is a data: URL or a .png, .svg or .jpg file, not {path!r}")
    with open(path, "rb") as file:
        return f"data:{media};base64,{base64.b64encode(file.read()).decode('ascii')}"


class _Base:
    """What `Agent` and `AsyncAgent` share: identity, configuration, approvals."""

    _client: _native.AgentClient

    def __init__(
        self,
        relay_url: str | None = None,
        agent_id: str | None = None,
        token: str | None = None,
        *,
        host: str | None = None,
        session: str | None = None,
    ) -> None:
        """An agent client. Without `agent_id` and `token`, they come from the environment as in
        `from_env()`. `host` names this process to a second session that finds the lease taken. `session` names
        this process's session of the agent (the default session when None): sessions with other names listen
        side by side, each receiving the tasks sent to it or to any session."""
        if agent_id is None and token is None:
            self._client = _config.agent_client(os.environ, relay_url)
        elif agent_id is None or token is None:
            raise _native.InvalidInput("give both agent_id and token, or neither (to read them from the environment)")
        else:
            self._client = _native.AgentClient(relay_url or _native.DEFAULT_RELAY_URL, agent_id, token)
        self.host = host or _config.default_host()
        self.session = session
        self._runner: Any = None

    @classmethod
    def from_env(
        cls: type[A],
        environ: Mapping[str, str] | None = None,
        *,
        host: str | None = None,
        session: str | None = None,
    ) -> A:
        """From `PACERELLE_AGENT_ID`, `PACERELLE_AGENT_TOKEN` and `PACERELLE_RELAY_URL`, else from the
        `agent.json` that `pacerelle agent create` writes (in `PACERELLE_HOME`); the session's name from
        `session`, else `PACERELLE_SESSION` (as `pacerelle-mcp` reads it), else the default session."""
        environ = os.environ if environ is None else environ
        return cls._wrap(_config.agent_client(environ), host, session or environ.get("PACERELLE_SESSION") or None)

    @classmethod
    def _wrap(cls: type[A], native: _native.AgentClient, host: str | None = None, session: str | None = None) -> A:
        agent = cls.__new__(cls)
        agent._client = native
        agent.host = host or _config.default_host()
        agent.session = session
        agent._runner = None
        return agent

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self._client.agent_id

    @property
    def token(self) -> str:
        """The agent's token (`pcr1_…`): a secret, store it like a password."""
        return self._client.token

    @property
    def relay_url(self) -> str:
        """The relay's base URL."""
        return self._client.relay_url

    @property
    def native(self) -> _native.AgentClient:
        """The native client underneath (shared by an `Agent` and an `AsyncAgent` made `from_agent`)."""
        return self._client

    def stop(self) -> None:
        """Asks a running `run()` loop to stop (from a handler, another thread or a signal handler): the
        current task finishes, the wait in progress ends at once, the lease is released."""
        if self._runner is not None:
            self._runner.stop()

    @overload
    def require_approval(self, question: F, /) -> F: ...

    @overload
    def require_approval(
        self,
        question: str | None = None,
        *,
        describe: Callable[..., str] | None = None,
        details: str | None = None,
        expires_in: float = 600.0,
        timeout: float | None = None,
        policy: _approval.PolicyLike = None,
        tool: str | None = None,
        user: _approval.UserOf = None,
        approvals: int = 1,
    ) -> Callable[[F], F]: ...

    def require_approval(
        self,
        question: str | F | None = None,
        *,
        describe: Callable[..., str] | None = None,
        details: str | None = None,
        expires_in: float = 600.0,
        timeout: float | None = None,
        policy: _approval.PolicyLike = None,
        tool: str | None = None,
        user: _approval.UserOf = None,
        approvals: int = 1,
    ) -> Any:
        """Decorator: asks the owner before each call and runs the function only on an authenticated yes;
        otherwise raises `NotApproved` (`conclusion` 'denied', 'expired', 'cancelled', 'relay_unavailable',
        'rejected', 'pending' or 'answered': the gate's word, the same as the CLI hook's and the MCP tools';
        `reason`: the gate's sentence) and the function never runs.

        `question` is a text with `{argument}` placeholders filled from the call; `describe`, a function
        of the call's arguments that returns the text; by default the question names the function and its
        arguments. With a `policy` (a `Policy` or the path of a TOML policy file), the policy decides
        first by `tool` (default: the function's name) with the call's arguments as input: 'allow' runs
        without asking, 'deny' raises `NotApproved` (conclusion 'denied'), 'ask' asks — unless a live grant
        covers the call: grants work as in the CLI's hook (docs/hooks.md, "Grants"), kept in the agent's home
        (`<PACERELLE_HOME>/grants/<agentId>.json`) with the current directory as the project folder; the
        question offers the grants the policy allows ("Allow for 15 min / 1 h"), a grant given with the yes is
        kept, and the calls it covers then run without a question (the gate's conclusion 'granted'). A grant
        covers the tool in that folder: the exact `command` argument (or a rule's `grant_prefix`), and for a
        function without one, any arguments whose `path`/`file_path` stay inside the folder.

        `approvals` (1 to 10) is how many distinct owner devices must approve each call, each with a signed
        yes (one no denies); a policy rule's `approvals` raises it. Fewer paired devices than that raises
        `InvalidInput` before anything is asked; a call that needs more than one approval uses no grant.
        Works on plain and `async def` functions, and bare: `@agent.require_approval`. With `user` (Partner
        mode: a user's external id, or a function of the call's arguments that returns it, or None for the
        owner), that user is asked on their own devices instead of the owner (and no grant is used).
        """
        options = dict(
            details=details,
            expires_in=expires_in,
            timeout=timeout,
            policy=policy,
            tool=tool,
            user=user,
            approvals=approvals,
        )
        if callable(question):
            # Used bare: @agent.require_approval
            return _approval.decorator(self._client, describe, **options)(question)  # type: ignore[arg-type]
        return _approval.decorator(self._client, question if question is not None else describe, **options)  # type: ignore[arg-type]

    def approval(
        self,
        question: str,
        *,
        details: str | None = None,
        expires_in: float = 600.0,
        timeout: float | None = None,
        user: str | None = None,
        approvals: int = 1,
    ) -> _approval.Approval:
        """Context manager: `with agent.approval("Deploy to prod?"):` (or `async with`) asks and waits;
        the block runs only on an authenticated yes, else `NotApproved` is raised before it. With `user`
        (Partner mode), that user of the agent is asked, on their own devices, instead of the owner.
        `approvals=2` (up to 10) needs that many distinct owner devices to answer a signed yes (one no denies;
        fewer paired devices raises `InvalidInput` before anything is asked)."""
        request = _approval.Request(
            question, details=details, expires_in=expires_in, timeout=timeout, user=user, approvals=approvals
        )
        return _approval.Approval(self._client, request)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(relay_url={self.relay_url!r}, agent_id={self.agent_id!r})"


def _kwargs_question(
    kind: Kind | None,
    options: Sequence[str] | None,
    multiple: bool,
    details: str | None,
    expires_in: float,
    question_id: str | None,
    answered_at_host: bool,
    user: str | None,
    approvals: int,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "options": list(options) if options is not None else None,
        "multiple": multiple,
        "details": details,
        "expires_in": expires_in,
        "question_id": question_id,
        "answered_at_host": answered_at_host,
        "user": user,
        "approvals": approvals,
    }


class _AgentApi(AnswerLogApi, _Base):
    """The agent's calls, once: blocking in `Agent`, coroutines in `AsyncAgent`."""

    # -- the inbox -------------------------------------------------------------------------------------

    @call
    def open_session(self, *, takeover: bool = False, folder: str | None = None) -> _native.Call[SessionInfo]:
        """Takes the lease of this agent's session `self.session` (the default session when None): only this
        process consumes that session's tasks and those sent to any session from now on (a heartbeat keeps it).
        `folder` is the folder it works in, as the phone shows it. Raises `AgentInUse` (with `.host` and
        `.since`) when another process holds that session's lease, unless `takeover`."""
        return self._client.open_session(self.host, takeover, self.session, folder)

    @call
    def heartbeat(self) -> _native.Call[SessionInfo]:
        """Renews the lease now (it is also renewed every 10 s in the background)."""
        return self._client.heartbeat()

    @call
    def close_session(self) -> _native.Call[None]:
        """Releases the lease."""
        return self._client.close_session()

    @call
    def wait_for_messages(self, cursor: str | None = None, timeout: float = 30.0) -> _native.Call[Inbox]:
        """Waits for tasks. Without a cursor: every task not yet processed (those delivered before come
        again, `redelivered`); with one: tasks after it. Parks up to `timeout` seconds (at most 55)."""
        return self._client.wait_for_messages(cursor, timeout)

    @call
    def reply(self, source_message_id: str, text: str, *, reply_id: str | None = None) -> _native.Call[Stored]:
        """Replies to a task, sealed for each paired device. Idempotent by `reply_id`."""
        return self._client.reply(source_message_id, text, reply_id)

    @call
    def mark_processed(self, message_id: str) -> _native.Call[Processed]:
        """Marks a task processed: the acknowledgement. Idempotent and final."""
        return self._client.mark_processed(message_id)

    @call
    def save_checkpoint(
        self, summary: str, next_action: str, message_ids: Sequence[str] = ()
    ) -> _native.Call[Checkpoint]:
        """Saves a checkpoint (what was done, what comes next), sealed with the agent's own key."""
        return self._client.save_checkpoint(summary, next_action, list(message_ids))

    @call
    def get_checkpoints(self, limit: int = 10) -> _native.Call[list[Checkpoint]]:
        """The latest checkpoints, latest first."""
        return self._client.get_checkpoints(limit)

    @call
    def status(self) -> _native.Call[Status]:
        """Presence and counts, as the phone sees them."""
        return self._client.status()

    # -- questions -------------------------------------------------------------------------------------

    @call
    def ask_user(
        self,
        question: str,
        *,
        kind: Kind | None = None,
        options: Sequence[str] | None = None,
        multiple: bool = False,
        details: str | None = None,
        expires_in: float = 600.0,
        question_id: str | None = None,
        answered_at_host: bool = False,
        user: str | None = None,
        approvals: int = 1,
    ) -> _native.Call[Asked]:
        """Asks the owner a question and returns at once. `kind` defaults to 'choice' when `options` are
        given, else 'yes_no'. Raises `NoDevice` when no phone is paired. `question_id` names one question for
        good: the same question under it resumes it (with its answer, if any): `Asked.resumed` is then True and
        `Asked.expires_at` is the first expiry, whatever `expires_in` says; a different one raises
        `QuestionIdConflict`. `answered_at_host=True` seals into the question that an answer the person gives
        at the computer (`answer_at_host`) counts too; by default only a phone's answer does.

        With `user` (Partner mode: an `external_id` given to `connect_user`), the question goes to that user's
        devices only, and only their answer counts; raises `NotFound` (code 'user_not_found') for a user never
        connected or disconnected, `NoDevice` when the user has not opened their link yet.

        `approvals` (a yes/no question; 1 to 10, default 1): how many distinct devices must answer a signed
        yes for `approved`; one no denies, and the question stays pending until then (or until it expires).
        Raises `InvalidInput` when fewer devices can answer it (nothing is asked), or with `answered_at_host`."""
        kw = _kwargs_question(
            kind, options, multiple, details, expires_in, question_id, answered_at_host, user, approvals
        )
        return self._client.ask_user(question, **kw)

    @call
    def wait_for_answer(self, question: str | Asked, timeout: float | None = 30.0) -> _native.Call[AnswerOutcome]:
        """Waits until the outcome is final or `timeout` seconds pass (then the pending outcome is
        returned); `timeout=None` waits until the question expires. Only `.approved` means yes."""
        return self._client.wait_for_answer(question, timeout)

    @call
    def ask(
        self,
        question: str,
        *,
        kind: Kind | None = None,
        options: Sequence[str] | None = None,
        multiple: bool = False,
        details: str | None = None,
        expires_in: float = 600.0,
        question_id: str | None = None,
        timeout: float | None = None,
        answered_at_host: bool = False,
        user: str | None = None,
        approvals: int = 1,
    ) -> _native.Call[AnswerOutcome]:
        """Asks and waits for the answer (until the question expires, or `timeout`). With
        `answered_at_host=True`, an answer recorded by `answer_at_host` (from another thread or task) ends
        the wait as well as a phone's. `user` asks that user of the agent, and `approvals` needs that many
        devices' yes, as in `ask_user`."""
        kw = _kwargs_question(
            kind, options, multiple, details, expires_in, question_id, answered_at_host, user, approvals
        )
        return self._client.ask(question, timeout=timeout, **kw)

    @call
    def answer_at_host(self, question: str | Asked, answer: AnswerValue) -> _native.Call[AnswerOutcome]:
        """Records the answer the person gave at the computer, for a question asked with
        `answered_at_host=True`: True/False (yes/no), a list of options (choice) or a str (text), as
        `Device.answer` takes it. The first answer wins, on either channel; the outcome has `channel`
        'host' and no `answered_by`. Raises `InvalidInput` when the question does not accept host answers
        or the answer does not fit it (nothing is recorded), `QuestionClosed` when a phone answered first or
        it expired or was cancelled. With the `Asked` from `ask_user`, the answer counts only for exactly
        that question."""
        return self._client.answer_at_host(question, _answer_arg(answer))

    @call
    def notify(
        self, text: str, *, title: str | None = None, level: Level = "info", user: str | None = None
    ) -> _native.Call[Stored]:
        """Sends a notification to the owner's paired devices (no answer expected), or with `user`
        (Partner mode) to that user's devices only."""
        return self._client.notify(text, title, level, user)

    @call
    def cancel_question(self, question_id: str) -> _native.Call[AnswerOutcome]:
        """Withdraws a pending question. Raises `QuestionClosed` when it is already answered or expired."""
        return self._client.cancel_question(question_id)

    @call
    def answer_log(
        self,
        *,
        state: State | None = None,
        since: Time | None = None,
        until: Time | None = None,
        limit: int | None = None,
        search: str | None = None,
        user: str | None = None,
    ) -> _native.Call[list[AuditEntry]]:
        """The answer log, newest first, opened and judged here (expired, cancelled and denied stay distinct).
        `user` (Partner mode) keeps the questions addressed to that user."""
        return self._client.answer_log(state=state, since=since, until=until, limit=limit, search=search, user=user)

    # -- webhooks --------------------------------------------------------------------------------------

    @call
    def set_webhook(self, url: str, secret: str) -> _native.Call[WebhookInfo]:
        """The relay will POST question events (answered, expired, cancelled) to `url`, signed with `secret`."""
        return self._client.set_webhook(url, secret)

    @call
    def webhook(self) -> _native.Call[WebhookInfo]:
        """The agent's webhook."""
        return self._client.webhook()

    @call
    def clear_webhook(self) -> _native.Call[WebhookInfo]:
        """Removes the agent's webhook."""
        return self._client.clear_webhook()

    @call
    def webhook_deliveries(self, limit: int = 20) -> _native.Call[list[Delivery]]:
        """The latest webhook deliveries, newest first."""
        return self._client.webhook_deliveries(limit)

    # -- administration --------------------------------------------------------------------------------

    @call
    def info(self) -> _native.Call[AgentInfo]:
        """The agent as the relay knows it."""
        return self._client.info()

    @call
    def create_pairing(
        self,
        *,
        label: str | None = None,
        ttl: float = 600.0,
        role: Literal["owner", "user"] = "owner",
        public_url: str | None = None,
    ) -> _native.Call[PairingLink]:
        """A single-use pairing link (show it as a link or QR code): whoever opens it first becomes a device."""
        return self._client.create_pairing(label, ttl, role, public_url)

    @call
    def devices(self) -> _native.Call[list[DeviceInfo]]:
        """Every device ever paired, revoked ones included."""
        return self._client.devices()

    @call
    def revoke_device(self, device_id: str) -> _native.Call[DeviceInfo]:
        """Revokes a device: its credential stops working at once."""
        return self._client.revoke_device(device_id)

    @call
    def require_signed(self, required: bool = True) -> _native.Call[datetime | None]:
        """Requires signed answers from now on (``True``: a device with no signing key approves nothing), or
        accepts again the unsigned answers of devices paired before signing keys (``False``; never those of a
        device whose key was refused). New agents require them from their first pairing. Returns since when
        signatures are required, or ``None``."""
        return self._client.require_signed(required)

    # -- Partner mode: the agent's own users -----------------------------------------------------------

    @call
    def connect_user(
        self,
        external_id: str,
        name: str,
        *,
        accent_color: str | None = None,
        icon: Icon | None = None,
        ttl_seconds: float | None = None,
        public_url: str | None = None,
    ) -> _native.Call[PairingLink]:
        """Connects a user of the agent (Partner mode) and returns their pairing link: whoever opens it
        becomes one of that user's devices, and sees only what is addressed to that user. `external_id` is
        your own id for the user (1–128 characters), `name` how the app shows them (1–200). `accent_color`
        (`#rrggbb`) and `icon` (a data URL, or a .png/.svg/.jpg file of at most about 12 KiB) brand the app
        for them, sealed in the link. `ttl_seconds`: how long the link can be opened (default 10 minutes,
        at most one hour). Connecting a known user again gives another link (a second phone) and connects a
        disconnected user again."""
        return self._client.connect_user(
            external_id, name, accent_color=accent_color, icon=_icon_arg(icon), ttl=ttl_seconds, public_url=public_url
        )

    @call
    def list_users(self) -> _native.Call[list[User]]:
        """Every user ever connected, disconnected ones included, in the order they were connected."""
        return self._client.list_users()

    @call
    def get_user(self, external_id: str) -> _native.Call[User]:
        """One user, with their devices and last answer. Raises `NotFound` (code 'user_not_found') for a
        user never connected."""
        return self._client.get_user(external_id)

    @call
    def disconnect_user(self, external_id: str) -> _native.Call[User]:
        """Disconnects a user: every device of theirs is revoked (their answers never count again, and their
        requests are refused with `AuthError`). Raises `NotFound` for a user never connected; disconnecting
        a disconnected user changes nothing."""
        return self._client.disconnect_user(external_id)


class Agent(_AgentApi, Blocking):
    """The agent side, blocking. Each call releases the GIL while it waits; Ctrl-C interrupts it.

    ```python
    agent = pacerelle.Agent.from_env()
    agent.run(lambda message: f"echo: {message.text}")
    ```
    """

    @classmethod
    def register(
        cls, relay_url: str, name: str, registration_secret: str | None = None, *, host: str | None = None
    ) -> Agent:
        """Creates a new agent on the relay (its id and token are drawn here; the relay learns only a hash)."""
        return cls._wrap(_native.AgentClient.register(relay_url, name, registration_secret).wait(), host)

    @classmethod
    def from_agent(cls, agent: _Base) -> Agent:
        """An `Agent` sharing another agent's native client (and so its session)."""
        return cls._wrap(agent._client, agent.host, agent.session)

    def run(
        self,
        handler: Callable[[_native.Message], Any] | Callable[[_native.Message, RunContext], Any],
        *,
        takeover: bool = False,
        timeout: float = 30.0,
        max_backoff: float = 10.0,
        handle_signals: bool = True,
        max_attempts: int = 3,
    ) -> None:
        """The supervised loop (the client's one `Runner`): takes the lease, waits for tasks and calls
        `handler(message)` (or `handler(message, context)` when it takes two arguments; a function or a
        coroutine function). A `str` it returns is sent as the reply; the task is marked processed only
        after the handler returned. A handler that raises leaves the task unprocessed and is tried again
        after a pause; after `max_attempts` failures (or at once for a reply too large to send) the task is
        set aside: the person gets an error reply and it is marked processed. Errors are logged to the
        `pacerelle` logger. Survives relay restarts with backoff; returns on SIGINT/SIGTERM (in the main
        thread) or `stop()`. Raises `AgentInUse` if another session holds the lease and `takeover` is
        false."""
        loop = _runner.Loop(self, handler, _runner.RunContext, takeover, timeout, max_backoff, max_attempts)
        with _runner.signals(loop, handle_signals):
            _runner.drive(loop.flow())

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.close_session()
        except _native.PacerelleError:
            pass


class AsyncAgent(_AgentApi, Awaiting):
    """The agent side for asyncio: the same methods as `Agent`, as coroutines. Several calls may be in
    flight at once in one event loop; cancelling a task abandons its call at once."""

    @classmethod
    async def register(
        cls, relay_url: str, name: str, registration_secret: str | None = None, *, host: str | None = None
    ) -> AsyncAgent:
        """Creates a new agent on the relay."""
        native = await _bridge.run(_native.AgentClient.register(relay_url, name, registration_secret))
        return cls._wrap(native, host)

    @classmethod
    def from_agent(cls, agent: _Base) -> AsyncAgent:
        """An `AsyncAgent` sharing another agent's native client (and so its session)."""
        return cls._wrap(agent._client, agent.host, agent.session)

    async def run(
        self,
        handler: Callable[[_native.Message], Any] | Callable[[_native.Message, AsyncRunContext], Any],
        *,
        takeover: bool = False,
        timeout: float = 30.0,
        max_backoff: float = 10.0,
        handle_signals: bool = True,
        max_attempts: int = 3,
    ) -> None:
        """The supervised loop of `Agent.run`, in this event loop. A coroutine function handler is awaited;
        a plain function runs on the event loop's thread (keep it short, or make it `async`)."""
        loop = _runner.Loop(self, handler, _runner.AsyncRunContext, takeover, timeout, max_backoff, max_attempts)
        with _runner.signals_async(loop, handle_signals):
            await _runner.drive_async(loop.flow())

    async def __aenter__(self) -> AsyncAgent:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.close_session()
        except _native.PacerelleError:
            pass


__all__ = ["Agent", "AsyncAgent", "Handler", "Awaitable"]
