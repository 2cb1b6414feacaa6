//! `agentbreaker.Monitor` (docs/monitor.md): one agent watched event by event, every event
//! answered with a verdict table `{action, reason, message, nudge, taskId, step, detail}`.

use agentbreaker::interop::ArgKind;
use agentbreaker::{Monitor, MonitorConfig};
use mlua::{Lua, Table, Value};

use crate::functions::metric_options;
use crate::{Methods, Options, convert, listeners, none, ret, ret_json};

pub(crate) fn export_all(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    Methods::<Monitor>::new(lua, raw, "Monitor")?
        .function("new", |lua, (config,): (Value,)| {
            let opts = Options::read::<Monitor>(lua, &config, false)?;
            let core = Monitor::with_clock(MonitorConfig::from_json(&opts.json)?, opts.clock())?;
            ret(lua, opts.into_object(lua, core, None)?.into_lua(lua)?)
        })?
        .method("observe", |lua, h, (event,): (Value,)| {
            let event = convert::to_json(lua, &event, "event", ArgKind::Event)?;
            ret_json(lua, &h.core.observe(&event)?)
        })?
        .method("tick", |lua, h, ()| ret_json(lua, &h.core.tick()))?
        .method("status", |lua, h, ()| ret_json(lua, &h.core.status()))?
        .method("snapshot", |lua, h, ()| ret_json(lua, &h.core.snapshot()))?
        .method("restore", |lua, h, (snapshot,): (Value,)| {
            h.core.restore(&convert::snapshot(lua, &snapshot)?)?;
            none()
        })?
        .action("reset", Monitor::reset)?
        .method("config", |lua, h, ()| ret_json(lua, h.core.config()))?
        .method("storeStatus", |lua, h, ()| {
            ret_json(lua, &h.core.store_status())
        })?
        .method("setMetricsRecorder", |lua, h, (f, o): (Value, Value)| {
            let options = metric_options(&o, "Monitor.setMetricsRecorder: options")?;
            h.core
                .set_metrics_recorder(listeners::recorder(lua, f)?, options);
            none()
        })?
        .listeners()?;
    Ok(())
}
