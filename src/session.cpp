#include "specdec/specdec.hpp"

#include "compat.h"
#include "draft-vocab.h"
#include "error.h"
#include "llama-internal.h"
#include "mtp-drafter.h"
#include "sampler.h"
#include "params.h"
#include "sequence-copy.h"
#include "state-codec.h"
#include "strategy-traits.h"
#include "upstream-log.h"

#include "common.h"
#include "llama-ext.h"
#include "speculative.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

namespace specdec {

using detail::fail;

namespace {

// Adds the elapsed wall time to `total_us` when it goes out of scope.
class stopwatch {
public:
    explicit stopwatch(int64_t & total_us) : total_us_(total_us), start_(std::chrono::steady_clock::now()) {}
    ~stopwatch() {
        total_us_ += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start_).count();
    }
    stopwatch(const stopwatch &) = delete;
    stopwatch & operator=(const stopwatch &) = delete;

private:
    int64_t & total_us_;
    std::chrono::steady_clock::time_point start_;
};

// Runs an upstream call, turning what it throws into NATIVE_FAILURE.
template <typename F>
auto upstream(const char * what, F && f) {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception & e) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, what, " failed in llama.cpp: ", e.what());
    }
}

// The restricted draft vocabulary `p` asks for over the target's
// vocabulary: the subset's ids in ranking order, empty for the whole
// vocabulary. Checks the request against the vocabulary before any native
// call; where the strategy or the head cannot take a restriction, an
// explicit size is INVALID_CONFIG and AUTO is the whole vocabulary.
std::vector<llama_token> draft_vocab_ids(const specdec_session_params & p, llama_context * target, llama_context * draft,
                                         const ggml_tensor *& head) {
    head = nullptr;
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(target));
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    if (p.draft_vocab > n_vocab) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "draft_vocab is ", p.draft_vocab, ", above the vocabulary's ", n_vocab, " tokens");
    }
    const std::span<const llama_token> given(p.draft_vocab_ranking, p.n_draft_vocab_ranking);
    if (p.draft_vocab_ranking != nullptr) {
        detail::check_ranking(given, n_vocab);
    }
    const bool explicit_size = p.draft_vocab > 0;
    int32_t n = p.draft_vocab == SPECDEC_DRAFT_VOCAB_AUTO ? detail::auto_draft_vocab(n_vocab) : p.draft_vocab;
    if (p.draft_vocab == SPECDEC_DRAFT_VOCAB_AUTO && p.draft_vocab_ranking != nullptr) {
        n = std::min(n, static_cast<int32_t>(given.size()));
    }
    if (n <= 0) {
        return {};
    }
    std::string why;
    if (detail::traits_of(p.strategy).weights != detail::draft_weights::target_heads) {
        why = std::string("strategy '") + specdec_strategy_name(p.strategy) + "' does not take one (only mtp does, so far)";
    } else if (draft == nullptr || !detail::mtp_drafter::handles(target, draft)) {
        why = "llama.cpp's own MTP driver drives this model (several NextN heads, or a shared cache)";
    } else if ((head = detail::mtp_head_matrix(llama_get_model(draft), why)) == nullptr) {
        why = "specdec cannot project this MTP head itself: " + why;
    }
    if (!why.empty()) {
        head = nullptr;
        if (explicit_size) {
            fail(SPECDEC_STATUS_INVALID_CONFIG, "a restricted draft vocabulary (draft_vocab ", p.draft_vocab,
                 ") is not available: ", why, "; use draft_vocab 0 or SPECDEC_DRAFT_VOCAB_AUTO");
        }
        return {};
    }
    if (p.draft_vocab_ranking != nullptr) {
        return {given.begin(), given.begin() + n};
    }
    std::vector<llama_token> ranking = detail::tokenizer_ranking(vocab);
    ranking.resize(static_cast<size_t>(n));
    return ranking;
}

} // namespace

struct session::impl {
    llama_context * target = nullptr;
    llama_context * draft  = nullptr;
    session_params  params{};
    int32_t         n_vocab = 0;
    bool            features = false;

    // The contexts' feature outputs before the drafter turned any on; given
    // back when the session ends (or its construction fails), so that
    // decoding on them afterwards pays for no copies it does not read.
    std::optional<detail::feature_outputs> target_outputs;
    std::optional<detail::feature_outputs> draft_outputs;

    common_params_speculative upstream_params;
    common_speculative_ptr    spec; // null when mtp drives the strategy
    // The MTP strategy's driver when it handles the model (mtp-drafter.h).
    std::unique_ptr<detail::mtp_drafter> mtp;
    std::vector<llama_token> tokenizer_ranking; // rank_draft_vocab's order for ties; computed at its first call

