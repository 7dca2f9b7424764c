#include "gguf-inspect.h"

#include "error.h"

#include "gguf.h"

#include <algorithm>
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

bool is_integer(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
            return true;
        default:
            return false;
    }
}

// Reads element i of an integer value or array as int64.
int64_t integer_at(const void * data, gguf_type t, size_t i) {
    switch (t) {
        case GGUF_TYPE_UINT8:  return static_cast<const uint8_t *>(data)[i];
        case GGUF_TYPE_INT8:   return static_cast<const int8_t *>(data)[i];
        case GGUF_TYPE_UINT16: return static_cast<const uint16_t *>(data)[i];
        case GGUF_TYPE_INT16:  return static_cast<const int16_t *>(data)[i];
        case GGUF_TYPE_UINT32: return static_cast<const uint32_t *>(data)[i];
        case GGUF_TYPE_INT32:  return static_cast<const int32_t *>(data)[i];
        case GGUF_TYPE_UINT64: return static_cast<int64_t>(static_cast<const uint64_t *>(data)[i]);
        case GGUF_TYPE_INT64:  return static_cast<const int64_t *>(data)[i];
        default:               return 0;
    }
}

class reader {
public:
    explicit reader(const gguf_context * ctx) : ctx_(ctx) {}

    std::string str(const std::string & key) const {
        const int64_t id = gguf_find_key(ctx_, key.c_str());
        return id >= 0 && gguf_get_kv_type(ctx_, id) == GGUF_TYPE_STRING ? gguf_get_val_str(ctx_, id) : "";
    }
    // A scalar integer, or `fallback` when missing or of another type.
    int64_t integer(const std::string & key, int64_t fallback = 0) const {
        const int64_t id = gguf_find_key(ctx_, key.c_str());
        if (id < 0 || !is_integer(gguf_get_kv_type(ctx_, id))) {
            return fallback;
        }
        return integer_at(gguf_get_val_data(ctx_, id), gguf_get_kv_type(ctx_, id), 0);
    }
    std::vector<int64_t> integers(const std::string & key) const {
        const int64_t id = gguf_find_key(ctx_, key.c_str());
        if (id < 0 || gguf_get_kv_type(ctx_, id) != GGUF_TYPE_ARRAY || !is_integer(gguf_get_arr_type(ctx_, id))) {
            return {};
        }
        std::vector<int64_t> out(gguf_get_arr_n(ctx_, id));
        const void * data = gguf_get_arr_data(ctx_, id);
        for (size_t i = 0; i < out.size(); ++i) {
            out[i] = integer_at(data, gguf_get_arr_type(ctx_, id), i);
        }
        return out;
    }
    std::vector<std::string> strings(const std::string & key) const {
        const int64_t id = gguf_find_key(ctx_, key.c_str());
        if (id < 0 || gguf_get_kv_type(ctx_, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(ctx_, id) != GGUF_TYPE_STRING) {
            return {};
        }
        std::vector<std::string> out(gguf_get_arr_n(ctx_, id));
        for (size_t i = 0; i < out.size(); ++i) {
            out[i] = gguf_get_arr_str(ctx_, id, i);
        }
        return out;
    }
    bool has_tensor(const std::string & name) const { return gguf_find_tensor(ctx_, name.c_str()) >= 0; }

private:
    const gguf_context * ctx_;
};

void copy_str(char * dst, size_t cap, const std::string & src) {
    const size_t n = std::min(cap - 1, src.size());
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

uint32_t bit(specdec_strategy s) {
    return 1u << static_cast<unsigned>(s);
}

constexpr uint32_t ngram_bits = (1u << SPECDEC_STRATEGY_NGRAM_SIMPLE) | (1u << SPECDEC_STRATEGY_NGRAM_MAP_K) |
                                (1u << SPECDEC_STRATEGY_NGRAM_MAP_K4V) | (1u << SPECDEC_STRATEGY_NGRAM_MOD) |
                                (1u << SPECDEC_STRATEGY_NGRAM_CACHE);

gguf_summary summarize(const gguf_context * ctx, uint64_t file_size) {
    const reader r(ctx);
    gguf_summary s;
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
    }

    s.tokenizer = r.str("tokenizer.ggml.model");
    s.tokens = r.strings("tokenizer.ggml.tokens");
    s.bos = r.integer("tokenizer.ggml.bos_token_id", -1);
    s.eos = r.integer("tokenizer.ggml.eos_token_id", -1);
    info.n_vocab = static_cast<uint32_t>(s.tokens.size());
    // llama.cpp's vocabulary loader asserts on two tokens with one text.
    std::vector<std::string_view> sorted(s.tokens.begin(), s.tokens.end());
    std::sort(sorted.begin(), sorted.end());
    const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end()) {
        fail(SPECDEC_STATUS_MALFORMED_FILE, "the vocabulary holds the token text '", std::string(*dup), "' twice");
    }

