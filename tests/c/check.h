/*
 * A minimal test harness for the C tests: TEST(name) functions, CHECK macros, one line per test
 * and a final "N passed, N failed" line (the same report as the conformance runner).
 */
#ifndef AGENTBREAKER_TESTS_CHECK_H
#define AGENTBREAKER_TESTS_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbreaker.h"

static bool check_failed_;

#define CHECK(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
            check_failed_ = true;                                                                  \
        }                                                                                          \
    } while (0)

/* Checks that `call` returns `expected` (an ab_status); prints the last error otherwise. */
#define CHECK_STATUS(call, expected)                                                                \
    do {                                                                                           \
        ab_status got_ = (call);                                                                   \
        if (got_ != (expected)) {                                                                  \
            fprintf(stderr, "  %s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__,     \
                    #call, ab_status_code(got_), ab_status_code(expected),                         \
                    ab_last_error_message());                                                      \
            check_failed_ = true;                                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, AB_OK)

/* Checks that `haystack` (a string, possibly NULL) contains `needle`. */
#define CHECK_CONTAINS(haystack, needle)                                                            \
    do {                                                                                           \
        const char *h_ = (haystack);                                                               \
        if (h_ == NULL || strstr(h_, (needle)) == NULL) {                                          \
            fprintf(stderr, "  %s:%d: expected %s to contain \"%s\", it is \"%s\"\n", __FILE__,    \
                    __LINE__, #haystack, (needle), h_ ? h_ : "(null)");                            \
            check_failed_ = true;                                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_STARTS_WITH(s, prefix)                                                                \
    do {                                                                                           \
        const char *s_ = (s);                                                                      \
        if (s_ == NULL || strncmp(s_, (prefix), strlen(prefix)) != 0) {                            \
            fprintf(stderr, "  %s:%d: expected %s to start with \"%s\", it is \"%s\"\n", __FILE__, \
                    __LINE__, #s, (prefix), s_ ? s_ : "(null)");                                   \
            check_failed_ = true;                                                                  \
        }                                                                                          \
    } while (0)

typedef struct {
    const char *name;
    void (*run)(void);
} TestCase;

/* Runs every test, prints one line each and the total; returns the process exit code. */
static int run_tests(const char *suite, const TestCase *tests, size_t count) {
    int passed = 0, failed = 0;
    for (size_t i = 0; i < count; i++) {
        check_failed_ = false;
        tests[i].run();
        if (check_failed_) {
            failed++;
            printf("FAIL %s/%s\n", suite, tests[i].name);
        } else {
            passed++;
            printf("ok   %s/%s\n", suite, tests[i].name);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

#endif /* AGENTBREAKER_TESTS_CHECK_H */
