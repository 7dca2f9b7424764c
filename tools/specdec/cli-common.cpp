#include "cli-common.h"

#include "draft-vocab-files.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cli {

namespace {

int g_verbosity = 0;

// llama.cpp's error lines while a model loads (load_model), so that a
// refused file's message says why; null outside a load. Any thread may log.
std::mutex    g_capture_m;
std::string * g_capture = nullptr;

void log_callback(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        std::lock_guard<std::mutex> lock(g_capture_m);
        if (g_capture != nullptr && g_capture->size() < 4096) {
            *g_capture += text;
        }
    }
    const bool show = g_verbosity >= 2 || (g_verbosity == 1 && (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR));
    if (show) {
        log_text(text);
    }
}

std::mutex g_log_m;
FILE *     g_log_file = nullptr; // set_log_file's, open until the process exits

bool show_progress(float progress, void * user) {
    auto * last = static_cast<int *>(user);
    const int percent = static_cast<int>(progress * 100.0f);
    if (percent != *last) {
        *last = percent;
        std::fprintf(stderr, "\r\033[Kloading %3d%%", percent); // \033[K: erases whatever the line held before
        if (percent >= 100) {
            std::fputs("\r\033[K", stderr);
        }
    }
    return true;
}

} // namespace

int report(const specdec::error & e) {
    log_text((std::string("specdec: error: ") + specdec_status_name(e.code()) + ": " + e.what() + "\n").c_str());
    return exit_failure;
}

void log_text(const char * text) {
    std::lock_guard<std::mutex> lock(g_log_m);
    std::fputs(text, stderr);
    std::fflush(stderr);
    if (g_log_file != nullptr) {
        std::fputs(text, g_log_file);
        std::fflush(g_log_file);
    }
}

void set_log_file(const std::string & path) {
    FILE * f = std::fopen(path.c_str(), "a");
    if (f == nullptr) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot open --log-file " + path + " for appending");
    }
    std::lock_guard<std::mutex> lock(g_log_m);
    if (g_log_file != nullptr) {
        std::fclose(g_log_file);
    }
    g_log_file = f;
}

void set_verbosity(int verbosity) {
    g_verbosity = verbosity;
    llama_log_set(log_callback, nullptr);
}

void add_device_options(CLI::App * cmd, device_options & o) {
    cmd->add_option("--n-gpu-layers", o.target.n_gpu_layers, "-ngl: target layers on GPU or RPC devices (-1: all)")
        ->check(CLI::Range(-1, 100000));
    cmd->add_option("--n-gpu-layers-draft", o.draft.n_gpu_layers, "-ngld: draft-model layers on GPU or RPC devices (-1: all)")
        ->check(CLI::Range(-1, 100000));
    cmd->add_option("--device", o.target.devices, "-dev: devices for the target, comma-separated (none: CPU only; see `specdec info`)");
    cmd->add_option("--device-draft", o.draft.devices, "-devd: devices for the draft model");
    cmd->add_option("--split-mode", o.target.split_mode, "-sm: how the target spreads over several devices")
        ->check(CLI::IsMember({"none", "layer", "row"}))
        ->capture_default_str();
    cmd->add_option("--rpc", o.rpc, "ggml-rpc-server endpoints host:port[,host:port...] to use as devices");
}

void add_rpc_servers(const device_options & o) {
    if (!o.rpc.empty()) {
        specdec::rpc_add_servers(o.rpc);
    }
}

namespace {

std::vector<ggml_backend_dev_t> resolve_devices(const std::string & names) {
    std::vector<ggml_backend_dev_t> out;
    if (names == "none") {
        out.push_back(nullptr); // an empty list: the CPU alone
        return out;
    }
    std::stringstream in(names);
    for (std::string name; std::getline(in, name, ',');) {
        ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
        if (dev == nullptr) {
            std::string known;
            for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
                known += std::string(known.empty() ? "" : ", ") + ggml_backend_dev_name(ggml_backend_dev_get(i));
            }
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "unknown device '" + name + "'; this build has: " + known);
        }
        out.push_back(dev);
    }
    out.push_back(nullptr);
    return out;
}

} // namespace

