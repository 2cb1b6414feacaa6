# Type stubs of the native module (bindings/python). Checked against the built module by
# mypy's stubtest in `make test-python`.

import os
from types import TracebackType
from typing import (
    Any,
    Callable,
    ClassVar,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Type,
    TypeVar,
    Union,
    overload,
)

from typing_extensions import ParamSpec, Self, disjoint_base, final

from .types import (
    AgentEvent,
    Analysis,
    BudgetConfig,
    BudgetSnapshot,
    EnvConfig,
    ErrorMatch,
    Event,
    ExitDecision,
    FailureConfig,
    FailureMetrics,
    FailureSnapshot,
    FailureStatus,
    FixStepInput,
    Halt,
    LoopDecision,
    LoopStatus,
    MonitorConfig,
    MonitorEvent,
    MonitorSnapshot,
    MonitorStatus,
    MetricDefinition,
    MetricUpdate,
    PlanStatus,
    Price,
    Profile,
    StagnationConfig,
    StagnationDecision,
    StagnationSnapshot,
    StagnationStatus,
    State,
    StoreFailure,
    StoreStatus,
    Verdict,
)

__all__ = [
    "AgentBreakerError",
    "AgentHalted",
    "BudgetBreaker",
    "CircuitOpenError",
    "ExitStrategy",
    "FailureBreaker",
    "FixPlan",
    "GuardedFunction",
    "InternalError",
    "InvalidArgumentError",
    "InvalidConfigError",
    "InvalidEventError",
    "InvalidSnapshotError",
    "Loop",
    "ManualClock",
    "Monitor",
    "PersistenceError",
    "StagnationBreaker",
    "SystemClock",
    "__version__",
    "analyze",
    "config_from_env",
    "fingerprint",
    "metric_definitions",
    "metric_updates",
    "profile",
    "profile_names",
]

__version__: str

_L = TypeVar("_L", bound=Callable[[Event], object])
_P = ParamSpec("_P")
_R = TypeVar("_R")
_Clock = Union[ManualClock, SystemClock, None]
_Path = Union[str, os.PathLike[str]]

# --- Exceptions -----------------------------------------------------------------------------

class AgentBreakerError(Exception):
    code: ClassVar[str]

class InvalidConfigError(AgentBreakerError, ValueError, TypeError): ...
class InvalidArgumentError(AgentBreakerError, ValueError, TypeError): ...
class InvalidEventError(AgentBreakerError, ValueError): ...
class InvalidSnapshotError(AgentBreakerError, ValueError): ...
class PersistenceError(AgentBreakerError, OSError): ...
class InternalError(AgentBreakerError, RuntimeError): ...
class CircuitOpenError(AgentBreakerError): ...

class AgentHalted(AgentBreakerError):
    """Raise it with a Monitor's halt verdict to stop the agent's code (code ``HALTED``)."""

    def __init__(self, verdict: Union[Verdict, str], /) -> None: ...
    @property
    def verdict(self) -> Verdict: ...

# --- Clocks (contract §1) --------------------------------------------------------------------------

@final
class ManualClock:
    def __new__(cls, start_ms: int = 0) -> Self: ...
    def set(self, ms: int) -> None: ...
    def advance(self, ms: int) -> None: ...
    def now(self) -> int: ...

@final
class SystemClock:
    def __new__(cls) -> Self: ...
    def now(self) -> int: ...

# --- FailureBreaker (contract §2) ------------------------------------------------------------------