    // Per sequence: the tokens at positions [0, size) of the target, as
    // seen through begin/process and trimmed by accept/remove_range.
    std::vector<llama_tokens> history;
    std::vector<llama_tokens> proposal;
    // Per sequence, the distribution each proposed token was drawn from
    // (empty when not sampled; else one per token).
    std::vector<std::vector<std::vector<specdec_token_prob>>> proposal_probs;
    std::vector<llama_pos>    proposal_pos0; // n_past of the pending proposal

    void clear_proposal(size_t i) {
        proposal[i].clear();
        proposal_probs[i].clear();
    }
    std::vector<bool>         pending;

    session_stats stats{};

    impl() = default;
    impl(const impl &) = delete;
    impl & operator=(const impl &) = delete;
    ~impl() {
        if (target_outputs) {
            detail::set_feature_outputs(target, *target_outputs);
        }
        if (draft_outputs) {
            detail::set_feature_outputs(draft, *draft_outputs);
        }
    }

    // The batch decode_target() last ran on the target and process() has not
    // consumed yet: drafters that read the target's hidden states may only
    // process that batch (llama.cpp aborts when the features are missing).
    std::vector<llama_token>  decoded_tokens;
    std::vector<llama_pos>    decoded_pos;
    std::vector<llama_seq_id> decoded_seq;
    bool                      decoded_pending = false;

    void remember_decoded(const llama_batch & b) {
        decoded_tokens.assign(b.token, b.token + b.n_tokens);
        decoded_pos.assign(b.pos, b.pos + b.n_tokens);
        decoded_seq.resize(static_cast<size_t>(b.n_tokens));
        for (int32_t k = 0; k < b.n_tokens; ++k) {
            decoded_seq[static_cast<size_t>(k)] = b.seq_id[k][0];
        }
        decoded_pending = true;
    }

    bool is_decoded(const llama_batch & b) const {
        if (!decoded_pending || decoded_tokens.size() != static_cast<size_t>(b.n_tokens)) {
            return false;
        }
        for (int32_t k = 0; k < b.n_tokens; ++k) {
            const size_t i = static_cast<size_t>(k);
            if (decoded_tokens[i] != b.token[k] || decoded_pos[i] != b.pos[k] || decoded_seq[i] != b.seq_id[k][0]) {
                return false;
            }
        }
        return true;
    }

    void check_seq(llama_seq_id seq_id) const {
        if (seq_id < 0 || static_cast<uint32_t>(seq_id) >= params.n_seq) {
            fail(SPECDEC_STATUS_BAD_SEQ_ID, "sequence id ", seq_id, " is outside [0, n_seq = ", params.n_seq, ")");
        }
    }

    void require_quiescent(const char * what) const {
        for (size_t i = 0; i < pending.size(); ++i) {
            if (pending[i]) {
                fail(SPECDEC_STATUS_PROPOSAL_PENDING, what, " needs every proposal completed, but sequence ", i,
                     " has a proposal awaiting accept()");
            }
        }
    }

