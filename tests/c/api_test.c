/*
 * Tests of the C API beyond the conformance scenarios: listeners with user_data, guarded calls
 * with a C function, the shared manual clock, files, the environment, out-parameters, the
 * thread-local last error, listeners that call back in, and concurrent use from threads.
 */
#define _XOPEN_SOURCE 700

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */

#define MAX_EVENTS 64

/* Events a listener received (copies: the JSON is valid only during the call). */
typedef struct {
    char *events[MAX_EVENTS];
    int count;
} Recorder;

static void record_event(const char *event_json, void *user_data) {
    Recorder *r = user_data;
    if (r->count < MAX_EVENTS) {
        size_t n = strlen(event_json) + 1;
        r->events[r->count] = malloc(n);
        memcpy(r->events[r->count], event_json, n);
        r->count++;
    }
}

static void recorder_clear(Recorder *r) {
    for (int i = 0; i < r->count; i++) {
        free(r->events[i]);
    }
    r->count = 0;
}

/* A JSON result parsed (and the string released). */
static cJSON *take_json(char *json) {
    cJSON *value = cJSON_Parse(json);
    ab_string_free(json);
    return value;
}

static const char *state_string(const cJSON *object) {
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(object, "state");
    return cJSON_IsString(state) ? state->valuestring : "";
}

static double number_at(const cJSON *object, const char *key) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(n) ? n->valuedouble : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Tests                                                                                       */

static void version_and_status_codes(void) {
    CHECK(strcmp(ab_version(), "") != 0);
    CHECK(strcmp(ab_status_code(AB_OK), "OK") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_INVALID_CONFIG), "INVALID_CONFIG") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_INVALID_EVENT), "INVALID_EVENT") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_INVALID_SNAPSHOT), "INVALID_SNAPSHOT") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_IO), "IO") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_INTERNAL), "INTERNAL") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_CIRCUIT_OPEN), "CIRCUIT_OPEN") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_HALTED), "HALTED") == 0);
    CHECK(strcmp(ab_status_code(AB_ERR_NULL_ARG), "NULL_ARG") == 0);
    /* The numbers are part of the ABI. */
    CHECK(AB_OK == 0 && AB_ERR_INVALID_CONFIG == 1 && AB_ERR_INVALID_ARGUMENT == 2);
    CHECK(AB_ERR_INVALID_EVENT == 3 && AB_ERR_INVALID_SNAPSHOT == 4 && AB_ERR_IO == 5);
    CHECK(AB_ERR_INTERNAL == 6 && AB_ERR_CIRCUIT_OPEN == 7 && AB_ERR_HALTED == 8);
    CHECK(AB_ERR_NULL_ARG == 100);
}

static void failure_breaker_cycle_with_listener(void) {
    ab_manual_clock *clock = NULL;
    ab_failure_breaker *breaker = NULL;
    Recorder events = {0};
    uint64_t id = 0;
    ab_state state = AB_STATE_CLOSED;
    char *json = NULL;
    CHECK_OK(ab_manual_clock_new(0, &clock));
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 3, \"cooldownMs\": 1000}", clock,
                                    &breaker));
    CHECK_OK(ab_failure_breaker_add_listener(breaker, record_event, &events, &id));
    CHECK(id >= 1);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ab_failure_breaker_record_failure(breaker, "Path not found: Main"));
    }
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_OPEN);
    CHECK_STATUS(ab_failure_breaker_try_acquire(breaker), AB_ERR_CIRCUIT_OPEN);
    CHECK_STARTS_WITH(ab_last_error_message(),
                      "CIRCUIT_OPEN: Circuit breaker OPEN. 1 seconds remaining in cooldown. 3 "
                      "consecutive failures detected.");
    CHECK_OK(ab_manual_clock_advance(clock, 1000));
    CHECK_OK(ab_failure_breaker_should_allow_operation(breaker, &json));
    CHECK_CONTAINS(json, "\"allowed\":true");
    CHECK_CONTAINS(json, "Circuit breaker testing - one operation allowed");
    ab_string_free(json);
    CHECK_OK(ab_failure_breaker_record_success(breaker));
    CHECK_OK(ab_failure_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_CLOSED);
    CHECK(events.count == 3);
    if (events.count == 3) {
        CHECK_CONTAINS(events.events[0], "\"to\":\"OPEN\"");
        CHECK_CONTAINS(events.events[0], "\"reason\":\"3 consecutive failures detected\"");
        CHECK_CONTAINS(events.events[1], "\"to\":\"HALF_OPEN\"");
        CHECK_CONTAINS(events.events[2], "\"to\":\"CLOSED\"");
        CHECK_CONTAINS(events.events[2], "\"atMs\":1000");
    }
    CHECK_OK(ab_failure_breaker_metrics(breaker, &json));
    cJSON *metrics = take_json(json);
    CHECK(number_at(metrics, "trips") == 1 && number_at(metrics, "recoveries") == 1);
    cJSON_Delete(metrics);
    recorder_clear(&events);
    ab_failure_breaker_free(breaker);
    ab_manual_clock_free(clock);
}

