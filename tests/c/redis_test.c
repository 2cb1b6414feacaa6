/*
 * The store keys of the config JSON from C (contract §12, docs/distributed.md) against a real
 * redis-server: two FailureBreakers on one key share one circuit, two Monitors on one key share a
 * task's budget, ab_*_store_status report where the state lives, bad store configs are
 * AB_ERR_INVALID_CONFIG and a refused password AB_ERR_IO, never showing the password.
 *
 * Run by `make test-c-redis` under tools/with_redis.sh, which names the server in
 * AGENTBREAKER_REDIS_URL (redis://127.0.0.1:<port>/0).
 */
#define _XOPEN_SOURCE 700

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char url[256];
static char prefix[64];

/* A config with the store keys: `fmt` has two %s, the URL and a key (prefix + `key`). */
static char *config(const char *fmt, const char *key) {
    static char buffer[1024];
    char full_key[128];
    snprintf(full_key, sizeof full_key, "%s:%s", prefix, key);
    snprintf(buffer, sizeof buffer, fmt, url, full_key);
    return buffer;
}

static cJSON *take_json(char *json) {
    cJSON *value = cJSON_Parse(json);
    ab_string_free(json);
    return value;
}

static const char *string_at(const cJSON *object, const char *key) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(s) ? s->valuestring : "";
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void test_failure_breakers_share_one_circuit(void) {
    /* Valgrind makes every call many times slower: a store call past the default 50 ms would
     * hand the breaker to its local stand-in (storeFailure "open"), which is not what this
     * test is about. */
    const char *fmt = "{\"store\": \"%s\", \"key\": \"%s\", \"failureThreshold\": 3, "
                      "\"storeTimeoutMs\": 5000}";
    ab_failure_breaker *a = NULL, *b = NULL;
    CHECK_OK(ab_failure_breaker_new(config(fmt, "tool"), NULL, &a));
    CHECK_OK(ab_failure_breaker_new(config(fmt, "tool"), NULL, &b));
    CHECK_OK(ab_failure_breaker_record_failure(a, "boom"));
    CHECK_OK(ab_failure_breaker_record_failure(b, "boom"));
    CHECK_OK(ab_failure_breaker_record_failure(a, "boom"));
    ab_state state = AB_STATE_CLOSED;
    CHECK_OK(ab_failure_breaker_state(a, &state));
    CHECK(state == AB_STATE_OPEN);
    /* b hears of it through pub/sub within milliseconds. */
    state = AB_STATE_CLOSED;
    for (int i = 0; i < 200; i++) {
        CHECK_OK(ab_failure_breaker_state(b, &state));
        if (state == AB_STATE_OPEN) {
            break;
        }
        sleep_ms(10);
    }
    CHECK(state == AB_STATE_OPEN);
    CHECK_STATUS(ab_failure_breaker_try_acquire(b), AB_ERR_CIRCUIT_OPEN);
    char *json = NULL;
    CHECK_OK(ab_failure_breaker_store_status(b, &json));
    cJSON *status = take_json(json);
    CHECK(strcmp(string_at(status, "mode"), "shared") == 0);
    CHECK_STARTS_WITH(string_at(status, "key"), prefix);
    cJSON_Delete(status);
    ab_failure_breaker_free(a);
    ab_failure_breaker_free(b);

    /* Without a store: null. */
    ab_failure_breaker *plain = NULL;
    CHECK_OK(ab_failure_breaker_new(NULL, NULL, &plain));
    CHECK_OK(ab_failure_breaker_store_status(plain, &json));
    CHECK(strcmp(json, "null") == 0);
    ab_string_free(json);
    ab_failure_breaker_free(plain);
}

