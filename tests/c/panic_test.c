/*
 * The panic boundary (issue 10): linked against a library built with the `test-panic` feature
 * (target/c-panic, never the normal build), in which the core panics inside a FailureBreaker's
 * lock when `record_failure` is given TEST_PANIC_TRIGGER and inside `analyze` when it is given
 * that text. Every such call must return AB_ERR_INTERNAL with a readable last-error message,
 * write no out-parameter, leave the process running, and leave the same handle working.
 *
 * `--check-trigger` only checks that the trigger is live (exit 0 when record_failure with it
 * returns AB_ERR_INTERNAL): mk/c.mk runs it against the normal library, where it must fail, to
 * prove the normal build has no panic trigger.
 */
#define _XOPEN_SOURCE 700

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The core's agentbreaker::TEST_PANIC_TRIGGER. */
static const char TRIGGER[] = "agentbreaker:test-panic";

typedef struct {
    int state_changes;
    int warnings;
} Counts;

static void count_events(const char *event_json, void *user_data) {
    Counts *c = user_data;
    if (strstr(event_json, "\"type\":\"stateChange\"") != NULL) {
        c->state_changes++;
    } else if (strstr(event_json, "\"type\":\"warning\"") != NULL) {
        c->warnings++;
    }
}

/* A number field of a JSON result (-1 when missing); releases the string. */
static double json_number(char *json, const char *key) {
    cJSON *value = cJSON_Parse(json);
    ab_string_free(json);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(value, key);
    double result = cJSON_IsNumber(n) ? n->valuedouble : -1;
    cJSON_Delete(value);
    return result;
}

static double failures_of(const ab_failure_breaker *breaker) {
    char *json = NULL;
    CHECK_OK(ab_failure_breaker_get_status(breaker, &json));
    return json_number(json, "consecutiveFailures");
}

static void check_internal(const char *where) {
    const char *message = ab_last_error_message();
    CHECK_STARTS_WITH(message, "INTERNAL: panic: ");
    CHECK_CONTAINS(message, where);
}

static void a_panic_inside_the_breakers_lock_is_internal_and_the_breaker_keeps_working(void) {
    ab_manual_clock *clock = NULL;
    ab_failure_breaker *breaker = NULL;
    Counts counts = {0, 0};
    uint64_t id = 0;
    ab_state state = AB_STATE_OPEN;

    CHECK_OK(ab_manual_clock_new(0, &clock));
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 3, \"warningThreshold\": 2, "
                                    "\"cooldownMs\": 1000}",
                                    clock, &breaker));
    CHECK_OK(ab_failure_breaker_add_listener(breaker, count_events, &counts, &id));
    CHECK_OK(ab_failure_breaker_record_failure(breaker, "first"));

    /* The panic: INTERNAL with the panic's text, nothing recorded. */
    CHECK_STATUS(ab_failure_breaker_record_failure(breaker, TRIGGER), AB_ERR_INTERNAL);
    check_internal("test-panic: record_failure");
    CHECK(strcmp(ab_status_code(AB_ERR_INTERNAL), "INTERNAL") == 0);
    CHECK(failures_of(breaker) == 1);
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_CLOSED);
    /* The last error is cleared by the next successful call. */
    CHECK(strcmp(ab_last_error_message(), "") == 0);

    /* Twice more: the (poisoned) lock is recovered every time. */
    CHECK_STATUS(ab_failure_breaker_record_failure(breaker, TRIGGER), AB_ERR_INTERNAL);
    CHECK_STATUS(ab_failure_breaker_record_failure(breaker, TRIGGER), AB_ERR_INTERNAL);
    CHECK(failures_of(breaker) == 1);

    /* The same breaker goes on exactly as the contract says: warning at 2, OPEN at 3. */
    CHECK_OK(ab_failure_breaker_record_failure(breaker, "second"));
    CHECK(counts.warnings == 1);
    CHECK_OK(ab_failure_breaker_record_failure(breaker, "third"));
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_OPEN);
    CHECK(counts.state_changes == 1);
    CHECK_STATUS(ab_failure_breaker_try_acquire(breaker), AB_ERR_CIRCUIT_OPEN);
    CHECK_STARTS_WITH(ab_last_error_message(), "CIRCUIT_OPEN: Circuit breaker OPEN. 1 seconds");

    /* A panic while OPEN changes nothing either. */
    CHECK_STATUS(ab_failure_breaker_record_failure(breaker, TRIGGER), AB_ERR_INTERNAL);
    CHECK(failures_of(breaker) == 3);
    CHECK_OK(ab_manual_clock_advance(clock, 1000));
    CHECK_OK(ab_failure_breaker_try_acquire(breaker));
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_HALF_OPEN);
    /* ... and in HALF_OPEN: the probe is still out, its result still decides. */
    CHECK_STATUS(ab_failure_breaker_record_failure(breaker, TRIGGER), AB_ERR_INTERNAL);
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_HALF_OPEN);
    CHECK_OK(ab_failure_breaker_record_success(breaker));
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_CLOSED);
    CHECK(counts.state_changes == 3); /* CLOSED->OPEN, OPEN->HALF_OPEN, HALF_OPEN->CLOSED */

    char *json = NULL;
    CHECK_OK(ab_failure_breaker_metrics(breaker, &json));
    CHECK(json_number(json, "recoveries") == 1);

    ab_failure_breaker_free(breaker);
    ab_manual_clock_free(clock);
}