typedef struct {
    const char *error;
    int runs;
} Operation;

static const char *operation(void *user_data) {
    Operation *op = user_data;
    op->runs++;
    return op->error;
}

static void guarded_call_runs_records_and_refuses(void) {
    ab_failure_breaker *breaker = NULL;
    bool ok = false;
    char *json = NULL;
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 2}", NULL, &breaker));
    Operation succeeds = {NULL, 0}, fails = {"Path not found: ServerScriptService.Main", 0};
    CHECK_OK(ab_failure_breaker_call(breaker, operation, &succeeds, &ok));
    CHECK(ok && succeeds.runs == 1);
    CHECK_OK(ab_failure_breaker_call(breaker, operation, &fails, &ok));
    CHECK(!ok && fails.runs == 1);
    CHECK_OK(ab_failure_breaker_get_status(breaker, &json));
    CHECK_CONTAINS(json, "\"error\":\"Path not found: ServerScriptService.Main\"");
    CHECK_CONTAINS(json, "\"consecutiveFailures\":1");
    ab_string_free(json);
    CHECK_OK(ab_failure_breaker_call(breaker, operation, &fails, &ok));
    ok = true;
    CHECK_STATUS(ab_failure_breaker_call(breaker, operation, &succeeds, &ok), AB_ERR_CIRCUIT_OPEN);
    CHECK(succeeds.runs == 1); /* refused: not run */
    CHECK(ok);                 /* out-parameter untouched on failure */
    CHECK_STARTS_WITH(ab_last_error_message(), "CIRCUIT_OPEN: Circuit breaker OPEN. 30 seconds");
    ab_failure_breaker_free(breaker);
}

static void out_parameters_untouched_and_last_error_cleared(void) {
    ab_budget_breaker *budget = NULL;
    char sentinel_text[] = "untouched";
    char *json = sentinel_text;
    CHECK_OK(ab_budget_breaker_new(NULL, NULL, &budget));
    CHECK_STATUS(ab_budget_breaker_ingest(budget, "{\"type\": 42}", &json), AB_ERR_INVALID_EVENT);
    CHECK(json == sentinel_text);
    CHECK_STARTS_WITH(ab_last_error_message(), "INVALID_EVENT: ");
    ab_failure_breaker *breaker = (ab_failure_breaker *)(uintptr_t)0x1;
    CHECK_STATUS(ab_failure_breaker_new("{\"failureTreshold\": 5}", NULL, &breaker),
                 AB_ERR_INVALID_CONFIG);
    CHECK(breaker == (ab_failure_breaker *)(uintptr_t)0x1);
    CHECK_CONTAINS(ab_last_error_message(), "failureTreshold");
    /* A successful call clears the message. */
    CHECK_OK(ab_budget_breaker_ingest(budget, "{\"type\": \"tool_use\", \"name\": \"x\"}", &json));
    CHECK(json == NULL); /* no halt */
    CHECK(strcmp(ab_last_error_message(), "") == 0);
    ab_budget_breaker_free(budget);
}

static void a_shared_clock_outlives_its_handle(void) {
    ab_manual_clock *clock = NULL;
    ab_failure_breaker *failure = NULL;
    ab_budget_breaker *budget = NULL;
    uint64_t now = 0;
    char *json = NULL;
    CHECK_OK(ab_manual_clock_new(5000, &clock));
    CHECK_OK(ab_failure_breaker_new(NULL, clock, &failure));
    CHECK_OK(ab_budget_breaker_new(NULL, clock, &budget));
    CHECK_OK(ab_budget_breaker_ingest(
        budget, "{\"type\": \"heartbeat\", \"taskId\": \"t1\", \"phase\": \"starting\"}", &json));
    CHECK(json == NULL);
    CHECK_OK(ab_manual_clock_set(clock, 7500));
    CHECK_OK(ab_manual_clock_now(clock, &now));
    CHECK(now == 7500);
    CHECK_OK(ab_failure_breaker_record_failure(failure, "boom"));
    ab_manual_clock_free(clock); /* the breakers keep their own reference */
    CHECK_OK(ab_failure_breaker_get_status(failure, &json));
    CHECK_CONTAINS(json, "\"atMs\":7500");
    ab_string_free(json);
    CHECK_OK(ab_budget_breaker_snapshot(budget, &json));
    cJSON *snapshot = take_json(json);
    const cJSON *task = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(snapshot, "tasks"), 0);
    CHECK(number_at(task, "durationSecs") == 2.5);
    cJSON_Delete(snapshot);
    ab_failure_breaker_free(failure);
    ab_budget_breaker_free(budget);
}

