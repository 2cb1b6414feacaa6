//! Configuration from the environment, and the named profiles of the three breakers.

use agentbreaker::interop::ArgKind;
use napi::bindgen_prelude::{JsObjectValue, Object, Unknown};

use crate::convert::{result, string, to_json};

functions! {
    "Reads the BudgetBreaker settings (`AGENTBREAKER_TOOL_CAP`, `_COST_CAP_CENTS`,"
    "`_DURATION_SECS`, `_IDLE_SECS`, `_JACCARD`, and the seed's `BB_CIRCUIT_BREAKER_*` aliases)"
    "from `env` (default: `process.env`). Invalid values fall back to the defaults and are"
    "reported in `warnings`; the result's `config` is a full BudgetBreaker config."
    fn config_from_env(vars) "env?: Record<string, string | undefined> | null" -> "EnvConfig"
        = |env| {
            let vars = match vars.as_ref() {
                Some(v) => to_json(v, ArgKind::Argument, "env")?,
                None => {
                    let process: Object<'_> = env.get_global()?.get_named_property("process")?;
                    let process_env: Unknown<'_> = process.get_named_property("env")?;
                    to_json(&process_env, ArgKind::Argument, "process.env")?
                }
            };
            result(env, &agentbreaker::config_from_env_json(&vars)?)
        };
    "The named configuration of the three breakers called `name` (`'seed'`: the seeds' defaults;"
    "`'coding-agent'`: the step detectors on, tuned on real trajectories), or `null`. Its"
    "`failure`, `stagnation` and `budget` configs go straight into the constructors."
    fn profile(name) "name: ProfileName | (string & {})" -> "Profile | null"
        = |env| result(env, &agentbreaker::profile(&string(name.as_ref(), "name")?));
    "The names `profile()` knows."
    fn profile_names() "" -> "ProfileName[]" = |env| result(env, &agentbreaker::PROFILE_NAMES);
}
