// Type-checked reads of GGUF metadata: gguf's own getters assert when a
// key has another type, so every read here checks the type first.
#pragma once

#include "gguf.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specdec::detail {

class gguf_reader {
public:
    explicit gguf_reader(const gguf_context * ctx) : ctx_(ctx) {}

    bool has(const std::string & key) const { return gguf_find_key(ctx_, key.c_str()) >= 0; }
    // The key's type, or GGUF_TYPE_COUNT when it is missing.
    gguf_type type(const std::string & key) const;
    // The string value, or "" when missing or of another type.
    std::string str(const std::string & key) const;
    // A scalar of any integer type, or nullopt when missing or of another type.
    std::optional<int64_t> integer(const std::string & key) const;
    int64_t integer(const std::string & key, int64_t fallback) const { return integer(key).value_or(fallback); }
    // A scalar float32 or float64, or nullopt when missing or of another type.
    std::optional<double> real(const std::string & key) const;
    // A scalar bool, or nullopt when missing or of another type.
    std::optional<bool> boolean(const std::string & key) const;
    // An array of any integer type ({} when missing or of another type).
    std::vector<int64_t> integers(const std::string & key) const;
    // An array of strings ({} when missing or of another type).
    std::vector<std::string> strings(const std::string & key) const;
    // The element count of an array key (0 when missing or not an array).
    size_t array_size(const std::string & key) const;
    bool has_tensor(const std::string & name) const { return gguf_find_tensor(ctx_, name.c_str()) >= 0; }

private:
    const gguf_context * ctx_;
};

// tokenizer.ggml.tokens as llama.cpp's vocabulary holds them: an empty text
// at id i becomes "[EMPTY_i]".
std::vector<std::string> vocab_texts(const gguf_reader & r);

} // namespace specdec::detail
