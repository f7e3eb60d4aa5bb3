"""The supervised loop behind `Agent.run` and `AsyncAgent.run`.

Takes the lease, waits for tasks, calls the handler, replies with what it returns, marks each task processed
only after its handler returned, survives relay restarts with backoff, and stops cleanly on SIGINT/SIGTERM.
A handler that raises leaves its task unprocessed: it is redelivered to the next run (or after a reconnection).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import _bridge, _native

if TYPE_CHECKING:
    from ._agent import Agent, AsyncAgent

logger = logging.getLogger("pacerelle")

FIRST_BACKOFF = 0.25


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


class _Stopped(Exception):
    """The loop was asked to stop while settling a task (it stays unprocessed: redelivered next run)."""


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
    ) -> None:
        self.agent = agent
        self.native = agent.native
        self.handler = handler
        self.with_context = _wants_context(handler)
        self.takeover = takeover
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.handle_signals = handle_signals
        self._stop = threading.Event()
        self._token = _native.CancelToken()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals = 0

    def stop(self) -> None:
        self._stop.set()
        self._token.cancel()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

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
        try:
            self._run()
        finally:
            self.agent._runner = None
            for signum, old in previous.items():
                signal.signal(signum, old)
            if self._loop is not None:
                self._loop.close()
            try:
                self.native.close_session().wait()
            except _native.PacerelleError as e:
                logger.debug("could not release the lease: %s", e)
            logger.info("stopped")

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _run(self) -> None:
        backoff = FIRST_BACKOFF
        need_session = True
        first = True
        cursor: str | None = None
        while not self.stopping:
            try:
                if need_session:
                    session = self.native.open_session(self.agent.host, self.takeover and first).wait(self._token)
                    if session is None:
                        break
                    first = False
                    need_session = False
                    cursor = None
                    logger.info("listening (session %s)", session.session_id)
                inbox = self.native.wait_for_messages(cursor, self.timeout).wait(self._token)
                if inbox is None:
                    break
                self._handle(inbox)
                cursor = inbox.cursor
                backoff = FIRST_BACKOFF
                continue
            except _Stopped:
                break
            except _native.RelayUnavailable as e:
                logger.warning("relay unreachable (%s); retrying in %.2g s", e, backoff)
                # From the start again: tasks delivered before the cut come again if unprocessed.
                cursor = None
            except _native.LeaseLost:
                logger.warning("the lease was lost (expired or taken over); opening a new session")
                need_session = True
            self._sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    def _settle(self, make_call: Callable[[], _native.Call[Any]]) -> Any:
        """Runs an idempotent call until it succeeds, retrying while the relay is unreachable."""
        backoff = FIRST_BACKOFF
        while True:
            try:
                return make_call().wait()
            except _native.RelayUnavailable as e:
                if self.stopping:
                    raise _Stopped from e
                logger.warning("relay unreachable (%s); retrying in %.2g s", e, backoff)
                self._sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff)

    def _call_handler(self, message: _native.Message) -> Any:
        args: tuple[Any, ...] = (message, RunContext(self.agent, message)) if self.with_context else (message,)
        result = self.handler(*args)
        if inspect.isawaitable(result):
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(result)
        return result

    def _handle(self, inbox: _native.Inbox) -> None:
        for rejected in inbox.rejected:
            logger.warning("dropping task %s: it did not open (%s)", rejected.message_id, rejected.reason)
            self._settle(lambda: self.native.mark_processed(rejected.message_id))
        for message in inbox.messages:
            if self.stopping:
                return  # the rest is redelivered to the next run
            logger.debug("task %s%s", message.message_id, " (redelivered)" if message.redelivered else "")
            try:
                result = self._call_handler(message)
            except Exception:
                logger.exception(
                    "the handler failed on task %s; it stays unprocessed and will be redelivered", message.message_id
                )
                continue
            text = _reply_text(message, result)
            if text is not None:
                reply_id = _native.AgentClient.reply_id_for(message.message_id)
                self._settle(lambda: self.native.reply(message.message_id, text, reply_id))
            self._settle(lambda: self.native.mark_processed(message.message_id))


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
    ) -> None:
        self.agent = agent
        self.native = agent.native
        self.handler = handler
        self.with_context = _wants_context(handler)
        self.takeover = takeover
        self.timeout = timeout
        self.max_backoff = max_backoff
        self.handle_signals = handle_signals
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._signals = 0

    def stop(self) -> None:
        # Callable from any thread.
        if self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._stop.set()
        else:
            self._loop.call_soon_threadsafe(self._stop.set)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

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
        try:
            await self._run()
        finally:
            self.agent._runner = None
            for sig in installed:
                self._loop.remove_signal_handler(sig)
            try:
                await _bridge.run(self.native.close_session())
            except _native.PacerelleError as e:
                logger.debug("could not release the lease: %s", e)
            logger.info("stopped")

    async def _until_stopped(self, call: _native.Call[Any]) -> Any:
        """Awaits a call, or returns None as soon as the loop is asked to stop (the call is dropped)."""
        work = asyncio.ensure_future(_bridge.run(call))
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done():
                work.cancel()
        if work.cancelled() or not work.done():
            return None
        return work.result()

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _run(self) -> None:
        backoff = FIRST_BACKOFF
        need_session = True
        first = True
        cursor: str | None = None
        while not self.stopping:
            try:
                if need_session:
                    session = await self._until_stopped(self.native.open_session(self.agent.host, self.takeover and first))
                    if session is None:
                        break
                    first = False
                    need_session = False
                    cursor = None
                    logger.info("listening (session %s)", session.session_id)
                inbox = await self._until_stopped(self.native.wait_for_messages(cursor, self.timeout))
                if inbox is None:
                    break
                await self._handle(inbox)
                cursor = inbox.cursor
                backoff = FIRST_BACKOFF
                continue
            except _Stopped:
                break
            except _native.RelayUnavailable as e:
                logger.warning("relay unreachable (%s); retrying in %.2g s", e, backoff)
                cursor = None
            except _native.LeaseLost:
                logger.warning("the lease was lost (expired or taken over); opening a new session")
                need_session = True
            await self._sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    async def _settle(self, make_call: Callable[[], _native.Call[Any]]) -> Any:
        backoff = FIRST_BACKOFF
        while True:
            try:
                return await _bridge.run(make_call())
            except _native.RelayUnavailable as e:
                if self.stopping:
                    raise _Stopped from e
                logger.warning("relay unreachable (%s); retrying in %.2g s", e, backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff)

    async def _handle(self, inbox: _native.Inbox) -> None:
        for rejected in inbox.rejected:
            logger.warning("dropping task %s: it did not open (%s)", rejected.message_id, rejected.reason)
            await self._settle(lambda: self.native.mark_processed(rejected.message_id))
        for message in inbox.messages:
            if self.stopping:
                return
            logger.debug("task %s%s", message.message_id, " (redelivered)" if message.redelivered else "")
            args: tuple[Any, ...] = (message, AsyncRunContext(self.agent, message)) if self.with_context else (message,)
            try:
                result = self.handler(*args)
                if inspect.isawaitable(result):
                    result = await result
            except Exception:
                logger.exception(
                    "the handler failed on task %s; it stays unprocessed and will be redelivered", message.message_id
                )
                continue
            text = _reply_text(message, result)
            if text is not None:
                reply_id = _native.AgentClient.reply_id_for(message.message_id)
                await self._settle(lambda: self.native.reply(message.message_id, text, reply_id))
            await self._settle(lambda: self.native.mark_processed(message.message_id))
