//! The events a Monitor reads (contract section 11), validated before anything changes.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::budget::{AgentEvent, Phase, Usage};
use crate::error::{Error, Result};
use crate::interop::{Fields, type_name};

/// The longest tool name, call id or digest kept (longer ones are cut at a character boundary).
pub const MAX_NAME_BYTES: usize = 256;

/// One event of an agent's stream, borrowed from its JSON where it can be.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorEvent<'a> {
    /// The task it counts for (`None`: the active task, else the session).
    pub task_id: Option<Cow<'a, str>>,
    /// What it says.
    pub kind: MonitorEventKind<'a>,
}

/// What an event says.
#[derive(Debug, Clone, PartialEq)]
pub enum MonitorEventKind<'a> {
    /// A model call ended: a new step begins.
    Assistant {
        /// Its text (may be empty).
        text: Cow<'a, str>,
        /// What the call cost, when the event carries it (`usage`, `model`, `costCents` as a
        /// usage event's): counted as a usage event right after this one would be.
        spend: Option<Spend<'a>>,
    },
    /// A tool call of the current step.
    ToolUse {
        /// The tool.
        name: Cow<'a, str>,
        /// Its input (`Null` when not given).
        input: Cow<'a, Value>,
        /// The call's id, which its result names.
        id: Option<Cow<'a, str>>,
    },
    /// A tool call's outcome.
    ToolResult {
        /// Whether the call succeeded.
        ok: bool,
        /// What it returned (empty when not given).
        text: Cow<'a, str>,
        /// The call's id.
        id: Option<Cow<'a, str>>,
        /// The tool's name.
        name: Option<Cow<'a, str>>,
    },
    /// Tokens spent (priced by the budget's table), or a cost given in cents.
    Usage {
        /// The model, which picks the price entry.
        model: Option<Cow<'a, str>>,
        /// The token counts.
        usage: Usage,
        /// The cost in cents, used instead of the price table when given.
        cost_cents: Option<f64>,
    },
    /// An agent-level error outside any tool call.
    Error {
        /// The error text.
        text: Cow<'a, str>,
        /// A rate limit, a 5xx, a timeout: never counted as the agent's own failure.
        transient: bool,
    },
    /// Work was done.
    Progress {
        /// Files changed (the length of the `files` list, or the count given).
        files: u64,
        /// Tests passing now.
        tests_passing: Option<u64>,
        /// A hash of the resulting content: one already seen in the task is not progress.
        digest: Option<Cow<'a, str>>,
    },
    /// A task starts or ends (contract section 4).
    Heartbeat(Phase),
    /// The agent is working but said nothing the rules use: refreshes the idle timer.
    Alive,
    /// Any other `type`: ignored and counted.
    Unknown,
}

/// The spend an `assistant` event may carry: a usage event's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend<'a> {
    /// The model, which picks the price entry.
    pub model: Option<Cow<'a, str>>,
    /// The token counts.
    pub usage: Usage,
    /// The cost in cents, used instead of the price table when given.
    pub cost_cents: Option<f64>,
}

impl<'a> Spend<'a> {
    /// The usage event it stands for.
    pub fn as_usage(&self) -> MonitorEventKind<'_> {
        MonitorEventKind::Usage {
            model: self.model.as_deref().map(Cow::Borrowed),
            usage: self.usage,
            cost_cents: self.cost_cents,
        }
    }

    /// A usage event's fields, read from `f`: `usage` (token counts), `costCents`, `model`.
    fn read(f: &Fields<'a>, what: &str) -> Result<Self> {
        let cost_cents = match f.get("costCents") {
            None => None,
            Some(v) => Some(
                v.as_f64()
                    .filter(|c| c.is_finite() && *c >= 0.0 && *c <= 1e15)
                    .ok_or_else(|| {
                        Error::event(format_args!(
                            "{what} costCents must be a number from 0 to 1e15"
                        ))
                    })?,
            ),
        };
        let usage = match f.get("usage") {
            None if cost_cents.is_some() => Usage::default(),
            None => {
                return Err(Error::event(format_args!(
                    "a {what} event needs a \"usage\" object or \"costCents\""
                )));
            }
            Some(u) => Usage::read(&Fields::open(u, "usage", Error::InvalidEvent)?)?,
        };
        Ok(Spend {
            model: f.str_opt("model")?.map(Cow::Borrowed),
            usage,
            cost_cents,
        })
    }
}

