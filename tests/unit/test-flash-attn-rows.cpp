// Batch invariance of the CPU backend's attention, kernel by kernel: with
// ggml_cpu_set_batch_invariant(true), every query row of flash_attn_ext takes
// the tiled kernel, and each row of a product with r = 1..20 query positions
// must be, bit for bit, that position's row alone, and the rows alone must be
// what attention computed in double precision gives, within 1e-3. This is what lets a
// verification of r drafted tokens give plain decoding's tokens. It checks the
// tiles patches/0001 and 0010 form (a head's positions; the heads that read
// one KV head, for one position or several; one or two rows read K and V in
// place, more take packed copies) over grouped-query ratios from 1 to 8, a
// KV cache laid out as llama.cpp's (a position's heads side by side), causal
// masks (with ALiBi too), and caches of one full 64-key tile, of a partial last tile, and of
// many tiles, at 1 and 2 threads. The near-tie tier (ctest -R NearTies)
// checks the same through whole models.

#include "cpu-kernel-test.h"

#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using specdec::test::batch_invariant;
using specdec::test::activations;
using specdec::test::compute_graph;

constexpr int k_max_rows = 20;
constexpr int64_t head_dim = 128;

struct attn_case {
    int64_t n_head;
    int64_t n_head_kv;
    int64_t n_kv; // cached positions; the r query rows are the last r of them
    float max_bias = 0.0f; // ALiBi: a slope per head times the mask, which then holds minus the distance
};

std::string case_name(const testing::TestParamInfo<attn_case> & info) {
    return "heads" + std::to_string(info.param.n_head) + "_kv" + std::to_string(info.param.n_head_kv) + "_cells" +
           std::to_string(info.param.n_kv) + (info.param.max_bias > 0.0f ? "_alibi" : "");
}

// A KV cache of n_kv positions and the query vectors of every position, and
// the attention of any run of the last positions over it.
class attention {
public:
    explicit attention(const attn_case & c) : c_(c) {
        const size_t n_kv_values = static_cast<size_t>(head_dim * c.n_head_kv * c.n_kv);
        k_.resize(n_kv_values);
        v_.resize(n_kv_values);
        ggml_fp32_to_fp16_row(activations(static_cast<int64_t>(n_kv_values), 1).data(), k_.data(), static_cast<int64_t>(n_kv_values));
        ggml_fp32_to_fp16_row(activations(static_cast<int64_t>(n_kv_values), 2).data(), v_.data(), static_cast<int64_t>(n_kv_values));
        q_ = activations(head_dim * c.n_head * c.n_kv, 3);
    }

    // The outputs (head_dim values per head, heads of a row side by side, rows
    // in order) of the query rows at positions p0 .. p0 + r - 1, each seeing
    // positions 0 .. its own.
    std::vector<float> rows(int64_t p0, int r, int n_threads) const {
        const size_t mem = ggml_tensor_overhead() * 16 + ggml_graph_overhead() + 2 * (k_.size() + v_.size()) +
                           sizeof(float) * static_cast<size_t>(head_dim * c_.n_head * r * 2) +
                           sizeof(ggml_fp16_t) * static_cast<size_t>(c_.n_kv * r) + 4096;
        ggml_init_params params = {mem, nullptr, false};
        ggml_context * ctx = ggml_init(params);
        // llama.cpp's cache: each position's heads side by side, viewed per head
        ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, head_dim, c_.n_head_kv, c_.n_kv);
        ggml_tensor * v = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, head_dim, c_.n_head_kv, c_.n_kv);
        std::memcpy(k->data, k_.data(), ggml_nbytes(k));
        std::memcpy(v->data, v_.data(), ggml_nbytes(v));
        // queries of the shape llama.cpp gives them (it passes a permuted view): [head_dim, rows, heads]
        ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, head_dim, r, c_.n_head);
        for (int i = 0; i < r; ++i) {
            for (int64_t h = 0; h < c_.n_head; ++h) {
                const float * src = q_.data() + ((p0 + i) * c_.n_head + h) * head_dim;
                std::memcpy(static_cast<float *>(q->data) + (h * r + i) * head_dim, src, head_dim * sizeof(float));
            }
        }
        ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, c_.n_kv, r);
        for (int i = 0; i < r; ++i) {
            for (int64_t j = 0; j < c_.n_kv; ++j) {
                const float distance = static_cast<float>(p0 + i - j);
                const float m = distance < 0 ? -INFINITY : c_.max_bias > 0.0f ? -distance : 0.0f;
                static_cast<ggml_fp16_t *>(mask->data)[i * c_.n_kv + j] = ggml_fp32_to_fp16(m);
            }
        }
        ggml_tensor * out = ggml_flash_attn_ext(ctx, q, ggml_permute(ctx, k, 0, 2, 1, 3), ggml_permute(ctx, v, 0, 2, 1, 3), mask,
                                                1.0f / std::sqrt(static_cast<float>(head_dim)), c_.max_bias, 0.0f);
        compute_graph(ctx, out, n_threads);
        // out: [head_dim, heads, rows]
        std::vector<float> result(static_cast<const float *>(out->data),
                                  static_cast<const float *>(out->data) + head_dim * c_.n_head * r);
        ggml_free(ctx);
        return result;
    }

    // What position p's row should be, in double precision from the same F16
    // K and V: per head, the softmax of q.k / sqrt(head_dim) (plus the head's
    // ALiBi slope times minus the distance) over positions 0 .. p, times V.
    std::vector<double> expected(int64_t p) const {
        std::vector<double> out;
        const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
        const int64_t n_head_log2 = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(c_.n_head))));
        const float m0 = std::pow(2.0f, -c_.max_bias / static_cast<float>(n_head_log2));
        const float m1 = std::pow(2.0f, -(c_.max_bias / 2.0f) / static_cast<float>(n_head_log2));
        for (int64_t h = 0; h < c_.n_head; ++h) {
            const int64_t hk = h / (c_.n_head / c_.n_head_kv);
            const double slope = c_.max_bias <= 0.0f ? 0.0 : h < n_head_log2 ? std::pow(m0, static_cast<float>(h + 1))
                                                                              : std::pow(m1, static_cast<float>(2 * (h - n_head_log2) + 1));
            const float * q = q_.data() + (p * c_.n_head + h) * head_dim;
            std::vector<double> score;
            double top = -INFINITY;
            for (int64_t j = 0; j <= p; ++j) {
                double dot = 0;
                for (int64_t d = 0; d < head_dim; ++d) {
                    dot += static_cast<double>(q[d]) * ggml_fp16_to_fp32(k_[static_cast<size_t>((j * c_.n_head_kv + hk) * head_dim + d)]);
                }
                score.push_back(dot * scale - slope * static_cast<double>(p - j));
                top = std::max(top, score.back());
            }
            double sum = 0;
            std::vector<double> acc(head_dim, 0.0);
            for (int64_t j = 0; j <= p; ++j) {
                const double w = std::exp(score[static_cast<size_t>(j)] - top);
                sum += w;
                for (int64_t d = 0; d < head_dim; ++d) {
                    acc[static_cast<size_t>(d)] += w * ggml_fp16_to_fp32(v_[static_cast<size_t>((j * c_.n_head_kv + hk) * head_dim + d)]);
                }
            }
            for (double a : acc) {
                out.push_back(a / sum);
            }
        }
        return out;
    }

