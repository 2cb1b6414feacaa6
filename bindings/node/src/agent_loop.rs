//! `Loop` (contract section 5.4): the coordinator of the analyzer, an exit strategy, a
//! StagnationBreaker and an optional BudgetBreaker.

use napi_derive::napi;

/// One observation per iteration of an agent loop; says continue or exit, with a reason and an
/// outcome.
#[napi]
#[derive(Debug)]
pub struct Loop(agentbreaker::Loop);

methods!(Loop(agentbreaker::Loop) emits ["stateChange", "warning", "halt"] {
    "A loop from `{maxIterations, strategy, stagnation, budget}` (no `budget`: no budget checks)."
    fn new("config?: LoopConfig | null, clock?: Clock | null");
    "Observes one iteration; after an exit every call is `INVALID_ARGUMENT` until `reset()`."
    fn observe(observation: Argument "observation: Observation") -> "LoopDecision" = observe_json;
    "Where the loop stands."
    fn get_status() -> "LoopStatus" = status;
    "Starts over: iteration 0, the strategy and both breakers reset."
    fn reset() = reset;
});
