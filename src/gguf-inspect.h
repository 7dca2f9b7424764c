// Reading what a GGUF file is from its metadata, defensively: every key is
// type-checked before it is read, since gguf's getters assert on mismatches.
#pragma once

#include "specdec/specdec.h"

#include <string>
#include <vector>

struct gguf_context;

namespace specdec::detail {

struct gguf_summary {
    specdec_model_info       info{};
    std::string              tokenizer;   // tokenizer.ggml.model
    std::vector<std::string> tokens;      // tokenizer.ggml.tokens
    int64_t                  bos = -1;
    int64_t                  eos = -1;
};

// Throws error(IO_ERROR / MALFORMED_FILE).
gguf_summary inspect_file(const std::string & path);
gguf_summary inspect_bytes(const void * data, size_t size);

// Throws the compatibility status when the pair cannot run `strategy`.
void check_pair(const gguf_summary & target, const gguf_summary * draft, specdec_strategy strategy);

// Throws MODEL_UNSUPPORTED when no strategy fits.
specdec_strategy detect_strategy(const gguf_summary & target, const gguf_summary * draft);

} // namespace specdec::detail
