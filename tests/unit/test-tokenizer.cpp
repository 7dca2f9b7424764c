// The tokenizer's C functions without a model: every argument is checked
// before llama.cpp could read the vocabulary, and the new statuses have
// their names and kind. tests/model/test-tokenizer-vocab.cpp has the rest.
#include "specdec/specdec.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

namespace {

// Never read: every call below fails before the vocabulary is touched.
const llama_vocab * const unread_vocab = reinterpret_cast<const llama_vocab *>(static_cast<uintptr_t>(64));

bool error_says(const char * part) {
    return std::strstr(specdec_last_error(), part) != nullptr;
}

TEST(Tokenizer, StatusesAreConfigurationErrors) {
    EXPECT_STREQ(specdec_status_name(SPECDEC_STATUS_UNREPRESENTABLE_TEXT), "UNREPRESENTABLE_TEXT");
    EXPECT_STREQ(specdec_status_name(SPECDEC_STATUS_BUFFER_TOO_SMALL), "BUFFER_TOO_SMALL");
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_UNREPRESENTABLE_TEXT), SPECDEC_STATUS_KIND_CONFIGURATION);
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_BUFFER_TOO_SMALL), SPECDEC_STATUS_KIND_CONFIGURATION);
}

TEST(Tokenizer, TokenizeRefusesBadArguments) {
    llama_token ids[4] = {7, 7, 7, 7};
    size_t n = 99;
    EXPECT_EQ(specdec_tokenize(nullptr, "ab", 2, true, false, ids, 4, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("vocab must not be NULL")) << specdec_last_error();
    EXPECT_EQ(specdec_tokenize(unread_vocab, "ab", 2, true, false, ids, 4, nullptr), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("n_tokens")) << specdec_last_error();
    EXPECT_EQ(specdec_tokenize(unread_vocab, nullptr, 2, true, false, ids, 4, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("text")) << specdec_last_error();
    EXPECT_EQ(specdec_tokenize(unread_vocab, "ab", 2, true, false, nullptr, 4, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("tokens is NULL but its capacity is 4")) << specdec_last_error();
    // llama.cpp takes the length as int32_t.
    const size_t too_long = static_cast<size_t>(INT32_MAX) + 1;
    EXPECT_EQ(specdec_tokenize(unread_vocab, "ab", too_long, true, false, ids, 4, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("INT32_MAX")) << specdec_last_error();
    // Failed calls leave the outputs alone.
    EXPECT_EQ(n, 99u);
    EXPECT_EQ(ids[0], 7);
}

TEST(Tokenizer, DetokenizeRefusesBadArguments) {
    const llama_token ids[2] = {5, 6};
    char text[8] = "unset";
    size_t n = 99;
    EXPECT_EQ(specdec_detokenize(nullptr, ids, 2, false, true, text, sizeof text, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("vocab must not be NULL")) << specdec_last_error();
    EXPECT_EQ(specdec_detokenize(unread_vocab, ids, 2, false, true, text, sizeof text, nullptr), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("n_bytes")) << specdec_last_error();
    EXPECT_EQ(specdec_detokenize(unread_vocab, nullptr, 2, false, true, text, sizeof text, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("tokens")) << specdec_last_error();
    EXPECT_EQ(specdec_detokenize(unread_vocab, ids, 2, false, true, nullptr, 8, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("text is NULL but its capacity is 8")) << specdec_last_error();
    EXPECT_EQ(specdec_detokenize(unread_vocab, ids, static_cast<size_t>(INT32_MAX) + 1, false, true, text, sizeof text, &n),
              SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("INT32_MAX")) << specdec_last_error();
    EXPECT_EQ(n, 99u);
    EXPECT_STREQ(text, "unset");
}

TEST(Tokenizer, TokenToPieceRefusesBadArguments) {
    char piece[8] = "unset";
    size_t n = 99;
    EXPECT_EQ(specdec_token_to_piece(nullptr, 5, 0, true, piece, sizeof piece, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("vocab must not be NULL")) << specdec_last_error();
    EXPECT_EQ(specdec_token_to_piece(unread_vocab, 5, 0, true, piece, sizeof piece, nullptr), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(specdec_token_to_piece(unread_vocab, 5, 0, true, nullptr, 8, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("piece is NULL but its capacity is 8")) << specdec_last_error();
    EXPECT_EQ(specdec_token_to_piece(unread_vocab, 5, -1, true, piece, sizeof piece, &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(error_says("lstrip is -1")) << specdec_last_error();
    EXPECT_EQ(n, 99u);
    EXPECT_STREQ(piece, "unset");
}

} // namespace
