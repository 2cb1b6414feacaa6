//! Configuration from the environment, and the named profiles of the three breakers.

use agentbreaker::interop::ArgKind;
use napi::Env;
use napi::bindgen_prelude::{JsObjectValue, Object, Unknown};
use napi_derive::napi;

use crate::convert::{result, string, to_json};
use crate::error::{self, Arg, run};

/// Reads the BudgetBreaker settings (`AGENTBREAKER_TOOL_CAP`, `_COST_CAP_CENTS`,
/// `_DURATION_SECS`, `_IDLE_SECS`, `_JACCARD`, and the seed's `BB_CIRCUIT_BREAKER_*` aliases)
/// from `env` (default: `process.env`). Invalid values fall back to the defaults and are
/// reported in `warnings`; the result's `config` is a full BudgetBreaker config.
#[napi(
    catch_unwind,
    ts_args_type = "env?: Record<string, string | undefined> | null",
    ts_return_type = "EnvConfig"
)]
pub fn config_from_env<'e>(env: &'e Env, vars: Arg<'_>) -> error::Result<Unknown<'e>> {
    run(env, || {
        let vars = match vars.as_ref() {
            Some(v) => to_json(v, ArgKind::Argument, "env")?,
            None => {
                let process: Object<'_> = env.get_global()?.get_named_property("process")?;
                let process_env: Unknown<'_> = process.get_named_property("env")?;
                to_json(&process_env, ArgKind::Argument, "process.env")?
            }
        };
        result(env, &agentbreaker::config_from_env_json(&vars)?)
    })
}

/// The named configuration of the three breakers called `name` (`'seed'`: the seeds' defaults;
/// `'coding-agent'`: the step detectors on, tuned on real trajectories), or `null`. Its
/// `failure`, `stagnation` and `budget` configs go straight into the constructors.
#[napi(
    catch_unwind,
    ts_args_type = "name: ProfileName | (string & {})",
    ts_return_type = "Profile | null"
)]
pub fn profile<'e>(env: &'e Env, name: Arg<'_>) -> error::Result<Unknown<'e>> {
    run(env, || {
        result(env, &agentbreaker::profile(&string(name.as_ref(), "name")?))
    })
}

/// The names `profile()` knows.
#[napi(catch_unwind, ts_return_type = "ProfileName[]")]
pub fn profile_names<'e>(env: &'e Env) -> error::Result<Unknown<'e>> {
    run(env, || result(env, &agentbreaker::PROFILE_NAMES))
}
