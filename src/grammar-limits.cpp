#include "grammar-limits.h"

#include "error.h"

#include <cstdint>

namespace specdec::detail {

namespace {

// Skips a quoted literal or character class opened at `i` (`close` ends it,
// backslash escapes the next byte); returns the index after it, or the size
// when it never closes (llama.cpp then reports the error).
size_t skip_quoted(std::string_view s, size_t i, char close) {
    for (++i; i < s.size(); ++i) {
        if (s[i] == '\\') {
            ++i;
        } else if (s[i] == close) {
            return i + 1;
        }
    }
    return s.size();
}

// A decimal number at `i`, saturated at UINT32_MAX; `i` moves past it.
uint64_t read_count(std::string_view s, size_t & i) {
    uint64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        v = v * 10 + static_cast<uint64_t>(s[i] - '0');
        if (v > UINT32_MAX) {
            v = UINT32_MAX;
        }
        ++i;
    }
    return v;
}

} // namespace

void check_grammar_limits(std::string_view s) {
    if (s.size() > SPECDEC_MAX_GRAMMAR_BYTES) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar has ", s.size(), " bytes; at most ", SPECDEC_MAX_GRAMMAR_BYTES,
             " are taken");
    }
    uint64_t depth = 0;
    uint64_t rules = 0;
    for (size_t i = 0; i < s.size();) {
        const char c = s[i];
        size_t next = i + 1;
        if (c == '"' || c == '[' || c == '<') { // a literal, a character class, a token
            next = skip_quoted(s, i, c == '"' ? '"' : c == '[' ? ']' : '>');
        } else if (c == '#') { // a comment, to the end of its line
            next = s.find_first_of("\r\n", i);
            next = next == std::string_view::npos ? s.size() : next;
        } else if (c == '(') {
            ++rules;
            if (++depth > SPECDEC_MAX_GRAMMAR_NESTING) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar nests groups deeper than ", SPECDEC_MAX_GRAMMAR_NESTING,
                     " levels (at byte ", i, ")");
            }
        } else if (c == ')') {
            depth = depth > 0 ? depth - 1 : 0;
        } else if (c == '*' || c == '+' || c == '?') {
            ++rules;
        } else if (c == ':' && s.substr(i, 3) == "::=") {
            ++rules;
            next = i + 3;
        } else if (c == '{') {
            const uint64_t least = read_count(s, next);
            uint64_t most = least;
            if (next < s.size() && s[next] == ',') {
                ++next;
                most = next < s.size() && s[next] >= '0' && s[next] <= '9' ? read_count(s, next) : least;
            }
            rules += most + 1;
        }
        if (rules > SPECDEC_MAX_GRAMMAR_RULES) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar could make more than ", SPECDEC_MAX_GRAMMAR_RULES,
                 " rules (each rule, group, *, + and ? counts one, and {m,n} n + 1)");
        }
        i = next;
    }
}

} // namespace specdec::detail
