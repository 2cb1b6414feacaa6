//! `agentbreaker.BudgetBreaker` (docs/contract.md). Its `ingest` is a C function (`capi`) in
//! front of the method here.

use agentbreaker::interop::ArgKind;
use agentbreaker::{BudgetBreaker, BudgetConfig};
use mlua::{Lua, Table, Value};

use crate::{Handle, Methods, Options, convert, describe_object, none, ret, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<BudgetBreaker>::new(lua, raw, "BudgetBreaker")?
        .function("new", |lua, (config,): (Value,)| {
            let mut opts = Options::read::<BudgetBreaker>(lua, &config, false)?;
            let config = BudgetConfig::from_json(&opts.json)?;
            let handle = Handle::new(BudgetBreaker::with_clock(config, opts.clock())?);
            opts.add_listeners(lua, &handle)?;
            handle.into_hot(lua)
        })?
        // The halt, or nil.
        .method("ingest", |lua, h, (event,): (Value,)| {
            let event = convert::to_json(lua, &event, "event", ArgKind::Event)?;
            match h.core.ingest(&event)? {
                Some(halt) => ret_json(lua, &halt),
                None => ret(lua, Value::Nil),
            }
        })?
        .method("tick", |lua, h, ()| ret_json(lua, &h.core.tick()))?
        .method("snapshot", |lua, h, ()| ret_json(lua, &h.core.snapshot()))?
        .method("reset", |_, h, ()| {
            h.core.reset();
            none()
        })?
        .listeners()?
        .method("__tostring", |lua, h, ()| {
            let detail = format!("{} open tasks", h.core.snapshot().tasks.len());
            describe_object::<BudgetBreaker>(lua, &detail)
        })?;
    Ok(())
}
