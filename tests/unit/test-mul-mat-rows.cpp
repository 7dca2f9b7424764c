// Batch invariance of the CPU backend's quantized matrix products, kernel by
// kernel: with ggml_cpu_set_batch_invariant(true), each row of a product with
// r = 1..20 rows of activations must be, bit for bit, the product of that row
// alone. The multi-row kernels of patches/0003, 0004 and 0009 (each weight block
// unpacked once and applied to every row) are checked here directly, and so,
// past 16 rows, are gemm's groups of four where a type still takes them (gemv
// for the rows left over, a padded group below 16), and a MoE layer's
// mul_mat_id on repacked Q4_K experts; the near-tie tier (ctest -R NearTies)
// checks the same through whole models.
//
// Q8KQuantization checks the activations' quantization that every K-quant
// product starts with against ggml-base's reference, byte for byte.
//
// DISABLED_cost prints the time of a product against r at the shapes of a
// Qwen3-0.6B layer (run it with --gtest_also_run_disabled_tests).

#include "cpu-kernel-test.h"

#include <ggml-quants.h> // quantize_row_q8_K_ref, ggml-base's reference

#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using specdec::test::batch_invariant;
using specdec::test::activations;
using specdec::test::compute_graph;
using specdec::test::repack_buffer_type;

constexpr int k_max_rows = 20;

// One quantized weight matrix (n_out rows of n_in), in a CPU buffer or the
// repacking one, and products of it with r rows of activations.
class weights {
public:
    // n_expert > 1: that many matrices, for mul_id (a MoE layer's experts)
    weights(ggml_type type, int64_t n_in, int64_t n_out, bool repack, uint32_t seed, int64_t n_expert = 1) : type_(type) {
        ggml_init_params params = {ggml_tensor_overhead() * 2, nullptr, true};
        ctx_ = ggml_init(params);
        w_ = n_expert > 1 ? ggml_new_tensor_3d(ctx_, type, n_in, n_out, n_expert) : ggml_new_tensor_2d(ctx_, type, n_in, n_out);
        ggml_backend_buffer_type_t buft = repack ? repack_buffer_type() : ggml_backend_cpu_buffer_type();
        buf_ = buft != nullptr ? ggml_backend_alloc_ctx_tensors_from_buft(ctx_, buft) : nullptr;
        if (buf_ == nullptr) {
            return;
        }
        if (repack && w_->extra == nullptr) {
            // not a type this build repacks: a model loader would not place it there (setting it
            // would dereference the missing repacking traits); repacked() is false
            return;
        }
        // A weight tensor as a model loader gives it (the repacking buffer rearranges it on set).
        ggml_backend_buffer_set_usage(buf_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        std::mt19937 rng(seed);
        std::normal_distribution<float> normal(0.0f, 0.02f);
        std::vector<float> f(static_cast<size_t>(n_in * n_out * n_expert));
        for (float & v : f) {
            v = normal(rng);
        }
        std::vector<uint8_t> q(ggml_row_size(type, n_in) * static_cast<size_t>(n_out * n_expert));
        ggml_quantize_chunk(type, f.data(), q.data(), 0, n_out * n_expert, n_in, nullptr);
        ggml_backend_tensor_set(w_, q.data(), 0, q.size());
        dequantized_.resize(f.size());
        ggml_get_type_traits(type)->to_float(q.data(), dequantized_.data(), static_cast<int64_t>(f.size()));
    }
    ~weights() {
        if (buf_ != nullptr) {
            ggml_backend_buffer_free(buf_);
        }
        ggml_free(ctx_);
    }
    weights(const weights &) = delete;
    weights & operator=(const weights &) = delete;

    bool ok() const { return buf_ != nullptr; }
    // Whether the buffer rearranged the weights (a type the repacking kernels take).
    bool repacked() const { return buf_ != nullptr && w_->extra != nullptr; }
    int64_t n_in() const { return w_->ne[0]; }
    int64_t n_out() const { return w_->ne[1]; }
    // The quantized weights' values, row after row (n_in each).
    const std::vector<float> & dequantized() const { return dequantized_; }

    // out[i*n_out + j]: row i of x (r rows of n_in) times weight row j.
    std::vector<float> mul(const float * x, int r, int n_threads, int repeats = 1, double * best_us = nullptr) const {
        const size_t mem = ggml_tensor_overhead() * 8 + ggml_graph_overhead() +
                           static_cast<size_t>(r) * static_cast<size_t>(n_in() + n_out()) * sizeof(float) + 1024;
        ggml_init_params params = {mem, nullptr, false};
        ggml_context * ctx = ggml_init(params);
        ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_in(), r);
        std::memcpy(a->data, x, ggml_nbytes(a));
        ggml_tensor * y = ggml_mul_mat(ctx, w_, a);
        return compute(ctx, y, r * n_out(), n_threads, repeats, best_us);
    }