static void save_load_and_state_path(void) {
    char dir[] = "/tmp/agentbreaker-c-api-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], state_path[256], config[512];
    snprintf(path, sizeof path, "%s/breaker.json", dir);
    snprintf(state_path, sizeof state_path, "%s/state.json", dir);
    ab_failure_breaker *a = NULL, *b = NULL;
    bool loaded = true;
    ab_state state = AB_STATE_CLOSED;
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 1}", NULL, &a));
    CHECK_OK(ab_failure_breaker_record_failure(a, "boom"));
    CHECK_OK(ab_failure_breaker_save(a, path));
    CHECK_OK(ab_failure_breaker_new(NULL, NULL, &b));
    CHECK_OK(ab_failure_breaker_load(b, path, &loaded));
    CHECK(loaded);
    CHECK_OK(ab_failure_breaker_state(b, &state));
    CHECK(state == AB_STATE_OPEN);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing.json", dir);
    CHECK_OK(ab_failure_breaker_load(b, missing, &loaded));
    CHECK(!loaded);
    CHECK_STATUS(ab_failure_breaker_save(a, "/nonexistent-agentbreaker-dir/state.json"), AB_ERR_IO);
    CHECK_STARTS_WITH(ab_last_error_message(), "IO: ");
    ab_failure_breaker_free(a);
    ab_failure_breaker_free(b);

    /* statePath: saved on every transition, loaded at construction. */
    snprintf(config, sizeof config, "{\"failureThreshold\": 2, \"statePath\": \"%s\"}", state_path);
    CHECK_OK(ab_failure_breaker_new(config, NULL, &a));
    CHECK_OK(ab_failure_breaker_record_failure(a, "boom"));
    CHECK_OK(ab_failure_breaker_record_failure(a, "boom"));
    ab_failure_breaker_free(a);
    CHECK_OK(ab_failure_breaker_new(config, NULL, &b));
    CHECK_OK(ab_failure_breaker_state(b, &state));
    CHECK(state == AB_STATE_OPEN);
    ab_failure_breaker_free(b);
    unlink(path);
    unlink(state_path);
    rmdir(dir);
}

