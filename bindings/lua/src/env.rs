//! `agentbreaker.configFromEnv` (docs/contract.md).

use agentbreaker::interop::ArgKind;
use agentbreaker::{config_from_env_json, config_from_process_env};
use mlua::{Lua, Table, Value};

use crate::{Methods, convert, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    // No argument: the process environment; a table of strings: that map.
    Methods::<()>::new(lua, raw, "env")?.function("configFromEnv", |lua, (env,): (Value,)| {
        match env {
            Value::Nil => ret_json(lua, &config_from_process_env()),
            other => {
                let env = convert::to_json(lua, &other, "env", ArgKind::Argument)?;
                ret_json(lua, &config_from_env_json(&env)?)
            }
        }
    })?;
    Ok(())
}
