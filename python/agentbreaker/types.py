"""The shapes of agentbreaker's results and events, as ``TypedDict`` s.

Every result is a plain ``dict`` with the contract's camelCase JSON keys (so it can be logged, sent
over the wire or compared with the conformance suite as is); these types only tell a type checker
which keys and value types to expect::

    from agentbreaker.types import FailureStatus

    status: FailureStatus = breaker.get_status()
    status["consecutiveFailures"]  # int
"""

from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, TypedDict, Union

__all__ = [
    "Action",
    "AgentEvent",
    "Analysis",
    "BudgetConfig",
    "BudgetSnapshot",
    "CompletionSignal",
    "EnvConfig",
    "EnvWarning",
    "ErrorMatch",
    "Event",
    "ExitDecision",
    "ExitReason",
    "FailureConfig",
    "FailureMetrics",
    "FailureRecord",
    "MetricDefinition",
    "MetricUpdate",
    "FailureSnapshot",
    "FailureStatus",
    "FixStep",
    "FixStepInput",
    "Halt",
    "HaltEvent",
    "Listener",
    "LoopDecision",
    "LoopStatus",
    "MonitorConfig",
    "MonitorEvent",
    "MonitorFailureConfig",
    "MonitorSnapshot",
    "MonitorStatus",
    "MonitorTaskStatus",
    "Outcome",
    "PlanStatus",
    "Price",
    "Profile",
    "RuleSlug",
    "RuleStatus",
    "StagnationConfig",
    "StagnationDecision",
    "StagnationSnapshot",
    "StagnationStatus",
    "State",
    "StateChangeEvent",
    "StoreFailure",
    "StoreMode",
    "StoreStatus",
    "TaskSnapshot",
    "Verdict",
    "VerdictAction",
    "VerdictEvent",
    "WarningEvent",
]

State = Literal["CLOSED", "HALF_OPEN", "OPEN"]
"""A circuit state."""

ErrorMatch = Literal["exact", "normalized", "template", "key_line"]
"""How error texts are compared (contract §6)."""

StoreFailure = Literal["open", "closed"]
"""What a store-backed object does while its store is unreachable (contract §12)."""

StoreMode = Literal["shared", "local", "refusing"]
"""Where a store-backed object's state lives right now (contract §12)."""


class StoreStatus(TypedDict):
    """``store_status()`` of a FailureBreaker or Monitor with ``store`` (docs/distributed.md)."""

    url: str
    """The store URL without its password."""
    key: str
    mode: StoreMode
    outages: int
    lastError: Optional[str]

ExitReason = Literal[
    "completed",
    "done_signals",
    "plan_complete",
    "plan_exhausted",
    "circuit_open",
    "max_iterations",
    "budget_exceeded",
]
"""Why a loop ended (or a strategy says it should)."""

Action = Literal["continue", "exit"]
Outcome = Literal["success", "failure"]

AgentEvent = Mapping[str, Any]
"""A BudgetBreaker event: ``{"type": "tool_use", "name": "web_fetch", "taskId": "t1"}``, ..."""


# --- FailureBreaker (contract §2) ---------------------------------------------------------------


class FailureRecord(TypedDict):
    atMs: int
    error: str
    state: State


class FailureStatus(TypedDict):
    state: State
    consecutiveFailures: int
    threshold: int
    failureHistory: List[FailureRecord]
    openedAt: Optional[int]
    cooldownMs: int
    cooldownRemainingMs: int
    trips: int


class FailureMetrics(TypedDict):
    totalFailures: int
    totalSuccesses: int
    trips: int
    recoveries: int
    reopenings: int
    recoveryRate: Optional[float]
    mtbfMs: Optional[float]


class FailureSnapshot(TypedDict):
    version: int
    kind: str
    state: State
    consecutiveFailures: int
    openedAt: Optional[int]
    backoffLevel: int
    trips: int
    failureHistory: List[FailureRecord]


class FailureConfig(TypedDict):
    failureThreshold: int
    warningThreshold: Optional[int]
    cooldownMs: int
    backoffMultiplier: float
    maxCooldownMs: int
    identicalErrorThreshold: int
    historyLimit: int
    halfOpenMaxProbes: int
    probeTimeoutMs: int
    errorMatch: ErrorMatch
    statePath: Optional[str]
    store: Optional[str]
    key: Optional[str]
    storeTimeoutMs: int
    storeFailure: StoreFailure


# --- StagnationBreaker (contract §3) ------------------------------------------------------------


StagnationSlug = Literal[
    "no_progress",
    "output_decline",
    "same_error",
    "repeated_step",
    "cycle",
    "fail_streak",
    "fail_window",
]


