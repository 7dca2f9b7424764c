// Two ways specdec applies a grammar without asking llama.cpp about every
// token of the vocabulary at every row, each against asking it, on real
// vocabularies: the vocabulary-only GGUF files of Qwen2/Qwen3 (BPE, 151,936
// tokens, pieces that split UTF-8 characters) and LLaMA's SentencePiece
// tokenizer (32,000), which the pinned llama.cpp tree carries under models/.
// - The greedy choice (logit_shaper::best_allowed) against masking (apply()
//   and the lowest id of the highest logit). Grammars: JSON, digits, a
//   choice of words, Greek letters. At each of several states of each
//   grammar the logits are random and distinct; tied, with some at
//   -infinity; such that every token the grammar allows ranks below every
//   token it refuses (the search reaches the vocabulary's end); with only
//   one allowed token finite; and with none (both refuse with
//   INVALID_ARGUMENT).
// - The tokens each grammar state allows, remembered in a memo that every
//   request of an engine shares (apply()), against a shaper that never met
//   the state.
#include "logit-shaping.h"
#include "specdec/specdec.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using specdec::detail::grammar_memo;
using specdec::detail::logit_shaper;
using model_ptr = std::unique_ptr<llama_model, decltype(&llama_model_free)>;

model_ptr load_vocab(const char * name) {
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    const std::string path = std::string(SPECDEC_LLAMA_MODELS_DIR) + "/ggml-vocab-" + name + ".gguf";
    return {llama_model_load_from_file(path.c_str(), mp), &llama_model_free};
}

const char * const json_grammar = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= | " " | "\n" [ \t]{0,20})";

// apply()'s greedy choice: the lowest id of the highest logit; none when
// apply() refuses (the grammar allows no token with a finite logit).
std::optional<llama_token> masked_choice(logit_shaper & s, const std::vector<float> & logits) {
    try {
        const float * m = s.apply(logits.data());
        return static_cast<llama_token>(std::max_element(m, m + logits.size()) - m);
    } catch (const specdec::error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_INVALID_ARGUMENT);
        return std::nullopt;
    }
}

std::optional<llama_token> searched_choice(logit_shaper & s, const std::vector<float> & logits) {
    try {
        s.shape(logits.data());
        return s.best_allowed();
    } catch (const specdec::error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_INVALID_ARGUMENT);
        return std::nullopt;
    }
}

class GrammarChoice : public ::testing::TestWithParam<const char *> {};

