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

    /* Getters given NULL or an index out of range return values no real
     * object has, and say why in specdec_last_error(). */
    p = specdec_session_get_params(NULL);
    CHECK(p.n_seq == 0 && p.n_draft_max == 0);
    CHECK(strstr(specdec_last_error(), "NULL") != NULL);
    CHECK(!specdec_session_is_quiescent(NULL));
    CHECK(!specdec_session_reads_target_features(NULL));
    CHECK(!specdec_session_can_move_sequences(NULL));
    CHECK(specdec_session_move_sequence(NULL, 0, 1) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(specdec_session_copy_sequence(NULL, 0, 1) == SPECDEC_STATUS_INVALID_ARGUMENT);
    int32_t n_entered = 7;
    CHECK(specdec_session_rank_draft_vocab(NULL, NULL, 0, &n_entered) == SPECDEC_STATUS_INVALID_ARGUMENT && n_entered == 7);
    specdec_request_id first = 0;
    CHECK(specdec_engine_add_n(NULL, NULL, 0, NULL, 2, &first) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(specdec_session_n_nextn_heads(NULL) == -1);
    CHECK(specdec_session_get_stats(NULL).n_process == 0);
    CHECK(specdec_generation_n_sequences(NULL) == 0);
    size_t n = 99;
    CHECK(specdec_generation_tokens(NULL, 0, &n) == NULL && n == 0);
    n = 99;
    CHECK(specdec_generation_text(NULL, 0, &n) == NULL && n == 0);
    CHECK(specdec_generation_stop_reason(NULL, 0) == SPECDEC_STOP_INVALID);
    CHECK(specdec_generation_sequence_stats(NULL, 3).n_generated == 0);
    CHECK(specdec_generation_get_times(NULL).t_total_us == 0);
    CHECK(strstr(specdec_last_error(), "generation is NULL") != NULL);

    /* specdec_generate checks every size and pointer before reading a token. */
    specdec_generate_params gp = specdec_generate_default_params();
    const llama_token one[1] = {5};
    const llama_token * prompts[2] = {one, NULL};
    size_t sizes[2] = {(size_t) SPECDEC_MAX_PROMPT_TOKENS + 1, 0};
    specdec_generation * g = (specdec_generation *) &failures; /* must be reset to NULL */
    CHECK(specdec_generate(NULL, NULL, prompts, sizes, 1, &gp, NULL, NULL, &g) == SPECDEC_STATUS_PROMPT_TOO_LONG);
    CHECK(g == NULL);
    CHECK(strstr(specdec_last_error(), "SPECDEC_MAX_PROMPT_TOKENS") != NULL);
    sizes[0] = 1;
    sizes[1] = 3; /* prompts[1] is NULL */
    CHECK(specdec_generate(NULL, NULL, prompts, sizes, 2, &gp, NULL, NULL, &g) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(specdec_last_error(), "prompts[1]") != NULL);
    CHECK(specdec_generate(NULL, NULL, NULL, sizes, 1, &gp, NULL, NULL, &g) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(specdec_generate(NULL, NULL, prompts, sizes, SPECDEC_MAX_SEQ + 1, &gp, NULL, NULL, &g) == SPECDEC_STATUS_SEQ_CAPACITY);
    CHECK(specdec_generate(NULL, NULL, prompts, sizes, 1, &gp, NULL, NULL, &g) == SPECDEC_STATUS_INVALID_ARGUMENT); /* no target */
    CHECK(g == NULL);
    specdec_generation_free(NULL);

    /* The tokenizer refuses NULL arguments before llama.cpp runs, and a
     * failed call leaves its outputs alone. */
    size_t count = 99;
    llama_token ids[4] = {7, 7, 7, 7};
    char text[8] = "unset";
    CHECK(specdec_tokenize(NULL, "ab", 2, true, false, ids, 4, &count) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(count == 99 && ids[0] == 7);
    CHECK(strstr(specdec_last_error(), "vocab") != NULL);
    CHECK(specdec_tokenize(NULL, "ab", 2, true, false, NULL, 4, &count) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(specdec_tokenize(NULL, "ab", 2, true, false, ids, 4, NULL) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(specdec_detokenize(NULL, ids, 4, false, true, text, sizeof text, &count) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(specdec_detokenize(NULL, NULL, 4, false, true, NULL, 0, &count) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(specdec_token_to_piece(NULL, 5, 0, true, text, sizeof text, &count) == SPECDEC_STATUS_INVALID_ARGUMENT);
    CHECK(count == 99 && strcmp(text, "unset") == 0);
    CHECK(strcmp(specdec_status_name(SPECDEC_STATUS_UNREPRESENTABLE_TEXT), "UNREPRESENTABLE_TEXT") == 0);
    CHECK(specdec_status_kind_of(SPECDEC_STATUS_BUFFER_TOO_SMALL) == SPECDEC_STATUS_KIND_CONFIGURATION);

    /* Every enum is an int-sized type with a sentinel. */
    CHECK(sizeof(specdec_status) == sizeof(int) && SPECDEC_STATUS_MAX_ENUM == 0x7FFFFFFF);
    CHECK(sizeof(specdec_stop_reason) == sizeof(int) && SPECDEC_STOP_MAX_ENUM == 0x7FFFFFFF);
    CHECK(strcmp(specdec_status_name(SPECDEC_STATUS_MAX_ENUM), "UNKNOWN") == 0);

    if (failures == 0) {
        printf("1 passed, 0 failed\n");
    }
    return failures == 0 ? 0 : 1;
}