static void test_monitors_share_one_budget(void) {
    const char *fmt = "{\"store\": \"%s\", \"key\": \"%s\", \"profile\": \"seed\", "
                      "\"storeTimeoutMs\": 5000, \"budget\": {\"maxToolCallsPerTask\": 3}}";
    ab_monitor *a = NULL, *b = NULL;
    CHECK_OK(ab_monitor_new(config(fmt, "tenant"), NULL, &a));
    CHECK_OK(ab_monitor_new(config(fmt, "tenant"), NULL, &b));
    const char *use = "{\"type\": \"tool_use\", \"name\": \"search\", \"taskId\": \"t1\"}";
    ab_monitor *order[4] = {a, b, a, b};
    const char *actions[4];
    char *verdicts[4];
    for (int i = 0; i < 4; i++) {
        verdicts[i] = NULL;
        CHECK_OK(ab_monitor_observe(order[i], use, &verdicts[i]));
        cJSON *v = cJSON_Parse(verdicts[i]);
        actions[i] = strcmp(string_at(v, "action"), "halt") == 0 ? "halt" : "go";
        if (i == 3) {
            CHECK(strcmp(string_at(v, "reason"), "tool_call_limit") == 0);
            CHECK(strcmp(string_at(v, "message"), "tool calls: 4 of 3") == 0);
        }
        cJSON_Delete(v);
        ab_string_free(verdicts[i]);
    }
    CHECK(strcmp(actions[0], "go") == 0 && strcmp(actions[2], "go") == 0);
    CHECK(strcmp(actions[1], "go") == 0 && strcmp(actions[3], "halt") == 0);
    char *json = NULL;
    CHECK_OK(ab_monitor_status(a, &json));
    cJSON *status = take_json(json);
    const cJSON *store = cJSON_GetObjectItemCaseSensitive(status, "store");
    CHECK(strcmp(string_at(store, "mode"), "shared") == 0);
    cJSON_Delete(status);
    CHECK_OK(ab_monitor_store_status(b, &json));
    status = take_json(json);
    CHECK(strcmp(string_at(status, "mode"), "shared") == 0);
    cJSON_Delete(status);
    ab_monitor_free(a);
    ab_monitor_free(b);
}

static void test_bad_store_configs(void) {
    ab_failure_breaker *b = NULL;
    ab_monitor *m = NULL;
    CHECK_STATUS(ab_failure_breaker_new(
                     config("{\"store\": \"%s\", \"key\": \"%s\", \"storeFailure\": \"maybe\"}",
                            "x"),
                     NULL, &b),
                 AB_ERR_INVALID_CONFIG);
    CHECK_STATUS(ab_monitor_new("{\"store\": \"redis://127.0.0.1:1/0\"}", NULL, &m),
                 AB_ERR_INVALID_CONFIG);
    CHECK_STATUS(ab_monitor_new(config("{\"failure\": {\"store\": \"%s\", \"key\": \"%s\"}}", "x"),
                                NULL, &m),
                 AB_ERR_INVALID_CONFIG);
    CHECK_CONTAINS(ab_last_error_message(), "top level");
    CHECK_STATUS(ab_monitor_new("{\"store\": \"http://:Pa55-n0t-sh0wn@h/0\", \"key\": \"k\"}",
                                NULL, &m),
                 AB_ERR_INVALID_CONFIG);
    CHECK(strstr(ab_last_error_message(), "Pa55-n0t-sh0wn") == NULL);
    /* A password the server does not take (it has none): AB_ERR_IO, the password not shown. */
    char with_password[300];
    const char *host = strstr(url, "//") + 2;
    snprintf(with_password, sizeof with_password,
             "{\"store\": \"redis://:Pa55-n0t-sh0wn@%s\", \"key\": \"k\"}", host);
    CHECK_STATUS(ab_monitor_new(with_password, NULL, &m), AB_ERR_IO);
    CHECK(strstr(ab_last_error_message(), "Pa55-n0t-sh0wn") == NULL);
    CHECK_STATUS(ab_failure_breaker_new(with_password, NULL, &b), AB_ERR_IO);
    CHECK(strstr(ab_last_error_message(), "Pa55-n0t-sh0wn") == NULL);
}

int main(void) {
    const char *given = getenv("AGENTBREAKER_REDIS_URL");
    if (given == NULL || strlen(given) >= sizeof url) {
        fprintf(stderr, "redis_test needs AGENTBREAKER_REDIS_URL (run it with tools/with_redis.sh)\n");
        return 2;
    }
    strcpy(url, given);
    snprintf(prefix, sizeof prefix, "c-test:%ld:%ld", (long)getpid(), (long)time(NULL));
    const TestCase tests[] = {
        {"failure_breakers_share_one_circuit", test_failure_breakers_share_one_circuit},
        {"monitors_share_one_budget", test_monitors_share_one_budget},
        {"bad_store_configs", test_bad_store_configs},
    };
    int code = run_tests("redis", tests, sizeof tests / sizeof tests[0]);
    /* Each store-backed handle's connection thread ends within 100 ms of its free: let them, so
     * that valgrind sees every allocation released. */
    sleep_ms(300);
    return code;
}