    if (arch.empty()) {
        return s;
    }
    info.n_embd  = static_cast<uint32_t>(std::clamp<int64_t>(r.integer(arch + ".embedding_length"), 0, UINT32_MAX));
    info.n_layer = static_cast<uint32_t>(std::clamp<int64_t>(r.integer(arch + ".block_count"), 0, UINT32_MAX));
    // NextN blocks are the last ones; count those whose projection is present
    // (llama.cpp's own detection reads block_count unchecked, and aborts without it).
    // Each NextN block has a tensor, so a file cannot have more than it has tensors.
    const int64_t nextn = std::clamp<int64_t>(r.integer(arch + ".nextn_predict_layers"), 0,
                                              std::min<int64_t>(info.n_layer, info.n_tensors));
    for (int64_t k = 0; k < nextn; ++k) {
        if (r.has_tensor("blk." + std::to_string(info.n_layer - nextn + k) + ".nextn.eh_proj.weight")) {
            info.n_layer_nextn++;
        }
    }
    const std::vector<int64_t> sites = r.integers(arch + ".target_layers");
    info.n_target_layers = static_cast<uint32_t>(std::min<size_t>(sites.size(), SPECDEC_MAX_TARGET_LAYERS));
    for (uint32_t k = 0; k < info.n_target_layers; ++k) {
        info.target_layers[k] = static_cast<int32_t>(std::clamp<int64_t>(sites[k], INT32_MIN, INT32_MAX));
    }
    info.target_hidden_size = static_cast<uint32_t>(std::clamp<int64_t>(r.integer(arch + ".target_hidden_size"), 0, UINT32_MAX));

    if (arch == "eagle3") {
        info.strategies = bit(SPECDEC_STRATEGY_EAGLE3);
    } else if (arch == "dflash") {
        info.block_size = static_cast<uint32_t>(std::clamp<int64_t>(r.integer("dflash.block_size", 16), 0, UINT32_MAX));
        info.dflash2 = r.has_tensor("selector_hidden.weight");
        info.markov_head = r.has_tensor("markov_w1.weight");
        info.strategies = bit(info.markov_head ? SPECDEC_STRATEGY_DSPARK : SPECDEC_STRATEGY_DFLASH);
    } else {
        info.strategies = ngram_bits | (info.n_vocab > 0 ? bit(SPECDEC_STRATEGY_DRAFT) : 0u);
        if (info.n_layer_nextn > 0) {
            info.strategies |= bit(SPECDEC_STRATEGY_MTP);
        }
    }
    return s;
}

const char * name_of(specdec_strategy s) {
    const char * n = specdec_strategy_name(s);
    return n != nullptr ? n : "unknown";
}

void check_sites(const gguf_summary & target, const gguf_summary & draft, bool exactly_three) {
    const specdec_model_info & t = target.info;
    const specdec_model_info & d = draft.info;
    if (d.n_target_layers == 0 || (exactly_three && d.n_target_layers != 3)) {
        fail(SPECDEC_STATUS_LAYER_MISMATCH, "the draft names ", d.n_target_layers, " target layers; ",
             exactly_three ? "EAGLE-3 needs exactly three" : "it needs at least one");
    }
    const int64_t trunk = static_cast<int64_t>(t.n_layer) - t.n_layer_nextn;
    const bool terminal_ok = exactly_three && std::string(t.architecture) == "gpt-oss";
    for (uint32_t k = 0; k < d.n_target_layers; ++k) {
        const int64_t id = d.target_layers[k];
        if (!((id >= 0 && id < trunk) || (terminal_ok && id == trunk))) {
            fail(SPECDEC_STATUS_LAYER_MISMATCH, "the draft reads target layer ", id, ", but the target has ", trunk,
                 " layers; the draft was made for another target");
        }
    }
    if (d.target_hidden_size != 0 && d.target_hidden_size != t.n_embd) {
        fail(SPECDEC_STATUS_WIDTH_MISMATCH, "the draft was made for hidden size ", d.target_hidden_size,
             ", the target's is ", t.n_embd);
    }
}

