/*
 * The C runner of the shared conformance suite (tests/conformance/README.md): every scenario file
 * under $AGENTBREAKER_CONFORMANCE_DIR (default: tests/conformance, or the first argument), one line
 * per scenario, and a final "N passed, N failed" line (`--libtest` prints libtest-style lines for
 * tools/mutate_scenarios.py instead). Each op is mapped onto the public C API of
 * include/agentbreaker.h; scenarios are parsed with cJSON.
 *
 * A step that passes a wrong-typed value where the C API takes a `const char *` or a `bool`
 * (`{"error": 42}`, `{"transient": "yes"}`) cannot even be written in C: the runner counts it as
 * checked by the type system and says so. Wrong types inside JSON arguments (configs, events,
 * snapshots, iteration metrics, observations, environment maps) reach the library and are real
 * checks.
 */
#define _XOPEN_SOURCE 700

#include <cjson/cJSON.h>
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentbreaker.h"

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */

/* The reason the current scenario failed. */
static char failure_text[8192];

static bool fail(const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(failure_text, sizeof failure_text, format, ap);
    va_end(ap);
    return false;
}

static char *join_path(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p == NULL) {
        abort();
    }
    if (a[0] == '\0') {
        snprintf(p, n, "%s", b);
    } else {
        snprintf(p, n, "%s/%s", a, b);
    }
    return p;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    char *text = malloc((size_t)size + 1);
    if (text == NULL) {
        abort();
    }
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    text[got] = '\0';
    return text;
}

