//! The effective configuration: built-in defaults, then a TOML file (`agentbreaker.toml` in the
//! working directory, or `--config FILE`), then `AGENTBREAKER_*` (and `BB_CIRCUIT_BREAKER_*`)
//! environment variables, then command-line flags. The file uses the contract's own camelCase keys:
//!
//! ```toml
//! [budget]        # BudgetBreaker (contract §4): maxToolCallsPerTask, maxIdleSecs, prices, ...
//! [stagnation]    # StagnationBreaker (contract §3): noProgressThreshold, sameErrorThreshold, ...
//! [failure]       # FailureBreaker (contract §2): failureThreshold, ...
//! [monitor]       # the Monitor's ladder and per-tool limits: warnBefore, budgetWarnPercent,
//!                 # toolLimits = { WebFetch = 20 }
//! [loop]          # `agentbreaker loop`: maxIterations, strategy = { type = "auto" }
//! [loop.stagnation] # how `loop` judges iterations: the seed's StagnationBreaker keys
//! [supervisor]    # `agentbreaker run`: graceSecs
//! ```
//!
//! Together they make the [`MonitorConfig`] that `run`, `replay` and `loop` watch the agent with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentbreaker::{
    BudgetConfig, FailureConfig, MonitorConfig, StagnationConfig, StrategyConfig, apply_env,
    profile,
};
use serde_json::{Map, Value, json};

/// The file read from the working directory when no `--config` is given.
pub const DEFAULT_FILE: &str = "agentbreaker.toml";
/// The variable that sets `[monitor] warnBefore`.
pub const ENV_WARN_BEFORE: &str = "AGENTBREAKER_WARN_BEFORE";
/// The variable that sets `[monitor] budgetWarnPercent`.
pub const ENV_BUDGET_WARN_PERCENT: &str = "AGENTBREAKER_BUDGET_WARN_PERCENT";

/// Everything the commands need, after all layers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The BudgetBreaker config.
    pub budget: BudgetConfig,
    /// The StagnationBreaker config.
    pub stagnation: StagnationConfig,
    /// The FailureBreaker config.
    pub failure: FailureConfig,
    /// The most calls of a tool one task may make (`[monitor] toolLimits`).
    pub tool_limits: BTreeMap<String, u64>,
    /// How many counts before a rule's threshold it warns (`[monitor] warnBefore`, 0 = never).
    pub warn_before: u32,
    /// The percent of a budget at which it warns (`[monitor] budgetWarnPercent`, 0 = never).
    pub budget_warn_percent: u32,
    /// `loop`: how iterations are judged: the seed's StagnationBreaker with the file's
    /// `[loop.stagnation]` keys. The step-level `[stagnation]` section (the profiles' values)
    /// is not meant for iterations and does not change it.
    pub loop_stagnation: StagnationConfig,
    /// The profile the settings started from (`seed` = the defaults), as `config` reports it.
    pub profile: &'static str,
    /// `loop`: iteration cap.
    pub max_iterations: u32,
    /// `loop`: the exit strategy (validated), and its JSON for printing.
    pub strategy: StrategyConfig,
    /// The strategy as JSON.
    pub strategy_json: Value,
    /// `run`: seconds between SIGTERM and SIGKILL.
    pub grace_secs: u64,
    /// The file that was read, if any.
    pub source: Option<PathBuf>,
    /// Problems that were worked around (invalid environment values).
    pub warnings: Vec<String>,
}

impl Settings {
    /// The built-in defaults.
    pub fn defaults() -> Self {
        Settings {
            budget: BudgetConfig::default(),
            stagnation: StagnationConfig::default(),
            failure: FailureConfig::default(),
            tool_limits: BTreeMap::new(),
            warn_before: 2,
            budget_warn_percent: 80,
            loop_stagnation: StagnationConfig::default(),
            profile: "seed",
            max_iterations: 50,
            strategy: StrategyConfig::default(),
            strategy_json: json!({"type": "auto"}),
            grace_secs: 10,
            source: None,
            warnings: Vec::new(),
        }
    }

