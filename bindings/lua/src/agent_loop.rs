//! `agentbreaker.Loop` (docs/contract.md).

use agentbreaker::interop::ArgKind;
use agentbreaker::{Loop, LoopConfig};
use mlua::{Lua, Table, Value};

use crate::{Handle, Methods, Options, convert, describe_object, none, ret, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<Loop>::new(lua, raw, "Loop")?
        .function("new", |lua, (config,): (Value,)| {
            let mut opts = Options::read::<Loop>(lua, &config, false)?;
            let config = LoopConfig::from_json(&opts.json)?;
            let handle = Handle::new(Loop::with_clock(config, opts.clock())?);
            opts.add_listeners(lua, &handle)?;
            ret(lua, handle.into_lua(lua)?)
        })?
        .method("observe", |lua, h, (observation,): (Value,)| {
            let observation =
                convert::to_json(lua, &observation, "observation", ArgKind::Argument)?;
            ret_json(lua, &h.core.observe_json(&observation)?)
        })?
        .method("getStatus", |lua, h, ()| ret_json(lua, &h.core.status()))?
        .method("reset", |_, h, ()| {
            h.core.reset();
            none()
        })?
        .listeners()?
        .method("__tostring", |lua, h, ()| {
            let status = h.core.status();
            let detail = match status.reason {
                Some(reason) => format!("iteration {}, exited: {reason}", status.iteration),
                None => format!("iteration {}", status.iteration),
            };
            describe_object::<Loop>(lua, &detail)
        })?;
    Ok(())
}
