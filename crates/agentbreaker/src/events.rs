//! Events pushed to listeners, and the isolated listener registry every breaker embeds.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;

use crate::budget::Halt;
use crate::monitor::Verdict;
use crate::state::State;

/// Something a breaker tells its listeners.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// The breaker moved from one state to another.
    StateChange {
        /// The state before.
        from: State,
        /// The state after.
        to: State,
        /// Why, in words for people.
        reason: String,
        /// The rule behind a change to OPEN or HALF_OPEN, by its stable slug (for code:
        /// `consecutive_failures` for a FailureBreaker, the StagnationBreaker's rules); `None`
        /// for a recovery, a probe or a reset.
        slug: Option<&'static str>,
        /// Clock time of the change.
        at_ms: u64,
    },
    /// A warning (the FailureBreaker's approaching-threshold warning, a skipped fix-plan step, a
    /// failed save).
    Warning {
        /// The warning text.
        message: String,
        /// Clock time of the warning.
        at_ms: u64,
    },
    /// A BudgetBreaker halt.
    Halt {
        /// The halt, as `ingest`/`tick` return it.
        halt: Halt,
        /// Clock time of the halt.
        at_ms: u64,
    },
    /// A Monitor's warning or halt: the verdict's keys, beside `type` and `atMs`.
    Verdict {
        /// The verdict, as `observe`/`tick` return it.
        #[serde(flatten)]
        verdict: Verdict,
        /// Clock time of the verdict.
        at_ms: u64,
    },
}

impl Event {
    /// The event as JSON (`{"type": "stateChange", ...}`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// What a listener returns: an error is counted in `listener_errors` and otherwise ignored.
pub type ListenerResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A listener callback.
pub type Listener = Arc<dyn Fn(&Event) -> ListenerResult + Send + Sync>;

/// Identifies a listener for removal. Its number is what a binding hands its host
/// ([`ListenerId::number`], and back with [`ListenerId::from_number`]): unique in the process, so
/// an id from one object given to another removes nothing there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

impl ListenerId {
    /// The id's number, never 0.
    pub fn number(self) -> u64 {
        self.0
    }

    /// The id of `number` (one the object never gave names no listener: removing it is false).
    pub fn from_number(number: u64) -> Self {
        ListenerId(number)
    }
}

/// A set of listeners, called outside the owner's locks, each isolated from the others and from
/// the owner: a listener that errors or panics is counted and skipped.
///
/// Delivery is ordered: the owner [`enqueue`](Listeners::enqueue)s events while it still holds its
/// state lock (so the queue holds them in the order the transitions happened) and calls
/// [`deliver`](Listeners::deliver) after releasing it. One thread at a time delivers the whole
/// queue; a thread that finds a delivery under way leaves its events to it. Events caused by a
/// listener calling back into the owner are delivered after that listener returns.
#[derive(Default)]
pub struct Listeners {
    list: RwLock<Vec<(ListenerId, Listener)>>,
    count: AtomicUsize,
    errors: AtomicU64,
    queue: Mutex<Queue>,
    /// Events in the queue; read without the queue's lock so `deliver` costs one atomic load when
    /// there is nothing to deliver (the hot path).
    pending: AtomicUsize,
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Event>,
    delivering: bool,
}

impl fmt::Debug for Listeners {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listeners")
            .field("count", &self.len())
            .field("errors", &self.error_count())
            .finish()
    }
}

impl Listeners {
    /// Adds a listener.
    pub fn add(&self, listener: Listener) -> ListenerId {
        // Numbered across the process (see [`ListenerId`]).
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = ListenerId(NEXT.fetch_add(1, Ordering::Relaxed));
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        list.push((id, listener));
        self.count.store(list.len(), Ordering::Release);
        id
    }

    /// Removes a listener; false when it was not there.
    pub fn remove(&self, id: ListenerId) -> bool {
        let mut list = self.list.write().unwrap_or_else(|p| p.into_inner());
        let before = list.len();
        list.retain(|(i, _)| *i != id);
        self.count.store(list.len(), Ordering::Release);
        list.len() != before
    }

