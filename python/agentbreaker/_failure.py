"""`FailureBreaker` with the guarded-call idioms Python users know from pybreaker.

The native class holds every rule and the guarded call itself (``call``, ``__enter__`` and
``__exit__``: one crossing into the native module per call); this subclass adds the decorator and
the async forms, all built on the same three steps (contract §2, "Guarded calls"):

1. ``try_acquire()`` asks ``should_allow_operation`` and raises `CircuitOpenError` (with the
   refusal message) when refused, so the guarded code never runs;
2. the code runs;
3. a success is recorded when it returned, a failure (``str(exc)``, or the exception's class name
   when that is empty) when it raised an `Exception`, and the exception propagates unchanged.

An exception that is not an `Exception` (``asyncio.CancelledError``, ``KeyboardInterrupt``,
``SystemExit``, ``GeneratorExit``) records nothing: a cancelled call says nothing about the
service. A half-open probe cancelled that way gives its permit back after ``probe_timeout_ms``.
"""

from __future__ import annotations

import functools
import inspect
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, Type, TypeVar, cast

from . import _native

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, Self

    P = ParamSpec("P")

R = TypeVar("R")

__all__ = ["FailureBreaker"]


class FailureBreaker(_native.FailureBreaker):
    """Consecutive failures open the circuit; after a cooldown a probe decides whether it closes.

    Configure it with keywords (the contract's settings in snake_case)::

        breaker = FailureBreaker(failure_threshold=5, cooldown_ms=30_000)

    and guard calls with it, sync or async::

        @breaker                     # a decorator (for coroutine functions too)
        def fetch(url: str) -> str: ...

        with breaker:                # a context manager
            do_something()

        async with breaker:          # an async context manager
            await do_something_async()

        breaker.call(fetch, url)     # or explicitly (await breaker.call_async(...) for coroutines)

    A refused call raises `CircuitOpenError` without running the code.
    """

    __slots__ = ()
    __module__ = "agentbreaker"

    async def call_async(
        self, func: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Awaits ``func(*args, **kwargs)`` through the breaker and returns its result."""
        self.try_acquire()
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self.__exit__(None, None, None)
        return result

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Decorates a function (or a coroutine function) so that every call is guarded."""
        if inspect.iscoroutinefunction(func):
            coroutine_function: Callable[..., Any] = func

            @functools.wraps(func)
            async def guarded_coroutine(*args: Any, **kwargs: Any) -> Any:
                return await self.call_async(coroutine_function, *args, **kwargs)

            # The wrapper is a coroutine function of the same parameters and result.
            return cast("Callable[P, R]", guarded_coroutine)

        if type(self).call is not _native.FailureBreaker.call:
            # A subclass with its own `call`: every call goes through it.
            @functools.wraps(func)
            def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
                return self.call(func, *args, **kwargs)

            return guarded

        # The native guarded call, without a Python frame in between (a method binds as usual).
        native = _native.GuardedFunction(self, func)
        functools.update_wrapper(native, func)
        return cast("Callable[P, R]", native)

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.__exit__(exc_type, exc, traceback)
