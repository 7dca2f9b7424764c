// The tokenizer's C functions on a generated fixture's vocabulary (SPM, as
// fixtures/gguf-builder.cpp writes it: <unk> <s> </s>, the word separator
// U+2581 as id 3, printable ASCII from '!' as ids 4.., then lowercase pairs
// "aa".."bd"; no newline, nothing outside ASCII): token ids and exact counts
// both ways, buffers too small, and text the vocabulary lacks as a typed
// status instead of llama.cpp's exception through its C interface.
#include "harness.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace specdec::test {
namespace {

constexpr llama_token sep = 3; // U+2581: before the text, and for each space

llama_token ascii(char c) {
    return 4 + (c - '!');
}

class TokenizerVocab : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        model = load_model(fixture("llama-target-2-256", [](const std::string & p) { fixtures::write_llama_target(p, {}); }))
                    .release();
    }
    static void TearDownTestSuite() { llama_model_free(model); }

    const llama_vocab * vocab() const { return llama_model_get_vocab(model); }

    // specdec_tokenize in the two calls a C caller makes: the size, then the tokens.
    std::vector<llama_token> tokenize(const std::string & text, bool parse_special = false) const {
        size_t n = 0;
        EXPECT_EQ(specdec_tokenize(vocab(), text.data(), text.size(), true, parse_special, nullptr, 0, &n), SPECDEC_STATUS_OK)
            << specdec_last_error();
        std::vector<llama_token> tokens(n);
        size_t again = 0;
        EXPECT_EQ(specdec_tokenize(vocab(), text.data(), text.size(), true, parse_special, tokens.data(), n, &again),
                  SPECDEC_STATUS_OK);
        EXPECT_EQ(again, n);
        return tokens;
    }

    std::string detokenize(const std::vector<llama_token> & tokens, bool unparse_special = true) const {
        size_t n = 0;
        EXPECT_EQ(specdec_detokenize(vocab(), tokens.data(), tokens.size(), false, unparse_special, nullptr, 0, &n),
                  SPECDEC_STATUS_OK)
            << specdec_last_error();
        std::string text(n, '\0');
        size_t again = 0;
        EXPECT_EQ(specdec_detokenize(vocab(), tokens.data(), tokens.size(), false, unparse_special, text.data(), n, &again),
                  SPECDEC_STATUS_OK);
        EXPECT_EQ(again, n);
        return text;
    }

    std::string piece(llama_token token, int32_t lstrip = 0, bool special = true) const {
        char buf[16];
        size_t n = 0;
        EXPECT_EQ(specdec_token_to_piece(vocab(), token, lstrip, special, buf, sizeof(buf), &n), SPECDEC_STATUS_OK)
            << specdec_last_error();
        return std::string(buf, n);
    }

    static llama_model * model;
};

llama_model * TokenizerVocab::model = nullptr;

TEST_F(TokenizerVocab, TokenIdsAndCounts) {
    // No two of these characters form a token, so each is one.
    EXPECT_EQ(tokenize("1+2=3"), (std::vector<llama_token>{sep, ascii('1'), ascii('+'), ascii('2'), ascii('='), ascii('3')}));
    EXPECT_EQ(tokenize("1 2"), (std::vector<llama_token>{sep, ascii('1'), sep, ascii('2')}));
    EXPECT_EQ(tokenize("ab"), (std::vector<llama_token>{sep, 99})); // "ab" is the second pair
    EXPECT_TRUE(tokenize("").empty());
    // The length decides, not a terminator.
    size_t n = 0;
    EXPECT_EQ(specdec_tokenize(vocab(), "12", 1, true, false, nullptr, 0, &n), SPECDEC_STATUS_OK);
    EXPECT_EQ(n, 2u);
    // parse_special reads "<s>" as token 1, and the text after it gets its separator.
    EXPECT_EQ(tokenize("<s>1", true), (std::vector<llama_token>{1, sep, ascii('1')}));
    EXPECT_EQ(tokenize("<s>1", false), (std::vector<llama_token>{sep, ascii('<'), ascii('s'), ascii('>'), ascii('1')}));
}

TEST_F(TokenizerVocab, TextRoundTrips) {
    for (const std::string text : {"1+2=3", "1 2", "hello world", "{|}~ !", "abba  bd"}) {
        EXPECT_EQ(detokenize(tokenize(text)), text);
    }
    EXPECT_EQ(detokenize({}), "");
    EXPECT_EQ(piece(ascii('a')), "a");
    EXPECT_EQ(piece(99), "ab");
    EXPECT_EQ(piece(sep), " ");
    EXPECT_EQ(piece(sep, 1), "");
    EXPECT_EQ(piece(1), "<s>");
    EXPECT_EQ(piece(1, 0, false), "");
    EXPECT_EQ(detokenize({1, sep, ascii('1')}), "<s> 1");
    // The C++ functions give the same.
    EXPECT_EQ(specdec::tokenize(vocab(), "1 2", true, false), tokenize("1 2"));
    EXPECT_EQ(specdec::detokenize(vocab(), tokenize("hello world"), false, true), "hello world");
    EXPECT_EQ(specdec::token_to_piece(vocab(), 99), "ab");
}

