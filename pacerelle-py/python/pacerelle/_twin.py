"""One source for the blocking and the asyncio twins (`Agent`/`AsyncAgent`, `Device`/`AsyncDevice`, the run
contexts).

A method is written once, as a *flow*: a generator that yields each native call (`_native.Call`) or
awaitable it needs and gets its result back (`@flow`), or as a function returning one native call (`@call`).
The `twin` descriptor runs it according to the class it is read from: on a `Blocking` class each call
`wait()`s with the GIL released (Ctrl-C raises KeyboardInterrupt in it) and an awaitable runs on a private
event loop; on an `Awaiting` class the method is a coroutine that awaits each call without blocking the
event loop (cancelling the task abandons the call in flight). An exception raised by a step, cancellation
and KeyboardInterrupt included, is thrown into the flow at its `yield`, so its `try`/`finally` blocks run
in both twins.
"""

from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Concatenate, Generic, ParamSpec, TypeAlias, TypeVar, Union, overload

from . import _bridge, _native

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S")

Step: TypeAlias = Union["_native.Call[Any]", Awaitable[Any]]
Flow: TypeAlias = Generator[Step, Any, T]
"""A method written once: yields native calls (or awaitables), receives their results, returns its own."""


class Blocking:
    """Marks a class whose twin methods block."""


class Awaiting:
    """Marks a class whose twin methods are coroutines."""


def _advance(flow: Flow[T], value: Any, error: BaseException | None) -> tuple[bool, Any]:
    """Resumes a flow with a step's result (or throws the step's error into it): `(True, its result)` when
    it ended, else `(False, its next step)`."""
    try:
        return False, (flow.send(value) if error is None else flow.throw(error))
    except StopIteration as end:
        return True, end.value


def drive(flow: Flow[T]) -> T:
    """Runs a flow to its end, blocking."""
    loop: asyncio.AbstractEventLoop | None = None
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            ended, step = _advance(flow, value, error)
            if ended:
                return step  # type: ignore[no-any-return]
            value, error = None, None
            try:
                if isinstance(step, _native.Call):
                    value = step.wait()
                else:
                    loop = loop or asyncio.new_event_loop()
                    value = loop.run_until_complete(step)
            except BaseException as e:  # thrown into the flow, which decides
                error = e
    finally:
        del error
        if loop is not None:
            loop.close()


async def drive_async(flow: Flow[T]) -> T:
    """Runs a flow to its end in the running event loop."""
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            ended, step = _advance(flow, value, error)
            if ended:
                return step  # type: ignore[no-any-return]
            value, error = None, None
            try:
                value = await (_bridge.run(step) if isinstance(step, _native.Call) else step)
            except BaseException as e:  # thrown into the flow, which decides
                error = e
    finally:
        del error


class twin(Generic[S, P, T]):
    """A method written once as a flow, blocking on a `Blocking` class, a coroutine on an `Awaiting` one."""

    def __init__(self, method: Callable[Concatenate[S, P], Flow[T]]) -> None:
        functools.update_wrapper(self, method)  # type: ignore[arg-type]

        @functools.wraps(method)
        def blocking(obj: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return drive(method(obj, *args, **kwargs))

        @functools.wraps(method)
        async def awaiting(obj: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return await drive_async(method(obj, *args, **kwargs))

        self._blocking = blocking
        self._awaiting = awaiting

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> twin[S, P, T]: ...
    @overload
    def __get__(self, obj: Blocking, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: Awaiting, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, obj: object, owner: type[Any]) -> Any:
        if obj is None:
            return self
        return types.MethodType(self._awaiting if isinstance(obj, Awaiting) else self._blocking, obj)


def flow(method: Callable[Concatenate[S, P], Flow[T]]) -> twin[S, P, T]:
    """A twin method from a flow (a generator of native calls)."""
    return twin(method)


def call(method: Callable[Concatenate[S, P], _native.Call[T]]) -> twin[S, P, T]:
    """A twin method from a function that returns one native call."""

    @functools.wraps(method)
    def one(obj: S, /, *args: P.args, **kwargs: P.kwargs) -> Flow[T]:
        result: T = yield method(obj, *args, **kwargs)
        return result

    return twin(one)


__all__ = ["Awaiting", "Blocking", "Flow", "call", "drive", "drive_async", "flow", "twin"]
