#include "llama-internal.h"

// llama.h offers no getter for the context type (MTP validation needs it) or
// for the feature outputs a context extracts (a session restores them).
#include "llama-context.h"
#include "llama-model.h"
#include "llama-ext.h"

#include "ggml-backend.h"
#define GGML_COMMON_DECL_CPP
#include "ggml-common.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

namespace specdec::detail {

namespace {

// ggml-cpu's repacked Q6_K (block_q6_Kx8 of its repack.h, eight rows interleaved eight bytes at
// a time), which x86 builds with AVX512 VNNI make of every Q6_K weight matrix (patches/0012).
struct q6_K_x8 {
    ggml_half d[8];
    int8_t    scales[QK_K / 16 * 8];
    uint8_t   ql[QK_K / 2 * 8];
    uint8_t   qh[QK_K / 4 * 8];
};
static_assert(sizeof(q6_K_x8) == 8 * sizeof(block_q6_K), "a repacked Q6_K block holds eight blocks");

// ggml-cpu's repacked Q8_0 (block_q8_0x8, eight rows interleaved eight bytes at a time), which x86
// builds with AVX512 VNNI make of every Q8_0 weight matrix (patches/0013).
struct q8_0_x8 {
    ggml_half d[8];
    int8_t    qs[QK8_0 * 8];
};
static_assert(sizeof(q8_0_x8) == 8 * sizeof(block_q8_0), "a repacked Q8_0 block holds eight blocks");

// ggml-cpu's repacked IQ4_XS (block_iq4_xsx8: eight rows' super-blocks, the 6-bit scale of
// sub-block ib of row c at index 8 ib + c, and each sub-block's quants eight bytes of each row at a
// time), which x86 builds with AVX512 VNNI make of every IQ4_XS weight matrix (patches/0015).
struct iq4_xs_x8 {
    ggml_half d[8];
    uint8_t   scales_h[QK_K / 16]; // high two bits of index 16 k + j: bits 2k, 2k + 1 of byte j
    uint8_t   scales_l[QK_K / 8];  // low four bits of index i (i < 32) and i + 32: the low and high nibbles of byte i
    uint8_t   qs[QK_K * 4];
};
static_assert(sizeof(iq4_xs_x8) == 8 * sizeof(block_iq4_xs), "a repacked IQ4_XS block holds eight blocks");

// Whether `w` is a matrix in ggml-cpu's repacking buffer (in CPU memory, though not a host
// buffer: its layout is not the type's) that head_matrix_row reads back: Q6_K as q6_K_x8, Q8_0 as
// q8_0_x8, IQ4_XS as iq4_xs_x8. x86 only (ARM repacks them otherwise).
bool repacked_readable(const ggml_tensor * w) {
#if defined(__x86_64__)
    if (w->extra == nullptr || w->buffer == nullptr || std::string_view(ggml_backend_buffer_name(w->buffer)) != "CPU_REPACK") {
        return false;
    }
    switch (w->type) {
        case GGML_TYPE_Q6_K:
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_IQ4_XS: return w->ne[1] % 8 == 0 && w->ne[0] % ggml_blck_size(w->type) == 0;
        default:               return false;
    }
#else
    (void) w;
    return false;
#endif
}

// Row `col` (0-7) of eight rows interleaved eight bytes at a time: its n chunks of eight bytes,
// chunk c at in + 8 * (8c + col), into out.
void deinterleave_row(const void * in, int n, int64_t col, void * out) {
    for (int c = 0; c < n; ++c) {
        std::memcpy(static_cast<uint8_t *>(out) + 8 * c, static_cast<const uint8_t *>(in) + (c * 8 + col) * 8, 8);
    }
}

// Row `row` of a matrix whose rows are repacked eight at a time into n_blocks blocks X of those
// rows' blocks B (rows 8x..8x+7: blocks x * n_blocks onwards), into dst as B blocks: each
// block's d (X::d, one of each row), then the rest through take(in, col, out), col = row % 8.
template <typename X, typename B, typename F>
void read_repacked(const uint8_t * data, int64_t n_blocks, int64_t row, uint8_t * dst, F take) {
    const int64_t col = row % 8;
    const auto * in = reinterpret_cast<const X *>(data) + (row / 8) * n_blocks;
    auto * out = reinterpret_cast<B *>(dst);
    for (int64_t b = 0; b < n_blocks; ++b) {
        out[b].d = in[b].d[col];
        take(in[b], col, out[b]);
    }
}

} // namespace

llama_context_type context_type(const llama_context * ctx) {
    return ctx->get_cparams().ctx_type;
}

bool has_nextn_tensors(const llama_model * model) {
    const uint32_t first_nextn = model->hparams.n_layer();
    return model->hparams.n_layer_nextn > 0 && model->layers.size() > first_nextn &&
           model->layers[first_nextn].nextn.eh_proj != nullptr;
}

bool has_tensor(const llama_model * model, const char * name) {
    return model->get_tensor(name) != nullptr;
}

uint32_t n_outputs_max_per_seq(const llama_context * ctx) {
    return ctx->get_cparams().n_outputs_max_per_seq;
}

feature_outputs feature_outputs_of(const llama_context * ctx) {
    const llama_cparams & c = ctx->get_cparams();
    return {c.embeddings_nextn, c.embeddings_nextn_masked, c.embeddings_layer_inp};
}

void set_feature_outputs(llama_context * ctx, const feature_outputs & o) {
    const feature_outputs now = feature_outputs_of(ctx);
    if (now.nextn != o.nextn || now.nextn_masked != o.nextn_masked) {
        llama_set_embeddings_nextn(ctx, o.nextn, o.nextn_masked);
    }
    for (size_t lid = 0; lid < std::min(now.layer_inputs.size(), o.layer_inputs.size()); ++lid) {
        if (now.layer_inputs[lid] != o.layer_inputs[lid]) {
            llama_set_embeddings_layer_inp(ctx, static_cast<uint32_t>(lid), o.layer_inputs[lid]);
        }
    }
}

const ggml_tensor * mtp_head_matrix(const llama_model * model, std::string & why) {
    // Architectures whose v0.5.0 MTP graph computes h_nextn for every row
    // (the output rows are selected after it) and then the head alone, as
    // read in src/models/*.cpp. qwen3next selects the output rows before its
    // block; cohere2moe scales its logits; deepseek4 mixes hyper-connections.
    static constexpr std::array<std::string_view, 6> archs = {"qwen35", "qwen35moe", "glm4moe", "glm-dsa", "deepseek2",
                                                              "deepseek32"};
    char arch[64] = {};
    llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch));
    if (std::find(archs.begin(), archs.end(), std::string_view(arch)) == archs.end()) {
        why = std::string("its MTP graph (") + arch + ") is not one specdec can split before the head's projection";
        return nullptr;
    }
    const uint32_t il = model->hparams.n_layer();
    if (model->hparams.n_layer_nextn != 1 || model->layers.size() <= il) {
        why = "it has no single NextN head";
        return nullptr;
    }
    const llama_layer_nextn & nextn = model->layers[il].nextn;
    const ggml_tensor * w = nextn.shared_head_head != nullptr ? nextn.shared_head_head : model->output;
    const bool scaled = nextn.shared_head_head != nullptr ? nextn.shared_head_head_s != nullptr || nextn.shared_head_head_in_s != nullptr
                                                          : model->output_s != nullptr || model->output_in_s != nullptr;
    if (w == nullptr || w->ne[2] != 1 || w->ne[3] != 1) {
        why = "the head has no output matrix";
        return nullptr;
    }
    if (scaled) {
        why = "the head's output matrix carries scale tensors";
        return nullptr;
    }
    const bool plain = w->buffer != nullptr && ggml_backend_buffer_is_host(w->buffer) && w->extra == nullptr;
    if (!(plain || repacked_readable(w)) || w->data == nullptr) {
        why = std::string("the head's output matrix (") + ggml_type_name(w->type) + ") is not in plain host memory (" +
              (w->buffer != nullptr ? ggml_backend_buffer_name(w->buffer) : "no buffer") + "; repacked or on a device)";
        return nullptr;
    }
    return w;
}

