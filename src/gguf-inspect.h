// Reading what a GGUF file is from its metadata, defensively: every key is
// type-checked before it is read, since gguf's getters assert on mismatches,
// and every file passes check_loadable (gguf-load-check.h) first.
#pragma once

#include "pair-rules.h"

#include "specdec/specdec.h"

#include <vector>

namespace specdec::detail {

struct gguf_summary {
    specdec_model_info info{};
    model_facts        facts;   // what the pair rules read, with llama.cpp's defaults filled in
    std::vector<int>   tensor_types; // the ggml_type of the tensors, each once, in the order first met
};

// Throws error(IO_ERROR / MALFORMED_FILE).
gguf_summary inspect_file(const std::string & path);
gguf_summary inspect_bytes(const void * data, size_t size);

// The pair rules (pair-rules.h) over two inspected files; `draft` is nullptr
// for MTP and n-gram strategies. Throws the compatibility status (or
// INVALID_ARGUMENT for a missing or superfluous draft model).
void check_pair(const gguf_summary & target, const gguf_summary * draft, specdec_strategy strategy);

// Throws error(UNAVAILABLE) naming the weight type or build option for which
// exact kernels (specdec_set_exact_kernels) do not make this build compute
// the file's rows batch-invariantly; returns when they do.
void check_exact(const gguf_summary & model);

// Throws MODEL_UNSUPPORTED when no strategy fits.
specdec_strategy detect_strategy(const gguf_summary & target, const gguf_summary * draft);

} // namespace specdec::detail
