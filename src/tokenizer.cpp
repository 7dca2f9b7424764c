// llama.cpp's tokenizer behind checks: every argument llama.cpp would
// abort or throw on is refused first, and what it still throws becomes a
// specdec::error. In llama.cpp v0.5.0, llama_tokenize throws std::out_of_range
// through its C interface for a byte the vocabulary has no token for (not
// even a byte token), and llama_token_to_piece and llama_detokenize do for
// an id outside the vocabulary.
#include "specdec/specdec.hpp"

#include "error.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <new>
#include <unordered_set>
#include <utility>

namespace specdec {

namespace {

using detail::fail;

void require_vocab(const llama_vocab * vocab) {
    if (vocab == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "vocab must not be NULL");
    }
}

// llama.cpp asserts (aborts) where a vocabulary asks for a special token it
// lacks, and on a vocabulary of type none.
void require_tokenizer(const llama_vocab * vocab, bool add_special) {
    if (llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_NONE) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the model has no vocabulary (tokenizer.ggml.model is \"none\")");
    }
    if (!add_special) {
        return;
    }
    const struct {
        bool        added;
        llama_token token;
        const char * name;
    } specials[] = {
        {llama_vocab_get_add_bos(vocab), llama_vocab_bos(vocab), "BOS"},
        {llama_vocab_get_add_eos(vocab), llama_vocab_eos(vocab), "EOS"},
        {llama_vocab_get_add_sep(vocab), llama_vocab_sep(vocab), "SEP"},
    };
    for (const auto & s : specials) {
        if (s.added && s.token == LLAMA_TOKEN_NULL) {
            fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the vocabulary adds a ", s.name,
                 " token but has none (tokenize with add_special false)");
        }
    }
}

// `what` names the token in the message ("token", "tokens[3]").
template <typename... What>
void require_token(int32_t n_vocab, llama_token token, What &&... what) {
    if (token < 0 || token >= n_vocab) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, std::forward<What>(what)..., " is ", token, ", outside the vocabulary [0, ",
             n_vocab, ")");
    }
}

int32_t int32_size(size_t n, const char * what) {
    if (n > static_cast<size_t>(INT32_MAX)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, n, " ", what, ": above INT32_MAX (llama.cpp's limit)");
    }
    return static_cast<int32_t>(n);
}

// The UTF-8 character at the start of `s`, or its first byte alone where
// no well-formed character starts.
std::string_view utf8_character(std::string_view s) {
    const auto lead = static_cast<unsigned char>(s[0]);
    const size_t n = (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 1;
    if (n > s.size()) {
        return s.substr(0, 1);
    }
    for (size_t i = 1; i < n; ++i) {
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
            return s.substr(0, 1);
        }
    }
    return s.substr(0, n);
}

// Whether llama.cpp tokenizes `text` without throwing (a count query: it
// writes nothing).
bool tokenizes(const llama_vocab * vocab, std::string_view text) {
    try {
        llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), nullptr, 0, false, false);
        return true;
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception &) {
        return false;
    }
}

// Names the first character of `text` that the vocabulary cannot tokenize
// alone ("" when each can: then only their context fails). Each distinct
// character is tried once, so the cost is bounded by the text's alphabet.
std::string first_unrepresentable(const llama_vocab * vocab, std::string_view text) {
    std::unordered_set<std::string_view> tried;
    for (size_t i = 0; i < text.size();) {
        const std::string_view c = utf8_character(text.substr(i));
        if (tried.insert(c).second && !tokenizes(vocab, c)) {
            std::string bytes;
            for (const char b : c) {
                char hex[8];
                std::snprintf(hex, sizeof(hex), "%s0x%02X", bytes.empty() ? "" : " ", static_cast<unsigned char>(b));
                bytes += hex;
            }
            const bool printable = c.size() > 1 || (c[0] > ' ' && c[0] < 0x7F);
            return detail::concat(": the character ", printable ? "'" + std::string(c) + "' (" + bytes + ")" : bytes,
                                  " at byte ", i, " has no token");
        }
        i += c.size();
    }
    return {};
}

} // namespace

