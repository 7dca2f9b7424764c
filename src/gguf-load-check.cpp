#include "gguf-load-check.h"

#include "error.h"
#include "gguf-reader.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>
#include <vector>

namespace specdec::detail {

namespace {

constexpr int64_t max_layers  = 512;  // LLAMA_MAX_LAYERS
constexpr int64_t max_experts = 1024; // LLAMA_MAX_EXPERTS

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
