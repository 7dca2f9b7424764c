// Copying one sequence's memory to another sequence of the same context, the
// step both the session (move_sequence) and the plain engine backend take to
// close a gap between the sequence ids a batch holds.
#pragma once

#include "llama.h"

namespace specdec::detail {

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
