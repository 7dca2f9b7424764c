#include "serve-token-counts.h"

#include "draft-vocab-files.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

namespace cli::serve {

namespace {

constexpr uint64_t min_interval = 256;
constexpr uint64_t max_interval = 65536;

} // namespace

token_counts::token_counts(std::string path, uint32_t n_vocab) : path_(std::move(path)), counts_(n_vocab, 0) {
    if (std::filesystem::is_directory(path_)) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "--draft-vocab-counts " + path_ + " is a folder");
    }
    if (!std::filesystem::exists(path_)) {
        save(); // a path that cannot be written fails now, not at the first re-ranking
        return;
    }
    if (std::optional<std::vector<uint64_t>> counts = read_token_counts(path_, n_vocab, "--draft-vocab-counts")) {
        counts_ = std::move(*counts);
        total_ = std::accumulate(counts_.begin(), counts_.end(), uint64_t{0}); // read_token_counts checked the sum fits
    }
}

void token_counts::add(std::span<const llama_token> tokens) {
    for (const llama_token t : tokens) {
        if (t >= 0 && static_cast<size_t>(t) < counts_.size() && total_ < UINT64_MAX) {
            ++counts_[static_cast<size_t>(t)];
            ++total_;
        }
    }
}

std::string token_counts::rank(specdec::session * s, bool force) {
    const uint64_t interval = std::clamp(total_ranked_, min_interval, max_interval);
    if (total_ == 0 || (!force && total_ - total_ranked_ < interval)) {
        return "";
    }
    total_ranked_ = total_;
    std::string line = "draft vocabulary counts: " + std::to_string(total_) + " tokens";
    if (s != nullptr && s->params().draft_vocab > 0) {
        line += ", " + std::to_string(s->rank_draft_vocab(counts_)) + " of the " + std::to_string(s->params().draft_vocab) +
                " drafted entered";
    }
    try {
        save();
    } catch (const specdec::error & e) {
        line += std::string("; ") + e.what();
    }
    return line;
}

void token_counts::save() const {
    write_file_replacing(path_, format_token_counts(counts_, "specdec serve --draft-vocab-counts: the tokens the server generated, most first (token id, count)"),
                         "--draft-vocab-counts");
}

} // namespace cli::serve
