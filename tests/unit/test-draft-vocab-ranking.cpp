// The tokenizer's ranking for a restricted draft vocabulary on real
// vocabularies: the vocabulary-only GGUF files of Qwen2/Qwen3 (BPE, 151,936
// tokens) and of LLaMA's SentencePiece tokenizer that the pinned llama.cpp
// tree carries under models/. The ranking holds every id once, puts the
// end-of-generation tokens first, and then orders BPE pieces by id (merge
// order) and SentencePiece pieces by score; common English and code fall
// within Qwen's first 16,384.
//
// A measurement, not a check (run with --gtest_also_run_disabled_tests):
// how much of real text the ranking's first N tokens hold, per file, for
// the vocabulary SPECDEC_RANKING_VOCAB names (any GGUF; only its vocabulary
// is read) and the text files in SPECDEC_RANKING_TEXT (separated by ':');
// with SPECDEC_RANKING_COUNTED (files, the same way), also for a ranking
// counted from those files' tokens, as a draft_vocab_ranking file or the
// server's counts would rank them (the tokenizer's order for ties).
#include "draft-vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using model_ptr = std::unique_ptr<llama_model, decltype(&llama_model_free)>;

model_ptr load_vocab(const std::string & path) {
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    return {llama_model_load_from_file(path.c_str(), mp), &llama_model_free};
}

std::string llama_vocab_file(const char * name) {
    return std::string(SPECDEC_LLAMA_MODELS_DIR) + "/ggml-vocab-" + name + ".gguf";
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text) {
    std::vector<llama_token> out(text.size() + 16);
    const int32_t n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(),
                                     static_cast<int32_t>(out.size()), false, false);
    out.resize(static_cast<size_t>(std::max(n, 0)));
    return out;
}

// place[t]: token t's position in the ranking.
std::vector<int32_t> places(const std::vector<llama_token> & ranking) {
    std::vector<int32_t> place(ranking.size(), -1);
    for (size_t i = 0; i < ranking.size(); ++i) {
        place[static_cast<size_t>(ranking[i])] = static_cast<int32_t>(i);
    }
    return place;
}

class RealVocab : public ::testing::TestWithParam<const char *> {};

