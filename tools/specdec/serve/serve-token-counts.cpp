#include "serve-token-counts.h"

#include "cli-common.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

namespace cli::serve {

namespace {

constexpr uint64_t min_interval = 256;
constexpr uint64_t max_interval = 65536;

} // namespace

token_counts::token_counts(std::string path, uint32_t n_vocab) : path_(std::move(path)), counts_(n_vocab, 0) {
    if (std::filesystem::is_directory(path_)) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "--draft-vocab-counts " + path_ + " is a folder");
    }
    std::ifstream in(path_);
    if (!in) {
        if (std::filesystem::exists(path_)) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "--draft-vocab-counts " + path_ + ": cannot be read");
        }
        save(); // a path that cannot be written fails now, not at the first re-ranking
        return;
    }
    bool sized = false;
    bool empty = true; // nothing but comments and blank lines: no counts yet
    std::string line;
    for (uint32_t n_line = 1; std::getline(in, line); ++n_line) {
        const auto bad = [&](const std::string & what) {
            return specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT,
                                  "--draft-vocab-counts " + path_ + ":" + std::to_string(n_line) + ": " + what);
        };
        if (line.empty() || line[0] == '#') {
            continue;
        }
        empty = false;
        std::istringstream words(line);
        std::string a, b, extra;
        words >> a >> b >> extra;
        if (!sized) {
            uint64_t n = 0;
            if (a != "vocabulary" || !parse_decimal(b, n) || !extra.empty()) {
                throw bad("expected 'vocabulary N' before the counts, not '" + line + "'");
            }
            if (n != n_vocab) {
                throw bad("counted over a vocabulary of " + b + " tokens, but the model's has " + std::to_string(n_vocab));
            }
            sized = true;
            continue;
        }
        uint64_t id = 0, count = 0;
        if (!parse_decimal(a, id) || !parse_decimal(b, count) || !extra.empty()) {
            throw bad("expected 'TOKEN_ID COUNT', not '" + line + "'");
        }
        if (id >= n_vocab) {
            throw bad("token " + a + " is outside the vocabulary of " + std::to_string(n_vocab) + " tokens");
        }
        if (counts_[id] != 0 || count == 0) {
            throw bad(count == 0 ? "token " + a + " has a count of 0 (tokens never generated are not listed)"
                                 : "token " + a + " was counted before");
        }
        if (count > UINT64_MAX - total_) {
            throw bad("the counts overflow 64 bits");
        }
        counts_[id] = count;
        total_ += count;
    }
    if (!sized && !empty) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--draft-vocab-counts " + path_ +
                                                                  ": no 'vocabulary N' line (not a counts file?)");
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
    std::vector<uint32_t> ids(counts_.size());
    std::iota(ids.begin(), ids.end(), 0u);
    std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return counts_[a] > counts_[b]; });
    const std::string tmp = path_ + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << "# specdec serve --draft-vocab-counts: the tokens the server generated, most first (token id, count)\n";
        out << "vocabulary " << counts_.size() << "\n";
        for (const uint32_t id : ids) {
            if (counts_[id] == 0) {
                break;
            }
            out << id << ' ' << counts_[id] << '\n';
        }
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "--draft-vocab-counts " + path_ + ": cannot write " + tmp);
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path_, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "--draft-vocab-counts " + path_ + ": cannot replace it (" + ec.message() + ")");
    }
}

} // namespace cli::serve