static const char *fail_with(void *user_data) {
    return user_data;
}

static void a_panic_in_a_guarded_call_is_internal_and_writes_no_outcome(void) {
    ab_failure_breaker *breaker = NULL;
    bool ok = true;
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 2}", NULL, &breaker));

    /* The operation "fails" with the trigger text: recording that failure panics. */
    CHECK_STATUS(ab_failure_breaker_call(breaker, fail_with, (void *)TRIGGER, &ok),
                 AB_ERR_INTERNAL);
    check_internal("test-panic: record_failure");
    CHECK(ok == true); /* not written */
    CHECK(failures_of(breaker) == 0);

    /* Guarded calls go on, and count. */
    CHECK_OK(ab_failure_breaker_call(breaker, fail_with, "real failure", &ok));
    CHECK(ok == false);
    CHECK_OK(ab_failure_breaker_call(breaker, fail_with, "real failure", &ok));
    ab_state state = AB_STATE_CLOSED;
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_OPEN);
    ab_failure_breaker_free(breaker);
}

static void a_panic_in_analyze_is_internal_and_analyze_keeps_working(void) {
    char *json = NULL;
    CHECK_STATUS(ab_analyze(TRIGGER, &json), AB_ERR_INTERNAL);
    check_internal("test-panic: analyze");
    CHECK(json == NULL);
    CHECK_OK(ab_analyze("done", &json));
    CHECK(json_number(json, "confidence") == 40);
    CHECK_STATUS(ab_analyze(TRIGGER, &json), AB_ERR_INTERNAL);
    CHECK_OK(ab_analyze("All tasks complete. 12 passed", &json));
    CHECK(json_number(json, "confidence") == 60);
}

