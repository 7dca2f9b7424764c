#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <stdexcept>

namespace specdec::test {

namespace {

void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR && std::getenv("SPECDEC_TEST_LOG") != nullptr) {
        std::fputs(text, stderr);
    }
}

class llama_environment : public ::testing::Environment {
public:
    void SetUp() override {
        llama_log_set(quiet_log, nullptr);
        llama_backend_init();
    }
    void TearDown() override { llama_backend_free(); }
};

[[maybe_unused]] const ::testing::Environment * environment = ::testing::AddGlobalTestEnvironment(new llama_environment);

} // namespace

void write_mtp_target(const std::string & arch, const std::string & path, const fixtures::fixture_options & opt) {
    if (arch == "qwen35") {
        fixtures::write_qwen35_mtp(path, opt);
    } else {
        fixtures::write_glm4moe_mtp(path, opt);
    }
}

std::string fixture(const std::string & name, const std::function<void(const std::string &)> & writer) {
    // Shared by every test process of the build; written once, atomically.
    const std::filesystem::path dir = SPECDEC_FIXTURE_DIR;
    const std::filesystem::path path = dir / (name + ".gguf");
    if (!std::filesystem::exists(path)) {
        std::filesystem::create_directories(dir);
        const std::filesystem::path tmp = dir / (name + ".tmp." + std::to_string(getpid()));
        writer(tmp.string());
        std::filesystem::rename(tmp, path);
    }
    return path.string();
}

llama_model_ptr load_model(const std::string & path) {
    llama_model_params p = llama_model_default_params();
    p.load_mtp = true; // MTP contexts need the nextn tensors (llama.cpp skips them by default)
    llama_model * m = llama_model_load_from_file(path.c_str(), p);
    if (m == nullptr) {
        throw std::runtime_error("cannot load fixture " + path);
    }
    return llama_model_ptr(m);
}

llama_context_ptr make_context(llama_model * model, const context_options & o) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = o.n_ctx;
    p.n_batch = o.n_batch;
    p.n_ubatch = o.n_ubatch;
    p.n_seq_max = o.n_seq_max;
    p.n_rs_seq = o.n_rs_seq;
    p.n_outputs_max_per_seq = o.n_outputs_max_per_seq;
    p.kv_unified = o.kv_unified;
    p.type_k = o.type_k;
    p.type_v = o.type_v;
    p.ctx_type = o.type;
    p.ctx_other = o.other;
    // One thread by default: ctest runs test processes in parallel, and
    // spinning worker threads of several processes would starve each other.
    p.n_threads = o.n_threads;
    p.n_threads_batch = o.n_threads;
    llama_context * c = llama_init_from_model(model, p);
    if (c == nullptr) {
        throw std::runtime_error("llama.cpp refused the context parameters");
    }
    return llama_context_ptr(c);
}

int32_t argmax(const float * logits, int32_t n_vocab) {
    return static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
}

static int32_t vocab_size(llama_context * ctx) {
    return llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
}

std::vector<llama_token> plain_greedy(llama_context * ctx, const std::vector<llama_token> & prompt, int n_predict) {
    test_batch batch(static_cast<int32_t>(prompt.size()));
    for (size_t i = 0; i < prompt.size(); ++i) {
        batch.add(prompt[i], static_cast<llama_pos>(i), 0, i + 1 == prompt.size());
    }
    if (llama_decode(ctx, batch.b) != 0) {
        throw std::runtime_error("prompt decode failed");
    }
    std::vector<llama_token> out;
    llama_pos pos = static_cast<llama_pos>(prompt.size());
    while (static_cast<int>(out.size()) < n_predict) {
        const llama_token t = argmax(llama_get_logits_ith(ctx, -1), vocab_size(ctx));
        out.push_back(t);
        batch.clear();
        batch.add(t, pos++, 0, true);
        if (llama_decode(ctx, batch.b) != 0) {
            throw std::runtime_error("decode failed");
        }
    }
    return out;
}

std::vector<llama_token> expected_cycle(llama_token last, int n, uint32_t n_vocab) {
    std::vector<llama_token> out;
    for (int i = 0; i < n; ++i) {
        last = fixtures::successor(last, n_vocab);
        out.push_back(last);
    }
    return out;
}

int spec_run::total_proposed() const {
    int n = 0;
    for (int p : proposed) {
        n += p;
    }
    return n;
}

int spec_run::total_accepted() const {
    int n = 0;
    for (int a : accepted) {
        n += a;
    }
    return n;
}

spec_run spec_greedy(session & s, const std::vector<llama_token> & prompt, int n_predict, llama_seq_id seq) {
    const size_t chunk = llama_n_batch(s.target_context());
    test_batch batch(static_cast<int32_t>(chunk));
    for (size_t i = 0; i + 1 < prompt.size(); ++i) {
        batch.add(prompt[i], static_cast<llama_pos>(i), seq, false);
        if (static_cast<size_t>(batch.b.n_tokens) == chunk || i + 2 == prompt.size()) {
            s.decode_target_and_process(batch.b);
            batch.clear();
        }
    }
    s.begin(seq, std::vector<llama_token>(prompt.begin(), prompt.end() - 1));
    return spec_continue(s, static_cast<llama_pos>(prompt.size() - 1), prompt.back(), n_predict, seq);
}

spec_run spec_continue(session & s, llama_pos n_past, llama_token id_last, int n_predict, llama_seq_id seq) {
    llama_context * target = s.target_context();
    const int32_t n_vocab = vocab_size(target);
    test_batch batch(s.params().n_draft_max + 1);
    spec_run run;
    while (static_cast<int>(run.tokens.size()) < n_predict) {
        const draft_request request{seq, n_past, id_last, -1, nullptr};
        s.draft({&request, 1});
        const auto span = s.proposal(seq);
        const std::vector<llama_token> proposal(span.begin(), span.end());

        batch.clear();
        batch.add(id_last, n_past, seq, true);
        for (size_t i = 0; i < proposal.size(); ++i) {
            batch.add(proposal[i], n_past + 1 + static_cast<llama_pos>(i), seq, true);
        }
        s.decode_target_and_process(batch.b);

        size_t k = 0;
        while (k < proposal.size() && argmax(llama_get_logits_ith(target, static_cast<int32_t>(k)), n_vocab) == proposal[k]) {
            ++k;
        }
        const llama_token next = argmax(llama_get_logits_ith(target, static_cast<int32_t>(k)), n_vocab);
        if (!proposal.empty()) {
            s.accept(seq, static_cast<uint16_t>(k));
        }
        if (k < proposal.size()) {
            s.remove_range(SPECDEC_CONTEXT_TARGET, seq, n_past + 1 + static_cast<llama_pos>(k), -1);
        }
        run.proposed.push_back(static_cast<int>(proposal.size()));
        run.proposals.push_back(proposal);
        run.accepted.push_back(static_cast<int>(k));
        run.tokens.insert(run.tokens.end(), proposal.begin(), proposal.begin() + static_cast<std::ptrdiff_t>(k));
        run.tokens.push_back(next);
        n_past += 1 + static_cast<llama_pos>(k);
        id_last = next;
    }
    run.n_past = n_past;
    run.id_last = id_last;
    run.tokens.resize(static_cast<size_t>(n_predict));
    return run;
}

specdec_status status_of(const std::function<void()> & f) {
    try {
        f();
        return SPECDEC_STATUS_OK;
    } catch (const error & e) {
        return e.code();
    }
}

} // namespace specdec::test
