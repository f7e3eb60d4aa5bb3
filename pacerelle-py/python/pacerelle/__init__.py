"""Pacerelle for Python: an end-to-end encrypted relay between an AI agent and its person's phone.

```python
import pacerelle

agent = pacerelle.Agent.from_env()   # PACERELLE_RELAY_URL, PACERELLE_AGENT_ID, PACERELLE_AGENT_TOKEN

@agent.require_approval("Delete {path}?")
def delete(path: str) -> None: ...

agent.run(lambda message: f"echo: {message.text}")
```

`Agent` blocks (releasing the GIL; Ctrl-C interrupts a wait), `AsyncAgent` has the same methods as
coroutines. Results are typed objects; errors are `PacerelleError` subclasses. Everything sent is sealed
end to end by the Rust core underneath (`pacerelle._native`).
"""

# No `from __future__ import annotations` here: it would leave `annotations` among the package's public
# names (tests/test_public_names.py holds them to `__all__`).

from ._agent import Agent, AsyncAgent
from ._approval import Approval
from ._audit import verify_answer_log
from ._device import AsyncDevice, Device
from ._native import (
    DEFAULT_RELAY_URL,
    AgentInfo,
    AgentInUse,
    AnswerOutcome,
    Asked,
    AuditEntry,
    AuthError,
    Checkpoint,
    ConversationItem,
    ConversationPage,
    CryptoError,
    Delivery,
    DeviceCredentials,
    DeviceInfo,
    DeviceSelf,
    Evaluation,
    Inbox,
    InvalidInput,
    LeaseHolder,
    LeaseLost,
    Message,
    NoDevice,
    NotApproved,
    NotFound,
    PacerelleError,
    PairingError,
    PairingLink,
    Policy,
    Processed,
    Question,
    QuestionClosed,
    QuestionIdConflict,
    QuestionList,
    QuotaExceeded,
    Rejected,
    RelayUnavailable,
    Ruling,
    SessionInfo,
    SessionSummary,
    Status,
    Stored,
    User,
    UserDevice,
    VerificationFailed,
    WebhookError,
    WebhookEvent,
    WebhookInfo,
    __version__,
    sign_webhook,
    verify_webhook,
)
from ._runner import AsyncRunContext, RunContext

__all__ = [
    "DEFAULT_RELAY_URL",
    "Agent",
    "AgentInUse",
    "AgentInfo",
    "AnswerOutcome",
    "Approval",
    "Asked",
    "AsyncAgent",
    "AsyncDevice",
    "AsyncRunContext",
    "AuditEntry",
    "AuthError",
    "Checkpoint",
    "ConversationItem",
    "ConversationPage",
    "CryptoError",
    "Delivery",
    "Device",
    "DeviceCredentials",
    "DeviceInfo",
    "DeviceSelf",
    "Evaluation",
    "Inbox",
    "InvalidInput",
    "LeaseHolder",
    "LeaseLost",
    "Message",
    "NoDevice",
    "NotApproved",
    "NotFound",
    "PacerelleError",
    "PairingError",
    "PairingLink",
    "Policy",
    "Processed",
    "Question",
    "QuestionClosed",
    "QuestionIdConflict",
    "QuestionList",
    "QuotaExceeded",
    "Rejected",
    "RelayUnavailable",
    "Ruling",
    "RunContext",
    "SessionInfo",
    "SessionSummary",
    "Status",
    "Stored",
    "User",
    "UserDevice",
    "VerificationFailed",
    "WebhookError",
    "WebhookEvent",
    "WebhookInfo",
    "__version__",
    "sign_webhook",
    "verify_answer_log",
    "verify_webhook",
]
