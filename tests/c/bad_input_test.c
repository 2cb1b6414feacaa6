/*
 * The C bad-input matrix (issue 10): every argument of every public entry point of the C API, and
 * every field of every JSON config, event, observation, snapshot and environment, against the
 * columns below. Each row of ROWS is one argument (or field) with the outcome of every column;
 * each column that applies is one case. A case builds fresh objects, makes the call, checks its
 * status (and that the last-error message starts with the status's code and is at most 1100
 * bytes, that an out-parameter is written exactly when the call returns AB_OK), then checks that
 * the object still works (a short behavioural check per type) and frees everything.
 *
 * docs/bad-input/c.md is generated from the same table (`bad_input_test --markdown`; mk/c.mk
 * fails when the committed file differs). `--discover` prints every row with the outcomes the
 * library gives now, in the table's own syntax, for writing new rows. `--big-bytes N` (first)
 * makes the "10 MB string" N bytes (mk/c.mk: 1 MiB under valgrind, to keep that run short).
 *
 * The columns (what "the value" is depends on the argument's kind; "-" in a row is n/a):
 *   wrong type    JSON field: a value of another JSON type ("5" for a number, 5 for a string,
 *                 "yes" for a boolean, "x" for an object, {} for a list); whole JSON argument:
 *                 [1, 2]; environment variable: the number 5 instead of a string
 *   null          the JSON null (as the field's value, or as the whole JSON argument)
 *   NaN, +Inf, -Inf   what printf("%g") writes for them (nan, inf, -inf): JSON has no such
 *                 numbers, so this is what a C program that formats a double into JSON sends
 *   negative      -1 (for a uint64_t argument: -1 converted by C, 2^64 - 1)
 *   zero          0
 *   huge          2^64 for whole-number fields, 1e300 for fractional ones, UINT64_MAX for
 *                 uint64_t arguments, INT32_MAX for int32_t
 *   10 MB string  10 MiB of "a" as the text or the field's string value; for a whole JSON
 *                 argument, a valid value after 10 MiB of JSON whitespace
 *   invalid UTF-8 the bytes FF FE inside the text (or the field's string, or a key)
 *   NULL pointer  C NULL for the argument
 */
#define _POSIX_C_SOURCE 200809L

#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* ------------------------------------------------------------------------------------------ */
/* Columns and argument kinds                                                                  */

enum {
    COL_WRONG_TYPE,
    COL_NULL,
    COL_NAN,
    COL_POS_INF,
    COL_NEG_INF,
    COL_NEGATIVE,
    COL_ZERO,
    COL_HUGE,
    COL_BIG,
    COL_BAD_UTF8,
    COL_NULL_PTR,
    COLUMNS
};

static const char *const COLUMN_NAMES[COLUMNS] = {
    "wrong type", "null", "NaN", "+Inf", "-Inf", "negative", "zero", "huge",
    "10 MB string", "invalid UTF-8", "NULL pointer",
};

typedef enum {
    A_JSON,  /* a whole JSON argument (the row's template is a valid value) */
    A_TEXT,  /* a text argument */
    A_U64,   /* a uint64_t argument */
    A_I32,   /* an int32_t argument */
    A_BOOL,  /* a bool argument: nothing applies */
    A_PTR,   /* a handle, out-parameter, callback, user_data or clock: only NULL applies */
    F_INT,   /* a whole-number field of a JSON argument (template has %s where it goes) */
    F_FLOAT, /* a fractional-number field */
    F_STR,   /* a string field */
    F_BOOL,  /* a boolean field */
    F_OBJ,   /* an object field */
    F_ARR,   /* a list field */
    F_ANY,   /* a field of any JSON type (no wrong type) */
    F_ENV,   /* an environment variable (a JSON string) holding a whole number */
    F_ENVF,  /* an environment variable holding a fractional number */
} Kind;

/* ------------------------------------------------------------------------------------------ */
/* Fixtures: the objects a case works on, made fresh for every case                            */

typedef enum { O_NONE, O_CLOCK, O_FAILURE, O_STAGNATION, O_BUDGET, O_STRATEGY, O_PLAN, O_LOOP } Obj;

typedef struct {
    ab_manual_clock *clock;
    ab_failure_breaker *failure;
    ab_stagnation_breaker *stagnation;
    ab_budget_breaker *budget;
    ab_exit_strategy *strategy;
    ab_loop *agent_loop;
    /* What a constructor made (freed after its smoke check). */
    ab_manual_clock *new_clock;
    ab_failure_breaker *new_failure;
    ab_stagnation_breaker *new_stagnation;
    ab_budget_breaker *new_budget;
    ab_exit_strategy *new_strategy;
    ab_loop *new_loop;
    /* A copy of the JSON an accepted call wrote, for detail checks (or NULL). */
    char *result;
    /* The number a scalar case passed (for the calls that check what they did with it). */
    uint64_t number;
} Fixture;

static const char FAILURE_CONFIG[] = "{\"failureThreshold\": 2, \"cooldownMs\": 1000}";
static const char STAGNATION_CONFIG[] = "{\"noProgressThreshold\": 2, \"sameErrorThreshold\": 2}";
static const char BUDGET_CONFIG[] = "{\"maxToolCallsPerTask\": 2}";
static const char PLAN_MARKDOWN[] = "- [ ] first\n- [ ] second\n";
static const char LOOP_CONFIG[] = "{\"maxIterations\": 3, \"budget\": {\"maxToolCallsPerTask\": 5}}";
static const char TOOL_USE[] = "{\"type\": \"tool_use\", \"name\": \"grep\"}";

/* Written to out-parameters before a call: an error must leave it there. */
static char sentinel_byte;
#define SENTINEL ((void *)&sentinel_byte)

static void fixture_make(Fixture *fx, Obj obj) {
    memset(fx, 0, sizeof *fx);
    CHECK_OK(ab_manual_clock_new(0, &fx->clock));
    switch (obj) {
    case O_FAILURE:
        CHECK_OK(ab_failure_breaker_new(FAILURE_CONFIG, fx->clock, &fx->failure));
        break;
    case O_STAGNATION:
        CHECK_OK(ab_stagnation_breaker_new(STAGNATION_CONFIG, fx->clock, &fx->stagnation));
        break;
    case O_BUDGET:
        CHECK_OK(ab_budget_breaker_new(BUDGET_CONFIG, fx->clock, &fx->budget));
        break;
    case O_STRATEGY:
        CHECK_OK(ab_exit_strategy_new("{\"type\": \"auto\"}", fx->clock, &fx->strategy));
        break;
    case O_PLAN:
        CHECK_OK(ab_exit_strategy_new_fix_plan_markdown(PLAN_MARKDOWN, fx->clock, &fx->strategy));
        break;
    case O_LOOP:
        CHECK_OK(ab_loop_new(LOOP_CONFIG, fx->clock, &fx->agent_loop));
        break;
    case O_NONE:
    case O_CLOCK:
        break;
    }
}

/* A JSON result parsed (the string released). */
static cJSON *parse(char *json) {
    cJSON *value = cJSON_Parse(json);
    CHECK(value != NULL);
    ab_string_free(json);
    return value;
}

static bool json_bool(const cJSON *object, const char *key) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(object, key));
}

static const char *json_text(const cJSON *object, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? item->valuestring : "";
}

static void expect_state(ab_state got, ab_state expected, const char *what) {
    if (got != expected) {
        fprintf(stderr, "  %s: state %d, expected %d\n", what, (int)got, (int)expected);
        check_failed_ = true;
    }
}

/* The behavioural checks: the fixture's object still does what the contract says. */

static void works_clock(const ab_manual_clock *clock) {
    uint64_t now = 1;
    CHECK_OK(ab_manual_clock_set(clock, 5));
    CHECK_OK(ab_manual_clock_advance(clock, 2));
    CHECK_OK(ab_manual_clock_now(clock, &now));
    CHECK(now == 7);
}

static void works_failure(Fixture *fx) {
    ab_failure_breaker *b = fx->failure;
    ab_state state = AB_STATE_OPEN;
    works_clock(fx->clock);
    CHECK_OK(ab_failure_breaker_reset(b));
    CHECK_OK(ab_failure_breaker_state(b, &state));
    expect_state(state, AB_STATE_CLOSED, "failure after reset");
    CHECK_OK(ab_failure_breaker_record_failure(b, "first"));
    CHECK_OK(ab_failure_breaker_try_acquire(b));
    CHECK_OK(ab_failure_breaker_record_failure(b, "second"));
    CHECK_OK(ab_failure_breaker_state(b, &state));
    expect_state(state, AB_STATE_OPEN, "failure after 2 failures");
    CHECK_STATUS(ab_failure_breaker_try_acquire(b), AB_ERR_CIRCUIT_OPEN);
    CHECK_OK(ab_manual_clock_advance(fx->clock, 1000));
    CHECK_OK(ab_failure_breaker_try_acquire(b));
    CHECK_OK(ab_failure_breaker_record_success(b));
    CHECK_OK(ab_failure_breaker_state(b, &state));
    expect_state(state, AB_STATE_CLOSED, "failure after the probe");
    char *json = NULL;
    CHECK_OK(ab_failure_breaker_get_status(b, &json));
    cJSON *status = parse(json);
    CHECK(strcmp(json_text(status, "state"), "CLOSED") == 0);
    cJSON_Delete(status);
}

static void works_stagnation(const ab_stagnation_breaker *b) {
    ab_state state = AB_STATE_OPEN;
    char *json = NULL;
    CHECK_OK(ab_stagnation_breaker_reset(b));
    CHECK_OK(ab_stagnation_breaker_record_progress(b, "{\"outputLength\": 10}"));
    CHECK_OK(ab_stagnation_breaker_record_progress(b, "{\"outputLength\": 10}"));
    CHECK_OK(ab_stagnation_breaker_state(b, &state));
    expect_state(state, AB_STATE_HALF_OPEN, "stagnation after 2 without progress");
    CHECK_OK(ab_stagnation_breaker_record_progress(b, "{\"filesChanged\": 1, \"outputLength\": 10}"));
    CHECK_OK(ab_stagnation_breaker_state(b, &state));
    expect_state(state, AB_STATE_CLOSED, "stagnation after progress");
    CHECK_OK(ab_stagnation_breaker_record_error(b, "E1 failed", false));
    CHECK_OK(ab_stagnation_breaker_record_error(b, "E1 failed", false));
    CHECK_OK(ab_stagnation_breaker_check(b, &json));
    cJSON *check = parse(json);
    CHECK(!json_bool(check, "allowContinue"));
    CHECK(strcmp(json_text(check, "state"), "OPEN") == 0);
    cJSON_Delete(check);
}

static void works_budget(const ab_budget_breaker *b) {
    char *halt = SENTINEL;
    CHECK_OK(ab_budget_breaker_reset(b));
    CHECK_OK(ab_budget_breaker_ingest(b, TOOL_USE, &halt));
    CHECK(halt == NULL);
    CHECK_OK(ab_budget_breaker_ingest(b, TOOL_USE, &halt));
    CHECK(halt == NULL);
    CHECK_OK(ab_budget_breaker_ingest(b, TOOL_USE, &halt));
    CHECK_CONTAINS(halt, "\"slug\":\"tool_call_limit\"");
    ab_string_free(halt);
    char *json = NULL;
    CHECK_OK(ab_budget_breaker_snapshot(b, &json));
    cJSON_Delete(parse(json));
}

static void works_strategy(const ab_exit_strategy *s) {
    char *json = NULL;
    CHECK_OK(ab_exit_strategy_reset(s));
    CHECK_OK(ab_exit_strategy_should_exit(s, "still working on it", NULL, &json));
    cJSON *decision = parse(json);
    CHECK(!json_bool(decision, "exit"));
    cJSON_Delete(decision);
    CHECK_OK(ab_exit_strategy_should_exit(s, "EXIT_SIGNAL: true", "CLOSED", &json));
    decision = parse(json);
    CHECK(json_bool(decision, "exit"));
    CHECK(strcmp(json_text(decision, "reason"), "completed") == 0);
    cJSON_Delete(decision);
}

static void works_plan(const ab_exit_strategy *s) {
    char *json = NULL;
    CHECK_OK(ab_exit_strategy_reset(s));
    CHECK_OK(ab_exit_strategy_should_exit(s, "done", NULL, &json));
    cJSON *decision = parse(json);
    CHECK(!json_bool(decision, "exit"));
    cJSON_Delete(decision);
    CHECK_OK(ab_exit_strategy_should_exit(s, "done", NULL, &json));
    decision = parse(json);
    CHECK(json_bool(decision, "exit"));
    CHECK(strcmp(json_text(decision, "reason"), "plan_complete") == 0);
    cJSON_Delete(decision);
    CHECK_OK(ab_exit_strategy_plan_status(s, &json));
    cJSON_Delete(parse(json));
}

