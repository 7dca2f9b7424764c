// The tokens a grammar state allows, remembered across requests. Which
// tokens llama.cpp's grammar matcher allows depends on the grammar's text,
// the vocabulary and the matcher's state alone (logit_shaper::state_key),
// and asking it about every token of a large vocabulary costs more than a
// decoding step. Requests that send the same schema or tool grammar come
// back to the same states, so what the first of them asked serves the rest.
// One memo serves one vocabulary (an engine's target); its keys carry the
// grammar's text. Bounded: past max_bytes the states used least recently
// are forgotten. Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specdec::detail {

class grammar_memo {
public:
    using tokens = std::vector<bool>; // [token]: allowed

    // max_bytes: what the remembered states may take (their keys and one
    // bit per token of the vocabulary), at least one state's worth.
    explicit grammar_memo(size_t max_bytes = default_max_bytes) : max_bytes_(max_bytes) {}

    static constexpr size_t default_max_bytes = size_t{32} << 20;

    // The tokens state `key` allows: remembered, or made by `ask` (called
    // without the lock held; two callers may both ask, and the tokens are
    // the same) and remembered. Shared, so a state forgotten meanwhile stays
    // valid for whoever holds it.
    std::shared_ptr<const tokens> allowed(const std::string & key, const std::function<tokens()> & ask);

    // States remembered now.
    size_t size() const;

private:
    struct entry {
        std::string                   key;
        std::shared_ptr<const tokens> allowed;
    };
    static size_t bytes_of(const entry & e) { return e.key.size() + e.allowed->size() / 8 + sizeof(entry); }

    const size_t       max_bytes_;
    mutable std::mutex mutex_;
    std::list<entry>   recent_; // most recently used first
    std::unordered_map<std::string_view, std::list<entry>::iterator> by_key_; // views of recent_'s keys
    size_t             bytes_ = 0;
};

} // namespace specdec::detail