@disjoint_base
class FailureBreaker:
    def __new__(
        cls,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        clock: _Clock = None,
        failure_threshold: int = 5,
        warning_threshold: Optional[int] = None,
        cooldown_ms: int = 30000,
        backoff_multiplier: float = 1.0,
        max_cooldown_ms: int = 3600000,
        identical_error_threshold: int = 0,
        history_limit: int = 100,
        half_open_max_probes: int = 1,
        probe_timeout_ms: int = 30000,
        error_match: ErrorMatch = "normalized",
        state_path: Optional[_Path] = None,
        store: Optional[str] = None,
        key: Optional[str] = None,
        store_timeout_ms: int = 50,
        store_failure: StoreFailure = "open",
    ) -> Self: ...
    def record_success(self) -> None: ...
    def record_failure(self, error: str) -> None: ...
    def should_allow_operation(self) -> tuple[bool, Optional[str]]: ...
    def try_acquire(self) -> Optional[str]: ...
    def call(self, func: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None: ...
    def get_status(self) -> FailureStatus: ...
    def metrics(self) -> FailureMetrics: ...
    def reset(self) -> None: ...
    def snapshot(self) -> FailureSnapshot: ...
    def restore(self, snapshot: Mapping[str, Any]) -> None: ...
    def save(self, path: _Path) -> None: ...
    def load(self, path: _Path) -> bool: ...
    @property
    def state(self) -> State: ...
    @property
    def config(self) -> FailureConfig: ...
    def store_status(self) -> Optional[StoreStatus]: ...
    def add_listener(self, listener: _L) -> _L: ...
    def remove_listener(self, listener: Callable[[Event], object]) -> bool: ...
    @property
    def listener_errors(self) -> int: ...

@final
class GuardedFunction:
    """What ``@breaker`` returns for a function: each call is ``breaker.call(func, ...)``."""

    def __new__(cls, breaker: FailureBreaker, func: Callable[..., Any]) -> Self: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, instance: Any, owner: Any = None, /) -> Any: ...
    def __reduce__(self) -> str: ...
    @property
    def breaker(self) -> FailureBreaker: ...
    __wrapped__: Callable[..., Any]

# --- StagnationBreaker (contract §3) ---------------------------------------------------------------

@disjoint_base
class StagnationBreaker:
    def __new__(
        cls,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        clock: _Clock = None,
        no_progress_threshold: int = 3,
        same_error_threshold: int = 5,
        output_decline_threshold: int = 70,
        error_match: ErrorMatch = "normalized",
        repeat_threshold: int = 0,
        cycle_repeats: int = 0,
        max_cycle_length: int = 5,
        fail_streak_threshold: int = 0,
        fail_streak_distinct: int = 2,
        fail_window: int = 0,
        fail_window_percent: int = 90,
        no_progress_distinct_actions: int = 0,
    ) -> Self: ...
    def record_progress(
        self, *, files_changed: int = 0, tests_passing: int = 0, output_length: int = 0
    ) -> None: ...
    def record_error(self, error: str, transient: bool = False) -> None: ...
    def record_step(self, action: str, result: str = "", failed: bool = False) -> None: ...
    def check(self) -> StagnationDecision: ...
    def get_status(self) -> StagnationStatus: ...
    def reset(self) -> None: ...
    def snapshot(self) -> StagnationSnapshot: ...
    def restore(self, snapshot: Mapping[str, Any]) -> None: ...
    @property
    def state(self) -> State: ...
    @property
    def config(self) -> StagnationConfig: ...
    def add_listener(self, listener: _L) -> _L: ...
    def remove_listener(self, listener: Callable[[Event], object]) -> bool: ...
    @property
    def listener_errors(self) -> int: ...

# --- BudgetBreaker (contract §4) -------------------------------------------------------------------

@disjoint_base
class BudgetBreaker:
    def __new__(
        cls,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        clock: _Clock = None,
        max_tool_calls_per_task: int = 50,
        max_token_spend_cents_per_task: int = 5000,
        max_task_duration_secs: int = 1800,
        max_idle_secs: int = 300,
        similarity_jaccard_threshold: float = 0.95,
        loop_window: int = 3,
        max_tokens_per_output: int = 512,
        prices: Mapping[str, Union[Price, Mapping[str, float]]] = ...,
    ) -> Self: ...
    def ingest(self, event: AgentEvent) -> Optional[Halt]: ...
    def tick(self) -> list[Halt]: ...
    def snapshot(self) -> BudgetSnapshot: ...
    def reset(self) -> None: ...
    @property
    def config(self) -> BudgetConfig: ...
    def add_listener(self, listener: _L) -> _L: ...
    def remove_listener(self, listener: Callable[[Event], object]) -> bool: ...
    @property
    def listener_errors(self) -> int: ...

# --- Analyzer, strategies, loop (contract §5) ------------------------------------------------------

def analyze(text: str) -> Analysis: ...

