#include "gguf-load-check.h"

#include "error.h"
#include "gguf-reader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

namespace specdec::detail {

namespace {

constexpr int64_t max_layers  = 512;  // LLAMA_MAX_LAYERS
constexpr int64_t max_experts = 1024; // LLAMA_MAX_EXPERTS
// The one architecture made of NextN blocks only (a draft, no trunk):
// nextn_predict_layers == block_count is its normal shape.
constexpr std::string_view nextn_only_arch = "gemma4-assistant";

class checker {
public:
    checker(const gguf_context * ctx, const std::string & what) : r_(ctx), what_(what) {}

    template <typename... Args>
    [[noreturn]] void refuse(Args &&... args) const {
        fail(SPECDEC_STATUS_MALFORMED_FILE, what_, " cannot be loaded by llama.cpp: ", std::forward<Args>(args)...);
    }

    // A uint32 key as the loader reads it: nullopt when missing (refused when
    // required); refused when of another type.
    std::optional<int64_t> u32(const std::string & key, bool required = false) const {
        const gguf_type t = r_.type(key);
        if (t == GGUF_TYPE_COUNT) {
            if (required) {
                refuse("the metadata has no ", key);
            }
            return std::nullopt;
        }
        if (t != GGUF_TYPE_UINT32) {
            refuse(key, " has type ", gguf_type_name(t), "; llama.cpp reads it as uint32");
        }
        return r_.integer(key);
    }

    // A key read with get_key_or_arr: one uint32 (for every layer), or one
    // value per layer, as the loader stores them (uint32). {0} when missing
    // or an empty array.
    std::vector<int64_t> scalar_or_array(const std::string & key) const {
        if (r_.type(key) == GGUF_TYPE_ARRAY) {
            std::vector<int64_t> values;
            for (int64_t v : r_.integers(key)) {
                values.push_back(static_cast<uint32_t>(v));
            }
            return values.empty() ? std::vector<int64_t>{0} : values;
        }
        return {u32(key).value_or(0)};
    }

    void vocabulary() const {
        if (r_.type("tokenizer.ggml.model") != GGUF_TYPE_STRING) {
            refuse("the metadata has no tokenizer.ggml.model (string)");
        }
        const std::string model = r_.str("tokenizer.ggml.model");
        if (model == "no_vocab" || model == "none") {
            return;
        }
        if (r_.type("tokenizer.ggml.tokens") != GGUF_TYPE_ARRAY || r_.array_size("tokenizer.ggml.tokens") == 0 ||
            r_.strings("tokenizer.ggml.tokens").empty()) {
            refuse("the metadata has no tokenizer.ggml.tokens (array of strings)");
        }
        std::vector<std::string> sorted = vocab_texts(r_);
        std::sort(sorted.begin(), sorted.end());
        const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
        if (dup != sorted.end()) {
            refuse("the vocabulary holds the token text '", *dup, "' twice (llama.cpp asserts on it)");
        }
    }