namespace {

// The KV cache types llama-server takes (-ctk, -ctv).
const std::vector<std::pair<std::string, ggml_type>> cache_types = {
    {"f32", GGML_TYPE_F32},   {"f16", GGML_TYPE_F16},   {"bf16", GGML_TYPE_BF16}, {"q8_0", GGML_TYPE_Q8_0},     {"q4_0", GGML_TYPE_Q4_0},
    {"q4_1", GGML_TYPE_Q4_1}, {"iq4_nl", GGML_TYPE_IQ4_NL}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
};

ggml_type cache_type(const std::string & name) {
    for (const auto & [n, t] : cache_types) {
        if (n == name) {
            return t;
        }
    }
    return GGML_TYPE_F16; // unreachable: the option's check refused it
}

} // namespace

llama_model_ptr load_model(const std::string & path, bool load_mtp, const placement & where, const llama_options & lo, bool progress) {
    // Metadata first: llama.cpp's loader (or its first decode) aborts on some malformed files.
    specdec_model_info info{};
    if (const specdec_status st = specdec_inspect(path.c_str(), &info); st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, specdec_last_error());
    }
    llama_model_params mp = llama_model_default_params();
    std::vector<llama_model_kv_override> overrides; // borrowed by mp until the load returns
    apply_model_options(lo, mp, overrides);
    if (!lo.numa.empty()) { // process-wide, once, before the first load
        static std::once_flag numa_once;
        std::call_once(numa_once, [&] {
            llama_numa_init(lo.numa == "distribute" ? GGML_NUMA_STRATEGY_DISTRIBUTE
                            : lo.numa == "isolate"  ? GGML_NUMA_STRATEGY_ISOLATE
                                                    : GGML_NUMA_STRATEGY_NUMACTL);
        });
    }
    mp.load_mtp = load_mtp;
    mp.n_gpu_layers = where.n_gpu_layers;
    mp.split_mode = where.split_mode == "none" ? LLAMA_SPLIT_MODE_NONE
                  : where.split_mode == "row"  ? LLAMA_SPLIT_MODE_ROW
                                               : LLAMA_SPLIT_MODE_LAYER;
    std::vector<ggml_backend_dev_t> devices;
    if (!where.devices.empty()) {
        devices = resolve_devices(where.devices);
        mp.devices = devices.data();
    }
    int last = -1;
    if (progress && isatty(STDERR_FILENO)) {
        mp.progress_callback = show_progress;
        mp.progress_callback_user_data = &last;
    }
    std::string errors;
    {
        std::lock_guard<std::mutex> lock(g_capture_m);
        g_capture = &errors;
    }
    llama_model * model = llama_model_load_from_file(path.c_str(), mp);
    {
        std::lock_guard<std::mutex> lock(g_capture_m);
        g_capture = nullptr;
    }
    if (model == nullptr) {
        // One line: llama.cpp's error lines joined with "; ".
        std::string reason;
        std::istringstream lines(errors);
        for (std::string line; std::getline(lines, line);) {
            if (!line.empty()) {
                reason += (reason.empty() ? "" : "; ") + line;
            }
        }
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot load model '" + path + "': " +
                                                          (reason.empty() ? "llama.cpp gave no reason (run with -vv for its log)"
                                                                          : "llama.cpp: " + reason));
    }
    return llama_model_ptr(model);
}

llama_context_params context_params(uint32_t n_ctx_per_seq, uint32_t n_seq, int32_t n_threads, const llama_options & lo) {
    const int32_t threads = n_threads > 0 ? n_threads : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx_per_seq * n_seq;
    cp.n_seq_max = n_seq;
    cp.n_batch = lo.n_batch;
    cp.n_ubatch = std::min(lo.n_ubatch, lo.n_batch);
    cp.n_threads = threads;
    cp.n_threads_batch = lo.n_threads_batch > 0 ? lo.n_threads_batch : threads;
    cp.type_k = cache_type(lo.cache_type_k);
    cp.type_v = cache_type(lo.cache_type_v);
    cp.flash_attn_type = lo.flash_attn == "on"    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : lo.flash_attn == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                  : LLAMA_FLASH_ATTN_TYPE_AUTO;
    if (!lo.rope_scaling.empty()) {
        cp.rope_scaling_type = lo.rope_scaling == "none"     ? LLAMA_ROPE_SCALING_TYPE_NONE
                               : lo.rope_scaling == "linear" ? LLAMA_ROPE_SCALING_TYPE_LINEAR
                                                             : LLAMA_ROPE_SCALING_TYPE_YARN;
    }
    cp.rope_freq_base = lo.rope_freq_base;
    cp.rope_freq_scale = lo.rope_scale > 0.0f ? 1.0f / lo.rope_scale : lo.rope_freq_scale;
    cp.yarn_orig_ctx = lo.yarn_orig_ctx;
    cp.yarn_ext_factor = lo.yarn_ext_factor;
    if (lo.yarn_attn_factor >= 0.0f) {
        cp.yarn_attn_factor = lo.yarn_attn_factor;
    }
    if (lo.yarn_beta_slow >= 0.0f) {
        cp.yarn_beta_slow = lo.yarn_beta_slow;
    }
    if (lo.yarn_beta_fast >= 0.0f) {
        cp.yarn_beta_fast = lo.yarn_beta_fast;
    }
    return cp;
}