static void stagnation_breaker_metrics_as_json(void) {
    ab_stagnation_breaker *breaker = NULL;
    Recorder events = {0};
    uint64_t id = 0;
    char *json = NULL;
    ab_state state = AB_STATE_OPEN;
    CHECK_OK(ab_stagnation_breaker_new("{\"noProgressThreshold\": 2}", NULL, &breaker));
    CHECK_OK(ab_stagnation_breaker_add_listener(breaker, record_event, &events, &id));
    CHECK_OK(ab_stagnation_breaker_record_progress(breaker, "{\"filesChanged\": 2, "
                                                            "\"testsPassing\": 4, "
                                                            "\"outputLength\": 900}"));
    CHECK_OK(ab_stagnation_breaker_record_progress(breaker, "{\"outputLength\": 900}"));
    CHECK_OK(ab_stagnation_breaker_record_error(breaker, "HTTP 503", true)); /* never counts */
    CHECK_OK(ab_stagnation_breaker_record_progress(breaker, "{}"));
    CHECK_OK(ab_stagnation_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_HALF_OPEN);
    CHECK_OK(ab_stagnation_breaker_check(breaker, &json));
    CHECK_CONTAINS(json, "\"allowContinue\":true");
    CHECK_CONTAINS(json, "No progress in 2 consecutive iterations");
    ab_string_free(json);
    CHECK_STATUS(ab_stagnation_breaker_record_progress(breaker, "{\"filesChanged\": 1.5}"),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_OK(ab_stagnation_breaker_get_status(breaker, &json));
    CHECK_CONTAINS(json, "\"errorCounts\":{}");
    ab_string_free(json);
    CHECK(events.count == 1);
    recorder_clear(&events);
    ab_stagnation_breaker_free(breaker);
}

static void stagnation_step_detectors(void) {
    ab_stagnation_breaker *breaker = NULL;
    ab_state state = AB_STATE_CLOSED;
    const char *step = "{\"action\": \"bash: pytest -q\", \"result\": \"3 failed\", "
                       "\"failed\": true}";
    CHECK_OK(ab_stagnation_breaker_new("{\"repeatThreshold\": 3}", NULL, &breaker));
    CHECK_OK(ab_stagnation_breaker_record_step(breaker, step));
    CHECK_OK(ab_stagnation_breaker_record_step(breaker, step));
    CHECK_OK(ab_stagnation_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_CLOSED);
    CHECK_STATUS(ab_stagnation_breaker_record_step(breaker, "{\"action\": 42}"),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ab_stagnation_breaker_record_step(breaker, "{\"result\": \"x\"}"),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK_OK(ab_stagnation_breaker_record_step(breaker, step));
    CHECK_OK(ab_stagnation_breaker_state(breaker, &state));
    CHECK(state == AB_STATE_OPEN);
    ab_stagnation_breaker_free(breaker);
}

static void budget_breaker_halts_and_ticks(void) {
    ab_manual_clock *clock = NULL;
    ab_budget_breaker *budget = NULL;
    Recorder events = {0};
    uint64_t id = 0;
    char *halt = NULL, *json = NULL;
    CHECK_OK(ab_manual_clock_new(0, &clock));
    CHECK_OK(ab_budget_breaker_new("{\"maxToolCallsPerTask\": 2, \"maxIdleSecs\": 10}", clock,
                                   &budget));
    CHECK_OK(ab_budget_breaker_add_listener(budget, record_event, &events, &id));
    const char *call = "{\"type\": \"tool_use\", \"name\": \"web_fetch\", \"taskId\": \"t1\"}";
    CHECK_OK(ab_budget_breaker_ingest(budget, call, &halt));
    CHECK(halt == NULL);
    CHECK_OK(ab_budget_breaker_ingest(budget, call, &halt));
    CHECK(halt == NULL);
    CHECK_OK(ab_budget_breaker_ingest(budget, call, &halt));
    CHECK_CONTAINS(halt, "\"slug\":\"tool_call_limit\"");
    CHECK_CONTAINS(halt, "\"message\":\"tool calls: 3 of 2\"");
    ab_string_free(halt);
    CHECK_OK(ab_budget_breaker_tick(budget, &json));
    CHECK(json != NULL && strcmp(json, "[]") == 0);
    ab_string_free(json);
    CHECK_OK(ab_budget_breaker_ingest(
        budget, "{\"type\": \"heartbeat\", \"taskId\": \"t2\", \"phase\": \"starting\"}", &halt));
    CHECK_OK(ab_manual_clock_set(clock, 10001));
    CHECK_OK(ab_budget_breaker_tick(budget, &json));
    CHECK_CONTAINS(json, "\"slug\":\"idle_timeout\"");
    CHECK_CONTAINS(json, "\"taskId\":\"t2\"");
    ab_string_free(json);
    CHECK(events.count == 2);
    if (events.count == 2) {
        CHECK_STARTS_WITH(events.events[0], "{\"type\":\"halt\",\"halt\":{");
    }
    CHECK_OK(ab_budget_breaker_reset(budget));
    CHECK_OK(ab_budget_breaker_snapshot(budget, &json));
    CHECK_CONTAINS(json, "\"tasks\":[]");
    ab_string_free(json);
    recorder_clear(&events);
    ab_budget_breaker_free(budget);
    ab_manual_clock_free(clock);
}

static void monitor_verdicts_listeners_and_snapshots(void) {
    ab_manual_clock *clock = NULL;
    ab_monitor *monitor = NULL, *copy = NULL;
    Recorder events = {0};
    uint64_t id = 0;
    char *verdict = NULL, *json = NULL;
    CHECK_OK(ab_manual_clock_new(0, &clock));
    CHECK_OK(ab_monitor_new("{\"profile\": \"seed\", \"toolLimits\": {\"web_fetch\": 2}}",
                            clock, &monitor));
    CHECK_OK(ab_monitor_add_listener(monitor, record_event, &events, &id));
    const char *call = "{\"type\": \"tool_use\", \"name\": \"web_fetch\", \"taskId\": \"t1\"}";
    CHECK_OK(ab_monitor_observe(monitor, call, &verdict));
    CHECK_CONTAINS(verdict, "\"action\":\"continue\"");
    CHECK_CONTAINS(verdict, "\"taskId\":\"t1\"");
    ab_string_free(verdict);
    CHECK_OK(ab_monitor_observe(monitor, call, &verdict));
    CHECK_CONTAINS(verdict, "\"action\":\"warn\"");
    CHECK_CONTAINS(verdict, "\"reason\":\"tool_limit\"");
    ab_string_free(verdict);
    /* A snapshot taken before the halt, restored into a new monitor, halts on the same call. */
    CHECK_OK(ab_monitor_snapshot(monitor, &json));
    CHECK_CONTAINS(json, "\"kind\":\"monitor\"");
    CHECK_OK(ab_monitor_new("{\"profile\": \"seed\", \"toolLimits\": {\"web_fetch\": 2}}",
                            clock, &copy));
    CHECK_OK(ab_monitor_restore(copy, json));
    ab_string_free(json);
    CHECK_OK(ab_monitor_observe(monitor, call, &verdict));
    CHECK_CONTAINS(verdict, "\"action\":\"halt\"");
    ab_string_free(verdict);
    CHECK_OK(ab_monitor_observe(copy, call, &verdict));
    CHECK_CONTAINS(verdict, "\"action\":\"halt\"");
    ab_string_free(verdict);
    /* Malformed: INVALID_EVENT, nothing written, nothing changed. */
    verdict = NULL;
    CHECK_STATUS(ab_monitor_observe(monitor, "{\"type\": \"tool_use\"}", &verdict),
                 AB_ERR_INVALID_EVENT);
    CHECK(verdict == NULL);
    CHECK_STATUS(ab_monitor_observe(monitor, "not json", &verdict), AB_ERR_INVALID_EVENT);
    CHECK_STATUS(ab_monitor_restore(monitor, "{\"kind\": \"budget\"}"), AB_ERR_INVALID_SNAPSHOT);
    CHECK_STATUS(ab_monitor_new("{\"warnBefore\": -1}", clock, &copy), AB_ERR_INVALID_CONFIG);
    CHECK_OK(ab_monitor_status(monitor, &json));
    CHECK_CONTAINS(json, "\"halted\":true");
    CHECK_CONTAINS(json, "\"toolCallsByName\":{\"web_fetch\":3}");
    ab_string_free(json);
    CHECK(events.count == 2);
    if (events.count == 2) {
        CHECK_STARTS_WITH(events.events[0], "{\"type\":\"verdict\",\"action\":\"warn\"");
        CHECK_STARTS_WITH(events.events[1], "{\"type\":\"verdict\",\"action\":\"halt\"");
    }
    CHECK_OK(ab_monitor_tick(monitor, &json));
    CHECK(json != NULL && strcmp(json, "[]") == 0);
    ab_string_free(json);
    CHECK_OK(ab_monitor_reset(monitor));
    CHECK_OK(ab_monitor_status(monitor, &json));
    CHECK_CONTAINS(json, "\"tasks\":[]");
    ab_string_free(json);
    recorder_clear(&events);
    ab_monitor_free(copy);
    ab_monitor_free(monitor);
    ab_manual_clock_free(clock);
}

static void environment_maps_and_the_process_environment(void) {
    char *json = NULL, *warnings = NULL, *halt = NULL;
    CHECK_OK(ab_config_from_env("{\"AGENTBREAKER_TOOL_CAP\": \"7\", \"BB_CIRCUIT_BREAKER_IDLE_SECS\""
                                ": \"60\", \"AGENTBREAKER_JACCARD\": \"2\"}",
                                &json));
    cJSON *result = take_json(json);
    cJSON *config = cJSON_GetObjectItemCaseSensitive(result, "config");
    CHECK(number_at(config, "maxToolCallsPerTask") == 7);
    CHECK(number_at(config, "maxIdleSecs") == 60);
    CHECK(number_at(config, "similarityJaccardThreshold") == 0.95);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(result, "warnings")) == 1);
    /* The config object is a full BudgetBreaker config, accepted as it is. */
    char *config_json = cJSON_PrintUnformatted(config);
    ab_budget_breaker *budget = NULL;
    CHECK_OK(ab_budget_breaker_new(config_json, NULL, &budget));
    ab_budget_breaker_free(budget);
    free(config_json);
    cJSON_Delete(result);
    CHECK_STATUS(ab_config_from_env("{\"AGENTBREAKER_TOOL_CAP\": 7}", &json),
                 AB_ERR_INVALID_ARGUMENT);

    /* NULL reads the process environment. */
    setenv("AGENTBREAKER_TOOL_CAP", "1", 1);
    setenv("AGENTBREAKER_TOOLCAP", "3", 1);
    CHECK_OK(ab_config_from_env(NULL, &json));
    CHECK_CONTAINS(json, "\"maxToolCallsPerTask\":1");
    CHECK_CONTAINS(json, "AGENTBREAKER_TOOLCAP is an unknown variable");
    ab_string_free(json);
    CHECK_OK(ab_budget_breaker_new_from_env(NULL, NULL, &budget, &warnings));
    CHECK_CONTAINS(warnings, "\"variable\":\"AGENTBREAKER_TOOLCAP\"");
    ab_string_free(warnings);
    CHECK_OK(ab_budget_breaker_ingest(budget, "{\"type\": \"tool_use\", \"name\": \"a\"}", &halt));
    CHECK(halt == NULL);
    CHECK_OK(ab_budget_breaker_ingest(budget, "{\"type\": \"tool_use\", \"name\": \"a\"}", &halt));
    CHECK_CONTAINS(halt, "tool calls: 2 of 1");
    ab_string_free(halt);
    ab_budget_breaker_free(budget);
    unsetenv("AGENTBREAKER_TOOL_CAP");
    unsetenv("AGENTBREAKER_TOOLCAP");
}

