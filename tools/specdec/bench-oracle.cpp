#include "bench-oracle.h"

#include <algorithm>
#include <limits>

namespace cli {

std::vector<int32_t> measure_agreement(specdec::session & s, const std::vector<llama_token> & prompt,
                                       const std::vector<llama_token> & text, int32_t n_max,
                                       const std::function<void(size_t, size_t)> & on_position) {
    llama_context * target = s.target_context();
    s.remove_range(SPECDEC_CONTEXT_TARGET, 0, -1, -1);
    if (s.draft_context() != nullptr) {
        s.remove_range(SPECDEC_CONTEXT_DRAFT, 0, -1, -1);
    }
    const int32_t n_batch = static_cast<int32_t>(llama_n_batch(target));
    llama_batch batch = llama_batch_init(std::max(n_batch, 1), 0, 1);
    auto add = [&](llama_token t, llama_pos pos, bool logits) {
        const int32_t i = batch.n_tokens++;
        batch.token[i] = t;
        batch.pos[i] = pos;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = logits ? 1 : 0;
    };
    std::vector<int32_t> agreement;
    try {
        // The prompt but its last token, which is the first step's id_last.
        for (size_t i = 0; i + 1 < prompt.size();) {
            batch.n_tokens = 0;
            for (; i + 1 < prompt.size() && batch.n_tokens < n_batch; ++i) {
                add(prompt[i], static_cast<llama_pos>(i), false);
            }
            s.decode_target_and_process(batch);
        }
        auto n_past = static_cast<llama_pos>(prompt.size()) - 1;
        llama_token id_last = prompt.back();
        for (llama_token next : text) {
            const specdec::draft_request request{0, n_past, id_last, n_max, nullptr};
            s.draft({&request, 1});
            const auto proposal = s.proposal(0);
            int32_t kept = 0;
            const size_t at = agreement.size();
            while (static_cast<size_t>(kept) < proposal.size() && at + static_cast<size_t>(kept) < text.size() &&
                   proposal[static_cast<size_t>(kept)] == text[at + static_cast<size_t>(kept)]) {
                ++kept;
            }
            const bool drafted = !proposal.empty();
            agreement.push_back(kept);
            batch.n_tokens = 0;
            add(id_last, n_past, true);
            s.decode_target_and_process(batch);
            if (drafted) {
                s.accept(0, 0);
            }
            id_last = next;
            ++n_past;
            if (on_position) {
                on_position(agreement.size(), text.size());
            }
        }
    } catch (...) {
        llama_batch_free(batch);
        throw;
    }
    llama_batch_free(batch);
    return agreement;
}

oracle_result oracle_plan(std::span<const int32_t> agreement, std::span<const double> step_cost) {
    const size_t n = agreement.size();
    std::vector<oracle_result> best(n + 1);
    for (size_t i = n; i-- > 0;) {
        best[i].cost = std::numeric_limits<double>::infinity();
        for (size_t k = 0; k < step_cost.size(); ++k) {
            const size_t gained = 1 + std::min(k, static_cast<size_t>(std::max(agreement[i], 0)));
            const oracle_result & rest = best[std::min(n, i + gained)];
            const double cost = step_cost[k] + rest.cost;
            if (cost < best[i].cost) {
                best[i] = {cost, rest.steps + 1};
            }
        }
    }
    return best[0];
}

} // namespace cli
