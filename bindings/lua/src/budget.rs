//! `agentbreaker.BudgetBreaker` (SPEC 4).

use agentbreaker::{AgentEvent, BudgetBreaker, BudgetConfig, EventKind, SystemClock};
use mlua::{Lua, Table, Value};
use serde_json::json;

use crate::convert::{self, Ctx};
use crate::{
    Checked, Class, Handle, add_listeners, core, event_source, export, export_fast,
    export_listener_methods, object, options, ret, ret_json, this,
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
    // The hot path: a `tool_use` or `assistant` event the Lua side has found plain (no
    // metatable; `type`, the name or text, `taskId` and for tool_use `input`, all of them values
    // that convert to JSON). It passes the kind, the name or text, and the taskId (or `nil`);
    // the other keys are ones the core does not read for these kinds. Returns the halt table or
    // `nil`, or `nil, error text`.
    export_fast(
        lua,
        raw,
        "budget_ingest_fast",
        |e| (Value::Nil, Some(e)),
        |lua, (s, tool_use, payload, task_id): (Checked<BudgetBreaker>, bool, Value, Value)| {
            let payload = convert::to_string(&payload, "event payload")?;
            let task_id = convert::to_optional_string(&task_id, "event.taskId")?;
            let (kind_name, payload_key) = if tool_use {
                ("tool_use", "name")
            } else {
                ("assistant", "text")
            };
            let event = match task_id {
                // Nothing to validate: the event is its kind and its string.
                None => AgentEvent {
                    task_id: None,
                    kind: if tool_use {
                        EventKind::ToolUse(payload)
                    } else {
                        EventKind::Assistant(payload)
                    },
                },
                // The core checks the taskId.
                Some(id) => AgentEvent::from_json(
                    &json!({"type": kind_name, payload_key: payload, "taskId": id}),
                )?,
            };
            let halt = match s.core.ingest_event(&event)? {
                Some(halt) => convert::result_to_lua(lua, &halt)?,
                None => Value::Nil,
            };
            Ok((halt, None::<String>))
        },
    )?;
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