std::vector<llama_token> tokenize(const llama_model * model, const std::string & text, bool parse_special) {
    return specdec::tokenize(llama_model_get_vocab(model), text, true, parse_special);
}

std::string token_text(const llama_vocab * vocab, llama_token token) {
    return specdec::token_to_piece(vocab, token);
}

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot read '" + path + "'");
    }
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

} // namespace cli

namespace cli {

CLI::Validator draft_length_validator() {
    return CLI::Validator(
        [](const std::string & v) {
            return v == "auto" || CLI::Range(1, SPECDEC_MAX_DRAFT)(v).empty()
                       ? std::string()
                       : "expected auto or a number within [1, " + std::to_string(SPECDEC_MAX_DRAFT) + "]";
        },
        "N|auto");
}

} // namespace cli

namespace cli {

temp_dir::temp_dir(const std::string & prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR,
                             "cannot create a temporary directory: " + std::string(std::strerror(errno)) + " (check TMPDIR)");
    }
    path_ = pattern;
}

temp_dir::~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

int run_program(const std::vector<std::string> & argv, const std::filesystem::path & log, const std::string & if_missing) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<std::string> args = argv;
    std::vector<char *> c_args;
    for (std::string & a : args) {
        c_args.push_back(a.data());
    }
    c_args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, c_args[0], &actions, nullptr, c_args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc == ENOENT) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, argv[0] + " not found: " + if_missing);
    }
    if (rc != 0) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot run " + argv[0] + ": " + std::strerror(rc));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot wait for " + argv[0] + ": " + std::strerror(errno));
        }
    }
    return status;
}

std::string file_tail(const std::filesystem::path & path, size_t max_chars) {
    std::ifstream f(path);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
        text.pop_back();
    }
    if (text.empty()) {
        return "(it printed nothing)";
    }
    return text.size() > max_chars ? text.substr(text.size() - max_chars) : text;
}

} // namespace cli

