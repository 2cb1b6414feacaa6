//! The Node.js binding of agentbreaker (napi-rs). It converts types and errors and nothing else:
//! every rule lives in the `agentbreaker` crate, every conversion rule in `agentbreaker::interop`.
//!
//! One conversion file (`convert`), one error file (`error`); every export runs inside
//! [`error::run`]: a panic is `INTERNAL`, a core error is thrown with its stable `code`, and
//! listeners are called synchronously on the JavaScript thread. `agentbreaker.js` (the package
//! entry) adds `call(fn, ...args)`, `on()`, `off()` and `AgentHaltedError`.

/// The `#[napi] impl` block of a class, its methods written in a short form; the work of each
/// runs in [`error::js`], its value converted by napi. `methods!(X(Core) emits ["type", ...] {
/// ... })` is the block of a class over a core event source (a tuple struct of the core object,
/// `X(Core)`): it also gives `X` `From<Core>`, and ends
/// with the `listenerErrors` getter and the hidden `_addListener`/`_removeListener` (for the
/// event types after `emits`) that `agentbreaker.js` builds `on()` and `off()` on.
/// `methods!(X { ... })` is a plain block. The forms:
/// - `"doc" fn new("TS args");`: the constructor `new X(config?, clock?)`: the config as JSON
///   (refused with `INVALID_CONFIG`), the clock ([`clock::shared_clock`]) and the core object
///   they make (`interop::FromConfig`, or with `= |config, clock| make;` `make`);
/// - `"doc" fn name(a, b) "TS args" -> "TsType" = |inner, env| work;`: a method with optional
///   arguments `a` and `b` ([`error::Arg`]), `work` a `Result<T, Failure>` of `inner`, the
///   object's first field (the core object; the core clock of a `ManualClock`);
///   `fn name() [getter] -> "TsType" = ...` is a getter;
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
                $class(core.into())
            }
        }
        methods!(@munch $class [$core] [
            #[doc(hidden)]
            #[napi(js_name = "_addListener", catch_unwind, skip_typescript)]
            pub fn add_js_listener(
                &self,
                env: &napi::Env,
                kind: napi::bindgen_prelude::Unknown<'_>,
                listener: $crate::listeners::ListenerArg<'_>,
            ) -> $crate::error::Result<f64> {
                let (register, types) = (|l| self.0.add_listener(l), &[$($event),*]);
                let add = $crate::listeners::add;
                $crate::error::run(env, || add(register, types, &kind, &listener))
            }

            #[doc(hidden)]
            #[napi(js_name = "_removeListener", catch_unwind, skip_typescript)]
            pub fn remove_js_listener(&self, env: &napi::Env, id: $crate::error::Arg<'_>) -> $crate::error::Result<bool> {
                let unregister = |l| self.0.remove_listener(l);
                $crate::error::run(env, || $crate::listeners::remove(unregister, id.as_ref()))
            }
        ] [] $($methods)* "Listener calls that threw."
            fn listener_errors() [getter] -> "number"
            = |inner, env| Ok(inner.listener_errors() as f64);
        );
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
    (@munch $class:ident [$core:ty] $tail:tt [$($out:tt)*] $($doc:literal)+
        fn new($ts_args:tt) $(= |$config:ident, $clock:ident| $make:expr)?; $($rest:tt)*) => {
        methods!(@munch $class [$core] $tail [$($out)*
            $(#[doc = $doc])+
            #[napi(constructor, catch_unwind, ts_args_type = $ts_args)]
            pub fn new(
                env: &napi::Env,
                config: $crate::error::Arg<'_>,
                clock: $crate::clock::ClockArg<'_>,
            ) -> $crate::error::Result<Self> {
                use agentbreaker::interop::ArgKind;
                $crate::error::run(env, || {
                    let config = config.as_ref();
                    let config = $crate::convert::opt_json(config, ArgKind::Config, "config")?;
                    let make = methods!(@make [$core] $(
                        |$config: &serde_json::Value, $clock| -> agentbreaker::Result<_> { $make }
                    )?);
                    Ok(Self::from(make(&config, $crate::clock::shared_clock(&clock)?)?))
                })
            }
        ] $($rest)*);
    };
    (@munch $class:ident $core:tt $tail:tt $out:tt $($doc:literal)+
        fn $name:ident($($arg:ident: $kind:ident $ts_args:tt)?) -> $ts:tt = $f:ident;
        $($rest:tt)*) => {
        methods!(@munch $class $core $tail $out $($doc)+ fn $name($($arg)?) $($ts_args)? -> $ts
            = |inner, env| {
                $crate::convert::result(env, &methods!(@call inner.$f($($arg $kind)?)))
            };
            $($rest)*);
    };
    (@munch $class:ident $core:tt $tail:tt $out:tt $($doc:literal)+
        fn $name:ident($($arg:ident: $kind:ident $ts_args:tt)?) = $f:ident; $($rest:tt)*) => {
        methods!(@munch $class $core $tail $out $($doc)+ fn $name($($arg)?) $($ts_args)? -> "void"
            = |inner, env| Ok(methods!(@call inner.$f($($arg $kind)?))); $($rest)*);
    };
    (@call $inner:ident.$f:ident()) => { $inner.$f() };
    (@call $inner:ident.$f:ident($arg:ident $kind:ident)) => {{
        let kind = agentbreaker::interop::ArgKind::$kind;
        $inner.$f(&$crate::convert::opt_json($arg.as_ref(), kind, stringify!($arg))?)?
    }};
    (@munch $class:ident $core:tt $tail:tt [$($out:tt)*] $($doc:literal)+
        fn $name:ident($($arg:ident),*) $([$getter:ident])? $($ts_args:literal)? -> $ts:tt
        = |$inner:ident, $env:ident| $work:expr; $($rest:tt)*) => {
        methods!(@munch $class $core $tail [$($out)*
            $(#[doc = $doc])+
            #[napi($($getter,)? catch_unwind, $(ts_args_type = $ts_args,)? ts_return_type = $ts)]
            pub fn $name<'e>(
                &self,
                $env: &'e napi::Env,
                $($arg: $crate::error::Arg<'_>),*
            ) -> $crate::error::Result<napi::bindgen_prelude::Unknown<'e>> {
                let $inner = &self.0;
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

// The exported functions are used only by their napi registration, which rustc does not see.
pub use env::{config_from_env, profile, profile_names};
pub use monitor::{metric_definitions, metric_updates};
pub use strategy::{analyze, fingerprint};