/// A field of a host's event object, as [`EventFields`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Field<T> {
    /// The key is not there.
    Absent,
    /// The value, of the type asked for.
    Is(T),
    /// Anything else (`null`, another type, a number out of range): the event is then read as
    /// JSON, which accepts or refuses it.
    Other,
}

/// The keys [`MonitorEvent::read_fields`] asks an [`EventFields`] for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKey {
    /// `type`.
    Type,
    /// `taskId`.
    TaskId,
    /// `text`.
    Text,
    /// `name`.
    Name,
    /// `input`.
    Input,
    /// `id`.
    Id,
    /// `ok`.
    Ok,
    /// `usage`.
    Usage,
    /// `model`.
    Model,
}

impl EventKey {
    /// Every key, in the order of their numbers (`key as usize`).
    pub const ALL: [EventKey; 9] = [
        EventKey::Type,
        EventKey::TaskId,
        EventKey::Text,
        EventKey::Name,
        EventKey::Input,
        EventKey::Id,
        EventKey::Ok,
        EventKey::Usage,
        EventKey::Model,
    ];

    /// The key's name in an event.
    pub fn name(self) -> &'static str {
        match self {
            EventKey::Type => "type",
            EventKey::TaskId => "taskId",
            EventKey::Text => "text",
            EventKey::Name => "name",
            EventKey::Input => "input",
            EventKey::Id => "id",
            EventKey::Ok => "ok",
            EventKey::Usage => "usage",
            EventKey::Model => "model",
        }
    }
}

/// A host's event object (a dict, a table) read field by field, so that a binding can hand over
/// an event of the common shapes without building a JSON value first
/// ([`MonitorEvent::read_fields`]).
pub trait EventFields {
    /// How many keys the object has.
    fn keys(&self) -> usize;
    /// `key` as a string.
    fn text(&mut self, key: EventKey) -> Field<String>;
    /// `key` as a boolean.
    fn flag(&mut self, key: EventKey) -> Field<bool>;
    /// `key` as any JSON value.
    fn json(&mut self, key: EventKey) -> Field<Value>;
    /// `key` as an object of whole numbers from 0 to `u64::MAX`, its pairs.
    fn counts(&mut self, key: EventKey) -> Field<Vec<(String, u64)>>;
}

/// `Some(None)` for an absent field, `Some(Some(v))` for a value (counted in `used`), `None`
/// for anything else.
fn optional<T>(field: Field<T>, used: &mut usize) -> Option<Option<T>> {
    match field {
        Field::Absent => Some(None),
        Field::Is(v) => {
            *used += 1;
            Some(Some(v))
        }
        Field::Other => None,
    }
}

/// A usage event's token counts and `model` (`Some(None)` without `usage`).
fn read_spend(f: &mut dyn EventFields, used: &mut usize) -> Option<Option<Spend<'static>>> {
    let Some(counts) = optional(f.counts(EventKey::Usage), used)? else {
        return Some(None);
    };
    let mut usage = Usage::default();
    for (name, n) in counts {
        *usage.count_mut(&name)? = n;
    }
    let model = optional(f.text(EventKey::Model), used)?.map(Cow::Owned);
    Some(Some(Spend {
        model,
        usage,
        cost_cents: None,
    }))
}