@disjoint_base
class ExitStrategy:
    @overload
    def __new__(cls, config: Mapping[str, Any], /, *, clock: _Clock = None) -> Self: ...
    @overload
    def __new__(
        cls, config: None = None, /, *, type: Literal["auto"], threshold: int = 70, clock: _Clock = None
    ) -> Self: ...
    @overload
    def __new__(
        cls,
        config: None = None,
        /,
        *,
        type: Literal["done_signals"],
        threshold: int = 40,
        window: int = 5,
        clock: _Clock = None,
    ) -> Self: ...
    @overload
    def __new__(
        cls,
        config: None = None,
        /,
        *,
        type: Literal["fix_plan"],
        steps: Sequence[FixStepInput] = ...,
        markdown: str = ...,
        max_attempts: int = 3,
        clock: _Clock = None,
    ) -> Self: ...
    @overload
    def __new__(
        cls, config: None = None, /, *, type: Literal["circuit_breaker"], clock: _Clock = None
    ) -> Self: ...
    @overload
    def __new__(
        cls,
        config: None = None,
        /,
        *,
        type: Literal["composite"],
        members: Sequence[Mapping[str, Any]],
        mode: Literal["any", "all"] = "any",
        clock: _Clock = None,
    ) -> Self: ...
    def should_exit(
        self, response: Union[str, Analysis], circuit_state: State = "CLOSED"
    ) -> ExitDecision: ...
    def plan_status(self) -> Optional[PlanStatus]: ...
    def reset(self) -> None: ...
    def add_listener(self, listener: _L) -> _L: ...
    def remove_listener(self, listener: Callable[[Event], object]) -> bool: ...
    @property
    def listener_errors(self) -> int: ...

@final
class FixPlan(ExitStrategy):
    def __new__(
        cls,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        steps: Sequence[FixStepInput] = ...,
        markdown: str = ...,
        max_attempts: int = 3,
        clock: _Clock = None,
    ) -> Self: ...
    @classmethod
    def from_markdown(
        cls, markdown: str, *, max_attempts: int = 3, clock: _Clock = None
    ) -> Self: ...
    def get_status(self) -> PlanStatus: ...

@disjoint_base
class Loop:
    def __new__(
        cls,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        clock: _Clock = None,
        max_iterations: int = 50,
        strategy: Optional[Mapping[str, Any]] = None,
        stagnation: Optional[Mapping[str, Any]] = None,
        budget: Optional[Mapping[str, Any]] = None,
    ) -> Self: ...
    def observe(
        self,
        output: str,
        *,
        files_changed: int = 0,
        tests_passing: int = 0,
        error: Optional[str] = None,
        events: Optional[Sequence[AgentEvent]] = None,
    ) -> LoopDecision: ...
    def get_status(self) -> LoopStatus: ...
    def reset(self) -> None: ...
    def add_listener(self, listener: _L) -> _L: ...
    def remove_listener(self, listener: Callable[[Event], object]) -> bool: ...
    @property
    def listener_errors(self) -> int: ...

# --- Monitor (contract section 11) -----------------------------------------------------------

@disjoint_base
class Monitor:
    def __new__(
        cls,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        clock: _Clock = None,
        profile: str = "coding-agent",
        tool_limits: Optional[Mapping[str, int]] = None,
        warn_before: int = 2,
        budget_warn_percent: int = 80,
        failure: Optional[Mapping[str, Any]] = None,
        stagnation: Optional[Mapping[str, Any]] = None,
        budget: Optional[Mapping[str, Any]] = None,
        store: Optional[str] = None,
        key: Optional[str] = None,
        store_timeout_ms: int = 50,
        store_failure: StoreFailure = "open",
    ) -> Self: ...
    def observe(self, event: MonitorEvent) -> Verdict: ...
    def tick(self) -> list[Verdict]: ...
    def status(self) -> MonitorStatus: ...
    def snapshot(self) -> MonitorSnapshot: ...
    def restore(self, snapshot: Mapping[str, Any]) -> None: ...
    def reset(self) -> None: ...
    def set_metrics_recorder(
        self, recorder: Optional[Callable[[list[MetricUpdate]], object]], /, *, task: bool = False
    ) -> None: ...
    @property
    def config(self) -> MonitorConfig: ...
    def store_status(self) -> Optional[StoreStatus]: ...
    def add_listener(self, listener: _L) -> _L: ...
    def remove_listener(self, listener: Callable[[Event], object]) -> bool: ...
    @property
    def listener_errors(self) -> int: ...

# --- Metrics (docs/observability.md) --------------------------------------------------------------------

def metric_definitions() -> list[MetricDefinition]: ...
def metric_updates(
    event: Mapping[str, Any], breaker: str, *, task: bool = False
) -> list[MetricUpdate]: ...

# --- Fingerprints (contract §6), environment (contract §7), profiles ----------------------------------------------

def fingerprint(error: str, error_match: ErrorMatch = "normalized") -> str: ...
def config_from_env(env: Optional[Mapping[str, str]] = None) -> EnvConfig: ...
def profile(name: str) -> Optional[Profile]: ...
def profile_names() -> list[str]: ...