    void check_tokens(std::span<const llama_token> tokens, const char * what) const {
        for (llama_token t : tokens) {
            if (t < 0 || t >= n_vocab) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, what, " holds token ", t, ", outside the vocabulary [0, ", n_vocab, ")");
            }
        }
    }

    // Everything upstream's process() assumes about a batch, checked before it
    // runs. Returns, per sequence, the first position in the batch (-1: absent).
    std::vector<llama_pos> validate_batch(const llama_batch & b) const {
        if (b.n_tokens < 0) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "batch has a negative token count");
        }
        std::vector<llama_pos> first(params.n_seq, -1);
        if (b.n_tokens == 0) {
            return first;
        }
        if (b.token == nullptr || b.embd != nullptr) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "batch must carry token ids (embedding batches are not supported)");
        }
        if (b.pos == nullptr || b.n_seq_id == nullptr || b.seq_id == nullptr) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT,
                 "batch must carry explicit positions and sequence ids (llama_batch_get_one batches do not)");
        }
        if (static_cast<uint32_t>(b.n_tokens) > llama_n_batch(target)) {
            fail(SPECDEC_STATUS_BATCH_CAPACITY, "batch has ", b.n_tokens, " tokens; the target context takes at most n_batch = ",
                 llama_n_batch(target));
        }
        if (draft != nullptr && static_cast<uint32_t>(b.n_tokens) > llama_n_batch(draft)) {
            fail(SPECDEC_STATUS_BATCH_CAPACITY, "batch has ", b.n_tokens, " tokens; the drafter replays it on a draft context with n_batch = ",
                 llama_n_batch(draft), "; split it or give the draft context a larger n_batch");
        }
        std::vector<llama_pos> last(params.n_seq, -1);
        llama_seq_id prev = -1;
        for (int32_t k = 0; k < b.n_tokens; ++k) {
            if (b.n_seq_id[k] != 1 || b.seq_id[k] == nullptr) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, "batch token ", k, " belongs to ", b.n_seq_id[k],
                     " sequences; each token must belong to exactly one");
            }
            const llama_seq_id s = b.seq_id[k][0];
            check_seq(s);
            if (b.token[k] < 0 || b.token[k] >= n_vocab) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, "batch token ", k, " is ", b.token[k], ", outside the vocabulary [0, ", n_vocab, ")");
            }
            const size_t i = static_cast<size_t>(s);
            if (first[i] < 0) {
                first[i] = b.pos[k];
            } else if (s != prev) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, "batch tokens of sequence ", s, " are not contiguous");
            } else if (b.pos[k] != last[i] + 1) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, "batch positions of sequence ", s, " jump from ", last[i], " to ", b.pos[k]);
            }
            if (b.pos[k] < 0) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, "batch token ", k, " has negative position ", b.pos[k]);
            }
            last[i] = b.pos[k];
            prev = s;
        }
        for (size_t i = 0; i < first.size(); ++i) {
            if (first[i] < 0) {
                continue;
            }
            if (static_cast<size_t>(first[i]) > history[i].size()) {
                fail(SPECDEC_STATUS_POSITION_MISMATCH, "batch starts sequence ", i, " at position ", first[i],
                     ", but the session has seen only ", history[i].size(),
                     " tokens of it; process every target batch, or call begin() with the tokens already decoded");
            }
            if (static_cast<uint64_t>(last[i]) + 1 > SPECDEC_MAX_PROMPT_TOKENS) {
                fail(SPECDEC_STATUS_PROMPT_TOO_LONG, "sequence ", i, " would exceed ", SPECDEC_MAX_PROMPT_TOKENS, " tokens");
            }
        }
        return first;
    }

    // llama.cpp aborts when the hidden states a drafter reads were not
    // produced for the batch, and offers no way to ask; the session knows
    // because the decode went through decode_target().
    void require_features(const llama_batch & b) const {
        if (!is_decoded(b)) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", specdec_strategy_name(params.strategy),
                 "' reads the target's hidden states of the processed batch: decode it with decode_target() "
                 "(or decode_target_and_process()) right before process()");
        }
    }

    // Drops positions [p0, end) of `seq` from the draft context. False when
    // its recurrent memory refuses: it rolls back at most n_rs_seq tokens,
    // once after each decode.
    bool drop_drafted(llama_seq_id seq, llama_pos p0) const {
        return draft == nullptr || llama_memory_seq_rm(llama_get_memory(draft), seq, p0, -1);
    }

    // After drop_drafted failed the drafter no longer matches the session:
    // the sequence is forgotten on both sides (removing a whole sequence
    // always succeeds), so draft() answers POSITION_MISMATCH until begin().
    void forget_sequence(llama_seq_id seq) {
        const size_t i = static_cast<size_t>(seq);
        llama_memory_seq_rm(llama_get_memory(draft), seq, 0, -1);
        history[i].clear();
        clear_proposal(i);
        pending[i] = false;
    }

    [[noreturn]] void fail_drop(llama_seq_id seq, llama_pos p0) const {
        fail(SPECDEC_STATUS_RECURRENT_SLOTS, "the draft context could not drop positions ", p0, " onwards of sequence ",
             seq, ": its recurrent state rolls back at most n_rs_seq = ", llama_n_rs_seq(draft),
             " tokens, once after each decode; the session forgot the sequence: call begin() with its tokens and "
             "process them again");
    }

    // The bytes of drafter state llama.cpp writes for a sequence and reads
    // back (its set_state ignores any other size).
    size_t drafter_state_size() const {
        if (mtp) {
            return mtp->state_size();
        }
        const llama_model * t = llama_get_model(target);
        if (!detail::traits_of(params.strategy).boundary_state || !(llama_model_is_recurrent(t) || llama_model_is_hybrid(t))) {
            return 0;
        }
        return sizeof(llama_pos) + sizeof(float) * static_cast<size_t>(llama_model_n_embd(llama_get_model(draft)));
    }

    void decode(const llama_batch & b) {
        decoded_pending = false;
        const int32_t rc = llama_decode(target, b);
        if (rc == 1) {
            fail(SPECDEC_STATUS_CONTEXT_FULL, "the target context has no room for this batch (llama_decode returned 1)");
        }
        if (rc != 0) {
            fail(SPECDEC_STATUS_DECODE_FAILED, "target decode failed (llama_decode returned ", rc, ")");
        }
        remember_decoded(b);
    }

    void commit_history(const llama_batch & b, const std::vector<llama_pos> & first) {
        for (size_t i = 0; i < first.size(); ++i) {
            if (first[i] >= 0) {
                history[i].resize(static_cast<size_t>(first[i]));
            }
        }
        for (int32_t k = 0; k < b.n_tokens; ++k) {
            history[static_cast<size_t>(b.seq_id[k][0])].push_back(b.token[k]);
        }
    }

    void process_validated(const llama_batch & b, const std::vector<llama_pos> & first) {
        if (b.n_tokens == 0) {
            return;
        }
        if (features) {
            require_features(b);
        }
        decoded_pending = false;
        bool ok = false;
        {
            stopwatch sw(stats.t_process_us);
            if (mtp) {
                mtp->observe(b);
                ok = true;
            } else {
                ok = upstream("process", [&] { return common_speculative_process(spec.get(), b); });
            }
        }
        stats.n_process++;
        if (!ok) {
            fail(SPECDEC_STATUS_NATIVE_FAILURE, "the drafter could not replay the batch on the draft context "
                 "(a draft decode failed; see the llama.cpp log)");
        }
        commit_history(b, first);
    }
};