static void works_loop(const ab_loop *l) {
    char *json = NULL;
    CHECK_OK(ab_loop_reset(l));
    CHECK_OK(ab_loop_observe(l, "{\"output\": \"working\", \"filesChanged\": 1}", &json));
    cJSON *decision = parse(json);
    CHECK(strcmp(json_text(decision, "action"), "continue") == 0);
    cJSON_Delete(decision);
    CHECK_OK(ab_loop_observe(l, "{\"output\": \"EXIT_SIGNAL: true\"}", &json));
    decision = parse(json);
    CHECK(strcmp(json_text(decision, "action"), "exit") == 0);
    CHECK(strcmp(json_text(decision, "reason"), "completed") == 0);
    cJSON_Delete(decision);
    CHECK_OK(ab_loop_get_status(l, &json));
    cJSON_Delete(parse(json));
}

/* What a constructor made works: its basic calls succeed and give JSON (its config may be odd). */
static void smoke_created(Fixture *fx) {
    char *json = NULL;
    if (fx->new_clock != NULL) {
        uint64_t now = 0;
        CHECK_OK(ab_manual_clock_now(fx->new_clock, &now));
        CHECK(now == fx->number);
        CHECK_OK(ab_manual_clock_advance(fx->new_clock, UINT64_MAX));
        CHECK_OK(ab_manual_clock_now(fx->new_clock, &now));
        CHECK(now == UINT64_MAX); /* saturates */
        ab_manual_clock_free(fx->new_clock);
    }
    if (fx->new_failure != NULL) {
        CHECK_OK(ab_failure_breaker_record_failure(fx->new_failure, "boom"));
        CHECK_OK(ab_failure_breaker_should_allow_operation(fx->new_failure, &json));
        cJSON_Delete(parse(json));
        CHECK_OK(ab_failure_breaker_record_success(fx->new_failure));
        CHECK_OK(ab_failure_breaker_get_status(fx->new_failure, &json));
        cJSON_Delete(parse(json));
        ab_failure_breaker_free(fx->new_failure);
    }
    if (fx->new_stagnation != NULL) {
        CHECK_OK(ab_stagnation_breaker_record_progress(fx->new_stagnation, "{}"));
        CHECK_OK(ab_stagnation_breaker_record_error(fx->new_stagnation, "boom", false));
        CHECK_OK(ab_stagnation_breaker_record_step(fx->new_stagnation, "{\"action\": \"ls\"}"));
        CHECK_OK(ab_stagnation_breaker_check(fx->new_stagnation, &json));
        cJSON_Delete(parse(json));
        ab_stagnation_breaker_free(fx->new_stagnation);
    }
    if (fx->new_budget != NULL) {
        char *halt = NULL;
        CHECK_OK(ab_budget_breaker_ingest(fx->new_budget, TOOL_USE, &halt));
        ab_string_free(halt);
        CHECK_OK(ab_budget_breaker_tick(fx->new_budget, &json));
        cJSON_Delete(parse(json));
        CHECK_OK(ab_budget_breaker_snapshot(fx->new_budget, &json));
        cJSON_Delete(parse(json));
        ab_budget_breaker_free(fx->new_budget);
    }
    if (fx->new_strategy != NULL) {
        CHECK_OK(ab_exit_strategy_should_exit(fx->new_strategy, "done", NULL, &json));
        cJSON_Delete(parse(json));
        CHECK_OK(ab_exit_strategy_plan_status(fx->new_strategy, &json));
        ab_string_free(json);
        ab_exit_strategy_free(fx->new_strategy);
    }
    if (fx->new_loop != NULL) {
        CHECK_OK(ab_loop_observe(fx->new_loop, "{\"output\": \"working\"}", &json));
        cJSON_Delete(parse(json));
        CHECK_OK(ab_loop_get_status(fx->new_loop, &json));
        cJSON_Delete(parse(json));
        ab_loop_free(fx->new_loop);
    }
}

/* The length of a JSON result (0 when the call fails or gives none); releases it. Takes the
 * variable's address, so that it is read after the call. */
static size_t json_length(ab_status status, char **out) {
    size_t n = status == AB_OK && *out != NULL ? strlen(*out) : 0;
    if (status == AB_OK) {
        ab_string_free(*out);
    }
    *out = NULL;
    return n;
}

static size_t max_size(size_t a, size_t b) {
    return a > b ? a : b;
}

/* The size of what the case's objects report about themselves (status, snapshot or plan): shows
 * whether a 10 MB value was kept whole or cut. */
static size_t report_size(const Fixture *fx) {
    size_t n = 0;
    char *json = NULL;
    const ab_failure_breaker *failure = fx->new_failure ? fx->new_failure : fx->failure;
    const ab_stagnation_breaker *stagnation = fx->new_stagnation ? fx->new_stagnation : fx->stagnation;
    const ab_budget_breaker *budget = fx->new_budget ? fx->new_budget : fx->budget;
    const ab_exit_strategy *strategy = fx->new_strategy ? fx->new_strategy : fx->strategy;
    const ab_loop *agent_loop = fx->new_loop ? fx->new_loop : fx->agent_loop;
    if (failure != NULL) {
        n = max_size(n, json_length(ab_failure_breaker_get_status(failure, &json), &json));
        n = max_size(n, json_length(ab_failure_breaker_snapshot(failure, &json), &json));
    }
    if (stagnation != NULL) {
        n = max_size(n, json_length(ab_stagnation_breaker_get_status(stagnation, &json), &json));
        n = max_size(n, json_length(ab_stagnation_breaker_snapshot(stagnation, &json), &json));
    }
    if (budget != NULL) {
        n = max_size(n, json_length(ab_budget_breaker_snapshot(budget, &json), &json));
    }
    if (strategy != NULL) {
        n = max_size(n, json_length(ab_exit_strategy_plan_status(strategy, &json), &json));
    }
    if (agent_loop != NULL) {
        n = max_size(n, json_length(ab_loop_get_status(agent_loop, &json), &json));
    }
    return n;
}

static void fixture_check_and_free(Fixture *fx, Obj obj) {
    smoke_created(fx);
    switch (obj) {
    case O_CLOCK:
        works_clock(fx->clock);
        break;
    case O_FAILURE:
        works_failure(fx);
        break;
    case O_STAGNATION:
        works_stagnation(fx->stagnation);
        break;
    case O_BUDGET:
        works_budget(fx->budget);
        break;
    case O_STRATEGY:
        works_strategy(fx->strategy);
        break;
    case O_PLAN:
        works_plan(fx->strategy);
        break;
    case O_LOOP:
        works_loop(fx->agent_loop);
        break;
    case O_NONE: {
        /* The library as a whole still works. */
        char *json = NULL;
        CHECK_OK(ab_analyze("All tasks complete.", &json));
        cJSON *analysis = parse(json);
        const cJSON *confidence = cJSON_GetObjectItemCaseSensitive(analysis, "confidence");
        CHECK(cJSON_IsNumber(confidence) && confidence->valuedouble == 40);
        cJSON_Delete(analysis);
        break;
    }
    }
    ab_loop_free(fx->agent_loop);
    ab_exit_strategy_free(fx->strategy);
    ab_budget_breaker_free(fx->budget);
    ab_stagnation_breaker_free(fx->stagnation);
    ab_failure_breaker_free(fx->failure);
    ab_manual_clock_free(fx->clock);
    free(fx->result);
}

/* ------------------------------------------------------------------------------------------ */
/* Out-parameter checks                                                                        */

/* A JSON out-parameter: written (and kept in fx->result) exactly when the call succeeded. Takes
 * the variable's address, so that it is read after the call whatever the evaluation order. */
static ab_status json_out(Fixture *fx, ab_status status, char **out, bool may_be_null) {
    char *json = *out;
    if (status == AB_OK) {
        if (json == SENTINEL || (json == NULL && !may_be_null)) {
            fprintf(stderr, "  an accepted call did not write its JSON out-parameter\n");
            check_failed_ = true;
        } else if (json != NULL) {
            cJSON *value = cJSON_Parse(json);
            if (value == NULL) {
                fprintf(stderr, "  the result is not JSON\n");
                check_failed_ = true;
            }
            cJSON_Delete(value);
            /* Keep the head of the result for detail checks (a result may be megabytes). */
            fx->result = strndup(json, 65536);
            ab_string_free(json);
        }
    } else if (json != SENTINEL) {
        fprintf(stderr, "  a refused call wrote its JSON out-parameter\n");
        check_failed_ = true;
    }
    return status;
}

/* A handle out-parameter: written exactly when the call succeeded. */
#define HANDLE_OUT(status, handle, slot)                                                           \
    do {                                                                                           \
        if ((status) == AB_OK) {                                                                   \
            CHECK((void *)(handle) != SENTINEL && (handle) != NULL);                               \
            if ((void *)(handle) != SENTINEL) {                                                    \
                (slot) = (handle);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            CHECK((void *)(handle) == SENTINEL);                                                   \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* The calls: one function per entry point; `arg` is the index of the parameter that gets the
 * case's value (text, number or NULL), every other parameter gets a valid value.              */

typedef struct {
    const char *text; /* for text and JSON arguments (NULL for the NULL-pointer column) */
    uint64_t number;  /* for uint64_t / int32_t arguments */
    bool null_ptr;    /* the NULL-pointer column */
} Value;

typedef ab_status (*CallFn)(Fixture *fx, int arg, const Value *v);

#define PICK(i, bad, good) (arg == (i) ? (bad) : (good))
#define TEXT(i, good) PICK(i, v->text, good)
#define PTR(i, good) PICK(i, NULL, good)

static void noop_listener(const char *event_json, void *user_data) {
    (void)event_json;
    (void)user_data;
}

static const char *operation_fails_with(void *user_data) {
    return user_data;
}

static const char *operation_succeeds(void *user_data) {
    (void)user_data;
    return NULL;
}

/* Outcomes of the functions that return no status, as pseudo statuses for the table. */
#define ST_NO_OP ((ab_status)1001)      /* a `_free` given NULL returned */
#define ST_CODE_OK ((ab_status)1002)    /* ab_status_code returned "OK" */
#define ST_CODE_UNKNOWN ((ab_status)1003) /* ab_status_code returned "UNKNOWN" */

static ab_status call_status_code(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    const char *code = ab_status_code((int32_t)v->number);
    if (strcmp(code, "OK") == 0) {
        return ST_CODE_OK;
    }
    return strcmp(code, "UNKNOWN") == 0 ? ST_CODE_UNKNOWN : AB_ERR_INTERNAL;
}

static ab_status call_string_free(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    (void)v;
    ab_string_free(NULL);
    return ST_NO_OP;
}

static ab_status call_clock_new(Fixture *fx, int arg, const Value *v) {
    ab_manual_clock *clock = SENTINEL;
    fx->number = v->number;
    ab_status s = ab_manual_clock_new(PICK(0, v->number, 0), PTR(1, &clock));
    HANDLE_OUT(s, clock, fx->new_clock);
    return s;
}

static ab_status call_clock_free(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    (void)v;
    ab_manual_clock_free(NULL);
    return ST_NO_OP;
}

static ab_status call_clock_set(Fixture *fx, int arg, const Value *v) {
    ab_status s = ab_manual_clock_set(PTR(0, fx->clock), PICK(1, v->number, 3));
    if (s == AB_OK) {
        uint64_t now = 0;
        CHECK_OK(ab_manual_clock_now(fx->clock, &now));
        CHECK(now == v->number);
    }
    return s;
}

static ab_status call_clock_advance(Fixture *fx, int arg, const Value *v) {
    CHECK_OK(ab_manual_clock_set(fx->clock, 10));
    ab_status s = ab_manual_clock_advance(PTR(0, fx->clock), PICK(1, v->number, 3));
    if (s == AB_OK) {
        uint64_t now = 0;
        CHECK_OK(ab_manual_clock_now(fx->clock, &now));
        CHECK(now == (v->number > UINT64_MAX - 10 ? UINT64_MAX : 10 + v->number));
    }
    return s;
}

static ab_status call_clock_now(Fixture *fx, int arg, const Value *v) {
    (void)v;
    uint64_t now = 12345;
    ab_status s = ab_manual_clock_now(PTR(0, fx->clock), PTR(1, &now));
    CHECK(s == AB_OK ? now == 0 : now == 12345);
    return s;
}

/* FailureBreaker */

static ab_status call_failure_new(Fixture *fx, int arg, const Value *v) {
    ab_failure_breaker *b = SENTINEL;
    ab_status s = ab_failure_breaker_new(TEXT(0, NULL), PTR(1, fx->clock), PTR(2, &b));
    HANDLE_OUT(s, b, fx->new_failure);
    return s;
}

static ab_status call_failure_free(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    (void)v;
    ab_failure_breaker_free(NULL);
    return ST_NO_OP;
}

static ab_status call_failure_record_success(Fixture *fx, int arg, const Value *v) {
    (void)v;
    return ab_failure_breaker_record_success(PTR(0, fx->failure));
}

static ab_status call_failure_record_failure(Fixture *fx, int arg, const Value *v) {
    return ab_failure_breaker_record_failure(PTR(0, fx->failure), TEXT(1, "boom"));
}

static ab_status call_failure_should_allow(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_failure_breaker_should_allow_operation(PTR(0, fx->failure), PTR(1, &json)),
                    &json, false);
}

static ab_status call_failure_try_acquire(Fixture *fx, int arg, const Value *v) {
    (void)v;
    return ab_failure_breaker_try_acquire(PTR(0, fx->failure));
}

static ab_status call_failure_call(Fixture *fx, int arg, const Value *v) {
    bool ok = true;
    /* Argument 4 is the text the operation fails with (NULL: the operation succeeds). */
    ab_guarded_fn operation = arg == 4 ? operation_fails_with : operation_succeeds;
    void *user_data = arg == 4 ? (void *)v->text : (void *)"unused";
    ab_status s = ab_failure_breaker_call(PTR(0, fx->failure), PTR(1, operation),
                                          PTR(2, user_data), PTR(3, &ok));
    if (s == AB_OK) {
        CHECK(ok == (arg != 4 || v->text == NULL));
    }
    return s;
}

static ab_status call_failure_state(Fixture *fx, int arg, const Value *v) {
    (void)v;
    ab_state state = AB_STATE_OPEN;
    ab_status s = ab_failure_breaker_state(PTR(0, fx->failure), PTR(1, &state));
    CHECK(state == (s == AB_OK ? AB_STATE_CLOSED : AB_STATE_OPEN));
    return s;
}

static ab_status call_failure_get_status(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_failure_breaker_get_status(PTR(0, fx->failure), PTR(1, &json)), &json,
                    false);
}

static ab_status call_failure_metrics(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_failure_breaker_metrics(PTR(0, fx->failure), PTR(1, &json)), &json, false);
}

