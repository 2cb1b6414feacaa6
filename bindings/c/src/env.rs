//! Configuration from the environment (SPEC 7).

use std::ffi::c_char;

use agentbreaker_core::interop::ArgKind;
use agentbreaker_core::{EnvConfig, config_from_env_json, config_from_process_env};

use crate::ffi::{self, Out, Result, boundary};
use crate::status::ab_status;

/// The environment named by `env_json`: a JSON object of strings, or the process environment for
/// NULL.
///
/// # Safety
///
/// `env_json` is NULL or a NUL-terminated string.
pub(crate) unsafe fn read_env(env_json: *const c_char) -> Result<EnvConfig> {
    if env_json.is_null() {
        return Ok(config_from_process_env());
    }
    // SAFETY: a non-NULL NUL-terminated string (this function's contract).
    let env = unsafe { ffi::json(env_json, "env_json", false, ArgKind::Argument) }?;
    Ok(config_from_env_json(&env)?)
}

/// Reads the BudgetBreaker settings from an environment (SPEC 7): `env_json` is a JSON object of
/// strings (`{"AGENTBREAKER_TOOL_CAP": "20", "BB_CIRCUIT_BREAKER_IDLE_SECS": "60"}`), or NULL to
/// read the process environment. Writes `{"config": {...a full BudgetBreaker config...},
/// "warnings": [{"variable", "value", "message"}]}` to `*out_json`; the `config` object can be
/// passed to `ab_budget_breaker_new` as it is. Invalid values fall back to the defaults with a
/// warning; `env_json` that is not an object of strings is `AB_ERR_INVALID_ARGUMENT`.
///
/// # Safety
///
/// `env_json` is NULL or a NUL-terminated string; `out_json` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ab_config_from_env(
    env_json: *const c_char,
    out_json: *mut *mut c_char,
) -> ab_status {
    boundary(|| {
        // SAFETY: NULL or valid pointers (this function's contract).
        let (env, out) = unsafe { (read_env(env_json)?, Out::new(out_json, "out_json")?) };
        out.write(ffi::json_string(&env)?);
        Ok(())
    })
}