session::session(llama_context * target, llama_context * draft, const session_params & params)
    : impl_(std::make_unique<impl>()) {
    detail::validate_params(params);
    detail::validate_contexts(target, draft, params);
    const ggml_tensor * head = nullptr;
    std::vector<llama_token> vocab_ids = draft_vocab_ids(params, target, draft, head);
    detail::quiet_upstream_log();

    impl & s = *impl_;
    s.target   = target;
    s.draft    = draft;
    s.params   = params;
    s.params.draft_vocab = static_cast<int32_t>(vocab_ids.size()); // in effect (0: the whole vocabulary)
    s.params.draft_vocab_ranking   = nullptr;                       // borrowed for the constructor only
    s.params.n_draft_vocab_ranking = 0;
    s.n_vocab  = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(target)));
    const detail::strategy_traits & tr = detail::traits_of(params.strategy);
    s.features = tr.reads_features;
    s.target_outputs = detail::feature_outputs_of(target);
    if (draft != nullptr) {
        s.draft_outputs = detail::feature_outputs_of(draft);
    }

    common_params_speculative & up = s.upstream_params;
    up.types = {tr.upstream};
    up.draft.n_max   = params.n_draft_max;
    up.draft.n_min   = params.n_draft_min;
    up.draft.p_min   = params.p_min;
    up.draft.ctx_tgt = target;
    up.draft.ctx_dft = draft;
    // The n-gram drafters keep llama.cpp's own lookup sizes (their match
    // rules depend on them); each proposal is capped at n_draft_max.

    if (tr.weights == detail::draft_weights::target_heads && detail::mtp_drafter::handles(target, draft)) {
        std::unique_ptr<detail::draft_vocab> vocab;
        if (!vocab_ids.empty()) {
            vocab = std::make_unique<detail::draft_vocab>(head, std::move(vocab_ids), llama_n_threads(draft));
        }
        s.mtp = std::make_unique<detail::mtp_drafter>(target, draft, params.n_seq, params.p_min, params.n_draft_min,
                                                      std::move(vocab));
    } else {
        s.spec.reset(upstream("creating the drafter", [&] { return common_speculative_init(up, params.n_seq); }));
        if (!s.spec) {
            fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp created no drafter for strategy '",
                 specdec_strategy_name(params.strategy), "'");
        }
        // The drafter may propose fewer tokens than asked (e.g. a DFlash block).
        s.params.n_draft_max = std::min(params.n_draft_max, std::max(1, common_speculative_n_max(s.spec.get())));
        s.params.n_draft_min = std::min(s.params.n_draft_min, s.params.n_draft_max);
    }

    s.history.resize(params.n_seq);
    s.proposal.resize(params.n_seq);
    s.proposal_probs.resize(params.n_seq);
    s.proposal_pos0.assign(params.n_seq, -1);
    s.pending.assign(params.n_seq, false);
}

session::~session() = default;
session::session(session &&) noexcept = default;
session & session::operator=(session &&) noexcept = default;

session::impl & session::live() const {
    if (!impl_) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "this session was moved from; use the session it was moved to");
    }
    return *impl_;
}

const session_params & session::params() const { return live().params; }
bool session::reads_target_features() const { return live().features; }
llama_context * session::target_context() const { return live().target; }
llama_context * session::draft_context() const { return live().draft; }
session_stats session::stats() const { return live().stats; }