class StagnationDecision(TypedDict):
    allowContinue: bool
    state: State
    reason: Optional[str]
    slug: Optional[StagnationSlug]


class StagnationStatus(TypedDict):
    state: State
    consecutiveNoProgress: int
    errorCounts: Dict[str, int]
    outputTrend: List[int]
    lastProgress: Optional[int]


class StagnationSnapshot(TypedDict):
    version: int
    kind: str
    state: State
    consecutiveNoProgress: int
    errorCounts: Dict[str, int]
    outputTrend: List[int]
    lastProgress: Optional[int]
    baselineOutputs: List[int]
    bestTestsPassing: int
    reason: Optional[str]
    slug: Optional[StagnationSlug]


class StagnationConfig(TypedDict):
    noProgressThreshold: int
    sameErrorThreshold: int
    outputDeclineThreshold: int
    errorMatch: ErrorMatch
    repeatThreshold: int
    cycleRepeats: int
    maxCycleLength: int
    failStreakThreshold: int
    failStreakDistinct: int
    failWindow: int
    failWindowPercent: int
    noProgressDistinctActions: int


# --- BudgetBreaker (contract §4) ----------------------------------------------------------------


class _HaltBase(TypedDict):
    kind: Literal["ToolCallLimit", "TokenSpendLimit", "DurationLimit", "IdleTimeout", "OutputLoop"]
    slug: Literal["tool_call_limit", "token_spend_limit", "duration_limit", "idle_timeout", "output_loop"]
    taskId: str
    message: str


class Halt(_HaltBase, total=False):
    """A halt: ``kind``, ``slug``, ``taskId`` and ``message``, plus the counters of its kind."""

    actual: int
    limit: int
    actualCents: float
    limitCents: int
    actualSecs: float
    limitSecs: int
    idleSecs: float
    windowSize: int
    similarityJaccard: float
    threshold: float


class TaskSnapshot(TypedDict):
    taskId: str
    toolCalls: int
    spendCents: float
    durationSecs: float
    idleSecs: float
    halted: bool


class BudgetSnapshot(TypedDict):
    tasks: List[TaskSnapshot]
    stack: List[str]
    ignoredEvents: int


class Price(TypedDict):
    """Cents per million tokens."""

    input: float
    output: float
    cacheWrite: float
    cacheRead: float


class BudgetConfig(TypedDict):
    maxToolCallsPerTask: int
    maxTokenSpendCentsPerTask: int
    maxTaskDurationSecs: int
    maxIdleSecs: int
    similarityJaccardThreshold: float
    loopWindow: int
    maxTokensPerOutput: int
    prices: Dict[str, Price]


# --- Analyzer, strategies, loop (contract §5) ---------------------------------------------------


class CompletionSignal(TypedDict):
    detected: bool
    confidence: int
    phrases: List[str]


class Analysis(TypedDict):
    completionSignal: CompletionSignal
    confidence: int
    exitSignal: Optional[bool]
    testsPassing: Optional[int]
    testsFailing: Optional[int]


class ExitDecision(TypedDict):
    exit: bool
    reason: Optional[ExitReason]


class FixStep(TypedDict):
    description: str
    completed: bool
    skipped: bool
    attempts: int
    maxAttempts: int


class _FixStepInputBase(TypedDict):
    description: str


class FixStepInput(_FixStepInputBase, total=False):
    """A step of a fix plan as configured: ``{"description": ..., "maxAttempts": 2}``."""

    completed: bool
    attempts: int
    maxAttempts: int


class PlanStatus(TypedDict):
    steps: List[FixStep]
    currentStep: Optional[int]


class LoopDecision(TypedDict):
    action: Action
    reason: Optional[ExitReason]
    outcome: Optional[Outcome]
    iteration: int
    analysis: Analysis
    breaker: StagnationDecision
    halt: Optional[Halt]


class LoopStatus(TypedDict):
    iteration: int
    exited: bool
    reason: Optional[ExitReason]
    outcome: Optional[Outcome]
    breaker: StagnationStatus
    budget: Optional[BudgetSnapshot]


# --- Environment (contract §7) ------------------------------------------------------------------


class EnvWarning(TypedDict):
    variable: str
    value: str
    message: str


class EnvConfig(TypedDict):
    config: BudgetConfig
    warnings: List[EnvWarning]


# --- Profiles -----------------------------------------------------------------------------


class Profile(TypedDict):
    """A named configuration of the three breakers (`agentbreaker.profile`)."""

    name: str
    description: str
    failure: FailureConfig
    stagnation: StagnationConfig
    budget: BudgetConfig


# --- Monitor (contract section 11, docs/monitor.md) ----------------------------------------

VerdictAction = Literal["continue", "warn", "halt"]
"""What a verdict says to do."""

