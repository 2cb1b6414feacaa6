//! The module's functions: `analyze`, `fingerprint`, `configFromEnv`, `metricDefinitions` and
//! `metricUpdates`.

use std::collections::BTreeMap;

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::metrics::{self, Update, json_event_updates, vocabulary_json};
use agentbreaker::{Error, analyze, config_from_env_json, config_from_process_env, fingerprint};
use mlua::{Lua, Table, Value};
use serde_json::{Value as Json, json};

use crate::convert::{lua_error, wrong_argument};
use crate::{Methods, convert, ret, ret_json};

/// Updates as Lua gets them: `{{name, value, attributes}, ...}`.
pub(crate) fn updates_json(updates: &[Update]) -> Json {
    let attributes = |u: &Update| u.attributes.iter().cloned().collect::<BTreeMap<_, _>>();
    let update = |u: &Update| json!([u.metric.name, u.value, attributes(u)]);
    Json::Array(updates.iter().map(update).collect())
}

/// `{task = true}` of a metrics call (`what` names it in messages).
pub(crate) fn metric_options(options: &Value, what: &str) -> Result<metrics::Options, Error> {
    let task = match options {
        Value::Nil => Value::Nil,
        Value::Table(t) => t.raw_get("task").map_err(lua_error)?,
        other => return Err(wrong_argument(what, "a table", other)),
    };
    match task {
        Value::Nil => Ok(metrics::Options::default()),
        Value::Boolean(task) => Ok(metrics::Options { task }),
        other => Err(wrong_argument(&format!("{what}.task"), "a boolean", &other)),
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<()>::new(lua, raw, "functions")?
        .function("analyze", |lua, (text,): (Value,)| {
            ret_json(lua, &analyze(&convert::string(&text, "analyze: text")?))
        })?
        .function("fingerprint", |lua, (text, mode): (Value, Value)| {
            let text = convert::string(&text, "fingerprint: text")?;
            let mode = convert::optional_string(&mode, "fingerprint: mode")?;
            ret(
                lua,
                fingerprint(&text, interop::error_match(mode.as_deref())?),
            )
        })?
        // No argument: the process environment; a table of strings: that map.
        .function("configFromEnv", |lua, (env,): (Value,)| match env {
            Value::Nil => ret_json(lua, &config_from_process_env()),
            env => {
                let env = convert::to_json(lua, &env, "env", ArgKind::Argument)?;
                ret_json(lua, &config_from_env_json(&env)?)
            }
        })?
        .function("metricDefinitions", |lua, ()| {
            ret_json(lua, &vocabulary_json())
        })?
        .function("metricUpdates", |lua, (e, b, o): (Value, Value, Value)| {
            let event = convert::to_json(lua, &e, "metricUpdates: event", ArgKind::Event)?;
            let breaker = convert::string(&b, "metricUpdates: breaker")?;
            let options = metric_options(&o, "metricUpdates: options")?;
            let updates = json_event_updates(&event, &breaker, options);
            ret_json(lua, &updates_json(&updates))
        })?;
    Ok(())
}
