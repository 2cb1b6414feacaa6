//! The module's functions: `analyze`, `fingerprint` and `configFromEnv`.

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::{analyze, config_from_env_json, config_from_process_env, fingerprint};
use mlua::{Lua, Table, Value};

use crate::{Methods, convert, ret, ret_json};

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
        })?;
    Ok(())
}
