/* The README's C example: a guarded tool call in an agent loop (seed 004's path hallucination). */
#include <agentbreaker.h>
#include <stdio.h>

/* The agent's tool call: returns NULL on success or the error text on failure. */
static const char *read_script(void *path) {
    (void)path;
    return "Path not found: ServerScriptService.MainScript";
}

int main(void) {
    ab_failure_breaker *breaker = NULL;
    if (ab_failure_breaker_new("{\"failureThreshold\": 3}", NULL, &breaker) != AB_OK) {
        fprintf(stderr, "%s\n", ab_last_error_message());
        return 1;
    }
    for (int attempt = 1; attempt <= 5; attempt++) {
        bool ok = false;
        if (ab_failure_breaker_call(breaker, read_script, NULL, &ok) == AB_ERR_CIRCUIT_OPEN) {
            printf("attempt %d refused: %s\n", attempt, ab_last_error_message());
            break; /* stop the agent and ask a human */
        }
        printf("attempt %d %s\n", attempt, ok ? "succeeded" : "failed");
    }
    ab_failure_breaker_free(breaker);
    return 0;
}
