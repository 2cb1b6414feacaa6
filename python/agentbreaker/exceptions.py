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
    └── CircuitOpenError                              CIRCUIT_OPEN

``str(error)`` is the message without the code. The classes are created by the native module;
this module re-exports them.
"""

from ._native import (
    AgentBreakerError,
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
    "CircuitOpenError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidConfigError",
    "InvalidEventError",
    "InvalidSnapshotError",
    "PersistenceError",
]