impl MonitorEvent<'static> {
    /// An event of the shapes the framework adapters send (`assistant`, with its spend or
    /// without, `tool_use`, `tool_result`, `usage` with token counts) read from a host's object,
    /// every key one the Monitor reads and every value of its type. `None` for anything else,
    /// which the host converts to JSON for [`MonitorEvent::from_json`]: either way gives the same
    /// event, or the same error. Give it to `Monitor::observe_event`, which validates it.
    pub fn read_fields(f: &mut dyn EventFields) -> Option<Self> {
        let used = &mut 0;
        let own = |t: Option<String>| t.map(Cow::Owned);
        let kind = optional(f.text(EventKey::Type), used)??;
        let task_id = own(optional(f.text(EventKey::TaskId), used)?);
        let kind = match kind.as_str() {
            "assistant" => MonitorEventKind::Assistant {
                text: Cow::Owned(optional(f.text(EventKey::Text), used)??),
                spend: read_spend(f, used)?,
            },
            "tool_use" => MonitorEventKind::ToolUse {
                name: Cow::Owned(optional(f.text(EventKey::Name), used)??),
                input: Cow::Owned(optional(f.json(EventKey::Input), used)?.unwrap_or(Value::Null)),
                id: own(optional(f.text(EventKey::Id), used)?),
            },
            "tool_result" => MonitorEventKind::ToolResult {
                ok: optional(f.flag(EventKey::Ok), used)??,
                text: Cow::Owned(optional(f.text(EventKey::Text), used)?.unwrap_or_default()),
                id: own(optional(f.text(EventKey::Id), used)?),
                name: own(optional(f.text(EventKey::Name), used)?),
            },
            "usage" => {
                let Spend { model, usage, .. } = read_spend(f, used)??;
                MonitorEventKind::Usage {
                    model,
                    usage,
                    cost_cents: None,
                }
            }
            _ => return None,
        };
        (*used == f.keys()).then_some(MonitorEvent { task_id, kind })
    }
}