private:
    attn_case c_;
    std::vector<ggml_fp16_t> k_;
    std::vector<ggml_fp16_t> v_;
    std::vector<float> q_;
};

class FlashAttnRows : public batch_invariant<testing::TestWithParam<attn_case>> {};

TEST_P(FlashAttnRows, EachRowAsAlone) {
    const attn_case c = GetParam();
    const attention a(c);
    const size_t row_values = static_cast<size_t>(head_dim * c.n_head);
    for (const int n_threads : {1, 2}) {
        // each of the last k_max_rows positions alone
        std::vector<std::vector<float>> alone;
        for (int64_t p = c.n_kv - k_max_rows; p < c.n_kv; ++p) {
            alone.push_back(a.rows(p, 1, n_threads));
        }
        // ... which are what attention should give (so that rows agreeing with each other in a
        // wrong way, a slope of another head, say, fail too)
        for (size_t i = 0; i < alone.size(); ++i) {
            const std::vector<double> want = a.expected(c.n_kv - k_max_rows + static_cast<int64_t>(i));
            double worst = 0;
            for (size_t v = 0; v < want.size(); ++v) {
                worst = std::max(worst, std::fabs(alone[i][v] - want[v]));
            }
            ASSERT_LT(worst, 1e-3) << "position " << c.n_kv - k_max_rows + static_cast<int64_t>(i) << ", " << n_threads << " threads";
        }
        for (int r = 2; r <= k_max_rows; ++r) {
            const std::vector<float> batch = a.rows(c.n_kv - r, r, n_threads);
            for (int i = 0; i < r; ++i) {
                const std::vector<float> & ref = alone[static_cast<size_t>(k_max_rows - r + i)];
                EXPECT_EQ(std::memcmp(batch.data() + i * row_values, ref.data(), row_values * sizeof(float)), 0)
                    << r << " rows, row " << i << ", " << n_threads << " threads";
            }
        }
    }
}

// Qwen3-0.6B's 16 heads over 8 KV heads, and ratios of 1, 4 and 8 (Qwen3.5's
// and larger models' grouping); 64 cells (one full tile), 200 (a partial last
// tile) and 1,000; and ALiBi, whose slope differs per head, so that a tile
// keeps to one head's positions.
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttnRows,
                         testing::Values(attn_case{16, 8, 64}, attn_case{16, 8, 200}, attn_case{16, 8, 1000},
                                         attn_case{8, 8, 200}, attn_case{16, 4, 200}, attn_case{16, 2, 1000},
                                         attn_case{32, 4, 1000}, attn_case{16, 8, 200, 8.0f}),
                         case_name);

} // namespace