static ab_status call_failure_reset(Fixture *fx, int arg, const Value *v) {
    (void)v;
    return ab_failure_breaker_reset(PTR(0, fx->failure));
}

static ab_status call_failure_snapshot(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_failure_breaker_snapshot(PTR(0, fx->failure), PTR(1, &json)), &json,
                    false);
}

static ab_status call_failure_restore(Fixture *fx, int arg, const Value *v) {
    return ab_failure_breaker_restore(PTR(0, fx->failure), TEXT(1, "{}"));
}

static ab_status call_failure_save(Fixture *fx, int arg, const Value *v) {
    return ab_failure_breaker_save(PTR(0, fx->failure), TEXT(1, "/nonexistent-agentbreaker/s.json"));
}

static ab_status call_failure_load(Fixture *fx, int arg, const Value *v) {
    bool loaded = true;
    ab_status s = ab_failure_breaker_load(PTR(0, fx->failure),
                                          TEXT(1, "/nonexistent-agentbreaker/s.json"),
                                          PTR(2, &loaded));
    if (s == AB_OK) {
        CHECK(!loaded);
    }
    return s;
}

static ab_status call_failure_add_listener(Fixture *fx, int arg, const Value *v) {
    (void)v;
    uint64_t id = 0;
    ab_status s = ab_failure_breaker_add_listener(PTR(0, fx->failure), PTR(1, noop_listener),
                                                  PTR(2, (void *)fx), PTR(3, &id));
    CHECK(s == AB_OK ? id >= 1 : id == 0);
    return s;
}

static ab_status call_failure_remove_listener(Fixture *fx, int arg, const Value *v) {
    bool removed = true;
    ab_status s = ab_failure_breaker_remove_listener(PTR(0, fx->failure), PICK(1, v->number, 1),
                                                     PTR(2, &removed));
    if (s == AB_OK) {
        CHECK(!removed);
    }
    return s;
}

/* StagnationBreaker */

static ab_status call_stagnation_new(Fixture *fx, int arg, const Value *v) {
    ab_stagnation_breaker *b = SENTINEL;
    ab_status s = ab_stagnation_breaker_new(TEXT(0, NULL), PTR(1, fx->clock), PTR(2, &b));
    HANDLE_OUT(s, b, fx->new_stagnation);
    return s;
}

static ab_status call_stagnation_free(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    (void)v;
    ab_stagnation_breaker_free(NULL);
    return ST_NO_OP;
}

static ab_status call_stagnation_record_progress(Fixture *fx, int arg, const Value *v) {
    return ab_stagnation_breaker_record_progress(PTR(0, fx->stagnation), TEXT(1, "{}"));
}

static ab_status call_stagnation_record_error(Fixture *fx, int arg, const Value *v) {
    return ab_stagnation_breaker_record_error(PTR(0, fx->stagnation), TEXT(1, "boom"), false);
}

static ab_status call_stagnation_record_step(Fixture *fx, int arg, const Value *v) {
    return ab_stagnation_breaker_record_step(PTR(0, fx->stagnation),
                                             TEXT(1, "{\"action\": \"ls\"}"));
}

static ab_status call_stagnation_check(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_stagnation_breaker_check(PTR(0, fx->stagnation), PTR(1, &json)), &json,
                    false);
}

static ab_status call_stagnation_state(Fixture *fx, int arg, const Value *v) {
    (void)v;
    ab_state state = AB_STATE_OPEN;
    ab_status s = ab_stagnation_breaker_state(PTR(0, fx->stagnation), PTR(1, &state));
    CHECK(state == (s == AB_OK ? AB_STATE_CLOSED : AB_STATE_OPEN));
    return s;
}

static ab_status call_stagnation_get_status(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_stagnation_breaker_get_status(PTR(0, fx->stagnation), PTR(1, &json)),
                    &json, false);
}

static ab_status call_stagnation_reset(Fixture *fx, int arg, const Value *v) {
    (void)v;
    return ab_stagnation_breaker_reset(PTR(0, fx->stagnation));
}

static ab_status call_stagnation_snapshot(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_stagnation_breaker_snapshot(PTR(0, fx->stagnation), PTR(1, &json)),
                    &json, false);
}

static ab_status call_stagnation_restore(Fixture *fx, int arg, const Value *v) {
    return ab_stagnation_breaker_restore(PTR(0, fx->stagnation), TEXT(1, "{}"));
}

static ab_status call_stagnation_add_listener(Fixture *fx, int arg, const Value *v) {
    (void)v;
    uint64_t id = 0;
    ab_status s = ab_stagnation_breaker_add_listener(PTR(0, fx->stagnation), PTR(1, noop_listener),
                                                     PTR(2, (void *)fx), PTR(3, &id));
    CHECK(s == AB_OK ? id >= 1 : id == 0);
    return s;
}

static ab_status call_stagnation_remove_listener(Fixture *fx, int arg, const Value *v) {
    bool removed = true;
    ab_status s = ab_stagnation_breaker_remove_listener(PTR(0, fx->stagnation),
                                                        PICK(1, v->number, 1), PTR(2, &removed));
    if (s == AB_OK) {
        CHECK(!removed);
    }
    return s;
}

/* BudgetBreaker and the environment */

static ab_status call_budget_new(Fixture *fx, int arg, const Value *v) {
    ab_budget_breaker *b = SENTINEL;
    ab_status s = ab_budget_breaker_new(TEXT(0, NULL), PTR(1, fx->clock), PTR(2, &b));
    HANDLE_OUT(s, b, fx->new_budget);
    return s;
}

static ab_status call_budget_new_from_env(Fixture *fx, int arg, const Value *v) {
    ab_budget_breaker *b = SENTINEL;
    char *warnings = SENTINEL;
    ab_status s = ab_budget_breaker_new_from_env(TEXT(0, "{}"), PTR(1, fx->clock), PTR(2, &b),
                                                 PTR(3, &warnings));
    HANDLE_OUT(s, b, fx->new_budget);
    json_out(fx, s, &warnings, false);
    return s;
}

static ab_status call_budget_free(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    (void)v;
    ab_budget_breaker_free(NULL);
    return ST_NO_OP;
}

static ab_status call_budget_ingest(Fixture *fx, int arg, const Value *v) {
    char *halt = SENTINEL;
    return json_out(fx, ab_budget_breaker_ingest(PTR(0, fx->budget), TEXT(1, TOOL_USE), PTR(2, &halt)),
                    &halt, true);
}

static ab_status call_budget_tick(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_budget_breaker_tick(PTR(0, fx->budget), PTR(1, &json)), &json, false);
}

static ab_status call_budget_snapshot(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_budget_breaker_snapshot(PTR(0, fx->budget), PTR(1, &json)), &json, false);
}

static ab_status call_budget_reset(Fixture *fx, int arg, const Value *v) {
    (void)v;
    return ab_budget_breaker_reset(PTR(0, fx->budget));
}

static ab_status call_budget_add_listener(Fixture *fx, int arg, const Value *v) {
    (void)v;
    uint64_t id = 0;
    ab_status s = ab_budget_breaker_add_listener(PTR(0, fx->budget), PTR(1, noop_listener),
                                                 PTR(2, (void *)fx), PTR(3, &id));
    CHECK(s == AB_OK ? id >= 1 : id == 0);
    return s;
}

static ab_status call_budget_remove_listener(Fixture *fx, int arg, const Value *v) {
    bool removed = true;
    ab_status s = ab_budget_breaker_remove_listener(PTR(0, fx->budget), PICK(1, v->number, 1),
                                                    PTR(2, &removed));
    if (s == AB_OK) {
        CHECK(!removed);
    }
    return s;
}

static ab_status call_config_from_env(Fixture *fx, int arg, const Value *v) {
    char *json = SENTINEL;
    return json_out(fx, ab_config_from_env(TEXT(0, "{}"), PTR(1, &json)), &json, false);
}

/* Analyzer and exit strategies */

static ab_status call_analyze(Fixture *fx, int arg, const Value *v) {
    char *json = SENTINEL;
    return json_out(fx, ab_analyze(TEXT(0, "done"), PTR(1, &json)), &json, false);
}

static ab_status call_strategy_new(Fixture *fx, int arg, const Value *v) {
    ab_exit_strategy *s = SENTINEL;
    ab_status status = ab_exit_strategy_new(TEXT(0, NULL), PTR(1, fx->clock), PTR(2, &s));
    HANDLE_OUT(status, s, fx->new_strategy);
    return status;
}

static ab_status call_strategy_new_fix_plan(Fixture *fx, int arg, const Value *v) {
    ab_exit_strategy *s = SENTINEL;
    ab_status status = ab_exit_strategy_new_fix_plan(TEXT(0, "{\"markdown\": \"- [ ] a\"}"),
                                                     PTR(1, fx->clock), PTR(2, &s));
    HANDLE_OUT(status, s, fx->new_strategy);
    return status;
}

static ab_status call_strategy_new_fix_plan_markdown(Fixture *fx, int arg, const Value *v) {
    ab_exit_strategy *s = SENTINEL;
    ab_status status =
        ab_exit_strategy_new_fix_plan_markdown(TEXT(0, "- [ ] a"), PTR(1, fx->clock), PTR(2, &s));
    HANDLE_OUT(status, s, fx->new_strategy);
    return status;
}

static ab_status call_strategy_free(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    (void)v;
    ab_exit_strategy_free(NULL);
    return ST_NO_OP;
}

static ab_status call_strategy_should_exit(Fixture *fx, int arg, const Value *v) {
    char *json = SENTINEL;
    return json_out(fx,
                    ab_exit_strategy_should_exit(PTR(0, fx->strategy), TEXT(1, "working"),
                                                 TEXT(2, "CLOSED"), PTR(3, &json)),
                    &json, false);
}

static ab_status call_strategy_plan_status(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_exit_strategy_plan_status(PTR(0, fx->strategy), PTR(1, &json)), &json,
                    false);
}

static ab_status call_strategy_reset(Fixture *fx, int arg, const Value *v) {
    (void)v;
    return ab_exit_strategy_reset(PTR(0, fx->strategy));
}

static ab_status call_strategy_add_listener(Fixture *fx, int arg, const Value *v) {
    (void)v;
    uint64_t id = 0;
    ab_status s = ab_exit_strategy_add_listener(PTR(0, fx->strategy), PTR(1, noop_listener),
                                                PTR(2, (void *)fx), PTR(3, &id));
    CHECK(s == AB_OK ? id >= 1 : id == 0);
    return s;
}

static ab_status call_strategy_remove_listener(Fixture *fx, int arg, const Value *v) {
    bool removed = true;
    ab_status s = ab_exit_strategy_remove_listener(PTR(0, fx->strategy), PICK(1, v->number, 1),
                                                   PTR(2, &removed));
    if (s == AB_OK) {
        CHECK(!removed);
    }
    return s;
}

/* Loop */

static ab_status call_loop_new(Fixture *fx, int arg, const Value *v) {
    ab_loop *l = SENTINEL;
    ab_status s = ab_loop_new(TEXT(0, NULL), PTR(1, fx->clock), PTR(2, &l));
    HANDLE_OUT(s, l, fx->new_loop);
    return s;
}

static ab_status call_loop_free(Fixture *fx, int arg, const Value *v) {
    (void)fx;
    (void)arg;
    (void)v;
    ab_loop_free(NULL);
    return ST_NO_OP;
}

static ab_status call_loop_observe(Fixture *fx, int arg, const Value *v) {
    char *json = SENTINEL;
    return json_out(fx,
                    ab_loop_observe(PTR(0, fx->agent_loop), TEXT(1, "{\"output\": \"working\"}"),
                                    PTR(2, &json)),
                    &json, false);
}

