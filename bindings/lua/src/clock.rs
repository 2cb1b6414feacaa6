//! `agentbreaker.ManualClock` and `agentbreaker.SystemClock`.

use std::sync::Arc;

use agentbreaker::interop::ArgKind;
use agentbreaker::{Error, ManualClock, SharedClock, SystemClock};
use mlua::{Lua, Table, Value};

use crate::{Handle, Methods, convert, none, ret};

/// A clock as Lua holds it: a ManualClock, or the system clock (`None`).
#[derive(Debug)]
pub(crate) struct LuaClock(Option<Arc<ManualClock>>);

impl LuaClock {
    /// The clock as the core's objects take it.
    pub(crate) fn shared(&self) -> SharedClock {
        self.0
            .clone()
            .map_or_else(SystemClock::shared, |c| c as SharedClock)
    }

    /// A clock that code moves: `clock:set(ms)`, `clock:advance(ms)`.
    fn manual(&self, method: &str, ms: &Value) -> Result<(&ManualClock, u64), Error> {
        let clock = self.0.as_deref().ok_or_else(|| {
            let hint = "the system clock cannot be moved; use agentbreaker.ManualClock.new()";
            ArgKind::Argument.error(format_args!("clock:{method}: {hint}"))
        })?;
        Ok((clock, convert::whole(ms, &format!("clock:{method}: ms"))?))
    }
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    let new = |lua: &Lua, clock| Handle::new(LuaClock(clock)).into_lua(lua);
    Methods::<LuaClock>::new(lua, raw, "Clock")?
        .function("_manual", move |lua, (start,): (Value,)| {
            let start = match start {
                Value::Nil => 0,
                v => convert::whole(&v, "ManualClock.new: startMs")?,
            };
            new(lua, Some(ManualClock::shared(start)))
        })?
        .function("_system", move |lua, ()| new(lua, None))?
        .method("now", |lua, h, ()| ret(lua, h.core.shared().now_ms()))?
        .method("set", |_, h, (ms,): (Value,)| {
            let (clock, ms) = h.core.manual("set", &ms)?;
            clock.set(ms);
            none()
        })?
        .method("advance", |_, h, (ms,): (Value,)| {
            let (clock, ms) = h.core.manual("advance", &ms)?;
            clock.advance(ms);
            none()
        })?
        .method("__tostring", |lua, h, ()| {
            let name = if h.core.0.is_some() {
                "ManualClock"
            } else {
                "SystemClock"
            };
            ret(
                lua,
                format!("agentbreaker.{name}({} ms)", h.core.shared().now_ms()),
            )
        })?;
    Ok(())
}
