//! The Monitor's configuration (contract section 11): a profile, the three breakers' sections over
//! it key by key, per-tool limits, the warning ladder and the store of its budget counters
//! (contract section 12).

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::budget::{BudgetConfig, MAX_TASK_ID_BYTES};
use crate::error::{Error, Result};
use crate::failure::FailureConfig;
use crate::interop::type_name;
use crate::profiles::{PROFILE_NAMES, profile};
use crate::stagnation::StagnationConfig;
use crate::store::{DEFAULT_STORE_TIMEOUT_MS, StoreFailure, StoreUrl, validate_store_keys};

/// The profile a Monitor starts from when none is named.
pub const DEFAULT_PROFILE: &str = "coding-agent";
/// The most tools `toolLimits` may name.
pub const MAX_TOOL_LIMITS: usize = 256;

/// A Monitor's configuration, resolved: the profile's three sections with the overrides applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MonitorConfig {
    /// The profile the sections started from.
    pub profile: String,
    /// The FailureBreaker section. The Monitor uses `failureThreshold`,
    /// `identicalErrorThreshold` and `errorMatch` (a halted task stays halted, so the cooldown
    /// keys have no effect here). Its store keys (`store`, `key`, `statePath`) must stay unset:
    /// a Monitor's store is the one at the top level of its config.
    #[serde(serialize_with = "failure_section")]
    pub failure: FailureConfig,
    /// The StagnationBreaker section (no progress, same error, output decline, step detectors).
    pub stagnation: StagnationConfig,
    /// The BudgetBreaker section (per-task caps, idle and duration, the output loop).
    pub budget: BudgetConfig,
    /// The most calls of a tool one task may make, by tool name.
    pub tool_limits: BTreeMap<String, u64>,
    /// How many counts before a rule's threshold its warning comes (0 = no warnings). Default 2.
    pub warn_before: u32,
    /// The percent of each budget at which it warns (0 = never). Default 80.
    pub budget_warn_percent: u32,
    /// A Redis URL (`redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS): the
    /// budget counters of each task (tool calls, calls per tool, spend, the task's start) live
    /// there under `key`, one budget for every process that uses the same store and key
    /// (contract section 12, docs/distributed.md). Needs the `redis` feature.
    pub store: Option<StoreUrl>,
    /// The key prefix of the shared counters; required with `store`.
    pub key: Option<String>,
    /// The longest an event waits for the store, in ms (1 to 60 000). Default 50.
    pub store_timeout_ms: u64,
    /// What the monitor does while the store cannot be reached: `open` (default) counts locally,
    /// `closed` halts the events that need the store (docs/distributed.md).
    pub store_failure: StoreFailure,
}

/// The `failure` section as a Monitor's config prints it: without the store keys, which a
/// Monitor takes at its top level (so that `from_json(to_json())` gives the config back).
fn failure_section<S: Serializer>(failure: &FailureConfig, s: S) -> Result<S::Ok, S::Error> {
    let mut value = serde_json::to_value(failure).map_err(serde::ser::Error::custom)?;
    if let Value::Object(map) = &mut value {
        for key in FAILURE_STORE_KEYS {
            map.remove(key);
        }
    }
    value.serialize(s)
}

/// The FailureBreaker keys a Monitor's `failure` section refuses: a Monitor keeps no state file,
/// and its store is configured at the top level.
const FAILURE_STORE_KEYS: [&str; 5] = [
    "store",
    "key",
    "storeTimeoutMs",
    "storeFailure",
    "statePath",
];

impl Default for MonitorConfig {
    fn default() -> Self {
        Self::from_profile(DEFAULT_PROFILE).unwrap_or_else(|_| MonitorConfig {
            profile: "seed".into(),
            failure: FailureConfig::default(),
            stagnation: StagnationConfig::default(),
            budget: BudgetConfig::default(),
            tool_limits: BTreeMap::new(),
            warn_before: 2,
            budget_warn_percent: 80,
            store: None,
            key: None,
            store_timeout_ms: DEFAULT_STORE_TIMEOUT_MS,
            store_failure: StoreFailure::Open,
        })
    }
}

const KEYS: [&str; 11] = [
    "profile",
    "failure",
    "stagnation",
    "budget",
    "toolLimits",
    "warnBefore",
    "budgetWarnPercent",
    "store",
    "key",
    "storeTimeoutMs",
    "storeFailure",
];

impl MonitorConfig {
    /// The named profile with the ladder's defaults; an unknown name is `INVALID_CONFIG`.
    pub fn from_profile(name: &str) -> Result<Self> {
        let p = profile(name).ok_or_else(|| {
            Error::config(format_args!(
                "unknown profile {name:?} (known: {})",
                PROFILE_NAMES.join(", ")
            ))
        })?;
        Ok(MonitorConfig {
            profile: p.name.to_string(),
            failure: p.failure,
            stagnation: p.stagnation,
            budget: p.budget,
            tool_limits: BTreeMap::new(),
            warn_before: 2,
            budget_warn_percent: 80,
            store: None,
            key: None,
            store_timeout_ms: DEFAULT_STORE_TIMEOUT_MS,
            store_failure: StoreFailure::Open,
        })
    }

