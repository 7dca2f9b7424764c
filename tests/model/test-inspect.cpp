// GGUF inspection, pair checks and strategy detection from metadata alone,
// on generated fixtures and on malformed files (typed errors, never an abort).
#include "gguf-builder.h"
#include "harness.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

namespace specdec::test {
namespace {

using fixtures::drafter_kind;

std::string llama_file(const fixtures::fixture_options & opt = {}) {
    return fixture("llama-target-" + std::to_string(opt.n_layer) + "-" + std::to_string(opt.n_embd),
                   [&](const std::string & p) { fixtures::write_llama_target(p, opt); });
}
std::string qwen35_file() {
    return fixture("qwen35-mtp-exact", [](const std::string & p) { fixtures::write_qwen35_mtp(p, {}); });
}
std::string eagle3_file(const fixtures::fixture_options & opt = {}) {
    return fixture("eagle3-exact-" + std::to_string(opt.n_layer) + "-" + std::to_string(opt.n_embd),
                   [&](const std::string & p) { fixtures::write_eagle3_draft(p, opt); });
}
std::string dflash_file(bool v2) {
    const std::string name = v2 ? "dflash2" : "dflash";
    return fixture(name + "-exact-2-256", [&](const std::string & p) { fixtures::write_dflash_draft(p, {}, v2); });
}

specdec_model_info inspect(const std::string & path) {
    specdec_model_info info{};
    EXPECT_EQ(specdec_inspect(path.c_str(), &info), SPECDEC_STATUS_OK) << specdec_last_error();
    return info;
}

bool serves(const specdec_model_info & info, specdec_strategy s) {
    return (info.strategies & (1u << s)) != 0;
}

TEST(Inspect, DescribesTargetsAndDrafts) {
    const auto q = inspect(qwen35_file());
    EXPECT_STREQ(q.architecture, "qwen35");
    EXPECT_EQ(q.n_vocab, 128u);
    EXPECT_EQ(q.n_embd, 256u);
    EXPECT_EQ(q.n_layer, 3u);
    EXPECT_EQ(q.n_layer_nextn, 1u);
    EXPECT_TRUE(serves(q, SPECDEC_STRATEGY_MTP));
    EXPECT_TRUE(serves(q, SPECDEC_STRATEGY_NGRAM_SIMPLE));
    EXPECT_GT(q.n_params, 0u);
    EXPECT_GT(q.file_size, q.n_params); // F16/F32 tensors: at least two bytes per element

    const auto l = inspect(llama_file());
    EXPECT_EQ(l.n_layer_nextn, 0u);
    EXPECT_FALSE(serves(l, SPECDEC_STRATEGY_MTP));
    EXPECT_TRUE(serves(l, SPECDEC_STRATEGY_DRAFT));

    const auto e = inspect(eagle3_file());
    EXPECT_STREQ(e.architecture, "eagle3");
    EXPECT_EQ(e.n_target_layers, 3u);
    EXPECT_EQ(e.target_hidden_size, 256u);
    EXPECT_EQ(e.strategies, 1u << SPECDEC_STRATEGY_EAGLE3);

    const auto d1 = inspect(dflash_file(false));
    const auto d2 = inspect(dflash_file(true));
    EXPECT_FALSE(d1.dflash2);
    EXPECT_TRUE(d2.dflash2);
    EXPECT_EQ(d1.block_size, 8u);
    EXPECT_TRUE(serves(d2, SPECDEC_STRATEGY_DFLASH));
    EXPECT_FALSE(d2.markov_head);
}

TEST(Inspect, DetectsTheStrategy) {
    auto detect = [](const std::string & t, const char * d) {
        specdec_strategy s = SPECDEC_STRATEGY_COUNT;
        const specdec_status st = specdec_detect_strategy(t.c_str(), d, &s);
        return st == SPECDEC_STATUS_OK ? static_cast<int>(s) : -static_cast<int>(st);
    };
    EXPECT_EQ(detect(qwen35_file(), nullptr), SPECDEC_STRATEGY_MTP);
    EXPECT_EQ(detect(llama_file(), eagle3_file().c_str()), SPECDEC_STRATEGY_EAGLE3);
    EXPECT_EQ(detect(llama_file(), dflash_file(true).c_str()), SPECDEC_STRATEGY_DFLASH);
    EXPECT_EQ(detect(llama_file(), llama_file().c_str()), SPECDEC_STRATEGY_DRAFT);
    EXPECT_EQ(detect(llama_file(), nullptr), -SPECDEC_STATUS_MODEL_UNSUPPORTED);
}

TEST(Inspect, ChecksPairsWithoutLoadingWeights) {
    fixtures::fixture_options deep;
    deep.n_layer = 6;
    fixtures::fixture_options narrow;
    narrow.n_embd = 128;
    auto check = [](const std::string & t, const std::string & d, specdec_strategy s) {
        return specdec_check_pair(t.c_str(), d.empty() ? nullptr : d.c_str(), s);
    };
    EXPECT_EQ(check(llama_file(), eagle3_file(), SPECDEC_STRATEGY_EAGLE3), SPECDEC_STATUS_OK);
    EXPECT_EQ(check(llama_file(), eagle3_file(deep), SPECDEC_STRATEGY_EAGLE3), SPECDEC_STATUS_LAYER_MISMATCH);
    EXPECT_EQ(check(llama_file(), eagle3_file(narrow), SPECDEC_STRATEGY_EAGLE3), SPECDEC_STATUS_WIDTH_MISMATCH);
    EXPECT_NE(std::string(specdec_last_error()).find("128"), std::string::npos);
    EXPECT_EQ(check(llama_file(), "", SPECDEC_STRATEGY_MTP), SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_EQ(check(qwen35_file(), "", SPECDEC_STRATEGY_MTP), SPECDEC_STATUS_OK);
    EXPECT_EQ(check(llama_file(), dflash_file(false), SPECDEC_STRATEGY_EAGLE3), SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_EQ(check(eagle3_file(), llama_file(), SPECDEC_STRATEGY_DRAFT), SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_EQ(check(llama_file(), qwen35_file(), SPECDEC_STRATEGY_DRAFT), SPECDEC_STATUS_OK); // same test vocabulary
    EXPECT_EQ(check(llama_file(), "", SPECDEC_STRATEGY_EAGLE3), SPECDEC_STATUS_INVALID_ARGUMENT);
}

TEST(Inspect, VocabularyMismatchIsFound) {
    fixtures::fixture_options small;
    small.n_vocab = 64;
    small.n_embd = 128;
    const auto other = fixture("llama-target-vocab64", [&](const std::string & p) { fixtures::write_llama_target(p, small); });
    // Sizes 128 and 64 are within 128 of each other and share their first 64
    // texts, so the classic rule accepts them; a different tokenizer is refused.
    EXPECT_EQ(specdec_check_pair(llama_file().c_str(), other.c_str(), SPECDEC_STRATEGY_DRAFT), SPECDEC_STATUS_OK);
    const auto bpe = fixture("gguf-bpe-vocab", [](const std::string & p) {
        fixtures::gguf_builder b;
        b.set_str("general.architecture", "llama");
        fixtures::add_test_vocab(b, 128);
        b.set_str("tokenizer.ggml.model", "gpt2");
        b.write(p);
    });
    EXPECT_EQ(specdec_check_pair(llama_file().c_str(), bpe.c_str(), SPECDEC_STRATEGY_DRAFT), SPECDEC_STATUS_VOCAB_MISMATCH);
}

std::vector<uint8_t> read_all(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Inspect, MalformedFilesAreTypedErrors) {
    specdec_model_info info{};
    EXPECT_EQ(specdec_inspect("/nonexistent/model.gguf", &info), SPECDEC_STATUS_IO_ERROR);
    EXPECT_EQ(specdec_inspect("/", &info), SPECDEC_STATUS_IO_ERROR);
    EXPECT_EQ(specdec_inspect_buffer(nullptr, 0, &info), SPECDEC_STATUS_MALFORMED_FILE);
    const std::vector<uint8_t> bytes = read_all(eagle3_file());
    // Every cut inside the metadata and tensor table, and a sample beyond it.
    const size_t meta = 16384;
    for (size_t n = 0; n < std::min(meta, bytes.size()); n += (n < 512 ? 1 : 61)) {
        const specdec_status st = specdec_inspect_buffer(bytes.data(), n, &info);
        EXPECT_EQ(st, SPECDEC_STATUS_MALFORMED_FILE) << "cut at " << n;
    }
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<uint8_t> noisy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(bytes.size(), 8192)));
        for (int k = 0; k < 8; ++k) {
            noisy[rng() % noisy.size()] = static_cast<uint8_t>(rng());
        }
        const specdec_status st = specdec_inspect_buffer(noisy.data(), noisy.size(), &info);
        EXPECT_TRUE(st == SPECDEC_STATUS_OK || st == SPECDEC_STATUS_MALFORMED_FILE) << specdec_status_name(st);
    }
}

TEST(Inspect, DuplicateTokenTextsAreMalformed) {
    // llama.cpp's vocabulary loader asserts on them.
    const auto path = fixture("gguf-duplicate-token", [](const std::string & p) {
        fixtures::gguf_builder b;
        b.set_str("general.architecture", "llama");
        b.set_str("tokenizer.ggml.model", "llama");
        b.set_arr_str("tokenizer.ggml.tokens", {"<unk>", "a", "b", "a"});
        b.write(p);
    });
    specdec_model_info info{};
    EXPECT_EQ(specdec_inspect(path.c_str(), &info), SPECDEC_STATUS_MALFORMED_FILE);
    EXPECT_NE(std::string(specdec_last_error()).find("'a'"), std::string::npos);
}

TEST(Inspect, MissingBlockCountIsReportedNotAsserted) {
    // llama.cpp's own detection reads <arch>.block_count unchecked and aborts.
    const auto path = fixture("gguf-no-block-count", [](const std::string & p) {
        fixtures::gguf_builder b;
        b.set_str("general.architecture", "qwen35");
        fixtures::add_test_vocab(b, 16);
        b.write(p);
    });
    const auto info = inspect(path);
    EXPECT_EQ(info.n_layer, 0u);
    EXPECT_EQ(info.n_layer_nextn, 0u);
    specdec_strategy s{};
    EXPECT_EQ(specdec_detect_strategy(path.c_str(), nullptr, &s), SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_EQ(specdec_check_pair(path.c_str(), nullptr, SPECDEC_STRATEGY_MTP), SPECDEC_STATUS_MODEL_UNSUPPORTED);
}

} // namespace
} // namespace specdec::test