    /// How many listeners are registered.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// True when no listener is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many listener calls failed (returned an error or panicked).
    pub fn error_count(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues events for delivery. Call it while holding the owner's state lock, so the queue
    /// order is the order of the changes; then call [`Listeners::deliver`] after releasing it.
    /// Without listeners this does nothing (and allocates nothing).
    pub fn enqueue(&self, events: impl IntoIterator<Item = Event>) {
        if self.is_empty() {
            return;
        }
        let mut events = events.into_iter().peekable();
        if events.peek().is_some() {
            let mut q = self.queue();
            q.events.extend(events);
            self.pending.store(q.events.len(), Ordering::Release);
        }
    }

    /// Delivers queued events to every listener, in order, unless another call is already doing
    /// so (it will deliver them). Must be called without holding the owner's state lock.
    pub fn deliver(&self) {
        // A caller that queued events reads its own store here, so nothing is missed.
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        {
            let mut q = self.queue();
            if q.delivering || q.events.is_empty() {
                return;
            }
            q.delivering = true;
        }
        loop {
            let event = {
                let mut q = self.queue();
                let next = q.events.pop_front();
                self.pending.store(q.events.len(), Ordering::Release);
                match next {
                    Some(e) => e,
                    None => {
                        q.delivering = false;
                        return;
                    }
                }
            };
            // Clone the list so a listener may add or remove listeners without deadlocking.
            let list: Vec<Listener> = {
                let guard = self.list.read().unwrap_or_else(|p| p.into_inner());
                guard.iter().map(|(_, l)| Arc::clone(l)).collect()
            };
            for listener in &list {
                let outcome = catch_unwind(AssertUnwindSafe(|| listener(&event)));
                if !matches!(outcome, Ok(Ok(()))) {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Queues and delivers events, for an owner that holds no lock at this point.
    pub fn emit(&self, events: &[Event]) {
        self.enqueue(events.iter().cloned());
        self.deliver();
    }
}

/// Where a component's events go while its state lock is held.
pub(crate) enum Sink<'a> {
    /// Queued for the component's own listeners (a direct call; deliver after unlocking).
    Queue(&'a Listeners),
    /// Handed back to the caller (a Loop driving the component under the Loop's lock).
    Collect(&'a mut Vec<Event>),
}

impl Sink<'_> {
    pub(crate) fn push(&mut self, event: Event) {
        match self {
            Sink::Queue(listeners) => listeners.enqueue([event]),
            Sink::Collect(events) => events.push(event),
        }
    }
}

/// The three listener methods every event source exposes, delegating to its `listeners` field.
/// `$events` names the events it emits, for the documentation.
macro_rules! listener_methods {
    ($events:literal) => {
        #[doc = concat!("Adds a listener for ", $events, " events.")]
        pub fn add_listener(
            &self,
            listener: $crate::events::Listener,
        ) -> $crate::events::ListenerId {
            self.listeners.add(listener)
        }

        /// Removes a listener; false when it was not registered.
        pub fn remove_listener(&self, id: $crate::events::ListenerId) -> bool {
            self.listeners.remove(id)
        }

        /// How many listener calls failed (returned an error or panicked).
        pub fn listener_errors(&self) -> u64 {
            self.listeners.error_count()
        }
    };
}
pub(crate) use listener_methods;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn warning(n: u64) -> Event {
        Event::Warning {
            message: format!("w{n}"),
            at_ms: n,
        }
    }

    #[test]
    fn failing_and_panicking_listeners_are_isolated_and_counted() {
        let l = Listeners::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        l.add(Arc::new(|_| Err("boom".into())));
        l.add(Arc::new(|_| panic!("listener panic")));
        let s = Arc::clone(&seen);
        l.add(Arc::new(move |e| {
            s.lock().unwrap().push(e.clone());
            Ok(())
        }));
        l.emit(&[warning(1), warning(2)]);
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert_eq!(l.error_count(), 4);
    }

    /// Events queued under an owner's lock reach a listener exactly once and in queue order, with
    /// many threads queueing and delivering at once.
    #[test]
    fn concurrent_delivery_is_complete_and_ordered() {
        for _ in 0..50 {
            let listeners = Arc::new(Listeners::default());
            let seen = Arc::new(Mutex::new(Vec::new()));
            let s = Arc::clone(&seen);
            listeners.add(Arc::new(move |e| {
                if let Event::Warning { at_ms, .. } = e {
                    s.lock().unwrap().push(*at_ms);
                }
                Ok(())
            }));
            let owner_state = Arc::new(Mutex::new(0u64));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let listeners = Arc::clone(&listeners);
                    let owner_state = Arc::clone(&owner_state);
                    std::thread::spawn(move || {
                        for _ in 0..200 {
                            {
                                let mut n = owner_state.lock().unwrap();
                                *n += 1;
                                listeners.enqueue([warning(*n)]);
                            }
                            listeners.deliver();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let seen = seen.lock().unwrap();
            assert_eq!(*seen, (1..=1600).collect::<Vec<u64>>());
        }
    }

    #[test]
    fn remove_listener() {
        let l = Listeners::default();
        let id = l.add(Arc::new(|_| Ok(())));
        assert_eq!(l.len(), 1);
        assert!(l.remove(id));
        assert!(!l.remove(id));
        assert!(l.is_empty());
    }

    #[test]
    fn event_json_shape() {
        let e = Event::StateChange {
            from: State::Closed,
            to: State::Open,
            reason: "5 consecutive failures detected".into(),
            slug: Some("consecutive_failures"),
            at_ms: 7,
        };
        assert_eq!(
            e.to_json(),
            serde_json::json!({"type": "stateChange", "from": "CLOSED", "to": "OPEN",
                "reason": "5 consecutive failures detected", "slug": "consecutive_failures",
                "atMs": 7})
        );
        assert_eq!(
            warning(3).to_json(),
            serde_json::json!({"type": "warning", "message": "w3", "atMs": 3})
        );
    }
}