namespace cli {

void add_draft_vocab_options(CLI::App * cmd, draft_vocab_options & o) {
    cmd->add_option("--draft-vocab", o.size,
                    "MTP: the drafter scores only the N most frequent tokens (0: the whole vocabulary; auto: " +
                        std::to_string(SPECDEC_DRAFT_VOCAB_DEFAULT) + " above " + std::to_string(SPECDEC_DRAFT_VOCAB_AUTO_MIN) +
                        " tokens, else all)")
        ->check([](const std::string & v) {
            if (v == "auto") {
                return std::string();
            }
            char * end = nullptr;
            errno = 0;
            const long n = std::strtol(v.c_str(), &end, 10);
            return v.empty() || *end != '\0' || errno != 0 || n < 0 || n > INT32_MAX
                       ? "expected a token count (0: the whole vocabulary) or auto, not '" + v + "'"
                       : std::string();
        })
        ->capture_default_str();
    cmd->add_option("--draft-vocab-file", o.file,
                    "token ids, most frequent first, that --draft-vocab takes its tokens from (default: a ranking from "
                    "the tokenizer)")
        ->check(CLI::ExistingFile);
}

void add_decoder_options(CLI::App * cmd, decoder_options & o) {
    cmd->add_option("-m,--model", o.model, "target model (GGUF)")->required()->check(CLI::ExistingFile);
    cmd->add_option("--model-draft", o.draft_model, "draft model (GGUF) for eagle3, dflash, dspark, draft")->check(CLI::ExistingFile);
    cmd->add_option("--spec", o.spec,
                    "auto (from the GGUF metadata), none, mtp, eagle3, dflash, dspark, draft, ngram-simple, "
                    "ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache")
        ->capture_default_str();
    cmd->add_option("-c,--ctx-size", o.n_ctx, "context size per sequence")->check(CLI::Range(16u, 1u << 20))->capture_default_str();
    cmd->add_option("-t,--threads", o.n_threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
    cmd->add_option("--n-draft", o.n_draft, "tokens drafted per step, or auto: chosen per step and sequence for speed")
        ->check(draft_length_validator())
        ->each([&o](const std::string &) { o.n_draft_given = true; })
        ->capture_default_str();
    cmd->add_option("--draft-max", o.n_draft_max,
                    "the most tokens a step may draft (default: --n-draft, or 8 with auto); below the default --n-draft "
                    "it lowers it, as llama-server's --draft-max does")
        ->check(CLI::Range(1, SPECDEC_MAX_DRAFT));
    cmd->add_option("--draft-min", o.n_draft_min, "drop shorter proposals")->check(CLI::NonNegativeNumber);
    cmd->add_option("--draft-p-min", o.p_min, "stop drafting below this draft probability")->check(CLI::Range(0.0f, 1.0f));
    add_draft_vocab_options(cmd, o.draft_vocab);
    add_kernels_option(cmd, o.kernels);
    add_device_options(cmd, o.devices);
    add_llama_options(cmd, o.llama);
}

void add_llama_options(CLI::App * cmd, llama_options & o) {
    std::vector<std::string> types;
    for (const auto & [n, t] : cache_types) {
        types.push_back(n);
    }
    cmd->add_option("--cache-type-k", o.cache_type_k, "-ctk: KV cache type for K")->check(CLI::IsMember(types))->capture_default_str();
    cmd->add_option("--cache-type-v", o.cache_type_v, "-ctv: KV cache type for V (a quantized one needs flash attention)")
        ->check(CLI::IsMember(types))
        ->capture_default_str();
    cmd->add_option("--flash-attn", o.flash_attn, "-fa: flash attention, on, off or auto")
        ->check(CLI::IsMember({"on", "off", "auto"}))
        ->capture_default_str();
    cmd->add_option("-b,--batch-size", o.n_batch, "logical batch size (tokens)")->check(CLI::Range(1u, 1u << 20))->capture_default_str();
    cmd->add_option("--ubatch-size", o.n_ubatch, "-ub: physical batch size (tokens)")->check(CLI::Range(1u, 1u << 20))->capture_default_str();
    cmd->add_option("--threads-batch", o.n_threads_batch, "-tb: threads for prompt batches (0: as -t)")->check(CLI::Range(0, 1024));
    cmd->add_option("--load-mode", o.load_mode, "-lm: how the weights are loaded, auto, none, mmap, mlock, mmap+mlock or dio")
        ->check(CLI::IsMember({"auto", "none", "mmap", "mlock", "mmap+mlock", "dio"}))
        ->capture_default_str();
    cmd->add_flag("--no-mmap", o.no_mmap, "read the weights instead of mapping the file (-lm none)");
    cmd->add_flag("--mlock", o.mlock, "keep the weights in RAM, no swapping (-lm mmap+mlock; with --no-mmap, mlock)");
    cmd->add_option("--numa", o.numa, "NUMA placement: distribute, isolate or numactl")
        ->check(CLI::IsMember({"distribute", "isolate", "numactl"}));
    cmd->add_option("--rope-scaling", o.rope_scaling, "RoPE frequency scaling: none, linear or yarn (default: the model's)")
        ->check(CLI::IsMember({"none", "linear", "yarn"}));
    cmd->add_option("--rope-scale", o.rope_scale, "RoPE context scaling factor N (rope frequency scale 1/N)")->check(CLI::PositiveNumber);
    cmd->add_option("--rope-freq-base", o.rope_freq_base, "RoPE base frequency (default: the model's)")->check(CLI::PositiveNumber);
    cmd->add_option("--rope-freq-scale", o.rope_freq_scale, "RoPE frequency scaling factor (default: the model's)")->check(CLI::PositiveNumber);
    cmd->add_option("--yarn-orig-ctx", o.yarn_orig_ctx, "YaRN: the model's original context size (default: the model's)");
    cmd->add_option("--yarn-ext-factor", o.yarn_ext_factor, "YaRN: extrapolation mix factor (negative: the model's)");
    cmd->add_option("--yarn-attn-factor", o.yarn_attn_factor, "YaRN: magnitude scaling factor (negative: the model's)");
    cmd->add_option("--yarn-beta-slow", o.yarn_beta_slow, "YaRN: high correction dimension (negative: the model's)");
    cmd->add_option("--yarn-beta-fast", o.yarn_beta_fast, "YaRN: low correction dimension (negative: the model's)");
    cmd->add_option("--override-kv", o.override_kv, "override a model metadata key: KEY=TYPE:VALUE (TYPE int, float, bool or str); repeatable");
}

void apply_model_options(const llama_options & o, llama_model_params & mp, std::vector<llama_model_kv_override> & overrides) {
    const std::string mode = o.no_mmap ? (o.mlock ? "mlock" : "none") : o.mlock ? "mmap+mlock" : o.load_mode;
    mp.load_mode = mode == "none"         ? LLAMA_LOAD_MODE_NONE
                   : mode == "mmap"       ? LLAMA_LOAD_MODE_MMAP
                   : mode == "mlock"      ? LLAMA_LOAD_MODE_MLOCK
                   : mode == "mmap+mlock" ? LLAMA_LOAD_MODE_MMAP_MLOCK
                   : mode == "dio"        ? LLAMA_LOAD_MODE_DIRECT_IO
                                          : LLAMA_LOAD_MODE_AUTO;
    overrides.clear();
    for (const std::string & kv : o.override_kv) {
        const size_t eq = kv.find('=');
        const size_t colon = eq == std::string::npos ? eq : kv.find(':', eq);
        const auto bad = [&](const std::string & why) {
            return specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--override-kv " + kv + ": " + why + " (KEY=TYPE:VALUE, TYPE int, float, bool or str)");
        };
        if (colon == std::string::npos || eq == 0 || eq >= 127) {
            throw bad("malformed");
        }
        llama_model_kv_override ov{};
        std::memcpy(ov.key, kv.data(), eq);
        const std::string type = kv.substr(eq + 1, colon - eq - 1);
        const std::string value = kv.substr(colon + 1);
        char * end = nullptr;
        if (type == "int") {
            ov.tag = LLAMA_KV_OVERRIDE_TYPE_INT;
            ov.val_i64 = std::strtoll(value.c_str(), &end, 10);
        } else if (type == "float") {
            ov.tag = LLAMA_KV_OVERRIDE_TYPE_FLOAT;
            ov.val_f64 = std::strtod(value.c_str(), &end);
        } else if (type == "bool") {
            ov.tag = LLAMA_KV_OVERRIDE_TYPE_BOOL;
            if (value != "true" && value != "false") {
                throw bad("a bool is true or false");
            }
            ov.val_bool = value == "true";
        } else if (type == "str") {
            ov.tag = LLAMA_KV_OVERRIDE_TYPE_STR;
            if (value.size() >= sizeof(ov.val_str)) {
                throw bad("a string value has at most 127 bytes");
            }
            std::memcpy(ov.val_str, value.data(), value.size());
        } else {
            throw bad("unknown type '" + type + "'");
        }
        if (end != nullptr && (value.empty() || *end != '\0')) {
            throw bad("not a number: '" + value + "'");
        }
        overrides.push_back(ov);
    }
    if (!overrides.empty()) {
        overrides.emplace_back(); // llama.cpp reads up to an empty key
        mp.kv_overrides = overrides.data();
    }
}

void add_kernels_option(CLI::App * cmd, std::string & kernels) {
    cmd->add_option("--kernels", kernels,
                    "CPU kernels: exact (each row of a batch computed as alone: output identical to plain decoding) "
                    "or fast (llama.cpp's batch-dependent paths: faster long prompts, output may differ)")
        ->check(CLI::IsMember({"exact", "fast"}))
        ->capture_default_str();
}

const char * accept_mode_name(specdec_accept_mode mode) {
    return mode == SPECDEC_ACCEPT_REJECTION ? "rejection" : "exact";
}

specdec_accept_mode accept_mode_of(const std::string & name) {
    if (name == "exact" || name == "rejection") {
        return name == "exact" ? SPECDEC_ACCEPT_EXACT : SPECDEC_ACCEPT_REJECTION;
    }
    throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "accept is '" + name + "'; it must be exact or rejection");
}

const char * const accept_help =
    "how drafts are kept when sampling: exact (the target draws as plain decoding does and a draft is kept when it "
    "equals the draw: the same tokens as plain decoding for the same seed) or rejection (speculative sampling: a "
    "draft is kept with probability min(1, p/q), else the token is drawn from the residual: the target's "
    "distribution, more drafts kept where the drafter reports q, i.e. MTP); greedy decoding is the same in both";

void require_exact(const std::string & path) {
    if (!specdec_exact_kernels()) {
        return;
    }
    if (const specdec_status st = specdec_check_exact(path.c_str()); st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, path + ": " + specdec_last_error() +
                                     "; greedy output could differ from plain decoding (--kernels fast runs it anyway)");
    }
}

