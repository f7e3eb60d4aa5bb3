"""`Agent.run` and `AsyncAgent.run` over the client's supervised loop (`pacerelle_client::Runner`).

The loop itself runs in Rust: the lease, the waits, the backoff across relay restarts, replying with the
reply id derived from the task, marking a task processed only after its handler returned, and setting aside a
task that keeps failing (or whose reply cannot be sent) with an error reply. This module only calls the
Python handler for each task the loop hands over (`RunTask`), logs the loop's lines (`RunLog`) to the
`pacerelle` logger, and turns SIGINT/SIGTERM into a stop. It is written once, as a flow (`_twin`): `Agent.run`
drives it blocking, `AsyncAgent.run` in the running event loop; only the signal handling differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from . import _native
from ._twin import Awaiting, Blocking, Flow, call, drive, drive_async

if TYPE_CHECKING:
    from ._agent import Agent, AsyncAgent

logger = logging.getLogger("pacerelle")

DEFAULT_MAX_ATTEMPTS = 3
"""How many times a handler may fail on one task before the task is set aside with an error reply."""

def _wants_context(handler: Callable[..., Any]) -> bool:
    """True when the handler takes a second positional argument (the context)."""
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _reply_text(message: _native.Message, result: Any) -> str | None:
    """The handler's reply: a `str` (the runner sends none for a blank one), else None."""
    if result is None or isinstance(result, str):
        return result
    logger.warning(
        "the handler returned a %s for task %s; only a str is sent as a reply",
        type(result).__name__,
        message.message_id,
    )
    return None


class _Context:
    """What a handler gets as its second argument: the agent and the task at hand (written once)."""

    agent: Any

    def __init__(self, agent: Any, message: _native.Message) -> None:
        self.agent = agent
        self.message = message
        self.logger = logger

    @call
    def save_checkpoint(
        self, summary: str, next_action: str, message_ids: Sequence[str] | None = None
    ) -> _native.Call[_native.Checkpoint]:
        """Saves a checkpoint about this task (or about `message_ids`)."""
        ids = [self.message.message_id] if message_ids is None else list(message_ids)
        return self.agent.native.save_checkpoint(summary, next_action, ids)  # type: ignore[no-any-return]

    @call
    def reply(self, text: str) -> _native.Call[_native.Stored]:
        """Sends an intermediate reply to this task (the handler's return value is the final one)."""
        return self.agent.native.reply(self.message.message_id, text, None)  # type: ignore[no-any-return]

    def stop(self) -> None:
        """Stops the loop once this task is done."""
        self.agent.stop()


class RunContext(_Context, Blocking):
    """What a handler gets as its second argument in `Agent.run`: the agent and the task at hand."""

    agent: Agent


class AsyncRunContext(_Context, Awaiting):
    """What a handler gets as its second argument in `AsyncAgent.run`."""

    agent: AsyncAgent


def _describe(error: BaseException) -> str:
    """The handler's exception with its traceback, for the loop's log line."""
    return "".join(traceback.format_exception(error)).rstrip()


def _log(step: _native.RunLog, agent: Agent | AsyncAgent) -> None:
    if step.level == logging.INFO and step.text.startswith("listening"):
        # The one line that tells the user it works, with what it listens as and where.
        detail = step.text[len("listening") :].strip()
        logger.info(
            "listening as %s on %s%s", agent.agent_id, agent.relay_url, f" {detail}" if detail else ""
        )
        return
    logger.log(step.level, "%s", step.text)


class Loop:
    """One run of the loop for `Agent.run` or `AsyncAgent.run`."""

    def __init__(
        self,
        agent: Agent | AsyncAgent,
        handler: Callable[..., Any],
        context: type[_Context],
        takeover: bool,
        timeout: float,
        max_backoff: float,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self.agent = agent
        self.handler = handler
        self.context = context
        self.with_context = _wants_context(handler)
        self.takeover = takeover
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.max_attempts = max_attempts
        self._token = _native.CancelToken()
        self.signals = 0

    def stop(self) -> None:
        """Stops the loop after the current task (callable from any thread)."""
        self._token.cancel()

    def flow(self) -> Flow[None]:
        """Hands each task to the handler until the loop ends. On an interruption (KeyboardInterrupt, a
        cancelled task) the loop is stopped and followed to its end, which releases the lease, before the
        interruption goes on: a process that exits on Ctrl-C does not leave the lease held."""
        agent = self.agent
        if agent._runner is not None:
            raise RuntimeError("this agent is already running a loop")
        agent._runner = self
        ended = False
        run_loop: _native.RunLoop | None = None
        try:
            run_loop = agent.native.run_loop(
                agent.host,
                self._token,
                takeover=self.takeover,
                session=agent.session,
                timeout=self.timeout,
                max_backoff=self.max_backoff,
                max_attempts=self.max_attempts,
            )
            while (step := (yield run_loop.next())) is not None:
                if isinstance(step, _native.RunLog):
                    _log(step, agent)
                else:
                    yield from self._handle(step)
            ended = True
        finally:
            agent._runner = None
            if not ended:
                self._token.cancel()
                try:
                    if run_loop is None:
                        yield agent.native.close_session()
                    else:
                        # The loop stops before any other task and releases the lease as it ends.
                        while (step := (yield run_loop.next())) is not None:
                            if isinstance(step, _native.RunLog):
                                _log(step, agent)
                            else:
                                step.fail("the loop is stopping")
                except _native.PacerelleError as e:
                    logger.debug("could not release the lease: %s", e)

    def _handle(self, task: _native.RunTask) -> Flow[None]:
        message = task.message
        logger.debug("task %s%s", message.message_id, " (redelivered)" if message.redelivered else "")
        args: tuple[Any, ...] = (message, self.context(self.agent, message)) if self.with_context else (message,)
        try:
            result = self.handler(*args)
            if inspect.isawaitable(result):
                result = yield result
        except Exception as e:
            task.fail(_describe(e))
            return
        except BaseException:
            task.fail("the handler was interrupted")
            raise
        task.done(_reply_text(message, result))

    def on_signal(self, sig: signal.Signals) -> bool:
        """Counts a signal: the first stops the loop after the current task; True for a second SIGINT,
        which interrupts it."""
        self.signals += 1
        if self.signals > 1 and sig == signal.SIGINT:
            return True
        logger.info("received %s; stopping after the current task", sig.name)
        self.stop()
        return False


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def signals(loop: Loop, enabled: bool) -> Iterator[None]:
    """`Agent.run`: SIGINT/SIGTERM stop the loop; a second SIGINT raises KeyboardInterrupt (which interrupts a
    wait or the handler)."""

    def handle(signum: int, frame: Any) -> None:
        if loop.on_signal(signal.Signals(signum)):
            raise KeyboardInterrupt

    previous: dict[int, Any] = {}
    if enabled and _in_main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handle)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def signals_async(loop: Loop, enabled: bool) -> Iterator[None]:
    """`AsyncAgent.run`: SIGINT/SIGTERM stop the loop; a second SIGINT cancels the event loop's tasks."""
    events = asyncio.get_running_loop()

    def handle(sig: signal.Signals) -> None:
        if loop.on_signal(sig):
            for task in asyncio.all_tasks(events):
                task.cancel()

    installed: list[signal.Signals] = []
    if enabled and _in_main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                events.add_signal_handler(sig, handle, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError):
                pass
    try:
        yield
    finally:
        for sig in installed:
            events.remove_signal_handler(sig)


__all__ = ["AsyncRunContext", "Loop", "RunContext", "drive", "drive_async", "signals", "signals_async"]