    void hparams(const std::string & arch) const {
        u32(arch + ".context_length", true);
        u32(arch + ".embedding_length", true);
        const int64_t n_layer = *u32(arch + ".block_count", true);
        if (n_layer < 1 || n_layer > max_layers) {
            refuse(arch, ".block_count is ", n_layer, "; llama.cpp asserts 1 <= block_count <= ", max_layers);
        }
        const int64_t nextn = u32(arch + ".nextn_predict_layers").value_or(0);
        if (nextn > n_layer) {
            refuse(arch, ".nextn_predict_layers is ", nextn, ", above block_count = ", n_layer, " (llama.cpp asserts)");
        }
        if (nextn > 0 && nextn == n_layer && arch != nextn_only_arch) {
            refuse(arch, ".nextn_predict_layers is ", nextn, ", equal to block_count: no trunk block is left for ", arch,
                   " (llama.cpp aborts in the first decode)");
        }
        heads(arch);
        epsilons(arch);
        experts(arch);
        if (r_.type(arch + ".rope.scaling.type") == GGUF_TYPE_STRING) {
            static constexpr std::array<std::string_view, 4> known = {"none", "linear", "yarn", "longrope"};
            const std::string type = r_.str(arch + ".rope.scaling.type");
            if (std::find(known.begin(), known.end(), type) == known.end()) {
                refuse(arch, ".rope.scaling.type is '", type, "'; llama.cpp asserts on anything but none, linear, yarn or longrope");
            }
        }
        if ((arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next") && !r_.has(arch + ".attention.recurrent_layers")) {
            if (u32(arch + ".full_attention_interval").value_or(4) == 0) {
                refuse(arch, ".full_attention_interval is 0; llama.cpp divides by it");
            }
        }
        if (arch == "dflash" && u32("dflash.hyper_connection.count").value_or(0) > 0) {
            for (const char * key : {"dflash.attention.output_group_count", "dflash.attention.sliding_window"}) {
                if (u32(key).value_or(1) == 0) {
                    refuse(key, " is 0 in a DSpark draft with hyper-connections; llama.cpp asserts it is > 0");
                }
            }
        }
    }

    // Rotary dimensions within the head: the rope kernel asserts
    // n_dims <= head size in the first decode (the loader checks this for
    // llama, deci and falcon only). Models without attention heads have no rope.
    void heads(const std::string & arch) const {
        const int64_t n_head = scalar_or_array(arch + ".attention.head_count").front(); // the loader's n_head(): block 0
        if (n_head == 0) {
            return;
        }
        const int64_t n_embd = *u32(arch + ".embedding_length", true);
        const int64_t head_k = u32(arch + ".attention.key_length").value_or(n_embd / n_head);
        const int64_t n_rot = u32(arch + ".rope.dimension_count").value_or(head_k);
        if (n_rot > head_k) {
            refuse(arch, ".rope.dimension_count is ", n_rot, ", above the head size ", head_k,
                   " (llama.cpp asserts n_dims <= head size in the first decode)");
        }
        const int64_t head_k_swa = u32(arch + ".attention.key_length_swa").value_or(head_k);
        const int64_t n_rot_swa = u32(arch + ".rope.dimension_count_swa").value_or(n_rot);
        if (n_rot_swa > head_k_swa) {
            refuse(arch, ".rope.dimension_count_swa is ", n_rot_swa, ", above the sliding-window head size ", head_k_swa,
                   " (llama.cpp asserts n_dims <= head size in the first decode)");
        }
    }

    // Every norm epsilon the file carries is a divisor's guard: zero, negative,
    // infinite or NaN gives NaN or infinite activations (or an abort in the
    // norm kernel), so it must be positive and finite. Keys of another type
    // are left to the loader, which refuses them.
    void epsilons(const std::string & arch) const {
        for (const char * suffix : {".attention.layer_norm_epsilon", ".attention.layer_norm_rms_epsilon",
                                    ".attention.group_norm_epsilon", ".hyper_connection.epsilon"}) {
            const std::string key = arch + suffix;
            const std::optional<double> eps = r_.real(key);
            if (eps && !(std::isfinite(*eps) && *eps > 0.0)) {
                refuse(key, " is ", *eps, "; a norm epsilon must be positive and finite");
            }
        }
    }

    void experts(const std::string & arch) const {
        const int64_t n_expert = u32(arch + ".expert_count").value_or(0);
        const std::vector<int64_t> used_per_layer = scalar_or_array(arch + ".expert_used_count");
        const int64_t used = *std::max_element(used_per_layer.begin(), used_per_layer.end());
        const int64_t groups = u32(arch + ".expert_group_count").value_or(0);
        const int64_t group_used = u32(arch + ".expert_group_used_count").value_or(0);
        if (n_expert > max_experts) {
            refuse(arch, ".expert_count is ", n_expert, "; llama.cpp asserts at most ", max_experts);
        }
        if (used > n_expert) {
            refuse(arch, ".expert_used_count is ", used, ", above expert_count = ", n_expert, " (llama.cpp asserts)");
        }
        if (n_expert == 0) {
            if (groups != 0) {
                refuse(arch, ".expert_group_count is ", groups, " in a model without experts (llama.cpp asserts)");
            }
            if (arch == "glm4moe") {
                refuse("glm4moe.expert_count is missing or 0; llama.cpp asserts that a glm4moe model has experts");
            }
            return;
        }
        if (used == 0) {
            refuse(arch, ".expert_used_count is missing or 0 with ", n_expert, " experts (llama.cpp asserts)");
        }
        if (arch == "glm4moe" && used_per_layer.front() == 0) {
            refuse("glm4moe.expert_used_count is 0 for the first block; llama.cpp asserts that glm4moe's is above 0");
        }
        if (groups >= n_expert) {
            refuse(arch, ".expert_group_count is ", groups, "; llama.cpp asserts it is below expert_count = ", n_expert);
        }
        if (groups > 1 && (n_expert % groups != 0 || group_used == 0 || group_used >= groups)) {
            refuse(arch, ".expert_group_count = ", groups, " and expert_group_used_count = ", group_used,
                   " do not fit expert_count = ", n_expert,
                   ": llama.cpp asserts that the groups divide the experts and 0 < groups used < groups");
        }
    }

private:
    gguf_reader r_;
    const std::string & what_;
};

} // namespace

void check_loadable(const gguf_context * ctx, const std::string & what) {
    const checker c(ctx, what);
    const gguf_reader r(ctx);
    if (r.type("general.architecture") != GGUF_TYPE_STRING) {
        c.refuse("the metadata has no general.architecture (string)");
    }
    c.vocabulary();
    c.hparams(r.str("general.architecture"));
}

} // namespace specdec::detail
