#include "gguf-reader.h"

namespace specdec::detail {

namespace {

bool is_integer(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
            return true;
        default:
            return false;
    }
}

// Element i of an integer value or array, as int64 (uint64 above INT64_MAX wraps).
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

} // namespace

gguf_type gguf_reader::type(const std::string & key) const {
    const int64_t id = gguf_find_key(ctx_, key.c_str());
    return id >= 0 ? gguf_get_kv_type(ctx_, id) : GGUF_TYPE_COUNT;
}

std::string gguf_reader::str(const std::string & key) const {
    const int64_t id = gguf_find_key(ctx_, key.c_str());
    return id >= 0 && gguf_get_kv_type(ctx_, id) == GGUF_TYPE_STRING ? gguf_get_val_str(ctx_, id) : "";
}

std::optional<int64_t> gguf_reader::integer(const std::string & key) const {
    const int64_t id = gguf_find_key(ctx_, key.c_str());
    if (id < 0 || !is_integer(gguf_get_kv_type(ctx_, id))) {
        return std::nullopt;
    }
    return integer_at(gguf_get_val_data(ctx_, id), gguf_get_kv_type(ctx_, id), 0);
}

std::optional<double> gguf_reader::real(const std::string & key) const {
    const int64_t id = gguf_find_key(ctx_, key.c_str());
    if (id < 0) {
        return std::nullopt;
    }
    switch (gguf_get_kv_type(ctx_, id)) {
        case GGUF_TYPE_FLOAT32: return gguf_get_val_f32(ctx_, id);
        case GGUF_TYPE_FLOAT64: return gguf_get_val_f64(ctx_, id);
        default:                return std::nullopt;
    }
}

std::optional<bool> gguf_reader::boolean(const std::string & key) const {
    const int64_t id = gguf_find_key(ctx_, key.c_str());
    if (id < 0 || gguf_get_kv_type(ctx_, id) != GGUF_TYPE_BOOL) {
        return std::nullopt;
    }
    return gguf_get_val_bool(ctx_, id);
}

std::vector<int64_t> gguf_reader::integers(const std::string & key) const {
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

std::vector<std::string> gguf_reader::strings(const std::string & key) const {
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

size_t gguf_reader::array_size(const std::string & key) const {
    const int64_t id = gguf_find_key(ctx_, key.c_str());
    return id >= 0 && gguf_get_kv_type(ctx_, id) == GGUF_TYPE_ARRAY ? gguf_get_arr_n(ctx_, id) : 0;
}

std::vector<std::string> vocab_texts(const gguf_reader & r) {
    std::vector<std::string> texts = r.strings("tokenizer.ggml.tokens");
    for (size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].empty()) {
            texts[i] = "[EMPTY_" + std::to_string(i) + "]";
        }
    }
    return texts;
}

} // namespace specdec::detail