TEST_P(GrammarChoice, SearchingTheRankingChoosesWhatMaskingTheVocabularyChooses) {
    const model_ptr model = load_vocab(GetParam());
    ASSERT_NE(model, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> wide(-10.0f, 10.0f);
    int compared = 0;
    int refused = 0;
    for (const char * grammar : {json_grammar, "root ::= [0-9]+ \".\"", "root ::= \"yes\" | \"no\" | \"maybe\"",
                                 "root ::= [α-ω]+ \" \""}) {
        SCOPED_TRACE(grammar);
        specdec_generate_params p = specdec_generate_default_params();
        p.grammar = grammar;
        grammar_memo memo;
        logit_shaper shaper(p, vocab, n_vocab, memo);
        for (int step = 0; step < 6; ++step) {
            SCOPED_TRACE("step " + std::to_string(step));
            std::vector<float> zero(static_cast<size_t>(n_vocab), 0.0f);
            const float * m = shaper.apply(zero.data());
            std::vector<bool> allowed(static_cast<size_t>(n_vocab));
            for (int32_t t = 0; t < n_vocab; ++t) {
                allowed[static_cast<size_t>(t)] = m[t] != -INFINITY;
            }
            std::vector<std::vector<float>> cases(5, std::vector<float>(static_cast<size_t>(n_vocab)));
            std::vector<llama_token> allowed_ids;
            for (int32_t t = 0; t < n_vocab; ++t) {
                const auto i = static_cast<size_t>(t);
                cases[0][i] = wide(rng);                                                          // distinct
                cases[1][i] = rng() % 20 == 0 ? -INFINITY : static_cast<float>(rng() % 3);        // tied
                cases[2][i] = allowed[i] ? -20.0f + static_cast<float>(rng() % 3) : wide(rng);    // allowed rank last
                cases[3][i] = allowed[i] ? -INFINITY : wide(rng);                                 // one allowed finite
                cases[4][i] = allowed[i] ? -INFINITY : wide(rng);                                 // none allowed finite
                if (allowed[i]) {
                    allowed_ids.push_back(t);
                }
            }
            ASSERT_FALSE(allowed_ids.empty());
            cases[3][static_cast<size_t>(allowed_ids[rng() % allowed_ids.size()])] = -15.0f;
            for (size_t c = 0; c < cases.size(); ++c) {
                SCOPED_TRACE("case " + std::to_string(c));
                const std::optional<llama_token> want = masked_choice(shaper, cases[c]);
                EXPECT_EQ(searched_choice(shaper, cases[c]), want);
                EXPECT_EQ(want.has_value(), c != 4);
                ++compared;
                refused += want.has_value() ? 0 : 1;
            }
            // On along the grammar: the choice from the distinct logits.
            const std::optional<llama_token> next = masked_choice(shaper, cases[0]);
            ASSERT_TRUE(next.has_value());
            if (llama_vocab_is_eog(vocab, *next)) {
                break;
            }
            shaper.accept(*next);
        }
    }
    EXPECT_GE(compared, 4 * 5);
    EXPECT_GE(refused, 4);
}

// The tokens a grammar state allows are asked of llama.cpp the first time
// any request meets the state and remembered after (grammar_memo). At every
// step of a walk along each grammar, apply() must mask as a shaper that
// never met a state does: one made afresh, with a memo of its own, and given
// the same tokens. So must a second request that reads the same tokens
// later (asking llama.cpp about no new state), and one whose memo keeps a
// single state. Two of the grammars have the same rules over other
// characters, so that only the grammar's text tells their states apart.
// The walks come back to states (within strings, numbers, between items).
// One reads the first byte of a two-byte character, which leaves the
// grammar's stacks as they were and changes only its partly read
// character; in another every state is one stack one element deep, told
// apart only by where that element points.
TEST_P(GrammarChoice, RememberedStatesAllowWhatAskingLlamaCppAllows) {
    const model_ptr model = load_vocab(GetParam());
    ASSERT_NE(model, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const auto token_of = [&](const std::string & piece) {
        for (llama_token t = 0; t < n_vocab; ++t) {
            char buf[8];
            const int32_t n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, true);
            if (n == static_cast<int32_t>(piece.size()) && std::string(buf, static_cast<size_t>(n)) == piece) {
                return t;
            }
        }
        return LLAMA_TOKEN_NULL;
    };
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> wide(-10.0f, 10.0f);
    struct walk {
        const char *             grammar;
        std::vector<std::string> start; // the pieces read before the random steps
    };
    const walk walks[] = {
        {json_grammar, {}},
        {"root ::= [0-9]+ \".\"", {}},
        {"root ::= [a-z]+ \".\"", {}}, // the rules of the one before, other characters: only the grammar's text tells them apart
        {"root ::= [α-ω]+ \" \"", {"\xce", "\xb1", "\xce"}}, // 'α' is CE B1
        {"root ::= \"x\" [0-9] \"y\" [a-z] \"z\"", {"x", "5", "y"}}, // one stack each time, one element deep
    };
    grammar_memo shared; // every walker's, as an engine's requests share one
    grammar_memo small(1); // keeps only the state last asked
    int steps = 0;
    for (const walk & w : walks) {
        SCOPED_TRACE(w.grammar);
        std::vector<llama_token> start;
        for (const std::string & piece : w.start) {
            start.push_back(token_of(piece));
            ASSERT_NE(start.back(), LLAMA_TOKEN_NULL) << "no token reads as " << piece;
        }
        specdec_generate_params p = specdec_generate_default_params();
        p.grammar = w.grammar;
        // A request walks; a second one, later, reads the same tokens with
        // what the first left in the memo; a third forgets at every state.
        logit_shaper walker(p, vocab, n_vocab, shared);
        std::vector<llama_token> read;
        std::vector<std::vector<float>> seen;
        const auto same_as_fresh = [&](logit_shaper & s, const std::vector<float> & logits) {
            const float * got = s.apply(logits.data());
            grammar_memo own;
            logit_shaper fresh(p, vocab, n_vocab, own);
            for (size_t i = 0; i < seen.size() - 1; ++i) {
                fresh.accept(read[i]);
            }
            const float * want = fresh.apply(logits.data());
            int32_t differ = 0;
            for (int32_t t = 0; t < n_vocab; ++t) {
                differ += got[t] == want[t] ? 0 : 1;
            }
            return differ;
        };
        for (int step = 0; step < 24; ++step) {
            SCOPED_TRACE("after " + std::to_string(read.size()) + " tokens");
            std::vector<float> logits(static_cast<size_t>(n_vocab));
            for (float & l : logits) {
                l = wide(rng);
            }
            seen.push_back(logits);
            EXPECT_EQ(same_as_fresh(walker, logits), 0);
            ++steps;
            std::vector<llama_token> allowed;
            const float * m = walker.apply(logits.data());
            for (int32_t t = 0; t < n_vocab; ++t) {
                if (m[t] != -INFINITY) {
                    allowed.push_back(t);
                }
            }
            const llama_token next = read.size() < start.size() ? start[read.size()] : allowed[rng() % allowed.size()];
            if (llama_vocab_is_eog(vocab, next)) {
                break;
            }
            walker.accept(next);
            read.push_back(next);
        }
        const size_t remembered = shared.size();
        logit_shaper later(p, vocab, n_vocab, shared);
        logit_shaper forgetful(p, vocab, n_vocab, small);
        const std::vector<std::vector<float>> walked = std::move(seen);
        seen.clear();
        for (size_t i = 0; i < walked.size(); ++i) {
            SCOPED_TRACE("again, after " + std::to_string(i) + " tokens");
            seen.push_back(walked[i]);
            EXPECT_EQ(same_as_fresh(later, walked[i]), 0);
            EXPECT_EQ(same_as_fresh(forgetful, walked[i]), 0);
            if (i < read.size()) {
                later.accept(read[i]);
                forgetful.accept(read[i]);
            }
        }
        EXPECT_EQ(shared.size(), remembered) << "the second request met no state the first had not";
        EXPECT_EQ(small.size(), 1u);
    }
    EXPECT_GE(steps, 24);
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, GrammarChoice, ::testing::Values("qwen2", "llama-spm"));

} // namespace