int32_t session::rank_draft_vocab(std::span<const uint64_t> counts) {
    impl & s = live();
    detail::draft_vocab * vocab = s.mtp ? s.mtp->vocab() : nullptr;
    if (vocab == nullptr) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "rank_draft_vocab() needs a restricted draft vocabulary, and none is in effect "
             "(draft_vocab 0, or a drafter that takes none: see get_params)");
    }
    if (counts.size() != static_cast<size_t>(s.n_vocab)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "rank_draft_vocab() takes a count for each of the vocabulary's ", s.n_vocab,
             " tokens, not ", counts.size());
    }
    s.require_quiescent("rank_draft_vocab()");
    if (s.tokenizer_ranking.empty()) {
        s.tokenizer_ranking = detail::tokenizer_ranking(llama_model_get_vocab(llama_get_model(s.target)));
    }
    return vocab->replace(detail::top_by_count(counts, s.tokenizer_ranking, vocab->size()));
}

bool session::is_quiescent() const {
    return std::none_of(live().pending.begin(), live().pending.end(), [](bool p) { return p; });
}

void session::begin(llama_seq_id seq_id, std::span<const llama_token> prompt) {
    impl & s = live();
    s.check_seq(seq_id);
    s.require_quiescent("begin()");
    if (prompt.size() > SPECDEC_MAX_PROMPT_TOKENS) {
        fail(SPECDEC_STATUS_PROMPT_TOO_LONG, "prompt has ", prompt.size(), " tokens, above the ",
             SPECDEC_MAX_PROMPT_TOKENS, "-token bound");
    }
    s.check_tokens(prompt, "prompt");
    llama_tokens tokens(prompt.begin(), prompt.end());
    {
        stopwatch sw(s.stats.t_begin_us);
        if (s.mtp) {
            s.mtp->begin(seq_id, static_cast<llama_pos>(tokens.size()));
        } else {
            upstream("begin", [&] { common_speculative_begin(s.spec.get(), seq_id, tokens); return 0; });
        }
    }
    s.stats.n_begin++;
    s.history[static_cast<size_t>(seq_id)] = std::move(tokens);
}

void session::process(const llama_batch & batch) {
    const std::vector<llama_pos> first = live().validate_batch(batch);
    live().process_validated(batch, first);
}

void session::decode_target(const llama_batch & batch) {
    live().validate_batch(batch);
    live().decode(batch);
}

void session::decode_target_and_process(const llama_batch & batch) {
    const std::vector<llama_pos> first = live().validate_batch(batch);
    live().decode(batch);
    live().process_validated(batch, first);
}

