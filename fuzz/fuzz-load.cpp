// Header edits of small generated models, then the pre-load check, then
// llama.cpp's loader: whatever specdec's inspection lets through must load
// or fail with an error (llama_model_load_from_file returns NULL), never
// abort the process. The input is text, one edit per line:
//   base=<llama|qwen35|glm4moe|eagle3|dflash>   the model edited (default llama)
//   <key>=<value>                               a key; a leading '.' stands for "<arch>."
// with value `123` (uint32; a negative number is int32), `s:text`, `f:1.5`,
// `b:1`, `[1,2,3]` (int32 array) or `-` (remove the key). general.* keys
// and keys with a NUL are left alone (gguf asserts on a bad general.alignment
// and on an empty key while the edit is made).
// fuzz/load.dict lists the keys that matter to the loader's assertions.
#include "fixtures.h"
#include "gguf-edit.h"
#include "gguf-inspect.h"

#include "specdec/specdec.hpp"

#include "gguf.h"
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::map<std::string, std::vector<uint8_t>> bases;
std::string scratch; // the file the loader reads

void quiet(ggml_log_level, const char *, void *) {}

std::vector<uint8_t> write_base(const std::string & arch) {
    specdec::fixtures::fixture_options opt;
    opt.n_vocab = 32;
    opt.n_embd = 64;
    opt.n_layer = 2;
    opt.controlled = arch == "eagle3" || arch == "dflash"; // drafts exist only in their controlled form
    char path[] = "/tmp/specdec-fuzz-load-base-XXXXXX";
    close(mkstemp(path));
    if (arch == "qwen35") {
        specdec::fixtures::write_qwen35_mtp(path, opt);
    } else if (arch == "glm4moe") {
        specdec::fixtures::write_glm4moe_mtp(path, opt);
    } else if (arch == "eagle3") {
        specdec::fixtures::write_eagle3_draft(path, opt);
    } else if (arch == "dflash") {
        specdec::fixtures::write_dflash_draft(path, opt, false);
    } else {
        specdec::fixtures::write_llama_target(path, opt);
    }
    std::vector<uint8_t> bytes = specdec::fixtures::read_file(path);
    unlink(path);
    return bytes;
}

struct edit {
    std::string key;
    std::string value;
};

void apply(gguf_context * g, const std::string & arch, const edit & e) {
    std::string key = e.key.size() > 1 && e.key[0] == '.' ? arch + e.key : e.key;
    if (key.empty() || key.find('\0') != std::string::npos || key.rfind("general.", 0) == 0) { // gguf asserts on an empty key
        return;
    }
    const std::string & v = e.value;
    const char * k = key.c_str();
    if (v == "-") {
        gguf_remove_key(g, k);
    } else if (v.rfind("s:", 0) == 0) {
        gguf_set_val_str(g, k, v.substr(2).c_str());
    } else if (v.rfind("f:", 0) == 0) {
        gguf_set_val_f32(g, k, std::strtof(v.c_str() + 2, nullptr));
    } else if (v.rfind("b:", 0) == 0) {
        gguf_set_val_bool(g, k, v.size() > 2 && v[2] != '0');
    } else if (!v.empty() && v.front() == '[') {
        std::vector<int32_t> values;
        std::stringstream in(v.substr(1));
        std::string item;
        while (std::getline(in, item, ',') && values.size() < 600) {
            values.push_back(static_cast<int32_t>(std::strtoll(item.c_str(), nullptr, 10)));
        }
        if (values.empty()) {
            values.push_back(0);
        }
        gguf_set_arr_data(g, k, GGUF_TYPE_INT32, values.data(), values.size());
    } else {
        const long long n = std::strtoll(v.c_str(), nullptr, 10);
        if (n < 0) {
            gguf_set_val_i32(g, k, static_cast<int32_t>(n));
        } else {
            gguf_set_val_u32(g, k, static_cast<uint32_t>(n));
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    for (const char * arch : {"llama", "qwen35", "glm4moe", "eagle3", "dflash"}) {
        bases[arch] = write_base(arch);
    }
    char path[] = "/tmp/specdec-fuzz-load-XXXXXX";
    close(mkstemp(path));
    scratch = path;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    std::string arch = "llama";
    std::vector<edit> edits;
    std::stringstream in(std::string(reinterpret_cast<const char *>(data), size));
    std::string line;
    while (std::getline(in, line)) {
        const size_t eq = line.find('=');
        if (eq == std::string::npos) {
            continue;
        }
        if (line.compare(0, eq, "base") == 0) {
            arch = bases.count(line.substr(eq + 1)) ? line.substr(eq + 1) : arch;
        } else {
            edits.push_back({line.substr(0, eq), line.substr(eq + 1)});
        }
    }
    const std::vector<uint8_t> bytes = specdec::fixtures::edit_gguf_metadata(bases[arch], [&](gguf_context * g) {
        for (const edit & e : edits) {
            apply(g, arch, e);
        }
    });
    try {
        specdec::detail::inspect_bytes(bytes.data(), bytes.size());
    } catch (const specdec::error & e) {
        if (e.code() != SPECDEC_STATUS_MALFORMED_FILE) {
            std::abort();
        }
        return 0;
    }
    specdec::fixtures::write_file(scratch, bytes);
    llama_model_params mp = llama_model_default_params();
    mp.load_mode = LLAMA_LOAD_MODE_NONE;
    mp.load_mtp = true;
    llama_model_free(llama_model_load_from_file(scratch.c_str(), mp));
    return 0;
}
