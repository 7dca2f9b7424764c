// `specdec serve`: an OpenAI-compatible HTTP server over the continuous-
// batching engine (see the README's Serving section).
#pragma once

#include "cli-common.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cli {

struct serve_options {
    decoder_options decoder;                    // -m, -md, --spec, -c (per sequence), -t, --n-draft, placement
    uint32_t        n_parallel = 4;             // -np: sequence slots decoded together
    uint32_t        max_waiting = 64;           // requests waiting for a slot at most; more: 503
    std::string     host = "127.0.0.1";
    int             port = 8080;                // 0: a free port, printed
    std::vector<std::string> api_keys;          // --api-key (repeatable); any one is required on every route but /health
    std::string     api_key_file;               // --api-key-file: more keys, one a line (# comments, blank lines skipped)
    std::vector<std::string> allowed_hosts;     // --allowed-host: Host names served besides localhost's on a loopback address
    std::string     alias;                      // --alias: the model's names, comma-separated (the id: the first in sorted order); empty: the file name without .gguf
    std::string     tags;                       // --tags: informational tags of the model, comma-separated
    bool            strict_model = false;       // --strict-model: `model` must name the alias (else 404); default: any
    int64_t         seed = -1;                  // -s/--seed: a request without a seed samples with it; -1: a random one each
    double          shutdown_timeout = 10.0;    // seconds requests in flight may take after SIGINT/SIGTERM
    int             write_timeout = 60;         // --timeout: seconds a client may leave its answer unread (then: gone)
    size_t          max_body = size_t(8) << 20; // bytes of a request body at most; more: 413
    size_t          body_budget = size_t(64) << 20; // bytes of request bodies being read and parsed at once; more: 503
    size_t          max_connections = 0;        // connections open at once; 0: the descriptor limit less a reserve
    int32_t         n_prefill_chunk = 256;      // prompt tokens decoded per request per step
    bool            reuse_prompts = true;       // a request reuses the longest prefix a free slot holds
    int64_t         cache_ram_mib = 8192;       // --cache-ram: MiB of host memory for the prompt cache (-1: no limit, 0: none)
    bool            slots_endpoint = true;      // GET /slots answers (llama-server's --slots / --no-slots)
    std::string     accept = "rejection";       // a request's specdec_accept_mode unless it names one (speculative_accept)
    std::vector<std::string> cors_origins;      // --cors-origin: web page origins allowed to call from a browser ("*": any)
    std::string     reasoning_format = "auto";  // --reasoning-format: none | auto | deepseek | deepseek-legacy (a request may name its own)
    std::string     chat_template_kwargs;       // --chat-template-kwargs: a JSON object of template variables ("" none)
    std::string     chat_template;              // --chat-template: Jinja text used instead of the model's ("" the model's)
    std::string     chat_template_file;         // --chat-template-file: the same, read from a file
    int32_t         reasoning_budget = -1;      // --reasoning-budget: tokens an answer may think (-1: no limit)
    std::string     reasoning_budget_message;   // --reasoning-budget-message: forced before the end of thinking
    std::string     slot_save_path;             // --slot-save-path: the folder of slot files (POST /slots/{id}?action=...)
    std::string     ssl_cert_file;              // --ssl-cert-file: TLS certificate (PEM; with ssl_key_file)
    std::string     ssl_key_file;               // --ssl-key-file: its private key (PEM)
    std::string     draft_vocab_counts;         // --draft-vocab-counts: counts of the generated tokens, kept across runs, that rank --draft-vocab
    std::string     log_file;                   // --log-file: the log also appended to this file
    bool            prefill_assistant = true;   // --prefill-assistant / --no-prefill-assistant: a last assistant message is continued
    int             verbosity = 0;              // set by main from -v
};

void add_serve_command(CLI::App & app, serve_options & opt);
// Serves until SIGINT or SIGTERM; returns exit_ok after a clean shutdown.
int run_serve(const serve_options & opt);

} // namespace cli
