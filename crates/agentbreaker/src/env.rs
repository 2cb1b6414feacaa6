//! Configuration from the environment (contract §7). A bad variable never disables the breaker: it is
//! reported and the default is used.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::budget::BudgetConfig;
use crate::error::{Error, Result};
use crate::interop::type_name;
use crate::text::truncate;

/// The prefix of agentbreaker's own variables.
pub const PREFIX: &str = "AGENTBREAKER_";
/// The prefix of the seed's variables, read as aliases.
pub const SEED_PREFIX: &str = "BB_CIRCUIT_BREAKER_";

/// Other variables of this project that start with the prefix but are not budget settings: the
/// conformance suite's directory, and what the command-line tool reads itself (the Monitor's ladder
/// and where and how `agentbreaker hook` keeps its sessions, docs/cli.md and docs/hooks.md). Known,
/// so never reported as unknown: a user who sets them for the hook gets no warning on every call.
const OTHER_KNOWN: [&str; 5] = [
    "CONFORMANCE_DIR",
    "WARN_BEFORE",
    "BUDGET_WARN_PERCENT",
    "STATE_DIR",
    "HOOK_FSYNC",
];

/// How many characters of an offending value a warning repeats.
const MAX_WARNING_VALUE_CHARS: usize = 100;

/// The settings read from the environment, in the order warnings are reported.
const SETTINGS: [(&str, Kind); 5] = [
    ("TOOL_CAP", Kind::Whole),
    ("COST_CAP_CENTS", Kind::Whole),
    ("DURATION_SECS", Kind::Whole),
    ("IDLE_SECS", Kind::Whole),
    ("JACCARD", Kind::Fraction),
];

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A whole number >= 1.
    Whole,
    /// A number in (0, 1].
    Fraction,
}

/// A variable that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvWarning {
    /// The variable's name.
    pub variable: String,
    /// Its value (at most 100 characters).
    pub value: String,
    /// What was wrong and what was used instead.
    pub message: String,
}

/// The result of [`config_from_env`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvConfig {
    /// A full BudgetBreaker config: the valid variables over the defaults.
    pub config: BudgetConfig,
    /// Every variable that was ignored, and why.
    pub warnings: Vec<EnvWarning>,
}

fn warning(variable: &str, value: &str, message: String) -> EnvWarning {
    let value = match value.char_indices().nth(MAX_WARNING_VALUE_CHARS) {
        Some((i, _)) => &value[..i],
        None => value,
    };
    EnvWarning {
        variable: variable.to_string(),
        value: truncate(value, 4 * MAX_WARNING_VALUE_CHARS).to_string(),
        message,
    }
}

fn parse(kind: Kind, raw: &str) -> std::result::Result<f64, &'static str> {
    let s = raw.trim();
    match kind {
        Kind::Whole => match s.parse::<u64>() {
            Ok(0) => Err("must be a whole number >= 1"),
            Ok(n) => Ok(n as f64),
            Err(_) => Err("must be a whole number >= 1"),
        },
        Kind::Fraction => match s.parse::<f64>() {
            Ok(j) if j.is_finite() && j > 0.0 && j <= 1.0 => Ok(j),
            _ => Err("must be a number greater than 0 and at most 1"),
        },
    }
}

fn current(config: &BudgetConfig, setting: &str) -> String {
    match setting {
        "TOOL_CAP" => config.max_tool_calls_per_task.to_string(),
        "COST_CAP_CENTS" => config.max_token_spend_cents_per_task.to_string(),
        "DURATION_SECS" => config.max_task_duration_secs.to_string(),
        "IDLE_SECS" => config.max_idle_secs.to_string(),
        _ => config.similarity_jaccard_threshold.to_string(),
    }
}

