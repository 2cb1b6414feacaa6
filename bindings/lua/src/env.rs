//! `agentbreaker.configFromEnv` (SPEC 7).

use agentbreaker::{config_from_env_json, config_from_process_env};
use mlua::{Lua, Table, Value};

use crate::convert::{self, Ctx};
use crate::{export, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    // No argument: the process environment; a table of strings: that map.
    export(
        lua,
        raw,
        "config_from_env",
        |lua, (env,): (Value,)| match env {
            Value::Nil => ret_json(lua, &config_from_process_env()),
            other => {
                let env = convert::to_json(&other, Ctx::Argument, "env")?;
                ret_json(lua, &config_from_env_json(&env)?)
            }
        },
    )
}
