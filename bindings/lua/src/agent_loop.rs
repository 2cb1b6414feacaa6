//! `agentbreaker.Loop` (SPEC 5).

use agentbreaker::{Loop, LoopConfig, SystemClock};
use mlua::{Lua, Table, Value};

use crate::convert::{self, Ctx};
use crate::{
    Class, Handle, add_listeners, core, event_source, export, export_listener_methods, none,
    object, options, ret, ret_json, this,
};

impl Class for Loop {
    const NAME: &'static str = "Loop";
}
event_source!(Loop);

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    export(lua, raw, "loop_new", |lua, (config,): (Value,)| {
        let opts = options(&config, "Loop", false)?;
        let clock = opts.clock.unwrap_or_else(SystemClock::shared);
        let core_config = LoopConfig::from_json(&opts.json)?;
        let handle = Handle::new(Loop::with_clock(core_config, clock)?);
        add_listeners(lua, &handle, opts.listeners)?;
        let ud = object(lua, handle)?;
        ret(lua, ud)
    })?;
    export(lua, raw, "loop_observe", |lua, (s, o): (Value, Value)| {
        let agent_loop = core::<Loop>(&s, "observe")?;
        let observation = convert::to_json(&o, Ctx::Argument, "observation")?;
        ret_json(lua, &agent_loop.observe_json(&observation)?)
    })?;
    export(lua, raw, "loop_get_status", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<Loop>(&s, "getStatus")?.status())
    })?;
    export(lua, raw, "loop_reset", |_, (s,): (Value,)| {
        core::<Loop>(&s, "reset")?.reset();
        none()
    })?;
    export(lua, raw, "loop_tostring", |lua, (s,): (Value,)| {
        let handle = this::<Loop>(&s, "tostring")?;
        let status = handle.core.status();
        let detail = match status.reason {
            Some(reason) => format!("iteration {}, exited: {reason}", status.iteration),
            None => format!("iteration {}", status.iteration),
        };
        crate::describe_object(lua, "Loop", &detail)
    })?;
    export_listener_methods::<Loop>(
        lua,
        raw,
        [
            "loop_add_listener",
            "loop_remove_listener",
            "loop_listener_errors",
        ],
    )
}
