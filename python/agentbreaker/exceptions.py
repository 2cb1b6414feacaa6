"""agentbreaker's exceptions: one class per error code, all subclasses of `AgentBreakerError`.

Every class has a ``code`` attribute with the stable code of the contract, and also derives from
the built-in exception a Python user would catch for it::

    AgentBreakerError (Exception)             code ""  (never raised itself)
    ├── InvalidConfigError (ValueError, TypeError)    INVALID_CONFIG
    ├── InvalidArgumentError (ValueError, TypeError)  INVALID_ARGUMENT
    ├── InvalidEventError (ValueError)                INVALID_EVENT
    ├── InvalidSnapshotError (ValueError)             INVALID_SNAPSHOT
    ├── PersistenceError (OSError)                    IO
    ├── InternalError (RuntimeError)                  INTERNAL
    ├── CircuitOpenError                              CIRCUIT_OPEN
    └── AgentHalted                                   HALTED

``str(error)`` is the message without the code. `AgentHalted` is yours to raise: build it from a
`Monitor`'s halt verdict (``raise AgentHalted(verdict)``) to stop the agent's code; its
``verdict`` attribute keeps the dict. The classes are created by the native module; this module
re-exports them.
"""

from ._native import (
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
    "CircuitOpenError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidConfigError",
    "InvalidEventError",
    "InvalidSnapshotError",
    "PersistenceError",
]
