//! Errors thrown to JavaScript, and the guard every export runs its work in.
//!
//! Every error the addon throws is an `Error` whose `code` is one of the core's stable codes
//! (`agentbreaker::ERROR_CODES`) and whose `message` is the core's message without the code
//! prefix. The code of a bad value is decided by `agentbreaker::interop` (the argument's
//! [`ArgKind`](agentbreaker::interop::ArgKind)); the binding only decides that a value refused
//! before the core saw it (`NaN`, a function, a number for a string) is thrown as a `TypeError`.
//! A panic is `INTERNAL` (`interop::panic_error`); the object stays usable.

use std::panic::{AssertUnwindSafe, catch_unwind};

use agentbreaker::Error;
use agentbreaker::interop::panic_error;
use napi::Env;
use napi::bindgen_prelude::{ToNapiValue, Unknown};

use crate::listeners::EnvScope;

/// The `code` property of a thrown error (napi-rs puts the status there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(&'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// napi-rs does not throw again when an error carries this status and an exception is already
/// pending: that is how a `TypeError` thrown through [`Env::throw_type_error`] (or an exception
/// of JavaScript code a conversion ran) reaches JavaScript unchanged.
pub const PENDING: Code = Code("PendingException");

/// What an export returns (napi-derive knows a result by its type's name, `Result`).
pub type Result<T> = napi::Result<T, Code>;

/// An optional argument of an export (napi passes `undefined` and `null` as `None`).
pub type Arg<'a> = Option<napi::bindgen_prelude::Unknown<'a>>;

/// A failure inside an export, before it is thrown.
#[derive(Debug)]
pub enum Failure {
    /// An error of the core, thrown as an `Error` with its code.
    Core(Error),
    /// A value of the wrong JavaScript type, thrown as a `TypeError` with the error's code.
    Type(Error),
    /// A napi call failed (usually because JavaScript code it ran threw: that exception is
    /// rethrown as it is).
    Napi(napi::Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl From<napi::Error> for Failure {
    fn from(e: napi::Error) -> Self {
        Failure::Napi(e)
    }
}

/// An `INTERNAL` error (a bug: a value napi could not create, a result serde could not write).
pub fn internal(message: impl std::fmt::Display) -> Failure {
    Failure::Core(Error::Internal(message.to_string()))
}

impl Failure {
    /// Turns the failure into the error napi-rs throws when the export returns.
    fn into_js(self, env: &Env) -> napi::Error<Code> {
        match self {
            Failure::Core(e) => napi::Error::new(Code(e.code()), e.message()),
            Failure::Type(e) => match env.throw_type_error(e.message(), Some(e.code())) {
                Ok(()) => napi::Error::new(PENDING, e.message()),
                Err(_) => napi::Error::new(Code(e.code()), e.message()),
            },
            Failure::Napi(e) if e.status == napi::Status::PendingException => {
                napi::Error::new(PENDING, e.reason)
            }
            Failure::Napi(e) => {
                let e = format!("napi call failed ({}): {}", e.status.as_ref(), e.reason);
                Failure::Core(Error::Internal(e)).into_js(env)
            }
        }
    }
}

/// Runs an export's work: with the env recorded for listeners (events are delivered
/// synchronously, inside the call that caused them), a panic turned into `INTERNAL`, and a
/// failure into a JavaScript error.
pub fn run<T>(env: &Env, work: impl FnOnce() -> std::result::Result<T, Failure>) -> Result<T> {
    let _scope = EnvScope::enter(env);
    catch_unwind(AssertUnwindSafe(work))
        .unwrap_or_else(|payload| Err(Failure::Core(panic_error(&*payload))))
        .map_err(|failure| failure.into_js(env))
}

/// [`run`] for work whose value napi converts (`()` is `undefined`): the methods of [`methods!`].
pub fn js<'e, T: ToNapiValue>(
    env: &'e Env,
    work: impl FnOnce() -> std::result::Result<T, Failure>,
) -> Result<Unknown<'e>> {
    run(env, || Ok(work()?.into_unknown(env)?))
}
