// generate() on the engine: one slot per prompt (sequence i = prompt i, seed
// + i), every prompt added before the first step and read whole in it, each
// sequence's positions kept after it finishes; a failed step hands out the
// output so far with the error.
#include "engine.h"

#include "error.h"

#include <chrono>

namespace specdec::detail {

generation_result run_generation(generation_backend & backend, std::span<const std::vector<llama_token>> prompts,
                                 const generate_params & params, const token_callback & on_token) {
    validate_request(backend, params);
    if (prompts.empty()) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "no prompt given");
    }
    if (prompts.size() > static_cast<size_t>(backend.n_batch())) {
        fail(SPECDEC_STATUS_BATCH_CAPACITY, prompts.size(), " sequences cannot share a verification batch of n_batch = ",
             backend.n_batch(), " tokens");
    }
    if (prompts.size() > backend.n_seq()) {
        fail(SPECDEC_STATUS_SEQ_CAPACITY, prompts.size(), " prompts need as many sequences, but only ", backend.n_seq(),
             " are available");
    }
    const auto t0 = std::chrono::steady_clock::now();
    engine_params ep = specdec_engine_default_params();
    ep.n_seq = static_cast<uint32_t>(prompts.size());
    ep.max_waiting = ep.n_seq;
    ep.n_prefill_chunk = 0;
    ep.keep_finished = true;
    ep.reuse_prompts = false; // the sequences' earlier contents are the caller's, not the engine's
    generation_result out;
    out.sequences.resize(prompts.size());
    engine_core engine(backend, ep, [&](const engine_event & e) {
        if (e.type == SPECDEC_ENGINE_EVENT_FINISHED) {
            out.sequences[static_cast<size_t>(e.seq_id)] = e.result->output;
            return true;
        }
        return on_token ? on_token(e.seq_id, e.token, e.piece) : true;
    });
    for (size_t i = 0; i < prompts.size(); ++i) {
        request_params p = params;
        p.seed = params.seed + static_cast<uint32_t>(i);
        try {
            engine.add(prompts[i], p);
        } catch (const error & e) {
            fail(e.code(), "prompt ", i, ": ", e.what());
        }
    }
    const auto finish_times = [&] {
        out.times = engine.times();
        out.times.t_total_us =
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    };
    try {
        while (engine.has_work()) {
            engine.step();
        }
    } catch (const error & e) {
        finish_times();
        throw generation_error(e.code(), e.what(), std::move(out));
    }
    finish_times();
    return out;
}

} // namespace specdec::detail