fn apply(config: &mut BudgetConfig, setting: &str, value: f64) {
    match setting {
        "TOOL_CAP" => config.max_tool_calls_per_task = value as u64,
        "COST_CAP_CENTS" => config.max_token_spend_cents_per_task = value as u64,
        "DURATION_SECS" => config.max_task_duration_secs = value as u64,
        "IDLE_SECS" => config.max_idle_secs = value as u64,
        _ => config.similarity_jaccard_threshold = value,
    }
}

/// Reads the BudgetBreaker settings from an environment map (contract §7).
///
/// `AGENTBREAKER_TOOL_CAP`, `_COST_CAP_CENTS`, `_DURATION_SECS`, `_IDLE_SECS` and `_JACCARD`, with
/// the seed's `BB_CIRCUIT_BREAKER_*` names as aliases (the `AGENTBREAKER_` name decides when both
/// are set). Invalid values fall back to the defaults with a warning; so does an unknown variable
/// with either prefix.
pub fn config_from_env<I, K, V>(env: I) -> EnvConfig
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    apply_env(BudgetConfig::default(), env)
}

/// [`config_from_env`] on top of `base` instead of the defaults: valid variables override `base`,
/// invalid ones leave its value (with a warning). For layered settings (a config file, then the
/// environment).
pub fn apply_env<I, K, V>(base: BudgetConfig, env: I) -> EnvConfig
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let vars: BTreeMap<String, String> = env
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
        .filter(|(k, _)| k.starts_with(PREFIX) || k.starts_with(SEED_PREFIX))
        .collect();
    let mut config = base;
    let mut warnings = Vec::new();
    for (setting, kind) in SETTINGS {
        let primary = format!("{PREFIX}{setting}");
        let alias = format!("{SEED_PREFIX}{setting}");
        let (used, ignored_alias) = match (vars.get(&primary), vars.get(&alias)) {
            (Some(v), a) => ((primary.as_str(), v), a.map(|a| (alias.as_str(), a))),
            (None, Some(v)) => ((alias.as_str(), v), None),
            (None, None) => continue,
        };
        match parse(kind, used.1) {
            Ok(value) => apply(&mut config, setting, value),
            Err(problem) => warnings.push(warning(
                used.0,
                used.1,
                format!(
                    "{} {problem}; keeping {}",
                    used.0,
                    current(&config, setting)
                ),
            )),
        }
        if let Some((name, value)) = ignored_alias {
            warnings.push(warning(
                name,
                value,
                format!("{name} is ignored because {primary} is set"),
            ));
        }
    }
    for (name, value) in &vars {
        let setting = name
            .strip_prefix(PREFIX)
            .or_else(|| name.strip_prefix(SEED_PREFIX))
            .unwrap_or(name);
        let other = name.starts_with(PREFIX) && OTHER_KNOWN.contains(&setting);
        if !other && !SETTINGS.iter().any(|(s, _)| *s == setting) {
            warnings.push(warning(
                name,
                value,
                format!("{name} is an unknown variable and is ignored"),
            ));
        }
    }
    EnvConfig { config, warnings }
}

/// [`config_from_env`] over a JSON object of strings; a non-string value is `INVALID_ARGUMENT`.
pub fn config_from_env_json(env: &Value) -> Result<EnvConfig> {
    let Value::Object(map) = env else {
        return Err(Error::argument(format_args!(
            "env must be an object of strings, not {}",
            type_name(env)
        )));
    };
    let mut vars = Vec::with_capacity(map.len());
    for (k, v) in map {
        match v {
            Value::String(s) => vars.push((k.as_str(), s.as_str())),
            other => {
                return Err(Error::argument(format_args!(
                    "env[{k:?}] must be a string, not {}",
                    type_name(other)
                )));
            }
        }
    }
    Ok(config_from_env(vars))
}

