# Hand-written stubs of the native module `pacerelle._native` (pacerelle-py/src/*.rs). tests/test_stubs.py
# compares them with the module as built: every class, method, property, function and constant, each
# signature's parameters and the defaults pyo3 states, bases, @final and constructors. mypy --strict checks the
# package, the examples and a usage file against them (tests/test_docs_and_examples.py).

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from os import PathLike
from typing import Any, Generic, Literal, TypeVar, final, overload

DEFAULT_RELAY_URL: str
__version__: str

Time = datetime | float
_T = TypeVar("_T")

# ---------------------------------------------------------------- exceptions

class PacerelleError(Exception):
    """Every error of Pacerelle."""

    code: str | None
    """The relay's stable error code (see docs/relay-api.md), or the one it would give for a refusal decided
    here ('invalid_input') or a relay not reached ('unavailable'); None for a value that did not open."""
    status: int | None
    """The relay's HTTP status, when it answered."""
    details: Any
    """Extra facts the relay gave (for `agent_in_use`: the holder)."""
    transient: bool
    """True when the same call may succeed later."""

class RelayUnavailable(PacerelleError): ...
class AuthError(PacerelleError): ...

class AgentInUse(PacerelleError):
    host: str | None
    """Where the session holding the lease runs."""
    since: datetime | None
    """Since when it holds the lease."""

class LeaseLost(PacerelleError): ...

class NotApproved(PacerelleError):
    conclusion: Literal["denied", "expired", "cancelled", "relay_unavailable", "rejected", "pending", "answered"] | None
    """The gate's word (`Ruling.conclusion`)."""
    reason: str | None
    """The gate's sentence saying why (`Ruling.reason`)."""
    outcome: AnswerOutcome | None

class CryptoError(PacerelleError): ...
class InvalidInput(PacerelleError): ...
class QuestionIdConflict(InvalidInput): ...
class NotFound(PacerelleError): ...

class QuestionClosed(PacerelleError):
    state: Literal["answered", "expired", "cancelled"] | None
    answer: bool | list[str] | str | None
    answered_by_name: str | None

class NoDevice(PacerelleError): ...

class QuotaExceeded(PacerelleError):
    """`quota_exceeded`: the agent holds as many tasks not yet processed, or open questions, as the relay allows.
    Nothing was stored; not transient: retry once tasks are processed or questions answered, cancelled or expired.
    `details` is `{"quota": "max_pending_tasks" | "max_open_questions", "limit": int}`."""

class PairingError(PacerelleError): ...

class WebhookError(PacerelleError):
    reason: Literal["malformed_header", "outside_tolerance", "bad_signature", "malformed_body"] | None

class VerificationFailed(PacerelleError):
    """A record of an answer-log export does not verify, or the data is not an export."""

    record: int
    """The first record that does not verify, from 1; 0 when the data is not an export."""
    question_id: str | None
    """Its question."""
    reason: str
    """What failed ("the signature does not verify", …)."""

# ---------------------------------------------------------------- calls

@final
class Call(Generic[_T]):
    """A relay call, not yet started."""

    @overload
    def wait(self) -> _T:
        """Runs it with the GIL released; Ctrl-C raises KeyboardInterrupt."""
    @overload
    def wait(self, cancel: CancelToken | None) -> _T | None:
        """The same, but returns None as soon as `cancel` is cancelled."""
    def start(self, callback: Callable[[bool, Any], object]) -> TaskHandle:
        """Runs it in the background; `callback(ok, value)` is called from another thread."""

@final
class TaskHandle:
    def cancel(self) -> None: ...
    def done(self) -> bool: ...

@final
class CancelToken:
    def __init__(self) -> None: ...
    def cancel(self) -> None: ...
    @property
    def cancelled(self) -> bool: ...

# ---------------------------------------------------------------- the run loop

@final
class RunLoop:
    """The client's supervised loop, running in the background."""

    def next(self) -> Call[RunTask | RunLog | None]:
        """The next step; None once the loop has ended (raises the error that ended it, e.g. AgentInUse)."""

