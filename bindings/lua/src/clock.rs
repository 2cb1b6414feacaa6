//! `agentbreaker.ManualClock` and `agentbreaker.SystemClock` (docs/contract.md).

use std::sync::Arc;

use agentbreaker::interop::ArgKind;
use agentbreaker::{ManualClock, SharedClock, SystemClock};
use mlua::{Lua, Table, Value};

use crate::{Class, Handle, Methods, convert, none, ret};

/// A clock as Lua holds it: a ManualClock (settable) or the system clock.
#[derive(Debug)]
pub(crate) enum LuaClock {
    Manual(Arc<ManualClock>),
    System,
}

impl Class for LuaClock {
    const NAME: &'static str = "Clock";
}

impl LuaClock {
    /// The clock as the core's objects take it.
    pub(crate) fn shared(&self) -> SharedClock {
        match self {
            LuaClock::Manual(c) => c.clone(),
            LuaClock::System => SystemClock::shared(),
        }
    }

    fn manual(&self, method: &str) -> Result<&ManualClock, agentbreaker::Error> {
        match self {
            LuaClock::Manual(c) => Ok(c),
            LuaClock::System => Err(ArgKind::Argument.error(format_args!(
                "clock:{method}: the system clock cannot be moved; use agentbreaker.ManualClock.new()"
            ))),
        }
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<LuaClock>::new(lua, raw, "Clock")?
        .function("_manual", |lua, (start,): (Value,)| {
            let start = match start {
                Value::Nil => 0,
                v => convert::whole(&v, "ManualClock.new: startMs")?,
            };
            ret(
                lua,
                Handle::new(LuaClock::Manual(ManualClock::shared(start))).into_lua(lua)?,
            )
        })?
        .function("_system", |lua, ()| {
            ret(lua, Handle::new(LuaClock::System).into_lua(lua)?)
        })?
        .method("now", |lua, h, ()| ret(lua, h.core.shared().now_ms()))?
        .method("set", |_, h, (ms,): (Value,)| {
            h.core
                .manual("set")?
                .set(convert::whole(&ms, "clock:set: ms")?);
            none()
        })?
        .method("advance", |_, h, (ms,): (Value,)| {
            h.core
                .manual("advance")?
                .advance(convert::whole(&ms, "clock:advance: ms")?);
            none()
        })?
        .method("__tostring", |lua, h, ()| {
            let name = match *h.core {
                LuaClock::Manual(_) => "ManualClock",
                LuaClock::System => "SystemClock",
            };
            ret(
                lua,
                format!("agentbreaker.{name}({} ms)", h.core.shared().now_ms()),
            )
        })?;
    Ok(())
}