void session::draft(std::span<const draft_request> requests) {
    impl & s = live();
    std::vector<int32_t> caps(requests.size());
    std::vector<bool> seen(s.params.n_seq, false);
    const llama_pos n_ctx = static_cast<llama_pos>(llama_n_ctx_seq(s.target));
    for (size_t r = 0; r < requests.size(); ++r) {
        const draft_request & q = requests[r];
        s.check_seq(q.seq_id);
        const size_t i = static_cast<size_t>(q.seq_id);
        if (seen[i]) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "sequence ", q.seq_id, " appears twice in one draft() call");
        }
        seen[i] = true;
        if (s.pending[i]) {
            fail(SPECDEC_STATUS_PROPOSAL_PENDING, "sequence ", q.seq_id, " still has a proposal awaiting accept()");
        }
        if (q.id_last < 0 || q.id_last >= s.n_vocab) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "id_last ", q.id_last, " is outside the vocabulary [0, ", s.n_vocab, ")");
        }
        if (q.n_max < -1 || q.n_max > s.params.n_draft_max) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "n_max ", q.n_max, " is outside [-1, n_draft_max = ", s.params.n_draft_max, "]");
        }
        if (q.n_past < 0 || static_cast<size_t>(q.n_past) != s.history[i].size()) {
            fail(SPECDEC_STATUS_POSITION_MISMATCH, "n_past is ", q.n_past, " for sequence ", q.seq_id, ", but the session has seen ",
                 s.history[i].size(), " of its tokens; pass the number of tokens in the target context");
        }
        if (q.n_past >= n_ctx) {
            fail(SPECDEC_STATUS_CONTEXT_FULL, "sequence ", q.seq_id, " fills the target context (", n_ctx,
                 " positions); id_last cannot be decoded");
        }
        if (q.sampling != nullptr) {
            detail::validate_sampling(q.sampling->temperature, q.sampling->top_p, q.sampling->min_p);
        }
        const int32_t room = n_ctx - q.n_past - 1;
        caps[r] = std::min(q.n_max < 0 ? s.params.n_draft_max : q.n_max, room);
    }

    // llama.cpp v0.5.0's EAGLE-3 drafter, given several sequences in one
    // call, drafts wrongly for all but the last (0 of 12 kept on the exact
    // fixture against 12 of 12 one at a time), so it drafts one sequence per
    // call; the others draft every requested sequence in one batched pass.
    const size_t group = detail::traits_of(s.params.strategy).one_seq_per_draft ? 1 : std::max<size_t>(requests.size(), 1);
    // Drafting writes into the draft context; verification replays the
    // accepted tokens there, so every requested sequence drops everything
    // from id_last on, whether drafting succeeded or not. Returns the
    // requests whose draft context refused.
    auto drop_all = [&] {
        std::vector<size_t> refused;
        for (size_t r = 0; r < requests.size(); ++r) {
            if (!s.drop_drafted(requests[r].seq_id, requests[r].n_past)) {
                refused.push_back(r);
            }
        }
        return refused;
    };
    // A failed call leaves no proposal; a sequence whose draft context
    // refused to drop its drafts is forgotten.
    auto discard = [&](const std::vector<size_t> & refused) {
        for (const draft_request & q : requests) {
            s.clear_proposal(static_cast<size_t>(q.seq_id));
        }
        for (size_t r : refused) {
            s.forget_sequence(requests[r].seq_id);
        }
    };
    try {
        if (s.mtp) {
            std::vector<detail::mtp_drafter::request> asked;
            std::vector<size_t> index; // request of each asked entry
            for (size_t r = 0; r < requests.size(); ++r) {
                s.clear_proposal(static_cast<size_t>(requests[r].seq_id));
                if (caps[r] > 0) {
                    const specdec_draft_sampling * sp = requests[r].sampling;
                    asked.push_back({requests[r].seq_id, requests[r].n_past, requests[r].id_last, caps[r],
                                     sp != nullptr && sp->temperature >= SPECDEC_MIN_SAMPLING_TEMPERATURE ? sp : nullptr});
                    index.push_back(r);
                }
            }
            std::vector<llama_tokens> drafted;
            std::vector<std::vector<std::vector<specdec_token_prob>>> probs;
            stopwatch sw(s.stats.t_draft_us);
            if (!asked.empty()) {
                s.mtp->draft(asked, drafted, probs);
            }
            for (size_t a = 0; a < asked.size(); ++a) {
                const size_t i = static_cast<size_t>(requests[index[a]].seq_id);
                s.proposal[i] = std::move(drafted[a]);
                s.proposal_probs[i] = std::move(probs[a]);
            }
        }
        for (size_t first = 0; s.spec && first < requests.size(); first += group) {
            const size_t last = std::min(requests.size(), first + group);
            for (size_t r = first; r < last; ++r) {
                const draft_request & q = requests[r];
                const size_t i = static_cast<size_t>(q.seq_id);
                s.clear_proposal(i);
                common_speculative_get_draft_params(s.spec.get(), q.seq_id) = {
                    /* .drafting = */ caps[r] > 0,
                    /* .n_max    = */ caps[r],
                    /* .pos0     = */ q.n_past,
                    /* .id_last  = */ q.id_last,
                    /* .prompt   = */ &s.history[i],
                    /* .result   = */ &s.proposal[i],
                };
            }
            stopwatch sw(s.stats.t_draft_us);
            upstream("draft", [&] { common_speculative_draft(s.spec.get()); return 0; });
        }
    } catch (...) {
        // Earlier groups' drafts are dropped too (EAGLE-3 drafts one group at a
        // time), and llama.cpp, which clears its drafting flags only at the end
        // of a call, must not draft these sequences again in the next one.
        for (const draft_request & q : requests) {
            if (s.spec) {
                common_speculative_get_draft_params(s.spec.get(), q.seq_id).drafting = false;
            }
        }
        discard(drop_all());
        throw;
    }
    if (const std::vector<size_t> refused = drop_all(); !refused.empty()) {
        discard(refused);
        s.fail_drop(requests[refused.front()].seq_id, requests[refused.front()].n_past);
    }

    for (size_t r = 0; r < requests.size(); ++r) {
        const draft_request & q = requests[r];
        const size_t i = static_cast<size_t>(q.seq_id);
        llama_tokens & p = s.proposal[i];
        // Keep the valid prefix: a drafter with its own vocabulary could
        // propose an id the target does not have.
        const auto bad = std::find_if(p.begin(), p.end(), [&](llama_token t) { return t < 0 || t >= s.n_vocab; });
        p.erase(bad, p.end());
        if (p.size() > static_cast<size_t>(caps[r])) {
            p.resize(static_cast<size_t>(caps[r]));
        }
        if (s.proposal_probs[i].size() > p.size()) {
            s.proposal_probs[i].resize(p.size());
        }
        s.stats.n_draft++;
        if (!p.empty()) {
            s.pending[i] = true;
            s.proposal_pos0[i] = q.n_past;
            s.stats.n_proposals++;
            s.stats.n_drafted += p.size();
        }
    }
}

std::span<const llama_token> session::proposal(llama_seq_id seq_id) const {
    live().check_seq(seq_id);
    return live().proposal[static_cast<size_t>(seq_id)];
}