static void a_panic_in_a_strategy_and_a_loop_leaves_them_working(void) {
    ab_exit_strategy *strategy = NULL;
    ab_loop *agent_loop = NULL;
    char *json = NULL;

    CHECK_OK(ab_exit_strategy_new("{\"type\": \"done_signals\", \"threshold\": 80, \"window\": 5}",
                                  NULL, &strategy));
    CHECK_OK(ab_exit_strategy_should_exit(strategy, "done", NULL, &json));
    ab_string_free(json);
    json = NULL;
    CHECK_STATUS(ab_exit_strategy_should_exit(strategy, TRIGGER, NULL, &json), AB_ERR_INTERNAL);
    check_internal("test-panic: analyze");
    CHECK(json == NULL);
    /* 40 + 40 reaches 80: the panicked iteration counted nothing. */
    CHECK_OK(ab_exit_strategy_should_exit(strategy, "done", NULL, &json));
    CHECK_CONTAINS(json, "\"exit\":true");
    ab_string_free(json);

    json = NULL;
    CHECK_OK(ab_loop_new("{\"maxIterations\": 10}", NULL, &agent_loop));
    CHECK_STATUS(ab_loop_observe(agent_loop, "{\"output\": \"agentbreaker:test-panic\"}", &json),
                 AB_ERR_INTERNAL);
    check_internal("test-panic: analyze");
    CHECK(json == NULL);
    CHECK_OK(ab_loop_observe(agent_loop, "{\"output\": \"working on it\", \"filesChanged\": 1}",
                             &json));
    CHECK_CONTAINS(json, "\"action\":\"continue\"");
    ab_string_free(json);
    CHECK_OK(ab_loop_observe(agent_loop, "{\"output\": \"EXIT_SIGNAL: true\"}", &json));
    CHECK_CONTAINS(json, "\"action\":\"exit\"");
    CHECK_CONTAINS(json, "\"reason\":\"completed\"");
    ab_string_free(json);
    ab_loop_free(agent_loop);
    ab_exit_strategy_free(strategy);
}

/* Each panic prints the Rust panic hook's line to stderr: keep their number small. */
#define PANICS_PER_THREAD 10

static void *panic_on_a_thread(void *arg) {
    const ab_failure_breaker *breaker = arg;
    intptr_t internal = 0;
    for (int i = 0; i < PANICS_PER_THREAD; i++) {
        if (ab_failure_breaker_record_failure(breaker, TRIGGER) == AB_ERR_INTERNAL &&
            strncmp(ab_last_error_message(), "INTERNAL: ", 10) == 0) {
            internal++;
        }
        ab_failure_breaker_record_success(breaker);
    }
    return (void *)internal;
}

static void panics_on_several_threads_at_once_leave_the_breaker_working(void) {
    ab_failure_breaker *breaker = NULL;
    pthread_t threads[4];
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 3}", NULL, &breaker));
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_create(&threads[i], NULL, panic_on_a_thread, breaker) == 0);
    }
    for (int i = 0; i < 4; i++) {
        void *internal = NULL;
        CHECK(pthread_join(threads[i], &internal) == 0);
        CHECK((intptr_t)internal == PANICS_PER_THREAD);
    }
    CHECK(failures_of(breaker) == 0);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ab_failure_breaker_record_failure(breaker, "boom"));
    }
    ab_state state = AB_STATE_CLOSED;
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_OPEN);
    ab_failure_breaker_free(breaker);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--check-trigger") == 0) {
        ab_failure_breaker *breaker = NULL;
        if (ab_failure_breaker_new(NULL, NULL, &breaker) != AB_OK) {
            return 2;
        }
        ab_status status = ab_failure_breaker_record_failure(breaker, TRIGGER);
        ab_failure_breaker_free(breaker);
        return status == AB_ERR_INTERNAL ? 0 : 1;
    }
    static const TestCase tests[] = {
        {"a_panic_inside_the_breakers_lock_is_internal_and_the_breaker_keeps_working",
         a_panic_inside_the_breakers_lock_is_internal_and_the_breaker_keeps_working},
        {"a_panic_in_a_guarded_call_is_internal_and_writes_no_outcome",
         a_panic_in_a_guarded_call_is_internal_and_writes_no_outcome},
        {"a_panic_in_analyze_is_internal_and_analyze_keeps_working",
         a_panic_in_analyze_is_internal_and_analyze_keeps_working},
        {"a_panic_in_a_strategy_and_a_loop_leaves_them_working",
         a_panic_in_a_strategy_and_a_loop_leaves_them_working},
        {"panics_on_several_threads_at_once_leave_the_breaker_working",
         panics_on_several_threads_at_once_leave_the_breaker_working},
    };
    return run_tests("panic", tests, sizeof tests / sizeof tests[0]);
}
