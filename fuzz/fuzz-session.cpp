// Arbitrary sequences of session calls (begin, decode, process, draft,
// accept, range removal, checkpoints) on a generated MTP fixture, through
// the C ABI: every call returns OK or a typed status; nothing aborts.
#include "fixtures.h"

#include "specdec/specdec.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <unistd.h>

namespace {

llama_model *   model  = nullptr;
llama_context * target = nullptr;
llama_context * draft  = nullptr;
specdec_session_params params;

void quiet(ggml_log_level, const char *, void *) {}

// Reads bytes from the input, then zeros once it is used up.
struct input {
    const uint8_t * data;
    size_t size;
    size_t at = 0;
    uint8_t byte() { return at < size ? data[at++] : 0; }
    bool done() const { return at >= size; }
};

void check(specdec_status st) {
    if (std::string(specdec_status_name(st)) == "UNKNOWN") {
        std::fprintf(stderr, "untyped status %d\n", static_cast<int>(st));
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    specdec::fixtures::fixture_options opt;
    opt.drafter = specdec::fixtures::drafter_kind::wrong_every_k;
    char path[] = "/tmp/specdec-fuzz-XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    specdec::fixtures::write_glm4moe_mtp(path, opt);
    llama_model_params mp = llama_model_default_params();
    mp.load_mtp = true;
    model = llama_model_load_from_file(path, mp);
    unlink(path);
    params = specdec_session_default_params();
    params.n_seq = 2;
    params.n_draft_max = 3;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 16;
    cp.n_ubatch = 16;
    cp.n_seq_max = 2;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    target = llama_init_from_model(model, cp);
    if (model == nullptr || target == nullptr || specdec_draft_context_init(target, nullptr, &params, cp, &draft) != SPECDEC_STATUS_OK) {
        std::abort();
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    llama_memory_clear(llama_get_memory(target), true);
    llama_memory_clear(llama_get_memory(draft), true);
    specdec_session * s = nullptr;
    if (specdec_session_init(target, draft, &params, &s) != SPECDEC_STATUS_OK) {
        std::abort();
    }
    llama_batch batch = llama_batch_init(20, 0, 2);
    std::vector<uint8_t> blob;
    input in{data, size};
    for (int op = 0; op < 64 && !in.done(); ++op) {
        const auto seq = static_cast<llama_seq_id>(in.byte() % 3); // 2 is out of range
        switch (in.byte() % 10) {
            case 0: {
                std::vector<llama_token> prompt(in.byte() % 6);
                for (auto & t : prompt) {
                    t = in.byte() % 130; // a few beyond the vocabulary
                }
                check(specdec_session_begin(s, seq, prompt.data(), prompt.size()));
                break;
            }
            case 1:
            case 8: {
                batch.n_tokens = in.byte() % 18;
                const llama_pos p0 = in.byte() % 70;
                for (int32_t i = 0; i < batch.n_tokens; ++i) {
                    batch.token[i] = in.byte() % 130;
                    batch.pos[i] = p0 + i + (in.byte() == 0xff ? 1 : 0);
                    batch.n_seq_id[i] = 1;
                    batch.seq_id[i][0] = (in.byte() & 0x80) ? seq ^ 1 : seq;
                    batch.logits[i] = true;
                }
                check(op % 2 == 0 ? specdec_session_decode_target_and_process(s, &batch)
                                  : specdec_session_process(s, &batch));
                break;
            }
            case 2: {
                const specdec_draft_request r{seq, static_cast<llama_pos>(in.byte() % 70), static_cast<llama_token>(in.byte() % 130),
                                              static_cast<int32_t>(in.byte() % 6) - 2};
                check(specdec_session_draft(s, &r, 1));
                break;
            }
            case 3:
                check(specdec_session_accept(s, seq, in.byte() % 5));
                break;
            case 4:
                check(specdec_session_remove_range(s, static_cast<specdec_context_role>(in.byte() % 3), seq,
                                                   static_cast<llama_pos>(in.byte() % 70) - 2, static_cast<llama_pos>(in.byte() % 70) - 2));
                break;
            case 5: {
                size_t n = 0;
                check(specdec_session_state_get(s, seq, nullptr, 0, &n));
                blob.resize(n);
                if (specdec_session_state_get(s, seq, blob.data(), blob.size(), &n) == SPECDEC_STATUS_OK) {
                    check(specdec_session_state_set(s, seq, blob.data(), blob.size()));
                }
                break;
            }
            case 6: {
                blob.assign(in.byte(), 0);
                for (auto & b : blob) {
                    b = in.byte();
                }
                check(specdec_session_state_set(s, seq, blob.data(), blob.size()));
                break;
            }
            case 7: {
                const llama_token * tokens = nullptr;
                size_t n = 0;
                check(specdec_session_proposal(s, seq, &tokens, &n));
                break;
            }
            case 9: {
                // The whole loop, with arbitrary prompts and parameters.
                const size_t n_prompts = in.byte() % 4; // 3 exceeds n_seq
                std::vector<std::vector<llama_token>> prompts(n_prompts);
                std::vector<const llama_token *> ptrs;
                std::vector<size_t> sizes;
                for (auto & p : prompts) {
                    p.resize(in.byte() % 8);
                    for (auto & t : p) {
                        t = in.byte() % 130;
                    }
                    ptrs.push_back(p.data());
                    sizes.push_back(p.size());
                }
                specdec_generate_params gp = specdec_generate_default_params();
                gp.n_predict = static_cast<int32_t>(in.byte() % 12) - 1;
                gp.n_draft = static_cast<int32_t>(in.byte() % 7) - 2; // -2: SPECDEC_N_DRAFT_AUTO
                gp.synthetic_acceptance = static_cast<float>(in.byte() % 6) * 0.25f - 0.25f; // -0.25 (off) .. 1.0, 1.25 refused
                gp.temperature = static_cast<float>(in.byte() % 4) * 0.5f;
                gp.top_k = in.byte() % 5;
                gp.top_p = static_cast<float>(in.byte() % 5) * 0.25f;
                gp.seed = in.byte();
                specdec_generation * g = nullptr;
                check(specdec_generate(s, nullptr, ptrs.data(), sizes.data(), n_prompts, &gp, nullptr, nullptr, &g));
                specdec_generation_free(g);
                break;
            }
        }
    }
    llama_batch_free(batch);
    specdec_session_free(s);
    return 0;
}