void check_vocab(const gguf_summary & target, const gguf_summary & draft) {
    if (target.tokenizer != draft.tokenizer) {
        fail(SPECDEC_STATUS_VOCAB_MISMATCH, "tokenizers differ ('", target.tokenizer, "' vs '", draft.tokenizer, "')");
    }
    if (target.bos != draft.bos || target.eos != draft.eos) {
        fail(SPECDEC_STATUS_VOCAB_MISMATCH, "BOS/EOS tokens differ (", target.bos, "/", target.eos, " vs ", draft.bos, "/",
             draft.eos, ")");
    }
    const size_t nt = target.tokens.size();
    const size_t nd = draft.tokens.size();
    if ((nt > nd ? nt - nd : nd - nt) > 128) {
        fail(SPECDEC_STATUS_VOCAB_MISMATCH, "vocabulary sizes differ by more than 128 (", nt, " vs ", nd, ")");
    }
    for (size_t i = 5; i < std::min(nt, nd); ++i) {
        if (target.tokens[i] != draft.tokens[i]) {
            fail(SPECDEC_STATUS_VOCAB_MISMATCH, "token ", i, " differs ('", target.tokens[i], "' vs '", draft.tokens[i], "')");
        }
    }
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
    const bool needs_draft_model = specdec_strategy_needs_draft_context(strategy) && strategy != SPECDEC_STRATEGY_MTP;
    if (needs_draft_model && draft == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", name_of(strategy), "' needs a draft model");
    }
    if (!needs_draft_model && draft != nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", name_of(strategy), "' takes no draft model");
    }
    const specdec_model_info & t = target.info;
    if (std::string(t.architecture) == "eagle3" || std::string(t.architecture) == "dflash") {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "a ", t.architecture, " file is a draft model, not a target");
    }
    if (strategy == SPECDEC_STRATEGY_MTP && t.n_layer_nextn == 0) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the target (", t.architecture, ") carries no MTP (NextN) heads");
    }
    if (draft == nullptr) {
        return;
    }
    const uint32_t need = bit(strategy);
    if ((draft->info.strategies & need) == 0) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the draft (", draft->info.architecture, ") cannot serve strategy '",
             name_of(strategy), "'");
    }
    switch (strategy) {
        case SPECDEC_STRATEGY_EAGLE3:
            check_sites(target, *draft, true);
            break;
        case SPECDEC_STRATEGY_DFLASH:
        case SPECDEC_STRATEGY_DSPARK:
            check_sites(target, *draft, false);
            if (draft->info.block_size < 2) {
                fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the DFlash draft has block size ", draft->info.block_size,
                     "; a block needs the anchor and at least one masked position (>= 2)");
            }
            break;
        case SPECDEC_STRATEGY_DRAFT:
            check_vocab(target, *draft);
            break;
        default:
            break;
    }
}

specdec_strategy detect_strategy(const gguf_summary & target, const gguf_summary * draft) {
    if (draft != nullptr) {
        for (specdec_strategy s : {SPECDEC_STRATEGY_EAGLE3, SPECDEC_STRATEGY_DSPARK, SPECDEC_STRATEGY_DFLASH, SPECDEC_STRATEGY_DRAFT}) {
            if (draft->info.strategies & bit(s)) {
                return s;
            }
        }
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the draft (", draft->info.architecture, ") is no draft model specdec knows");
    }
    if (target.info.strategies & bit(SPECDEC_STRATEGY_MTP)) {
        return SPECDEC_STRATEGY_MTP;
    }
    fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the target (", target.info.architecture,
         ") has no MTP heads and no draft model was given; choose an n-gram strategy or pass a draft model");
}

} // namespace specdec::detail