    // out[(t*n_used + k)*n_out + j]: row t of x (n_tokens rows of n_in) times weight row j of
    // expert ids[t*n_used + k], as a MoE layer's mul_mat_id computes it.
    std::vector<float> mul_id(const float * x, int n_tokens, const std::vector<int32_t> & ids, int n_threads) const {
        const int n_used = static_cast<int>(ids.size()) / n_tokens;
        const size_t mem = ggml_tensor_overhead() * 8 + ggml_graph_overhead() + ids.size() * sizeof(int32_t) +
                           static_cast<size_t>(n_tokens) * static_cast<size_t>(n_in() + n_used * n_out()) * sizeof(float) + 1024;
        ggml_init_params params = {mem, nullptr, false};
        ggml_context * ctx = ggml_init(params);
        ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n_in(), 1, n_tokens);
        std::memcpy(a->data, x, ggml_nbytes(a));
        ggml_tensor * id = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, n_tokens);
        std::memcpy(id->data, ids.data(), ggml_nbytes(id));
        ggml_tensor * y = ggml_mul_mat_id(ctx, w_, a, id);
        return compute(ctx, y, n_tokens * n_used * n_out(), n_threads, 1, nullptr);
    }

private:
    // Computes y, frees ctx and returns y's first n values.
    static std::vector<float> compute(ggml_context * ctx, ggml_tensor * y, int64_t n, int n_threads, int repeats, double * best_us) {
        const double best = compute_graph(ctx, y, n_threads, repeats);
        if (best_us != nullptr) {
            *best_us = best;
        }
        std::vector<float> out(static_cast<const float *>(y->data), static_cast<const float *>(y->data) + n);
        ggml_free(ctx);
        return out;
    }

    ggml_type type_;
    ggml_context * ctx_ = nullptr;
    ggml_tensor * w_ = nullptr;
    ggml_backend_buffer_t buf_ = nullptr;
    std::vector<float> dequantized_;
};

// Activations quantized to act_type, back to floats. ggml has no to_float for
// Q8_K, the K-quants' activation type: a block is a float scale, 256 int8
// values and 16 int16 sums.
void dequantize_activations(ggml_type act_type, const void * q, float * out, int64_t n) {
    if (act_type != GGML_TYPE_Q8_K) {
        ggml_get_type_traits(act_type)->to_float(q, out, n);
        return;
    }
    constexpr size_t block_bytes = sizeof(float) + 256 + 16 * sizeof(int16_t);
    ASSERT_EQ(ggml_type_size(GGML_TYPE_Q8_K), block_bytes);
    for (int64_t b = 0; b < n / 256; ++b) {
        const auto * block = static_cast<const uint8_t *>(q) + static_cast<size_t>(b) * block_bytes;
        float d = 0;
        std::memcpy(&d, block, sizeof(d));
        for (int k = 0; k < 256; ++k) {
            out[b * 256 + k] = d * static_cast<float>(static_cast<int8_t>(block[sizeof(float) + static_cast<size_t>(k)]));
        }
    }
}

struct case_param {
    ggml_type type;
    bool repack;
};

std::string case_name(const testing::TestParamInfo<case_param> & info) {
    return std::string(ggml_type_name(info.param.type)) + (info.param.repack ? "_repack" : "");
}

class MulMatRows : public batch_invariant<testing::TestWithParam<case_param>> {};

