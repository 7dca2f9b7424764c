// head_matrix_row (src/llama-internal.h), which a restricted draft
// vocabulary gathers the MTP head's rows with: each row read back is, byte
// for byte, the row as quantized, from a plain buffer and from ggml-cpu's
// repacking buffer, which interleaves Q6_K, Q8_0 and IQ4_XS eight rows at a
// time on x86 with AVX512 VNNI kernels (patches/0012, 0013 and 0015).
#include "cpu-kernel-test.h"
#include "llama-internal.h"

#include <cstring>

namespace specdec::test {
namespace {

// A matrix of `type`, n_out rows of n_in, quantized from seeded values, set
// into a buffer of `buft`; every row read back must be the row as quantized.
void expect_rows_read_back(ggml_backend_buffer_type_t buft, ggml_type type, int64_t n_in, int64_t n_out, bool want_repacked) {
    ggml_init_params params = {ggml_tensor_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, type, n_in, n_out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    ASSERT_NE(buf, nullptr);
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> f = activations(n_in * n_out, 21);
    const size_t row = ggml_row_size(type, n_in);
    std::vector<uint8_t> q(row * static_cast<size_t>(n_out));
    ggml_quantize_chunk(type, f.data(), q.data(), 0, n_out, n_in, nullptr);
    if (want_repacked && w->extra == nullptr) {
        ASSERT_FALSE(ggml_cpu_has_avx512_vnni()) << ggml_type_name(type) << " is not repacked with AVX512 VNNI kernels";
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        GTEST_SKIP() << "this build does not repack " << ggml_type_name(type);
    }
    ggml_backend_tensor_set(w, q.data(), 0, q.size());
    ASSERT_EQ(w->extra != nullptr, want_repacked);
    std::vector<uint8_t> got(row);
    for (int64_t r = 0; r < n_out; ++r) {
        detail::head_matrix_row(w, r, got.data());
        EXPECT_EQ(std::memcmp(got.data(), q.data() + static_cast<size_t>(r) * row, row), 0) << "row " << r << " of " << n_out;
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

TEST(HeadMatrixRow, PlainRowsAsStored) {
    ggml_cpu_init();
    expect_rows_read_back(ggml_backend_cpu_buffer_type(), GGML_TYPE_Q6_K, 512, 20, false);
    expect_rows_read_back(ggml_backend_cpu_buffer_type(), GGML_TYPE_Q8_0, 512, 20, false);
    expect_rows_read_back(ggml_backend_cpu_buffer_type(), GGML_TYPE_IQ4_XS, 512, 20, false);
}

TEST(HeadMatrixRow, RepackedRowsAsQuantized) {
    ggml_cpu_init();
    ggml_backend_buffer_type_t buft = repack_buffer_type();
    if (buft == nullptr) {
        GTEST_SKIP() << "no repacking buffer";
    }
    // 24 rows each (three groups of eight): Q6_K and IQ4_XS in two super-blocks, Q8_0 in four blocks
    expect_rows_read_back(buft, GGML_TYPE_Q6_K, 512, 24, true);
    expect_rows_read_back(buft, GGML_TYPE_Q8_0, 128, 24, true);
    expect_rows_read_back(buft, GGML_TYPE_IQ4_XS, 512, 24, true);
}

} // namespace
} // namespace specdec::test
