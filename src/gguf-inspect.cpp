#include "gguf-inspect.h"

#include "error.h"
#include "gguf-load-check.h"
#include "gguf-reader.h"
#include "strategy-traits.h"

#include "gguf.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

namespace specdec::detail {

namespace {

struct gguf_deleter {
    void operator()(gguf_context * ctx) const { gguf_free(ctx); }
};
using gguf_ptr = std::unique_ptr<gguf_context, gguf_deleter>;

void copy_str(char * dst, size_t cap, const std::string & src) {
    const size_t n = std::min(cap - 1, src.size());
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

uint32_t to_u32(int64_t v) {
    return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, UINT32_MAX));
}

// BPE pre-tokenizers for which llama.cpp's vocabulary adds BOS by default.
constexpr std::array<std::string_view, 11> bpe_pre_adding_bos = {
    "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "tekken",
    "chameleon",
};

// The special tokens and BOS/EOS flags as llama.cpp's vocabulary loader
// resolves them: its defaults per tokenizer, out-of-range ids dropped, then
// the file's keys (an id outside the vocabulary keeps the default).
void vocab_facts(const gguf_reader & r, model_facts & f) {
    f.tokenizer = r.str("tokenizer.ggml.model");
    f.tokens = vocab_texts(r);
    const std::string pre = r.str("tokenizer.ggml.pre");
    if (f.tokenizer == "llama") {
        f.bos = 1, f.eos = 2, f.add_bos = true;
    } else if (f.tokenizer == "bert") {
        f.bos = 101, f.mask = 103, f.add_bos = true;
    } else if (f.tokenizer == "gpt2") {
        f.bos = 11, f.eos = 11;
        f.add_bos = std::find(bpe_pre_adding_bos.begin(), bpe_pre_adding_bos.end(), pre) != bpe_pre_adding_bos.end();
    } else if (f.tokenizer == "t5") {
        f.eos = 1, f.add_eos = true;
    }
    const int64_t n = static_cast<int64_t>(f.tokens.size());
    for (auto [key, id] : {std::pair{"tokenizer.ggml.bos_token_id", &f.bos}, std::pair{"tokenizer.ggml.eos_token_id", &f.eos},
                           std::pair{"tokenizer.ggml.mask_token_id", &f.mask}}) {
        if (*id >= n) {
            *id = -1;
        }
        if (r.type(key) == GGUF_TYPE_UINT32 && *r.integer(key) < n) {
            *id = *r.integer(key);
        }
    }
    f.add_bos = r.boolean("tokenizer.ggml.add_bos_token").value_or(f.add_bos) || pre == "gemma4";
    f.add_eos = r.boolean("tokenizer.ggml.add_eos_token").value_or(f.add_eos);
}

uint32_t strategies_of(const model_facts & f) {
    const bool draft_only = is_draft_arch(f.arch.c_str());
    uint32_t bits = 0;
    for (const strategy_traits & t : all_traits()) {
        bool serves = false;
        switch (t.weights) {
            case draft_weights::none:
                serves = !draft_only;
                break;
            case draft_weights::target_heads:
                serves = !draft_only && f.n_layer_nextn > 0 && f.nextn_tensors;
                break;
            case draft_weights::draft_model:
                serves = t.draft_arch != nullptr ? f.arch == t.draft_arch && (!t.dflash_block || f.markov_head == t.markov_head)
                                                 : !draft_only && !f.tokens.empty();
                break;
        }
        if (serves) {
            bits |= 1u << static_cast<unsigned>(t.strategy);
        }
    }
    return bits;
}

gguf_summary summarize(const gguf_context * ctx, uint64_t file_size) {
    const gguf_reader r(ctx);
    gguf_summary s;
    model_facts & f = s.facts;
    specdec_model_info & info = s.info;
    const std::string arch = r.str("general.architecture");
    copy_str(info.architecture, sizeof(info.architecture), arch);
    copy_str(info.name, sizeof(info.name), r.str("general.name"));
    info.file_size = file_size;

    const int64_t n_tensors = gguf_get_n_tensors(ctx);
    info.n_tensors = static_cast<uint32_t>(std::max<int64_t>(n_tensors, 0));
    for (int64_t i = 0; i < n_tensors; ++i) {
        const int64_t * ne = gguf_get_tensor_ne(ctx, i);
        uint64_t n = 1;
        for (int d = 0; d < GGML_MAX_DIMS; ++d) {
            n *= static_cast<uint64_t>(std::max<int64_t>(ne[d], 0));
        }
        info.n_params += n;
        const int type = static_cast<int>(gguf_get_tensor_type(ctx, i));
        if (std::find(s.tensor_types.begin(), s.tensor_types.end(), type) == s.tensor_types.end()) {
            s.tensor_types.push_back(type);
        }
    }

    vocab_facts(r, f);
    info.n_vocab = static_cast<uint32_t>(f.tokens.size());

    // check_loadable bounds these: block_count in [1, 512], nextn <= block_count.
    f.arch = arch;
    const int64_t n_layer_all = r.integer(arch + ".block_count", 0);
    f.n_layer_nextn = to_u32(r.integer(arch + ".nextn_predict_layers", 0));
    f.n_layer = to_u32(n_layer_all - f.n_layer_nextn);
    f.n_embd = to_u32(r.integer(arch + ".embedding_length", 0));
    info.n_embd = f.n_embd;
    info.n_layer = to_u32(n_layer_all);
    // NextN blocks are the last ones; count those whose projection is present.
    for (uint32_t k = 0; k < f.n_layer_nextn; ++k) {
        if (r.has_tensor("blk." + std::to_string(f.n_layer + k) + ".nextn.eh_proj.weight")) {
            info.n_layer_nextn++;
            f.nextn_tensors |= k == 0;
        }
    }
    for (int64_t id : r.integers(arch + ".target_layers")) {
        f.target_layers.push_back(static_cast<int32_t>(std::clamp<int64_t>(id, INT32_MIN, INT32_MAX)));
    }
    info.n_target_layers = static_cast<uint32_t>(std::min<size_t>(f.target_layers.size(), SPECDEC_MAX_TARGET_LAYERS));
    std::copy_n(f.target_layers.begin(), info.n_target_layers, info.target_layers);
    f.target_hidden_size = r.integer(arch + ".target_hidden_size", 0);
    info.target_hidden_size = to_u32(f.target_hidden_size);

    f.dflash_block_size = r.integer("dflash.block_size", dflash_default_block_size);
    f.dflash_selector_top_k = r.integer("dflash.selector_top_k", 0);
    f.dflash_selector = r.has_tensor("selector_hidden.weight");
    f.markov_head = r.has_tensor("markov_w1.weight");
    const auto traits = all_traits();
    if (std::any_of(traits.begin(), traits.end(), [&](const strategy_traits & t) { return t.dflash_block && t.draft_arch != nullptr && arch == t.draft_arch; })) {
        info.block_size = to_u32(f.dflash_block_size);
        info.dflash2 = f.dflash_selector;
        info.markov_head = f.markov_head;
    }
    info.strategies = strategies_of(f);
    return s;
}

gguf_summary open_checked(gguf_context * raw, uint64_t size, const std::string & what) {
    gguf_ptr ctx(raw);
    if (!ctx) {
        fail(SPECDEC_STATUS_MALFORMED_FILE, what, " is not a readable GGUF file (bad header, truncated or inconsistent)");
    }
    // The metadata may be whole while the tensor data is cut off.
    const uint64_t data = gguf_get_data_offset(ctx.get());
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx.get()); ++i) {
        const uint64_t end = data + gguf_get_tensor_offset(ctx.get(), i) + gguf_get_tensor_size(ctx.get(), i);
        if (end > size) {
            fail(SPECDEC_STATUS_MALFORMED_FILE, what, " is truncated: tensor '", gguf_get_tensor_name(ctx.get(), i),
                 "' ends at byte ", end, " of ", size);
        }
    }
    check_loadable(ctx.get(), what);
    return summarize(ctx.get(), size);
}

} // namespace

