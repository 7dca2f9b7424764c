// example-eagle3: speculative decoding with a separate EAGLE-3 draft model.
//
//   example-eagle3 TARGET.gguf DRAFT.gguf [PROMPT]
//
// Shows the C++ API end to end: load the target and its EAGLE-3 draft (made
// for that target: it reads three of the target's layers, which the session
// turns on as extra outputs), create the target context, let
// specdec::make_draft_context size the draft context, and run
// specdec::generate. Greedy output is token-identical to plain decoding.
// Tokens stream to stdout; a one-line summary goes to stderr.
#include "specdec/specdec.hpp"

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

static void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) { // llama.cpp is chatty; keep its errors only
        std::fputs(text, stderr);
    }
}

static llama_model_ptr load(const char * path) {
    llama_model_ptr model(llama_model_load_from_file(path, llama_model_default_params()));
    if (!model) {
        throw std::runtime_error(std::string("cannot load ") + path);
    }
    return model;
}

// add_special: BOS where the model wants one; parse_special: no, the prompt is plain text.
// specdec::tokenize throws specdec::error (UNREPRESENTABLE_TEXT) for a byte the vocabulary lacks.
static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text) {
    std::vector<llama_token> tokens = specdec::tokenize(vocab, text, true, false);
    if (tokens.empty()) {
        throw std::runtime_error("the prompt has no tokens");
    }
    return tokens;
}

static void run(const char * target_path, const char * draft_path, const std::string & prompt) {
    const int32_t n_draft = 4; // tokens the draft proposes per step

    llama_model_ptr target_model = load(target_path);
    llama_model_ptr draft_model = load(draft_path);

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = 4096;
    cparams.n_threads = cparams.n_threads_batch = 2;
    if (llama_model_is_recurrent(target_model.get()) || llama_model_is_hybrid(target_model.get())) {
        cparams.n_rs_seq = n_draft; // recurrent state must roll back past rejected drafts
    }
    llama_context_ptr target(llama_init_from_model(target_model.get(), cparams));
    if (!target) {
        throw std::runtime_error("cannot create the target context");
    }

    specdec::session_params params = specdec_session_default_params();
    params.strategy = SPECDEC_STRATEGY_EAGLE3;
    params.n_draft_max = n_draft;
    // Checks that the draft fits the target (width, layers, vocabulary) before llama.cpp builds it.
    llama_context_ptr draft = specdec::make_draft_context(target.get(), draft_model.get(), params, cparams);
    specdec::session session(target.get(), draft.get(), params);

    const std::vector<std::vector<llama_token>> prompts = {tokenize(llama_model_get_vocab(target_model.get()), prompt)};
    specdec::generate_params gparams = specdec_generate_default_params();
    gparams.n_predict = 64; // greedy (temperature 0) by default
    auto print = [](llama_seq_id, llama_token, std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true; // false would stop the sequence
    };
    const specdec::generation_result result = specdec::generate(session, prompts, gparams, print);
    std::fputc('\n', stdout);
    std::fflush(stdout); // before the summary on stderr

    const specdec_sequence_stats & st = result.sequences[0].stats;
    const double rate = st.n_drafted ? 100.0 * double(st.n_accepted) / double(st.n_drafted) : 0.0;
    using ull = unsigned long long;
    std::fprintf(stderr, "example-eagle3: %llu tokens in %llu steps, drafted %llu, accepted %llu (%.1f%%)\n",
                 ull(st.n_generated), ull(st.n_steps), ull(st.n_drafted), ull(st.n_accepted), rate);
}

int main(int argc, char ** argv) {
    if (argc < 3 || argc > 4) {
        std::fprintf(stderr, "usage: %s TARGET.gguf DRAFT.gguf [PROMPT]\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    int rc = 1;
    try {
        run(argv[1], argv[2], argc > 3 ? argv[3] : "The quick brown fox");
        rc = 0;
    } catch (const std::exception & e) { // specdec::error says what to change
        std::fprintf(stderr, "example-eagle3: error: %s\n", e.what());
    }
    llama_backend_free();
    return rc;
}