void set_kernels(bool exact) {
    if (const specdec_status st = specdec_set_exact_kernels(exact); st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, specdec_last_error());
    }
}

void use_kernels(const std::string & kernels) {
    set_kernels(kernels == "exact");
    if (kernels != "exact") {
        std::fprintf(stderr, "specdec: --kernels fast: llama.cpp's batch-dependent CPU kernels; greedy output may differ "
                             "from plain decoding of one sequence\n");
    }
}

namespace {

// "none" -> plain decoding; "auto" -> from the metadata; else a strategy name.
bool resolve_strategy(const decoder_options & o, specdec_strategy & out) {
    const char * draft = o.draft_model.empty() ? nullptr : o.draft_model.c_str();
    if (o.spec == "none") {
        if (draft != nullptr) {
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--spec none takes no draft model");
        }
        return false;
    }
    if (o.spec == "auto") {
        const specdec_status st = specdec_detect_strategy(o.model.c_str(), draft, &out);
        if (st == SPECDEC_STATUS_MODEL_UNSUPPORTED && draft == nullptr) {
            std::fprintf(stderr, "specdec: no drafter found in the model's metadata; decoding without speculation\n");
            return false;
        }
        if (st != SPECDEC_STATUS_OK) {
            throw specdec::error(st, specdec_last_error());
        }
    } else if (specdec_strategy_from_name(o.spec.c_str(), &out) != SPECDEC_STATUS_OK) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, specdec_last_error());
    }
    const specdec_status st = specdec_check_pair(o.model.c_str(), draft, out);
    if (st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, specdec_last_error());
    }
    return true;
}

} // namespace