    /// Checks the store keys: the top-level ones as a FailureBreaker's are checked, and none in
    /// the `failure` section (`INVALID_CONFIG`).
    pub fn validate_store(&self) -> Result<()> {
        let f = &self.failure;
        if f.store.is_some() || f.key.is_some() {
            return Err(Error::config(
                "Monitor config: store and key go at the top level of a Monitor's config (its \
                 budget counters are what it shares), not in its failure section",
            ));
        }
        if f.state_path.is_some() {
            return Err(Error::config(
                "Monitor config: failure.statePath is not used by a Monitor (save its snapshot() \
                 instead)",
            ));
        }
        validate_store_keys(
            self.store.as_ref(),
            self.key.as_deref(),
            self.store_timeout_ms,
        )
    }

    /// Reads `{profile, failure, stagnation, budget, toolLimits, warnBefore, budgetWarnPercent,
    /// store, key, storeTimeoutMs, storeFailure}` (`null` or a missing key = the default; a
    /// section's keys override the profile's one by one). Anything unknown or out of range is
    /// `INVALID_CONFIG`, and so are the store keys inside `failure`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let map = match value {
            Value::Null => return Ok(Self::default()),
            Value::Object(map) => map,
            other => {
                return Err(Error::config(format_args!(
                    "Monitor config must be an object, not {}",
                    type_name(other)
                )));
            }
        };
        if let Some(unknown) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Error::config(format_args!(
                "Monitor config: unknown key {unknown:?} (allowed: {})",
                KEYS.join(", ")
            )));
        }
        let given = |key: &str| map.get(key).filter(|v| !v.is_null());
        let name = match given("profile") {
            None => DEFAULT_PROFILE,
            Some(Value::String(s)) => s.as_str(),
            Some(v) => {
                return Err(Error::config(format_args!(
                    "Monitor config: profile must be a string, not {}",
                    type_name(v)
                )));
            }
        };
        let mut config = Self::from_profile(name)?;
        if let Some(section) = given("failure") {
            if let Value::Object(g) = section
                && let Some(k) = FAILURE_STORE_KEYS
                    .iter()
                    .find(|k| g.get(**k).is_some_and(|v| !v.is_null()))
            {
                return Err(Error::config(format_args!(
                    "Monitor config: failure.{k} is not read by a Monitor: store, key, \
                     storeTimeoutMs and storeFailure go at the top level of its config (its \
                     budget counters are what it shares), and a Monitor keeps no state file"
                )));
            }
            let mut merged = overlay(&config.failure, section, "failure")?;
            // The profile's warning threshold goes with its failure threshold (the Monitor warns
            // by its ladder): a new failure threshold alone must not clash with it.
            if let (Value::Object(m), Value::Object(g)) = (&mut merged, section)
                && g.contains_key("failureThreshold")
                && !g.contains_key("warningThreshold")
            {
                m.remove("warningThreshold");
            }
            config.failure = FailureConfig::from_json(&merged)?;
        }
        if let Some(section) = given("stagnation") {
            config.stagnation =
                StagnationConfig::from_json(&overlay(&config.stagnation, section, "stagnation")?)?;
        }
        if let Some(section) = given("budget") {
            config.budget = BudgetConfig::from_json(&overlay(&config.budget, section, "budget")?)?;
        }
        if let Some(limits) = given("toolLimits") {
            config.tool_limits = tool_limits(limits)?;
        }
        if let Some(v) = given("warnBefore") {
            config.warn_before = small_whole(v, "warnBefore", 1000)?;
        }
        if let Some(v) = given("budgetWarnPercent") {
            config.budget_warn_percent = small_whole(v, "budgetWarnPercent", 100)?;
        }
        if let Some(v) = given("store") {
            let url = v.as_str().ok_or_else(|| {
                Error::config(format_args!(
                    "Monitor config: store must be a redis:// or rediss:// URL string, not {}",
                    type_name(v)
                ))
            })?;
            config.store = Some(StoreUrl::new(url));
        }
        if let Some(v) = given("key") {
            let key = v.as_str().ok_or_else(|| {
                Error::config(format_args!(
                    "Monitor config: key must be a string, not {}",
                    type_name(v)
                ))
            })?;
            config.key = Some(key.to_string());
        }
        if let Some(v) = given("storeTimeoutMs") {
            config.store_timeout_ms = v.as_u64().ok_or_else(|| {
                Error::config(
                    "Monitor config: storeTimeoutMs must be a whole number from 1 to 60000",
                )
            })?;
        }
        if let Some(v) = given("storeFailure") {
            config.store_failure = match v.as_str() {
                Some("open") => StoreFailure::Open,
                Some("closed") => StoreFailure::Closed,
                _ => {
                    return Err(Error::config(
                        "Monitor config: storeFailure must be \"open\" or \"closed\"",
                    ));
                }
            };
        }
        config.validate_store()?;
        Ok(config)
    }

    /// The configuration as JSON (the keys [`MonitorConfig::from_json`] reads).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The profile's section as JSON with the given keys laid over it (a `null` key keeps the
