//! The C ABI of agentbreaker: `libagentbreaker.so` / `libagentbreaker.a` and the cbindgen-generated
//! `include/agentbreaker.h`, whose opening comment (from `cbindgen.toml`) states the conventions
//! (after rustls-ffi): `ab_` names, opaque handles, an `ab_status` from every fallible call, the
//! thread-local last error, NULL-checked pointers, UTF-8 strings, JSON configs and results, and a
//! panic boundary around every body.
//!
//! This crate converts types and errors and nothing else: C strings into `&str`, JSON strings into
//! `serde_json::Value` for the core's `from_json` validators, results into JSON strings, core
//! errors into `ab_status` values. Every rule of the contract lives in the core. Each exported
//! function is a short call into the shared bodies of `ffi` (cbindgen reads the signatures and
//! doc comments from the source without expanding macros, so exports are written out).

// A C ABI cannot be written without `unsafe`: every entry point receives raw pointers from C
// (handles, strings, out-parameters, callbacks and their `user_data`) and must dereference them.
// The workspace denies `unsafe_code`; this crate allows it. Each `unsafe` block carries a
// `SAFETY:` comment naming the caller contract it relies on; the raw pointer handling is
// concentrated in `ffi.rs` and `listener.rs`.
#![allow(unsafe_code)]
// Every export's safety contract is the header's pointer conventions, stated once in its opening
// comment; an export with more to say (a callback, `_free`) has a `# Safety` section of its own.
#![allow(clippy::missing_safety_doc)]
// The exported names follow C conventions (`ab_failure_breaker`, `AB_OK`), as the header shows them.
#![allow(non_camel_case_types)]

// The modules in the order the header lists them (cbindgen keeps source order); each group is
// separated by a blank line so that rustfmt keeps that order.
/// What the modules of exports share.
mod prelude {
    pub(crate) use std::ffi::{c_char, c_void};

    pub(crate) use agentbreaker_core::interop::{self, ArgKind};

    pub(crate) use crate::clock::ab_manual_clock;
    pub(crate) use crate::ffi::{self, Out, boundary};
    pub(crate) use crate::listener::{self, Source, ab_listener_fn};
    pub(crate) use crate::status::{ab_state, ab_status};
}

mod ffi;
pub mod status;

pub mod clock;

pub mod listener;

pub mod failure;

pub mod stagnation;

pub mod budget;

pub mod strategy;

pub mod agent_loop;

pub mod monitor;
