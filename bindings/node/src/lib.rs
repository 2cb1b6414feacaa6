//! The Node.js binding of agentbreaker (napi-rs). It converts types and errors and nothing else:
//! every rule lives in the `agentbreaker` crate, every conversion rule in `agentbreaker::interop`.
//!
//! One conversion file (`convert`), one error file (`error`); every export runs inside
//! [`error::run`]: a panic is `INTERNAL`, a core error is thrown with its stable `code`, and
//! listeners are called synchronously on the JavaScript thread. `agentbreaker.js` (the package
//! entry) adds `call(fn, ...args)`, `on()`, `off()` and `AgentHaltedError`.

/// What every class over a core event source writes alike. The class is a struct holding the
/// core object (`inner`) and its JavaScript listeners (`listeners`); this gives it `From` its core
/// object and one `#[napi] impl` block with:
/// - `"doc" fn new("TS args") = |config, clock| make;`: the constructor `new X(config?, clock?)`
///   ([`clock::construct`]);
/// - `"doc" fn getStatus() -> "TsType" = status;` and `"doc" fn reset() = reset;`: the core
///   object's method of the name after `=`, its result returned as a JavaScript value, or nothing;
/// - `"doc" fn restore(snapshot: Snapshot "TS args") = restore_json;` (or `-> "TsType"`): the
///   same with the argument as JSON, refused with the code of its kind (here `INVALID_SNAPSHOT`);
/// - the `listenerErrors` getter and the hidden `_addListener`/`_removeListener` (for the event
///   types after `emits`) that `agentbreaker.js` builds `on()` and `off()` on.
///
/// Docs are strings, not doc comments: a doc comment passed through a macro reaches napi-derive
/// as a raw string, which it copies into index.d.ts with its `r"`.
macro_rules! methods {
    ($class:ident($inner:ty) emits [$($event:tt),*] { $($methods:tt)* }) => {
        impl From<$inner> for $class {
            fn from(inner: $inner) -> Self {
                $class { inner, listeners: Default::default() }
            }
        }
        methods!(@munch $class [$($event),*] [] $($methods)*);
    };
    (@munch $class:ident [$($event:tt),*] [$($out:tt)*]) => {
        #[napi_derive::napi]
        impl $class {
            $($out)*

            /// Listener calls that threw.
            #[napi(getter, catch_unwind)]
            pub fn listener_errors(&self) -> f64 {
                self.inner.listener_errors() as f64
            }

            #[doc(hidden)]
            #[napi(js_name = "_addListener", catch_unwind, skip_typescript)]
            pub fn add_js_listener(
                &self,
                env: &napi::Env,
                kind: napi::bindgen_prelude::Unknown<'_>,
                listener: $crate::listeners::ListenerArg<'_>,
            ) -> $crate::error::Result<u32> {
                let (register, types) = (|l| self.inner.add_listener(l), &[$($event),*]);
                $crate::error::run(env, || self.listeners.add(register, types, &kind, &listener))
            }

            #[doc(hidden)]
            #[napi(js_name = "_removeListener", catch_unwind, skip_typescript)]
            pub fn remove_js_listener(&self, env: &napi::Env, id: $crate::error::Arg<'_>) -> $crate::error::Result<bool> {
                let unregister = |l| self.inner.remove_listener(l);
                $crate::error::run(env, || self.listeners.remove(unregister, id.as_ref()))
            }
        }
    };
    (@munch $class:ident $events:tt [$($out:tt)*] $doc:tt
        fn new($ts_args:tt) = |$config:ident, $clock:ident| $make:expr; $($rest:tt)*) => {
        methods!(@munch $class $events [$($out)*
            #[doc = $doc]
            #[napi(constructor, catch_unwind, ts_args_type = $ts_args)]
            pub fn new(
                env: &napi::Env,
                config: $crate::error::Arg<'_>,
                clock: $crate::clock::ClockArg<'_>,
            ) -> $crate::error::Result<Self> {
                $crate::clock::construct(env, &config, &clock, |$config, $clock| $make)
            }
        ] $($rest)*);
    };
    (@munch $class:ident $events:tt [$($out:tt)*] $doc:tt fn $name:ident() -> $ts:tt = $core:ident; $($rest:tt)*) => {
        methods!(@munch $class $events [$($out)*
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
    (@munch $class:ident $events:tt [$($out:tt)*] $doc:tt
        fn $name:ident($arg:ident: $kind:ident $ts_args:tt) -> $ts:tt = $core:ident; $($rest:tt)*) => {
        methods!(@munch $class $events [$($out)*
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
    (@munch $class:ident $events:tt [$($out:tt)*] $doc:tt
        fn $name:ident($arg:ident: $kind:ident $ts_args:tt) = $core:ident; $($rest:tt)*) => {
        methods!(@munch $class $events [$($out)*
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
    (@munch $class:ident $events:tt [$($out:tt)*] $doc:tt fn $name:ident() = $core:ident; $($rest:tt)*) => {
        methods!(@munch $class $events [$($out)*
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
pub use monitor::{Monitor, metric_definitions, metric_updates};
pub use stagnation::StagnationBreaker;
pub use strategy::{ExitStrategy, FixPlan, analyze, fingerprint};
