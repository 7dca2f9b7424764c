// GGUF inspection, pair checks and strategy detection from metadata alone,
// on generated fixtures and on malformed files (typed errors, never an abort).
#include "gguf-builder.h"
#include "gguf-edit.h"
#include "harness.h"

#include "gguf.h"

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

// Exact kernels cover the weight types the near-tie tier checks; a file
// holding another is named as such (Q1_0: written by llama.cpp's quantizer,
// not checked by the tier).
TEST(Inspect, SaysWhetherExactKernelsCoverTheWeights) {
    EXPECT_EQ(specdec_check_exact(qwen35_file().c_str()), SPECDEC_STATUS_OK) << specdec_last_error();
    const std::string q1 = fixture("llama-target-q1_0", [](const std::string & p) {
        fixtures::write_with_type([](const std::string & f16) { fixtures::write_llama_target(f16, {}); }, p,
                                  fixtures::weight_type::q1_0);
    });
    EXPECT_EQ(specdec_check_exact(q1.c_str()), SPECDEC_STATUS_UNAVAILABLE);
    EXPECT_NE(std::string(specdec_last_error()).find("q1_0 weights are not covered"), std::string::npos) << specdec_last_error();
    EXPECT_EQ(specdec_check_exact("/nonexistent.gguf"), SPECDEC_STATUS_IO_ERROR);
}

// Every type the fixtures offer (llama-quantize's table) is written by
// llama.cpp's quantizer, with the importance matrix its mix needs (IQ3_XS
// puts the attention's Q projection in IQ3_XXS, which needs one): the file
// records that type and inspects as a target.
TEST(Inspect, EveryWeightTypeTheFixturesOfferIsWritten) {
    for (const fixtures::weight_type_info & t : fixtures::weight_types()) {
        const std::string path = fixture(std::string("llama-target-type-") + t.name, [&](const std::string & p) {
            fixtures::write_with_type([](const std::string & f16) { fixtures::write_llama_target(f16, {}); }, p, t.type);
        });
        specdec_model_info info{};
        EXPECT_EQ(specdec_inspect(path.c_str(), &info), SPECDEC_STATUS_OK) << t.name << ": " << specdec_last_error();
        if (t.type == fixtures::weight_type::f16) {
            continue; // written as is, not through the quantizer
        }
        gguf_context * g = gguf_init_from_file(path.c_str(), {true, nullptr});
        ASSERT_NE(g, nullptr) << t.name;
        const int64_t key = gguf_find_key(g, "general.file_type");
        EXPECT_GE(key, 0) << t.name;
        if (key >= 0) {
            EXPECT_EQ(static_cast<int32_t>(gguf_get_val_u32(g, key)), t.ftype) << t.name;
        }
        gguf_free(g);
    }
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
    const auto bpe = fixture("llama-target-gpt2-tokenizer", [](const std::string & p) {
        fixtures::edit_gguf_file(llama_file(), p, [](gguf_context * g) { gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2"); });
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
    // Noise in the tensor data leaves the metadata, and so the description, as it was.
    const specdec_model_info clean = inspect(eagle3_file());
    std::mt19937 rng(7);
    const size_t data_start = bytes.size() - 4096;
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<uint8_t> noisy = bytes;
        for (int k = 0; k < 8; ++k) {
            noisy[data_start + rng() % 4096] ^= static_cast<uint8_t>(1 + rng() % 255);
        }
        ASSERT_EQ(specdec_inspect_buffer(noisy.data(), noisy.size(), &info), SPECDEC_STATUS_OK) << specdec_last_error();
        EXPECT_STREQ(info.architecture, clean.architecture);
        EXPECT_EQ(info.n_params, clean.n_params);
        EXPECT_EQ(info.target_hidden_size, clean.target_hidden_size);
    }
    // A corrupt magic or version is never a GGUF file.
    for (size_t at : {0, 1, 2, 3, 4, 5}) {
        std::vector<uint8_t> noisy = bytes;
        noisy[at] ^= 0x5a;
        EXPECT_EQ(specdec_inspect_buffer(noisy.data(), noisy.size(), &info), SPECDEC_STATUS_MALFORMED_FILE) << "byte " << at;
    }
    // Random noise in the metadata: a typed error, or a description within
    // what llama.cpp's loader accepts, and a file it loads or refuses
    // without aborting the test process.
    const gguf_init_params gp = {/* .no_alloc = */ true, /* .ctx = */ nullptr};
    gguf_context * g = gguf_init_from_buffer(bytes.data(), bytes.size(), gp);
    ASSERT_NE(g, nullptr);
    const size_t meta_size = gguf_get_data_offset(g);
    gguf_free(g);
    const std::string noisy_path = fixture("gguf-noisy-scratch", [](const std::string & p) { fixtures::write_file(p, {}); });
    int accepted = 0;
    int refused = 0;
    for (int trial = 0; trial < 100; ++trial) {
        std::vector<uint8_t> noisy = bytes;
        for (int k = 0; k < 2; ++k) {
            noisy[rng() % meta_size] = static_cast<uint8_t>(rng());
        }
        const specdec_status st = specdec_inspect_buffer(noisy.data(), noisy.size(), &info);
        ASSERT_TRUE(st == SPECDEC_STATUS_OK || st == SPECDEC_STATUS_MALFORMED_FILE) << specdec_status_name(st);
        if (st != SPECDEC_STATUS_OK) {
            refused++;
            continue;
        }
        accepted++;
        EXPECT_GE(info.n_layer, 1u);
        EXPECT_LE(info.n_layer, 512u);
        EXPECT_LE(info.n_layer_nextn, info.n_layer);
        EXPECT_GT(info.n_embd, 0u);
        fixtures::write_file(noisy_path, noisy);
        llama_model * m = llama_model_load_from_file(noisy_path.c_str(), llama_model_default_params());
        llama_model_free(m);
    }
    // Most flipped bytes land in token texts and values that stay valid;
    // some break the structure.
    EXPECT_GT(accepted, 0);
    EXPECT_GT(refused, 0);
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

TEST(Inspect, MissingBlockCountIsMalformedNotAsserted) {
    // llama.cpp's own detection reads <arch>.block_count unchecked and aborts;
    // its loader cannot load such a file either.
    const auto path = fixture("qwen35-without-block-count", [](const std::string & p) {
        fixtures::edit_gguf_file(qwen35_file(), p, [](gguf_context * g) { gguf_remove_key(g, "qwen35.block_count"); });
    });
    specdec_model_info info{};
    EXPECT_EQ(specdec_inspect(path.c_str(), &info), SPECDEC_STATUS_MALFORMED_FILE);
    specdec_strategy s{};
    EXPECT_EQ(specdec_detect_strategy(path.c_str(), nullptr, &s), SPECDEC_STATUS_MALFORMED_FILE);
    EXPECT_NE(std::string(specdec_last_error()).find("block_count"), std::string::npos) << specdec_last_error();
    EXPECT_EQ(specdec_check_pair(path.c_str(), nullptr, SPECDEC_STRATEGY_MTP), SPECDEC_STATUS_MALFORMED_FILE);
}

} // namespace
} // namespace specdec::test
