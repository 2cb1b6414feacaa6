//! The one error type of agentbreaker, with stable codes.

use std::fmt;

/// Every failure the library reports. The [`Error::code`] strings and [`Error::number`] values are
/// stable: bindings and the conformance suite match on them. Never renumber; retire values in a
/// comment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A configuration value is missing its type, out of range, or an unknown key.
    #[error("INVALID_CONFIG: {0}")]
    InvalidConfig(String),
    /// An argument to an operation has the wrong type or value, or the operation is not allowed now.
    #[error("INVALID_ARGUMENT: {0}")]
    InvalidArgument(String),
    /// A BudgetBreaker event is malformed.
    #[error("INVALID_EVENT: {0}")]
    InvalidEvent(String),
    /// A snapshot (or a state file) is malformed, of another kind, or of an unknown version.
    #[error("INVALID_SNAPSHOT: {0}")]
    InvalidSnapshot(String),
    /// Reading or writing a state file failed.
    #[error("IO: {0}")]
    Io(String),
    /// A bug: a panic caught at a language boundary.
    #[error("INTERNAL: {0}")]
    Internal(String),
    /// A guarded call was refused because the circuit is open; carries the refusal message.
    #[error("CIRCUIT_OPEN: {0}")]
    CircuitOpen(String),
    /// A Monitor halted the task: raised where a halt must stop the caller's code (a framework's
    /// hook, a guarded tool call) rather than be returned as a verdict; carries the verdict's
    /// message.
    #[error("HALTED: {0}")]
    Halted(String),
}

impl Error {
    /// The stable code string (`"INVALID_CONFIG"`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidConfig(_) => "INVALID_CONFIG",
            Error::InvalidArgument(_) => "INVALID_ARGUMENT",
            Error::InvalidEvent(_) => "INVALID_EVENT",
            Error::InvalidSnapshot(_) => "INVALID_SNAPSHOT",
            Error::Io(_) => "IO",
            Error::Internal(_) => "INTERNAL",
            Error::CircuitOpen(_) => "CIRCUIT_OPEN",
            Error::Halted(_) => "HALTED",
        }
    }

    /// The stable number of the code, for C (`0` is reserved for success).
    pub fn number(&self) -> i32 {
        match self {
            Error::InvalidConfig(_) => 1,
            Error::InvalidArgument(_) => 2,
            Error::InvalidEvent(_) => 3,
            Error::InvalidSnapshot(_) => 4,
            Error::Io(_) => 5,
            Error::Internal(_) => 6,
            Error::CircuitOpen(_) => 7,
            Error::Halted(_) => 8,
        }
    }

    /// The message without the code prefix.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidConfig(m)
            | Error::InvalidArgument(m)
            | Error::InvalidEvent(m)
            | Error::InvalidSnapshot(m)
            | Error::Io(m)
            | Error::Internal(m)
            | Error::CircuitOpen(m)
            | Error::Halted(m) => m,
        }
    }

    pub(crate) fn config(msg: impl fmt::Display) -> Self {
        Error::InvalidConfig(bounded(msg))
    }

    pub(crate) fn argument(msg: impl fmt::Display) -> Self {
        Error::InvalidArgument(bounded(msg))
    }

    pub(crate) fn event(msg: impl fmt::Display) -> Self {
        Error::InvalidEvent(bounded(msg))
    }

    pub(crate) fn snapshot(msg: impl fmt::Display) -> Self {
        Error::InvalidSnapshot(bounded(msg))
    }

    pub(crate) fn io(msg: impl fmt::Display) -> Self {
        Error::Io(bounded(msg))
    }
}

/// The longest error message, in bytes: a message quotes the bad input, which may be 10 MB.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `msg` formatted, cut to [`MAX_MESSAGE_BYTES`] (at a character boundary) with `…` after a cut.
/// Formatting stops at the cut, so a huge input costs no more than a small one.
pub(crate) fn bounded(msg: impl fmt::Display) -> String {
    struct Bounded {
        out: String,
        cut: bool,
    }
    impl fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let room = MAX_MESSAGE_BYTES - self.out.len();
            if s.len() <= room {
                self.out.push_str(s);
                return Ok(());
            }
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.out.push_str(&s[..end]);
            self.cut = true;
            Err(fmt::Error) // stop formatting
        }
    }
    let mut w = Bounded {
        out: String::new(),
        cut: false,
    };
    let _ = fmt::write(&mut w, format_args!("{msg}"));
    if w.cut {
        w.out.push('…');
    }
    w.out
}

/// All error codes, in number order (for bindings that build one exception class per code).
pub const ERROR_CODES: [&str; 8] = [
    "INVALID_CONFIG",
    "INVALID_ARGUMENT",
    "INVALID_EVENT",
    "INVALID_SNAPSHOT",
    "IO",
    "INTERNAL",
    "CIRCUIT_OPEN",
    "HALTED",
];

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error of a guarded call ([`crate::FailureBreaker::call`]): either the breaker refused to run
/// the function, or the function ran and failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError<E> {
    /// Refused without running the function: always [`Error::CircuitOpen`].
    Rejected(Error),
    /// The function ran and returned this error (recorded as a failure).
    Failed(E),
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rejected(e) => e.fmt(f),
            CallError::Failed(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for CallError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Rejected(e) => Some(e),
            CallError::Failed(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_bounded_and_cut_at_a_char_boundary() {
        let huge = "é".repeat(5_000_000); // 10 MB
        let e = Error::config(format_args!("bad value {huge:?}"));
        assert!(e.message().len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
        assert!(e.message().starts_with("bad value \"éé"));
        assert!(e.message().ends_with('…'));
        assert_eq!(Error::argument("short").message(), "short");
        let exact = "x".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(Error::io(&exact).message(), exact);
    }

    #[test]
    fn codes_and_numbers_are_stable() {
        let all = [
            Error::InvalidConfig(String::new()),
            Error::InvalidArgument(String::new()),
            Error::InvalidEvent(String::new()),
            Error::InvalidSnapshot(String::new()),
            Error::Io(String::new()),
            Error::Internal(String::new()),
            Error::CircuitOpen(String::new()),
            Error::Halted(String::new()),
        ];
        for (i, e) in all.iter().enumerate() {
            assert_eq!(e.code(), ERROR_CODES[i]);
            assert_eq!(e.number(), i as i32 + 1);
        }
    }

    #[test]
    fn display_starts_with_code() {
        let e = Error::config("failureThreshold must be >= 1");
        assert_eq!(
            e.to_string(),
            "INVALID_CONFIG: failureThreshold must be >= 1"
        );
        assert_eq!(e.message(), "failureThreshold must be >= 1");
    }
}