static void analyzer_and_strategies(void) {
    char *json = NULL;
    CHECK_OK(ab_analyze("All tasks complete, nothing left to do. 42 tests passed.", &json));
    cJSON *analysis = take_json(json);
    CHECK(number_at(analysis, "confidence") == 90);
    CHECK(number_at(analysis, "testsPassing") == 42);
    cJSON_Delete(analysis);

    ab_exit_strategy *strategy = NULL;
    CHECK_OK(ab_exit_strategy_new(NULL, NULL, &strategy)); /* auto */
    CHECK_OK(ab_exit_strategy_should_exit(strategy, "Refactored the parser.", NULL, &json));
    CHECK(json != NULL && strcmp(json, "{\"exit\":false,\"reason\":null}") == 0);
    ab_string_free(json);
    CHECK_OK(ab_exit_strategy_should_exit(strategy, "EXIT_SIGNAL: true", "CLOSED", &json));
    CHECK(json != NULL && strcmp(json, "{\"exit\":true,\"reason\":\"completed\"}") == 0);
    ab_string_free(json);
    CHECK_STATUS(ab_exit_strategy_should_exit(strategy, "x", "SIDEWAYS", &json),
                 AB_ERR_INVALID_ARGUMENT);
    char sentinel[] = "sentinel";
    json = sentinel;
    CHECK_OK(ab_exit_strategy_plan_status(strategy, &json));
    CHECK(json == NULL); /* not a fix plan */
    ab_exit_strategy_free(strategy);

    CHECK_OK(ab_exit_strategy_new("{\"type\": \"circuit_breaker\"}", NULL, &strategy));
    CHECK_OK(ab_exit_strategy_should_exit(strategy, "", "OPEN", &json));
    CHECK_CONTAINS(json, "\"reason\":\"circuit_open\"");
    ab_string_free(json);
    ab_exit_strategy_free(strategy);
}

