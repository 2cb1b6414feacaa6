/*
 * Misuse of the C API: NULL handles, NULL strings, NULL out-parameters, NULL callbacks, invalid
 * UTF-8 and text that is not JSON. Every such call returns a status (never crashes), writes no
 * out-parameter, and leaves the object unchanged and usable. A NULL `_free` is a no-op.
 *
 * Freeing a handle or a string twice is undefined behaviour (documented in the header), so it is
 * not exercised here.
 */
#include <stdint.h>

#include "check.h"

/* Not UTF-8: a lone continuation byte and an overlong encoding. */
static const char BAD_UTF8[] = "Path not found: \x80\xc0\xaf";

static void noop_listener(const char *event_json, void *user_data) {
    (void)event_json;
    (void)user_data;
}

static const char *noop_operation(void *user_data) {
    (void)user_data;
    return NULL;
}

static void null_handles_are_null_arg(void) {
    char *json = NULL;
    bool flag = false;
    uint64_t id = 0, now = 0;
    ab_state state = AB_STATE_CLOSED;

    CHECK_STATUS(ab_manual_clock_set(NULL, 1), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: clock must not be NULL");
    CHECK_STATUS(ab_manual_clock_advance(NULL, 1), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_manual_clock_now(NULL, &now), AB_ERR_NULL_ARG);

    CHECK_STATUS(ab_failure_breaker_record_success(NULL), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: breaker must not be NULL");
    CHECK_STATUS(ab_failure_breaker_record_failure(NULL, "x"), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_should_allow_operation(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_try_acquire(NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_call(NULL, noop_operation, NULL, &flag), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_state(NULL, &state), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_get_status(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_metrics(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_store_status(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_reset(NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_snapshot(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_restore(NULL, "{}"), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_save(NULL, "/tmp/x.json"), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_load(NULL, "/tmp/x.json", &flag), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_add_listener(NULL, noop_listener, NULL, &id), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_remove_listener(NULL, 1, &flag), AB_ERR_NULL_ARG);

    CHECK_STATUS(ab_stagnation_breaker_record_progress(NULL, "{}"), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_record_step(NULL, "{\"action\": \"x\"}"), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_record_error(NULL, "x", false), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_check(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_state(NULL, &state), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_get_status(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_reset(NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_snapshot(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_restore(NULL, "{}"), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_add_listener(NULL, noop_listener, NULL, &id),
                 AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_remove_listener(NULL, 1, &flag), AB_ERR_NULL_ARG);

    CHECK_STATUS(ab_budget_breaker_ingest(NULL, "{}", &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_tick(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_snapshot(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_reset(NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_add_listener(NULL, noop_listener, NULL, &id), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_remove_listener(NULL, 1, &flag), AB_ERR_NULL_ARG);

    CHECK_STATUS(ab_exit_strategy_should_exit(NULL, "", NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: strategy must not be NULL");
    CHECK_STATUS(ab_exit_strategy_plan_status(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_exit_strategy_reset(NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_exit_strategy_add_listener(NULL, noop_listener, NULL, &id), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_exit_strategy_remove_listener(NULL, 1, &flag), AB_ERR_NULL_ARG);

    CHECK_STATUS(ab_loop_observe(NULL, "{\"output\": \"\"}", &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_loop_get_status(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_loop_reset(NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_loop_add_listener(NULL, noop_listener, NULL, &id), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_loop_remove_listener(NULL, 1, &flag), AB_ERR_NULL_ARG);

    CHECK_STATUS(ab_monitor_observe(NULL, "{\"type\": \"alive\"}", &json), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: monitor must not be NULL");
    CHECK_STATUS(ab_monitor_tick(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_status(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_store_status(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_snapshot(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_restore(NULL, "{}"), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_reset(NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_add_listener(NULL, noop_listener, NULL, &id), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_remove_listener(NULL, 1, &flag), AB_ERR_NULL_ARG);
    CHECK(json == NULL);
}

static void null_out_parameters_are_null_arg_and_change_nothing(void) {
    ab_manual_clock *clock = NULL;
    ab_failure_breaker *breaker = NULL;
    ab_budget_breaker *budget = NULL;
    char *json = NULL;
    ab_state state = AB_STATE_CLOSED;

    CHECK_STATUS(ab_manual_clock_new(0, NULL), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: out_clock must not be NULL");
    CHECK_STATUS(ab_failure_breaker_new(NULL, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_new(NULL, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_new(NULL, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_new_from_env("{}", NULL, &budget, NULL), AB_ERR_NULL_ARG);
    CHECK(budget == NULL);
    CHECK_STATUS(ab_exit_strategy_new(NULL, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_exit_strategy_new_fix_plan_markdown("- [ ] a", NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_loop_new(NULL, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_monitor_new(NULL, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: out_monitor must not be NULL");
    CHECK_STATUS(ab_analyze("done", NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_config_from_env("{}", NULL), AB_ERR_NULL_ARG);

    /* A NULL out-parameter is found before the operation runs: asking for permission after the
     * cooldown would move OPEN to HALF_OPEN, and here it must not. */
    CHECK_OK(ab_manual_clock_new(0, &clock));
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 1, \"cooldownMs\": 10}", clock,
                                    &breaker));
    CHECK_OK(ab_failure_breaker_record_failure(breaker, "boom"));
    CHECK_OK(ab_manual_clock_advance(clock, 10));
    CHECK_STATUS(ab_failure_breaker_should_allow_operation(breaker, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_call(breaker, noop_operation, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_state(breaker, NULL), AB_ERR_NULL_ARG);
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_OPEN);
    CHECK_STATUS(ab_failure_breaker_load(breaker, "/nonexistent-agentbreaker/x.json", NULL),
                 AB_ERR_NULL_ARG);

    /* An event with a NULL out-parameter is not ingested. */
    CHECK_OK(ab_budget_breaker_new(NULL, clock, &budget));
    CHECK_STATUS(ab_budget_breaker_ingest(budget, "{\"type\": \"tool_use\", \"name\": \"a\"}", NULL),
                 AB_ERR_NULL_ARG);
    CHECK_OK(ab_budget_breaker_snapshot(budget, &json));
    CHECK_CONTAINS(json, "\"tasks\":[]");
    ab_string_free(json);
    CHECK_STATUS(ab_budget_breaker_add_listener(budget, noop_listener, NULL, NULL),
                 AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_budget_breaker_remove_listener(budget, 1, NULL), AB_ERR_NULL_ARG);

    ab_budget_breaker_free(budget);
    ab_failure_breaker_free(breaker);
    ab_manual_clock_free(clock);
}

static void null_strings_and_callbacks_are_null_arg(void) {
    ab_failure_breaker *breaker = NULL;
    ab_stagnation_breaker *stagnation = NULL;
    ab_exit_strategy *strategy = NULL;
    ab_loop *agent_loop = NULL;
    ab_budget_breaker *budget = NULL;
    char *json = NULL;
    bool flag = false;
    uint64_t id = 0;

    CHECK_OK(ab_failure_breaker_new(NULL, NULL, &breaker));
    CHECK_STATUS(ab_failure_breaker_record_failure(breaker, NULL), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: error must not be NULL");
    CHECK_STATUS(ab_failure_breaker_restore(breaker, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_save(breaker, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_load(breaker, NULL, &flag), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_failure_breaker_call(breaker, NULL, NULL, &flag), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: operation must not be NULL");
    CHECK_STATUS(ab_failure_breaker_add_listener(breaker, NULL, NULL, &id), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: listener must not be NULL");
    /* Arguments are checked in parameter order: the listener before out_id. */
    CHECK_STATUS(ab_failure_breaker_add_listener(breaker, NULL, NULL, NULL), AB_ERR_NULL_ARG);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: listener must not be NULL");
    CHECK_OK(ab_failure_breaker_get_status(breaker, &json));
    CHECK_CONTAINS(json, "\"consecutiveFailures\":0");
    ab_string_free(json);

    CHECK_OK(ab_stagnation_breaker_new(NULL, NULL, &stagnation));
    CHECK_STATUS(ab_stagnation_breaker_record_progress(stagnation, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_record_step(stagnation, NULL), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_record_error(stagnation, NULL, false), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_stagnation_breaker_restore(stagnation, NULL), AB_ERR_NULL_ARG);

    CHECK_OK(ab_budget_breaker_new(NULL, NULL, &budget));
    CHECK_STATUS(ab_budget_breaker_ingest(budget, NULL, &json), AB_ERR_NULL_ARG);

    CHECK_STATUS(ab_analyze(NULL, &json), AB_ERR_NULL_ARG);
    CHECK_OK(ab_exit_strategy_new(NULL, NULL, &strategy));
    CHECK_STATUS(ab_exit_strategy_should_exit(strategy, NULL, "CLOSED", &json), AB_ERR_NULL_ARG);
    CHECK_STATUS(ab_exit_strategy_new_fix_plan_markdown(NULL, NULL, &strategy), AB_ERR_NULL_ARG);

    CHECK_OK(ab_loop_new(NULL, NULL, &agent_loop));
    CHECK_STATUS(ab_loop_observe(agent_loop, NULL, &json), AB_ERR_NULL_ARG);
    CHECK_OK(ab_loop_get_status(agent_loop, &json));
    CHECK_CONTAINS(json, "\"iteration\":0");
    ab_string_free(json);

    ab_loop_free(agent_loop);
    ab_exit_strategy_free(strategy);
    ab_budget_breaker_free(budget);
    ab_stagnation_breaker_free(stagnation);
    ab_failure_breaker_free(breaker);
}

static void invalid_utf8_is_invalid_argument(void) {
    ab_failure_breaker *breaker = NULL;
    ab_stagnation_breaker *stagnation = NULL;
    ab_budget_breaker *budget = NULL;
    ab_exit_strategy *strategy = NULL;
    ab_loop *agent_loop = NULL;
    char *json = NULL;
    bool flag = false;

    CHECK_OK(ab_failure_breaker_new(NULL, NULL, &breaker));
    CHECK_STATUS(ab_failure_breaker_record_failure(breaker, BAD_UTF8), AB_ERR_INVALID_ARGUMENT);
    CHECK_STARTS_WITH(ab_last_error_message(),
                      "INVALID_ARGUMENT: error is not valid UTF-8 (invalid byte at offset 16)");
    CHECK_STATUS(ab_failure_breaker_save(breaker, BAD_UTF8), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_failure_breaker_load(breaker, BAD_UTF8, &flag), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_failure_breaker_restore(breaker, BAD_UTF8), AB_ERR_INVALID_ARGUMENT);
    CHECK_OK(ab_failure_breaker_get_status(breaker, &json));
    CHECK_CONTAINS(json, "\"consecutiveFailures\":0");
    ab_string_free(json);

    /* Invalid UTF-8 is INVALID_ARGUMENT wherever it comes, configs included. */
    ab_failure_breaker *other = NULL;
    CHECK_STATUS(ab_failure_breaker_new("{\"errorMatch\": \"\xff\"}", NULL, &other),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK(other == NULL);
    CHECK_STATUS(ab_stagnation_breaker_new(BAD_UTF8, NULL, &stagnation), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_budget_breaker_new(BAD_UTF8, NULL, &budget), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_exit_strategy_new(BAD_UTF8, NULL, &strategy), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_exit_strategy_new_fix_plan(BAD_UTF8, NULL, &strategy),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_exit_strategy_new_fix_plan_markdown(BAD_UTF8, NULL, &strategy),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_loop_new(BAD_UTF8, NULL, &agent_loop), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_config_from_env(BAD_UTF8, &json), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_analyze(BAD_UTF8, &json), AB_ERR_INVALID_ARGUMENT);

    CHECK_OK(ab_stagnation_breaker_new(NULL, NULL, &stagnation));
    CHECK_STATUS(ab_stagnation_breaker_record_error(stagnation, BAD_UTF8, false),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_stagnation_breaker_record_progress(stagnation, BAD_UTF8),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_stagnation_breaker_record_step(stagnation, BAD_UTF8), AB_ERR_INVALID_ARGUMENT);
    CHECK_OK(ab_budget_breaker_new(NULL, NULL, &budget));
    CHECK_STATUS(ab_budget_breaker_ingest(budget, BAD_UTF8, &json), AB_ERR_INVALID_ARGUMENT);
    CHECK_OK(ab_exit_strategy_new(NULL, NULL, &strategy));
    CHECK_STATUS(ab_exit_strategy_should_exit(strategy, BAD_UTF8, NULL, &json),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_exit_strategy_should_exit(strategy, "ok", "\xfe", &json),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_OK(ab_loop_new(NULL, NULL, &agent_loop));
    CHECK_STATUS(ab_loop_observe(agent_loop, BAD_UTF8, &json), AB_ERR_INVALID_ARGUMENT);

    ab_loop_free(agent_loop);
    ab_exit_strategy_free(strategy);
    ab_budget_breaker_free(budget);
    ab_stagnation_breaker_free(stagnation);
    ab_failure_breaker_free(breaker);
}

static void text_that_is_not_json_has_the_arguments_code(void) {
    ab_failure_breaker *breaker = NULL;
    ab_stagnation_breaker *stagnation = NULL;
    ab_budget_breaker *budget = NULL;
    ab_loop *agent_loop = NULL;
    ab_exit_strategy *strategy = NULL;
    char *json = NULL;

    CHECK_STATUS(ab_failure_breaker_new("{\"failureThreshold\": ", NULL, &breaker),
                 AB_ERR_INVALID_CONFIG);
    CHECK_STARTS_WITH(ab_last_error_message(), "INVALID_CONFIG: config_json is not JSON");
    CHECK_STATUS(ab_failure_breaker_new("[1, 2]", NULL, &breaker), AB_ERR_INVALID_CONFIG);
    /* A message that would hold a NUL byte (an unknown key written with \u0000) keeps the rest. */
    CHECK_STATUS(ab_failure_breaker_new("{\"fail\\u0000ureTreshold\": 1}", NULL, &breaker),
                 AB_ERR_INVALID_CONFIG);
    CHECK_CONTAINS(ab_last_error_message(), "failureTreshold");
    CHECK_STATUS(ab_exit_strategy_new("auto", NULL, &strategy), AB_ERR_INVALID_CONFIG);
    CHECK_STATUS(ab_loop_new("", NULL, &agent_loop), AB_ERR_INVALID_CONFIG);
    CHECK(breaker == NULL && strategy == NULL && agent_loop == NULL);

    CHECK_OK(ab_failure_breaker_new("{}", NULL, &breaker));
    CHECK_STATUS(ab_failure_breaker_restore(breaker, "not a snapshot"), AB_ERR_INVALID_SNAPSHOT);
    CHECK_OK(ab_stagnation_breaker_new("{}", NULL, &stagnation));
    CHECK_STATUS(ab_stagnation_breaker_restore(stagnation, "{"), AB_ERR_INVALID_SNAPSHOT);
    CHECK_STATUS(ab_stagnation_breaker_record_progress(stagnation, "filesChanged=1"),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_stagnation_breaker_record_step(stagnation, "action: ls"),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_OK(ab_budget_breaker_new("{}", NULL, &budget));
    CHECK_STATUS(ab_budget_breaker_ingest(budget, "{'type': 'tool_use'}", &json),
                 AB_ERR_INVALID_EVENT);
    CHECK_OK(ab_loop_new("{}", NULL, &agent_loop));
    CHECK_STATUS(ab_loop_observe(agent_loop, "output", &json), AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_config_from_env("AGENTBREAKER_TOOL_CAP=5", &json), AB_ERR_INVALID_ARGUMENT);
    /* Deeply nested JSON is refused, not a stack overflow. */
    char deep[4096 + 1];
    memset(deep, '[', 4096);
    deep[4096] = '\0';
    CHECK_STATUS(ab_budget_breaker_ingest(budget, deep, &json), AB_ERR_INVALID_EVENT);
    CHECK(json == NULL);

    ab_loop_free(agent_loop);
    ab_budget_breaker_free(budget);
    ab_stagnation_breaker_free(stagnation);
    ab_failure_breaker_free(breaker);
}

static void null_free_is_a_no_op(void) {
    ab_manual_clock_free(NULL);
    ab_failure_breaker_free(NULL);
    ab_stagnation_breaker_free(NULL);
    ab_budget_breaker_free(NULL);
    ab_exit_strategy_free(NULL);
    ab_loop_free(NULL);
    ab_monitor_free(NULL);
    ab_string_free(NULL);
    CHECK(true);
}

static void status_codes_of_unknown_numbers(void) {
    CHECK(strcmp(ab_status_code(12345), "UNKNOWN") == 0);
    CHECK(strcmp(ab_status_code(-1), "UNKNOWN") == 0);
    CHECK(strcmp(ab_status_code(9), "UNKNOWN") == 0);
    CHECK(ab_last_error_message() != NULL);
}

int main(void) {
    static const TestCase tests[] = {
        {"null_handles_are_null_arg", null_handles_are_null_arg},
        {"null_out_parameters_are_null_arg_and_change_nothing",
         null_out_parameters_are_null_arg_and_change_nothing},
        {"null_strings_and_callbacks_are_null_arg", null_strings_and_callbacks_are_null_arg},
        {"invalid_utf8_is_invalid_argument", invalid_utf8_is_invalid_argument},
        {"text_that_is_not_json_has_the_arguments_code",
         text_that_is_not_json_has_the_arguments_code},
        {"null_free_is_a_no_op", null_free_is_a_no_op},
        {"status_codes_of_unknown_numbers", status_codes_of_unknown_numbers},
    };
    return run_tests("misuse", tests, sizeof tests / sizeof tests[0]);
}