TEST_P(RealVocab, RanksEveryIdOnceEndOfGenerationFirst) {
    const model_ptr model = load_vocab(llama_vocab_file(GetParam()));
    ASSERT_NE(model, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const std::vector<llama_token> ranking = specdec::detail::tokenizer_ranking(vocab);
    ASSERT_EQ(ranking.size(), static_cast<size_t>(n_vocab));
    const std::vector<int32_t> place = places(ranking);
    EXPECT_EQ(std::count(place.begin(), place.end(), -1), 0) << "an id the ranking lacks";
    int32_t n_eog = 0;
    for (llama_token t = 0; t < n_vocab; ++t) {
        n_eog += llama_vocab_is_eog(vocab, t) ? 1 : 0;
    }
    ASSERT_GT(n_eog, 0);
    for (int32_t i = 0; i < n_eog; ++i) {
        EXPECT_TRUE(llama_vocab_is_eog(vocab, ranking[static_cast<size_t>(i)])) << "entry " << i;
    }
    // Normal pieces by id (BPE: merge order), or by score (SentencePiece).
    const bool spm = llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_SPM;
    const auto key = [&](llama_token t) {
        return std::pair<float, llama_token>(spm ? -llama_vocab_get_score(vocab, t) : 0.0f, t);
    };
    std::pair<float, llama_token> prev{-1e30f, -1};
    int32_t n_normal = 0;
    for (const llama_token t : ranking) {
        const auto attr = static_cast<uint32_t>(llama_vocab_get_attr(vocab, t));
        if ((attr & LLAMA_TOKEN_ATTR_NORMAL) == 0 || (attr & LLAMA_TOKEN_ATTR_USER_DEFINED) != 0 || llama_vocab_is_eog(vocab, t)) {
            continue;
        }
        EXPECT_LT(prev, key(t)) << "token " << prev.second << " before " << t;
        prev = key(t);
        ++n_normal;
    }
    EXPECT_GT(n_normal, n_vocab / 2);
}

TEST(RealVocabQwen, CommonEnglishAndCodeRankEarly) {
    const model_ptr model = load_vocab(llama_vocab_file("qwen2"));
    ASSERT_NE(model, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const std::vector<int32_t> place = places(specdec::detail::tokenizer_ranking(vocab));
    const std::string text = "The function returns the number of items in the list.\n"
                             "for (int i = 0; i < n; i = i + 1) {\n    sum += values[i];\n}\n";
    const std::vector<llama_token> tokens = tokenize(vocab, text);
    ASSERT_GT(tokens.size(), 20u);
    for (const llama_token t : tokens) {
        EXPECT_LT(place[static_cast<size_t>(t)], 16384) << "token " << t << " '" << llama_vocab_get_text(vocab, t) << "' of the text";
    }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, RealVocab, ::testing::Values("qwen2", "llama-spm"));

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

std::vector<std::string> split_paths(const char * paths) {
    std::vector<std::string> out;
    std::stringstream list(paths != nullptr ? paths : "");
    std::string path;
    while (std::getline(list, path, ':')) {
        out.push_back(path);
    }
    return out;
}

// One line per file: its tokens, then for each N the share of them inside
// the ranking's first N and the share of `chain`-token runs wholly inside
// (a draft of that length can be kept whole only there).
void print_coverage(const char * name, const std::vector<int32_t> & place, const std::string & path,
                    const std::vector<llama_token> & tokens) {
    constexpr size_t chain = 4;
    std::printf("[ measured ] %s ranking, %s: %zu tokens", name, path.c_str(), tokens.size());
    for (const int32_t n : {8192, 16384, 32768, 65536}) {
        size_t inside = 0;
        size_t runs = 0;
        size_t run = 0; // inside tokens ending here
        for (const llama_token t : tokens) {
            const bool in_subset = place[static_cast<size_t>(t)] < n;
            inside += in_subset ? 1 : 0;
            run = in_subset ? run + 1 : 0;
            runs += run >= chain ? 1 : 0;
        }
        std::printf(" | %d: %.3f %.3f", n, static_cast<double>(inside) / static_cast<double>(tokens.size()),
                    tokens.size() >= chain ? static_cast<double>(runs) / static_cast<double>(tokens.size() - chain + 1) : 0.0);
    }
    std::printf("\n");
}

TEST(RankingCoverage, DISABLED_ShareOfTextInsideTheFirstN) {
    const char * vocab_path = std::getenv("SPECDEC_RANKING_VOCAB");
    const char * text_paths = std::getenv("SPECDEC_RANKING_TEXT");
    if (vocab_path == nullptr || text_paths == nullptr) {
        GTEST_SKIP() << "set SPECDEC_RANKING_VOCAB and SPECDEC_RANKING_TEXT";
    }
    const model_ptr model = load_vocab(vocab_path);
    ASSERT_NE(model, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const std::vector<llama_token> by_tokenizer = specdec::detail::tokenizer_ranking(vocab);
    std::vector<uint64_t> counts(static_cast<size_t>(n_vocab), 0);
    uint64_t n_counted = 0;
    for (const std::string & path : split_paths(std::getenv("SPECDEC_RANKING_COUNTED"))) {
        for (const llama_token t : tokenize(vocab, read_file(path))) {
            ++counts[static_cast<size_t>(t)];
            ++n_counted;
        }
    }
    std::printf("[ measured ] vocabulary %d tokens; per file: tokens, then for N = 8192, 16384, 32768, 65536 the share "
                "of tokens inside the first N and the share of 4-token runs wholly inside; %llu tokens counted\n",
                n_vocab, static_cast<unsigned long long>(n_counted));
    for (const std::string & path : split_paths(text_paths)) {
        const std::vector<llama_token> tokens = tokenize(vocab, read_file(path));
        print_coverage("tokenizer", places(by_tokenizer), path, tokens);
        if (n_counted > 0) {
            print_coverage("counted", places(specdec::detail::top_by_count(counts, by_tokenizer, n_vocab)), path, tokens);
        }
    }
}

} // namespace
