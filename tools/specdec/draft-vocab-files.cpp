#include "draft-vocab-files.h"

#include "specdec/specdec.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

namespace cli {

namespace {

bool meaningful(const std::string & line) {
    return !line.empty() && line[0] != '#' && line.find_first_not_of(" \t\r") != std::string::npos;
}

// Whether the first line of `path` that is neither a comment nor blank
// starts with `vocabulary` (false for an unreadable file).
bool is_token_counts_file(const std::string & path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (meaningful(line)) {
            std::istringstream words(line);
            std::string first;
            words >> first;
            return first == "vocabulary";
        }
    }
    return false;
}

} // namespace

bool parse_decimal(const std::string & word, uint64_t & out) {
    if (word.empty() || !std::isdigit(static_cast<unsigned char>(word[0]))) {
        return false;
    }
    char * end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(word.c_str(), &end, 10);
    out = static_cast<uint64_t>(v);
    return *end == '\0' && errno == 0;
}

std::optional<std::vector<uint64_t>> read_token_counts(const std::string & path, uint32_t n_vocab, const std::string & option) {
    std::ifstream in(path);
    if (!in || std::filesystem::is_directory(path)) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, option + " " + path + ": cannot be read");
    }
    std::vector<uint64_t> counts(n_vocab, 0);
    uint64_t total = 0;
    bool sized = false;
    bool empty = true;
    std::string line;
    for (uint32_t n_line = 1; std::getline(in, line); ++n_line) {
        const auto bad = [&](const std::string & what) {
            return specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, option + " " + path + ":" + std::to_string(n_line) + ": " + what);
        };
        if (!meaningful(line)) {
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
        if (counts[id] != 0 || count == 0) {
            throw bad(count == 0 ? "token " + a + " has a count of 0 (tokens never counted are not listed)"
                                 : "token " + a + " was counted before");
        }
        if (count > UINT64_MAX - total) {
            throw bad("the counts overflow 64 bits");
        }
        counts[id] = count;
        total += count;
    }
    if (empty) {
        return std::nullopt;
    }
    if (!sized) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, option + " " + path + ": no 'vocabulary N' line (not a counts file?)");
    }
    return counts;
}

std::vector<uint32_t> by_count(const std::vector<uint64_t> & counts) {
    std::vector<uint32_t> ids(counts.size());
    std::iota(ids.begin(), ids.end(), 0u);
    std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return counts[a] > counts[b]; });
    ids.resize(static_cast<size_t>(std::count_if(counts.begin(), counts.end(), [](uint64_t c) { return c > 0; })));
    return ids;
}

std::vector<llama_token> read_ranking_file(const std::string & path, uint32_t n_vocab) {
    if (is_token_counts_file(path)) {
        const std::optional<std::vector<uint64_t>> counts = read_token_counts(path, n_vocab, "--draft-vocab-file");
        const std::vector<uint32_t> ids = counts ? by_count(*counts) : std::vector<uint32_t>{};
        if (ids.empty()) {
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--draft-vocab-file " + path + " counts no token");
        }
        return {ids.begin(), ids.end()};
    }
    std::ifstream in(path);
    if (!in) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--draft-vocab-file " + path + ": cannot be read");
    }
    std::vector<llama_token> ids;
    std::vector<uint32_t> first_line(n_vocab, 0); // line of each id's first use; 0: unused
    std::string line;
    for (uint32_t n_line = 1; std::getline(in, line); ++n_line) {
        std::istringstream words(line.substr(0, line.find('#')));
        std::string word;
        while (words >> word) {
            const auto where = [&] { return "--draft-vocab-file " + path + ":" + std::to_string(n_line) + ": "; };
            uint64_t id = 0;
            if (!parse_decimal(word, id)) {
                throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, where() + "'" + word + "' is not a token id");
            }
            if (id >= n_vocab) {
                throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, where() + "token " + word + " is outside the model's vocabulary of " +
                                                                          std::to_string(n_vocab) + " tokens");
            }
            if (first_line[id] != 0) {
                throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, where() + "token " + word + " was given before, on line " +
                                                                          std::to_string(first_line[id]));
            }
            first_line[id] = n_line;
            ids.push_back(static_cast<llama_token>(id));
        }
    }
    if (ids.empty()) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--draft-vocab-file " + path + " holds no token ids");
    }
    return ids;
}

std::string format_token_counts(const std::vector<uint64_t> & counts, const std::string & comment, size_t top) {
    std::vector<uint32_t> ids = by_count(counts);
    if (top > 0 && ids.size() > top) {
        ids.resize(top);
    }
    std::ostringstream out;
    out << "# " << comment << "\n";
    out << "vocabulary " << counts.size() << "\n";
    for (const uint32_t id : ids) {
        out << id << ' ' << counts[id] << '\n';
    }
    return out.str();
}

void write_file_replacing(const std::string & path, const std::string & text, const std::string & option) {
    const std::string tmp = path + ".tmp";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    std::error_code ec;
    if (out.fail()) {
        std::filesystem::remove(tmp, ec);
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, option + " " + path + ": cannot write " + tmp);
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, option + " " + path + ": cannot replace it (" + ec.message() + ")");
    }
}

} // namespace cli