namespace {

// One decode through everything a command will run, before it reports
// ready: a one-token prompt, then a step that drafts one token (where there
// is a drafter) and verifies it, on sequence 0. llama.cpp aborts on some
// models only when it computes (rope wider than the head, say); the abort
// handler in main.cpp then ends the process with exit 1 and llama.cpp's
// message, before a server listens. A typed failure throws. The engine
// clears sequence 0 when it next admits a request there.
void warm_up(decoder & d) {
    const llama_vocab * vocab = llama_model_get_vocab(d.target_model.get());
    const llama_token bos = llama_vocab_bos(vocab);
    const std::vector<std::vector<llama_token>> prompt = {{bos != LLAMA_TOKEN_NULL ? bos : 0}};
    specdec::generate_params gp = specdec_generate_default_params();
    gp.n_predict = 3; // the prompt's token, then one step with a draft of one
    gp.ignore_eog = true;
    try {
        if (d.session) {
            gp.n_draft = 1;
            specdec::generate(*d.session, prompt, gp);
        } else {
            specdec::generate_plain(d.target.get(), prompt, gp);
        }
    } catch (const specdec::error & e) {
        throw specdec::error(e.code(), std::string("the warm-up decode failed: ") + e.what());
    }
}

} // namespace

void draft_vocab_choice::apply(specdec::session_params & sp) const {
    sp.draft_vocab = size;
    sp.draft_vocab_ranking = ranking.empty() ? nullptr : ranking.data();
    sp.n_draft_vocab_ranking = ranking.size();
}

