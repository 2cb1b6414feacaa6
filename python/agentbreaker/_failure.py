"""`FailureBreaker` with the guarded-call idioms Python users know from pybreaker.

The native class holds every rule; this subclass adds the ways to guard a call with it, all built
on the same three steps (SPEC 2, "Guarded calls"):

1. ``try_acquire()`` asks ``should_allow_operation`` and raises `CircuitOpenError` (with the
   refusal message) when refused, so the guarded code never runs;
2. the code runs;
3. ``record_success()`` when it returned, ``record_failure(text)`` when it raised an `Exception`
   (the text is ``str(exc)``, or the exception's class name when that is empty), and the exception
   propagates unchanged.

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


def _error_text(exc: BaseException) -> str:
    """The text a failure is recorded with: ``str(exc)``, or the class name when that is empty."""
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not hide the failure
        text = ""
    return text or type(exc).__name__


class FailureBreaker(_native.FailureBreaker):
    """Consecutive failures open the circuit; after a cooldown a probe decides whether it closes.

    Configure it with keywords (the SPEC's settings in snake_case)::

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

    def _record(self, exc: Optional[BaseException]) -> None:
        if exc is None:
            self.record_success()
        elif isinstance(exc, Exception):
            self.record_failure(_error_text(exc))

    def call(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Runs ``func(*args, **kwargs)`` through the breaker and returns its result."""
        self.try_acquire()
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            self._record(exc)
            raise
        self.record_success()
        return result

    async def call_async(
        self, func: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Awaits ``func(*args, **kwargs)`` through the breaker and returns its result."""
        self.try_acquire()
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            self._record(exc)
            raise
        self.record_success()
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

        @functools.wraps(func)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            return self.call(func, *args, **kwargs)

        return guarded

    def __enter__(self) -> Self:
        self.try_acquire()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self._record(exc)

    async def __aenter__(self) -> Self:
        self.try_acquire()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self._record(exc)