gguf_summary inspect_file(const std::string & path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || !std::filesystem::is_regular_file(path, ec)) {
        fail(SPECDEC_STATUS_IO_ERROR, "cannot read '", path, "': ", ec ? ec.message() : "not a regular file");
    }
    const gguf_init_params params = {/* .no_alloc = */ true, /* .ctx = */ nullptr};
    return open_checked(gguf_init_from_file(path.c_str(), params), size, "'" + path + "'");
}

gguf_summary inspect_bytes(const void * data, size_t size) {
    if (data == nullptr && size > 0) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "data must not be NULL");
    }
    const gguf_init_params params = {/* .no_alloc = */ true, /* .ctx = */ nullptr};
    return open_checked(size == 0 ? nullptr : gguf_init_from_buffer(data, size, params), size, "the buffer");
}

void check_pair(const gguf_summary & target, const gguf_summary * draft, specdec_strategy strategy) {
    check_models(target.facts, draft != nullptr ? &draft->facts : nullptr, strategy);
}

specdec_strategy detect_strategy(const gguf_summary & target, const gguf_summary * draft) {
    if (draft != nullptr) {
        const strategy_traits * best = nullptr;
        for (const strategy_traits & t : all_traits()) {
            const bool serves = (draft->info.strategies >> static_cast<unsigned>(t.strategy)) & 1u;
            if (t.detect_rank > 0 && serves && (best == nullptr || t.detect_rank < best->detect_rank)) {
                best = &t;
            }
        }
        if (best == nullptr) {
            fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the draft (", draft->info.architecture, ") is no draft model specdec knows");
        }
        return best->strategy;
    }
    for (const strategy_traits & t : all_traits()) {
        if (t.weights == draft_weights::target_heads && ((target.info.strategies >> static_cast<unsigned>(t.strategy)) & 1u)) {
            return t.strategy;
        }
    }
    fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the target (", target.info.architecture,
         ") has no MTP heads and no draft model was given; choose an n-gram strategy or pass a draft model");
}

} // namespace specdec::detail
