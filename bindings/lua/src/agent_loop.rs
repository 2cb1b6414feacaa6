//! `agentbreaker.Loop`.

use agentbreaker::interop::ArgKind;
use agentbreaker::{Loop, LoopConfig};
use mlua::{Lua, Table, Value};

use crate::{Methods, Options, convert, ret, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<Loop>::new(lua, raw, "Loop")?
        .function("new", |lua, (config,): (Value,)| {
            let opts = Options::read::<Loop>(lua, &config, false)?;
            let core = Loop::with_clock(LoopConfig::from_json(&opts.json)?, opts.clock())?;
            ret(lua, opts.into_object(lua, core, None)?.into_lua(lua)?)
        })?
        .method("observe", |lua, h, (observation,): (Value,)| {
            let observation =
                convert::to_json(lua, &observation, "observation", ArgKind::Argument)?;
            ret_json(lua, &h.core.observe_json(&observation)?)
        })?
        .method("getStatus", |lua, h, ()| ret_json(lua, &h.core.status()))?
        .action("reset", Loop::reset)?
        .listeners()?;
    Ok(())
}
