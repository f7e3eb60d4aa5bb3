"""`Agent.run` and `AsyncAgent.run` over the client's supervised loop (`pacerelle_client::Runner`).

The loop itself runs in Rust: the lease, the waits, the backoff across relay restarts, replying with the
reply id derived from the task, marking a task processed only after its handler returned, and setting aside a
task that keeps failing (or whose reply cannot be sent) with an error reply. This module only calls the
Python handler for each task the loop hands over (`RunTask`), logs the loop's lines (`RunLog`) to the
`pacerelle` logger, and turns SIGINT/SIGTERM into a stop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import _bridge, _native

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
    if isinstance(result, str):
        if result.strip():
            return result
        return None
    if result is not None:
        logger.warning(
            "the handler returned a %s for task %s; only a str is sent as a reply",
            type(result).__name__,
            message.message_id,
        )
    return None


class RunContext:
    """What a handler gets as its second argument in `Agent.run`: the agent and the task at hand."""

    def __init__(self, agent: Agent, message: _native.Message) -> None:
        self.agent = agent
        self.message = message
        self.logger = logger

    def save_checkpoint(self, summary: str, next_action: str, message_ids: Sequence[str] | None = None) -> _native.Checkpoint:
        """Saves a checkpoint about this task (or about `message_ids`)."""
        ids = [self.message.message_id] if message_ids is None else list(message_ids)
        return self.agent.save_checkpoint(summary, next_action, ids)

    def reply(self, text: str) -> _native.Stored:
        """Sends an intermediate reply to this task (the handler's return value is the final one)."""
        return self.agent.reply(self.message.message_id, text)

    def stop(self) -> None:
        """Stops the loop once this task is done."""
        self.agent.stop()


class AsyncRunContext:
    """What a handler gets as its second argument in `AsyncAgent.run`."""

    def __init__(self, agent: AsyncAgent, message: _native.Message) -> None:
        self.agent = agent
        self.message = message
        self.logger = logger

    async def save_checkpoint(
        self, summary: str, next_action: str, message_ids: Sequence[str] | None = None
    ) -> _native.Checkpoint:
        """Saves a checkpoint about this task (or about `message_ids`)."""
        ids = [self.message.message_id] if message_ids is None else list(message_ids)
        return await self.agent.save_checkpoint(summary, next_action, ids)

    async def reply(self, text: str) -> _native.Stored:
        """Sends an intermediate reply to this task."""
        return await self.agent.reply(self.message.message_id, text)

    def stop(self) -> None:
        """Stops the loop once this task is done."""
        self.agent.stop()


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


class SyncRunner:
    def __init__(
        self,
        agent: Agent,
        handler: Callable[..., Any],
        *,
        takeover: bool,
        timeout: float,
        max_backoff: float,
        handle_signals: bool,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self.agent = agent
        self.native = agent.native
        self.handler = handler
        self.with_context = _wants_context(handler)
        self.takeover = takeover
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.max_attempts = max_attempts
        self.handle_signals = handle_signals
        self._token = _native.CancelToken()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals = 0

    def stop(self) -> None:
        self._token.cancel()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        if self._signals > 1 and signum == signal.SIGINT:
            raise KeyboardInterrupt
        logger.info("received %s; stopping after the current task", signal.Signals(signum).name)
        self.stop()

    def run(self) -> None:
        if self.agent._runner is not None:
            raise RuntimeError("this agent is already running a loop")
        previous: dict[int, Any] = {}
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self._on_signal)
        self.agent._runner = self
        ended = False
        try:
            run_loop = self.native.run_loop(
                self.agent.host,
                self._token,
                takeover=self.takeover,
                timeout=self.timeout,
                max_backoff=self.max_backoff,
                max_attempts=self.max_attempts,
            )
            while (step := run_loop.next().wait()) is not None:
                if isinstance(step, _native.RunLog):
                    _log(step, self.agent)
                else:
                    self._handle(step)
            ended = True
        finally:
            self.agent._runner = None
            for signum, old in previous.items():
                signal.signal(signum, old)
            if self._loop is not None:
                self._loop.close()
            if not ended:
                # Interrupted (KeyboardInterrupt…): the loop stops in the background; release the lease now.
                self._token.cancel()
                try:
                    self.native.close_session().wait()
                except _native.PacerelleError as e:
                    logger.debug("could not release the lease: %s", e)

    def _call_handler(self, message: _native.Message) -> Any:
        args: tuple[Any, ...] = (message, RunContext(self.agent, message)) if self.with_context else (message,)
        result = self.handler(*args)
        if inspect.isawaitable(result):
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(result)
        return result

    def _handle(self, task: _native.RunTask) -> None:
        message = task.message
        logger.debug("task %s%s", message.message_id, " (redelivered)" if message.redelivered else "")
        try:
            result = self._call_handler(message)
        except Exception as e:
            task.fail(_describe(e))
            return
        except BaseException:
            task.fail("the handler was interrupted")
            raise
        task.done(_reply_text(message, result))


class AsyncRunner:
    def __init__(
        self,
        agent: AsyncAgent,
        handler: Callable[..., Any],
        *,
        takeover: bool,
        timeout: float,
        max_backoff: float,
        handle_signals: bool,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self.agent = agent
        self.native = agent.native
        self.handler = handler
        self.with_context = _wants_context(handler)
        self.takeover = takeover
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.max_attempts = max_attempts
        self.handle_signals = handle_signals
        self._token = _native.CancelToken()
        self._loop = asyncio.get_running_loop()
        self._signals = 0

    def stop(self) -> None:
        # Callable from any thread.
        self._token.cancel()

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals > 1 and sig == signal.SIGINT:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            return
        logger.info("received %s; stopping after the current task", sig.name)
        self.stop()

    async def run(self) -> None:
        if self.agent._runner is not None:
            raise RuntimeError("this agent is already running a loop")
        installed: list[signal.Signals] = []
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._loop.add_signal_handler(sig, self._on_signal, sig)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        self.agent._runner = self
        ended = False
        try:
            run_loop = self.native.run_loop(
                self.agent.host,
                self._token,
                takeover=self.takeover,
                timeout=self.timeout,
                max_backoff=self.max_backoff,
                max_attempts=self.max_attempts,
            )
            while (step := await _bridge.run(run_loop.next())) is not None:
                if isinstance(step, _native.RunLog):
                    _log(step, self.agent)
                else:
                    await self._handle(step)
            ended = True
        finally:
            self.agent._runner = None
            for sig in installed:
                self._loop.remove_signal_handler(sig)
            if not ended:
                self._token.cancel()
                try:
                    await _bridge.run(self.native.close_session())
                except _native.PacerelleError as e:
                    logger.debug("could not release the lease: %s", e)

    async def _handle(self, task: _native.RunTask) -> None:
        message = task.message
        logger.debug("task %s%s", message.message_id, " (redelivered)" if message.redelivered else "")
        args: tuple[Any, ...] = (message, AsyncRunContext(self.agent, message)) if self.with_context else (message,)
        try:
            result = self.handler(*args)
            if inspect.isawaitable(result):
                result = await result
        except Exception as e:
            task.fail(_describe(e))
            return
        except BaseException:
            task.fail("the handler was interrupted")
            raise
        task.done(_reply_text(message, result))
