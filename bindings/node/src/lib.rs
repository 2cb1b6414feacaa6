//! The Node.js binding of agentbreaker (napi-rs). It converts types and errors and nothing else:
//! every rule lives in the `agentbreaker` crate, every conversion rule in `agentbreaker::interop`.
//!
//! One conversion file (`convert`), one error file (`error`); every export runs inside
//! [`error::run`]: a panic is `INTERNAL`, a core error is thrown with its stable `code`, and
//! listeners are called synchronously on the JavaScript thread. `agentbreaker.js` (the package
//! entry) adds `call(fn, ...args)`, `on()`, `off()` and `AgentHaltedError`.

/// A `#[napi] impl` block of methods that hand their argument, if any, to the core object's
/// method named after `=`, as JSON with the code of its kind (`snapshot: Snapshot` is
/// `INVALID_SNAPSHOT`): `"doc" fn getStatus() -> "TsType" = status;` returns the core's result as
/// a JavaScript value, `"doc" fn restore(snapshot: Snapshot "snapshot: TsType") = restore_json;`
/// nothing. Docs are strings, not doc comments: a doc comment passed through a macro reaches
/// napi-derive as a raw string, which it copies into index.d.ts with its `r"`.
macro_rules! core_methods {
    ($class:ident { $($methods:tt)* }) => {
        core_methods!(@munch $class [] $($methods)*);
    };
    (@munch $class:ident [$($out:tt)*]) => {
        #[napi_derive::napi]
        impl $class {
            $($out)*
        }
    };
    (@munch $class:ident [$($out:tt)*] $doc:tt fn $name:ident() -> $ts:tt = $core:ident; $($rest:tt)*) => {
        core_methods!(@munch $class [$($out)*
            #[doc = $doc]
            #[napi(catch_unwind, ts_return_type = $ts)]
            pub fn $name<'e>(
                &self,
                env: &'e napi::Env,
            ) -> $crate::error::Result<napi::bindgen_prelude::Unknown<'e>> {
                $crate::error::run(env, || $crate::convert::result(env, &self.inner.$core()))
            }
        ] $($rest)*);
    };
    (@munch $class:ident [$($out:tt)*] $doc:tt
        fn $name:ident($arg:ident: $kind:ident $ts_args:tt) -> $ts:tt = $core:ident; $($rest:tt)*) => {
        core_methods!(@munch $class [$($out)*
            #[doc = $doc]
            #[napi(catch_unwind, ts_args_type = $ts_args, ts_return_type = $ts)]
            pub fn $name<'e>(
                &self,
                env: &'e napi::Env,
                $arg: $crate::error::Arg<'_>,
            ) -> $crate::error::Result<napi::bindgen_prelude::Unknown<'e>> {
                use agentbreaker::interop::ArgKind;
                $crate::error::run(env, || {
                    let $arg = $crate::convert::opt_json($arg.as_ref(), ArgKind::$kind, stringify!($arg))?;
                    $crate::convert::result(env, &self.inner.$core(&$arg)?)
                })
            }
        ] $($rest)*);
    };
    (@munch $class:ident [$($out:tt)*] $doc:tt
        fn $name:ident($arg:ident: $kind:ident $ts_args:tt) = $core:ident; $($rest:tt)*) => {
        core_methods!(@munch $class [$($out)*
            #[doc = $doc]
            #[napi(catch_unwind, ts_args_type = $ts_args)]
            pub fn $name(&self, env: &napi::Env, $arg: $crate::error::Arg<'_>) -> $crate::error::Result<()> {
                use agentbreaker::interop::ArgKind;
                $crate::error::run(env, || {
                    let $arg = $crate::convert::opt_json($arg.as_ref(), ArgKind::$kind, stringify!($arg))?;
                    Ok(self.inner.$core(&$arg)?)
                })
            }
        ] $($rest)*);
    };
    (@munch $class:ident [$($out:tt)*] $doc:tt fn $name:ident() = $core:ident; $($rest:tt)*) => {
        core_methods!(@munch $class [$($out)*
            #[doc = $doc]
            #[napi(catch_unwind)]
            pub fn $name(&self, env: &napi::Env) -> $crate::error::Result<()> {
                $crate::error::run_void(env, || self.inner.$core())
            }
        ] $($rest)*);
    };
}

mod agent_loop;
mod budget;
mod clock;
mod convert;
mod env;
mod error;
mod failure;
mod listeners;
mod monitor;
mod stagnation;
mod strategy;

pub use agent_loop::Loop;
pub use budget::BudgetBreaker;
pub use clock::{ManualClock, SystemClock};
pub use env::{config_from_env, profile, profile_names};
pub use failure::FailureBreaker;
pub use monitor::Monitor;
pub use stagnation::StagnationBreaker;
pub use strategy::{ExitStrategy, FixPlan, analyze, fingerprint};
