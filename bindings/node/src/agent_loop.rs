//! `Loop` (contract section 5.4): the coordinator of the analyzer, an exit strategy, a
//! StagnationBreaker and an optional BudgetBreaker.

use agentbreaker::LoopConfig;
use napi::Env;
use napi_derive::napi;

use crate::clock::{ClockArg, construct};
use crate::error::{self, Arg};
use crate::listeners::{JsListeners, event_source};

/// One observation per iteration of an agent loop; says continue or exit, with a reason and an
/// outcome.
#[napi]
#[derive(Debug)]
pub struct Loop {
    inner: agentbreaker::Loop,
    listeners: JsListeners,
}

#[napi]
impl Loop {
    /// A loop from `{maxIterations, strategy, stagnation, budget}` (omitted keys take the
    /// defaults; without `budget` there are no budget checks) on the given clock.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config?: LoopConfig | null, clock?: Clock | null"
    )]
    pub fn new(env: &Env, config: Arg<'_>, clock: ClockArg<'_>) -> error::Result<Self> {
        construct(env, &config, &clock, |config, clock| {
            agentbreaker::Loop::with_clock(LoopConfig::from_json(config)?, clock)
        })
    }
}

core_methods!(Loop {
    "Observes one iteration; after an exit every call is `INVALID_ARGUMENT` until `reset()`."
    fn observe(observation: Argument "observation: Observation") -> "LoopDecision" = observe_json;
    "Where the loop stands."
    fn get_status() -> "LoopStatus" = status;
    "Starts over: iteration 0, the strategy and both breakers reset."
    fn reset() = reset;
});

event_source!(Loop(agentbreaker::Loop) emits ["stateChange", "warning", "halt"]);
