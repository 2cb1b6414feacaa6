//! `agentbreaker.Monitor` (docs/monitor.md): one agent watched event by event, every event
//! answered with a verdict table.

use agentbreaker::interop::ArgKind;
use agentbreaker::{Monitor, MonitorConfig};
use mlua::{Lua, Table, Value};

use crate::{Handle, Methods, Options, convert, describe_object, none, ret, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<Monitor>::new(lua, raw, "Monitor")?
        .function("new", |lua, (config,): (Value,)| {
            let mut opts = Options::read::<Monitor>(lua, &config, false)?;
            let config = MonitorConfig::from_json(&opts.json)?;
            let handle = Handle::new(Monitor::with_clock(config, opts.clock())?);
            opts.add_listeners(lua, &handle)?;
            ret(lua, handle.into_lua(lua)?)
        })?
        // The verdict `{action, reason, message, nudge, taskId, step, detail}`.
        .method("observe", |lua, h, (event,): (Value,)| {
            let event = convert::to_json(lua, &event, "event", ArgKind::Event)?;
            ret_json(lua, &h.core.observe(&event)?)
        })?
        .method("tick", |lua, h, ()| ret_json(lua, &h.core.tick()))?
        .method("status", |lua, h, ()| ret_json(lua, &h.core.status()))?
        .method("snapshot", |lua, h, ()| ret_json(lua, &h.core.snapshot()))?
        .method("restore", |lua, h, (snapshot,): (Value,)| {
            h.core.restore(&convert::to_json(
                lua,
                &snapshot,
                "snapshot",
                ArgKind::Snapshot,
            )?)?;
            none()
        })?
        .method("reset", |_, h, ()| {
            h.core.reset();
            none()
        })?
        .method("config", |lua, h, ()| ret_json(lua, h.core.config()))?
        .listeners()?
        .method("__tostring", |lua, h, ()| {
            let detail = format!(
                "{}, {} open tasks",
                h.core.config().profile,
                h.core.status()["tasks"].as_array().map_or(0, Vec::len)
            );
            describe_object::<Monitor>(lua, &detail)
        })?;
    Ok(())
}