impl<'a> MonitorEvent<'a> {
    /// Validates a JSON event; anything malformed is `INVALID_EVENT`. Keys the Monitor does not
    /// read are allowed (frameworks add their own).
    pub fn from_json(value: &'a Value) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(Error::event(format_args!(
                "an event must be an object, not {}",
                type_name(value)
            )));
        };
        let kind_name = match map.get("type") {
            Some(Value::String(s)) => s.as_str(),
            Some(v) => {
                return Err(Error::event(format_args!(
                    "event type must be a string, not {}",
                    type_name(v)
                )));
            }
            None => return Err(Error::event("an event needs a \"type\"")),
        };
        let task_id = match map.get("taskId") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                AgentEvent::check_task_id(s)?;
                Some(Cow::Borrowed(s.as_str()))
            }
            Some(v) => {
                return Err(Error::event(format_args!(
                    "taskId must be a string, not {}",
                    type_name(v)
                )));
            }
        };
        let f = Fields::open(value, "event", Error::InvalidEvent)?;
        let kind = match kind_name {
            "assistant" => MonitorEventKind::Assistant {
                text: Cow::Borrowed(required_str(map, "text", "an assistant event")?),
                spend: match f.get("usage").is_some() || f.get("costCents").is_some() {
                    true => Some(Spend::read(&f, "assistant")?),
                    false => None,
                },
            },
            "tool_use" => {
                let name = required_str(map, "name", "a tool_use event")?;
                if name.is_empty() {
                    return Err(Error::event("a tool_use name must not be empty"));
                }
                MonitorEventKind::ToolUse {
                    name: Cow::Borrowed(name),
                    input: Cow::Borrowed(map.get("input").unwrap_or(&Value::Null)),
                    id: f.str_opt("id")?.map(Cow::Borrowed),
                }
            }
            "tool_result" => {
                let ok = match map.get("ok") {
                    Some(Value::Bool(b)) => *b,
                    Some(v) if !v.is_null() => {
                        return Err(Error::event(format_args!(
                            "tool_result ok must be a boolean, not {}",
                            type_name(v)
                        )));
                    }
                    _ => return Err(Error::event("a tool_result event needs \"ok\"")),
                };
                MonitorEventKind::ToolResult {
                    ok,
                    text: Cow::Borrowed(f.str_opt("text")?.unwrap_or("")),
                    id: f.str_opt("id")?.map(Cow::Borrowed),
                    name: f.str_opt("name")?.map(Cow::Borrowed),
                }
            }
            "usage" => {
                let Spend {
                    model,
                    usage,
                    cost_cents,
                } = Spend::read(&f, "usage")?;
                MonitorEventKind::Usage {
                    model,
                    usage,
                    cost_cents,
                }
            }
            "error" => MonitorEventKind::Error {
                text: Cow::Borrowed(required_str(map, "text", "an error event")?),
                transient: f.bool_or("transient", false)?,
            },
            "progress" => {
                let files = match f.get("files") {
                    None => 0,
                    Some(Value::Array(paths)) => {
                        if let Some(bad) = paths.iter().find(|p| !p.is_string()) {
                            return Err(Error::event(format_args!(
                                "progress files must be paths (strings), not {}",
                                type_name(bad)
                            )));
                        }
                        paths.len() as u64
                    }
                    Some(v) => v.as_u64().ok_or_else(|| {
                        Error::event(format_args!(
                            "progress files must be a list of paths or a whole number >= 0, \
                             not {}",
                            type_name(v)
                        ))
                    })?,
                };
                let tests_passing = match f.get("testsPassing") {
                    None => None,
                    Some(_) => Some(f.u64_or("testsPassing", 0)?),
                };
                MonitorEventKind::Progress {
                    files,
                    tests_passing,
                    digest: f.str_opt("digest")?.map(Cow::Borrowed),
                }
            }
            "heartbeat" => {
                if task_id.is_none() {
                    return Err(Error::event("a heartbeat needs a taskId"));
                }
                MonitorEventKind::Heartbeat(match f.get("phase") {
                    Some(Value::String(p)) if p == "starting" => Phase::Starting,
                    Some(Value::String(p)) if p == "done" => Phase::Done,
                    Some(Value::String(p)) if p == "error" => Phase::Error,
                    _ => {
                        return Err(Error::event(
                            "a heartbeat's phase must be \"starting\", \"done\" or \"error\"",
                        ));
                    }
                })
            }
            "alive" => MonitorEventKind::Alive,
            _ => MonitorEventKind::Unknown,
        };
        Ok(MonitorEvent { task_id, kind })
    }

    /// The event with every borrowed part copied.
    pub fn into_owned(self) -> MonitorEvent<'static> {
        fn own(c: Cow<'_, str>) -> Cow<'static, str> {
            Cow::Owned(c.into_owned())
        }
        let kind = match self.kind {
            MonitorEventKind::Assistant { text, spend } => MonitorEventKind::Assistant {
                text: own(text),
                spend: spend.map(|s| Spend {
                    model: s.model.map(own),
                    usage: s.usage,
                    cost_cents: s.cost_cents,
                }),
            },
            MonitorEventKind::ToolUse { name, input, id } => MonitorEventKind::ToolUse {
                name: own(name),
                input: Cow::Owned(input.into_owned()),
                id: id.map(own),
            },
            MonitorEventKind::ToolResult { ok, text, id, name } => MonitorEventKind::ToolResult {
                ok,
                text: own(text),
                id: id.map(own),
                name: name.map(own),
            },
            MonitorEventKind::Usage {
                model,
                usage,
                cost_cents,
            } => MonitorEventKind::Usage {
                model: model.map(own),
                usage,
                cost_cents,
            },
            MonitorEventKind::Error { text, transient } => MonitorEventKind::Error {
                text: own(text),
                transient,
            },
            MonitorEventKind::Progress {
                files,
                tests_passing,
                digest,
            } => MonitorEventKind::Progress {
                files,
                tests_passing,
                digest: digest.map(own),
            },
            MonitorEventKind::Heartbeat(p) => MonitorEventKind::Heartbeat(p),
            MonitorEventKind::Alive => MonitorEventKind::Alive,
            MonitorEventKind::Unknown => MonitorEventKind::Unknown,
        };
        MonitorEvent {
            task_id: self.task_id.map(own),
            kind,
        }
    }

    /// An event of `kind` for the current task.
    pub fn new(kind: MonitorEventKind<'a>) -> Self {
        MonitorEvent {
            task_id: None,
            kind,
        }
    }

    /// The same event for task `task_id`.
    pub fn for_task(mut self, task_id: impl Into<Cow<'a, str>>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }

    /// `{"type": "assistant", "text": text}`.
    pub fn assistant(text: impl Into<Cow<'a, str>>) -> Self {
        Self::new(MonitorEventKind::Assistant {
            text: text.into(),
            spend: None,
        })
    }

    /// `{"type": "tool_use", "name": name, "input": input, "id": id}`.
    pub fn tool_use(
        name: impl Into<Cow<'a, str>>,
        input: Value,
        id: Option<impl Into<Cow<'a, str>>>,
    ) -> Self {
        Self::new(MonitorEventKind::ToolUse {
            name: name.into(),
            input: Cow::Owned(input),
            id: id.map(Into::into),
        })
    }

    /// `{"type": "tool_result", "ok": ok, "text": text, "id": id}`.
    pub fn tool_result(
        ok: bool,
        text: impl Into<Cow<'a, str>>,
        id: Option<impl Into<Cow<'a, str>>>,
    ) -> Self {
        Self::new(MonitorEventKind::ToolResult {
            ok,
            text: text.into(),
            id: id.map(Into::into),
            name: None,
        })
    }

    /// Checks what the typed constructors cannot: a taskId's length, a tool name's emptiness,
    /// a cost's range (the same rules as [`MonitorEvent::from_json`]).
    pub fn validate(&self) -> Result<()> {
        if let Some(id) = &self.task_id {
            AgentEvent::check_task_id(id)?;
        }
        match &self.kind {
            MonitorEventKind::ToolUse { name, .. } if name.is_empty() => {
                Err(Error::event("a tool_use name must not be empty"))
            }
            MonitorEventKind::Usage {
                cost_cents: Some(c),
                ..
            }
            | MonitorEventKind::Assistant {
                spend:
                    Some(Spend {
                        cost_cents: Some(c),
                        ..
                    }),
                ..
            } if !(c.is_finite() && *c >= 0.0 && *c <= 1e15) => Err(Error::event(
                "usage costCents must be a number from 0 to 1e15",
            )),
            MonitorEventKind::Heartbeat(_) if self.task_id.is_none() => {
                Err(Error::event("a heartbeat needs a taskId"))
            }
            _ => Ok(()),
        }
    }
}

