//! Errors thrown to JavaScript, and the guard every export runs its work in.
//!
//! Every error thrown by the addon is an `Error` whose `code` is one of the core's stable codes
//! (`INVALID_CONFIG`, `INVALID_ARGUMENT`, `INVALID_EVENT`, `INVALID_SNAPSHOT`, `IO`, `INTERNAL`,
//! `CIRCUIT_OPEN`) and whose `message` is the core's message without the code prefix. A value of
//! the wrong JavaScript type (a string where a number belongs, `undefined` for a required
//! argument, `NaN`, `Infinity`, a function, ...) is a `TypeError` with the code of the argument it
//! appears in. A panic is caught and thrown as `INTERNAL`; the object stays usable.

use std::panic::{AssertUnwindSafe, catch_unwind};

use napi::Env;

use crate::listeners::EnvScope;

/// The `code` property of a thrown error (napi-rs puts `status` there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(&'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// napi-rs does not throw again when an error carries this status and an exception is already
/// pending: that is how a `TypeError` thrown through [`Env::throw_type_error`] reaches JavaScript.
pub const PENDING: Code = Code("PendingException");

/// What an export returns.
pub type JsResult<T> = napi::Result<T, Code>;

/// A failure inside an export, before it is thrown.
#[derive(Debug)]
pub enum Failure {
    /// An error of the core, thrown with its code.
    Core(agentbreaker::Error),
    /// A value of the wrong JavaScript type, thrown as a `TypeError` with this code.
    Type(&'static str, String),
    /// A napi call failed (usually because JavaScript code it ran threw: that exception is
    /// rethrown as it is).
    Napi(napi::Error),
}

impl From<agentbreaker::Error> for Failure {
    fn from(e: agentbreaker::Error) -> Self {
        Failure::Core(e)
    }
}

impl From<napi::Error> for Failure {
    fn from(e: napi::Error) -> Self {
        Failure::Napi(e)
    }
}

/// The code a conversion failure is reported with: the code of the argument's validator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A constructor's config: `INVALID_CONFIG`.
    Config,
    /// An operation's argument: `INVALID_ARGUMENT`.
    Argument,
    /// A BudgetBreaker event: `INVALID_EVENT`.
    Event,
    /// A snapshot: `INVALID_SNAPSHOT`.
    Snapshot,
}

impl Context {
    /// The stable code of this context.
    pub fn code(self) -> &'static str {
        match self {
            Context::Config => "INVALID_CONFIG",
            Context::Argument => "INVALID_ARGUMENT",
            Context::Event => "INVALID_EVENT",
            Context::Snapshot => "INVALID_SNAPSHOT",
        }
    }

    /// A `TypeError` of this context.
    pub fn type_error(self, message: impl Into<String>) -> Failure {
        Failure::Type(self.code(), message.into())
    }
}

/// An `INTERNAL` error (a bug: a panic, or a value napi could not create).
pub fn internal(message: impl Into<String>) -> Failure {
    Failure::Core(agentbreaker::Error::Internal(message.into()))
}

impl Failure {
    /// Turns the failure into the error napi-rs throws when the export returns.
    fn into_js(self, env: &Env) -> napi::Error<Code> {
        match self {
            Failure::Core(e) => napi::Error::new(Code(e.code()), e.message()),
            Failure::Type(code, message) => match env.throw_type_error(&message, Some(code)) {
                Ok(()) => napi::Error::new(PENDING, message),
                Err(_) => napi::Error::new(Code(code), message),
            },
            Failure::Napi(e) if e.status == napi::Status::PendingException => {
                // JavaScript code the conversion ran (a getter, a Proxy trap) threw: napi-rs
                // rethrows that exception unchanged.
                napi::Error::new(PENDING, e.reason)
            }
            Failure::Napi(e) => napi::Error::new(
                Code("INTERNAL"),
                format!("napi call failed ({}): {}", e.status.as_ref(), e.reason),
            ),
        }
    }
}

/// Runs an export's work: with the env recorded for listeners (events are delivered
/// synchronously, inside the call that caused them), panics caught as `INTERNAL`, and failures
/// turned into JavaScript errors.
pub fn run<T>(env: &Env, work: impl FnOnce() -> Result<T, Failure>) -> JsResult<T> {
    let _scope = EnvScope::enter(env);
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(failure)) => Err(failure.into_js(env)),
        Err(panic) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err(internal(format!("panic: {text}")).into_js(env))
        }
    }
}
