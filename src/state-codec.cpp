#include "state-codec.h"

#include <bit>

namespace specdec::detail {

namespace {

constexpr char magic[8] = {'S', 'P', 'D', 'C', 'S', 'T', 'A', 'T'};
constexpr size_t header_size = 36;

} // namespace

std::vector<uint8_t> encode_state(const session_state & s) {
    const uint64_t size = header_size + 8 + 4ull * s.history.size() + 8 + s.impl.size();
    if (size > SPECDEC_MAX_STATE_BYTES) {
        fail(SPECDEC_STATUS_STATE_TOO_LARGE, "the state of sequence ", s.seq_id, " needs ", size,
             " bytes, above the ", SPECDEC_MAX_STATE_BYTES, "-byte bound");
    }
    byte_writer w;
    w.header(magic, state_format_version);
    w.u32(static_cast<uint32_t>(s.params.strategy));
    w.u32(s.params.n_seq);
    w.u32(static_cast<uint32_t>(s.params.n_draft_max));
    w.u32(static_cast<uint32_t>(s.params.n_draft_min));
    w.u32(std::bit_cast<uint32_t>(s.params.p_min));
    w.u32(static_cast<uint32_t>(s.seq_id));
    w.u64(s.history.size());
    for (llama_token t : s.history) {
        w.u32(static_cast<uint32_t>(t));
    }
    w.sized(s.impl);
    return w.take();
}

session_state decode_state(std::span<const uint8_t> blob, const specdec_session_params & expected,
                           llama_seq_id expected_seq, int32_t n_vocab) {
    if (blob.size() > SPECDEC_MAX_STATE_BYTES) {
        fail(SPECDEC_STATUS_STATE_TOO_LARGE, "state blob has ", blob.size(), " bytes, above the ",
             SPECDEC_MAX_STATE_BYTES, "-byte bound");
    }
    byte_reader r(blob);
    r.header(magic, state_format_version, "specdec state blob");

    session_state s;
    const uint32_t strategy = r.u32("strategy");
    s.params.strategy    = static_cast<specdec_strategy>(strategy);
    s.params.n_seq       = r.u32("n_seq");
    s.params.n_draft_max = static_cast<int32_t>(r.u32("n_draft_max"));
    s.params.n_draft_min = static_cast<int32_t>(r.u32("n_draft_min"));
    s.params.p_min       = std::bit_cast<float>(r.u32("p_min"));
    s.seq_id             = static_cast<llama_seq_id>(r.u32("sequence id"));

    if (strategy != static_cast<uint32_t>(expected.strategy)) {
        const char * name = strategy < SPECDEC_STRATEGY_COUNT ? specdec_strategy_name(s.params.strategy) : nullptr;
        fail(SPECDEC_STATUS_STATE_STRATEGY, "state blob was written by strategy '", name ? name : "unknown",
             "'; this session runs '", specdec_strategy_name(expected.strategy), "'");
    }
    if (s.params.n_seq != expected.n_seq || s.params.n_draft_max != expected.n_draft_max ||
        s.params.n_draft_min != expected.n_draft_min ||
        std::bit_cast<uint32_t>(s.params.p_min) != std::bit_cast<uint32_t>(expected.p_min)) {
        fail(SPECDEC_STATUS_STATE_CONFIG, "state blob was written under n_seq=", s.params.n_seq, " n_draft_max=",
             s.params.n_draft_max, " n_draft_min=", s.params.n_draft_min, " p_min=", s.params.p_min,
             "; this session has n_seq=", expected.n_seq, " n_draft_max=", expected.n_draft_max, " n_draft_min=",
             expected.n_draft_min, " p_min=", expected.p_min);
    }
    if (expected_seq >= 0 && s.seq_id != expected_seq) {
        fail(SPECDEC_STATUS_STATE_SEQUENCE, "state blob holds sequence ", s.seq_id, ", not sequence ", expected_seq,
             ", and this drafter keeps per-sequence state that cannot move to another");
    }

    const uint64_t n_history = r.u64("history length");
    if (n_history > SPECDEC_MAX_PROMPT_TOKENS || n_history * 4 > r.remaining()) {
        fail(SPECDEC_STATUS_STATE_MALFORMED, "state blob claims ", n_history, " history tokens but holds ",
             r.remaining() / 4, " (bound ", SPECDEC_MAX_PROMPT_TOKENS, ")");
    }
    s.history.resize(static_cast<size_t>(n_history));
    for (llama_token & t : s.history) {
        t = static_cast<llama_token>(r.u32("history token"));
        if (t < 0 || t >= n_vocab) {
            fail(SPECDEC_STATUS_STATE_MALFORMED, "state blob holds token ", t, ", outside the vocabulary of ", n_vocab);
        }
    }

    const uint64_t n_impl = r.u64("drafter state length");
    if (n_impl != r.remaining()) {
        fail(SPECDEC_STATUS_STATE_MALFORMED, "state blob claims ", n_impl, " bytes of drafter state but ",
             r.remaining(), " bytes follow");
    }
    const auto impl = r.bytes(static_cast<size_t>(n_impl), "drafter state");
    s.impl.assign(impl.begin(), impl.end());
    return s;
}

} // namespace specdec::detail
