/*
 * The peer of the C benchmark (tests/c/bench.c): the smallest useful circuit breaker a C
 * programmer would write by hand — a struct with a state, a failure counter and a threshold, and
 * a clock_gettime(CLOCK_MONOTONIC) read on every permission check, as every real breaker does to
 * see whether its cooldown is over. It lives in its own translation unit so that its functions are
 * real out-of-line calls, as a library's would be; the difference to agentbreaker is then the
 * cost of the FFI boundary (panic boundary, last-error slot, locking, JSON results) and of the
 * contract's extra rules.
 */
#define _POSIX_C_SOURCE 199309L

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* The functions bench.c declares (an opaque handle, as a C library would give). */
typedef struct MiniBreaker MiniBreaker;
MiniBreaker *mini_breaker_new(uint32_t threshold, int64_t cooldown_ms);
void mini_breaker_free(MiniBreaker *b);
bool mini_breaker_allow(MiniBreaker *b);
void mini_breaker_record_success(MiniBreaker *b);
void mini_breaker_record_failure(MiniBreaker *b);

typedef enum { MINI_CLOSED, MINI_OPEN, MINI_HALF_OPEN } MiniState;

struct MiniBreaker {
    MiniState state;
    uint32_t failures;
    uint32_t threshold;
    int64_t opened_at_ms;
    int64_t cooldown_ms;
};

static int64_t monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

MiniBreaker *mini_breaker_new(uint32_t threshold, int64_t cooldown_ms) {
    MiniBreaker *b = malloc(sizeof *b);
    if (b == NULL) {
        return NULL;
    }
    b->state = MINI_CLOSED;
    b->failures = 0;
    b->threshold = threshold;
    b->opened_at_ms = 0;
    b->cooldown_ms = cooldown_ms;
    return b;
}

void mini_breaker_free(MiniBreaker *b) {
    free(b);
}

bool mini_breaker_allow(MiniBreaker *b) {
    int64_t now = monotonic_ms();
    switch (b->state) {
    case MINI_CLOSED:
        return true;
    case MINI_OPEN:
        if (now - b->opened_at_ms >= b->cooldown_ms) {
            b->state = MINI_HALF_OPEN;
            return true;
        }
        return false;
    case MINI_HALF_OPEN:
    default:
        return false;
    }
}

void mini_breaker_record_success(MiniBreaker *b) {
    b->failures = 0;
    if (b->state == MINI_HALF_OPEN) {
        b->state = MINI_CLOSED;
    }
}

void mini_breaker_record_failure(MiniBreaker *b) {
    b->failures++;
    if (b->state == MINI_HALF_OPEN || (b->state == MINI_CLOSED && b->failures >= b->threshold)) {
        b->state = MINI_OPEN;
        b->opened_at_ms = monotonic_ms();
    }
}
