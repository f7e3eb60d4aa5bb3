"""Approvals: ask the owner before a function runs, run it only on an authenticated yes.

No answer is a no: a question that is denied, expires, is cancelled, or cannot be asked because the relay is
unreachable raises `NotApproved` with that reason, and the function never runs.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union

from . import _bridge, _native

if TYPE_CHECKING:
    from types import TracebackType

F = TypeVar("F", bound=Callable[..., Any])

#: What `question` may be: a text (with `{argument}` placeholders filled from the call), or a function of
#: the call's arguments that returns the text.
QuestionText = Union[str, Callable[..., str]]
PolicyLike = Union[_native.Policy, str, "os.PathLike[str]", None]


Reason = Literal["denied", "expired", "cancelled", "relay_unavailable", "rejected"]


def not_approved(reason: Reason, message: str, outcome: _native.AnswerOutcome | None = None) -> _native.NotApproved:
    """A `NotApproved` with its `reason` and `outcome` set."""
    err = _native.NotApproved(message)
    err.reason = reason
    err.outcome = outcome
    return err


def load_policy(policy: PolicyLike) -> _native.Policy | None:
    if policy is None or isinstance(policy, _native.Policy):
        return policy
    return _native.Policy.load(os.fspath(policy))


def verdict(outcome: _native.AnswerOutcome) -> _native.AnswerOutcome:
    """Returns the outcome if it is an authenticated, timely yes; raises `NotApproved` otherwise."""
    if outcome.approved:
        return outcome
    if outcome.rejected is not None:
        raise not_approved("rejected", f"not approved: an answer was rejected ({outcome.rejected})", outcome)
    if outcome.state == "answered":
        who = f" by {outcome.answered_by_name}" if outcome.answered_by_name else ""
        raise not_approved("denied", f"not approved: denied{who}", outcome)
    if outcome.state == "cancelled":
        raise not_approved("cancelled", "not approved: the question was cancelled", outcome)
    # Expired, or still pending when our own time limit ran out: no answer is a no.
    raise not_approved("expired", "not approved: no answer in time", outcome)


class Request:
    """One approval to obtain: the question and how long to wait, after the policy (if any) had its say."""

    def __init__(
        self,
        question: str,
        *,
        details: str | None,
        expires_in: float,
        timeout: float | None,
        evaluation: _native.Evaluation | None = None,
    ) -> None:
        self.question = question
        self.details = details
        self.expires_in = expires_in
        self.timeout = timeout
        self.evaluation = evaluation

    def _settled_by_policy(self) -> bool:
        """True when the policy allows the call; raises `NotApproved` when it denies it."""
        if self.evaluation is None:
            return False
        if self.evaluation.decision == "allow":
            return True
        if self.evaluation.decision == "deny":
            raise not_approved("denied", f"not approved: denied by the policy ({self.evaluation.reason})")
        return False

    def _ask(self, client: _native.AgentClient) -> _native.Call[_native.AnswerOutcome]:
        return client.ask(self.question, kind="yes_no", details=self.details, expires_in=self.expires_in, timeout=self.timeout)

    def _after(self, client: _native.AgentClient, outcome: _native.AnswerOutcome) -> _native.AnswerOutcome:
        if not outcome.is_final:
            # Our own time limit ran out first: withdraw the question so that a late yes approves nothing.
            try:
                outcome = client.cancel_question(outcome.question_id).wait()
            except _native.PacerelleError:
                pass
        return verdict(outcome)

    def approve(self, client: _native.AgentClient) -> _native.AnswerOutcome | None:
        """Blocks until approved (returns the outcome, or None when the policy allowed the call)."""
        if self._settled_by_policy():
            return None
        try:
            outcome = self._ask(client).wait()
        except _native.RelayUnavailable as e:
            raise not_approved("relay_unavailable", f"not approved: the relay is unreachable ({e})") from e
        return self._after(client, outcome)

    async def approve_async(self, client: _native.AgentClient) -> _native.AnswerOutcome | None:
        """`approve` for asyncio."""
        if self._settled_by_policy():
            return None
        try:
            outcome = await _bridge.run(self._ask(client))
        except _native.RelayUnavailable as e:
            raise not_approved("relay_unavailable", f"not approved: the relay is unreachable ({e})") from e
        if not outcome.is_final:
            try:
                outcome = await _bridge.run(client.cancel_question(outcome.question_id))
            except _native.PacerelleError:
                pass
        return verdict(outcome)


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
            evaluation = loaded.evaluate(name, dict(bound.arguments)) if loaded is not None else None
            more = details
            if evaluation is not None and evaluation.decision == "ask":
                more = f"{details}\n\n{evaluation.reason}" if details else evaluation.reason
            return Request(text, details=more, expires_in=expires_in, timeout=timeout, evaluation=evaluation)

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


__all__ = ["Approval", "Request", "decorator", "not_approved", "verdict"]