RuleSlug = Literal[
    "tool_call_limit",
    "tool_limit",
    "token_spend_limit",
    "duration_limit",
    "idle_timeout",
    "repeated_step",
    "cycle",
    "fail_streak",
    "fail_window",
    "same_error",
    "consecutive_failures",
    "no_progress",
    "output_decline",
    "output_loop",
]
"""The stable slug of the rule behind a warning or a halt."""

MonitorEvent = Mapping[str, Any]
"""An event for ``Monitor.observe``: ``{"type": "tool_use", "name": "Bash", "input": {...},
"id": "t1"}``; the types are ``assistant``, ``tool_use``, ``tool_result``, ``usage``, ``error``,
``progress``, ``heartbeat`` and ``alive`` (docs/monitor.md)."""


class Verdict(TypedDict):
    """A Monitor's answer to one event."""

    action: VerdictAction
    reason: Optional[RuleSlug]
    message: Optional[str]
    nudge: Optional[str]
    taskId: Optional[str]
    step: int
    detail: Optional[Dict[str, Any]]


class RuleStatus(TypedDict):
    count: float
    threshold: float


class MonitorTaskStatus(TypedDict):
    taskId: str
    steps: int
    toolCalls: int
    toolCallsByName: Dict[str, int]
    spendCents: float
    durationSecs: float
    idleSecs: float
    rules: Dict[str, RuleStatus]
    halted: bool
    halt: Optional[Verdict]
    unpairedResults: int


class _MonitorStatusBase(TypedDict):
    profile: str
    tasks: List[MonitorTaskStatus]
    stack: List[str]
    ignoredEvents: int


class MonitorStatus(_MonitorStatusBase, total=False):
    store: StoreStatus
    """Only with ``store``: where the budget counters live now."""


class MonitorSnapshot(TypedDict):
    version: int
    kind: str
    tasks: List[Dict[str, Any]]
    stack: List[str]
    ignoredEvents: int
    lastEventAt: Optional[int]


class MonitorFailureConfig(TypedDict):
    """A Monitor's ``failure`` section: a FailureConfig without its store keys (a Monitor's store
    is at the top level of its config)."""

    failureThreshold: int
    warningThreshold: Optional[int]
    cooldownMs: int
    backoffMultiplier: float
    maxCooldownMs: int
    identicalErrorThreshold: int
    historyLimit: int
    halfOpenMaxProbes: int
    probeTimeoutMs: int
    errorMatch: ErrorMatch


class MonitorConfig(TypedDict):
    profile: str
    failure: MonitorFailureConfig
    stagnation: StagnationConfig
    budget: BudgetConfig
    toolLimits: Dict[str, int]
    warnBefore: int
    budgetWarnPercent: int
    store: Optional[str]
    key: Optional[str]
    storeTimeoutMs: int
    storeFailure: StoreFailure


# --- Events (contract §8) -----------------------------------------------------------------------

# `from` is a keyword: the functional syntax.
StateChangeEvent = TypedDict(
    "StateChangeEvent",
    {
        "type": Literal["stateChange"],
        "from": State,
        "to": State,
        "reason": str,
        # The rule behind a change to OPEN or HALF_OPEN ("consecutive_failures", or a
        # StagnationSlug); None for a recovery, a probe or a reset.
        "slug": Optional[str],
        "atMs": int,
    },
)


class WarningEvent(TypedDict):
    type: Literal["warning"]
    message: str
    atMs: int


class HaltEvent(TypedDict):
    type: Literal["halt"]
    halt: Halt
    atMs: int


VerdictEvent = TypedDict(
    "VerdictEvent",
    {
        "type": Literal["verdict"],
        "action": Literal["warn", "halt"],
        "reason": RuleSlug,
        "message": str,
        "nudge": str,
        "taskId": Optional[str],
        "step": int,
        "detail": Optional[Dict[str, Any]],
        "atMs": int,
    },
)
"""A Monitor's warning or halt, as its listeners receive it (the verdict's keys and ``atMs``)."""


Event = Union[StateChangeEvent, WarningEvent, HaltEvent, VerdictEvent]
"""What a listener receives."""

Listener = Callable[[Event], object]
"""A listener: any callable taking an event dict (its return value is ignored)."""


class _MetricDefinitionBase(TypedDict):
    name: str
    prometheusName: str
    instrument: Literal["counter", "histogram"]
    unit: str
    description: str
    attributes: List[str]


class MetricDefinition(_MetricDefinitionBase, total=False):
    """One metric of the vocabulary (docs/observability.md); ``buckets`` for the histogram."""

    buckets: List[float]


MetricUpdate = tuple[str, float, Dict[str, str]]
"""One metric update: ``(name, value, attributes)`` (a counter adds the value, the histogram
observes it)."""