/* A JSON value as compact text (for messages and for passing JSON arguments). Free with free(). */
static char *to_text(const cJSON *value) {
    if (value == NULL) {
        char *s = malloc(5);
        if (s == NULL) {
            abort();
        }
        memcpy(s, "null", 5);
        return s;
    }
    char *s = cJSON_PrintUnformatted(value);
    if (s == NULL) {
        abort();
    }
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* Scenario files                                                                              */

typedef struct {
    char **items;
    size_t len;
    size_t cap;
} PathList;

static void push_path(PathList *list, char *item) {
    if (list->len == list->cap) {
        list->cap = list->cap ? list->cap * 2 : 64;
        list->items = realloc(list->items, list->cap * sizeof *list->items);
        if (list->items == NULL) {
            abort();
        }
    }
    list->items[list->len++] = item;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Collects the scenario files under root/rel (relative paths), recursively. */
static void collect(const char *root, const char *rel, PathList *out) {
    char *dir_path = rel[0] ? join_path(root, rel) : join_path(root, "");
    DIR *dir = opendir(dir_path);
    if (dir == NULL) {
        fprintf(stderr, "cannot read %s\n", dir_path);
        free(dir_path);
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) {
            continue;
        }
        char *child_rel = join_path(rel, entry->d_name);
        char *child_path = join_path(root, child_rel);
        struct stat st;
        if (stat(child_path, &st) == 0 && S_ISDIR(st.st_mode)) {
            collect(root, child_rel, out);
            free(child_rel);
        } else if (ends_with(entry->d_name, ".json") && strcmp(entry->d_name, "schema.json") != 0) {
            push_path(out, child_rel);
        } else {
            free(child_rel);
        }
        free(child_path);
    }
    closedir(dir);
    free(dir_path);
}

static int compare_paths(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ------------------------------------------------------------------------------------------ */
/* $TMP/ paths                                                                                 */

static void substitute_tmp(cJSON *value, const char *tmp) {
    cJSON *child = value ? value->child : NULL;
    while (child != NULL) {
        cJSON *next = child->next;
        if (cJSON_IsString(child) && strncmp(child->valuestring, "$TMP/", 5) == 0) {
            char *path = join_path(tmp, child->valuestring + 5);
            if (cJSON_SetValuestring(child, path) == NULL) {
                abort();
            }
            free(path);
        } else {
            substitute_tmp(child, tmp);
        }
        child = next;
    }
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_tree(const char *path) {
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------------------------------------ */
/* Matching                                                                                    */

static bool partial_match(const cJSON *expected, const cJSON *actual, const char *path) {
    char *e_text = NULL, *a_text = NULL;
    bool ok = true;
    if (cJSON_IsObject(expected)) {
        if (!cJSON_IsObject(actual)) {
            goto mismatch;
        }
        const cJSON *item;
        cJSON_ArrayForEach(item, expected) {
            const cJSON *got = cJSON_GetObjectItemCaseSensitive(actual, item->string);
            size_t n = strlen(path) + strlen(item->string) + 2;
            char *sub = malloc(n);
            if (sub == NULL) {
                abort();
            }
            snprintf(sub, n, "%s.%s", path, item->string);
            bool sub_ok = partial_match(item, got, sub);
            free(sub);
            if (!sub_ok) {
                return false;
            }
        }
        return true;
    }
    if (cJSON_IsArray(expected)) {
        if (!cJSON_IsArray(actual)) {
            goto mismatch;
        }
        int n = cJSON_GetArraySize(expected);
        if (n != cJSON_GetArraySize(actual)) {
            a_text = to_text(actual);
            fail("at %s: expected %d elements, got %d: %s", path, n, cJSON_GetArraySize(actual),
                 a_text);
            free(a_text);
            return false;
        }
        for (int i = 0; i < n; i++) {
            char sub[1024];
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            if (!partial_match(cJSON_GetArrayItem(expected, i), cJSON_GetArrayItem(actual, i),
                               sub)) {
                return false;
            }
        }
        return true;
    }
    if (cJSON_IsNumber(expected)) {
        if (cJSON_IsNumber(actual) && fabs(expected->valuedouble - actual->valuedouble) <= 1e-9) {
            return true;
        }
        goto mismatch;
    }
    if (cJSON_IsNull(expected)) {
        if (actual == NULL || cJSON_IsNull(actual)) {
            return true;
        }
        goto mismatch;
    }
    if (cJSON_IsBool(expected)) {
        if (cJSON_IsBool(actual) && cJSON_IsTrue(expected) == cJSON_IsTrue(actual)) {
            return true;
        }
        goto mismatch;
    }
    if (cJSON_IsString(expected)) {
        if (cJSON_IsString(actual) && strcmp(expected->valuestring, actual->valuestring) == 0) {
            return true;
        }
        goto mismatch;
    }
mismatch:
    e_text = to_text(expected);
    a_text = to_text(actual);
    ok = fail("at %s: expected %s, got %s", path, e_text, a_text);
    free(e_text);
    free(a_text);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* Subjects                                                                                    */

typedef enum {
    SUBJECT_FAILURE,
    SUBJECT_STAGNATION,
    SUBJECT_BUDGET,
    SUBJECT_ANALYZER,
    SUBJECT_STRATEGY,
    SUBJECT_FIX_PLAN,
    SUBJECT_LOOP,
    SUBJECT_ENV,
    SUBJECT_MONITOR,
} SubjectKind;

typedef struct {
    SubjectKind kind;
    ab_manual_clock *clock;
    ab_failure_breaker *failure;
    ab_stagnation_breaker *stagnation;
    ab_budget_breaker *budget;
    ab_exit_strategy *strategy;
    ab_loop *agent_loop;
    ab_monitor *monitor;
    /* What the listener received since the previous `events` step. */
    cJSON *events;
    /* The result of the latest `snapshot` step of a monitor (JSON text), for `"$last_snapshot"`. */
    char *last_snapshot;
} Subject;

static void on_event(const char *event_json, void *user_data) {
    Subject *subject = user_data;
    cJSON *event = cJSON_Parse(event_json);
    if (event == NULL) {
        event = cJSON_CreateString("<the listener received text that is not JSON>");
    }
    cJSON_AddItemToArray(subject->events, event);
}

static void free_subject(Subject *s) {
    ab_failure_breaker_free(s->failure);
    ab_stagnation_breaker_free(s->stagnation);
    ab_budget_breaker_free(s->budget);
    ab_exit_strategy_free(s->strategy);
    ab_loop_free(s->agent_loop);
    ab_monitor_free(s->monitor);
    free(s->last_snapshot);
    ab_manual_clock_free(s->clock);
    cJSON_Delete(s->events);
}

static bool subject_kind(const char *name, SubjectKind *kind) {
    static const struct {
        const char *name;
        SubjectKind kind;
    } kinds[] = {
        {"failure", SUBJECT_FAILURE},   {"stagnation", SUBJECT_STAGNATION},
        {"budget", SUBJECT_BUDGET},     {"analyzer", SUBJECT_ANALYZER},
        {"strategy", SUBJECT_STRATEGY}, {"fixPlan", SUBJECT_FIX_PLAN},
        {"loop", SUBJECT_LOOP},         {"env", SUBJECT_ENV},
        {"monitor", SUBJECT_MONITOR},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(kinds[i].name, name) == 0) {
            *kind = kinds[i].kind;
            return true;
        }
    }
    return false;
}

/* Builds the subject from its config (NULL = none given) through the constructors; attaches the
 * listener. Returns the constructor's status; *runner_error is set for a scenario problem. */
static ab_status build(Subject *s, const cJSON *config, bool *runner_error) {
    *runner_error = false;
    char *config_json = config ? to_text(config) : NULL;
    ab_status status = AB_OK;
    uint64_t id = 0;
    switch (s->kind) {
    case SUBJECT_FAILURE:
        status = ab_failure_breaker_new(config_json, s->clock, &s->failure);
        if (status == AB_OK) {
            status = ab_failure_breaker_add_listener(s->failure, on_event, s, &id);
        }
        break;
    case SUBJECT_STAGNATION:
        status = ab_stagnation_breaker_new(config_json, s->clock, &s->stagnation);
        if (status == AB_OK) {
            status = ab_stagnation_breaker_add_listener(s->stagnation, on_event, s, &id);
        }
        break;
    case SUBJECT_BUDGET:
        status = ab_budget_breaker_new(config_json, s->clock, &s->budget);
        if (status == AB_OK) {
            status = ab_budget_breaker_add_listener(s->budget, on_event, s, &id);
        }
        break;
    case SUBJECT_STRATEGY:
    case SUBJECT_FIX_PLAN:
        status = s->kind == SUBJECT_STRATEGY
                     ? ab_exit_strategy_new(config_json, s->clock, &s->strategy)
                     : ab_exit_strategy_new_fix_plan(config_json, s->clock, &s->strategy);
        if (status == AB_OK) {
            status = ab_exit_strategy_add_listener(s->strategy, on_event, s, &id);
        }
        break;
    case SUBJECT_LOOP:
        status = ab_loop_new(config_json, s->clock, &s->agent_loop);
        if (status == AB_OK) {
            status = ab_loop_add_listener(s->agent_loop, on_event, s, &id);
        }
        break;
    case SUBJECT_MONITOR:
        status = ab_monitor_new(config_json, s->clock, &s->monitor);
        if (status == AB_OK) {
            status = ab_monitor_add_listener(s->monitor, on_event, s, &id);
        }
        break;
    case SUBJECT_ANALYZER:
    case SUBJECT_ENV:
        if (config != NULL && !(cJSON_IsObject(config) && config->child == NULL)) {
            *runner_error = true;
            fail("this subject takes no config");
        }
        break;
    }
    free(config_json);
    return status;
}

/* ------------------------------------------------------------------------------------------ */
/* Ops                                                                                         */

typedef enum {
    OUTCOME_VALUE,        /* the op succeeded; `value` is its result (NULL = none) */
    OUTCOME_ERROR,        /* the op failed with `status` */
    OUTCOME_TYPE_CHECKED, /* the argument cannot be passed to the C API at all */
    OUTCOME_RUNNER_ERROR, /* the scenario is wrong (unknown op or arg); failure_text says why */
} OutcomeKind;

typedef struct {
    OutcomeKind kind;
    cJSON *value;
    ab_status status;
    char text[1024];
} Outcome;

static Outcome value_outcome(cJSON *value) {
    Outcome o = {.kind = OUTCOME_VALUE, .value = value};
    return o;
}

static Outcome status_outcome(ab_status status) {
    Outcome o = {.kind = status == AB_OK ? OUTCOME_VALUE : OUTCOME_ERROR, .status = status};
    if (status != AB_OK) {
        snprintf(o.text, sizeof o.text, "%s", ab_last_error_message());
    }
    return o;
}

/* The result of a call that wrote a JSON string (NULL = no result) to `*out` on success. Takes the
 * out-parameter's address: it is read after the call (argument evaluation order is unspecified). */
static Outcome json_outcome(ab_status status, char **out) {
    char *json = *out;
    if (status != AB_OK) {
        return status_outcome(status);
    }
    cJSON *value = json ? cJSON_Parse(json) : cJSON_CreateNull();
    if (value == NULL) {
        value = cJSON_CreateString("<the library returned text that is not JSON>");
    }
    ab_string_free(json);
    return value_outcome(value);
}

/* `{key: value}` around a result, as the README names op results ({halt}, {halts}, {loaded}). */
static Outcome wrap(Outcome o, const char *key) {
    if (o.kind == OUTCOME_VALUE) {
        cJSON *object = cJSON_CreateObject();
        cJSON_AddItemToObject(object, key, o.value ? o.value : cJSON_CreateNull());
        o.value = object;
    }
    return o;
}

static Outcome runner_error(const char *format, const char *detail) {
    Outcome o = {.kind = OUTCOME_RUNNER_ERROR};
    snprintf(o.text, sizeof o.text, format, detail);
    return o;
}

static Outcome type_checked(const char *key, const cJSON *value, const char *c_type) {
    Outcome o = {.kind = OUTCOME_TYPE_CHECKED};
    char *text = value ? to_text(value) : NULL;
    snprintf(o.text, sizeof o.text, "%s %s (%s)", key, text ? text : "missing", c_type);
    free(text);
    return o;
}

/* Fails (a runner error) on an argument key the op does not take. `allowed` ends with NULL. */
static bool only(const cJSON *args, const char *const *allowed, Outcome *o) {
    const cJSON *item;
    cJSON_ArrayForEach(item, args) {
        bool known = false;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            known = known || strcmp(allowed[i], item->string) == 0;
        }
        if (!known) {
            *o = runner_error("unknown arg \"%s\"", item->string);
            return false;
        }
    }
    return true;
}

#define ONLY(...)                                                                                   \
    do {                                                                                           \
        static const char *const allowed_[] = {__VA_ARGS__, NULL};                                 \
        Outcome unknown_;                                                                          \
        if (!only(args, allowed_, &unknown_)) {                                                    \
            return unknown_;                                                                       \
        }                                                                                          \
    } while (0)

#define NO_ARGS()                                                                                   \
    do {                                                                                           \
        static const char *const allowed_[] = {NULL};                                              \
        Outcome unknown_;                                                                          \
        if (!only(args, allowed_, &unknown_)) {                                                    \
            return unknown_;                                                                       \
        }                                                                                          \
    } while (0)

/* A `const char *` argument: `*out` is the string, NULL when absent. False when the value is not a
 * string (it cannot be passed in C). */
static bool string_arg(const cJSON *args, const char *key, const char **out) {
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(args, key);
    *out = NULL;
    if (value == NULL) {
        return true;
    }
    if (!cJSON_IsString(value)) {
        return false;
    }
    *out = value->valuestring;
    return true;
}

#define REQUIRED_STRING(var, key)                                                                   \
    const char *var = NULL;                                                                        \
    if (!string_arg(args, key, &var) || var == NULL) {                                             \
        return type_checked(key, cJSON_GetObjectItemCaseSensitive(args, key), "const char *");     \
    }

#define OPTIONAL_STRING(var, key)                                                                   \
    const char *var = NULL;                                                                        \
    if (!string_arg(args, key, &var)) {                                                            \
        return type_checked(key, cJSON_GetObjectItemCaseSensitive(args, key), "const char *");     \
    }

/* A JSON argument as text (an absent key is JSON null). Free with free(). */
static char *json_arg(const cJSON *args, const char *key) {
    return to_text(cJSON_GetObjectItemCaseSensitive(args, key));
}

/* What a guarded operation does, and whether it ran. */
typedef struct {
    const char *error;
    bool ran;
} Guarded;

static const char *guarded_operation(void *user_data) {
    Guarded *g = user_data;
    g->ran = true;
    return g->error;
}

static Outcome failure_op(Subject *s, const char *op, const cJSON *args) {
    ab_failure_breaker *b = s->failure;
    char *json = NULL;
    if (strcmp(op, "recordSuccess") == 0) {
        NO_ARGS();
        return status_outcome(ab_failure_breaker_record_success(b));
    }
    if (strcmp(op, "recordFailure") == 0) {
        ONLY("error");
        REQUIRED_STRING(error, "error");
        return status_outcome(ab_failure_breaker_record_failure(b, error));
    }
    if (strcmp(op, "shouldAllowOperation") == 0) {
        NO_ARGS();
        return json_outcome(ab_failure_breaker_should_allow_operation(b, &json), &json);
    }
    if (strcmp(op, "getStatus") == 0) {
        NO_ARGS();
        return json_outcome(ab_failure_breaker_get_status(b, &json), &json);
    }
    if (strcmp(op, "metrics") == 0) {
        NO_ARGS();
        return json_outcome(ab_failure_breaker_metrics(b, &json), &json);
    }
    if (strcmp(op, "reset") == 0) {
        NO_ARGS();
        return status_outcome(ab_failure_breaker_reset(b));
    }
    if (strcmp(op, "snapshot") == 0) {
        NO_ARGS();
        return json_outcome(ab_failure_breaker_snapshot(b, &json), &json);
    }
    if (strcmp(op, "restore") == 0) {
        ONLY("snapshot");
        char *snapshot = json_arg(args, "snapshot");
        Outcome o = status_outcome(ab_failure_breaker_restore(b, snapshot));
        free(snapshot);
        return o;
    }
    if (strcmp(op, "call") == 0) {
        ONLY("error");
        OPTIONAL_STRING(error, "error");
        Guarded guarded = {.error = error, .ran = false};
        bool ok = false;
        ab_status status = ab_failure_breaker_call(b, guarded_operation, &guarded, &ok);
        if (status != AB_OK) {
            if (guarded.ran && status == AB_ERR_CIRCUIT_OPEN) {
                return runner_error("%s", "the guarded function ran although the call was refused");
            }
            return status_outcome(status);
        }
        cJSON *result = cJSON_CreateObject();
        cJSON_AddBoolToObject(result, "called", guarded.ran);
        cJSON_AddBoolToObject(result, "ok", ok);
        return value_outcome(result);
    }
    if (strcmp(op, "save") == 0) {
        ONLY("path");
        REQUIRED_STRING(path, "path");
        return status_outcome(ab_failure_breaker_save(b, path));
    }
    if (strcmp(op, "load") == 0) {
        ONLY("path");
        REQUIRED_STRING(path, "path");
        bool loaded = false;
        ab_status status = ab_failure_breaker_load(b, path, &loaded);
        if (status != AB_OK) {
            return status_outcome(status);
        }
        return wrap(value_outcome(cJSON_CreateBool(loaded)), "loaded");
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome stagnation_op(Subject *s, const char *op, const cJSON *args) {
    ab_stagnation_breaker *b = s->stagnation;
    char *json = NULL;
    if (strcmp(op, "recordProgress") == 0) {
        /* The args object is the iteration's metrics JSON; the library checks its keys. */
        char *metrics = to_text(args);
        Outcome o = status_outcome(ab_stagnation_breaker_record_progress(b, metrics));
        free(metrics);
        return o;
    }
    if (strcmp(op, "recordStep") == 0) {
        /* The args object is the step JSON ({action, result?, failed?}); the library checks it. */
        char *step = to_text(args);
        Outcome o = status_outcome(ab_stagnation_breaker_record_step(b, step));
        free(step);
        return o;
    }
    if (strcmp(op, "recordError") == 0) {
        ONLY("error", "transient");
        REQUIRED_STRING(error, "error");
        const cJSON *transient = cJSON_GetObjectItemCaseSensitive(args, "transient");
        if (transient != NULL && !cJSON_IsNull(transient) && !cJSON_IsBool(transient)) {
            return type_checked("transient", transient, "bool");
        }
        bool is_transient = transient != NULL && cJSON_IsTrue(transient);
        return status_outcome(ab_stagnation_breaker_record_error(b, error, is_transient));
    }
    if (strcmp(op, "check") == 0) {
        NO_ARGS();
        return json_outcome(ab_stagnation_breaker_check(b, &json), &json);
    }
    if (strcmp(op, "getStatus") == 0) {
        NO_ARGS();
        return json_outcome(ab_stagnation_breaker_get_status(b, &json), &json);
    }
    if (strcmp(op, "reset") == 0) {
        NO_ARGS();
        return status_outcome(ab_stagnation_breaker_reset(b));
    }
    if (strcmp(op, "snapshot") == 0) {
        NO_ARGS();
        return json_outcome(ab_stagnation_breaker_snapshot(b, &json), &json);
    }
    if (strcmp(op, "restore") == 0) {
        ONLY("snapshot");
        char *snapshot = json_arg(args, "snapshot");
        Outcome o = status_outcome(ab_stagnation_breaker_restore(b, snapshot));
        free(snapshot);
        return o;
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome budget_op(Subject *s, const char *op, const cJSON *args) {
    ab_budget_breaker *b = s->budget;
    char *json = NULL;
    if (strcmp(op, "ingest") == 0) {
        ONLY("event");
        char *event = json_arg(args, "event");
        ab_status status = ab_budget_breaker_ingest(b, event, &json);
        free(event);
        return wrap(json_outcome(status, &json), "halt");
    }
    if (strcmp(op, "tick") == 0) {
        NO_ARGS();
        return wrap(json_outcome(ab_budget_breaker_tick(b, &json), &json), "halts");
    }
    if (strcmp(op, "snapshot") == 0) {
        NO_ARGS();
        return json_outcome(ab_budget_breaker_snapshot(b, &json), &json);
    }
    if (strcmp(op, "reset") == 0) {
        NO_ARGS();
        return status_outcome(ab_budget_breaker_reset(b));
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome analyzer_op(const char *op, const cJSON *args) {
    char *json = NULL;
    if (strcmp(op, "analyze") == 0) {
        ONLY("text");
        REQUIRED_STRING(text, "text");
        return json_outcome(ab_analyze(text, &json), &json);
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome strategy_op(Subject *s, const char *op, const cJSON *args) {
    ab_exit_strategy *strategy = s->strategy;
    char *json = NULL;
    if (strcmp(op, "shouldExit") == 0) {
        ONLY("text", "circuitState");
        OPTIONAL_STRING(text, "text");
        OPTIONAL_STRING(circuit_state, "circuitState");
        ab_status status =
            ab_exit_strategy_should_exit(strategy, text ? text : "", circuit_state, &json);
        return json_outcome(status, &json);
    }
    if (strcmp(op, "getStatus") == 0 && s->kind == SUBJECT_FIX_PLAN) {
        NO_ARGS();
        ab_status status = ab_exit_strategy_plan_status(strategy, &json);
        if (status == AB_OK && json == NULL) {
            return runner_error("%s", "a fix plan strategy reported no plan");
        }
        return json_outcome(status, &json);
    }
    if (strcmp(op, "reset") == 0) {
        NO_ARGS();
        return status_outcome(ab_exit_strategy_reset(strategy));
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome loop_op(Subject *s, const char *op, const cJSON *args) {
    ab_loop *l = s->agent_loop;
    char *json = NULL;
    if (strcmp(op, "observe") == 0) {
        /* The args object is the observation JSON; the library checks its keys and types. */
        char *observation = to_text(args);
        ab_status status = ab_loop_observe(l, observation, &json);
        free(observation);
        return json_outcome(status, &json);
    }
    if (strcmp(op, "getStatus") == 0) {
        NO_ARGS();
        return json_outcome(ab_loop_get_status(l, &json), &json);
    }
    if (strcmp(op, "reset") == 0) {
        NO_ARGS();
        return status_outcome(ab_loop_reset(l));
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome env_op(const char *op, const cJSON *args) {
    char *json = NULL;
    if (strcmp(op, "configFromEnv") == 0) {
        ONLY("env");
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(args, "env");
        if (env == NULL) {
            return runner_error("%s", "configFromEnv needs an env argument");
        }
        char *env_json = to_text(env);
        ab_status status = ab_config_from_env(env_json, &json);
        free(env_json);
        return json_outcome(status, &json);
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome monitor_op(Subject *s, const char *op, const cJSON *args) {
    ab_monitor *m = s->monitor;
    char *json = NULL;
    if (strcmp(op, "observe") == 0) {
        ONLY("event");
        char *event = json_arg(args, "event");
        ab_status status = ab_monitor_observe(m, event, &json);
        free(event);
        return json_outcome(status, &json);
    }
    if (strcmp(op, "tick") == 0) {
        NO_ARGS();
        return wrap(json_outcome(ab_monitor_tick(m, &json), &json), "verdicts");
    }
    if (strcmp(op, "status") == 0) {
        NO_ARGS();
        return json_outcome(ab_monitor_status(m, &json), &json);
    }
    if (strcmp(op, "snapshot") == 0) {
        NO_ARGS();
        ab_status status = ab_monitor_snapshot(m, &json);
        if (status == AB_OK) {
            free(s->last_snapshot);
            s->last_snapshot = malloc(strlen(json) + 1);
            if (s->last_snapshot == NULL) {
                abort();
            }
            memcpy(s->last_snapshot, json, strlen(json) + 1);
        }
        return json_outcome(status, &json);
    }
    if (strcmp(op, "restore") == 0) {
        ONLY("snapshot");
        /* "$last_snapshot" stands for the result of the latest `snapshot` step. */
        const cJSON *given = cJSON_GetObjectItemCaseSensitive(args, "snapshot");
        if (cJSON_IsString(given) && strcmp(given->valuestring, "$last_snapshot") == 0) {
            if (s->last_snapshot == NULL) {
                return runner_error("%s", "restore of \"$last_snapshot\" before any snapshot step");
            }
            return status_outcome(ab_monitor_restore(m, s->last_snapshot));
        }
        char *snapshot = json_arg(args, "snapshot");
        Outcome o = status_outcome(ab_monitor_restore(m, snapshot));
        free(snapshot);
        return o;
    }
    if (strcmp(op, "reset") == 0) {
        NO_ARGS();
        return status_outcome(ab_monitor_reset(m));
    }
    return runner_error("unknown op \"%s\" for this subject", op);
}

static Outcome run_op(Subject *s, const char *op, const cJSON *args) {
    if (strcmp(op, "events") == 0) {
        NO_ARGS();
        cJSON *result = cJSON_CreateObject();
        cJSON_AddItemToObject(result, "events", s->events);
        s->events = cJSON_CreateArray();
        return value_outcome(result);
    }
    switch (s->kind) {
    case SUBJECT_FAILURE:
        return failure_op(s, op, args);
    case SUBJECT_STAGNATION:
        return stagnation_op(s, op, args);
    case SUBJECT_BUDGET:
        return budget_op(s, op, args);
    case SUBJECT_ANALYZER:
        return analyzer_op(op, args);
    case SUBJECT_STRATEGY:
    case SUBJECT_FIX_PLAN:
        return strategy_op(s, op, args);
    case SUBJECT_LOOP:
        return loop_op(s, op, args);
    case SUBJECT_ENV:
        return env_op(op, args);
    case SUBJECT_MONITOR:
        return monitor_op(s, op, args);
    }
    return runner_error("unknown op \"%s\"", op);
}

/* ------------------------------------------------------------------------------------------ */
/* Steps and scenarios                                                                         */

static const char *const STEP_KEYS[] = {"op", "at", "args", "repeat", "expect", "expectError", NULL};
static const char *const TOP_KEYS[] = {"description", "subject", "config", "configError",
                                       "spec",        "steps",   NULL};

static const char *unknown_key(const cJSON *object, const char *const *allowed) {
    const cJSON *item;
    cJSON_ArrayForEach(item, object) {
        bool known = false;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            known = known || strcmp(allowed[i], item->string) == 0;
        }
        if (!known) {
            return item->string;
        }
    }
    return NULL;
}

static bool is_whole(const cJSON *value) {
    return cJSON_IsNumber(value) && value->valuedouble >= 0 &&
           value->valuedouble == floor(value->valuedouble);
}

static bool run_step_checked(Subject *s, const cJSON *step, const char *tmp, int *type_checked) {
    if (!cJSON_IsObject(step)) {
        return fail("a step must be an object");
    }
    const char *unknown = unknown_key(step, STEP_KEYS);
    if (unknown != NULL) {
        return fail("unknown step key \"%s\"", unknown);
    }
    const cJSON *op_item = cJSON_GetObjectItemCaseSensitive(step, "op");
    if (!cJSON_IsString(op_item)) {
        return fail("missing op");
    }
    const char *op = op_item->valuestring;
    const cJSON *given_args = cJSON_GetObjectItemCaseSensitive(step, "args");
    if (given_args != NULL && !cJSON_IsObject(given_args)) {
        return fail("args must be an object");
    }
    const cJSON *repeat_item = cJSON_GetObjectItemCaseSensitive(step, "repeat");
    if (repeat_item != NULL && !is_whole(repeat_item)) {
        return fail("bad repeat");
    }
    long repeat = repeat_item ? (long)repeat_item->valuedouble : 1;
    const cJSON *expect_error = cJSON_GetObjectItemCaseSensitive(step, "expectError");
    if (expect_error != NULL && !cJSON_IsString(expect_error)) {
        return fail("expectError must be a string");
    }
    const cJSON *expect = cJSON_GetObjectItemCaseSensitive(step, "expect");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(step, "at");
    if (at != NULL) {
        if (!is_whole(at)) {
            return fail("at must be a whole number");
        }
        if (ab_manual_clock_set(s->clock, (uint64_t)at->valuedouble) != AB_OK) {
            return fail("ab_manual_clock_set failed: %s", ab_last_error_message());
        }
    }
    cJSON *args = given_args ? cJSON_Duplicate(given_args, true) : cJSON_CreateObject();
    substitute_tmp(args, tmp);

    bool ok = true;
    Outcome last = {.kind = OUTCOME_VALUE, .value = NULL};
    for (long i = 0; i < repeat && ok; i++) {
        cJSON_Delete(last.value);
        last = run_op(s, op, args);
        if (last.kind == OUTCOME_RUNNER_ERROR) {
            ok = fail("%s", last.text);
        } else if (expect_error != NULL) {
            const char *code = expect_error->valuestring;
            if (last.kind == OUTCOME_VALUE) {
                char *text = to_text(last.value);
                ok = fail("expected %s, got result %s", code, text);
                free(text);
            } else if (last.kind == OUTCOME_ERROR) {
                if (strcmp(ab_status_code(last.status), code) != 0) {
                    ok = fail("expected %s, got %s", code, last.text);
                }
            } else if (strcmp(code, "INVALID_ARGUMENT") == 0) {
                *type_checked += 1;
            } else {
                ok = fail("%s cannot be passed in C; expected %s", last.text, code);
            }
        }
    }
    if (ok && expect_error == NULL) {
        if (last.kind == OUTCOME_ERROR) {
            ok = fail("unexpected error %s", last.text);
        } else if (last.kind == OUTCOME_TYPE_CHECKED) {
            ok = fail("%s cannot be passed in C, but the step expects no error", last.text);
        } else if (expect != NULL) {
            ok = partial_match(expect, last.value, "$");
        }
    }
    cJSON_Delete(last.value);
    cJSON_Delete(args);
    return ok;
}

static bool run_scenario(const char *path, int *type_checked) {
    char *text = read_file(path);
    if (text == NULL) {
        return fail("cannot read %s", path);
    }
    cJSON *scenario = cJSON_Parse(text);
    free(text);
    if (scenario == NULL) {
        return fail("bad JSON near: %.40s", cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    }
    bool ok = true;
    Subject s = {0};
    char tmp[] = "/tmp/agentbreaker-c-XXXXXX";
    bool have_tmp = false;
    cJSON *config = NULL;
    const cJSON *subject_item = cJSON_GetObjectItemCaseSensitive(scenario, "subject");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(scenario, "steps");
    const cJSON *config_error = cJSON_GetObjectItemCaseSensitive(scenario, "configError");
    const char *unknown = cJSON_IsObject(scenario) ? unknown_key(scenario, TOP_KEYS) : NULL;
    if (!cJSON_IsObject(scenario)) {
        ok = fail("a scenario must be an object");
    } else if (unknown != NULL) {
        ok = fail("unknown top-level key \"%s\"", unknown);
    } else if (!cJSON_IsString(subject_item)) {
        ok = fail("missing subject");
    } else if (!subject_kind(subject_item->valuestring, &s.kind)) {
        ok = fail("unknown subject \"%s\"", subject_item->valuestring);
    } else if (!cJSON_IsArray(steps)) {
        ok = fail("steps must be a list");
    } else if (config_error != NULL && !cJSON_IsString(config_error)) {
        ok = fail("configError must be a string");
    } else if (mkdtemp(tmp) == NULL) {
        ok = fail("cannot make a temporary directory");
    } else {
        have_tmp = true;
    }
    if (ok) {
        const cJSON *given = cJSON_GetObjectItemCaseSensitive(scenario, "config");
        config = given ? cJSON_Duplicate(given, true) : NULL;
        substitute_tmp(config, tmp);
        s.events = cJSON_CreateArray();
        if (ab_manual_clock_new(0, &s.clock) != AB_OK) {
            ok = fail("ab_manual_clock_new failed: %s", ab_last_error_message());
        }
    }
    if (ok) {
        bool runner_error = false;
        ab_status status = build(&s, config, &runner_error);
        if (runner_error) {
            ok = false;
        } else if (config_error != NULL) {
            const char *code = config_error->valuestring;
            if (status == AB_OK) {
                ok = fail("construction succeeded, expected %s", code);
            } else if (strcmp(ab_status_code(status), code) != 0) {
                ok = fail("construction failed with %s, expected %s", ab_last_error_message(),
                          code);
            }
        } else if (status != AB_OK) {
            ok = fail("construction failed: %s", ab_last_error_message());
        } else {
            int index = 0;
            const cJSON *step;
            cJSON_ArrayForEach(step, steps) {
                if (!run_step_checked(&s, step, tmp, type_checked)) {
                    /* Prefix the reason with the step index and op. */
                    char reason[sizeof failure_text];
                    snprintf(reason, sizeof reason, "%s", failure_text);
                    const cJSON *op = cJSON_GetObjectItemCaseSensitive(step, "op");
                    fail("step %d (%s): %s", index, cJSON_IsString(op) ? op->valuestring : "?",
                         reason);
                    ok = false;
                    break;
                }
                index++;
            }
        }
    }
    free_subject(&s);
    cJSON_Delete(config);
    cJSON_Delete(scenario);
    if (have_tmp) {
        remove_tree(tmp);
    }
    return ok;
}

/* usage: conformance [--libtest] [DIR]
 * DIR defaults to $AGENTBREAKER_CONFORMANCE_DIR, then tests/conformance. --libtest prints the
 * libtest-style lines (`test NAME ... ok|FAILED`) that tools/mutate_scenarios.py reads. */
int main(int argc, char **argv) {
    const char *dir = getenv("AGENTBREAKER_CONFORMANCE_DIR");
    bool libtest = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--libtest") == 0) {
            libtest = true;
        } else {
            dir = argv[i];
        }
    }
    if (dir == NULL || dir[0] == '\0') {
        dir = "tests/conformance";
    }
    PathList files = {0};
    collect(dir, "", &files);
    if (files.len == 0) {
        fprintf(stderr, "no scenarios under %s\n", dir);
        free(files.items);
        return 2;
    }
    qsort(files.items, files.len, sizeof *files.items, compare_paths);
    int passed = 0, failed = 0, type_checked_total = 0;
    for (size_t i = 0; i < files.len; i++) {
        char *path = join_path(dir, files.items[i]);
        char *name = files.items[i];
        name[strlen(name) - strlen(".json")] = '\0';
        int type_checked = 0;
        failure_text[0] = '\0';
        bool ok = run_scenario(path, &type_checked);
        if (ok) {
            passed++;
        } else {
            failed++;
        }
        if (libtest) {
            printf("test %s ... %s\n", name, ok ? "ok" : "FAILED");
            if (!ok) {
                printf("    %s\n", failure_text);
            }
        } else if (!ok) {
            printf("FAIL %s: %s\n", name, failure_text);
        } else if (type_checked > 0) {
            printf("ok   %s (%d wrong-type step%s checked by the C type system)\n", name,
                   type_checked, type_checked == 1 ? "" : "s");
        } else {
            printf("ok   %s\n", name);
        }
        type_checked_total += type_checked;
        free(path);
        free(files.items[i]);
    }
    free(files.items);
    printf("note: %d wrong-type steps were checked by the C type system (a const char * or bool "
           "parameter cannot receive such a value)\n",
           type_checked_total);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
