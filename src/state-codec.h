// The session checkpoint format: a versioned little-endian blob.
//
//   offset size field
//   0      8    magic "SPDCSTAT"
//   8      4    u32 format version (state_format_version)
//   12     4    u32 strategy (specdec_strategy)
//   16     4    u32 n_seq
//   20     4    i32 n_draft_max
//   24     4    i32 n_draft_min
//   28     4    f32 p_min (IEEE-754 bits)
//   32     4    i32 sequence id
//   36     8    u64 n_history, then n_history x i32 tokens
//   ...    8    u64 n_impl,    then n_impl bytes of drafter state
// Nothing may follow; the whole blob is at most SPECDEC_MAX_STATE_BYTES.
#pragma once

#include "specdec/specdec.h"

#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

constexpr uint32_t state_format_version = 1;

struct session_state {
    specdec_session_params   params{};
    llama_seq_id             seq_id = 0;
    std::vector<llama_token> history;
    std::vector<uint8_t>     impl; // the drafter's own bytes (may be empty)
};

// Throws error(STATE_TOO_LARGE) if the blob would exceed the bound.
std::vector<uint8_t> encode_state(const session_state & state);

// Parses and validates every field against the session that restores it:
// its parameters, the sequence id and the vocabulary size. Throws the
// STATE_* status of the first problem; returns the decoded state otherwise.
session_state decode_state(std::span<const uint8_t> blob, const specdec_session_params & expected,
                           llama_seq_id expected_seq, int32_t n_vocab);

} // namespace specdec::detail