draft_vocab_choice resolve_draft_vocab(const draft_vocab_options & o, const std::string & model) {
    draft_vocab_choice c;
    c.size = o.size == "auto" ? SPECDEC_DRAFT_VOCAB_AUTO : std::stoi(o.size); // validated by the option
    if (c.size <= 0 && o.file.empty()) {
        return c;
    }
    specdec_model_info info{};
    if (const specdec_status st = specdec_inspect(model.c_str(), &info); st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, model + ": " + specdec_last_error());
    }
    if (c.size > 0 && static_cast<uint32_t>(c.size) > info.n_vocab) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--draft-vocab " + o.size + " exceeds the model's vocabulary of " +
                                                                  std::to_string(info.n_vocab) + " tokens");
    }
    if (!o.file.empty()) {
        c.ranking = read_ranking_file(o.file, info.n_vocab);
        if (c.size > 0 && static_cast<size_t>(c.size) > c.ranking.size()) {
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--draft-vocab " + o.size + " exceeds the " +
                                                                      std::to_string(c.ranking.size()) +
                                                                      " tokens of --draft-vocab-file " + o.file);
        }
    }
    return c;
}

decoder load_decoder(const decoder_options & o, uint32_t n_seq) {
    use_kernels(o.kernels);
    decoder d;
    const bool speculative = resolve_strategy(o, d.strategy);
    specdec::session_params sp = specdec_session_default_params();
    sp.strategy = d.strategy;
    sp.n_seq = n_seq;
    d.adaptive = o.n_draft == "auto";
    int32_t n_fixed = d.adaptive ? 0 : std::stoi(o.n_draft); // validated by draft_length_validator
    if (!d.adaptive && !o.n_draft_given && o.n_draft_max > 0) {
        n_fixed = std::min(n_fixed, o.n_draft_max); // `--draft-max 2` alone drafts 2, as llama-server's does
    }
    if (!d.adaptive && o.n_draft_max > 0 && n_fixed > o.n_draft_max) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--n-draft " + o.n_draft + " exceeds --draft-max " +
                                                                  std::to_string(o.n_draft_max));
    }
    const int32_t n_draft_max = o.n_draft_max > 0 ? o.n_draft_max : d.adaptive ? auto_draft_max : n_fixed;
    if (speculative && o.n_draft_min > (d.adaptive ? n_draft_max : n_fixed)) {
        // Every proposal would be shorter than the minimum, so none would ever be verified.
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT,
                             "--draft-min " + std::to_string(o.n_draft_min) + " exceeds the draft length (" +
                                 (d.adaptive ? "--draft-max " + std::to_string(n_draft_max)
                                             : "--n-draft " + std::to_string(n_fixed)) +
                                 "): every proposal would be dropped");
    }
    sp.n_draft_max = n_draft_max;
    sp.n_draft_min = o.n_draft_min;
    sp.p_min = o.p_min;
    const draft_vocab_choice vocab = speculative ? resolve_draft_vocab(o.draft_vocab, o.model) : draft_vocab_choice{};
    vocab.apply(sp); // borrowed by sp until the session exists

    add_rpc_servers(o.devices);
    require_exact(o.model);
    d.target_model = load_model(o.model, speculative && d.strategy == SPECDEC_STRATEGY_MTP, o.devices.target, o.llama);
    llama_context_params tp = context_params(o.n_ctx, n_seq, o.n_threads, o.llama);
    if (speculative && (llama_model_is_recurrent(d.target_model.get()) || llama_model_is_hybrid(d.target_model.get()))) {
        tp.n_rs_seq = static_cast<uint32_t>(n_draft_max); // rejected drafts roll the recurrent state back
    }
    d.target.reset(llama_init_from_model(d.target_model.get(), tp));
    if (!d.target) {
        throw specdec::error(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not create the target context (run with -v)");
    }
    if (!speculative) {
        d.adaptive = false;
        warm_up(d);
        return d;
    }
    if (!o.draft_model.empty()) {
        d.draft_model = load_model(o.draft_model, false, o.devices.draft, o.llama);
    }
    if (specdec_strategy_needs_draft_context(d.strategy)) {
        d.draft = specdec::make_draft_context(d.target.get(), d.draft_model.get(), sp, context_params(o.n_ctx, n_seq, o.n_threads, o.llama));
    }
    d.session = std::make_unique<specdec::session>(d.target.get(), d.draft.get(), sp);
    sp.draft_vocab_ranking = nullptr;
    sp.n_draft_vocab_ranking = 0;
    // The drafter may have lowered n_draft_max (a DFlash block is shorter, say).
    d.n_draft = d.adaptive ? SPECDEC_N_DRAFT_AUTO : std::min(n_fixed, d.session->params().n_draft_max);
    warm_up(d);
    return d;
}

} // namespace cli
