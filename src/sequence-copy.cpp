#include "sequence-copy.h"

#include "error.h"

#include <cstdint>
#include <vector>

namespace specdec::detail {

std::vector<uint8_t> read_sequence(llama_context * ctx, llama_seq_id seq, uint32_t flags) {
    std::vector<uint8_t> bytes(llama_state_seq_get_size_ext(ctx, seq, flags));
    const size_t n = llama_state_seq_get_data_ext(ctx, bytes.data(), bytes.size(), seq, flags);
    if (n != bytes.size()) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp wrote ", n, " of ", bytes.size(), " bytes of sequence ", seq, "'s state");
    }
    return bytes;
}

bool write_sequence(llama_context * ctx, llama_seq_id seq, uint32_t flags, std::span<const uint8_t> bytes) {
    return !bytes.empty() && llama_state_seq_set_data_ext(ctx, bytes.data(), bytes.size(), seq, flags) != 0;
}

void copy_sequence(llama_context * ctx, llama_seq_id from, llama_seq_id to) {
    const std::vector<uint8_t> bytes = read_sequence(ctx, from, LLAMA_STATE_SEQ_FLAGS_NONE);
    if (!write_sequence(ctx, to, LLAMA_STATE_SEQ_FLAGS_NONE, bytes)) {
        llama_memory_seq_rm(llama_get_memory(ctx), to, -1, -1);
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not copy sequence ", from, " (", bytes.size(),
             " bytes) into sequence ", to);
    }
}

bool streams_per_sequence(const llama_context * ctx) {
    // A unified cache reports its whole size as each sequence's.
    return llama_n_seq_max(ctx) > 1 && llama_n_ctx_seq(ctx) != llama_n_ctx(ctx);
}

} // namespace specdec::detail
