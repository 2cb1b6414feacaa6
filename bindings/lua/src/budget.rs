//! `agentbreaker.BudgetBreaker` (SPEC 4).

use agentbreaker::{BudgetBreaker, BudgetConfig, SystemClock};
use mlua::{Lua, Table, Value};

use crate::convert::{self, Ctx};
use crate::{
    Class, Handle, add_listeners, core, event_source, export, export_listener_methods, object,
    options, ret, ret_json, this,
};

impl Class for BudgetBreaker {
    const NAME: &'static str = "BudgetBreaker";
}
event_source!(BudgetBreaker);

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    export(lua, raw, "budget_new", |lua, (config,): (Value,)| {
        let opts = options(&config, "BudgetBreaker", false)?;
        let clock = opts.clock.unwrap_or_else(SystemClock::shared);
        let core_config = BudgetConfig::from_json(&opts.json)?;
        let handle = Handle::new(BudgetBreaker::with_clock(core_config, clock)?);
        add_listeners(lua, &handle, opts.listeners)?;
        let ud = object(lua, handle)?;
        ret(lua, ud)
    })?;
    export(lua, raw, "budget_ingest", |lua, (s, e): (Value, Value)| {
        let breaker = core::<BudgetBreaker>(&s, "ingest")?;
        let event = convert::to_json(&e, Ctx::Event, "event")?;
        match breaker.ingest(&event)? {
            Some(halt) => ret_json(lua, &halt),
            None => ret(lua, Value::Nil),
        }
    })?;
    export(lua, raw, "budget_tick", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<BudgetBreaker>(&s, "tick")?.tick())
    })?;
    export(lua, raw, "budget_snapshot", |lua, (s,): (Value,)| {
        ret_json(lua, &core::<BudgetBreaker>(&s, "snapshot")?.snapshot())
    })?;
    export(lua, raw, "budget_reset", |_, (s,): (Value,)| {
        core::<BudgetBreaker>(&s, "reset")?.reset();
        crate::none()
    })?;
    export(lua, raw, "budget_tostring", |lua, (s,): (Value,)| {
        let handle = this::<BudgetBreaker>(&s, "tostring")?;
        let snapshot = handle.core.snapshot();
        let detail = format!("{} open tasks", snapshot.tasks.len());
        crate::describe_object(lua, "BudgetBreaker", &detail)
    })?;
    export_listener_methods::<BudgetBreaker>(
        lua,
        raw,
        [
            "budget_add_listener",
            "budget_remove_listener",
            "budget_listener_errors",
        ],
    )
}