static void fix_plan_from_markdown_warns_on_skips(void) {
    ab_exit_strategy *plan = NULL;
    Recorder events = {0};
    uint64_t id = 0;
    char *json = NULL;
    CHECK_OK(ab_exit_strategy_new_fix_plan_markdown("# Plan\n- [x] Parse the config\n"
                                                    "- [ ] Fix the \"quoted\" test\n"
                                                    "* [ ] Update the docs\n",
                                                    NULL, &plan));
    CHECK_OK(ab_exit_strategy_add_listener(plan, record_event, &events, &id));
    CHECK_OK(ab_exit_strategy_plan_status(plan, &json));
    CHECK_CONTAINS(json, "\"description\":\"Fix the \\\"quoted\\\" test\"");
    CHECK_CONTAINS(json, "\"currentStep\":1");
    ab_string_free(json);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ab_exit_strategy_should_exit(plan, "Still working on it.", NULL, &json));
        ab_string_free(json);
    }
    CHECK(events.count == 1);
    if (events.count == 1) {
        CHECK_CONTAINS(events.events[0], "Step 2 skipped after 3 attempts");
    }
    CHECK_OK(ab_exit_strategy_should_exit(plan, "Done.", NULL, &json));
    CHECK_CONTAINS(json, "\"reason\":\"plan_exhausted\"");
    ab_string_free(json);
    CHECK_OK(ab_exit_strategy_reset(plan));
    CHECK_OK(ab_exit_strategy_plan_status(plan, &json));
    CHECK_CONTAINS(json, "\"currentStep\":1");
    ab_string_free(json);
    recorder_clear(&events);
    ab_exit_strategy_free(plan);
    CHECK_STATUS(ab_exit_strategy_new_fix_plan(NULL, NULL, &plan), AB_ERR_INVALID_CONFIG);
}

