/*
 * example-ngram: n-gram lookup speculation from plain C, no draft model.
 *
 *   example-ngram TARGET.gguf [PROMPT]
 *
 * Shows the C ABI of specdec.h: an n-gram session drafts by looking up the
 * latest tokens in the sequence's own history (no draft context: pass NULL),
 * and specdec_generate runs the draft -> verify -> accept loop, with a status
 * check after every call. It pays off when the output repeats the prompt or
 * itself (code edits, quoting, lists). Greedy output is token-identical to
 * plain decoding. Tokens stream to stdout; a summary goes to stderr.
 */
#include "specdec/specdec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet_log(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    if (level == GGML_LOG_LEVEL_ERROR) { /* llama.cpp is chatty; keep its errors only */
        fputs(text, stderr);
    }
}

/* `piece` is the text this token releases: n_piece bytes, not NUL-terminated.
 * It may be empty (text that could begin a stop string, or half a UTF-8
 * character, waits for the next token). */
static bool print_piece(llama_seq_id seq_id, llama_token token, const char * piece, size_t n_piece, void * user_data) {
    (void) seq_id, (void) token, (void) user_data;
    fwrite(piece, 1, n_piece, stdout);
    fflush(stdout);
    return true; /* false would stop the sequence */
}

/* Every specdec call returns a status; on failure specdec_last_error() says what to change. */
static bool failed(specdec_status status, const char * what) {
    if (status != SPECDEC_STATUS_OK) {
        fprintf(stderr, "example-ngram: %s: %s: %s\n", what, specdec_status_name(status), specdec_last_error());
    }
    return status != SPECDEC_STATUS_OK;
}

int main(int argc, char ** argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s TARGET.gguf [PROMPT]\n", argv[0]);
        return 2;
    }
    const char * prompt = argc > 2 ? argv[2] : "one two three four, one two three four, one two three";
    llama_log_set(quiet_log, NULL);
    llama_backend_init();

    int rc = 1;
    struct llama_model * model = NULL;
    struct llama_context * target = NULL;
    specdec_session * session = NULL;
    specdec_generation * gen = NULL;
    llama_token * tokens = NULL;

    model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (model == NULL) {
        fprintf(stderr, "example-ngram: cannot load %s\n", argv[1]);
        goto done;
    }
    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = 4096;
    cparams.n_threads = cparams.n_threads_batch = 2;
    specdec_session_params params = specdec_session_default_params();
    params.strategy = SPECDEC_STRATEGY_NGRAM_SIMPLE;
    params.n_draft_max = 8; /* lookups are free; long drafts are cheap to try */
    if (llama_model_is_recurrent(model) || llama_model_is_hybrid(model)) {
        cparams.n_rs_seq = (uint32_t) params.n_draft_max; /* roll back past rejected drafts */
    }
    target = llama_init_from_model(model, cparams);
    if (target == NULL) {
        fprintf(stderr, "example-ngram: cannot create the target context\n");
        goto done;
    }
    if (failed(specdec_session_init(target, NULL, &params, &session), "specdec_session_init")) {
        goto done;
    }

    /* add_special: BOS where the model wants one; parse_special: no, the prompt is plain text.
     * A first call sizes the buffer; a byte the vocabulary lacks is UNREPRESENTABLE_TEXT. */
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    size_t n_prompt = 0;
    if (failed(specdec_tokenize(vocab, prompt, strlen(prompt), true, false, NULL, 0, &n_prompt), "specdec_tokenize")) {
        goto done;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "example-ngram: the prompt has no tokens\n");
        goto done;
    }
    tokens = malloc(n_prompt * sizeof *tokens);
    if (tokens == NULL) {
        fprintf(stderr, "example-ngram: out of memory\n");
        goto done;
    }
    if (failed(specdec_tokenize(vocab, prompt, strlen(prompt), true, false, tokens, n_prompt, &n_prompt), "specdec_tokenize")) {
        goto done;
    }

    specdec_generate_params gparams = specdec_generate_default_params();
    gparams.n_predict = 64; /* greedy (temperature 0) by default */
    const llama_token * prompts[1] = {tokens};
    const size_t n_tokens[1] = {n_prompt};
    /* one prompt; the target argument is NULL because the session brings its own */
    if (failed(specdec_generate(session, NULL, prompts, n_tokens, 1, &gparams, print_piece, NULL, &gen),
               "specdec_generate")) {
        goto done;
    }
    putchar('\n');
    fflush(stdout); /* before the summary on stderr */

    const specdec_sequence_stats st = specdec_generation_sequence_stats(gen, 0);
    const double rate = st.n_drafted ? 100.0 * (double) st.n_accepted / (double) st.n_drafted : 0.0;
    fprintf(stderr, "example-ngram: %llu tokens in %llu steps, drafted %llu, accepted %llu (%.1f%%)\n",
            (unsigned long long) st.n_generated, (unsigned long long) st.n_steps,
            (unsigned long long) st.n_drafted, (unsigned long long) st.n_accepted, rate);
    rc = 0;

done: /* everything below accepts NULL */
    specdec_generation_free(gen);
    specdec_session_free(session);
    llama_free(target);
    llama_model_free(model);
    free(tokens);
    llama_backend_free();
    return rc;
}