// Each row of r rows, bit for bit the row alone, for r = 1..16, at 1 and 2
// threads, on two widths (one super-block and a Qwen3-0.6B layer's), with
// weight rows enough for several chunks of work.
TEST_P(MulMatRows, EachRowAsAlone) {
    const case_param p = GetParam();
    for (int64_t n_in : {256, 1024}) {
        const weights w(p.type, n_in, 96, p.repack, 7);
        ASSERT_TRUE(w.ok());
        // patches/0012, 0013 and 0015: with AVX512 VNNI kernels, Q5_K, Q6_K, Q8_0 and IQ4_XS are repacked, and each of their products takes that kernel
        if (p.repack && (p.type == GGML_TYPE_Q5_K || p.type == GGML_TYPE_Q6_K || p.type == GGML_TYPE_Q8_0 || p.type == GGML_TYPE_IQ4_XS) &&
            ggml_cpu_has_avx512_vnni()) {
            ASSERT_TRUE(w.repacked()) << ggml_type_name(p.type) << " is not repacked with AVX512 VNNI kernels";
        }
        if (p.repack && !w.repacked()) {
            GTEST_SKIP() << ggml_type_name(p.type) << " is not repacked on this CPU";
        }
        const std::vector<float> x = activations(n_in * k_max_rows, 11);
        for (int n_threads : {1, 2}) {
            std::vector<std::vector<float>> alone(k_max_rows);
            for (int i = 0; i < k_max_rows; ++i) {
                alone[static_cast<size_t>(i)] = w.mul(x.data() + i * n_in, 1, n_threads);
            }
            for (int r = 2; r <= k_max_rows; ++r) {
                const std::vector<float> all = w.mul(x.data(), r, n_threads);
                for (int i = 0; i < r; ++i) {
                    const float * got = all.data() + i * w.n_out();
                    const float * want = alone[static_cast<size_t>(i)].data();
                    int64_t first = -1;
                    for (int64_t j = 0; j < w.n_out() && first < 0; ++j) {
                        if (std::memcmp(got + j, want + j, sizeof(float)) != 0) {
                            first = j;
                        }
                    }
                    EXPECT_EQ(first, -1) << "n_in " << n_in << ", " << n_threads << " threads, row " << i << " of " << r
                                         << ": output " << first << " is " << (first < 0 ? 0.0f : got[first])
                                         << " in the batch, " << (first < 0 ? 0.0f : want[first]) << " alone";
                }
            }
        }
    }
}

// A repacked matrix gives the products that the same quantized weights give
// unpacked, up to the order of the float sums: a check on what the multi-row
// kernels compute (for Q4_K, patches/0007's VNNI sums and their scales), which
// EachRowAsAlone, comparing the kernels with themselves, cannot see.
TEST_F(MulMatRows, RepackedAsUnpacked) {
    const int64_t n_in = 1024;
    const std::vector<float> x = activations(n_in * k_max_rows, 11);
    for (ggml_type type : {GGML_TYPE_Q4_K, GGML_TYPE_Q4_0, GGML_TYPE_Q2_K, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                           GGML_TYPE_Q8_0, GGML_TYPE_IQ4_XS}) {
        const weights packed(type, n_in, 96, true, 7);
        const weights plain(type, n_in, 96, false, 7);
        ASSERT_TRUE(packed.ok() && plain.ok());
        if (!packed.repacked()) {
            continue; // this CPU does not repack the type
        }
        for (int r : {1, 2, 5, 8, 9, 16, k_max_rows}) {
            const std::vector<float> got = packed.mul(x.data(), r, 2);
            const std::vector<float> want = plain.mul(x.data(), r, 2);
            double scale = 0;
            for (float v : want) {
                scale = std::max(scale, static_cast<double>(std::fabs(v)));
            }
            ASSERT_GT(scale, 0.0);
            for (size_t i = 0; i < want.size(); ++i) {
                ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), 1e-5 * scale)
                    << ggml_type_name(type) << ", " << r << " rows: output " << i << " is " << got[i] << " repacked, "
                    << want[i] << " unpacked";
            }
        }
    }
}