static void loop_observes_until_exit(void) {
    ab_loop *agent_loop = NULL;
    Recorder events = {0};
    uint64_t id = 0;
    char *json = NULL;
    CHECK_OK(ab_loop_new("{\"maxIterations\": 10, \"budget\": {\"maxToolCallsPerTask\": 1}}", NULL,
                         &agent_loop));
    CHECK_OK(ab_loop_add_listener(agent_loop, record_event, &events, &id));
    CHECK_OK(ab_loop_observe(agent_loop, "{\"output\": \"Refactored the parser.\", "
                                         "\"filesChanged\": 2}",
                             &json));
    CHECK_CONTAINS(json, "\"action\":\"continue\"");
    ab_string_free(json);
    CHECK_OK(ab_loop_observe(agent_loop,
                             "{\"output\": \"Fetching.\", \"filesChanged\": 1, \"events\": ["
                             "{\"type\": \"tool_use\", \"name\": \"a\"},"
                             "{\"type\": \"tool_use\", \"name\": \"b\"}]}",
                             &json));
    CHECK_CONTAINS(json, "\"reason\":\"budget_exceeded\"");
    CHECK_CONTAINS(json, "\"outcome\":\"failure\"");
    ab_string_free(json);
    CHECK_STATUS(ab_loop_observe(agent_loop, "{\"output\": \"more\"}", &json),
                 AB_ERR_INVALID_ARGUMENT);
    CHECK(events.count == 1);
    CHECK_OK(ab_loop_get_status(agent_loop, &json));
    CHECK_CONTAINS(json, "\"exited\":true");
    ab_string_free(json);
    CHECK_OK(ab_loop_reset(agent_loop));
    CHECK_OK(ab_loop_observe(agent_loop, "{\"output\": \"All tasks complete.\"}", &json));
    CHECK_CONTAINS(json, "\"iteration\":1");
    ab_string_free(json);
    recorder_clear(&events);
    ab_loop_free(agent_loop);
}

static void listeners_are_removed_by_id(void) {
    ab_failure_breaker *breaker = NULL;
    Recorder first = {0}, second = {0};
    uint64_t first_id = 0, second_id = 0;
    bool removed = false;
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 1}", NULL, &breaker));
    CHECK_OK(ab_failure_breaker_add_listener(breaker, record_event, &first, &first_id));
    CHECK_OK(ab_failure_breaker_add_listener(breaker, record_event, &second, &second_id));
    CHECK(first_id != second_id);
    CHECK_OK(ab_failure_breaker_remove_listener(breaker, first_id, &removed));
    CHECK(removed);
    CHECK_OK(ab_failure_breaker_remove_listener(breaker, first_id, &removed));
    CHECK(!removed);
    CHECK_OK(ab_failure_breaker_remove_listener(breaker, 0, &removed));
    CHECK(!removed);
    CHECK_OK(ab_failure_breaker_record_failure(breaker, "boom"));
    CHECK(first.count == 0 && second.count == 1);
    recorder_clear(&second);
    ab_failure_breaker_free(breaker);
}

/* A listener that calls back into the breaker that is delivering to it. */
typedef struct {
    ab_failure_breaker *breaker;
    int calls;
    ab_status status;
    char state[16];
} Reentrant;

static void call_back_in(const char *event_json, void *user_data) {
    (void)event_json;
    Reentrant *r = user_data;
    char *json = NULL;
    r->calls++;
    r->status = ab_failure_breaker_get_status(r->breaker, &json);
    if (r->status == AB_OK) {
        cJSON *status = take_json(json);
        snprintf(r->state, sizeof r->state, "%s", state_string(status));
        cJSON_Delete(status);
    }
}

static void a_listener_may_call_back_in(void) {
    Reentrant r = {0};
    uint64_t id = 0;
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 1}", NULL, &r.breaker));
    CHECK_OK(ab_failure_breaker_add_listener(r.breaker, call_back_in, &r, &id));
    CHECK_OK(ab_failure_breaker_record_failure(r.breaker, "boom"));
    CHECK(r.calls == 1);
    CHECK(r.status == AB_OK);
    CHECK(strcmp(r.state, "OPEN") == 0);
    ab_failure_breaker_free(r.breaker);
}

