// One sequence's memory as bytes, and copied to another sequence of the same
// context: what the session's context checkpoints read and write, and the
// step both the session (move_sequence) and the plain engine backend take to
// close a gap between the sequence ids a batch holds.
#pragma once

#include "llama.h"

#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

// One sequence's bytes of llama.cpp's per-sequence state (llama_state_seq_*_ext
// with `flags`). read_sequence throws error(NATIVE_FAILURE) when llama.cpp
// writes fewer bytes than it sized; write_sequence returns false when it
// refuses them (no room, malformed), leaving what it wrote in place.
std::vector<uint8_t> read_sequence(llama_context * ctx, llama_seq_id seq, uint32_t flags);
bool write_sequence(llama_context * ctx, llama_seq_id seq, uint32_t flags, std::span<const uint8_t> bytes);

// Copies every cell of sequence `from` of `ctx` (attention cells, recurrent
// state) into sequence `to`, which must hold none, through llama.cpp's
// per-sequence state (a host buffer as large as `from`'s cells). `from` is
// unchanged. Throws error(NATIVE_FAILURE) when llama.cpp refuses (no room
// for the cells in `to`'s stream); `to` is then emptied again.
void copy_sequence(llama_context * ctx, llama_seq_id from, llama_seq_id to);

// True when `ctx` keeps a KV stream per sequence (no kv_unified, more than
// one sequence): llama.cpp then decodes a batch in one forward pass per run
// of consecutive sequence ids holding equal rows, so gaps between the ids
// cost passes.
bool streams_per_sequence(const llama_context * ctx);

} // namespace specdec::detail
