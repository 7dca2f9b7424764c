// Pieces every subcommand shares: exit codes, error reporting, logging,
// model loading with a progress indicator, tokenization.
#pragma once

#include "specdec/specdec.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace cli {

enum exit_code : int {
    exit_ok       = 0,
    exit_failure  = 1, // a typed library error, or an incompatible pair
    exit_usage    = 2, // bad command line
};

// Prints "specdec: error: <STATUS>: message" to stderr and returns exit_failure.
int report(const specdec::error & e);

// Routes llama.cpp's log to stderr: nothing at verbosity 0, warnings and
// errors at 1, everything at 2.
void set_verbosity(int verbosity);
// Writes `text` (whole lines) to stderr and, after set_log_file, appends it
// to that file too, flushed. Any thread.
void log_text(const char * text);
// Opens `path` for appending (created if absent): every line log_text
// writes from then on, llama.cpp's log among them, also goes there
// (llama-server's --log-file). Throws specdec::error(IO_ERROR) when it cannot.
void set_log_file(const std::string & path);

// Where one model's weights go, in llama.cpp's terms (-ngl, --device, --split-mode).
struct placement {
    int32_t     n_gpu_layers = -1;      // layers on GPU/RPC devices: -1 all (llama.cpp's default), 0 none
    std::string devices;                // comma-separated ggml device names, "none" for the CPU alone; empty: all
    std::string split_mode = "layer";   // across several devices: none (one device), layer, or row
};

// Device options of a command that loads a target and maybe a draft:
// -ngl/-ngld, --device/--device-draft, --split-mode, --rpc.
struct device_options {
    placement   target;
    placement   draft;
    std::string rpc;                    // host:port[,host:port...] of ggml-rpc-server processes
};
void add_device_options(CLI::App * cmd, device_options & o);

// Adds the RPC servers of `o` as devices (a command calls it once, before loading); a no-op without --rpc.
void add_rpc_servers(const device_options & o);

// llama.cpp's model and context options, with llama-server's names, for
// every command that loads a model (generate, serve, bench).
struct llama_options {
    std::string cache_type_k = "f16";  // -ctk: the K cache's type (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)
    std::string cache_type_v = "f16";  // -ctv: the V cache's (a quantized one needs flash attention)
    std::string flash_attn = "auto";   // -fa: on, off or auto
    uint32_t    n_batch = 512;         // -b: logical batch, tokens
    uint32_t    n_ubatch = 512;        // -ub: physical batch, tokens (at most n_batch)
    int32_t     n_threads_batch = 0;   // -tb: threads for prompt batches (0: as -t)
    std::string load_mode = "auto";    // -lm: auto, none, mmap, mlock, mmap+mlock or dio (llama.cpp's names)
    bool        no_mmap = false;       // --no-mmap: the older spelling of -lm none (or mlock with --mlock)
    bool        mlock = false;         // --mlock: the older spelling of -lm mmap+mlock
    std::string numa;                  // --numa: distribute, isolate or numactl ("" off)
    std::string rope_scaling;          // --rope-scaling: none, linear or yarn ("" the model's)
    float       rope_scale = 0.0f;     // --rope-scale N: context scaled by N (rope_freq_scale 1/N); 0: the model's
    float       rope_freq_base = 0.0f; // --rope-freq-base; 0: the model's
    float       rope_freq_scale = 0.0f; // --rope-freq-scale; 0: the model's
    uint32_t    yarn_orig_ctx = 0;     // --yarn-orig-ctx; 0: the model's
    float       yarn_ext_factor = -1.0f; // --yarn-ext-factor; negative: the model's
    float       yarn_attn_factor = -1.0f; // --yarn-attn-factor; negative: the model's
    float       yarn_beta_slow = -1.0f; // --yarn-beta-slow; negative: the model's
    float       yarn_beta_fast = -1.0f; // --yarn-beta-fast; negative: the model's
    std::vector<std::string> override_kv; // --override-kv KEY=TYPE:VALUE (int, float, bool, str), repeatable
};
void add_llama_options(CLI::App * cmd, llama_options & o);

// The model parameters `o` changes (load mode, overrides), applied to
// `mp`; `overrides` receives the parsed --override-kv entries (terminated
// as llama.cpp wants) and must outlive the load. Throws
// specdec::error(INVALID_ARGUMENT) for a malformed override.
void apply_model_options(const llama_options & o, llama_model_params & mp, std::vector<llama_model_kv_override> & overrides);