void head_matrix_row(const ggml_tensor * w, int64_t row, uint8_t * dst) {
    const auto * data = static_cast<const uint8_t *>(w->data);
    if (w->extra == nullptr) {
        std::memcpy(dst, data + static_cast<size_t>(row) * w->nb[1], w->nb[1]);
        return;
    }
    const int64_t nb = w->ne[0] / ggml_blck_size(w->type);
    switch (w->type) {
        case GGML_TYPE_Q8_0:
            read_repacked<q8_0_x8, block_q8_0>(data, nb, row, dst, [](const q8_0_x8 & in, int64_t col, block_q8_0 & out) {
                deinterleave_row(in.qs, QK8_0 / 8, col, out.qs);
            });
            return;
        case GGML_TYPE_Q6_K:
            // the scales one of each row at a time
            read_repacked<q6_K_x8, block_q6_K>(data, nb, row, dst, [](const q6_K_x8 & in, int64_t col, block_q6_K & out) {
                for (int s = 0; s < QK_K / 16; ++s) {
                    out.scales[s] = in.scales[s * 8 + col];
                }
                deinterleave_row(in.ql, QK_K / 16, col, out.ql);
                deinterleave_row(in.qh, QK_K / 32, col, out.qh);
            });
            return;
        default: // IQ4_XS (repacked_readable)
            // the scales as iq4_xs_x8 says; sub-block ib's quants are chunks 2 ib and 2 ib + 1
            read_repacked<iq4_xs_x8, block_iq4_xs>(data, nb, row, dst, [](const iq4_xs_x8 & in, int64_t col, block_iq4_xs & out) {
                out.scales_h = 0;
                std::memset(out.scales_l, 0, sizeof(out.scales_l));
                for (int ib = 0; ib < QK_K / 32; ++ib) {
                    const int64_t index = 8 * ib + col;
                    const int low = (in.scales_l[index % 32] >> (4 * (index / 32))) & 0xF;
                    const int high = (in.scales_h[index % 16] >> (2 * (index / 16))) & 3;
                    out.scales_l[ib / 2] |= static_cast<uint8_t>(low << (4 * (ib % 2)));
                    out.scales_h |= static_cast<uint16_t>(high << (2 * ib));
                }
                deinterleave_row(in.qs, QK_K / 16, col, out.qs);
            });
            return;
    }
}

} // namespace specdec::detail