TEST_F(TokenizerVocab, BufferTooSmallReportsTheSizeAndWritesNothing) {
    llama_token tokens[5] = {-7, -7, -7, -7, -7};
    size_t n = 0;
    EXPECT_EQ(specdec_tokenize(vocab(), "1+2=3", 5, true, false, tokens, 5, &n), SPECDEC_STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(n, 6u);
    EXPECT_STREQ(specdec_last_error(), "the buffer holds 5; 6 are needed");
    for (const llama_token t : tokens) {
        EXPECT_EQ(t, -7);
    }
    const std::vector<llama_token> ids = tokenize("hello world");
    char text[10];
    std::memset(text, '#', sizeof(text));
    EXPECT_EQ(specdec_detokenize(vocab(), ids.data(), ids.size(), false, true, text, sizeof(text), &n),
              SPECDEC_STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(n, 11u);
    EXPECT_EQ(std::string(text, sizeof(text)), std::string(sizeof(text), '#'));
    char buf[2] = {'#', '#'};
    EXPECT_EQ(specdec_token_to_piece(vocab(), 1, 0, true, buf, 2, &n), SPECDEC_STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(buf[0], '#');
    // Exactly the size reported is enough.
    char three[3];
    EXPECT_EQ(specdec_token_to_piece(vocab(), 1, 0, true, three, 3, &n), SPECDEC_STATUS_OK);
    EXPECT_EQ(std::string(three, n), "<s>");
}

TEST_F(TokenizerVocab, TextTheVocabularyLacksIsATypedStatus) {
    size_t n = 99;
    llama_token tokens[16];
    const std::string newline = "ab\ncd";
    EXPECT_EQ(specdec_tokenize(vocab(), newline.data(), newline.size(), true, false, tokens, 16, &n),
              SPECDEC_STATUS_UNREPRESENTABLE_TEXT);
    EXPECT_EQ(n, 99u); // not a size: nothing is set
    EXPECT_NE(std::strstr(specdec_last_error(), "the vocabulary cannot represent this text: the character 0x0A at byte 2 "
                                                "has no token"),
              nullptr)
        << specdec_last_error();
    const std::string accent = "caf\xc3\xa9";
    EXPECT_EQ(specdec_tokenize(vocab(), accent.data(), accent.size(), false, false, nullptr, 0, &n),
              SPECDEC_STATUS_UNREPRESENTABLE_TEXT);
    EXPECT_NE(std::strstr(specdec_last_error(), "the character '\xc3\xa9' (0xC3 0xA9) at byte 3 has no token"), nullptr)
        << specdec_last_error();
    // A stray byte that starts no character is named alone.
    const std::string stray = "a\xc3" "b";
    EXPECT_EQ(specdec_tokenize(vocab(), stray.data(), stray.size(), false, false, nullptr, 0, &n),
              SPECDEC_STATUS_UNREPRESENTABLE_TEXT);
    EXPECT_NE(std::strstr(specdec_last_error(), "the character 0xC3 at byte 1"), nullptr) << specdec_last_error();
    try {
        specdec::tokenize(vocab(), newline, true, false);
        ADD_FAILURE() << "no error";
    } catch (const specdec::error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_UNREPRESENTABLE_TEXT);
        EXPECT_EQ(e.kind(), SPECDEC_STATUS_KIND_CONFIGURATION);
    }
    // The vocabulary still tokenizes afterwards.
    EXPECT_EQ(tokenize("1"), (std::vector<llama_token>{sep, ascii('1')}));
}

TEST_F(TokenizerVocab, TokenIdsOutsideTheVocabulary) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab());
    ASSERT_EQ(n_vocab, 128);
    const llama_token ids[3] = {ascii('a'), n_vocab, 5};
    char text[16];
    size_t n = 99;
    EXPECT_EQ(specdec_detokenize(vocab(), ids, 3, false, true, text, sizeof(text), &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_STREQ(specdec_last_error(), "tokens[1] is 128, outside the vocabulary [0, 128)");
    EXPECT_EQ(n, 99u);
    for (const llama_token bad : {-1, n_vocab, LLAMA_TOKEN_NULL}) {
        EXPECT_EQ(specdec_token_to_piece(vocab(), bad, 0, true, text, sizeof(text), &n), SPECDEC_STATUS_INVALID_ARGUMENT);
    }
    EXPECT_STREQ(specdec_last_error(), "token is -1, outside the vocabulary [0, 128)");
}

TEST_F(TokenizerVocab, GrammarPrefixTheVocabularyLacks) {
    auto ctx = make_context(model, {});
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 2;
    gp.grammar = "root ::= [a-z]*";
    gp.grammar_prefix = "\n";
    const llama_token prompt[1] = {ascii('a')};
    const llama_token * prompts[1] = {prompt};
    const size_t sizes[1] = {1};
    specdec_generation * g = nullptr;
    EXPECT_EQ(specdec_generate(nullptr, ctx.get(), prompts, sizes, 1, &gp, nullptr, nullptr, &g),
              SPECDEC_STATUS_UNREPRESENTABLE_TEXT)
        << specdec_last_error();
    EXPECT_EQ(g, nullptr);
}

} // namespace
} // namespace specdec::test