// Inspects the file (specdec_inspect: the pre-load checks), then loads the
// model onto the devices `where` names, showing progress on stderr when it
// is a terminal and `progress` is set. Throws specdec::error: MALFORMED_FILE or IO_ERROR (inspect refused it),
// INVALID_ARGUMENT (unknown device or split mode), IO_ERROR (llama.cpp could
// not load it, or the file is unreadable; the message
// carries the error lines llama.cpp logged while loading).
llama_model_ptr load_model(const std::string & path, bool load_mtp, const placement & where, const llama_options & lo,
                           bool progress = true);

// Context parameters for n_seq sequences of n_ctx_per_seq positions each,
// n_threads CPU threads (0: every hardware thread), and `lo`'s cache types,
// flash attention, batches and rope scaling.
llama_context_params context_params(uint32_t n_ctx_per_seq, uint32_t n_seq, int32_t n_threads, const llama_options & lo);

// Tokens of a sequence that decoding steps produced: all but the first,
// which its prompt's own decode yields (in prefill time, nothing drafted).
inline uint64_t decoded_tokens(const specdec_sequence_stats & st) {
    return st.n_generated - (st.n_steps > 0 ? 1 : 0);
}

// The model's tokens for `text`, with its BOS (or other special tokens the
// vocabulary adds). `parse_special`: text such as "<|im_start|>" becomes that
// special token (for chat templates) instead of its characters. Throws
// specdec::error(UNREPRESENTABLE_TEXT) for a byte the vocabulary has no token
// for (see specdec::tokenize).
std::vector<llama_token> tokenize(const llama_model * model, const std::string & text, bool parse_special = false);

// A token's text (its bytes; special tokens spelled out), as the engine streams it.
std::string token_text(const llama_vocab * vocab, llama_token token);

std::string read_file(const std::string & path);

// --kernels exact|fast, bound to `kernels` (see specdec_set_exact_kernels).
void add_kernels_option(CLI::App * cmd, std::string & kernels);

// The names of specdec_accept_mode on the command line and in JSON: "exact"
// and "rejection". accept_mode_of throws specdec::error(INVALID_ARGUMENT)
// for any other name.
const char * accept_mode_name(specdec_accept_mode mode);
specdec_accept_mode accept_mode_of(const std::string & name);
// The help of an --accept option.
extern const char * const accept_help;

// Sets the CPU kernels `kernels` names, before anything decodes: "exact"
// (every row of a batch computed as it would be alone) or "fast" (llama.cpp's
// batch-dependent paths; says on stderr that output may then differ from
// plain decoding). Throws specdec::error(UNAVAILABLE) for exact kernels on a
// llama.cpp without patches/0001.
void use_kernels(const std::string & kernels);
// The same switch without a word: for a run that changes kernels between
// configurations (bench), once use_kernels has announced each.
void set_kernels(bool exact);

// With exact kernels on, throws specdec::error(UNAVAILABLE) naming what of
// the target model at `path` they do not cover (specdec_check_exact): such a
// target is refused rather than run without the guarantee.
void require_exact(const std::string & path);

// Accepts a draft length: "auto" (adaptive) or a number of tokens in
// 1..SPECDEC_MAX_DRAFT.
CLI::Validator draft_length_validator();

// The most tokens an adaptive ("auto") step drafts unless told otherwise.
constexpr int32_t auto_draft_max = 8;

// A restricted draft vocabulary, as given on the command line.
struct draft_vocab_options {
    std::string size = "0"; // tokens the drafter scores: a count, 0 (all) or auto (by vocabulary size)
    std::string file;          // ranking of token ids, most frequent first; empty: the tokenizer's
};

// Declares --draft-vocab and --draft-vocab-file, bound to `o`.
void add_draft_vocab_options(CLI::App * cmd, draft_vocab_options & o);

// The session parameters a draft_vocab_options stands for, checked against
// the vocabulary of the GGUF at `model` (its metadata) before any model is
// loaded: INVALID_ARGUMENT for a size above the vocabulary or the file's
// length, and read_ranking_file's errors. apply() points the session
// parameters at the ranking this object holds: keep it alive until the
// session (and the draft context) are created.
struct draft_vocab_choice {
    int32_t                  size = 0;
    std::vector<llama_token> ranking; // empty: the tokenizer's

    void apply(specdec::session_params & sp) const;
};
draft_vocab_choice resolve_draft_vocab(const draft_vocab_options & o, const std::string & model);