/// profile's value).
fn overlay<T: Serialize>(base: &T, section: &Value, name: &str) -> Result<Value> {
    let Value::Object(given) = section else {
        return Err(Error::config(format_args!(
            "Monitor config: {name} must be an object, not {}",
            type_name(section)
        )));
    };
    let mut merged = match serde_json::to_value(base) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (k, v) in given {
        if v.is_null() {
            // Still refused by name when unknown.
            merged.entry(k.clone()).or_insert(Value::Null);
        } else {
            merged.insert(k.clone(), v.clone());
        }
    }
    Ok(Value::Object(merged))
}

fn tool_limits(value: &Value) -> Result<BTreeMap<String, u64>> {
    let Value::Object(map) = value else {
        return Err(Error::config(format_args!(
            "Monitor config: toolLimits must be an object of tool name to count, not {}",
            type_name(value)
        )));
    };
    if map.len() > MAX_TOOL_LIMITS {
        return Err(Error::config(format_args!(
            "Monitor config: toolLimits names at most {MAX_TOOL_LIMITS} tools"
        )));
    }
    let mut out = BTreeMap::new();
    for (name, v) in map {
        if name.is_empty() || name.len() > MAX_TASK_ID_BYTES {
            return Err(Error::config(format_args!(
                "Monitor config: a toolLimits name must have 1 to {MAX_TASK_ID_BYTES} bytes"
            )));
        }
        let limit = v.as_u64().ok_or_else(|| {
            Error::config(format_args!(
                "Monitor config: toolLimits[{name:?}] must be a whole number >= 0, not {}",
                type_name(v)
            ))
        })?;
        out.insert(name.clone(), limit);
    }
    Ok(out)
}

fn small_whole(v: &Value, key: &str, max: u32) -> Result<u32> {
    v.as_u64()
        .filter(|&n| n <= u64::from(max))
        .map(|n| n as u32)
        .ok_or_else(|| {
            Error::config(format_args!(
                "Monitor config: {key} must be a whole number from 0 to {max}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_the_coding_agent_profile_with_the_ladder() {
        let c = MonitorConfig::from_json(&Value::Null).unwrap();
        assert_eq!(c.profile, "coding-agent");
        assert_eq!(c.warn_before, 2);
        assert_eq!(c.budget_warn_percent, 80);
        assert_eq!(c, MonitorConfig::from_json(&json!({})).unwrap());
        assert_eq!(c.stagnation.repeat_threshold, 5);
    }

    #[test]
    fn sections_override_the_profile_key_by_key() {
        let c = MonitorConfig::from_json(&json!({
            "profile": "seed",
            "stagnation": {"repeatThreshold": 4, "sameErrorThreshold": null},
            "budget": {"maxToolCallsPerTask": 7},
            "toolLimits": {"web_fetch": 20},
            "warnBefore": 0,
            "budgetWarnPercent": 50
        }))
        .unwrap();
        assert_eq!(c.stagnation.repeat_threshold, 4);
        assert_eq!(
            c.stagnation.same_error_threshold, 5,
            "null keeps the profile's value"
        );
        assert_eq!(c.budget.max_tool_calls_per_task, 7);
        assert_eq!(c.budget.max_idle_secs, 300, "the seed's value");
        assert_eq!(c.tool_limits["web_fetch"], 20);
        assert_eq!((c.warn_before, c.budget_warn_percent), (0, 50));
        let tuned = MonitorConfig::from_json(&json!({"budget": {"maxIdleSecs": 60}})).unwrap();
        let failure = MonitorConfig::from_json(&json!({"failure": {"failureThreshold": 3}}));
        assert_eq!(failure.unwrap().failure.failure_threshold, 3);
        assert_eq!(
            tuned.budget.max_tool_calls_per_task, 200,
            "the profile's value"
        );
    }

    #[test]
    fn bad_configs_are_refused() {
        for bad in [
            json!(3),
            json!({"nope": 1}),
            json!({"profile": "fast"}),
            json!({"profile": 1}),
            json!({"stagnation": {"repeatThreshold": 1}}),
            json!({"stagnation": {"bogus": null}}),
            json!({"budget": []}),
            json!({"toolLimits": {"x": -1}}),
            json!({"toolLimits": {"": 1}}),
            json!({"toolLimits": [1]}),
            json!({"warnBefore": 1.5}),
            json!({"budgetWarnPercent": 101}),
        ] {
            assert_eq!(
                MonitorConfig::from_json(&bad).unwrap_err().code(),
                "INVALID_CONFIG",
                "{bad}"
            );
        }
    }
}
