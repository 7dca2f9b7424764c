/* Compiles the public header as C and checks a few calls from C. */
#include "specdec/specdec.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                  \
        }                                                                \
    } while (0)

int main(void) {
    specdec_session_params p = specdec_session_default_params();
    CHECK(specdec_session_params_validate(&p) == SPECDEC_STATUS_OK);
    p.n_draft_max = 0;
    CHECK(specdec_session_params_validate(&p) == SPECDEC_STATUS_INVALID_CONFIG);
    CHECK(strstr(specdec_last_error(), "n_draft_max") != NULL);
    CHECK(strcmp(specdec_status_name(SPECDEC_STATUS_NO_PROPOSAL), "NO_PROPOSAL") == 0);

    specdec_session * s = NULL;
    p = specdec_session_default_params();
    CHECK(specdec_session_init(NULL, NULL, &p, &s) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(s == NULL);
    CHECK(specdec_session_accept(NULL, 0, 0) == SPECDEC_STATUS_INVALID_ARGUMENT);
    specdec_session_free(NULL);

    specdec_strategy st;
    CHECK(specdec_strategy_from_name("dflash", &st) == SPECDEC_STATUS_OK && st == SPECDEC_STRATEGY_DFLASH);

    if (failures == 0) {
        printf("1 passed, 0 failed\n");
    }
    return failures == 0 ? 0 : 1;
}
