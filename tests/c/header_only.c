/*
 * The header alone compiles, as C (c11, -pedantic) and as C++ (this same file through g++): it
 * includes what it needs and declares every function inside extern "C".
 */
#include "agentbreaker.h"

static void listener(const char *event_json, void *user_data) {
    (void)event_json;
    (void)user_data;
}

static const char *operation(void *user_data) {
    (void)user_data;
    return NULL;
}

int main(void) {
    ab_status status = AB_OK;
    ab_state state = AB_STATE_HALF_OPEN;
    ab_listener_fn on_event = listener;
    ab_guarded_fn guarded = operation;
    ab_manual_clock *clock = NULL;
    ab_failure_breaker *failure = NULL;
    ab_stagnation_breaker *stagnation = NULL;
    ab_budget_breaker *budget = NULL;
    ab_exit_strategy *strategy = NULL;
    ab_loop *agent_loop = NULL;
    /* Function types as declared (checked by the compiler, not linked). */
    ab_status (*make_failure)(const char *, const ab_manual_clock *, ab_failure_breaker **) =
        ab_failure_breaker_new;
    ab_status (*call)(const ab_failure_breaker *, ab_guarded_fn, void *, bool *) =
        ab_failure_breaker_call;
    ab_status (*observe)(const ab_loop *, const char *, char **) = ab_loop_observe;
    const char *(*code)(int32_t) = ab_status_code;
    void (*release)(char *) = ab_string_free;
    (void)on_event;
    (void)guarded;
    (void)clock;
    (void)failure;
    (void)stagnation;
    (void)budget;
    (void)strategy;
    (void)agent_loop;
    (void)make_failure;
    (void)call;
    (void)observe;
    (void)code;
    (void)release;
    return (int)status + (int)state - 1;
}
