//! `agentbreaker.ManualClock` and `agentbreaker.SystemClock` (SPEC 1).

use std::sync::Arc;

use agentbreaker::{Error, ManualClock, SharedClock, SystemClock};
use mlua::{Lua, Table, UserData, UserDataFields, Value};

use crate::convert::{lua_error, lua_type, to_u64};
use crate::{Out, export, none, ret};

/// A clock as Lua holds it: a ManualClock (settable) or the system clock.
#[derive(Debug, Clone)]
pub(crate) enum LuaClock {
    Manual(Arc<ManualClock>),
    System,
}

impl LuaClock {
    /// The clock as breakers take it.
    pub(crate) fn shared(&self) -> SharedClock {
        match self {
            LuaClock::Manual(c) => c.clone(),
            LuaClock::System => SystemClock::shared(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            LuaClock::Manual(_) => "ManualClock",
            LuaClock::System => "SystemClock",
        }
    }
}

impl UserData for LuaClock {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        for field in ["__index", "__newindex", "__tostring"] {
            fields.add_meta_field_with(field, move |lua| {
                let metas: Table = lua.named_registry_value("agentbreaker.meta.Clock")?;
                metas.raw_get::<Value>(field)
            });
        }
        fields.add_meta_field("__name", "agentbreaker.Clock");
    }
}

fn this(value: &Value, method: &str) -> Result<LuaClock, Error> {
    let wrong = || {
        Error::InvalidArgument(format!(
            "clock.{method}: self must be a clock, not a {} (call it as clock:{method}(...))",
            lua_type(value)
        ))
    };
    match value {
        Value::UserData(ud) => Ok(ud.borrow::<LuaClock>().map_err(|_| wrong())?.clone()),
        _ => Err(wrong()),
    }
}

fn manual(value: &Value, method: &str) -> Result<Arc<ManualClock>, Error> {
    match this(value, method)? {
        LuaClock::Manual(c) => Ok(c),
        LuaClock::System => Err(Error::InvalidArgument(format!(
            "clock.{method}: the system clock cannot be moved; use agentbreaker.ManualClock.new()"
        ))),
    }
}

fn new_clock(lua: &Lua, clock: LuaClock) -> Out {
    let ud = lua.create_userdata(clock).map_err(lua_error)?;
    ret(lua, ud)
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    export(lua, raw, "manual_clock_new", |lua, (start,): (Value,)| {
        let start = match start {
            Value::Nil => 0,
            v => to_u64(&v, "ManualClock.new: startMs")?,
        };
        new_clock(lua, LuaClock::Manual(ManualClock::shared(start)))
    })?;
    export(lua, raw, "system_clock_new", |lua, (): ()| {
        new_clock(lua, LuaClock::System)
    })?;
    export(lua, raw, "clock_now", |lua, (c,): (Value,)| {
        ret(lua, this(&c, "now")?.shared().now_ms())
    })?;
    export(lua, raw, "clock_set", |_, (c, ms): (Value, Value)| {
        let clock = manual(&c, "set")?;
        clock.set(to_u64(&ms, "clock:set: ms")?);
        none()
    })?;
    export(lua, raw, "clock_advance", |_, (c, ms): (Value, Value)| {
        let clock = manual(&c, "advance")?;
        clock.advance(to_u64(&ms, "clock:advance: ms")?);
        none()
    })?;
    export(lua, raw, "clock_tostring", |lua, (c,): (Value,)| {
        let clock = this(&c, "tostring")?;
        let now = clock.shared().now_ms();
        crate::describe_object(lua, clock.name(), &format!("{now} ms"))
    })
}