@final
class RunTask:
    """A task for the handler: answer it once with `done` or `fail`."""

    @property
    def message(self) -> Message: ...
    @property
    def attempt(self) -> int: ...
    def done(self, reply: str | None = None) -> None:
        """Sends `reply` (None or blank: no reply), then marks the task processed."""
    def fail(self, error: str) -> None:
        """Leaves the task unprocessed (set aside with an error reply after max_attempts failures)."""

@final
class RunLog:
    """A log line of the loop."""

    @property
    def level(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def message_id(self) -> str | None: ...

# ---------------------------------------------------------------- results

@final
class Message:
    """A task received by the agent, opened."""

    @property
    def message_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def device_id(self) -> str: ...
    @property
    def device_name(self) -> str: ...
    @property
    def sent_at(self) -> datetime: ...
    @property
    def redelivered(self) -> bool: ...
    @property
    def cursor(self) -> str: ...
    @property
    def user(self) -> str | None:
        """Partner mode: the `external_id` of the user whose device sent it; None when the owner sent it."""
    @property
    def session(self) -> str | None:
        """The session its sender addressed it to (sealed with it); None: any session."""

@final
class Rejected:
    """An item whose envelope did not open: not an instruction."""

    @property
    def message_id(self) -> str: ...
    @property
    def device_id(self) -> str: ...
    @property
    def reason(self) -> str: ...

@final
class Inbox:
    @property
    def messages(self) -> list[Message]: ...
    @property
    def rejected(self) -> list[Rejected]: ...
    @property
    def cursor(self) -> str: ...
    def __len__(self) -> int: ...

@final
class Checkpoint:
    @property
    def checkpoint_id(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def next_action(self) -> str: ...
    @property
    def message_ids(self) -> list[str]: ...
    @property
    def created_at(self) -> datetime: ...

@final
class Stored:
    @property
    def id(self) -> str: ...
    @property
    def cursor(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def created(self) -> bool: ...

@final
class Processed:
    @property
    def message_id(self) -> str: ...
    @property
    def processed_at(self) -> datetime: ...

@final
class SessionInfo:
    @property
    def session_id(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def since(self) -> datetime: ...
    @property
    def lease_expires_at(self) -> datetime: ...
    @property
    def name(self) -> str: ...
    @property
    def folder(self) -> str | None: ...

@final
class SessionSummary:
    @property
    def name(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def folder(self) -> str | None: ...
    @property
    def since(self) -> datetime: ...
    @property
    def last_heartbeat_at(self) -> datetime: ...
    @property
    def last_wait_at(self) -> datetime | None: ...
    @property
    def presence(self) -> Literal["offline", "connected", "listening", "busy", "waiting_confirmation"]: ...
    @property
    def in_progress(self) -> int: ...

@final
class LeaseHolder:
    @property
    def host(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def since(self) -> datetime: ...
    @property
    def last_heartbeat_at(self) -> datetime: ...

@final
class Status:
    @property
    def agent_id(self) -> str: ...
    @property
    def agent_name(self) -> str: ...
    @property
    def activity(self) -> Literal["asking", "working", "listening", "offline"]: ...
    @property
    def presence(self) -> Literal["offline", "connected", "listening", "busy", "waiting_confirmation"]: ...
    @property
    def open_questions(self) -> int: ...
    @property
    def session(self) -> LeaseHolder | None: ...
    @property
    def sessions(self) -> list[SessionSummary]: ...
    @property
    def listening(self) -> bool: ...
    @property
    def last_wait_at(self) -> datetime | None: ...
    @property
    def waiting(self) -> int: ...
    @property
    def in_progress(self) -> int: ...
    @property
    def processed(self) -> int: ...
    @property
    def last_checkpoint_at(self) -> datetime | None: ...
    @property
    def devices(self) -> int: ...
    @property
    def relay_time(self) -> datetime: ...

@final
class AgentInfo:
    @property
    def agent_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...

@final
class DeviceInfo:
    @property
    def device_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str | None: ...
    @property
    def role(self) -> Literal["owner", "user"]: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def revoked_at(self) -> datetime | None: ...

@final
class DeviceSelf:
    @property
    def device(self) -> DeviceInfo: ...
    @property
    def agent(self) -> AgentInfo: ...

@final
class PairingLink:
    @property
    def link(self) -> str: ...
    @property
    def pairing_id(self) -> str: ...
    @property
    def device_id(self) -> str: ...
    @property
    def expires_at(self) -> datetime: ...

@final
class Asked:
    @property
    def question_id(self) -> str: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def resumed(self) -> bool: ...

@final
class AnswerOutcome:
    """What the agent concludes about a question; only `approved` means yes."""

    @property
    def question_id(self) -> str: ...
    @property
    def state(self) -> Literal["pending", "answered", "expired", "cancelled"]: ...
    @property
    def approved(self) -> bool: ...
    @property
    def answer(self) -> bool | list[str] | str | None: ...
    @property
    def answer_text(self) -> str | None: ...
    @property
    def answered_by(self) -> str | None: ...
    @property
    def answered_by_name(self) -> str | None: ...
    @property
    def answered_at(self) -> datetime | None:
        """When the relay accepted the answer (the relay's clock)."""
    @property
    def device_answered_at(self) -> datetime | None:
        """When the person answered, by the answering device's clock (sealed in its answer)."""
    @property
    def expires_at(self) -> datetime: ...
    @property
    def rejected(self) -> str | None: ...
    @property
    def signed(self) -> bool:
        """True when the answer carried the device's signature and it verified with the key pinned in the
        roster."""
    @property
    def channel(self) -> Literal["phone", "host"] | None:
        """Where the answer was given: 'phone' (a device; `answered_by` names it) or 'host' (at the
        computer, through `answer_at_host`; `answered_by` is None). None without an answer."""
    @property
    def is_final(self) -> bool: ...

@final
class AuditEntry:
    @property
    def question_id(self) -> str: ...
    @property
    def kind(self) -> Literal["yes_no", "choice", "text"]: ...
    @property
    def question(self) -> str: ...
    @property
    def options(self) -> list[str]: ...
    @property
    def details(self) -> str | None: ...
    @property
    def state(self) -> Literal["pending", "answered", "expired", "cancelled"]: ...
    @property
    def approved(self) -> bool: ...
    @property
    def answer(self) -> str | None: ...
    @property
    def answered_by(self) -> str | None: ...
    @property
    def answered_by_name(self) -> str | None: ...
    @property
    def answered_at(self) -> datetime | None:
        """When the relay accepted the answer (the relay's clock)."""
    @property
    def device_answered_at(self) -> datetime | None:
        """When the person answered, by the answering device's clock."""
    @property
    def expires_at(self) -> datetime: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def closed_at(self) -> datetime | None: ...
    @property
    def rejected(self) -> str | None: ...
    @property
    def signed(self) -> bool:
        """True when the answer carried the device's signature and it verified with the key pinned in the
        roster: the answer is in the log anyone can verify."""
    @property
    def channel(self) -> Literal["phone", "host"] | None:
        """Where the answer was given: 'phone' or 'host' (at the computer; never signed)."""
    @property
    def user(self) -> str | None:
        """Partner mode: the `external_id` of the user the question was addressed to; None for the owner."""
    def to_json(self) -> str: ...

@final
class UserDevice:
    """One device of a user (Partner mode): a phone that opened the user's link, or a link not yet used."""

    @property
    def device_id(self) -> str: ...
    @property
    def name(self) -> str | None:
        """The name the device gave when it opened the link; None while the link is unused."""
    @property
    def paired(self) -> bool: ...
    @property
    def paired_at(self) -> datetime | None: ...
    @property
    def revoked_at(self) -> datetime | None: ...

@final
class User:
    """A user of the agent (Partner mode): your `external_id`, a name, and the user's devices."""

    @property
    def external_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def connected_at(self) -> datetime: ...
    @property
    def disconnected_at(self) -> datetime | None: ...
    @property
    def connected(self) -> bool:
        """True until the user is disconnected."""
    @property
    def devices(self) -> list[UserDevice]: ...
    @property
    def last_answer(self) -> AuditEntry | None:
        """The newest question addressed to the user that was answered, when the recent log holds one."""
    def to_json(self) -> str: ...

@final
class WebhookInfo:
    @property
    def url(self) -> str | None: ...
    @property
    def updated_at(self) -> datetime | None: ...

@final
class Delivery:
    @property
    def event_id(self) -> str: ...
    @property
    def event_type(self) -> str: ...
    @property
    def question_id(self) -> str: ...
    @property
    def state(self) -> Literal["pending", "delivered", "failed"]: ...
    @property
    def attempts(self) -> int: ...
    @property
    def last_status(self) -> int | None: ...
    @property
    def last_error(self) -> str | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def delivered_at(self) -> datetime | None: ...

@final
class WebhookEvent:
    @property
    def id(self) -> str: ...
    @property
    def type(self) -> Literal["question.answered", "question.expired", "question.cancelled"]: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def user_id(self) -> str | None: ...
    @property
    def question_id(self) -> str: ...
    @property
    def kind(self) -> Literal["yes_no", "choice", "text"]: ...
    @property
    def state(self) -> Literal["pending", "answered", "expired", "cancelled"]: ...
    @property
    def answered_by(self) -> str | None: ...
    @property
    def answered_by_name(self) -> str | None: ...
    @property
    def channel(self) -> Literal["phone", "host"] | None: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def closed_at(self) -> datetime | None: ...

@final
class DeviceCredentials:
    @staticmethod
    def from_secret_string(text: str) -> DeviceCredentials: ...
    def to_secret_string(self) -> str: ...
    @property
    def relay_url(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def agent_name(self) -> str: ...
    @property
    def device_id(self) -> str: ...
    @property
    def role(self) -> Literal["owner", "user"]: ...
    @property
    def user(self) -> str | None:
        """Partner mode: the `external_id` of the user this device belongs to; None for an owner's device."""
    @property
    def user_name(self) -> str | None: ...
    @property
    def accent_color(self) -> str | None:
        """Partner mode: the accent colour (`#rrggbb`) the offer sealed."""
    @property
    def icon(self) -> str | None:
        """Partner mode: the agent's icon (a data URL) the offer sealed."""

@final
class Question:
    """A question as a device sees it."""

    @property
    def question_id(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def kind(self) -> Literal["yes_no", "choice", "text"]: ...
    @property
    def options(self) -> list[str]: ...
    @property
    def multiple(self) -> bool: ...
    @property
    def details(self) -> str | None: ...
    @property
    def state(self) -> Literal["pending", "answered", "expired", "cancelled"]: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def answered_by(self) -> str | None: ...
    @property
    def answered_by_name(self) -> str | None: ...
    @property
    def answer(self) -> bool | list[str] | str | None:
        """The answer that counts (for display), read from its copy; None while unanswered or without one."""
    @property
    def answered_at(self) -> datetime | None: ...
    @property
    def channel(self) -> Literal["phone", "host"] | None:
        """'phone' (a device answered) or 'host' (answered at the computer; no `answered_by`)."""
    @property
    def created_at(self) -> datetime: ...
    @property
    def is_open(self) -> bool: ...

@final
class QuestionList:
    @property
    def questions(self) -> list[Question]: ...
    @property
    def rejected(self) -> list[Rejected]: ...
    def __len__(self) -> int: ...

@final
class ConversationItem:
    @property
    def kind(self) -> Literal["message", "reply", "question", "notification"]: ...
    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def source_message_id(self) -> str | None: ...
    @property
    def state(self) -> Literal["sent", "delivered", "processed"] | None: ...
    @property
    def question(self) -> Question | None: ...
    @property
    def title(self) -> str | None: ...
    @property
    def level(self) -> Literal["info", "warning", "error", "success"] | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def cursor(self) -> str: ...

@final
class ConversationPage:
    @property
    def items(self) -> list[ConversationItem]: ...
    @property
    def rejected(self) -> list[Rejected]: ...
    @property
    def cursor(self) -> str: ...
    def __len__(self) -> int: ...

# ---------------------------------------------------------------- policy

@final
class Evaluation:
    @property
    def decision(self) -> Literal["allow", "ask", "deny"]: ...
    @property
    def reason(self) -> str: ...
    @property
    def approvals(self) -> int:
        """For 'ask': how many distinct owner devices must approve (the rule's `approvals`; 1 by default)."""

@final
class Policy:
    """An execution policy (TOML): per call 'allow', 'ask' or 'deny'; the first matching rule decides."""

    @staticmethod
    def parse(text: str) -> Policy: ...
    @staticmethod
    def load(path: str | PathLike[str]) -> Policy: ...
    @staticmethod
    def ask_everything() -> Policy: ...
    def evaluate(self, tool: str, input: Any = None) -> Evaluation: ...

@final
class Ruling:
    """What the approval gate concluded about one call; only `lets_run` lets it run."""

    @property
    def conclusion(
        self,
    ) -> Literal[
        "allowed", "approved", "granted", "answered", "denied", "expired", "cancelled", "rejected", "pending",
        "relay_unavailable", "error",
    ]: ...
    @property
    def reason(self) -> str: ...
    @property
    def outcome(self) -> AnswerOutcome | None: ...
    @property
    def error(self) -> PacerelleError | None: ...
    @property
    def lets_run(self) -> bool: ...

# ---------------------------------------------------------------- clients

@final
class AgentClient:
    def __init__(self, relay_url: str, agent_id: str, token: str) -> None: ...
    @staticmethod
    def register(relay_url: str, name: str, registration_secret: str | None = None) -> Call[AgentClient]: ...
    @staticmethod
    def reply_id_for(message_id: str, text: str | None = None) -> str: ...
    @staticmethod
    def from_environ(environ: Mapping[str, str], relay_url: str | None = None) -> AgentClient:
        """The agent found in the variables, else agent.json (the client's one rule); the token stays native."""
    def run_loop(
        self,
        host: str,
        cancel: CancelToken,
        *,
        takeover: bool = False,
        timeout: float = 30.0,
        max_backoff: float = 10.0,
        max_attempts: int = 3,
        session: str | None = None,
    ) -> RunLoop:
        """Starts the client's supervised loop in the background; cancelling `cancel` stops it."""
    @property
    def agent_id(self) -> str: ...
    @property
    def token(self) -> str: ...
    @property
    def relay_url(self) -> str: ...
    @property
    def home(self) -> str | None:
        """The agent's home (`PACERELLE_HOME` when the client was made, else the config folder + `pacerelle`),
        where `approve` keeps grants (`grants/<agentId>.json`); None when there is none (no grants)."""
    def info(self) -> Call[AgentInfo]: ...
    def create_pairing(
        self, label: str | None = None, ttl: float = 600.0, role: str = "owner", public_url: str | None = None
    ) -> Call[PairingLink]: ...
    def devices(self) -> Call[list[DeviceInfo]]: ...
    def revoke_device(self, device_id: str) -> Call[DeviceInfo]: ...
    def require_signed(self, required: bool) -> Call[datetime | None]: ...
    def connect_user(
        self,
        external_id: str,
        name: str,
        *,
        accent_color: str | None = None,
        icon: str | None = None,
        ttl: float | None = None,
        public_url: str | None = None,
    ) -> Call[PairingLink]: ...
    def list_users(self) -> Call[list[User]]: ...
    def get_user(self, external_id: str) -> Call[User]: ...
    def disconnect_user(self, external_id: str) -> Call[User]: ...
    def open_session(
        self, host: str, takeover: bool = False, name: str | None = None, folder: str | None = None
    ) -> Call[SessionInfo]: ...
    def heartbeat(self) -> Call[SessionInfo]: ...
    def close_session(self) -> Call[None]: ...
    def wait_for_messages(self, cursor: str | None = None, timeout: float = 30.0) -> Call[Inbox]: ...
    def reply(self, source_message_id: str, text: str, reply_id: str | None = None) -> Call[Stored]: ...
    def mark_processed(self, message_id: str) -> Call[Processed]: ...
    def save_checkpoint(self, summary: str, next_action: str, message_ids: Sequence[str] | None = None) -> Call[Checkpoint]: ...
    def get_checkpoints(self, limit: int = 10) -> Call[list[Checkpoint]]: ...
    def status(self) -> Call[Status]: ...
    def ask_user(
        self,
        question: str,
        *,
        kind: str | None = None,
        options: Sequence[str] | None = None,
        multiple: bool = False,
        details: str | None = None,
        expires_in: float = 600.0,
        question_id: str | None = None,
        answered_at_host: bool = False,
        user: str | None = None,
        approvals: int = 1,
    ) -> Call[Asked]: ...
    def wait_for_answer(self, question: str | Asked, timeout: float | None = 30.0) -> Call[AnswerOutcome]: ...
    def ask(
        self,
        question: str,
        *,
        kind: str | None = None,
        options: Sequence[str] | None = None,
        multiple: bool = False,
        details: str | None = None,
        expires_in: float = 600.0,
        question_id: str | None = None,
        timeout: float | None = None,
        answered_at_host: bool = False,
        user: str | None = None,
        approvals: int = 1,
    ) -> Call[AnswerOutcome]: ...
    def approve(
        self,
        question: str,
        *,
        details: str | None = None,
        expires_in: float = 600.0,
        timeout: float | None = None,
        evaluation: Evaluation | None = None,
        user: str | None = None,
        policy: Policy | None = None,
        tool: str | None = None,
        input: Any = None,
        approvals: int = 1,
    ) -> Call[Ruling]:
        """The approval gate: `policy` decides the call of `tool` with `input` (or `evaluation`, a word already
        given); for 'ask', a live grant in the agent's home covering the call in the current directory lets it
        run ('granted'), else the question (offering the policy's grants, keeping one given with the yes) is
        asked of `approvals` distinct devices (raised by the rule's). Never raises for a relay error."""
    def notify(
        self, text: str, title: str | None = None, level: str = "info", user: str | None = None
    ) -> Call[Stored]: ...
    def answer_at_host(self, question: str | Asked, answer: bool | list[str] | str) -> Call[AnswerOutcome]: ...
    def cancel_question(self, question_id: str) -> Call[AnswerOutcome]: ...
    def answer_log(
        self,
        *,
        state: str | None = None,
        since: Time | None = None,
        until: Time | None = None,
        limit: int | None = None,
        search: str | None = None,
        user: str | None = None,
    ) -> Call[list[AuditEntry]]: ...
    def export_answer_log(
        self,
        *,
        state: str | None = None,
        since: Time | None = None,
        until: Time | None = None,
        limit: int | None = None,
        user: str | None = None,
    ) -> Call[str]: ...
    def set_webhook(self, url: str, secret: str) -> Call[WebhookInfo]: ...
    def webhook(self) -> Call[WebhookInfo]: ...
    def clear_webhook(self) -> Call[WebhookInfo]: ...
    def webhook_deliveries(self, limit: int = 20) -> Call[list[Delivery]]: ...

@final
class DeviceClient:
    @staticmethod
    def join(link: str, name: str) -> Call[DeviceClient]: ...
    @staticmethod
    def from_credentials(credentials: DeviceCredentials | str) -> DeviceClient: ...
    @property
    def credentials(self) -> DeviceCredentials: ...
    @property
    def signing_fingerprint(self) -> str | None: ...
    def send(self, text: str, message_id: str | None = None, session: str | None = None) -> Call[Stored]: ...
    def conversation(self, cursor: str | None = None, timeout: float = 0.0) -> Call[ConversationPage]: ...
    def questions(self, state: str | None = None) -> Call[QuestionList]: ...
    def answer(self, question_id: str, answer: bool | list[str] | str) -> Call[Question]: ...
    def status(self) -> Call[Status]: ...
    def info(self) -> Call[DeviceSelf]: ...
    def leave(self) -> Call[DeviceInfo]: ...

# ---------------------------------------------------------------- webhooks

def verify_webhook(
    secret: str | bytes,
    headers: Mapping[str, str] | str,
    body: bytes | str,
    tolerance: float = 300.0,
    now: Time | None = None,
) -> WebhookEvent:
    """Verifies a webhook request from the relay; raises WebhookError otherwise."""

def verify_answer_log(data: bytes) -> int:
    """Verifies every record of an answer-log export; raises VerificationFailed naming the first that does
    not."""

def sign_webhook(secret: str | bytes, body: bytes | str, timestamp: Time | None = None) -> str:
    """The signature header's value the relay would send (for receivers' tests)."""
