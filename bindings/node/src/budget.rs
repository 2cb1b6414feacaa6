//! `BudgetBreaker` (contract section 4).

use napi_derive::napi;

/// Per-task halt conditions over an agent's event stream: tool calls, spend, duration, idle time
/// and near-identical outputs.
#[napi]
#[derive(Debug)]
pub struct BudgetBreaker(agentbreaker::BudgetBreaker);

methods!(BudgetBreaker(agentbreaker::BudgetBreaker) emits ["halt"] {
    "A breaker with the given config (omitted keys take the defaults) on the given clock."
    fn new("config?: BudgetConfig | null, clock?: Clock | null");
    "Ingests one event; returns the halt it caused, or `null`. A bad event changes nothing."
    fn ingest(event: Event "event: AgentEvent") -> "Halt | null" = ingest;
    "Checks duration and idle time of every open task (call it about once a second)."
    fn tick() -> "Halt[]" = tick;
    "The live snapshot: open tasks, the active-task stack, ignored events."
    fn snapshot() -> "BudgetSnapshot" = snapshot;
    "Forgets every task, the stack and the counters."
    fn reset() = reset;
});