// Each product of a matrix in a plain buffer is, up to float rounding, the
// exact sum of the quantized weights times the quantized activations (each
// row quantized to the type's activation type, as the product does): a check
// on what the multi-row kernels of patches/0003 and 0006 compute (their
// unpacking, lanes and scales), which EachRowAsAlone, comparing the kernels
// with themselves, cannot see.
TEST_F(MulMatRows, MatchesQuantizedValues) {
    const int64_t n_in = 1024;
    const std::vector<float> x = activations(n_in * k_max_rows, 17);
    for (ggml_type type : {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                           GGML_TYPE_IQ4_XS, GGML_TYPE_Q3_K, GGML_TYPE_Q2_K, GGML_TYPE_IQ4_NL}) {
        const weights w(type, n_in, 96, false, 7);
        ASSERT_TRUE(w.ok());
        const ggml_type act_type = ggml_get_type_traits_cpu(type)->vec_dot_type;
        std::vector<uint8_t> act_q(ggml_row_size(act_type, n_in) * k_max_rows);
        std::vector<float> act(x.size());
        for (int i = 0; i < k_max_rows; ++i) {
            uint8_t * q = act_q.data() + ggml_row_size(act_type, n_in) * static_cast<size_t>(i);
            ggml_get_type_traits_cpu(act_type)->from_float(x.data() + i * n_in, q, n_in);
            dequantize_activations(act_type, q, act.data() + i * n_in, n_in);
        }
        // Each row's exact products, once: want[i*n_out + j] and the sum of their magnitudes.
        const auto n_out = static_cast<size_t>(w.n_out());
        std::vector<double> want(k_max_rows * n_out, 0.0);
        std::vector<double> magnitude(want.size(), 0.0);
        for (size_t i = 0; i < k_max_rows; ++i) {
            for (size_t j = 0; j < n_out; ++j) {
                for (size_t k = 0; k < static_cast<size_t>(n_in); ++k) {
                    const double p = static_cast<double>(w.dequantized()[j * n_in + k]) * act[i * n_in + k];
                    want[i * n_out + j] += p;
                    magnitude[i * n_out + j] += std::fabs(p);
                }
            }
        }
        for (int r : {1, 2, 5, 9, 16}) {
            const std::vector<float> got = w.mul(x.data(), r, 2);
            for (size_t o = 0; o < got.size(); ++o) {
                ASSERT_GT(magnitude[o], 0.0);
                ASSERT_LE(std::fabs(got[o] - want[o]), 1e-5 * magnitude[o])
                    << ggml_type_name(type) << ", " << r << " rows: row " << o / n_out << ", output " << o % n_out << " is "
                    << got[o] << ", the quantized values give " << want[o];
            }
        }
    }
}

// A MoE layer's product (mul_mat_id): each token's row times each expert it
// chose must be, bit for bit, what it is for that token alone, however many
// rows of the batch share that expert (repacked Q4_K, Q4_0 and IQ4_NL take
// the multi-row gemv of patches/0004 and 0009 for an expert's rows, and
// repacked Q5_K, Q6_K, Q8_0 and IQ4_XS those of 0012, 0013 and 0015). Tokens choose 2 of 4 experts.
TEST_F(MulMatRows, ExpertRowsAsAlone) {
    constexpr int n_expert = 4;
    constexpr int n_used = 2;
    constexpr int n_tokens = 20;
    for (const auto & [type, n_in] : {std::pair{GGML_TYPE_Q4_K, int64_t{256}}, std::pair{GGML_TYPE_Q4_K, int64_t{1024}},
                                      std::pair{GGML_TYPE_Q4_0, int64_t{1024}}, std::pair{GGML_TYPE_IQ4_NL, int64_t{1024}},
                                      std::pair{GGML_TYPE_Q5_K, int64_t{1024}}, std::pair{GGML_TYPE_Q6_K, int64_t{1024}},
                                      std::pair{GGML_TYPE_Q8_0, int64_t{1024}}, std::pair{GGML_TYPE_IQ4_XS, int64_t{1024}}}) {
        const weights w(type, n_in, 96, true, 9, n_expert);
        ASSERT_TRUE(w.ok());
        if (!w.repacked()) {
            continue; // this CPU does not repack the type
        }
        const std::vector<float> x = activations(n_in * n_tokens, 13);
        std::vector<int32_t> ids;
        for (int t = 0; t < n_tokens; ++t) {
            ids.push_back((t * t) % n_expert);
            ids.push_back((t * t + 1 + t % 3) % n_expert);
        }
        for (int n_threads : {1, 2}) {
            std::vector<std::vector<float>> alone;
            for (int t = 0; t < n_tokens; ++t) {
                const std::vector<int32_t> ids_t(ids.begin() + t * n_used, ids.begin() + (t + 1) * n_used);
                alone.push_back(w.mul_id(x.data() + t * n_in, 1, ids_t, n_threads));
            }
            for (int r : {2, 3, 9, n_tokens}) {
                const std::vector<int32_t> ids_r(ids.begin(), ids.begin() + r * n_used);
                const std::vector<float> all = w.mul_id(x.data(), r, ids_r, n_threads);
                for (int t = 0; t < r; ++t) {
                    const std::vector<float> & want = alone[static_cast<size_t>(t)];
                    EXPECT_EQ(std::memcmp(all.data() + want.size() * static_cast<size_t>(t), want.data(), want.size() * sizeof(float)), 0)
                        << ggml_type_name(type) << ", n_in " << n_in << ", " << n_threads << " threads, token " << t << " of " << r;
                }
            }
        }
    }
}

