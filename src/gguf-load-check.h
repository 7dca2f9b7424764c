// The header values llama.cpp v0.5.0's model loader turns into a process
// abort (GGML_ASSERT, or a division by zero) instead of an error, and the
// keys it requires, checked on the metadata before anything is loaded.
// specdec_inspect runs it on every file, and the CLI inspects every file
// before loading it, so a file inspect accepts loads or fails with an error.
#pragma once

#include <string>

struct gguf_context;

namespace specdec::detail {

// Throws error(MALFORMED_FILE) naming the key and the value to change.
// `what` names the file in the message.
//
// Covered (llama.cpp v0.5.0 sources; every architecture unless named):
//  llama-model.cpp, llama_model_base::load_hparams
//   - general.architecture, <arch>.context_length, <arch>.embedding_length,
//     <arch>.block_count must exist as uint32 (the loader throws "key not found")
//   - GGML_ASSERT(n_layer_all > 0 && n_layer_all <= LLAMA_MAX_LAYERS):  1 <= block_count <= 512
//   - GGML_ASSERT(n_layer_nextn <= n_layer_all):                         nextn_predict_layers <= block_count
//   - a NextN-only model aborts in its first decode (glm4moe: no trunk block to run), so
//     nextn_predict_layers < block_count, except gemma4-assistant (NextN blocks only by design)
//   - the rope kernel's GGML_ASSERT(n_dims <= ne0) in the first decode:  rope.dimension_count <= attention.key_length
//     (default embedding_length / head_count), and the same for the _swa keys
//   - norm epsilons (attention.layer_norm_epsilon, layer_norm_rms_epsilon, group_norm_epsilon,
//     hyper_connection.epsilon), when present as floats: positive and finite (else NaN activations or an abort)
//   - GGML_ASSERT(n_expert <= LLAMA_MAX_EXPERTS):                        expert_count <= 1024
//   - GGML_ASSERT(n_expert_used_max <= n_expert)                         (expert_used_count, scalar or per layer)
//   - with experts: GGML_ASSERT(n_expert_used_max > 0), (n_expert_groups < n_expert),
//     groups > 1: (n_expert % n_expert_groups == 0), (n_group_used > 0), (n_group_used < n_expert_groups)
//   - without experts: GGML_ASSERT(n_expert_used_max == 0), (n_expert_groups == 0)
//   - GGML_ASSERT(rope_scaling_type_train != UNSPECIFIED):              rope.scaling.type in none, linear, yarn, longrope
//  models/qwen35.cpp, qwen35moe.cpp, qwen3next.cpp, load_arch_hparams
//   - (i + 1) % full_attn_interval without attention.recurrent_layers:   full_attention_interval > 0
//  models/glm4-moe.cpp, load_arch_tensors
//   - GGML_ASSERT(n_expert > 0), GGML_ASSERT(n_expert_used() > 0):      expert_count > 0, and expert_used_count > 0
//     for the first block (n_expert_used() reads block 0 of a per-layer array)
//  models/dflash.cpp, load_arch_hparams (DSpark DSV4 backbone, hyper_connection.count > 0)
//   - GGML_ASSERT(dsv4_o_group_count > 0), GGML_ASSERT(n_swa > 0):      attention.output_group_count, attention.sliding_window > 0
//  llama-vocab.cpp, llama_vocab::impl::load
//   - tokenizer.ggml.model must exist as a string, and tokenizer.ggml.tokens as a string array
//     unless the model is "no_vocab"/"none" (the loader throws)
//   - GGML_ASSERT(id_to_token.size() == token_to_id.size()):             token texts are unique
// The eagle3 and llama architectures' hparams code only throws; their other
// required keys (e.g. a missing attention.layer_norm_rms_epsilon) are left to the loader's error.
void check_loadable(const gguf_context * ctx, const std::string & what);

} // namespace specdec::detail