static ab_status call_loop_get_status(Fixture *fx, int arg, const Value *v) {
    (void)v;
    char *json = SENTINEL;
    return json_out(fx, ab_loop_get_status(PTR(0, fx->agent_loop), PTR(1, &json)), &json, false);
}

static ab_status call_loop_reset(Fixture *fx, int arg, const Value *v) {
    (void)v;
    return ab_loop_reset(PTR(0, fx->agent_loop));
}

static ab_status call_loop_add_listener(Fixture *fx, int arg, const Value *v) {
    (void)v;
    uint64_t id = 0;
    ab_status s = ab_loop_add_listener(PTR(0, fx->agent_loop), PTR(1, noop_listener),
                                       PTR(2, (void *)fx), PTR(3, &id));
    CHECK(s == AB_OK ? id >= 1 : id == 0);
    return s;
}

static ab_status call_loop_remove_listener(Fixture *fx, int arg, const Value *v) {
    bool removed = true;
    ab_status s = ab_loop_remove_listener(PTR(0, fx->agent_loop), PICK(1, v->number, 1),
                                          PTR(2, &removed));
    if (s == AB_OK) {
        CHECK(!removed);
    }
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* The table                                                                                   */

typedef struct {
    const char *entry;    /* the entry point */
    const char *argument; /* the parameter, or the parameter's field */
    Kind kind;
    Obj obj;     /* the object the case works on (O_NONE: none) */
    CallFn call;
    int arg;     /* which parameter of `call` gets the value */
    const char *json; /* A_JSON: a valid value; F_*: the argument with %s where the field goes */
    /* The outcome of each column, space-separated: OK, CFG (INVALID_CONFIG), ARG
     * (INVALID_ARGUMENT), EVT (INVALID_EVENT), SNAP (INVALID_SNAPSHOT), IO, NULL (NULL_ARG), or -
     * (n/a). An outcome may carry a note after a slash (OK/default); the notes `warned` and
     * `no_warning` are checked (the environment's warnings list), the others are documentation. */
    const char *expect;
} Row;

/* Shorthands for the templates. */
#define FAILURE_SNAPSHOT(field_value_pairs)                                                        \
    "{\"version\": 1, \"kind\": \"failure\", \"state\": \"CLOSED\", " field_value_pairs "}"

static const Row ROWS[] = {
    /* Status, strings, version */
    {"ab_status_code", "status", A_I32, O_NONE, call_status_code, 0, NULL, "- - - - - S_UNKNOWN S_OK S_UNKNOWN - - -"},
    {"ab_string_free", "s", A_PTR, O_NONE, call_string_free, 0, NULL, "- - - - - - - - - - NOOP"},

    /* ManualClock */
    {"ab_manual_clock_new", "start_ms", A_U64, O_NONE, call_clock_new, 0, NULL, "- - - - - OK OK OK - - -"},
    {"ab_manual_clock_new", "out_clock", A_PTR, O_NONE, call_clock_new, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_manual_clock_free", "clock", A_PTR, O_NONE, call_clock_free, 0, NULL, "- - - - - - - - - - NOOP"},
    {"ab_manual_clock_set", "clock", A_PTR, O_CLOCK, call_clock_set, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_manual_clock_set", "ms", A_U64, O_CLOCK, call_clock_set, 1, NULL, "- - - - - OK OK OK - - -"},
    {"ab_manual_clock_advance", "clock", A_PTR, O_CLOCK, call_clock_advance, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_manual_clock_advance", "ms", A_U64, O_CLOCK, call_clock_advance, 1, NULL, "- - - - - OK/saturates OK OK/saturates - - -"},
    {"ab_manual_clock_now", "clock", A_PTR, O_CLOCK, call_clock_now, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_manual_clock_now", "out_ms", A_PTR, O_CLOCK, call_clock_now, 1, NULL, "- - - - - - - - - - NULL"},

    /* FailureBreaker */
    {"ab_failure_breaker_new", "config_json", A_JSON, O_NONE, call_failure_new, 0,
     "{\"failureThreshold\": 3}", "CFG OK/defaults - - - - - - OK ARG OK/defaults"},
    {"ab_failure_breaker_new", "config_json.failureThreshold", F_INT, O_NONE, call_failure_new, 0,
     "{\"failureThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.warningThreshold", F_INT, O_NONE, call_failure_new, 0,
     "{\"warningThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG OK/off CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.cooldownMs", F_INT, O_NONE, call_failure_new, 0,
     "{\"cooldownMs\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.backoffMultiplier", F_FLOAT, O_NONE, call_failure_new,
     0, "{\"backoffMultiplier\": %s}", "CFG OK/default CFG CFG CFG CFG CFG OK CFG - -"},
    {"ab_failure_breaker_new", "config_json.maxCooldownMs", F_INT, O_NONE, call_failure_new, 0,
     "{\"maxCooldownMs\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.identicalErrorThreshold", F_INT, O_NONE,
     call_failure_new, 0, "{\"identicalErrorThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG OK/off CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.historyLimit", F_INT, O_NONE, call_failure_new, 0,
     "{\"historyLimit\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.halfOpenMaxProbes", F_INT, O_NONE, call_failure_new, 0,
     "{\"halfOpenMaxProbes\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.probeTimeoutMs", F_INT, O_NONE, call_failure_new, 0,
     "{\"probeTimeoutMs\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_failure_breaker_new", "config_json.errorMatch", F_STR, O_NONE, call_failure_new, 0,
     "{\"errorMatch\": %s}", "CFG OK/default - - - - - - CFG ARG -"},
    {"ab_failure_breaker_new", "config_json.statePath", F_STR, O_NONE, call_failure_new, 0,
     "{\"statePath\": %s}", "CFG OK/none - - - - - - IO ARG -"},
    {"ab_failure_breaker_new", "clock", A_PTR, O_NONE, call_failure_new, 1, NULL, "- - - - - - - - - - OK/system_clock"},
    {"ab_failure_breaker_new", "out_breaker", A_PTR, O_NONE, call_failure_new, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_free", "breaker", A_PTR, O_NONE, call_failure_free, 0, NULL, "- - - - - - - - - - NOOP"},
    {"ab_failure_breaker_record_success", "breaker", A_PTR, O_FAILURE, call_failure_record_success,
     0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_record_failure", "breaker", A_PTR, O_FAILURE, call_failure_record_failure,
     0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_record_failure", "error", A_TEXT, O_FAILURE, call_failure_record_failure,
     1, NULL, "- - - - - - - - OK/cut_to_4096_bytes ARG NULL"},
    {"ab_failure_breaker_should_allow_operation", "breaker", A_PTR, O_FAILURE,
     call_failure_should_allow, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_should_allow_operation", "out_json", A_PTR, O_FAILURE,
     call_failure_should_allow, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_try_acquire", "breaker", A_PTR, O_FAILURE, call_failure_try_acquire, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_call", "breaker", A_PTR, O_FAILURE, call_failure_call, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_call", "operation", A_PTR, O_FAILURE, call_failure_call, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_call", "user_data", A_PTR, O_FAILURE, call_failure_call, 2, NULL, "- - - - - - - - - - OK/passed_on"},
    {"ab_failure_breaker_call", "out_ok", A_PTR, O_FAILURE, call_failure_call, 3, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_call", "the operation's error text", A_TEXT, O_FAILURE, call_failure_call,
     4, NULL, "- - - - - - - - OK/cut_to_4096_bytes OK/U+FFFD_replacements OK/success"},
    {"ab_failure_breaker_state", "breaker", A_PTR, O_FAILURE, call_failure_state, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_state", "out_state", A_PTR, O_FAILURE, call_failure_state, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_get_status", "breaker", A_PTR, O_FAILURE, call_failure_get_status, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_get_status", "out_json", A_PTR, O_FAILURE, call_failure_get_status, 1,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_metrics", "breaker", A_PTR, O_FAILURE, call_failure_metrics, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_metrics", "out_json", A_PTR, O_FAILURE, call_failure_metrics, 1, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_reset", "breaker", A_PTR, O_FAILURE, call_failure_reset, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_snapshot", "breaker", A_PTR, O_FAILURE, call_failure_snapshot, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_snapshot", "out_json", A_PTR, O_FAILURE, call_failure_snapshot, 1, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_restore", "breaker", A_PTR, O_FAILURE, call_failure_restore, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_restore", "snapshot_json", A_JSON, O_FAILURE, call_failure_restore, 1,
     FAILURE_SNAPSHOT("\"consecutiveFailures\": 1, \"openedAt\": null, \"backoffLevel\": 0, "
                      "\"trips\": 0, \"failureHistory\": []"),
     "SNAP SNAP - - - - - - OK ARG NULL"},
    {"ab_failure_breaker_restore", "snapshot_json.version", F_INT, O_FAILURE, call_failure_restore,
     1,
     "{\"version\": %s, \"kind\": \"failure\", \"state\": \"CLOSED\", \"consecutiveFailures\": 0, "
     "\"openedAt\": null, \"backoffLevel\": 0, \"trips\": 0, \"failureHistory\": []}",
     "SNAP SNAP SNAP SNAP SNAP SNAP SNAP SNAP SNAP - -"},
    {"ab_failure_breaker_restore", "snapshot_json.kind", F_STR, O_FAILURE, call_failure_restore, 1,
     "{\"version\": 1, \"kind\": %s, \"state\": \"CLOSED\", \"consecutiveFailures\": 0, "
     "\"openedAt\": null, \"backoffLevel\": 0, \"trips\": 0, \"failureHistory\": []}",
     "SNAP SNAP - - - - - - SNAP ARG -"},
    {"ab_failure_breaker_restore", "snapshot_json.state", F_STR, O_FAILURE, call_failure_restore,
     1,
     "{\"version\": 1, \"kind\": \"failure\", \"state\": %s, \"consecutiveFailures\": 0, "
     "\"openedAt\": null, \"backoffLevel\": 0, \"trips\": 0, \"failureHistory\": []}",
     "SNAP SNAP - - - - - - SNAP ARG -"},
    {"ab_failure_breaker_restore", "snapshot_json.consecutiveFailures", F_INT, O_FAILURE,
     call_failure_restore, 1,
     FAILURE_SNAPSHOT("\"consecutiveFailures\": %s, \"openedAt\": null, \"backoffLevel\": 0, "
                      "\"trips\": 0, \"failureHistory\": []"),
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_failure_breaker_restore", "snapshot_json.openedAt", F_INT, O_FAILURE,
     call_failure_restore, 1,
     "{\"version\": 1, \"kind\": \"failure\", \"state\": \"OPEN\", \"consecutiveFailures\": 2, "
     "\"openedAt\": %s, \"backoffLevel\": 0, \"trips\": 1, \"failureHistory\": []}",
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_failure_breaker_restore", "snapshot_json.backoffLevel", F_INT, O_FAILURE,
     call_failure_restore, 1,
     "{\"version\": 1, \"kind\": \"failure\", \"state\": \"OPEN\", \"consecutiveFailures\": 2, "
     "\"openedAt\": 0, \"backoffLevel\": %s, \"trips\": 1, \"failureHistory\": []}",
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_failure_breaker_restore", "snapshot_json.trips", F_INT, O_FAILURE, call_failure_restore,
     1,
     FAILURE_SNAPSHOT("\"consecutiveFailures\": 0, \"openedAt\": null, \"backoffLevel\": 0, "
                      "\"trips\": %s, \"failureHistory\": []"),
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_failure_breaker_restore", "snapshot_json.failureHistory", F_ARR, O_FAILURE,
     call_failure_restore, 1,
     FAILURE_SNAPSHOT("\"consecutiveFailures\": 0, \"openedAt\": null, \"backoffLevel\": 0, "
                      "\"trips\": 0, \"failureHistory\": %s"),
     "SNAP SNAP - - - - - - SNAP - -"},
    {"ab_failure_breaker_restore", "snapshot_json.failureHistory[].atMs", F_INT, O_FAILURE,
     call_failure_restore, 1,
     FAILURE_SNAPSHOT("\"consecutiveFailures\": 1, \"openedAt\": null, \"backoffLevel\": 0, "
                      "\"trips\": 0, \"failureHistory\": [{\"atMs\": %s, \"error\": \"x\", "
                      "\"state\": \"CLOSED\"}]"),
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_failure_breaker_restore", "snapshot_json.failureHistory[].error", F_STR, O_FAILURE,
     call_failure_restore, 1,
     FAILURE_SNAPSHOT("\"consecutiveFailures\": 1, \"openedAt\": null, \"backoffLevel\": 0, "
                      "\"trips\": 0, \"failureHistory\": [{\"atMs\": 0, \"error\": %s, "
                      "\"state\": \"CLOSED\"}]"),
     "SNAP SNAP - - - - - - OK/cut_to_4096_bytes ARG -"},
    {"ab_failure_breaker_save", "breaker", A_PTR, O_FAILURE, call_failure_save, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_save", "path", A_TEXT, O_FAILURE, call_failure_save, 1, NULL, "- - - - - - - - IO ARG NULL"},
    {"ab_failure_breaker_load", "breaker", A_PTR, O_FAILURE, call_failure_load, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_load", "path", A_TEXT, O_FAILURE, call_failure_load, 1, NULL, "- - - - - - - - IO ARG NULL"},
    {"ab_failure_breaker_load", "out_loaded", A_PTR, O_FAILURE, call_failure_load, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_add_listener", "breaker", A_PTR, O_FAILURE, call_failure_add_listener, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_add_listener", "listener", A_PTR, O_FAILURE, call_failure_add_listener, 1,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_add_listener", "user_data", A_PTR, O_FAILURE, call_failure_add_listener,
     2, NULL, "- - - - - - - - - - OK/passed_on"},
    {"ab_failure_breaker_add_listener", "out_id", A_PTR, O_FAILURE, call_failure_add_listener, 3,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_remove_listener", "breaker", A_PTR, O_FAILURE,
     call_failure_remove_listener, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_failure_breaker_remove_listener", "id", A_U64, O_FAILURE, call_failure_remove_listener, 1,
     NULL, "- - - - - OK/none_removed OK/none_removed OK/none_removed - - -"},
    {"ab_failure_breaker_remove_listener", "out_removed", A_PTR, O_FAILURE,
     call_failure_remove_listener, 2, NULL, "- - - - - - - - - - NULL"},

    /* StagnationBreaker */
    {"ab_stagnation_breaker_new", "config_json", A_JSON, O_NONE, call_stagnation_new, 0,
     "{\"noProgressThreshold\": 3}", "CFG OK/defaults - - - - - - OK ARG OK/defaults"},
    {"ab_stagnation_breaker_new", "config_json.noProgressThreshold", F_INT, O_NONE,
     call_stagnation_new, 0, "{\"noProgressThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.sameErrorThreshold", F_INT, O_NONE,
     call_stagnation_new, 0, "{\"sameErrorThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.outputDeclineThreshold", F_INT, O_NONE,
     call_stagnation_new, 0, "{\"outputDeclineThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.errorMatch", F_STR, O_NONE, call_stagnation_new, 0,
     "{\"errorMatch\": %s}", "CFG OK/default - - - - - - CFG ARG -"},
    {"ab_stagnation_breaker_new", "config_json.repeatThreshold", F_INT, O_NONE,
     call_stagnation_new, 0, "{\"repeatThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.cycleRepeats", F_INT, O_NONE, call_stagnation_new,
     0, "{\"cycleRepeats\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.maxCycleLength", F_INT, O_NONE, call_stagnation_new,
     0, "{\"maxCycleLength\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.failStreakThreshold", F_INT, O_NONE,
     call_stagnation_new, 0, "{\"failStreakThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.failStreakDistinct", F_INT, O_NONE,
     call_stagnation_new, 0, "{\"failStreakDistinct\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.failWindow", F_INT, O_NONE, call_stagnation_new, 0,
     "{\"failWindow\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_stagnation_breaker_new", "config_json.failWindowPercent", F_INT, O_NONE,
     call_stagnation_new, 0, "{\"failWindowPercent\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_stagnation_breaker_new", "clock", A_PTR, O_NONE, call_stagnation_new, 1, NULL, "- - - - - - - - - - OK/system_clock"},
    {"ab_stagnation_breaker_new", "out_breaker", A_PTR, O_NONE, call_stagnation_new, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_free", "breaker", A_PTR, O_NONE, call_stagnation_free, 0, NULL, "- - - - - - - - - - NOOP"},
    {"ab_stagnation_breaker_record_progress", "breaker", A_PTR, O_STAGNATION,
     call_stagnation_record_progress, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_record_progress", "metrics_json", A_JSON, O_STAGNATION,
     call_stagnation_record_progress, 1, "{\"filesChanged\": 1}", "ARG ARG - - - - - - OK ARG NULL"},
    {"ab_stagnation_breaker_record_progress", "metrics_json.filesChanged", F_INT, O_STAGNATION,
     call_stagnation_record_progress, 1, "{\"filesChanged\": %s}", "ARG OK/default ARG ARG ARG ARG OK ARG ARG - -"},
    {"ab_stagnation_breaker_record_progress", "metrics_json.testsPassing", F_INT, O_STAGNATION,
     call_stagnation_record_progress, 1, "{\"testsPassing\": %s}", "ARG OK/default ARG ARG ARG ARG OK ARG ARG - -"},
    {"ab_stagnation_breaker_record_progress", "metrics_json.outputLength", F_INT, O_STAGNATION,
     call_stagnation_record_progress, 1, "{\"outputLength\": %s}", "ARG OK/default ARG ARG ARG ARG OK ARG ARG - -"},
    {"ab_stagnation_breaker_record_error", "breaker", A_PTR, O_STAGNATION,
     call_stagnation_record_error, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_record_error", "error", A_TEXT, O_STAGNATION,
     call_stagnation_record_error, 1, NULL, "- - - - - - - - OK/cut_to_4096_bytes ARG NULL"},
    {"ab_stagnation_breaker_record_error", "transient", A_BOOL, O_STAGNATION,
     call_stagnation_record_error, 2, NULL, "- - - - - - - - - - -"},
    {"ab_stagnation_breaker_record_step", "breaker", A_PTR, O_STAGNATION,
     call_stagnation_record_step, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_record_step", "step_json", A_JSON, O_STAGNATION,
     call_stagnation_record_step, 1, "{\"action\": \"ls\", \"result\": \"ok\"}", "ARG ARG - - - - - - OK ARG NULL"},
    {"ab_stagnation_breaker_record_step", "step_json.action", F_STR, O_STAGNATION,
     call_stagnation_record_step, 1, "{\"action\": %s}", "ARG ARG - - - - - - OK ARG -"},
    {"ab_stagnation_breaker_record_step", "step_json.result", F_STR, O_STAGNATION,
     call_stagnation_record_step, 1, "{\"action\": \"ls\", \"result\": %s}", "ARG OK/default - - - - - - OK ARG -"},
    {"ab_stagnation_breaker_record_step", "step_json.failed", F_BOOL, O_STAGNATION,
     call_stagnation_record_step, 1, "{\"action\": \"ls\", \"failed\": %s}", "ARG OK/default - - - - - - ARG - -"},
    {"ab_stagnation_breaker_check", "breaker", A_PTR, O_STAGNATION, call_stagnation_check, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_check", "out_json", A_PTR, O_STAGNATION, call_stagnation_check, 1,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_state", "breaker", A_PTR, O_STAGNATION, call_stagnation_state, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_state", "out_state", A_PTR, O_STAGNATION, call_stagnation_state, 1,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_get_status", "breaker", A_PTR, O_STAGNATION,
     call_stagnation_get_status, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_get_status", "out_json", A_PTR, O_STAGNATION,
     call_stagnation_get_status, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_reset", "breaker", A_PTR, O_STAGNATION, call_stagnation_reset, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_snapshot", "breaker", A_PTR, O_STAGNATION, call_stagnation_snapshot, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_snapshot", "out_json", A_PTR, O_STAGNATION, call_stagnation_snapshot,
     1, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_restore", "breaker", A_PTR, O_STAGNATION, call_stagnation_restore, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_restore", "snapshot_json", A_JSON, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 1, \"errorCounts\": {\"e\": 1}, \"outputTrend\": [5], "
     "\"lastProgress\": null, \"baselineOutputs\": [5], \"bestTestsPassing\": 0, "
     "\"reason\": null}",
     "SNAP SNAP - - - - - - OK ARG NULL"},
    {"ab_stagnation_breaker_restore", "snapshot_json.consecutiveNoProgress", F_INT, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": %s, \"errorCounts\": {}, \"outputTrend\": [], "
     "\"lastProgress\": null, \"baselineOutputs\": [], \"bestTestsPassing\": 0, \"reason\": null}",
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.errorCounts", F_OBJ, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": %s, \"outputTrend\": [], "
     "\"lastProgress\": null, \"baselineOutputs\": [], \"bestTestsPassing\": 0, \"reason\": null}",
     "SNAP SNAP - - - - - - SNAP - -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.errorCounts.<key> (the key)", F_STR,
     O_STAGNATION, call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": {%s: 1}, \"outputTrend\": [], "
     "\"lastProgress\": null, \"baselineOutputs\": [], \"bestTestsPassing\": 0, \"reason\": null}",
     "SNAP SNAP - - - - - - OK/cut_to_4096_bytes ARG -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.errorCounts.<key> (the count)", F_INT, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": {\"E\": %s}, \"outputTrend\": [], "
     "\"lastProgress\": null, \"baselineOutputs\": [], \"bestTestsPassing\": 0, \"reason\": null}",
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.outputTrend[]", F_INT, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": {}, \"outputTrend\": [%s], "
     "\"lastProgress\": null, \"baselineOutputs\": [], \"bestTestsPassing\": 0, \"reason\": null}",
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.lastProgress", F_INT, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": {}, \"outputTrend\": [], "
     "\"lastProgress\": %s, \"baselineOutputs\": [], \"bestTestsPassing\": 0, \"reason\": null}",
     "SNAP OK/none SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.baselineOutputs[]", F_INT, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": {}, \"outputTrend\": [], "
     "\"lastProgress\": null, \"baselineOutputs\": [%s], \"bestTestsPassing\": 0, "
     "\"reason\": null}",
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.bestTestsPassing", F_INT, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"CLOSED\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": {}, \"outputTrend\": [], "
     "\"lastProgress\": null, \"baselineOutputs\": [], \"bestTestsPassing\": %s, "
     "\"reason\": null}",
     "SNAP SNAP SNAP SNAP SNAP SNAP OK SNAP SNAP - -"},
    {"ab_stagnation_breaker_restore", "snapshot_json.reason", F_STR, O_STAGNATION,
     call_stagnation_restore, 1,
     "{\"version\": 1, \"kind\": \"stagnation\", \"state\": \"OPEN\", "
     "\"consecutiveNoProgress\": 0, \"errorCounts\": {}, \"outputTrend\": [], "
     "\"lastProgress\": null, \"baselineOutputs\": [], \"bestTestsPassing\": 0, \"reason\": %s}",
     "SNAP OK/none - - - - - - OK ARG -"},
    {"ab_stagnation_breaker_add_listener", "breaker", A_PTR, O_STAGNATION,
     call_stagnation_add_listener, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_add_listener", "listener", A_PTR, O_STAGNATION,
     call_stagnation_add_listener, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_add_listener", "user_data", A_PTR, O_STAGNATION,
     call_stagnation_add_listener, 2, NULL, "- - - - - - - - - - OK/passed_on"},
    {"ab_stagnation_breaker_add_listener", "out_id", A_PTR, O_STAGNATION,
     call_stagnation_add_listener, 3, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_remove_listener", "breaker", A_PTR, O_STAGNATION,
     call_stagnation_remove_listener, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_stagnation_breaker_remove_listener", "id", A_U64, O_STAGNATION,
     call_stagnation_remove_listener, 1, NULL, "- - - - - OK/none_removed OK/none_removed OK/none_removed - - -"},
    {"ab_stagnation_breaker_remove_listener", "out_removed", A_PTR, O_STAGNATION,
     call_stagnation_remove_listener, 2, NULL, "- - - - - - - - - - NULL"},

    /* BudgetBreaker */
    {"ab_budget_breaker_new", "config_json", A_JSON, O_NONE, call_budget_new, 0,
     "{\"maxToolCallsPerTask\": 3}", "CFG OK/defaults - - - - - - OK ARG OK/defaults"},
    {"ab_budget_breaker_new", "config_json.maxToolCallsPerTask", F_INT, O_NONE, call_budget_new, 0,
     "{\"maxToolCallsPerTask\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.maxTokenSpendCentsPerTask", F_INT, O_NONE,
     call_budget_new, 0, "{\"maxTokenSpendCentsPerTask\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.maxTaskDurationSecs", F_INT, O_NONE, call_budget_new, 0,
     "{\"maxTaskDurationSecs\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.maxIdleSecs", F_INT, O_NONE, call_budget_new, 0,
     "{\"maxIdleSecs\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.similarityJaccardThreshold", F_FLOAT, O_NONE,
     call_budget_new, 0, "{\"similarityJaccardThreshold\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.loopWindow", F_INT, O_NONE, call_budget_new, 0,
     "{\"loopWindow\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.maxTokensPerOutput", F_INT, O_NONE, call_budget_new, 0,
     "{\"maxTokensPerOutput\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.prices", F_OBJ, O_NONE, call_budget_new, 0,
     "{\"prices\": %s}", "CFG OK/default - - - - - - CFG - -"},
    {"ab_budget_breaker_new", "config_json.prices.<model>", F_OBJ, O_NONE, call_budget_new, 0,
     "{\"prices\": {\"claude\": %s}}", "CFG CFG - - - - - - CFG - -"},
    {"ab_budget_breaker_new", "config_json.prices.<model>.input", F_FLOAT, O_NONE, call_budget_new,
     0, "{\"prices\": {\"*\": {\"input\": %s, \"output\": 1, \"cacheWrite\": 1, \"cacheRead\": 1}}}",
     "CFG CFG CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.prices.<model>.output", F_FLOAT, O_NONE,
     call_budget_new, 0,
     "{\"prices\": {\"*\": {\"input\": 1, \"output\": %s, \"cacheWrite\": 1, \"cacheRead\": 1}}}",
     "CFG CFG CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.prices.<model>.cacheWrite", F_FLOAT, O_NONE,
     call_budget_new, 0,
     "{\"prices\": {\"*\": {\"input\": 1, \"output\": 1, \"cacheWrite\": %s, \"cacheRead\": 1}}}",
     "CFG CFG CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_budget_breaker_new", "config_json.prices.<model>.cacheRead", F_FLOAT, O_NONE,
     call_budget_new, 0,
     "{\"prices\": {\"*\": {\"input\": 1, \"output\": 1, \"cacheWrite\": 1, \"cacheRead\": %s}}}",
     "CFG CFG CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_budget_breaker_new", "clock", A_PTR, O_NONE, call_budget_new, 1, NULL, "- - - - - - - - - - OK/system_clock"},
    {"ab_budget_breaker_new", "out_breaker", A_PTR, O_NONE, call_budget_new, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_new_from_env", "env_json", A_JSON, O_NONE, call_budget_new_from_env, 0,
     "{\"AGENTBREAKER_TOOL_CAP\": \"20\"}", "ARG ARG - - - - - - OK/no_warning ARG OK/process_environment"},
    {"ab_budget_breaker_new_from_env", "env_json.AGENTBREAKER_TOOL_CAP", F_ENV, O_NONE,
     call_budget_new_from_env, 0, "{\"AGENTBREAKER_TOOL_CAP\": %s}", "ARG ARG OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned ARG -"},
    {"ab_budget_breaker_new_from_env", "clock", A_PTR, O_NONE, call_budget_new_from_env, 1, NULL,
     "- - - - - - - - - - OK/system_clock"},
    {"ab_budget_breaker_new_from_env", "out_breaker", A_PTR, O_NONE, call_budget_new_from_env, 2,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_new_from_env", "out_warnings_json", A_PTR, O_NONE,
     call_budget_new_from_env, 3, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_free", "breaker", A_PTR, O_NONE, call_budget_free, 0, NULL, "- - - - - - - - - - NOOP"},
    {"ab_budget_breaker_ingest", "breaker", A_PTR, O_BUDGET, call_budget_ingest, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_ingest", "event_json", A_JSON, O_BUDGET, call_budget_ingest, 1, TOOL_USE,
     "EVT EVT - - - - - - OK ARG NULL"},
    {"ab_budget_breaker_ingest", "event_json.type", F_STR, O_BUDGET, call_budget_ingest, 1,
     "{\"type\": %s}", "EVT EVT - - - - - - OK/ignored_(unknown_type) ARG -"},
    {"ab_budget_breaker_ingest", "event_json.taskId", F_STR, O_BUDGET, call_budget_ingest, 1,
     "{\"type\": \"tool_use\", \"name\": \"grep\", \"taskId\": %s}", "EVT OK/no_task - - - - - - EVT/over_256_bytes ARG -"},
    {"ab_budget_breaker_ingest", "event_json.phase (heartbeat)", F_STR, O_BUDGET,
     call_budget_ingest, 1, "{\"type\": \"heartbeat\", \"taskId\": \"t1\", \"phase\": %s}", "EVT EVT - - - - - - EVT ARG -"},
    {"ab_budget_breaker_ingest", "event_json.name (tool_use)", F_STR, O_BUDGET, call_budget_ingest,
     1, "{\"type\": \"tool_use\", \"name\": %s}", "EVT EVT - - - - - - OK ARG -"},
    {"ab_budget_breaker_ingest", "event_json.input (tool_use)", F_ANY, O_BUDGET,
     call_budget_ingest, 1, "{\"type\": \"tool_use\", \"name\": \"grep\", \"input\": %s}", "- OK/default - - - - - - OK ARG -"},
    {"ab_budget_breaker_ingest", "event_json.text (assistant)", F_STR, O_BUDGET,
     call_budget_ingest, 1, "{\"type\": \"assistant\", \"text\": %s}", "EVT EVT - - - - - - OK ARG -"},
    {"ab_budget_breaker_ingest", "event_json.model (usage)", F_STR, O_BUDGET, call_budget_ingest,
     1, "{\"type\": \"usage\", \"model\": %s, \"usage\": {\"input_tokens\": 10}}", "EVT OK/default - - - - - - OK ARG -"},
    {"ab_budget_breaker_ingest", "event_json.usage (usage)", F_OBJ, O_BUDGET, call_budget_ingest,
     1, "{\"type\": \"usage\", \"usage\": %s}", "EVT EVT - - - - - - EVT - -"},
    {"ab_budget_breaker_ingest", "event_json.usage.input_tokens", F_INT, O_BUDGET,
     call_budget_ingest, 1, "{\"type\": \"usage\", \"usage\": {\"input_tokens\": %s}}", "EVT OK/default EVT EVT EVT EVT OK EVT EVT - -"},
    {"ab_budget_breaker_ingest", "event_json.usage.output_tokens", F_INT, O_BUDGET,
     call_budget_ingest, 1, "{\"type\": \"usage\", \"usage\": {\"output_tokens\": %s}}", "EVT OK/default EVT EVT EVT EVT OK EVT EVT - -"},
    {"ab_budget_breaker_ingest", "event_json.usage.cache_creation_input_tokens", F_INT, O_BUDGET,
     call_budget_ingest, 1,
     "{\"type\": \"usage\", \"usage\": {\"cache_creation_input_tokens\": %s}}", "EVT OK/default EVT EVT EVT EVT OK EVT EVT - -"},
    {"ab_budget_breaker_ingest", "event_json.usage.cache_read_input_tokens", F_INT, O_BUDGET,
     call_budget_ingest, 1, "{\"type\": \"usage\", \"usage\": {\"cache_read_input_tokens\": %s}}",
     "EVT OK/default EVT EVT EVT EVT OK EVT EVT - -"},
    {"ab_budget_breaker_ingest", "out_halt_json", A_PTR, O_BUDGET, call_budget_ingest, 2, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_tick", "breaker", A_PTR, O_BUDGET, call_budget_tick, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_tick", "out_json", A_PTR, O_BUDGET, call_budget_tick, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_snapshot", "breaker", A_PTR, O_BUDGET, call_budget_snapshot, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_snapshot", "out_json", A_PTR, O_BUDGET, call_budget_snapshot, 1, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_reset", "breaker", A_PTR, O_BUDGET, call_budget_reset, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_add_listener", "breaker", A_PTR, O_BUDGET, call_budget_add_listener, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_add_listener", "listener", A_PTR, O_BUDGET, call_budget_add_listener, 1,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_add_listener", "user_data", A_PTR, O_BUDGET, call_budget_add_listener, 2,
     NULL, "- - - - - - - - - - OK/passed_on"},
    {"ab_budget_breaker_add_listener", "out_id", A_PTR, O_BUDGET, call_budget_add_listener, 3,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_remove_listener", "breaker", A_PTR, O_BUDGET, call_budget_remove_listener,
     0, NULL, "- - - - - - - - - - NULL"},
    {"ab_budget_breaker_remove_listener", "id", A_U64, O_BUDGET, call_budget_remove_listener, 1,
     NULL, "- - - - - OK/none_removed OK/none_removed OK/none_removed - - -"},
    {"ab_budget_breaker_remove_listener", "out_removed", A_PTR, O_BUDGET,
     call_budget_remove_listener, 2, NULL, "- - - - - - - - - - NULL"},

    /* Configuration from the environment */
    {"ab_config_from_env", "env_json", A_JSON, O_NONE, call_config_from_env, 0,
     "{\"AGENTBREAKER_TOOL_CAP\": \"20\"}", "ARG ARG - - - - - - OK/no_warning ARG OK/process_environment"},
    {"ab_config_from_env", "env_json.AGENTBREAKER_TOOL_CAP", F_ENV, O_NONE, call_config_from_env,
     0, "{\"AGENTBREAKER_TOOL_CAP\": %s}", "ARG ARG OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned ARG -"},
    {"ab_config_from_env", "env_json.AGENTBREAKER_COST_CAP_CENTS", F_ENV, O_NONE,
     call_config_from_env, 0, "{\"AGENTBREAKER_COST_CAP_CENTS\": %s}", "ARG ARG OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned ARG -"},
    {"ab_config_from_env", "env_json.AGENTBREAKER_DURATION_SECS", F_ENV, O_NONE,
     call_config_from_env, 0, "{\"AGENTBREAKER_DURATION_SECS\": %s}", "ARG ARG OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned ARG -"},
    {"ab_config_from_env", "env_json.AGENTBREAKER_IDLE_SECS", F_ENV, O_NONE, call_config_from_env,
     0, "{\"AGENTBREAKER_IDLE_SECS\": %s}", "ARG ARG OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned ARG -"},
    {"ab_config_from_env", "env_json.AGENTBREAKER_JACCARD", F_ENVF, O_NONE, call_config_from_env,
     0, "{\"AGENTBREAKER_JACCARD\": %s}", "ARG ARG OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned ARG -"},
    {"ab_config_from_env", "env_json.BB_CIRCUIT_BREAKER_IDLE_SECS", F_ENV, O_NONE,
     call_config_from_env, 0, "{\"BB_CIRCUIT_BREAKER_IDLE_SECS\": %s}", "ARG ARG OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned OK/warned ARG -"},
    {"ab_config_from_env", "env_json.<another variable>", F_ENV, O_NONE, call_config_from_env, 0,
     "{\"HOME\": %s}", "ARG ARG OK/no_warning OK/no_warning OK/no_warning OK/no_warning OK/no_warning OK/no_warning OK/no_warning ARG -"},
    {"ab_config_from_env", "out_json", A_PTR, O_NONE, call_config_from_env, 1, NULL, "- - - - - - - - - - NULL"},

    /* Analyzer */
    {"ab_analyze", "text", A_TEXT, O_NONE, call_analyze, 0, NULL, "- - - - - - - - OK ARG NULL"},
    {"ab_analyze", "out_json", A_PTR, O_NONE, call_analyze, 1, NULL, "- - - - - - - - - - NULL"},

    /* Exit strategies */
    {"ab_exit_strategy_new", "config_json", A_JSON, O_NONE, call_strategy_new, 0,
     "{\"type\": \"auto\"}", "CFG OK/auto - - - - - - OK ARG OK/auto"},
    {"ab_exit_strategy_new", "config_json.type", F_STR, O_NONE, call_strategy_new, 0,
     "{\"type\": %s}", "CFG CFG - - - - - - CFG ARG -"},
    {"ab_exit_strategy_new", "config_json.threshold (auto)", F_INT, O_NONE, call_strategy_new, 0,
     "{\"type\": \"auto\", \"threshold\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_exit_strategy_new", "config_json.threshold (done_signals)", F_INT, O_NONE,
     call_strategy_new, 0, "{\"type\": \"done_signals\", \"threshold\": %s}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_exit_strategy_new", "config_json.window (done_signals)", F_INT, O_NONE, call_strategy_new,
     0, "{\"type\": \"done_signals\", \"window\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_exit_strategy_new", "config_json.steps (fix_plan)", F_ARR, O_NONE, call_strategy_new, 0,
     "{\"type\": \"fix_plan\", \"steps\": %s}", "CFG CFG - - - - - - CFG - -"},
    {"ab_exit_strategy_new", "config_json.steps[].description", F_STR, O_NONE, call_strategy_new,
     0, "{\"type\": \"fix_plan\", \"steps\": [{\"description\": %s}]}", "CFG CFG - - - - - - OK/cut_to_4096_bytes ARG -"},
    {"ab_exit_strategy_new", "config_json.steps[].completed", F_BOOL, O_NONE, call_strategy_new, 0,
     "{\"type\": \"fix_plan\", \"steps\": [{\"description\": \"a\", \"completed\": %s}]}", "CFG OK/default - - - - - - CFG - -"},
    {"ab_exit_strategy_new", "config_json.steps[].attempts", F_INT, O_NONE, call_strategy_new, 0,
     "{\"type\": \"fix_plan\", \"steps\": [{\"description\": \"a\", \"attempts\": %s}]}", "CFG OK/default CFG CFG CFG CFG OK CFG CFG - -"},
    {"ab_exit_strategy_new", "config_json.steps[].maxAttempts", F_INT, O_NONE, call_strategy_new,
     0, "{\"type\": \"fix_plan\", \"steps\": [{\"description\": \"a\", \"maxAttempts\": %s}]}",
     "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_exit_strategy_new", "config_json.markdown (fix_plan)", F_STR, O_NONE, call_strategy_new,
     0, "{\"type\": \"fix_plan\", \"markdown\": %s}", "CFG CFG - - - - - - OK/no_steps ARG -"},
    {"ab_exit_strategy_new", "config_json.maxAttempts (fix_plan)", F_INT, O_NONE,
     call_strategy_new, 0, "{\"type\": \"fix_plan\", \"markdown\": \"- [ ] a\", \"maxAttempts\": %s}",
     "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_exit_strategy_new", "config_json.mode (composite)", F_STR, O_NONE, call_strategy_new, 0,
     "{\"type\": \"composite\", \"mode\": %s, \"members\": [{\"type\": \"auto\"}]}", "CFG OK/default - - - - - - CFG ARG -"},
    {"ab_exit_strategy_new", "config_json.members (composite)", F_ARR, O_NONE, call_strategy_new,
     0, "{\"type\": \"composite\", \"members\": %s}", "CFG CFG - - - - - - CFG - -"},
    {"ab_exit_strategy_new", "config_json.members[] (composite)", F_OBJ, O_NONE, call_strategy_new,
     0, "{\"type\": \"composite\", \"members\": [%s]}", "CFG CFG - - - - - - CFG - -"},
    {"ab_exit_strategy_new", "clock", A_PTR, O_NONE, call_strategy_new, 1, NULL, "- - - - - - - - - - OK/system_clock"},
    {"ab_exit_strategy_new", "out_strategy", A_PTR, O_NONE, call_strategy_new, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_new_fix_plan", "config_json", A_JSON, O_NONE, call_strategy_new_fix_plan, 0,
     "{\"steps\": [{\"description\": \"a\"}]}", "CFG CFG - - - - - - OK ARG CFG"},
    {"ab_exit_strategy_new_fix_plan", "config_json.steps", F_ARR, O_NONE,
     call_strategy_new_fix_plan, 0, "{\"steps\": %s}", "CFG CFG - - - - - - CFG - -"},
    {"ab_exit_strategy_new_fix_plan", "config_json.markdown", F_STR, O_NONE,
     call_strategy_new_fix_plan, 0, "{\"markdown\": %s}", "CFG CFG - - - - - - OK/no_steps ARG -"},
    {"ab_exit_strategy_new_fix_plan", "config_json.maxAttempts", F_INT, O_NONE,
     call_strategy_new_fix_plan, 0, "{\"markdown\": \"- [ ] a\", \"maxAttempts\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_exit_strategy_new_fix_plan", "clock", A_PTR, O_NONE, call_strategy_new_fix_plan, 1, NULL,
     "- - - - - - - - - - OK/system_clock"},
    {"ab_exit_strategy_new_fix_plan", "out_strategy", A_PTR, O_NONE, call_strategy_new_fix_plan, 2,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_new_fix_plan_markdown", "markdown", A_TEXT, O_NONE,
     call_strategy_new_fix_plan_markdown, 0, NULL, "- - - - - - - - OK/no_steps ARG NULL"},
    {"ab_exit_strategy_new_fix_plan_markdown", "clock", A_PTR, O_NONE,
     call_strategy_new_fix_plan_markdown, 1, NULL, "- - - - - - - - - - OK/system_clock"},
    {"ab_exit_strategy_new_fix_plan_markdown", "out_strategy", A_PTR, O_NONE,
     call_strategy_new_fix_plan_markdown, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_free", "strategy", A_PTR, O_NONE, call_strategy_free, 0, NULL, "- - - - - - - - - - NOOP"},
    {"ab_exit_strategy_should_exit", "strategy", A_PTR, O_STRATEGY, call_strategy_should_exit, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_should_exit", "response_text", A_TEXT, O_STRATEGY,
     call_strategy_should_exit, 1, NULL, "- - - - - - - - OK ARG NULL"},
    {"ab_exit_strategy_should_exit", "circuit_state", A_TEXT, O_STRATEGY,
     call_strategy_should_exit, 2, NULL, "- - - - - - - - ARG ARG OK/CLOSED"},
    {"ab_exit_strategy_should_exit", "out_json", A_PTR, O_STRATEGY, call_strategy_should_exit, 3,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_plan_status", "strategy", A_PTR, O_PLAN, call_strategy_plan_status, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_plan_status", "out_json", A_PTR, O_PLAN, call_strategy_plan_status, 1, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_reset", "strategy", A_PTR, O_PLAN, call_strategy_reset, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_add_listener", "strategy", A_PTR, O_PLAN, call_strategy_add_listener, 0,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_add_listener", "listener", A_PTR, O_PLAN, call_strategy_add_listener, 1,
     NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_add_listener", "user_data", A_PTR, O_PLAN, call_strategy_add_listener, 2,
     NULL, "- - - - - - - - - - OK/passed_on"},
    {"ab_exit_strategy_add_listener", "out_id", A_PTR, O_PLAN, call_strategy_add_listener, 3, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_remove_listener", "strategy", A_PTR, O_PLAN, call_strategy_remove_listener,
     0, NULL, "- - - - - - - - - - NULL"},
    {"ab_exit_strategy_remove_listener", "id", A_U64, O_PLAN, call_strategy_remove_listener, 1,
     NULL, "- - - - - OK/none_removed OK/none_removed OK/none_removed - - -"},
    {"ab_exit_strategy_remove_listener", "out_removed", A_PTR, O_PLAN,
     call_strategy_remove_listener, 2, NULL, "- - - - - - - - - - NULL"},

    /* Loop */
    {"ab_loop_new", "config_json", A_JSON, O_NONE, call_loop_new, 0, "{\"maxIterations\": 5}",
     "CFG OK/defaults - - - - - - OK ARG OK/defaults"},
    {"ab_loop_new", "config_json.maxIterations", F_INT, O_NONE, call_loop_new, 0,
     "{\"maxIterations\": %s}", "CFG OK/default CFG CFG CFG CFG CFG CFG CFG - -"},
    {"ab_loop_new", "config_json.strategy", F_OBJ, O_NONE, call_loop_new, 0, "{\"strategy\": %s}",
     "CFG OK/default - - - - - - CFG - -"},
    {"ab_loop_new", "config_json.stagnation", F_OBJ, O_NONE, call_loop_new, 0,
     "{\"stagnation\": %s}", "CFG OK/default - - - - - - CFG - -"},
    {"ab_loop_new", "config_json.budget", F_OBJ, O_NONE, call_loop_new, 0, "{\"budget\": %s}",
     "CFG OK/default - - - - - - CFG - -"},
    {"ab_loop_new", "clock", A_PTR, O_NONE, call_loop_new, 1, NULL, "- - - - - - - - - - OK/system_clock"},
    {"ab_loop_new", "out_loop", A_PTR, O_NONE, call_loop_new, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_free", "agent_loop", A_PTR, O_NONE, call_loop_free, 0, NULL, "- - - - - - - - - - NOOP"},
    {"ab_loop_observe", "agent_loop", A_PTR, O_LOOP, call_loop_observe, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_observe", "observation_json", A_JSON, O_LOOP, call_loop_observe, 1,
     "{\"output\": \"working\", \"filesChanged\": 1}", "ARG ARG - - - - - - OK ARG NULL"},
    {"ab_loop_observe", "observation_json.output", F_STR, O_LOOP, call_loop_observe, 1,
     "{\"output\": %s}", "ARG ARG - - - - - - OK ARG -"},
    {"ab_loop_observe", "observation_json.filesChanged", F_INT, O_LOOP, call_loop_observe, 1,
     "{\"output\": \"x\", \"filesChanged\": %s}", "ARG OK/default ARG ARG ARG ARG OK ARG ARG - -"},
    {"ab_loop_observe", "observation_json.testsPassing", F_INT, O_LOOP, call_loop_observe, 1,
     "{\"output\": \"x\", \"testsPassing\": %s}", "ARG OK/default ARG ARG ARG ARG OK ARG ARG - -"},
    {"ab_loop_observe", "observation_json.error", F_STR, O_LOOP, call_loop_observe, 1,
     "{\"output\": \"x\", \"error\": %s}", "ARG OK/default - - - - - - OK ARG -"},
    {"ab_loop_observe", "observation_json.events", F_ARR, O_LOOP, call_loop_observe, 1,
     "{\"output\": \"x\", \"events\": %s}", "ARG OK/default - - - - - - ARG - -"},
    {"ab_loop_observe", "observation_json.events[]", F_OBJ, O_LOOP, call_loop_observe, 1,
     "{\"output\": \"x\", \"events\": [%s]}", "EVT EVT - - - - - - EVT - -"},
    {"ab_loop_observe", "out_json", A_PTR, O_LOOP, call_loop_observe, 2, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_get_status", "agent_loop", A_PTR, O_LOOP, call_loop_get_status, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_get_status", "out_json", A_PTR, O_LOOP, call_loop_get_status, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_reset", "agent_loop", A_PTR, O_LOOP, call_loop_reset, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_add_listener", "agent_loop", A_PTR, O_LOOP, call_loop_add_listener, 0, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_add_listener", "listener", A_PTR, O_LOOP, call_loop_add_listener, 1, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_add_listener", "user_data", A_PTR, O_LOOP, call_loop_add_listener, 2, NULL, "- - - - - - - - - - OK/passed_on"},
    {"ab_loop_add_listener", "out_id", A_PTR, O_LOOP, call_loop_add_listener, 3, NULL, "- - - - - - - - - - NULL"},
    {"ab_loop_remove_listener", "agent_loop", A_PTR, O_LOOP, call_loop_remove_listener, 0, NULL,
     "- - - - - - - - - - NULL"},
    {"ab_loop_remove_listener", "id", A_U64, O_LOOP, call_loop_remove_listener, 1, NULL, "- - - - - OK/none_removed OK/none_removed OK/none_removed - - -"},
    {"ab_loop_remove_listener", "out_removed", A_PTR, O_LOOP, call_loop_remove_listener, 2, NULL,
     "- - - - - - - - - - NULL"},
};

#define ROW_COUNT (sizeof ROWS / sizeof ROWS[0])

/* ------------------------------------------------------------------------------------------ */
/* Making a case's value                                                                       */

/* The "10 MB string": 10 MiB, or what --big-bytes says (mk/c.mk uses 1 MiB under valgrind). */
static size_t big_bytes = (size_t)10 * 1024 * 1024;

static char *big;     /* big_bytes of 'a', built once */
static char *spaces;  /* big_bytes of ' ', built once */
static char *scratch; /* where a case's text is assembled */
static size_t scratch_size;

static const char BAD_UTF8[] = "bad \xff\xfe";

/* Writes template with its %s replaced by the concatenation of the parts into scratch. */
static const char *fill(const char *template_text, const char *a, const char *b, const char *c) {
    const char *hole = strstr(template_text, "%s");
    size_t before = hole != NULL ? (size_t)(hole - template_text) : strlen(template_text);
    const char *after = hole != NULL ? hole + 2 : "";
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c), lafter = strlen(after);
    size_t need = before + la + lb + lc + lafter + 1;
    if (need > scratch_size) {
        fprintf(stderr, "scratch buffer too small\n");
        exit(2);
    }
    char *p = scratch;
    memcpy(p, template_text, before);
    p += before;
    memcpy(p, a, la);
    p += la;
    memcpy(p, b, lb);
    p += lb;
    memcpy(p, c, lc);
    p += lc;
    memcpy(p, after, lafter + 1);
    return scratch;
}

static bool is_number_field(Kind kind) {
    return kind == F_INT || kind == F_FLOAT || kind == F_ENV || kind == F_ENVF;
}

/* The case's value, or false when the column does not apply to the row's kind. */
static bool make_value(const Row *row, int column, Value *v) {
    char number[64];
    memset(v, 0, sizeof *v);
    const char *t = row->json;
    bool env = row->kind == F_ENV || row->kind == F_ENVF;
    const char *quote = env ? "\"" : "";
    switch (row->kind) {
    case A_BOOL:
        return false;
    case A_PTR:
        v->null_ptr = column == COL_NULL_PTR;
        return v->null_ptr;
    case A_U64:
    case A_I32:
        switch (column) {
        case COL_NEGATIVE:
            v->number = row->kind == A_U64 ? (uint64_t)-1 : (uint64_t)(int64_t)-1;
            return true;
        case COL_ZERO:
            v->number = 0;
            return true;
        case COL_HUGE:
            v->number = row->kind == A_U64 ? UINT64_MAX : (uint64_t)INT32_MAX;
            return true;
        default:
            return false;
        }
    case A_TEXT:
        switch (column) {
        case COL_BIG:
            v->text = big;
            return true;
        case COL_BAD_UTF8:
            v->text = BAD_UTF8;
            return true;
        case COL_NULL_PTR:
            v->text = NULL;
            v->null_ptr = true;
            return true;
        default:
            return false;
        }
    case A_JSON:
        switch (column) {
        case COL_WRONG_TYPE:
            v->text = "[1, 2]";
            return true;
        case COL_NULL:
            v->text = "null";
            return true;
        case COL_BIG:
            v->text = fill("%s", spaces, t, "");
            return true;
        case COL_BAD_UTF8:
            v->text = "{\"\xff\xfe\": 1}";
            return true;
        case COL_NULL_PTR:
            v->text = NULL;
            v->null_ptr = true;
            return true;
        default:
            return false;
        }
    default:
        break;
    }
    /* A field of a JSON argument. */
    switch (column) {
    case COL_WRONG_TYPE:
        switch (row->kind) {
        case F_INT:
        case F_FLOAT:
            v->text = fill(t, "\"5\"", "", "");
            return true;
        case F_STR:
            v->text = fill(t, "5", "", "");
            return true;
        case F_BOOL:
            v->text = fill(t, "\"yes\"", "", "");
            return true;
        case F_OBJ:
            v->text = fill(t, "\"x\"", "", "");
            return true;
        case F_ARR:
            v->text = fill(t, "{}", "", "");
            return true;
        case F_ENV:
        case F_ENVF:
            v->text = fill(t, "5", "", "");
            return true;
        default:
            return false;
        }
    case COL_NULL:
        v->text = fill(t, "null", "", "");
        return true;
    case COL_NAN:
    case COL_POS_INF:
    case COL_NEG_INF:
    case COL_NEGATIVE:
    case COL_ZERO:
    case COL_HUGE: {
        if (!is_number_field(row->kind)) {
            return false;
        }
        bool fractional = row->kind == F_FLOAT || row->kind == F_ENVF;
        switch (column) {
        case COL_NAN:
            snprintf(number, sizeof number, "%g", (double)NAN);
            break;
        case COL_POS_INF:
            snprintf(number, sizeof number, "%g", (double)INFINITY);
            break;
        case COL_NEG_INF:
            snprintf(number, sizeof number, "%g", -(double)INFINITY);
            break;
        case COL_NEGATIVE:
            snprintf(number, sizeof number, "-1");
            break;
        case COL_ZERO:
            snprintf(number, sizeof number, "0");
            break;
        default:
            snprintf(number, sizeof number, "%s", fractional ? "1e300" : "18446744073709551616");
            break;
        }
        v->text = fill(t, quote, number, quote);
        return true;
    }
    case COL_BIG:
        v->text = fill(t, "\"", big, "\"");
        return true;
    case COL_BAD_UTF8:
        if (row->kind == F_STR || row->kind == F_ANY || env) {
            v->text = fill(t, "\"", BAD_UTF8, "\"");
            return true;
        }
        return false;
    default:
        return false;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Outcomes                                                                                    */

typedef struct {
    const char *alias;
    const char *code;
    ab_status status;
} Outcome;

static const Outcome OUTCOMES[] = {
    {"OK", "OK", AB_OK},
    {"CFG", "INVALID_CONFIG", AB_ERR_INVALID_CONFIG},
    {"ARG", "INVALID_ARGUMENT", AB_ERR_INVALID_ARGUMENT},
    {"EVT", "INVALID_EVENT", AB_ERR_INVALID_EVENT},
    {"SNAP", "INVALID_SNAPSHOT", AB_ERR_INVALID_SNAPSHOT},
    {"IO", "IO", AB_ERR_IO},
    {"OPEN", "CIRCUIT_OPEN", AB_ERR_CIRCUIT_OPEN},
    {"NULL", "NULL_ARG", AB_ERR_NULL_ARG},
    {"NOOP", "no-op", ST_NO_OP},
    {"S_OK", "returns \"OK\"", ST_CODE_OK},
    {"S_UNKNOWN", "returns \"UNKNOWN\"", ST_CODE_UNKNOWN},
};

static const Outcome *outcome_of_status(ab_status status) {
    for (size_t i = 0; i < sizeof OUTCOMES / sizeof OUTCOMES[0]; i++) {
        if (OUTCOMES[i].status == status) {
            return &OUTCOMES[i];
        }
    }
    return NULL;
}

/* The row's expectation for a column: the token ("OK/default"), copied into token. */
static bool expectation(const Row *row, int column, char *token, size_t size) {
    const char *p = row->expect;
    for (int i = 0; i <= column; i++) {
        while (*p == ' ') {
            p++;
        }
        size_t len = strcspn(p, " ");
        if (i == column) {
            if (len == 0 || len >= size) {
                return false;
            }
            memcpy(token, p, len);
            token[len] = '\0';
            return true;
        }
        p += len;
    }
    return false;
}

/* The status a token stands for (its part before the slash); false for an unknown alias. */
static bool token_status(const char *token, ab_status *status, const char **note) {
    size_t len = strcspn(token, "/");
    *note = token[len] == '/' ? token + len + 1 : "";
    for (size_t i = 0; i < sizeof OUTCOMES / sizeof OUTCOMES[0]; i++) {
        if (strlen(OUTCOMES[i].alias) == len && strncmp(OUTCOMES[i].alias, token, len) == 0) {
            *status = OUTCOMES[i].status;
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* Running                                                                                     */

/* The case being run, for the crash handler. */
static volatile const char *current_entry = "";
static volatile const char *current_argument = "";
static volatile int current_column = -1;

static void write_text(const char *s) {
    ssize_t ignored = write(STDERR_FILENO, s, strlen(s));
    (void)ignored;
}

static void on_crash(int signal_number) {
    write_text("\nCRASH in bad-input case ");
    write_text((const char *)current_entry);
    write_text(" / ");
    write_text((const char *)current_argument);
    write_text(" / ");
    write_text(current_column >= 0 ? COLUMN_NAMES[current_column] : "?");
    write_text("\n");
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

static int cells_tried, cells_failed, cells_na;

/* The longest last-error message a cell may leave: the code, ": " and the core's message. */
#define MAX_MESSAGE_BYTES 1100

/* The checked notes: the environment's warnings, and whether a 10 MB value was kept whole. */
static void check_note(const char *note, const Fixture *fx, int column) {
    /* ab_config_from_env writes {"config", "warnings"}, ab_budget_breaker_new_from_env the
     * warnings list alone. */
    if (strstr(note, "no_warning") != NULL) {
        CHECK(fx->result != NULL && (strstr(fx->result, "\"warnings\":[]") != NULL ||
                                     strcmp(fx->result, "[]") == 0));
    } else if (strstr(note, "warned") != NULL) {
        CHECK_CONTAINS(fx->result, "{\"variable\":");
    }
    if (column == COL_BIG) {
        /* Unless the note says so, nothing keeps a 10 MB value whole: at most a bounded part
         * (error text is cut to 4096 bytes, a step to its fingerprint, an output to its length). */
        size_t size = report_size(fx);
        if (strstr(note, "kept_whole") != NULL) {
            CHECK(size > big_bytes);
        } else if (size >= big_bytes / 4) {
            fprintf(stderr, "  the object reports %zu bytes after a 10 MB value\n", size);
            check_failed_ = true;
        }
    }
}

/* Runs one case (checking the note's detail, if any); returns the status it got. */
static ab_status run_case(const Row *row, int column, const Value *v, const char *note) {
    Fixture fx;
    current_entry = row->entry;
    current_argument = row->argument;
    current_column = column;
    fixture_make(&fx, row->obj);
    ab_status status = row->call(&fx, row->arg, v);
    const Outcome *got = outcome_of_status(status);
    if (got == NULL) {
        fprintf(stderr, "  unexpected status %d (%s)\n", (int)status, ab_last_error_message());
        check_failed_ = true;
    } else if (status != AB_OK && status < ST_NO_OP) {
        /* A readable message that starts with the code. */
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s: ", got->code);
        CHECK_STARTS_WITH(ab_last_error_message(), prefix);
        CHECK(strlen(ab_last_error_message()) > strlen(prefix));
        /* Short, whatever the input: the core cuts its messages at 1024 bytes (then "…"). */
        CHECK(strlen(ab_last_error_message()) <= MAX_MESSAGE_BYTES);
    }
    if (status == AB_OK) {
        check_note(note, &fx, column);
    }
    fixture_check_and_free(&fx, row->obj);
    return status;
}

static int run_all(void) {
    int rows_failed = 0;
    for (size_t r = 0; r < ROW_COUNT; r++) {
        const Row *row = &ROWS[r];
        bool row_failed = false;
        int row_cells = 0;
        for (int column = 0; column < COLUMNS; column++) {
            char token[64];
            Value v;
            bool applies = make_value(row, column, &v);
            if (!expectation(row, column, token, sizeof token)) {
                fprintf(stderr, "  %s %s: no outcome for the column %s\n", row->entry,
                        row->argument, COLUMN_NAMES[column]);
                row_failed = true;
                continue;
            }
            if (!applies) {
                if (strcmp(token, "-") != 0) {
                    fprintf(stderr, "  %s %s: the column %s does not apply to this argument, "
                                    "the table says %s\n",
                            row->entry, row->argument, COLUMN_NAMES[column], token);
                    row_failed = true;
                }
                cells_na++;
                continue;
            }
            ab_status expected;
            const char *note;
            if (!token_status(token, &expected, &note)) {
                fprintf(stderr, "  %s %s %s: unknown outcome %s\n", row->entry, row->argument,
                        COLUMN_NAMES[column], token);
                row_failed = true;
                continue;
            }
            check_failed_ = false;
            ab_status got = run_case(row, column, &v, note);
            cells_tried++;
            row_cells++;
            if (got != expected) {
                const Outcome *o = outcome_of_status(got);
                fprintf(stderr, "  %s %s [%s]: got %s, the table says %s\n", row->entry,
                        row->argument, COLUMN_NAMES[column], o ? o->alias : "?", token);
                check_failed_ = true;
            }
            if (check_failed_) {
                fprintf(stderr, "  ^ in %s %s [%s]\n", row->entry, row->argument,
                        COLUMN_NAMES[column]);
                cells_failed++;
                row_failed = true;
            }
        }
        printf("%s %s %s (%d cells)\n", row_failed ? "FAIL" : "ok  ", row->entry, row->argument,
               row_cells);
        fflush(stdout);
        rows_failed += row_failed;
    }
    printf("%d cells tried (%d n/a) in %zu rows: %d passed, %d failed\n", cells_tried, cells_na,
           ROW_COUNT, cells_tried - cells_failed, cells_failed);
    return rows_failed == 0 ? 0 : 1;
}

/* Prints every row with the outcomes the library gives now, in the table's syntax. */
static int discover(void) {
    for (size_t r = 0; r < ROW_COUNT; r++) {
        const Row *row = &ROWS[r];
        printf("%-45s %-50s \"", row->entry, row->argument);
        for (int column = 0; column < COLUMNS; column++) {
            Value v;
            if (!make_value(row, column, &v)) {
                printf("%s-", column ? " " : "");
                continue;
            }
            ab_status got = run_case(row, column, &v, "");
            const Outcome *o = outcome_of_status(got);
            printf("%s%s", column ? " " : "", o ? o->alias : "???");
        }
        printf("\"\n");
        fflush(stdout);
    }
    return 0;
}

/* The table as Markdown, for docs/bad-input/c.md. */
static void markdown_cell(const char *token) {
    ab_status status;
    const char *note;
    if (strcmp(token, "-") == 0) {
        printf(" n/a |");
        return;
    }
    if (!token_status(token, &status, &note)) {
        printf(" ? |");
        return;
    }
    const Outcome *o = outcome_of_status(status);
    printf(" %s", status == AB_OK ? "accepted" : o->code);
    if (*note) {
        printf(" (");
        for (const char *c = note; *c; c++) {
            putchar(*c == '_' ? ' ' : *c);
        }
        printf(")");
    }
    printf(" |");
}

static int markdown(void) {
    printf("| entry point | argument |");
    for (int column = 0; column < COLUMNS; column++) {
        printf(" %s |", COLUMN_NAMES[column]);
    }
    printf("\n|---|---|");
    for (int column = 0; column < COLUMNS; column++) {
        printf("---|");
    }
    printf("\n");
    int cells = 0;
    for (size_t r = 0; r < ROW_COUNT; r++) {
        const Row *row = &ROWS[r];
        printf("| `%s` | `%s` |", row->entry, row->argument);
        for (int column = 0; column < COLUMNS; column++) {
            char token[64];
            if (!expectation(row, column, token, sizeof token)) {
                strcpy(token, "?");
            }
            cells += strcmp(token, "-") != 0;
            markdown_cell(token);
        }
        printf("\n");
    }
    printf("\n%zu rows, %d cells that apply (each one a case of the test).\n", ROW_COUNT, cells);
    return 0;
}

int main(int argc, char **argv) {
    int arg = 1;
    if (arg + 1 < argc && strcmp(argv[arg], "--big-bytes") == 0) {
        big_bytes = (size_t)strtoull(argv[arg + 1], NULL, 10);
        arg += 2;
    }
    if (big_bytes < 64 * 1024) {
        fprintf(stderr, "--big-bytes: at least 65536\n");
        return 2;
    }
    const char *mode = arg < argc ? argv[arg] : "";
    (void)run_tests; /* check.h's runner: this test reports per row instead */
    if (strcmp(mode, "--markdown") == 0) {
        return markdown();
    }
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
    signal(SIGILL, on_crash);
    signal(SIGFPE, on_crash);
    big = malloc(big_bytes + 1);
    spaces = malloc(big_bytes + 1);
    scratch_size = big_bytes + 64 * 1024;
    scratch = malloc(scratch_size);
    if (big == NULL || spaces == NULL || scratch == NULL) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    memset(big, 'a', big_bytes);
    big[big_bytes] = '\0';
    memset(spaces, ' ', big_bytes);
    spaces[big_bytes] = '\0';
    int result = strcmp(mode, "--discover") == 0 ? discover() : run_all();
    free(scratch);
    free(spaces);
    free(big);
    return result;
}
