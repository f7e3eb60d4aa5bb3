"""Approvals: ask the owner before a function runs, run it only on an authenticated yes.

The gate itself is the Rust one (`pacerelle_client::gate`, through `AgentClient.approve`): the policy and the
gate's own files, the grants of the CLI's hook (checked before asking, offered with the question, kept from a
yes), several approvals, asking within the time limit, withdrawing a question still open when it ends (or when
the wait is interrupted), and one conclusion. This module maps that conclusion to Python: no answer is a no — a
question that is denied, expires, is cancelled, cannot be trusted, or cannot be asked because the relay is
unreachable raises `NotApproved` with that conclusion (the word) and the gate's reason (the sentence), and the
function never runs.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, cast

from . import _bridge, _native

if TYPE_CHECKING:
    from types import TracebackType

F = TypeVar("F", bound=Callable[..., Any])

#: What `question` may be: a text (with `{argument}` placeholders filled from the call), or a function of
#: the call's arguments that returns the text.
QuestionText = Union[str, Callable[..., str]]
#: Whom a decorated call asks (Partner mode): a user's external id, or a function of the call's arguments
#: that returns it (None: the owner).
UserOf = Union[str, Callable[..., Union[str, None]], None]
PolicyLike = Union[_native.Policy, str, "os.PathLike[str]", None]


Conclusion = Literal["denied", "expired", "cancelled", "relay_unavailable", "rejected", "pending", "answered"]


def not_approved(
    conclusion: Conclusion, reason: str, outcome: _native.AnswerOutcome | None = None
) -> _native.NotApproved:
    """A `NotApproved` with its `conclusion` (the word), `reason` (the sentence) and `outcome` set."""
    err = _native.NotApproved(f"not approved: {reason}")
    err.conclusion = conclusion
    err.reason = reason
    err.outcome = outcome
    return err


def load_policy(policy: PolicyLike) -> _native.Policy | None:
    if policy is None or isinstance(policy, _native.Policy):
        return policy
    return _native.Policy.load(os.fspath(policy))


def conclude(ruling: _native.Ruling) -> _native.AnswerOutcome | None:
    """The outcome when the gate lets the call run (None when the policy allowed it, or a grant covered it,
    without asking); raises `NotApproved` otherwise, or the error that stopped the gate (NoDevice, AuthError,
    InvalidInput when fewer devices can answer than the approvals needed…)."""
    if ruling.lets_run:
        return ruling.outcome
    if ruling.conclusion == "error" and ruling.error is not None:
        raise ruling.error
    err = not_approved(cast(Conclusion, ruling.conclusion), ruling.reason, ruling.outcome)
    if ruling.error is not None:
        raise err from ruling.error
    raise err


class Request:
    """One approval to obtain: the question and how long to wait, with the policy that decides the call of
    `tool` with `input` first (if any), and how many devices must approve."""

    def __init__(
        self,
        question: str,
        *,
        details: str | None,
        expires_in: float,
        timeout: float | None,
        policy: _native.Policy | None = None,
        tool: str | None = None,
        input: dict[str, Any] | None = None,
        user: str | None = None,
        approvals: int = 1,
    ) -> None:
        self.question = question
        self.user = user
        self.details = details
        self.expires_in = expires_in
        self.timeout = timeout
        self.policy = policy
        self.tool = tool if policy is not None else None
        self.input = input if policy is not None else None
        self.approvals = approvals

    def _call(self, client: _native.AgentClient) -> _native.Call[_native.Ruling]:
        return client.approve(
            self.question,
            details=self.details,
            expires_in=self.expires_in,
            timeout=self.timeout,
            user=self.user,
            policy=self.policy,
            tool=self.tool,
            input=self.input,
            approvals=self.approvals,
        )

    def approve(self, client: _native.AgentClient) -> _native.AnswerOutcome | None:
        """Blocks until approved (returns the outcome, or None when the policy allowed the call)."""
        return conclude(self._call(client).wait())

    async def approve_async(self, client: _native.AgentClient) -> _native.AnswerOutcome | None:
        """`approve` for asyncio."""
        return conclude(await _bridge.run(self._call(client)))


class Approval:
    """The context-manager form: `with agent.approval("Deploy?") as outcome:` (or `async with`).

    Entering asks and waits; the block runs only on an authenticated yes, else `NotApproved` is raised.
    `outcome` is the AnswerOutcome, or None when a policy allowed the call without asking.
    """

    def __init__(self, client: _native.AgentClient, request: Request) -> None:
        self._client = client
        self._request = request
        self.outcome: _native.AnswerOutcome | None = None

    def __enter__(self) -> _native.AnswerOutcome | None:
        self.outcome = self._request.approve(self._client)
        return self.outcome

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def __aenter__(self) -> _native.AnswerOutcome | None:
        self.outcome = await self._request.approve_async(self._client)
        return self.outcome

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


def _describe_call(name: str, bound: inspect.BoundArguments) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in bound.arguments.items())
    text = f"Allow {name}({args})?"
    return text if len(text) <= 500 else text[:497] + "…?"


def decorator(
    client: _native.AgentClient,
    question: QuestionText | None,
    *,
    details: str | None,
    expires_in: float,
    timeout: float | None,
    policy: PolicyLike,
    tool: str | None,
    user: UserOf = None,
    approvals: int = 1,
) -> Callable[[F], F]:
    """Builds the `require_approval` decorator for a native client."""
    loaded = load_policy(policy)

    def wrap(func: F) -> F:
        signature = inspect.signature(func)
        name: str = tool or str(getattr(func, "__name__", "function"))

        def request_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Request:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            if question is None:
                text = _describe_call(name, bound)
            elif callable(question):
                text = question(*args, **kwargs)
            else:
                text = question.format(**bound.arguments)
            asked = user(*args, **kwargs) if callable(user) else user
            # With a policy, the native gate decides the call of `name` with the arguments as input (and adds
            # the rule's reason under the question), in the current directory for grants.
            return Request(
                text,
                details=details,
                expires_in=expires_in,
                timeout=timeout,
                policy=loaded,
                tool=name,
                input=dict(bound.arguments),
                user=asked,
                approvals=approvals,
            )

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                await request_for(args, kwargs).approve_async(client)
                return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            request_for(args, kwargs).approve(client)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return wrap


__all__ = ["Approval", "Request", "conclude", "decorator", "not_approved"]
