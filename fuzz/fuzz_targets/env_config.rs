//! Arbitrary variable sets into the environment configuration (`config_from_env`, `apply_env`,
//! `config_from_env_json`). Each line `NAME=value` is one variable (`\0` in a line stands for a
//! newline in the value). The result is always a valid config (a bad variable never disables the
//! breaker), warnings are bounded, and the map and JSON paths agree.
#![no_main]

use std::collections::BTreeMap;

use agentbreaker::{BudgetConfig, apply_env, config_from_env, config_from_env_json};
use agentbreaker_fuzz::{check_error, text};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let vars: Vec<(String, String)> = text
        .split('\n')
        .filter_map(|line| {
            let (k, v) = line.split_once('=')?;
            Some((k.to_string(), v.replace('\0', "\n")))
        })
        .collect();

    let result = config_from_env(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    result
        .config
        .validate()
        .expect("the environment never gives an invalid config");
    assert!(result.warnings.len() <= vars.len(), "{result:?}");
    for w in &result.warnings {
        assert!(w.value.chars().count() <= 100, "{w:?}");
        assert!(!w.message.is_empty());
        assert!(vars.iter().any(|(k, _)| *k == w.variable), "{w:?}");
    }
    let json = serde_json::to_value(&result).expect("serializes");
    let again = BudgetConfig::from_json(&json["config"]).expect("the config reads back");
    assert_eq!(again, result.config);
    if vars.is_empty() {
        assert_eq!(result.config, BudgetConfig::default());
    }

    // The same variables as a JSON object (the bindings' path): the last value of a name wins in
    // both.
    let unique: BTreeMap<&str, &str> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let object: Map<String, Value> = unique
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    let from_json = config_from_env_json(&Value::Object(object)).expect("strings are accepted");
    assert_eq!(from_json, result);

    // Over a non-default base: what the environment sets is the same, the rest is the base's.
    let base = BudgetConfig {
        max_tool_calls_per_task: 7,
        similarity_jaccard_threshold: 0.5,
        loop_window: 4,
        ..BudgetConfig::default()
    };
    let layered = apply_env(
        base.clone(),
        vars.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    layered.config.validate().expect("valid over a base too");
    assert_eq!(layered.config.loop_window, 4);
    assert_eq!(layered.warnings.len(), result.warnings.len());

    // A non-string value is INVALID_ARGUMENT.
    if let Some((k, _)) = vars.first() {
        let mut object = Map::new();
        object.insert(k.clone(), Value::from(1));
        let e = config_from_env_json(&Value::Object(object)).expect_err("a number is refused");
        check_error(&e, "INVALID_ARGUMENT");
    }
});
