"""agentbreaker: a deterministic circuit breaker for autonomous AI-agent loops.

Three breakers watch a loop and stop it without asking an LLM:

- `FailureBreaker`: consecutive failures open the circuit; after a cooldown a probe decides.
  Guard calls with it as a decorator or a (sync or async) context manager.
- `StagnationBreaker`: no progress, the same error again and again, or declining output.
- `BudgetBreaker`: per-task tool calls, spend, duration, idle time and near-identical outputs
  over an agent's event stream.

`Monitor` is the front door that composes them: feed it the agent's events (model calls, tool
calls and results, usage, progress) and every event gets a verdict dict, continue, warn (with a
nudge for the model) or halt; raise `AgentHalted(verdict)` to stop the agent's code.

`analyze` scores a response for completion, `ExitStrategy`/`FixPlan` decide when a loop is done,
and `Loop` coordinates all of them. `profile("coding-agent")` holds tuned configurations. Every breaker takes ``clock=ManualClock()`` for deterministic
tests, accepts listeners (plain callables receiving event dicts) and is safe to share between
threads. Results are dicts with the contract's camelCase keys (typed in `agentbreaker.types`);
errors are subclasses of `AgentBreakerError` with a ``code`` (in `agentbreaker.exceptions`).
"""

from . import exceptions, types
from ._failure import FailureBreaker
from ._native import (
    BudgetBreaker,
    ExitStrategy,
    FixPlan,
    Loop,
    ManualClock,
    Monitor,
    StagnationBreaker,
    SystemClock,
    __version__,
    analyze,
    config_from_env,
    fingerprint,
    metric_definitions,
    profile,
    profile_names,
)
from .exceptions import (
    AgentBreakerError,
    AgentHalted,
    CircuitOpenError,
    InternalError,
    InvalidArgumentError,
    InvalidConfigError,
    InvalidEventError,
    InvalidSnapshotError,
    PersistenceError,
)

__all__ = [
    "AgentBreakerError",
    "AgentHalted",
    "BudgetBreaker",
    "CircuitOpenError",
    "ExitStrategy",
    "FailureBreaker",
    "FixPlan",
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
    "exceptions",
    "fingerprint",
    "metric_definitions",
    "profile",
    "profile_names",
    "types",
]