std::vector<llama_token> tokenize(const llama_vocab * vocab, std::string_view text, bool add_special, bool parse_special) {
    require_vocab(vocab);
    const int32_t n_text = int32_size(text.size(), "bytes of text");
    require_tokenizer(vocab, add_special);
    const char * data = text.empty() ? "" : text.data();
    // A guess that fits most text (a token per byte, and BOS and EOS).
    std::vector<llama_token> tokens(text.size() + 2);
    try {
        int32_t n = llama_tokenize(vocab, data, n_text, tokens.data(), static_cast<int32_t>(tokens.size()), add_special,
                                   parse_special);
        if (n == INT32_MIN) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the text has more than INT32_MAX tokens");
        }
        if (n < 0) { // -n: the count it needs
            tokens.resize(static_cast<size_t>(-static_cast<int64_t>(n)));
            n = llama_tokenize(vocab, data, n_text, tokens.data(), static_cast<int32_t>(tokens.size()), add_special,
                               parse_special);
        }
        tokens.resize(static_cast<size_t>(std::max(n, 0)));
    } catch (const error &) {
        throw;
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception & e) {
        fail(SPECDEC_STATUS_UNREPRESENTABLE_TEXT, "the vocabulary cannot represent this text",
             first_unrepresentable(vocab, text), " (llama.cpp: ", e.what(), ")");
    }
    return tokens;
}

std::string detokenize(const llama_vocab * vocab, std::span<const llama_token> tokens, bool remove_special,
                       bool unparse_special) {
    require_vocab(vocab);
    const int32_t n_tokens = int32_size(tokens.size(), "tokens");
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    for (size_t i = 0; i < tokens.size(); ++i) {
        require_token(n_vocab, tokens[i], "tokens[", i, "]");
    }
    static const llama_token none[1] = {LLAMA_TOKEN_NULL}; // llama.cpp reads nothing through it
    const llama_token * ids = tokens.empty() ? none : tokens.data();
    // A guess that fits most text; llama.cpp reports the size when it does not.
    std::string text(std::min<size_t>(tokens.size() * 8 + 16, INT32_MAX), '\0');
    try {
        int32_t n = llama_detokenize(vocab, ids, n_tokens, text.data(), static_cast<int32_t>(text.size()), remove_special,
                                     unparse_special);
        if (n < 0) {
            text.resize(static_cast<size_t>(-static_cast<int64_t>(n)));
            n = llama_detokenize(vocab, ids, n_tokens, text.data(), static_cast<int32_t>(text.size()), remove_special,
                                 unparse_special);
        }
        if (n < 0) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the text of these tokens is above INT32_MAX bytes");
        }
        text.resize(static_cast<size_t>(n));
    } catch (const error &) {
        throw;
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception & e) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama_detokenize failed: ", e.what());
    }
    return text;
}

std::string token_to_piece(const llama_vocab * vocab, llama_token token, int32_t lstrip, bool special) {
    require_vocab(vocab);
    if (lstrip < 0) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "lstrip is ", lstrip, "; it must be >= 0");
    }
    require_token(llama_vocab_n_tokens(vocab), token, "token");
    std::string piece(15, '\0'); // most pieces fit libstdc++'s in-place buffer: no allocation
    try {
        int32_t n = llama_token_to_piece(vocab, token, piece.data(), static_cast<int32_t>(piece.size()), lstrip, special);
        if (n < 0) {
            piece.resize(static_cast<size_t>(-static_cast<int64_t>(n)));
            n = llama_token_to_piece(vocab, token, piece.data(), static_cast<int32_t>(piece.size()), lstrip, special);
        }
        piece.resize(static_cast<size_t>(std::max(n, 0)));
    } catch (const std::bad_alloc &) {
        throw;
    } catch (const std::exception & e) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama_token_to_piece failed for token ", token, ": ", e.what());
    }
    return piece;
}

} // namespace specdec
