//! The C ABI of agentbreaker: `libagentbreaker.so` / `libagentbreaker.a` and the cbindgen-generated
//! `include/agentbreaker.h`.
//!
//! This crate converts types and errors and nothing else: C strings into `&str`, JSON strings into
//! `serde_json::Value` for the core's `from_json` validators, results into JSON strings with the
//! SPEC's keys, core errors into `ab_status` values. Every rule of the contract lives in the core.
//!
//! Conventions (after rustls-ffi), written out in the header and the README:
//! - every name starts with `ab_`; opaque handles are created by `_new` and released by `_free`
//!   (a NULL `_free` is a no-op, a double `_free` is undefined behaviour);
//! - every fallible function returns an [`status::ab_status`] (`AB_OK = 0`, the core's stable error
//!   numbers, `AB_ERR_NULL_ARG`); out-parameters are written only when it returns `AB_OK`;
//! - a thread-local message describes the last failure (`ab_last_error_message`);
//! - every pointer is NULL-checked, every string must be UTF-8 (`AB_ERR_INVALID_ARGUMENT`
//!   otherwise), and every body runs inside a panic boundary (a panic is `AB_ERR_INTERNAL`, never
//!   an abort);
//! - structured results are JSON strings released by `ab_string_free`; configs are JSON strings
//!   (NULL = defaults).

// A C ABI cannot be written without `unsafe`: every entry point receives raw pointers from C
// (handles, strings, out-parameters, callbacks and their `user_data`) and must dereference them.
// The workspace denies `unsafe_code`; this crate allows it (and, for the Lua C API hot paths, the Lua binding's `capi` module). Each `unsafe` block is as small
// as possible and carries a `SAFETY:` comment naming the caller contract it relies on; the raw
// pointer handling is concentrated in `ffi.rs` and `listener.rs`.
#![allow(unsafe_code)]
// The exported names follow C conventions (`ab_failure_breaker`, `AB_OK`), as the header shows them.
#![allow(non_camel_case_types)]

// The modules in the order the header lists them (cbindgen keeps source order); each group is
// separated by a blank line so that rustfmt keeps that order.
mod ffi;
pub mod status;

pub mod clock;

pub mod listener;

pub mod failure;

pub mod stagnation;

pub mod budget;

pub mod env;

pub mod strategy;

pub mod agent_loop;

pub mod monitor;
