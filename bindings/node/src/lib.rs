//! The Node.js binding of agentbreaker (napi-rs). It converts types and errors and nothing else:
//! every rule lives in the `agentbreaker` crate, every conversion rule in `agentbreaker::interop`.
//!
//! One conversion file (`convert`), one error file (`error`); every export runs inside
//! [`error::run`]: a panic is `INTERNAL`, a core error is thrown with its stable `code`, and
//! listeners are called synchronously on the JavaScript thread. `agentbreaker.js` (the package
//! entry) adds `call(fn, ...args)`, `on()`, `off()` and `AgentHaltedError`.

/// The `#[napi] impl` block of a class, its methods written in a short form; the work of each
/// runs in [`error::js`], its value converted by napi. `methods!(X(Core) emits ["type", ...] {
/// ... })` is the block of a class over a core event source (a struct holding the core object,
/// `inner`, and its JavaScript listeners, `listeners`): it also gives `X` `From<Core>`, and ends
/// with the `listenerErrors` getter and the hidden `_addListener`/`_removeListener` (for the
/// event types after `emits`) that `agentbreaker.js` builds `on()` and `off()` on.
/// `methods!(X { ... })` is a plain block. The forms:
/// - `"doc" fn new("TS args");`: the constructor `new X(config?, clock?)` ([`clock::construct`])
///   of the core's `FromConfig`, or with `= |config, clock| make;` of `make`;
/// - `"doc" fn name(a, b) "TS args" -> "TsType" = |inner, env| work;`: a method with optional
///   arguments `a` and `b` ([`error::Arg`]), `work` a `Result<T, Failure>` of the `inner` field;
/// - `"doc" get name -> "TsType" = |inner, env| work;`: the same as a getter;
/// - `"doc" fn getStatus() -> "TsType" = status;` and `"doc" fn reset() = reset;`: the core
///   object's method of the name after `=`, its result returned as a JavaScript value, or nothing;
/// - `"doc" fn restore(snapshot: Snapshot "TS args") = restore_json;` (or `-> "TsType"`): the
///   same with the argument as JSON, refused with the code of its kind (here `INVALID_SNAPSHOT`).
///
/// Docs are strings, one a line, not doc comments: a doc comment passed through a macro reaches
/// napi-derive as a raw string, which it copies into index.d.ts with its `r"`.
macro_rules! methods {
    ($class:ident { $($methods:tt)* }) => {
        methods!(@munch $class [_] [] [] $($methods)*);
    };
    ($class:ident($core:ty) emits [$($event:tt),*] { $($methods:tt)* }) => {
        impl From<$core> for $class {
            fn from(core: $core) -> Self {
                $class { inner: core.into(), listeners: Default::default() }
            }
        }
        methods!(@munch $class [$core] [
            #[doc = "Listener calls that threw."]
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
        ] [] $($methods)*);
    };
    (@make [$core:ty]) => { <$core as agentbreaker::interop::FromConfig>::from_config };
    (@make [$core:ty] $make:expr) => { $make };
    (@munch $class:ident $core:tt [$($tail:tt)*] [$($out:tt)*]) => {
        #[napi_derive::napi]
        impl $class {
            $($out)*
            $($tail)*
        }
    };
    (@munch $class:ident $core:tt $tail:tt [$($out:tt)*] $($doc:literal)+
        fn new($ts_args:tt) $(= |$config:ident, $clock:ident| $make:expr)?; $($rest:tt)*) => {
        methods!(@munch $class $core $tail [$($out)*
            $(#[doc = $doc])+
            #[napi(constructor, catch_unwind, ts_args_type = $ts_args)]
            pub fn new(
                env: &napi::Env,
                config: $crate::error::Arg<'_>,
                clock: $crate::clock::ClockArg<'_>,
            ) -> $crate::error::Result<Self> {
                $crate::clock::construct(env, &config, &clock, {
                    methods!(@make $core $(|$config, $clock| $make)?)
                })
            }
        ] $($rest)*);
    };
    (@munch $class:ident $core:tt $tail:tt $out:tt $($doc:literal)+
        fn $name:ident() -> $ts:tt = $f:ident; $($rest:tt)*) => {
        methods!(@munch $class $core $tail $out $($doc)+ fn $name() "" -> $ts
            = |inner, env| $crate::convert::result(env, &inner.$f()); $($rest)*);
    };
    (@munch $class:ident $core:tt $tail:tt $out:tt $($doc:literal)+
        fn $name:ident() = $f:ident; $($rest:tt)*) => {
        methods!(@munch $class $core $tail $out $($doc)+ fn $name() "" -> "void"
            = |inner, env| Ok(inner.$f()); $($rest)*);
    };
    (@munch $class:ident $core:tt $tail:tt $out:tt $($doc:literal)+
        fn $name:ident($arg:ident: $kind:ident $ts_args:tt) -> $ts:tt = $f:ident; $($rest:tt)*) => {
        methods!(@munch $class $core $tail $out $($doc)+ fn $name($arg) $ts_args -> $ts
            = |inner, env| $crate::convert::result(env, &inner.$f(&methods!(@json $arg $kind))?);
            $($rest)*);
    };
    (@munch $class:ident $core:tt $tail:tt $out:tt $($doc:literal)+
        fn $name:ident($arg:ident: $kind:ident $ts_args:tt) = $f:ident; $($rest:tt)*) => {
        methods!(@munch $class $core $tail $out $($doc)+ fn $name($arg) $ts_args -> "void"
            = |inner, env| Ok(inner.$f(&methods!(@json $arg $kind))?); $($rest)*);
    };
    (@json $arg:ident $kind:ident) => {{
        let kind = agentbreaker::interop::ArgKind::$kind;
        $crate::convert::opt_json($arg.as_ref(), kind, stringify!($arg))?
    }};
    (@munch $class:ident $core:tt $tail:tt [$($out:tt)*] $($doc:literal)+
        fn $name:ident($($arg:ident),*) $ts_args:tt -> $ts:tt
        = |$inner:ident, $env:ident| $work:expr; $($rest:tt)*) => {
        methods!(@munch $class $core $tail [$($out)*
            $(#[doc = $doc])+
            #[napi(catch_unwind, ts_args_type = $ts_args, ts_return_type = $ts)]
            pub fn $name<'e>(
                &self,
                $env: &'e napi::Env,
                $($arg: $crate::error::Arg<'_>),*
            ) -> $crate::error::Result<napi::bindgen_prelude::Unknown<'e>> {
                let $inner = &self.inner;
                $crate::error::js($env, || $work)
            }
        ] $($rest)*);
    };
    (@munch $class:ident $core:tt $tail:tt [$($out:tt)*] $($doc:literal)+
        get $name:ident -> $ts:tt = |$inner:ident, $env:ident| $work:expr; $($rest:tt)*) => {
        methods!(@munch $class $core $tail [$($out)*
            $(#[doc = $doc])+
            #[napi(getter, catch_unwind, ts_return_type = $ts)]
            pub fn $name<'e>(
                &self,
                $env: &'e napi::Env,
            ) -> $crate::error::Result<napi::bindgen_prelude::Unknown<'e>> {
                let $inner = &self.inner;
                $crate::error::js($env, || $work)
            }
        ] $($rest)*);
    };
}

/// Exported functions in the short form of [`methods!`]: `"doc" fn name(a, b) "TS args" ->
/// "TsType" = |env| work;`.
macro_rules! functions {
    ($($($doc:literal)+ fn $name:ident($($arg:ident),*) $ts_args:tt -> $ts:tt
        = |$env:ident| $work:expr;)*) => {$(
        $(#[doc = $doc])+
        #[napi_derive::napi(catch_unwind, ts_args_type = $ts_args, ts_return_type = $ts)]
        pub fn $name<'e>(
            $env: &'e napi::Env,
            $($arg: $crate::error::Arg<'_>),*
        ) -> $crate::error::Result<napi::bindgen_prelude::Unknown<'e>> {
            $crate::error::js($env, || $work)
        }
    )*};
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