/// [`config_from_env`] over the process environment (variables that are not valid Unicode are
/// skipped).
pub fn config_from_process_env() -> EnvConfig {
    config_from_env(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_without_variables() {
        let r = config_from_env([("PATH", "/bin")]);
        assert_eq!(r.config, BudgetConfig::default());
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn primary_alias_and_fallbacks() {
        let r = config_from_env([
            ("AGENTBREAKER_TOOL_CAP", " 20 "),
            ("BB_CIRCUIT_BREAKER_TOOL_CAP", "30"),
            ("BB_CIRCUIT_BREAKER_IDLE_SECS", "60"),
            ("AGENTBREAKER_JACCARD", "NaN"),
            ("AGENTBREAKER_DURATION_SECS", "-5"),
            ("AGENTBREAKER_COST_CAP_CENTS", "50.0"),
            ("AGENTBREAKER_TOOLCAP", "1"),
        ]);
        assert_eq!(r.config.max_tool_calls_per_task, 20);
        assert_eq!(r.config.max_idle_secs, 60);
        assert_eq!(r.config.similarity_jaccard_threshold, 0.95);
        assert_eq!(r.config.max_task_duration_secs, 1800);
        assert_eq!(r.config.max_token_spend_cents_per_task, 5000);
        let names: Vec<&str> = r.warnings.iter().map(|w| w.variable.as_str()).collect();
        assert_eq!(
            names,
            [
                "BB_CIRCUIT_BREAKER_TOOL_CAP",
                "AGENTBREAKER_COST_CAP_CENTS",
                "AGENTBREAKER_DURATION_SECS",
                "AGENTBREAKER_JACCARD",
                "AGENTBREAKER_TOOLCAP"
            ]
        );
    }

    #[test]
    fn the_projects_other_variables_are_not_unknown() {
        let r = config_from_env([
            ("AGENTBREAKER_STATE_DIR", "/tmp/sessions"),
            ("AGENTBREAKER_HOOK_FSYNC", "1"),
            ("AGENTBREAKER_WARN_BEFORE", "3"),
            ("AGENTBREAKER_BUDGET_WARN_PERCENT", "80"),
            ("AGENTBREAKER_CONFORMANCE_DIR", "tests/conformance"),
            ("AGENTBREAKER_STATE_DIRS", "x"),
            ("BB_CIRCUIT_BREAKER_STATE_DIR", "x"),
        ]);
        assert_eq!(r.config, BudgetConfig::default());
        let names: Vec<&str> = r.warnings.iter().map(|w| w.variable.as_str()).collect();
        assert_eq!(
            names,
            ["AGENTBREAKER_STATE_DIRS", "BB_CIRCUIT_BREAKER_STATE_DIR"]
        );
    }

    #[test]
    fn apply_env_layers_over_a_base() {
        let base = BudgetConfig {
            max_tool_calls_per_task: 200,
            max_idle_secs: 60,
            ..BudgetConfig::default()
        };
        let r = apply_env(
            base,
            [
                ("AGENTBREAKER_IDLE_SECS", "90"),
                ("AGENTBREAKER_TOOL_CAP", "x"),
            ],
        );
        assert_eq!(r.config.max_tool_calls_per_task, 200);
        assert_eq!(r.config.max_idle_secs, 90);
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].message.ends_with("keeping 200"),
            "{}",
            r.warnings[0].message
        );
    }

    #[test]
    fn the_projects_own_variables_are_not_unknown() {
        let r = config_from_env([("AGENTBREAKER_CONFORMANCE_DIR", "/x")]);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let r = config_from_env([("BB_CIRCUIT_BREAKER_CONFORMANCE_DIR", "/x")]);
        assert_eq!(r.warnings.len(), 1);
    }

    #[test]
    fn long_values_are_cut_in_warnings() {
        let long = "x".repeat(10_000);
        let r = config_from_env([("AGENTBREAKER_TOOL_CAP", long.as_str())]);
        assert_eq!(r.warnings[0].value.chars().count(), 100);
    }

    #[test]
    fn json_values_must_be_strings() {
        let e = config_from_env_json(&serde_json::json!({"AGENTBREAKER_TOOL_CAP": 5})).unwrap_err();
        assert_eq!(e.code(), "INVALID_ARGUMENT");
    }
}