std::span<const specdec_token_prob> session::proposal_probs(llama_seq_id seq_id, size_t index) const {
    const impl & s = live();
    s.check_seq(seq_id);
    const size_t i = static_cast<size_t>(seq_id);
    if (index >= s.proposal[i].size()) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "token ", index, " of a ", s.proposal[i].size(), "-token proposal");
    }
    return index < s.proposal_probs[i].size() ? std::span<const specdec_token_prob>(s.proposal_probs[i][index])
                                              : std::span<const specdec_token_prob>();
}

void session::accept(llama_seq_id seq_id, uint16_t n_accepted) {
    impl & s = live();
    s.check_seq(seq_id);
    const size_t i = static_cast<size_t>(seq_id);
    if (!s.pending[i]) {
        fail(SPECDEC_STATUS_NO_PROPOSAL, "sequence ", seq_id, " has no proposal to accept; call draft() first");
    }
    if (n_accepted > s.proposal[i].size()) {
        fail(SPECDEC_STATUS_ACCEPTED_TOO_MANY, "accepted ", n_accepted, " tokens of a ", s.proposal[i].size(),
             "-token proposal for sequence ", seq_id);
    }
    {
        stopwatch sw(s.stats.t_accept_us);
        if (!s.mtp) {
            upstream("accept", [&] { common_speculative_accept(s.spec.get(), seq_id, n_accepted); return 0; });
        }
    }
    s.stats.n_accept++;
    s.stats.n_accepted += n_accepted;
    for (uint16_t k = 0; k < n_accepted; ++k) {
        s.stats.n_accepted_at[k]++;
    }
    // The verification batch put id_last and the whole proposal in the
    // history and the draft context; keep id_last and the accepted prefix.
    const size_t keep = static_cast<size_t>(s.proposal_pos0[i]) + 1 + n_accepted;
    if (s.history[i].size() > keep) {
        s.history[i].resize(keep);
    }
    if (s.mtp) {
        s.mtp->truncate(seq_id, static_cast<llama_pos>(keep)); // the rejected rows are never run
    }
    s.pending[i] = false;
    s.clear_proposal(i);
    if (!s.drop_drafted(seq_id, static_cast<llama_pos>(keep))) {
        s.forget_sequence(seq_id);
        s.fail_drop(seq_id, static_cast<llama_pos>(keep));
    }
}

int32_t session::n_nextn_heads() const {
    if (detail::traits_of(live().params.strategy).weights != detail::draft_weights::target_heads) {
        return 0;
    }
    return llama_model_n_layer_nextn(llama_get_model(live().target));
}

void session::set_nextn_head(int32_t head) {
    if (detail::traits_of(live().params.strategy).weights != detail::draft_weights::target_heads) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "NextN heads exist only for the MTP strategy");
    }
    if (head < 0 || head >= n_nextn_heads()) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "NextN head ", head, " is outside [0, ", n_nextn_heads(), ")");
    }
    llama_set_nextn_layer_offset(live().draft, head);
}

std::vector<uint8_t> session::state(llama_seq_id seq_id) const {
    const impl & s = live();
    s.check_seq(seq_id);
    s.require_quiescent("capturing state");
    detail::session_state st;
    st.params  = s.params;
    st.seq_id  = seq_id;
    st.history = s.history[static_cast<size_t>(seq_id)];
    if (s.mtp) {
        st.impl = s.mtp->state(seq_id);
    } else {
        upstream("capturing drafter state", [&] { return common_speculative_get_state(s.spec.get(), seq_id, st.impl); });
    }
    return detail::encode_state(st);
}

void session::restore_state(llama_seq_id seq_id, std::span<const uint8_t> blob) {
    impl & s = live();
    s.check_seq(seq_id);
    s.require_quiescent("restoring state");
    detail::session_state st = detail::decode_state(blob, s.params, can_move_sequences() ? -1 : seq_id, s.n_vocab);
    const size_t want = s.drafter_state_size();
    if (!st.impl.empty() && st.impl.size() != want) {
        fail(SPECDEC_STATUS_STATE_MALFORMED, "the checkpoint carries ", st.impl.size(), " bytes of drafter state, but this "
             "session's drafter keeps ", want == 0 ? std::string("none") : std::to_string(want) + " bytes",
             "; the checkpoint was written for another pair of models");
    }
    if (s.mtp) {
        const llama_pos n = static_cast<llama_pos>(st.history.size());
        if (st.impl.empty()) {
            s.mtp->begin(seq_id, 0);
            s.mtp->begin(seq_id, n); // no carried row: the first draft starts from zeros
        } else {
            s.mtp->set_state(seq_id, st.impl, n);
        }
    } else if (!st.impl.empty()) {
        upstream("restoring drafter state", [&] { common_speculative_set_state(s.spec.get(), seq_id, st.impl); return 0; });
    }
    s.history[static_cast<size_t>(seq_id)] = std::move(st.history);
}