fn required_str<'a>(map: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(v) if !v.is_null() => Err(Error::event(format_args!(
            "{what}'s {key} must be a string, not {}",
            type_name(v)
        ))),
        _ => Err(Error::event(format_args!("{what} needs a \"{key}\""))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_event_type_reads() {
        let cases = [
            json!({"type": "assistant", "text": ""}),
            json!({"type": "tool_use", "name": "Bash", "input": {"command": "ls"}, "id": "t1"}),
            json!({"type": "tool_result", "ok": false, "text": "boom", "id": "t1", "name": "Bash"}),
            json!({"type": "usage", "usage": {"input_tokens": 3, "service_tier": "x"}}),
            json!({"type": "usage", "costCents": 1.5}),
            json!({"type": "error", "text": "rate limited", "transient": true}),
            json!({"type": "progress", "files": ["a.py"], "testsPassing": 3, "digest": "ab"}),
            json!({"type": "progress", "files": 2}),
            json!({"type": "heartbeat", "taskId": "t", "phase": "starting"}),
            json!({"type": "alive", "taskId": "sub"}),
            json!({"type": "something_new", "x": 1}),
        ];
        for c in &cases {
            MonitorEvent::from_json(c).unwrap_or_else(|e| panic!("{c}: {e}"));
        }
        let e = MonitorEvent::from_json(&cases[6]).unwrap();
        assert_eq!(
            e.kind,
            MonitorEventKind::Progress {
                files: 1,
                tests_passing: Some(3),
                digest: Some("ab".into())
            }
        );
        assert_eq!(
            MonitorEvent::from_json(&cases[10]).unwrap().kind,
            MonitorEventKind::Unknown
        );
    }

    #[test]
    fn malformed_events_are_invalid_event() {
        for bad in [
            json!([1]),
            json!({"text": "no type"}),
            json!({"type": 3}),
            json!({"type": "assistant"}),
            json!({"type": "assistant", "text": 1}),
            json!({"type": "tool_use"}),
            json!({"type": "tool_use", "name": ""}),
            json!({"type": "tool_use", "name": "x", "id": 4}),
            json!({"type": "tool_result", "text": "x"}),
            json!({"type": "tool_result", "ok": "yes"}),
            json!({"type": "tool_result", "ok": true, "text": {"a": 1}}),
            json!({"type": "usage"}),
            json!({"type": "usage", "usage": {"input_tokens": -1}}),
            json!({"type": "usage", "costCents": -1}),
            json!({"type": "error"}),
            json!({"type": "error", "text": "x", "transient": "no"}),
            json!({"type": "progress", "files": [1]}),
            json!({"type": "progress", "files": 1.5}),
            json!({"type": "progress", "testsPassing": -2}),
            json!({"type": "progress", "digest": 7}),
            json!({"type": "heartbeat", "phase": "starting"}),
            json!({"type": "heartbeat", "taskId": "t", "phase": "paused"}),
            json!({"type": "alive", "taskId": ""}),
            json!({"type": "alive", "taskId": 5}),
        ] {
            assert_eq!(
                MonitorEvent::from_json(&bad).unwrap_err().code(),
                "INVALID_EVENT",
                "{bad}"
            );
        }
    }

    /// A JSON object read field by field, as a binding reads a host's object.
    struct JsonFields<'a>(&'a Map<String, Value>);

    impl JsonFields<'_> {
        fn get<T>(&self, key: EventKey, read: impl FnOnce(&Value) -> Option<T>) -> Field<T> {
            match self.0.get(key.name()) {
                None => Field::Absent,
                Some(v) => read(v).map_or(Field::Other, Field::Is),
            }
        }
    }

    impl EventFields for JsonFields<'_> {
        fn keys(&self) -> usize {
            self.0.len()
        }
        fn text(&mut self, key: EventKey) -> Field<String> {
            self.get(key, |v| v.as_str().map(str::to_string))
        }
        fn flag(&mut self, key: EventKey) -> Field<bool> {
            self.get(key, Value::as_bool)
        }
        fn json(&mut self, key: EventKey) -> Field<Value> {
            self.get(key, |v| Some(v.clone()))
        }
        fn counts(&mut self, key: EventKey) -> Field<Vec<(String, u64)>> {
            self.get(key, |v| {
                let pairs = v.as_object()?.iter();
                pairs.map(|(k, n)| Some((k.clone(), n.as_u64()?))).collect()
            })
        }
    }

    #[test]
    fn events_read_field_by_field_are_the_json_ones_or_none() {
        let read = [
            json!({"type": "assistant", "text": "hi", "taskId": "t"}),
            json!({"type": "assistant", "text": "", "model": "m", "usage": {"input_tokens": 3,
                   "output_tokens": 4, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 6}}),
            json!({"type": "tool_use", "name": "Bash", "input": {"command": ["ls", 1, null]}, "id": "c1"}),
            json!({"type": "tool_use", "name": "Read"}),
            json!({"type": "tool_result", "ok": false, "text": "boom", "id": "c1", "name": "Bash"}),
            json!({"type": "tool_result", "ok": true}),
            json!({"type": "usage", "usage": {"output_tokens": 7}, "taskId": "t"}),
        ];
        for event in read {
            let typed = MonitorEvent::read_fields(&mut JsonFields(event.as_object().unwrap()));
            let json = MonitorEvent::from_json(&event).unwrap().into_owned();
            assert_eq!(typed, Some(json), "{event}");
        }
        // Anything else is left to the JSON path (which accepts or refuses it).
        let left = [
            json!({"type": "assistant", "text": "hi", "extra": 1}),
            json!({"type": "assistant", "text": "hi", "model": "m"}),
            json!({"type": "assistant", "text": "hi", "costCents": 1}),
            json!({"type": "assistant", "text": null}),
            json!({"type": "assistant"}),
            json!({"type": "tool_use", "name": "Bash", "id": null}),
            json!({"type": "tool_result", "ok": 1}),
            json!({"type": "usage", "usage": {"input_tokens": -1}}),
            json!({"type": "usage", "usage": {"tokens": 1}}),
            json!({"type": "usage", "costCents": 2}),
            json!({"type": "progress", "files": 1}),
            json!({"type": 3}),
        ];
        for event in left {
            let typed = MonitorEvent::read_fields(&mut JsonFields(event.as_object().unwrap()));
            assert_eq!(typed, None, "{event}");
        }
    }
}
