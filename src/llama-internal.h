// The only place where specdec reads llama.cpp state that its public headers
// do not expose. Pinned to llama.cpp v0.5.0 (see scripts/bootstrap.sh).
#pragma once

#include "llama.h"

#include <string>
#include <vector>

struct ggml_tensor;

namespace specdec::detail {

// The llama_context_type a context was created with.
llama_context_type context_type(const llama_context * ctx);

// True when the model was loaded with its NextN (MTP) tensors
// (llama_model_params.load_mtp); MTP contexts abort without them.
bool has_nextn_tensors(const llama_model * model);

// True when the model holds a tensor of that name.
bool has_tensor(const llama_model * model, const char * name);

// Most outputs one sequence may request in a batch when a backend sampler is attached.
uint32_t n_outputs_max_per_seq(const llama_context * ctx);

// What a context copies out of each decode besides logits: the NextN hidden
// rows and the inputs of chosen layers (a drafter turns them on over the
// contexts it borrows; a session gives them back as it found them).
struct feature_outputs {
    bool              nextn        = false;
    bool              nextn_masked = false;
    std::vector<bool> layer_inputs; // [layer], 0..n_layer
};
feature_outputs feature_outputs_of(const llama_context * ctx);
// Sets what differs from `o` (a layer input that changes makes the next
// decode reserve its graph again, so unchanged ones are left alone).
void set_feature_outputs(llama_context * ctx, const feature_outputs & o);

// The output matrix ([n_embd, n_vocab]) of the model's single NextN head
// when specdec can project a hidden row onto a subset of it itself: the MTP
// graph of the architecture ends in logits = W x h_nextn (h_nextn being the
// normed row llama_get_embeddings_nextn_ith returns, computed for every row
// whatever the outputs), W (nextn.shared_head_head, else output) has no
// scale tensors, lives in host memory, and its rows can be read back
// (head_matrix_row: stored as they are, or repacked Q6_K, Q8_0 or IQ4_XS on
// x86, which patches/0012, 0013 and 0015 make every output of those types
// with AVX512 VNNI). Else nullptr, and `why` says which condition failed.
const ggml_tensor * mtp_head_matrix(const llama_model * model, std::string & why);

// Copies row `row` (< ne[1]) of a matrix that mtp_head_matrix accepts into
// dst (nb[1] bytes, the row as its type stores it unrepacked).
void head_matrix_row(const ggml_tensor * w, int64_t row, uint8_t * dst);

} // namespace specdec::detail
