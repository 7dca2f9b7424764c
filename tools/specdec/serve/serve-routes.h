// `specdec serve`'s routes: what each request gets, over the transport of
// serve-http.h. The cheap checks (Origin, Host, API key, body size, the
// bound on completions) run on the io thread when a request's headers are
// in; a completion's parse, template and tokenization run on a small worker
// pool, and its answer is formatted on a writer thread as the engine's
// scheduler reports (the request channel's notification), so no thread
// waits on a client or on the engine. It never sees speculation (the engine does that).
#pragma once

#include "serve-chat.h"
#include "serve-http.h"
#include "serve-metrics.h"
#include "serve-scheduler.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct llama_model;

namespace cli::serve {

// What the handlers use; everything borrowed must outlive the api_routes.
struct service {
    const llama_model *    model = nullptr;      // its vocabulary tokenizes prompts
    const chat_formatter * chat = nullptr;       // messages -> prompt
    chat_options           chat_defaults;        // --reasoning-format, --chat-template-kwargs, --reasoning-budget; a request's fields override them
    scheduler *            sched = nullptr;
    metrics *              stats = nullptr;
    std::string            model_id;             // GET /v1/models, and what `model` may name with strict_model
    std::vector<std::string> model_aliases;      // --alias's names, sorted (model_id the first); empty: model_id alone
    std::vector<std::string> model_tags;         // --tags: informational, in the model object
    bool                   strict_model = false; // --strict-model: a request naming another model gets 404
    std::optional<uint32_t> seed;                // --seed: the seed of a request that names none (absent: a random one each)
    std::string            strategy = "none";    // the drafter, reported per response
    std::string            model_path;           // the target's file (GET /props)
    uint32_t               n_slots = 0;          // sequences decoded together (-np; GET /props)
    bool                   slots_endpoint = true; // GET /slots answers (--slots, the default; --no-slots: 501)
    std::string            slot_save_path;       // --slot-save-path: the slot files' folder, ending with '/' ("": POST /slots/{id} answers 501)
    bool                   verbose_answers = false; // -vv (llama-server's --verbose): answers carry __verbose unless a request says not
    int32_t                n_ctx = 0;            // positions per sequence
    int32_t                n_batch = 0;          // tokens per decode (/infill fits its prefix and suffix in one, as llama-server)
    size_t                 max_prompt_bytes = 0; // longer prompt text cannot fit n_ctx (checked before tokenizing); 0: no bound
    int32_t                n_draft = 0;          // request_params::n_draft for every request
    specdec_accept_mode    accept = SPECDEC_ACCEPT_REJECTION; // a request's mode unless it names one (speculative_accept)
    // One line per request answered, and the reason of every 500 (which
    // its client gets without it); empty: nothing is logged. Called from
    // the io thread, the workers and the writer.
    std::function<void(const std::string &)> log;
};

struct route_options {
    // The addresses the server listens on: when every one is a loopback one
    // (127.0.0.0/8, ::1, localhost), the Host allow-list is on (below).
    std::vector<std::string> hosts = {"127.0.0.1"};
    // Non-empty: every route but /health needs one of these, as
    // "Authorization: Bearer KEY" (the scheme in any case) or "X-Api-Key: KEY".
    std::vector<std::string> api_keys;
    // On a loopback address, a request whose Host header names another host
    // than localhost, 127.0.0.1, [::1], a listening address or one of
    // these (any port) gets 403: a DNS-rebinding page (a name of the
    // attacker's pointed at 127.0.0.1) could otherwise read the answers.
    // Host names (a port given with one is ignored). A request without Host passes (browsers always send one).
    std::vector<std::string> allowed_hosts;
    // Browsers (the Origin policy): a request with an Origin header is
    // refused with 403 unless the origin is listed here ("*": any), or is the
    // server's own address as the request's Host names it, by an IP address
    // or localhost. Listed origins get CORS headers and preflight answers.
    // Requests without Origin (curl, SDKs) are not concerned. Each entry as
    // normalize_origin() returns it.
    std::vector<std::string> cors_origins;
    size_t max_body = size_t(8) << 20; // a completion's body above this many bytes: 413 before the API key is checked
    // Completions the engine works on at most (slots + waiting places),
    // counted from their headers to their engine's end (finished,
    // cancelled or refused), not to their last byte written: past it, 503
    // queue_full before the body is read.
    size_t max_completions = 68;
    // Threads that parse, template and tokenize completions (a thread more
    // formats their answers; the io thread does none of it).
    size_t n_workers = 2;
};

// An --cors-origin value as an Origin header spells it (lower-case, no
// trailing slash; "*" and "null" as they are), or "" when it is none of
// "*", "null" and http[s]://host[:port] (no path).
std::string normalize_origin(const std::string & origin);

// The API keys of a key file's text: one a line, surrounding whitespace
// dropped, blank lines and lines starting with '#' skipped.
std::vector<std::string> parse_api_keys(const std::string & text);

class api_routes {
public:
    // Starts the workers; `svc` must outlive this.
    api_routes(service & svc, const route_options & options);
    // Stops the workers (what they had not started is dropped).
    ~api_routes();
    api_routes(const api_routes &) = delete;
    api_routes & operator=(const api_routes &) = delete;

    // For http_server; they borrow this object.
    http_handlers handlers();
    // Any thread: new requests get 503 from now on (requests in flight go on).
    void begin_shutdown();

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace cli::serve
