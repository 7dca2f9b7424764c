// What the CPU backend's kernel tests share (test-mul-mat-rows,
// test-flash-attn-rows, test-head-matrix-row): a fixture that turns on batch
// invariance for each test and restores the switch after it, one graph's
// computation on a thread pool of its own, seeded normal values for inputs,
// and the repacking buffer type.
#pragma once

#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace specdec::test {

// The repacking buffer type of the CPU backend (weights of Q4_0, Q4_K, IQ4_NL,
// ... rearranged for its gemm and gemv kernels), or null.
inline ggml_backend_buffer_type_t repack_buffer_type() {
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    if (get_extra == nullptr) {
        return nullptr;
    }
    for (ggml_backend_buffer_type_t * b = get_extra(ggml_backend_reg_dev_get(reg, 0)); b != nullptr && *b != nullptr; ++b) {
        if (std::string(ggml_backend_buft_name(*b)) == "CPU_REPACK") {
            return *b;
        }
    }
    return nullptr;
}

// Base (testing::Test or testing::TestWithParam<P>) with
// ggml_cpu_set_batch_invariant(true) around each test.
template <class Base> class batch_invariant : public Base {
protected:
    void SetUp() override {
        ggml_cpu_init();
        was_ = ggml_cpu_get_batch_invariant();
        ggml_cpu_set_batch_invariant(true);
    }
    void TearDown() override { ggml_cpu_set_batch_invariant(was_); }

private:
    bool was_ = false;
};

// Computes the graph of `out` (its context allocated with data) `repeats`
// times on n_threads threads; returns the fastest time in microseconds.
inline double compute_graph(ggml_context * ctx, ggml_tensor * out, int n_threads, int repeats = 1) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_threadpool_params tpp = ggml_threadpool_params_default(n_threads);
    ggml_threadpool * tp = ggml_threadpool_new(&tpp);
    ggml_cplan plan = ggml_graph_plan(gf, n_threads, tp);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.data();
    double best = 1e300;
    for (int i = 0; i < repeats; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_SUCCESS);
        best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    ggml_threadpool_free(tp);
    return best;
}

// n values drawn from N(0, 1) with `seed`.
inline std::vector<float> activations(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (float & v : x) {
        v = normal(rng);
    }
    return x;
}

} // namespace specdec::test