// What a command that decodes loads, as llama.cpp's tools spell it: the
// target, the drafter, the context and the draft length (generate and serve).
struct decoder_options {
    device_options devices;                 // -ngl, --device, --rpc, ...
    std::string    model;                   // target GGUF; required
    std::string    draft_model;             // draft GGUF for eagle3, dflash, dspark, draft; empty: none
    std::string    spec        = "auto";    // auto (from the metadata), none, or a strategy name
    uint32_t       n_ctx       = 4096;      // positions per sequence
    int32_t        n_threads   = 0;         // CPU threads; 0: every hardware thread
    std::string    n_draft     = "3";       // tokens drafted per step, or "auto" (adaptive)
    bool           n_draft_given = false;   // --n-draft was given; else the default 3 is lowered to --draft-max
    int32_t        n_draft_max = 0;         // the session's cap; 0: n_draft, or auto_draft_max with auto
    int32_t        n_draft_min = 0;         // shorter proposals are dropped
    float          p_min       = 0.0f;      // drafting stops below this draft probability
    draft_vocab_options draft_vocab;        // --draft-vocab, --draft-vocab-file
    std::string    kernels     = "exact";   // CPU kernels: exact or fast (use_kernels)
    llama_options  llama;                   // -ctk, -ctv, -fa, -b, -ub, -tb, --no-mmap, rope, --override-kv, ...
};

// Declares -m, --model-draft, --spec, -c, -t, --n-draft, --draft-max,
// --draft-min, --draft-p-min, --draft-vocab, --draft-vocab-file, --kernels
// and the device options, bound to `o`.
void add_decoder_options(CLI::App * cmd, decoder_options & o);

// Models, contexts and session, loaded from decoder_options. Members are
// declared so that they are destroyed in a safe order (session, draft
// context, target context, models). Move-only.
struct decoder {
    llama_model_ptr                   target_model;
    llama_model_ptr                   draft_model;   // null without a draft GGUF
    llama_context_ptr                 target;
    llama_context_ptr                 draft;         // null for plain decoding and the n-gram strategies
    std::unique_ptr<specdec::session> session;       // null: plain decoding (--spec none, or nothing detected)
    specdec_strategy                  strategy = SPECDEC_STRATEGY_MTP; // meaningful with a session
    bool                              adaptive = false; // --n-draft auto
    int32_t                           n_draft  = 0;  // generate_params::n_draft for requests (SPECDEC_N_DRAFT_AUTO
                                                     // when adaptive, else --n-draft capped by the drafter); 0 plain

    // "none" for plain decoding, else the strategy's name (static storage).
    const char * strategy_name() const { return session ? specdec_strategy_name(strategy) : "none"; }
};

// Resolves the strategy (--spec auto says on stderr when the metadata names
// no drafter and decodes plainly), checks the pair, then loads the models
// (load_model), creates a target context of n_seq sequences of o.n_ctx
// positions and the session, and runs a warm-up decode (a target step, and a drafter step where there is one) so
// that a model llama.cpp cannot compute fails here, not at the first request
// (an abort ends the process with exit 1 and llama.cpp's message). Throws
// specdec::error: INVALID_ARGUMENT (--spec none with a draft, --n-draft above
// --draft-max, unknown strategy), MALFORMED_FILE, the pair's compatibility
// status, IO_ERROR, NATIVE_FAILURE, and the session's errors.
decoder load_decoder(const decoder_options & o, uint32_t n_seq);

// A directory of its own under the system's temporary directory (named
// `prefix` + random letters), removed with everything in it when this goes
// out of scope. Throws specdec::error(IO_ERROR) when it cannot be created.
class temp_dir {
public:
    explicit temp_dir(const std::string & prefix);
    ~temp_dir();
    temp_dir(const temp_dir &) = delete;
    temp_dir & operator=(const temp_dir &) = delete;

    const std::filesystem::path & path() const { return path_; }

private:
    std::filesystem::path path_;
};

// Runs argv[0] (found in PATH when it has no slash) with stdin from /dev/null
// and stdout and stderr written to `log`, without a shell; returns its wait
// status. Throws specdec::error(IO_ERROR) when it cannot start; when it is
// not found, the message ends with `if_missing`.
int run_program(const std::vector<std::string> & argv, const std::filesystem::path & log, const std::string & if_missing);

// The last `max_chars` characters of a text file, trailing space removed, for
// an error message ("(it printed nothing)" when empty).
std::string file_tail(const std::filesystem::path & path, size_t max_chars);

} // namespace cli