/* Threads record failures on one breaker: the threshold opens the circuit exactly once. */
#define THREADS 8
#define FAILURES_PER_THREAD 50

typedef struct {
    pthread_mutex_t lock;
    int opened;
} OpenCounter;

static void count_opens(const char *event_json, void *user_data) {
    OpenCounter *c = user_data;
    if (strstr(event_json, "\"to\":\"OPEN\"") != NULL) {
        pthread_mutex_lock(&c->lock);
        c->opened++;
        pthread_mutex_unlock(&c->lock);
    }
}

static void *hammer(void *arg) {
    ab_failure_breaker *breaker = arg;
    for (int i = 0; i < FAILURES_PER_THREAD; i++) {
        if (ab_failure_breaker_record_failure(breaker, "timeout") != AB_OK) {
            return (void *)1;
        }
    }
    return NULL;
}

static void concurrent_failures_open_once(void) {
    ab_failure_breaker *breaker = NULL;
    OpenCounter counter = {PTHREAD_MUTEX_INITIALIZER, 0};
    uint64_t id = 0;
    char *json = NULL;
    CHECK_OK(ab_failure_breaker_new("{\"failureThreshold\": 100, \"historyLimit\": 0}", NULL,
                                    &breaker));
    CHECK_OK(ab_failure_breaker_add_listener(breaker, count_opens, &counter, &id));
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_create(&threads[i], NULL, hammer, breaker) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *result = NULL;
        pthread_join(threads[i], &result);
        CHECK(result == NULL);
    }
    CHECK(counter.opened == 1);
    CHECK_OK(ab_failure_breaker_get_status(breaker, &json));
    cJSON *status = take_json(json);
    CHECK(number_at(status, "consecutiveFailures") == THREADS * FAILURES_PER_THREAD);
    CHECK(strcmp(state_string(status), "OPEN") == 0);
    cJSON_Delete(status);
    ab_failure_breaker_free(breaker);
}

/* The last error is per thread. */
static void *fail_in_thread(void *arg) {
    (void)arg;
    ab_status status = ab_failure_breaker_record_success(NULL);
    return strcmp(ab_last_error_message(), "NULL_ARG: breaker must not be NULL") == 0 &&
                   status == AB_ERR_NULL_ARG
               ? NULL
               : (void *)1;
}

static void the_last_error_is_per_thread(void) {
    CHECK_STATUS(ab_analyze(NULL, NULL), AB_ERR_NULL_ARG);
    pthread_t thread;
    void *result = (void *)1;
    CHECK(pthread_create(&thread, NULL, fail_in_thread, NULL) == 0);
    pthread_join(thread, &result);
    CHECK(result == NULL);
    CHECK_STARTS_WITH(ab_last_error_message(), "NULL_ARG: text must not be NULL");
}

int main(void) {
    static const TestCase tests[] = {
        {"version_and_status_codes", version_and_status_codes},
        {"failure_breaker_cycle_with_listener", failure_breaker_cycle_with_listener},
        {"guarded_call_runs_records_and_refuses", guarded_call_runs_records_and_refuses},
        {"out_parameters_untouched_and_last_error_cleared",
         out_parameters_untouched_and_last_error_cleared},
        {"a_shared_clock_outlives_its_handle", a_shared_clock_outlives_its_handle},
        {"save_load_and_state_path", save_load_and_state_path},
        {"stagnation_breaker_metrics_as_json", stagnation_breaker_metrics_as_json},
        {"stagnation_step_detectors", stagnation_step_detectors},
        {"budget_breaker_halts_and_ticks", budget_breaker_halts_and_ticks},
        {"monitor_verdicts_listeners_and_snapshots", monitor_verdicts_listeners_and_snapshots},
        {"environment_maps_and_the_process_environment",
         environment_maps_and_the_process_environment},
        {"analyzer_and_strategies", analyzer_and_strategies},
        {"fix_plan_from_markdown_warns_on_skips", fix_plan_from_markdown_warns_on_skips},
        {"loop_observes_until_exit", loop_observes_until_exit},
        {"listeners_are_removed_by_id", listeners_are_removed_by_id},
        {"a_listener_may_call_back_in", a_listener_may_call_back_in},
        {"concurrent_failures_open_once", concurrent_failures_open_once},
        {"the_last_error_is_per_thread", the_last_error_is_per_thread},
    };
    return run_tests("api", tests, sizeof tests / sizeof tests[0]);
}