bool session::can_move_sequences() const {
    const impl & s = live();
    return s.mtp != nullptr || detail::traits_of(s.params.strategy).movable;
}

void session::copy_sequence(llama_seq_id from, llama_seq_id to) {
    impl & s = live();
    s.check_seq(from);
    s.check_seq(to);
    if (from == to) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "copying a sequence needs two different sequences, not ", from, " twice");
    }
    for (const llama_seq_id seq : {from, to}) {
        if (s.pending[static_cast<size_t>(seq)]) {
            fail(SPECDEC_STATUS_PROPOSAL_PENDING, "sequence ", seq, " has a proposal awaiting accept(); accept it before copying");
        }
    }
    if (!can_move_sequences()) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "strategy '", specdec_strategy_name(s.params.strategy),
             "' keeps per-sequence drafter state inside llama.cpp that cannot be copied to another sequence");
    }
    if (llama_memory_seq_pos_max(llama_get_memory(s.target), to) >= 0) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "sequence ", to, " holds positions in the target; remove them before copying ",
             from, " there");
    }
    detail::copy_sequence(s.target, from, to);
    if (s.draft != nullptr) {
        llama_memory_seq_rm(llama_get_memory(s.draft), to, -1, -1);
        try {
            detail::copy_sequence(s.draft, from, to);
        } catch (...) {
            llama_memory_seq_rm(llama_get_memory(s.target), to, -1, -1);
            throw;
        }
    }
    if (s.mtp) {
        s.mtp->copy(from, to);
    }
    s.history[static_cast<size_t>(to)] = s.history[static_cast<size_t>(from)];
    s.clear_proposal(static_cast<size_t>(to));
}

void session::move_sequence(llama_seq_id from, llama_seq_id to) {
    copy_sequence(from, to);
    impl & s = live();
    if (s.draft != nullptr) {
        llama_memory_seq_rm(llama_get_memory(s.draft), from, -1, -1);
    }
    llama_memory_seq_rm(llama_get_memory(s.target), from, -1, -1);
    if (s.mtp) {
        s.mtp->move(from, to); // `to` has a copy already: this leaves `from` as never observed
    }
    s.history[static_cast<size_t>(from)].clear();
    s.clear_proposal(static_cast<size_t>(from));
}

static llama_context * context_for(const session & self, context_role role) {
    if (role == SPECDEC_CONTEXT_TARGET) {
        return self.target_context();
    }
    if (role != SPECDEC_CONTEXT_DRAFT) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "context role ", static_cast<int>(role), " is neither target nor draft");
    }
    if (self.draft_context() == nullptr) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "this session has no draft context");
    }
    return self.draft_context();
}

void session::remove_range(context_role role, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    impl & s = live();
    s.check_seq(seq_id);
    if (s.pending[static_cast<size_t>(seq_id)]) {
        fail(SPECDEC_STATUS_PROPOSAL_PENDING, "sequence ", seq_id, " has a proposal awaiting accept(); accept it before removing positions");
    }
    llama_context * ctx = context_for(*this, role);
    if (!llama_memory_seq_rm(llama_get_memory(ctx), seq_id, p0, p1)) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the ", role == SPECDEC_CONTEXT_TARGET ? "target" : "draft",
             " memory cannot drop positions [", p0, ", ", p1, ") of sequence ", seq_id,
             " (recurrent state rolls back at most n_rs_seq tokens, right after a decode)");
    }
    if (role == SPECDEC_CONTEXT_TARGET) {
        llama_tokens & h = s.history[static_cast<size_t>(seq_id)];
        h.resize(std::min(h.size(), static_cast<size_t>(std::max(p0, 0))));
        if (s.mtp) {
            s.mtp->truncate(seq_id, p0);
        }
    }
}

std::vector<uint8_t> session::context_state(context_role role, llama_seq_id seq_id, uint32_t flags) {
    live().check_seq(seq_id);
    llama_context * ctx = context_for(*this, role);
    if (role == SPECDEC_CONTEXT_DRAFT && live().mtp) {
        live().mtp->flush(seq_id); // the recorded rows belong in the captured cache
    }
    return detail::read_sequence(ctx, seq_id, flags);
}

void session::restore_context_state(context_role role, llama_seq_id seq_id, uint32_t flags,
                                    std::span<const uint8_t> bytes) {
    live().check_seq(seq_id);
    llama_context * ctx = context_for(*this, role);
    if (!detail::write_sequence(ctx, seq_id, flags, bytes)) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp rejected the sequence state (", bytes.size(), " bytes)");
    }
}

} // namespace specdec
