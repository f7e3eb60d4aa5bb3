"""Runs a native call from asyncio: the Rust future runs on the native runtime and resolves an asyncio
future; cancelling the awaiting task drops the Rust future (its request is abandoned), so nothing hangs."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from . import _native

T = TypeVar("T")


def _resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


async def run(call: _native.Call[T]) -> T:
    """Awaits a native call without blocking the event loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def done(ok: bool, value: Any) -> None:
        # Called from a native thread.
        try:
            loop.call_soon_threadsafe(_resolve, future, ok, value)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    handle = call.start(done)
    try:
        result: T = await future
        return result
    except BaseException:
        handle.cancel()
        raise