    /// A named profile's breaker settings over the defaults (`seed`, `coding-agent`).
    pub fn from_profile(name: &str) -> Result<Self, String> {
        let p = profile(name).ok_or_else(|| {
            format!(
                "unknown profile {name:?} ({})",
                agentbreaker::PROFILE_NAMES.join(", ")
            )
        })?;
        Ok(Settings {
            budget: p.budget,
            stagnation: p.stagnation,
            failure: p.failure,
            profile: p.name,
            ..Settings::defaults()
        })
    }

    /// `base` (a profile), then the file, then the environment.
    pub fn load_over<I, K, V>(
        base: Settings,
        explicit: Option<&Path>,
        env: I,
    ) -> Result<Self, String>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut s = base;
        let (path, must_exist) = match explicit {
            Some(p) => (p.to_path_buf(), true),
            None => (PathBuf::from(DEFAULT_FILE), false),
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                s.apply_file(&text)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                s.source = Some(path);
            }
            Err(e) if !must_exist && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        }
        let mut rest = Vec::new();
        for (k, v) in env {
            let (k, v) = (k.as_ref(), v.as_ref());
            match k {
                ENV_WARN_BEFORE | ENV_BUDGET_WARN_PERCENT => {
                    let key = if k == ENV_WARN_BEFORE {
                        "warnBefore"
                    } else {
                        "budgetWarnPercent"
                    };
                    match v.trim().parse::<u64>() {
                        Ok(n) => match s.set_monitor_key(key, &Value::from(n)) {
                            Ok(()) => {}
                            Err(e) => s.warnings.push(format!("{k}={v:?}: {e}")),
                        },
                        Err(_) => s
                            .warnings
                            .push(format!("{k}={v:?}: not a whole number; ignored")),
                    }
                }
                _ => rest.push((k.to_string(), v.to_string())),
            }
        }
        let layered = apply_env(s.budget.clone(), rest);
        s.budget = layered.config;
        s.warnings.extend(
            layered
                .warnings
                .into_iter()
                .map(|w| format!("{}={:?}: {}", w.variable, w.value, w.message)),
        );
        Ok(s)
    }

    /// `base`, then `file` when given (it must exist), then the environment; no default file is
    /// looked for in the working directory (`hook` names its project's file itself).
    pub fn load_over_file<I, K, V>(
        base: Settings,
        file: Option<&Path>,
        env: I,
    ) -> Result<Self, String>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        if file.is_some() {
            return Self::load_over(base, file, env);
        }
        let mut s = base;
        let layered = apply_env(s.budget.clone(), env);
        s.budget = layered.config;
        s.warnings.extend(
            layered
                .warnings
                .into_iter()
                .map(|w| format!("{}={:?}: {}", w.variable, w.value, w.message)),
        );
        Ok(s)
    }

    fn apply_file(&mut self, text: &str) -> Result<(), String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let root = serde_json::to_value(table).map_err(|e| e.to_string())?;
        let Value::Object(sections) = root else {
            return Err("expected tables".into());
        };
        for (name, value) in &sections {
            match name.as_str() {
                "budget" => {
                    self.budget = BudgetConfig::from_json(&merged(&self.budget, value)?)
                        .map_err(|e| e.to_string())?;
                }
                "stagnation" => {
                    self.stagnation =
                        StagnationConfig::from_json(&merged(&self.stagnation, value)?)
                            .map_err(|e| e.to_string())?;
                }
                "monitor" => {
                    let table = section(
                        value,
                        "monitor",
                        &["warnBefore", "budgetWarnPercent", "toolLimits"],
                    )?;
                    for (k, v) in table {
                        self.set_monitor_key(k, v)?;
                    }
                }
                "failure" => {
                    self.failure = FailureConfig::from_json(&merged(&self.failure, value)?)
                        .map_err(|e| e.to_string())?;
                }
                "loop" => self.apply_loop(value)?,
                "profile" => {
                    return Err("a profile is chosen with --profile, not in the file".to_string());
                }
                "supervisor" => {
                    let table = section(value, "supervisor", &["graceSecs"])?;
                    if let Some(v) = table.get("graceSecs") {
                        self.grace_secs = v
                            .as_u64()
                            .ok_or("supervisor.graceSecs must be a whole number of seconds")?;
                    }
                }
                other => {
                    return Err(format!(
                        "unknown section [{other}] (budget, stagnation, failure, monitor, loop, \
                         supervisor)"
                    ));
                }
            }
        }
        Ok(())
    }

    fn apply_loop(&mut self, value: &Value) -> Result<(), String> {
        let table = section(value, "loop", &["maxIterations", "strategy", "stagnation"])?;
        if let Some(v) = table.get("maxIterations") {
            self.max_iterations = v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n >= 1)
                .ok_or("loop.maxIterations must be a whole number >= 1")?;
        }
        if let Some(strategy) = table.get("strategy") {
            self.set_strategy(strategy.clone())?;
        }
        if let Some(stagnation) = table.get("stagnation") {
            self.loop_stagnation =
                StagnationConfig::from_json(&merged(&self.loop_stagnation, stagnation)?)
                    .map_err(|e| format!("[loop.stagnation]: {e}"))?;
        }
        Ok(())
    }

    /// Sets one `[monitor]` key (`warnBefore`, `budgetWarnPercent`, `toolLimits`), checked as the
    /// core checks a Monitor config.
    pub fn set_monitor_key(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let checked = MonitorConfig::from_json(&json!({"profile": "seed", key: value}))
            .map_err(|e| e.to_string())?;
        match key {
            "warnBefore" => self.warn_before = checked.warn_before,
            "budgetWarnPercent" => self.budget_warn_percent = checked.budget_warn_percent,
            _ => self.tool_limits = checked.tool_limits,
        }
        Ok(())
    }

    /// The Monitor's configuration: the profile's sections after every layer, the per-tool limits
    /// and the warning ladder. The `[failure]` section's store and state file are the
    /// FailureBreaker's: the Monitor keeps its counters in the process.
    pub fn monitor_config(&self) -> MonitorConfig {
        MonitorConfig {
            profile: self.profile.to_string(),
            failure: agentbreaker::FailureConfig {
                store: None,
                key: None,
                state_path: None,
                ..self.failure.clone()
            },
            stagnation: self.stagnation.clone(),
            budget: self.budget.clone(),
            tool_limits: self.tool_limits.clone(),
            warn_before: self.warn_before,
            budget_warn_percent: self.budget_warn_percent,
            store: None,
            key: None,
            store_timeout_ms: agentbreaker::store::DEFAULT_STORE_TIMEOUT_MS,
            store_failure: agentbreaker::StoreFailure::Open,
        }
    }

    /// Replaces the exit strategy (validated by the core).
    pub fn set_strategy(&mut self, strategy: Value) -> Result<(), String> {
        self.strategy = StrategyConfig::from_json(&strategy).map_err(|e| e.to_string())?;
        self.strategy_json = strategy;
        Ok(())
    }

    /// The effective configuration as JSON (the shape of the TOML file).
    pub fn to_json(&self) -> Value {
        json!({
            "profile": self.profile,
            "budget": self.budget,
            "stagnation": self.stagnation,
            "failure": printed_failure(&self.failure),
            "monitor": {
                "warnBefore": self.warn_before,
                "budgetWarnPercent": self.budget_warn_percent,
                "toolLimits": self.tool_limits,
            },
            "loop": {
                "maxIterations": self.max_iterations,
                "strategy": self.strategy_json,
                "stagnation": self.loop_stagnation,
            },
            "supervisor": {"graceSecs": self.grace_secs},
        })
    }

    /// The effective configuration as a TOML file (it can be saved as `agentbreaker.toml`; a
    /// store URL's password is printed as `***`).
    /// TOML has no null: unset optional keys are left out, which reads back as unset.
    pub fn to_toml(&self) -> String {
        let mut doc = self.to_json();
        if let Value::Object(map) = &mut doc {
            map.remove("profile");
        }
        strip_nulls(&mut doc);
        match toml::to_string(&doc) {
            Ok(text) => text,
            Err(e) => format!("# cannot print the configuration as TOML: {e}\n"),
        }
    }
}

fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// The keys of a file section over the current settings (so a file on top of a profile only
/// changes what it names).
fn merged<T: serde::Serialize>(current: &T, section: &Value) -> Result<Value, String> {
    let mut base = serde_json::to_value(current).map_err(|e| e.to_string())?;
    let (Value::Object(base_map), Value::Object(given)) = (&mut base, section) else {
        return Err("a section must be a table".into());
    };
    for (k, v) in given {
        base_map.insert(k.clone(), v.clone());
    }
    Ok(base)
}

fn section<'a>(
    value: &'a Value,
    name: &str,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, String> {
    let table = value
        .as_object()
        .ok_or_else(|| format!("[{name}] must be a table"))?;
    if let Some(k) = table.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "unknown key {name}.{k} (allowed: {})",
            allowed.join(", ")
        ));
    }
    Ok(table)
}

/// The FailureBreaker section as printed: a store URL without its password.
fn printed_failure(config: &FailureConfig) -> Value {
    let mut value = serde_json::to_value(config).unwrap_or(Value::Null);
    if let (Some(url), Value::Object(map)) = (&config.store, &mut value) {
        map.insert("store".into(), Value::String(url.redacted()));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str, env: &[(&str, &str)]) -> Result<Settings, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentbreaker.toml");
        std::fs::write(&path, text).unwrap();
        Settings::load_over(Settings::defaults(), Some(&path), env.iter().copied())
    }

    #[test]
    fn layers_file_then_environment() {
        let s = load_text(
            "[budget]\nmaxToolCallsPerTask = 200\nmaxIdleSecs = 60\n[loop]\nmaxIterations = 7\n\
             strategy = { type = \"done_signals\" }\n[supervisor]\ngraceSecs = 3\n\
             [monitor]\nwarnBefore = 1\ntoolLimits = { WebFetch = 20 }\n",
            &[
                ("AGENTBREAKER_IDLE_SECS", "90"),
                ("AGENTBREAKER_JACCARD", "2"),
                ("AGENTBREAKER_BUDGET_WARN_PERCENT", "50"),
            ],
        )
        .unwrap();
        assert_eq!(s.warn_before, 1);
        assert_eq!(s.budget_warn_percent, 50);
        assert_eq!(s.tool_limits["WebFetch"], 20);
        let m = s.monitor_config();
        assert_eq!(
            (
                m.warn_before,
                m.budget_warn_percent,
                m.tool_limits["WebFetch"]
            ),
            (1, 50, 20)
        );
        assert_eq!(m.budget.max_idle_secs, 90);
        assert_eq!(s.budget.max_tool_calls_per_task, 200);
        assert_eq!(s.budget.max_idle_secs, 90);
        assert_eq!(s.budget.similarity_jaccard_threshold, 0.95);
        assert_eq!(s.max_iterations, 7);
        assert_eq!(s.grace_secs, 3);
        assert_eq!(s.warnings.len(), 1);
        assert!(
            s.warnings[0].starts_with("AGENTBREAKER_JACCARD=\"2\""),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn bad_files_are_errors() {
        for bad in [
            "[budget]\nmaxToolCalls = 3\n",
            "[budget]\nmaxToolCallsPerTask = 0\n",
            "[nonsense]\n",
            "[loop]\nstrategy = { type = \"magic\" }\n",
            "not toml =",
            "[monitor]\nwarnBefore = -1\n",
            "[monitor]\nbudgetWarnPercent = 101\n",
            "[monitor]\ntoolLimits = { x = 1.5 }\n",
            "[monitor]\nnope = 1\n",
        ] {
            assert!(load_text(bad, &[]).is_err(), "{bad}");
        }
        let bad_env = load_text("", &[("AGENTBREAKER_WARN_BEFORE", "lots")]).unwrap();
        assert_eq!(
            bad_env.warn_before, 2,
            "an invalid variable keeps the value"
        );
        assert_eq!(bad_env.warnings.len(), 1, "{:?}", bad_env.warnings);
        let missing = Settings::load_over(
            Settings::defaults(),
            Some(Path::new("/nonexistent/agentbreaker.toml")),
            [("", "")],
        );
        assert!(missing.is_err());
    }

    #[test]
    fn a_store_password_is_not_printed() {
        let s = load_text(
            "[failure]\nstore = \"redis://:Pr1nt-me-not@cache:6380/1\"\nkey = \"tool:search\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            s.failure.store.as_ref().map(|u| u.as_secret_str()),
            Some("redis://:Pr1nt-me-not@cache:6380/1")
        );
        let text = s.to_toml();
        assert!(!text.contains("Pr1nt-me-not"), "{text}");
        assert!(text.contains("redis://:***@cache:6380/1"), "{text}");
        assert!(!s.to_json().to_string().contains("Pr1nt-me-not"));
    }

    #[test]
    fn printed_toml_reads_back() {
        for profile in agentbreaker::PROFILE_NAMES {
            let s = Settings::from_profile(profile).unwrap();
            let text = s.to_toml();
            for section in [
                "[budget]",
                "[stagnation]",
                "[failure]",
                "[monitor]",
                "[loop]",
                "[supervisor]",
            ] {
                assert!(
                    text.contains(section),
                    "{profile}: {section} missing in\n{text}"
                );
            }
            // Read back over the defaults, the file gives the same breakers as the profile.
            let again = load_text(&text, &[]).unwrap();
            assert_eq!(again.budget, s.budget, "{profile}");
            assert_eq!(again.stagnation, s.stagnation, "{profile}");
            assert_eq!(again.failure, s.failure, "{profile}");
            assert_eq!(again.warn_before, s.warn_before, "{profile}");
            assert_eq!(again.tool_limits, s.tool_limits, "{profile}");
        }
    }
}

#[cfg(test)]
mod loop_tests {
    use super::*;

    #[test]
    fn loop_judges_iterations_with_the_seed_rules_and_the_files_loop_stagnation_keys() {
        let s = Settings::from_profile("coding-agent").unwrap();
        assert_eq!(s.loop_stagnation, StagnationConfig::default());
        assert_eq!(s.monitor_config().profile, "coding-agent");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentbreaker.toml");
        // The step-level section is the Monitor's alone.
        std::fs::write(&path, "[stagnation]\nnoProgressThreshold = 6\n").unwrap();
        let step = Settings::load_over(s.clone(), Some(&path), [("", "")]).unwrap();
        assert_eq!(step.stagnation.no_progress_threshold, 6);
        assert_eq!(step.loop_stagnation, StagnationConfig::default());
        // `[loop.stagnation]` is the loop's alone.
        std::fs::write(&path, "[loop.stagnation]\nnoProgressThreshold = 6\n").unwrap();
        let iter = Settings::load_over(s.clone(), Some(&path), [("", "")]).unwrap();
        assert_eq!(iter.loop_stagnation.no_progress_threshold, 6);
        assert_eq!(iter.loop_stagnation.repeat_threshold, 0);
        assert_eq!(iter.stagnation, s.stagnation);
        std::fs::write(&path, "[loop.stagnation]\nnope = 6\n").unwrap();
        assert!(Settings::load_over(s, Some(&path), [("", "")]).is_err());
    }

    #[test]
    fn configs_output_saved_as_the_file_keeps_how_the_loop_judges_iterations() {
        for profile in agentbreaker::PROFILE_NAMES {
            let s = Settings::from_profile(profile).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("agentbreaker.toml");
            std::fs::write(&path, s.to_toml()).unwrap();
            let again = Settings::load_over(s.clone(), Some(&path), [("", "")]).unwrap();
            assert_eq!(again.loop_stagnation, s.loop_stagnation, "{profile}");
            assert_eq!(again.stagnation, s.stagnation, "{profile}");
            assert_eq!(again.max_iterations, s.max_iterations, "{profile}");
        }
    }
}