// The activations of every K-quant product are quantized to Q8_K by the CPU
// backend's quantize_row_q8_K (vectorised by patches/0011 where the build has
// AVX512). Its blocks must be ggml-base's reference's, byte for byte, on
// values that test each of its steps: the sign of the largest magnitude (its
// first occurrence when two values have it), values rounding half-way, huge
// and denormal magnitudes, NaN and infinity, and a block of zeros (whose sums
// the reference leaves as they were: both start from zeros here).
TEST(Q8KQuantization, MatchesTheReference) {
    constexpr int64_t qk = 256;
    const size_t block_bytes = ggml_type_size(GGML_TYPE_Q8_K);
    std::vector<std::vector<float>> blocks;
    for (uint32_t seed = 0; seed < 64; ++seed) {
        blocks.push_back(activations(qk, 100 + seed));
    }
    std::vector<float> b = activations(qk, 7);
    b[40] = 9.0f;
    b[45] = -9.0f;
    b[200] = -9.0f;
    blocks.push_back(b); // the first of three equal magnitudes is positive
    b[40] = -9.0f;
    b[45] = 9.0f;
    b[200] = 9.0f;
    blocks.push_back(b); // ... negative
    // the largest magnitude -127 makes the scale 1: every other value, -126.5 to 126.5, rounds half-way
    b[0] = -127.0f;
    for (int i = 1; i < qk; ++i) {
        b[i] = static_cast<float>((i - 1) % 254) - 126.5f;
    }
    blocks.push_back(b);
    // the largest magnitude 3 makes the scale -127/3, inexact: values within an ulp of a half-way
    // product, where rounding the product before adding 1.5 * 2^23 (as the reference does, with no
    // FMA) gives another integer than rounding once
    b[0] = 3.0f;
    for (int i = 1; i < qk; ++i) {
        const float half = (static_cast<float>((i - 1) / 3 % 120) + 0.5f) / (127.0f / 3.0f);
        b[i] = (i % 3 == 0) ? half : std::nextafter(half, i % 3 == 1 ? 0.0f : 1.0f);
    }
    blocks.push_back(b);
    blocks.push_back(std::vector<float>(qk, 0.0f));
    b = activations(qk, 8);
    b[3] = 3e38f;
    blocks.push_back(b);
    for (float & v : b) {
        v *= 1e-41f; // denormals
    }
    blocks.push_back(b);
    b = activations(qk, 9);
    b[17] = NAN;
    blocks.push_back(b);
    b[17] = INFINITY;
    blocks.push_back(b);
    b[17] = -0.0f;
    b[18] = -INFINITY;
    blocks.push_back(b);

    ggml_cpu_init();
    const auto from_float = ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float;
    std::vector<float> row;
    for (const auto & blk : blocks) {
        row.insert(row.end(), blk.begin(), blk.end());
    }
    const int64_t n = static_cast<int64_t>(row.size());
    std::vector<uint8_t> got(block_bytes * blocks.size(), 0);
    std::vector<uint8_t> want(block_bytes * blocks.size(), 0);
    from_float(row.data(), got.data(), n);
    quantize_row_q8_K_ref(row.data(), reinterpret_cast<block_q8_K *>(want.data()), n);
    for (size_t i = 0; i < blocks.size(); ++i) {
        EXPECT_EQ(std::memcmp(got.data() + i * block_bytes, want.data() + i * block_bytes, block_bytes), 0) << "block " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, MulMatRows,
                         testing::Values(case_param{GGML_TYPE_Q4_K, true}, case_param{GGML_TYPE_Q4_K, false},
                                         case_param{GGML_TYPE_Q5_K, true}, case_param{GGML_TYPE_Q5_K, false},
                                         case_param{GGML_TYPE_Q6_K, true},
                                         case_param{GGML_TYPE_Q6_K, false},
                                         case_param{GGML_TYPE_Q8_0, true}, case_param{GGML_TYPE_Q8_0, false},
                                         case_param{GGML_TYPE_Q4_0, true},
                                         case_param{GGML_TYPE_Q4_0, false}, case_param{GGML_TYPE_IQ4_XS, true},
                                         case_param{GGML_TYPE_IQ4_XS, false},
                                         case_param{GGML_TYPE_Q2_K, true}, case_param{GGML_TYPE_Q3_K, false},
                                         case_param{GGML_TYPE_IQ4_NL, true}),
                         case_name);

// The time of one product against r, at Qwen3-0.6B's shapes (hidden 1024,
// feed-forward 3072, vocabulary 151,936), 2 threads: a kernel-level view of the verification-cost
// curve of `specdec bench`. The 1024 x 3072 matrices stay in the cache between repetitions; the
// 65,536- and 151,936-row ones do not, as a whole model's weights do not.
TEST(MulMatRowsCost, DISABLED_cost) {
    ggml_cpu_init();
    ggml_cpu_set_batch_invariant(true);
    const struct {
        ggml_type type;
        bool repack;
        int64_t n_in, n_out;
    } shapes[] = {
        {GGML_TYPE_Q4_K, true, 1024, 3072},    {GGML_TYPE_Q4_K, true, 1024, 65536}, {GGML_TYPE_Q4_K, false, 1024, 3072},
        {GGML_TYPE_Q5_K, true, 1024, 3072},    {GGML_TYPE_Q5_K, true, 2048, 1024},  {GGML_TYPE_Q5_K, false, 1024, 3072},
        {GGML_TYPE_Q6_K, true, 3072, 1024},    {GGML_TYPE_Q6_K, true, 1024, 3072},  {GGML_TYPE_Q6_K, true, 1024, 151936},
        {GGML_TYPE_Q6_K, false, 3072, 1024},   {GGML_TYPE_Q6_K, false, 1024, 3072}, {GGML_TYPE_Q6_K, false, 1024, 151936},
        {GGML_TYPE_Q8_0, true, 1024, 3072},    {GGML_TYPE_Q8_0, true, 1024, 151936},  {GGML_TYPE_Q8_0, false, 1024, 3072},
        {GGML_TYPE_Q8_0, false, 1024, 151936}, {GGML_TYPE_Q4_0, true, 1024, 3072},
        {GGML_TYPE_Q4_0, false, 1024, 3072},   {GGML_TYPE_IQ4_NL, true, 1024, 3072},
        {GGML_TYPE_IQ4_XS, true, 1024, 3072},  {GGML_TYPE_IQ4_XS, true, 1024, 151936}, {GGML_TYPE_IQ4_XS, false, 1024, 3072},
        {GGML_TYPE_IQ4_XS, false, 1024, 151936},
    };
    const char * env = std::getenv("SPECDEC_TEST_THREADS");
    const int n_threads = env != nullptr ? std::atoi(env) : 1;
    const std::vector<float> x = activations(3072 * k_max_rows, 3);
    for (const auto & s : shapes) {
        const weights w(s.type, s.n_in, s.n_out, s.repack, 5);
        if (!w.ok() || (s.repack && !w.repacked())) {
            continue;
        }
        std::printf("%-7s%-7s %5lld x %5lld:", ggml_type_name(s.type), s.repack ? "repack" : "", static_cast<long long>(s.n_in),
                    static_cast<long long>(s.n_out));
        double t1 = 0;
        for (int r = 1; r <= k_max_rows; ++r) {
            double us = 0;
            w.mul(x.data(), r, n_threads, 20, &us);
            if (r == 1) {
                t1 = us;
                std::printf(" %.0f us;", us);
            } else {
                std::printf(" %.2f", us / t1);
            }
        }
        std::printf("\n");
    }
}

} // namespace
