#include "grammar-memo.h"

namespace specdec::detail {

std::shared_ptr<const grammar_memo::tokens> grammar_memo::allowed(const std::string & key, const std::function<tokens()> & ask) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (const auto it = by_key_.find(key); it != by_key_.end()) {
            recent_.splice(recent_.begin(), recent_, it->second);
            return it->second->allowed;
        }
    }
    auto made = std::make_shared<const tokens>(ask());
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = by_key_.find(key); it != by_key_.end()) {
        return it->second->allowed; // asked meanwhile by another caller: the same tokens
    }
    recent_.push_front({key, made});
    by_key_.emplace(recent_.front().key, recent_.begin());
    bytes_ += bytes_of(recent_.front());
    while (bytes_ > max_bytes_ && recent_.size() > 1) {
        bytes_ -= bytes_of(recent_.back());
        by_key_.erase(std::string_view(recent_.back().key));
        recent_.pop_back();
    }
    return made;
}

size_t grammar_memo::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return recent_.size();
}

} // namespace specdec::detail
