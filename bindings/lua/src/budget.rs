//! `agentbreaker.BudgetBreaker` (SPEC 4).

use std::cell::RefCell;

use agentbreaker::{AgentEvent, BudgetBreaker, BudgetConfig, Error, Halt, SystemClock};
use mlua::{BString, Lua, Table, Value};

use crate::convert::{self, Ctx};
use crate::{
    Class, FastSelf, Handle, add_listeners, core, event_source, export, export_fast,
    export_listener_methods, fast_self, hot_object, options, ret_json, this,
};

impl Class for BudgetBreaker {
    const NAME: &'static str = "BudgetBreaker";
}
event_source!(BudgetBreaker);

/// `ingest` of a plain `tool_use` or `assistant` event (see [`crate::capi`]) into `breaker`
/// (the C function `ingest` calls this): its kind, its `name` or `text`, and its `taskId` if it
/// has one, straight into the core, which reads nothing else of such an event (a tool's name
/// not even that) and checks the taskId as it checks every event's. Lua strings that are not
/// UTF-8 are read as the JSON conversion reads them (lossily). Conversion only.
pub(crate) fn ingest_plain(
    breaker: &BudgetBreaker,
    tool_use: bool,
    payload: &[u8],
    task_id: Option<&[u8]>,
) -> Result<Option<Halt>, Error> {
    let task_id = task_id.map(String::from_utf8_lossy);
    let task_id = task_id.as_deref();
    if tool_use {
        breaker.ingest_tool_use(task_id)
    } else {
        breaker.ingest_assistant(&String::from_utf8_lossy(payload), task_id)
    }
}

thread_local! {
    /// A halt or an error of `ingest` in the C function, until `budget_take_pending` takes it.
    static PENDING: RefCell<Option<Result<Option<Halt>, Error>>> = const { RefCell::new(None) };
}

/// Leaves the outcome of an `ingest` for `budget_take_pending`, which the C function calls next
/// (it cannot make Lua values from Rust ones itself).
pub(crate) fn stash(outcome: Result<Option<Halt>, Error>) {
    PENDING.with(|p| *p.borrow_mut() = Some(outcome));
}

/// Any other event: converted to JSON whole and validated by the core.
fn json_event(e: &Value) -> Result<AgentEvent, Error> {
    AgentEvent::from_json(&convert::to_json(e, Ctx::Event, "event")?)
}

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    export(lua, raw, "budget_new", |lua, (config,): (Value,)| {
        let opts = options(&config, "BudgetBreaker", false)?;
        let clock = opts.clock.unwrap_or_else(SystemClock::shared);
        let core_config = BudgetConfig::from_json(&opts.json)?;
        let handle = Handle::new(BudgetBreaker::with_clock(core_config, clock)?);
        add_listeners(lua, &handle, opts.listeners)?;
        hot_object(lua, handle)
    })?;
    // The halt table (`halt, nil`) or the error text (`nil, text`) that the C function `ingest`
    // left (see `stash`).
    let take_pending = lua.create_function(|lua, ()| {
        Ok(match PENDING.with(|p| p.borrow_mut().take()) {
            Some(Ok(Some(halt))) => match convert::result_to_lua(lua, &halt) {
                Ok(halt) => (halt, None),
                Err(e) => (Value::Nil, Some(e.to_string())),
            },
            Some(Err(e)) => (Value::Nil, Some(e.to_string())),
            Some(Ok(None)) | None => (Value::Nil, None),
        })
    })?;
    raw.raw_set("budget_take_pending", take_pending)?;
    // The hot path where the C function `ingest` does not go into the core itself (a breaker with
    // Lua listeners, an event that is not plain, ...): `(self, nil, kind, payload, taskId)` for a
    // plain event (what `plain_event` returned), `(self, event)` for any other. Returns the halt
    // table or `nil`, or `nil, error text` (a `self` that is not a BudgetBreaker included).
    export_fast(
        lua,
        raw,
        "budget_ingest_fast",
        |e| (Value::Nil, Some(e)),
        |lua,
         (s, e, kind, payload, task_id): (
            FastSelf<BudgetBreaker>,
            Value,
            Option<i64>,
            Option<BString>,
            Option<BString>,
        )| {
            let breaker = fast_self(s, "ingest")?;
            let halt = match (kind, payload) {
                (Some(kind), Some(payload)) => ingest_plain(
                    &breaker.core,
                    kind == 1,
                    &payload,
                    task_id.as_deref().map(|id| &id[..]),
                )?,
                _ => breaker.core.ingest_event(&json_event(&e)?)?,
            };
            let halt = match halt {
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
