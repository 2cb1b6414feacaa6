//! `agentbreaker.BudgetBreaker`. `ingest` is a C function (`capi`) in front of the method here.

use agentbreaker::interop::ArgKind;
use agentbreaker::{BudgetBreaker, BudgetConfig};
use mlua::{Lua, Table, Value};

use crate::{Methods, Options, convert, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<BudgetBreaker>::new(lua, raw, "BudgetBreaker")?
        .function("new", |lua, (config, metatable): (Value, Table)| {
            let opts = Options::read::<BudgetBreaker>(lua, &config, false)?;
            let core =
                BudgetBreaker::with_clock(BudgetConfig::from_json(&opts.json)?, opts.clock())?;
            opts.into_object(lua, core, None)?.into_hot(lua, &metatable)
        })?
        // The halt, or nil.
        .method("ingest", |lua, h, (event,): (Value,)| {
            let event = convert::to_json(lua, &event, "event", ArgKind::Event)?;
            ret_json(lua, &h.core.ingest(&event)?)
        })?
        .method("tick", |lua, h, ()| ret_json(lua, &h.core.tick()))?
        .method("snapshot", |lua, h, ()| ret_json(lua, &h.core.snapshot()))?
        .action("reset", BudgetBreaker::reset)?
        .listeners()?;
    Ok(())
}
