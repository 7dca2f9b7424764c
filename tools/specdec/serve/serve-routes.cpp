#include "serve-routes.h"

#include "cli-common.h"
#include "json-text.h"
#include "serve-anthropic.h"
#include "serve-grammar.h"
#include "serve-native.h"
#include "serve-openai.h"
#include "serve-responses.h"
#include "serve-slots.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include <arpa/inet.h>

namespace cli::serve {

namespace {

using namespace std::chrono_literals;

http_response json_response(int status, const nlohmann::json & body) {
    http_response r;
    r.status = status;
    r.content_type = "application/json";
    r.body = json_text(body, -1);
    return r;
}

// An error in the shape of the API family the request came in by.
http_response error_response(const api_error & e, api_family api = api_family::openai) {
    http_response r = json_response(e.status(), api == api_family::anthropic ? anthropic_error_body(e) : error_body(e));
    if (e.status() == 503) {
        r.set("Retry-After", "1");
    }
    return r;
}

api_error unavailable(const std::string & message, const std::string & code) {
    return api_error(503, "unavailable_error", message, "", code);
}

api_error queue_full() {
    return unavailable("the server is busy: every slot is taken and the waiting queue is full; retry later", "queue_full");
}

api_error payload_too_large() {
    return api_error(413, "invalid_request_error", "the request body is larger than this server takes", "", "payload_too_large");
}

api_error request_timeout() {
    return api_error(408, "invalid_request_error",
                     "the request did not arrive in time (its line and headers within the header deadline, its body within the body "
                     "deadline)",
                     "", "request_timeout");
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return s;
}

std::string trimmed(const std::string & s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) {
        return "";
    }
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Splits "host[:port]" (an IPv6 host in brackets) into its lower-case host
// and its port, `default_port` when absent; false when it is not one.
bool split_host_port(const std::string & s, const std::string & default_port, std::string & host, std::string & port) {
    size_t end = s.size(); // of the host
    if (!s.empty() && s[0] == '[') {
        end = s.find(']');
        if (end == std::string::npos) {
            return false;
        }
        ++end;
    } else {
        end = std::min(s.find(':'), s.size());
    }
    host = lower(s.substr(0, end));
    port = end == s.size() ? default_port : s.substr(end + 1);
    const bool digits = !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); });
    return !host.empty() && (end == s.size() || s[end] == ':') && digits;
}

// An IPv4 or bracketed IPv6 address, or localhost: a name no one else's DNS answers for.
bool is_address_or_localhost(const std::string & host) {
    unsigned char buf[16];
    if (host == "localhost" || inet_pton(AF_INET, host.c_str(), buf) == 1) {
        return true;
    }
    return host.size() > 2 && host.front() == '[' && host.back() == ']' && inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1;
}

// A listening address only this machine reaches: localhost, 127.0.0.0/8, ::1.
bool is_loopback(const std::string & host) {
    unsigned char buf[16];
    if (host == "localhost" || (inet_pton(AF_INET, host.c_str(), buf) == 1 && buf[0] == 127)) {
        return true;
    }
    static const unsigned char v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return inet_pton(AF_INET6, host.c_str(), buf) == 1 && std::equal(buf, buf + 16, v6_loopback);
}

// What the Origin policy (route_options::cors_origins) makes of a request.
enum class origin_verdict {
    absent,    // no Origin header: not a browser page's request (curl, SDKs)
    own,       // a page of this server's own address, as the request's Host names it by an address or localhost
    listed,    // --cors-origin allows it: its answers carry CORS headers
    refused,   // 403
};

// Own address only by an address or localhost: a DNS name may be an
// attacker's, rebound to this server's address, whose pages the browser
// would then let read the answers.
origin_verdict judge_origin(const http_request & req, const std::vector<std::string> & allowed) {
    const std::string * header = req.find("Origin");
    if (header == nullptr) {
        return origin_verdict::absent;
    }
    const std::string origin = lower(*header);
    for (const std::string & a : allowed) {
        if (a == "*" || a == origin) {
            return origin_verdict::listed;
        }
    }
    const std::string scheme = "http://"; // this server speaks plain HTTP only
    std::string o_host, o_port, h_host, h_port;
    if (origin.compare(0, scheme.size(), scheme) == 0 && split_host_port(origin.substr(scheme.size()), "80", o_host, o_port) &&
        split_host_port(req.value("Host"), "80", h_host, h_port) && o_host == h_host && o_port == h_port &&
        is_address_or_localhost(o_host)) {
        return origin_verdict::own;
    }
    return origin_verdict::refused;
}

api_error origin_refused(const std::string & origin) {
    return api_error(403, "permission_error",
                     "requests from web pages of " + origin + " are refused; start the server with --cors-origin " + origin +
                         " to allow them",
                     "", "origin_not_allowed");
}

// Compares without an early exit, so the time taken does not tell how much of the key matched.
bool same_secret(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
    }
    return diff == 0;
}

// Threads that run jobs in arrival order; a job never waits on a client or the engine.
class worker_pool {
public:
    explicit worker_pool(size_t n) {
        for (size_t i = 0; i < std::max<size_t>(n, 1); ++i) {
            threads_.emplace_back([this] { work(); });
        }
    }
    // Joins the workers after their current jobs; jobs not started are dropped.
    ~worker_pool() {
        {
            std::lock_guard<std::mutex> lock(m_);
            stopping_ = true;
            jobs_.clear();
        }
        cv_.notify_all();
        for (std::thread & t : threads_) {
            t.join();
        }
    }
    // Any thread; dropped once the pool stops.
    void post(std::function<void()> job) {
        {
            std::lock_guard<std::mutex> lock(m_);
            if (stopping_) {
                return;
            }
            jobs_.push_back(std::move(job));
        }
        cv_.notify_one();
    }

private:
    void work() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock<std::mutex> lock(m_);
                cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
                if (stopping_) {
                    return;
                }
                job = std::move(jobs_.front());
                jobs_.pop_front();
            }
            job();
        }
    }

    std::mutex                        m_;
    std::condition_variable           cv_;
    std::deque<std::function<void()>> jobs_;
    bool                              stopping_ = false;
    std::vector<std::thread>          threads_; // last: started once the rest is built
};

// A route as llama-server matches it: with or without the /v1 prefix.
std::string_view route_of(const std::string & path) {
    return path.rfind("/v1/", 0) == 0 ? std::string_view(path).substr(3) : std::string_view(path);
}

// llama-server's own POST routes besides completions (serve-native.h), and
// Anthropic's count_tokens: answered by a worker without engine work.
bool is_native_post(std::string_view route) {
    return route == "/tokenize" || route == "/detokenize" || route == "/apply-template" || route == "/messages/count_tokens" ||
           route.rfind("/slots/", 0) == 0;
}

// Each token's text.
std::vector<std::string> token_pieces(const response_info & info, const std::vector<llama_token> & tokens) {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    for (const llama_token t : tokens) {
        out.push_back(info.piece(t));
    }
    return out;
}

// The text of `tokens` piece by piece: past a stop string, the text that completed it.
std::string pieces_of(const response_info & info, const std::vector<llama_token> & tokens) {
    std::string out;
    for (const std::string & p : token_pieces(info, tokens)) {
        out += p;
    }
    return out;
}

// llama-server's native completions: /completion and /infill. (llama-server
// answers /completions without /v1 natively too; here it is OpenAI's, as
// every route without /v1 is, so that OpenAI clients pointed at the root
// get their shapes.)
bool is_native_completion(const std::string & path) {
    return path == "/completion" || path == "/infill";
}

// Anthropic's routes answer in its shapes (serve-anthropic.h), /responses in
// the Responses API's (serve-responses.h), the native completion in
// llama-server's (serve-native.h); every other in OpenAI's.
api_family api_of(const std::string & path) {
    return is_native_completion(path)                     ? api_family::llama
           : route_of(path).rfind("/messages", 0) == 0 ? api_family::anthropic
           : route_of(path) == "/responses"              ? api_family::responses
                                                       : api_family::openai;
}

// A completion's place under route_options::max_completions, given back when the last owner drops it.
struct admission {
    explicit admission(std::atomic<size_t> & n) : n_(n) { n_.fetch_add(1); }
    ~admission() { n_.fetch_sub(1); }
    admission(const admission &) = delete;
    admission & operator=(const admission &) = delete;

private:
    std::atomic<size_t> & n_;
};

// One choice of a completion: its engine request, and what its stream sent.
struct completion_choice {
    std::shared_ptr<request_channel> c;
    response_info                    info;        // the completion's, with this choice's index
    std::string                      echo_text;   // completions with echo: the prompt's text and tokens come first
    std::string                      prompt_text; // llama, verbose: its prompt's tokens as text (special tokens spelled), which the native answer carries
    std::vector<llama_token>         echo_tokens;
    bool                             first = true;     // no chunk of it written yet
    bool                             done = false;     // its last chunk written
    size_t                           text_offset = 0;  // of the next token with log-probabilities (completions)
    std::string                      text;             // with a chat parser: the answer's text so far, read again at each piece
    answer_stream                    sent;             // and what its deltas sent
};

// One completion from its body on. A worker fills it; its pumps (on the
// writer, under m) write what the engine released. The channels'
// notifications hold it until the engine's last event for each choice,
// and a queued pump until it has run.
struct completion_state {
    std::shared_ptr<http_exchange>   ex;
    std::shared_ptr<void>            place;   // its admission: dropped when the engine is done with it
    std::mutex                       m;
    std::atomic<bool>                scheduled{false}; // a pump is queued and has not begun
    // Under m:
    std::vector<completion_choice>   choices; // n per prompt, index prompt x n + choice (anthropic: one)
    size_t                           n = 1;
    api_family                       api = api_family::openai; // the formatter of its answer
    std::vector<std::string>         stop_sequences;           // the client's stop strings (which one ended the answer; not responses)
    native_completion                native;                   // llama: what it asks beyond the OpenAI request
    std::optional<infill_input>      infill;                   // llama, /infill: the text around the middle
    parsed_request                   r;       // the engine's parameters point into it (and chat) until admitted
    chat_prompt                      chat;
    bool                             stream = false;
    response_info                    info;         // the completion's; each choice's is a copy with its index
    bool                             echo = false; // completions: the prompt's text and tokens come first
    bool                             verbose = false; // openai, not streamed: the answer carries __verbose
    bool                             admitted = false;
    bool                             finished = false;  // its final answer handed to the exchange
    // Streams:
    bool                             begun = false;     // its head handed to the exchange
    anthropic_stream                 events;          // anthropic: what its events sent
    responses_stream                 response;        // responses: what its events sent, and what its response repeats

    // Every choice's engine request, in order.
    void cancel_all(scheduler & sched) const {
        for (const completion_choice & ch : choices) {
            sched.cancel(ch.c);
        }
    }
};

} // namespace

std::string normalize_origin(const std::string & origin) {
    if (origin == "*" || origin == "null") {
        return origin;
    }
    std::string o = lower(origin);
    if (!o.empty() && o.back() == '/') {
        o.pop_back();
    }
    const size_t sep = o.find("://");
    if (sep == std::string::npos) {
        return "";
    }
    const std::string scheme = o.substr(0, sep);
    const std::string rest = o.substr(sep + 3);
    std::string host, port;
    const bool ok = (scheme == "http" || scheme == "https") && rest.find_first_of("/?#@ ") == std::string::npos &&
                    split_host_port(rest, "80", host, port);
    return ok ? o : "";
}

std::vector<std::string> parse_api_keys(const std::string & text) {
    std::vector<std::string> keys;
    size_t at = 0;
    while (at <= text.size()) {
        const size_t eol = std::min(text.find('\n', at), text.size());
        const std::string line = trimmed(text.substr(at, eol - at));
        if (!line.empty() && line[0] != '#') {
            keys.push_back(line);
        }
        at = eol + 1;
    }
    return keys;
}

struct api_routes::impl {
    impl(service & s, const route_options & o) : svc(s), opt(o), workers(o.n_workers) {
        if (std::all_of(opt.hosts.begin(), opt.hosts.end(), is_loopback)) {
            check_host = true;
            hosts = {"localhost", "127.0.0.1", "[::1]"};
            for (const std::string & h : opt.hosts) {
                hosts.push_back(lower(h.find(':') != std::string::npos ? "[" + h + "]" : h));
            }
            for (const std::string & h : opt.allowed_hosts) {
                std::string host, port; // a port given with the name is not part of it
                hosts.push_back(split_host_port(h, "80", host, port) ? host : lower(h));
            }
        }
    }

    service &             svc;
    const route_options   opt;
    bool                  check_host = false;
    std::vector<std::string> hosts;            // with check_host: the Host names allowed
    std::atomic<bool>     shutting_down{false};
    std::atomic<size_t>   n_admitted{0};       // completions holding an admission place
    std::atomic<uint64_t> next_id{1};
    const int64_t         started = static_cast<int64_t>(std::time(nullptr));
    std::mutex            seed_m;
    std::mt19937          seeds{std::random_device{}()};
    // Last: their threads stop first. Workers parse, template and tokenize;
    // the writer formats what the engine releases (a thread of its own, so
    // that a long parse never delays a stream's next chunk).
    worker_pool           workers;
    worker_pool           writer{1};

    uint32_t random_seed() {
        std::lock_guard<std::mutex> lock(seed_m);
        return static_cast<uint32_t>(seeds());
    }

    // A 500's answer: its reason goes to the log only.
    api_error internal_error(const std::string & reason) const {
        if (svc.log) {
            svc.log("500: " + reason);
        }
        return api_error(500, "server_error", "the server failed to answer this request (its log says why when run with -v)", "",
                         "internal_error");
    }

    bool host_allowed(const http_request & req) const {
        const std::string * h = req.find("Host");
        if (!check_host || h == nullptr) {
            return true;
        }
        std::string host, port;
        return split_host_port(*h, "80", host, port) && std::find(hosts.begin(), hosts.end(), host) != hosts.end();
    }

    // Every route but /health needs an API key when some are set; the error when it is missing or wrong.
    std::optional<api_error> check_key(const http_request & req) const {
        if (opt.api_keys.empty() || req.path == "/health") {
            return std::nullopt;
        }
        std::vector<std::string> offered;
        if (const std::string * x = req.find("X-Api-Key")) {
            offered.push_back(trimmed(*x));
        }
        if (const std::string * auth = req.find("Authorization")) {
            const size_t sp = auth->find_first_of(" \t");
            if (sp != std::string::npos && lower(auth->substr(0, sp)) == "bearer") {
                offered.push_back(trimmed(auth->substr(sp)));
            }
        }
        bool ok = false; // every key compared: the time does not tell which matched
        for (const std::string & k : opt.api_keys) {
            for (const std::string & o : offered) {
                ok = same_secret(o, k) || ok;
            }
        }
        if (ok) {
            return std::nullopt;
        }
        const bool none = !req.has("X-Api-Key") && !req.has("Authorization");
        return api_error(401, "authentication_error",
                         none ? "an API key is required: send Authorization: Bearer KEY or X-Api-Key: KEY" : "the API key is not valid", "",
                         "invalid_api_key");
    }

    std::optional<http_response> on_headers(const http_request & req, std::shared_ptr<void> & hold);
    void on_request(const std::shared_ptr<http_exchange> & ex, std::shared_ptr<void> hold);
    http_response on_failure(http_failure f, const http_request & req);
    void decorate(const http_request & req, http_response & res) const;

    void prepare(endpoint kind, api_family api, const std::shared_ptr<completion_state> & st);
    void answer_native(http_exchange & ex);
    nlohmann::json count_tokens_answer(std::string_view body, const request_limits & limits) const;
    void pump(const std::shared_ptr<completion_state> & st);
    void answer(completion_state * st);
    void stream_out(completion_state & st);
    void stream_anthropic(completion_state & st);
    void stream_responses(completion_state & st);
    api_error rejection(const request_channel & c) const;
    bool write_choice(completion_state & st, completion_choice & ch);
    void stream_native(completion_state & st);
};

api_error api_routes::impl::rejection(const request_channel & c) const {
    switch (c.status()) {
        case SPECDEC_STATUS_QUEUE_FULL:
            return queue_full();
        case SPECDEC_STATUS_CONTEXT_FULL:
        case SPECDEC_STATUS_PROMPT_TOO_LONG:
            return invalid_request(c.message(), "prompt", "context_length_exceeded");
        case SPECDEC_STATUS_INVALID_ARGUMENT:
        case SPECDEC_STATUS_UNREPRESENTABLE_TEXT: // a grammar prefix
            return invalid_request(c.message());
        default:
            return internal_error(c.message());
    }
}

// The cheapest checks first (the origin, the Host, the body size, the API
// key, the engine's bound), so that no refused request costs a body read,
// a parse or a tokenization; the GET routes are answered here too.
std::optional<http_response> api_routes::impl::on_headers(const http_request & req, std::shared_ptr<void> & hold) {
    const api_family api = api_of(req.path);
    const auto error_response = [api](const api_error & e) { return serve::error_response(e, api); };
    const origin_verdict origin = judge_origin(req, opt.cors_origins);
    if (origin == origin_verdict::refused) {
        return error_response(origin_refused(req.value("Origin")));
    }
    if (!host_allowed(req)) {
        return error_response(api_error(403, "permission_error",
                                        "the Host header names " + req.value("Host") +
                                            ", which is not this server's address; start the server with --allowed-host NAME to allow it",
                                        "", "host_not_allowed"));
    }
    // A CORS preflight (a browser asks before its request; it sends no API key) or a plain OPTIONS.
    if (req.method == "OPTIONS") {
        http_response res;
        res.status = 204;
        res.set("Allow", "GET, POST, OPTIONS");
        if (origin == origin_verdict::listed) {
            res.set("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            if (const std::string * h = req.find("Access-Control-Request-Headers")) { // Authorization among them: "*" would not cover it
                res.set("Access-Control-Allow-Headers", *h);
            }
            res.set("Access-Control-Max-Age", "600");
        }
        return res;
    }
    const std::string_view route = route_of(req.path);
    const bool completion =
        req.method == "POST" && (route == "/completions" || is_native_completion(req.path) || route == "/chat/completions" || route == "/messages" ||
                                 route == "/responses");
    if (completion) {
        const std::string * cl = req.find("Content-Length");
        if (cl != nullptr && cl->size() <= 18 && std::all_of(cl->begin(), cl->end(), [](unsigned char ch) { return std::isdigit(ch); }) &&
            !cl->empty() && std::stoull(*cl) > opt.max_body) {
            return error_response(payload_too_large());
        }
    }
    if (std::optional<api_error> e = check_key(req)) {
        return error_response(*e);
    }
    if (req.method == "GET" && route == "/health") {
        return shutting_down.load() ? json_response(503, {{"status", "shutting down"}}) : json_response(200, {{"status", "ok"}});
    }
    if (req.method == "GET" && route == "/models") {
        return json_response(200, {{"object", "list"}, {"data", nlohmann::json::array({model_object(svc, svc.model_id, started)})}});
    }
    if (req.method == "GET" && route.rfind("/models/", 0) == 0) {
        const std::string id(route.substr(8));
        if (svc.strict_model && id != svc.model_id &&
            std::find(svc.model_aliases.begin(), svc.model_aliases.end(), id) == svc.model_aliases.end()) {
            return error_response(api_error(404, "invalid_request_error", "The model '" + id + "' does not exist", "model", "model_not_found"));
        }
        return json_response(200, model_object(svc, id, started)); // any name is served (see strict_model)
    }
    if (req.method == "GET" && route == "/props") {
        return json_response(200, props_answer(svc));
    }
    if (req.method == "GET" && route == "/slots") {
        if (!svc.slots_endpoint) {
            return error_response(api_error(501, "not_supported_error", "this server does not expose /slots: start it without --no-slots",
                                            "", "not_supported"));
        }
        return json_response(200, slots_answer(svc));
    }
    if (req.method == "POST" && route.rfind("/slots/", 0) == 0 && svc.slot_save_path.empty()) {
        return error_response(api_error(501, "not_supported_error",
                                        "slot actions (save, restore, erase) need a folder for their files: start the server with "
                                        "--slot-save-path DIR",
                                        "", "not_supported"));
    }
    if (req.method == "POST" && is_native_post(route)) {
        return std::nullopt; // its body is read, then answered by a worker (no engine work: no admission place)
    }
    if (req.method == "GET" && route == "/metrics") {
        http_response res;
        res.content_type = "text/plain; version=0.0.4; charset=utf-8";
        res.body = svc.stats->render();
        res.set("Process-Start-Time-Unix", std::to_string(svc.stats->start_time_unix()));
        return res;
    }
    if (route.rfind("/responses/", 0) == 0) { // a stored response's routes (retrieve, delete, cancel, input_items), input_tokens
        return error_response(api_error(404, "invalid_request_error",
                                        "this server stores no responses (each is answered once: none can be retrieved, listed, "
                                        "cancelled or deleted) and serves no route under /v1/responses/",
                                        "", "not_found"));
    }
    if (!completion) {
        return error_response(api_error(404, "invalid_request_error", "no such route", "", "not_found"));
    }
    if (shutting_down.load()) {
        svc.stats->add_rejected();
        return error_response(unavailable("the server is shutting down", "shutting_down"));
    }
    if (n_admitted.load() >= opt.max_completions) {
        svc.stats->add_rejected();
        return error_response(queue_full());
    }
    hold = std::make_shared<admission>(n_admitted);
    return std::nullopt;
}

http_response api_routes::impl::on_failure(http_failure f, const http_request & req) {
    const auto error_response = [api = api_of(req.path)](const api_error & e) { return serve::error_response(e, api); };
    switch (f) {
        case http_failure::timeout:
            return error_response(request_timeout());
        case http_failure::length_required:
            return error_response(api_error(411, "invalid_request_error",
                                            "request bodies must have a Content-Length (chunked request bodies are not read)", "",
                                            "length_required"));
        case http_failure::too_large:
            return error_response(payload_too_large());
        case http_failure::headers_too_large:
            return error_response(api_error(431, "invalid_request_error", "the request's line and headers are too large", "",
                                            "headers_too_large"));
        case http_failure::body_budget:
            return error_response(unavailable("the server is reading as many request bodies as its memory budget allows; retry later",
                                              "body_budget"));
        case http_failure::bad_request:
            break;
    }
    return error_response(api_error(400, "invalid_request_error", "the request is not valid HTTP/1.1", "", "bad_request"));
}

// Every answer to a listed origin (errors, streams and preflights too) says the page may read it.
void api_routes::impl::decorate(const http_request & req, http_response & res) const {
    if (judge_origin(req, opt.cors_origins) != origin_verdict::listed) {
        return;
    }
    const bool any = std::find(opt.cors_origins.begin(), opt.cors_origins.end(), "*") != opt.cors_origins.end();
    res.set("Access-Control-Allow-Origin", any ? "*" : req.value("Origin"));
    res.set("Access-Control-Expose-Headers", "Retry-After");
    res.set("Vary", "Origin");
}

void api_routes::impl::on_request(const std::shared_ptr<http_exchange> & ex, std::shared_ptr<void> hold) {
    auto st = std::make_shared<completion_state>();
    st->ex = ex;
    st->place = std::move(hold);
    const std::string_view route = route_of(ex->request().path);
    if (is_native_post(route)) {
        workers.post([this, ex] { answer_native(*ex); });
        return;
    }
    const endpoint kind = route == "/completions" || is_native_completion(ex->request().path) ? endpoint::completions : endpoint::chat;
    workers.post([this, kind, api = api_of(ex->request().path), st] { prepare(kind, api, st); });
}

// A worker: llama-server's /tokenize, /detokenize, /apply-template and slot actions (which wait for the engine thread).
void api_routes::impl::answer_native(http_exchange & ex) {
    try {
        request_limits limits;
        limits.model_id = svc.model_id;
        limits.model_aliases = svc.model_aliases;
        limits.n_ctx = svc.n_ctx;
        const std::string body = ex.take_body();
        const std::string_view route = route_of(ex.request().path);
        const std::string_view target = ex.request().target; // the path, then '?' and the query when there is one
        const std::string_view query = target.substr(std::min(target.size(), ex.request().path.size() + 1));
        const nlohmann::json answer = route.rfind("/slots/", 0) == 0 ? slot_action_answer(svc, svc.slot_save_path, route.substr(7), query, body, limits)
                                      : route == "/tokenize"               ? tokenize_answer(svc, body, limits)
                                      : route == "/detokenize"           ? detokenize_answer(svc, body, limits)
                                      : route == "/messages/count_tokens" ? count_tokens_answer(body, limits)
                                                                         : apply_template_answer(svc, body, limits);
        ex.release_body();
        ex.respond(json_response(200, answer));
    } catch (const api_error & e) {
        ex.release_body();
        ex.respond(error_response(e, api_of(ex.request().path)));
    } catch (const std::exception & e) {
        ex.release_body();
        ex.respond(error_response(internal_error(e.what()), api_of(ex.request().path)));
    }
}

// Anthropic's count_tokens: the tokens of the prompt the same body's
// message would be given (its template, tools and thinking), as prepare() counts them.
nlohmann::json api_routes::impl::count_tokens_answer(std::string_view body, const request_limits & limits) const {
    const parsed_request r = parse_anthropic_request(body, limits, true);
    const chat_options options = chat_options_for(r, svc.chat_defaults);
    chat_prompt chat;
    try {
        chat = svc.chat->apply(r.messages, r.tools, options);
    } catch (const std::exception & e) {
        throw invalid_request(e.what(), r.tools.functions.empty() ? "messages" : "tools");
    }
    try {
        return anthropic_count_tokens_body(tokenize(svc.model, chat.prompt, true).size());
    } catch (const specdec::error & e) {
        throw invalid_request(e.what(), "messages");
    }
}

// A worker: parses, templates and tokenizes the request, and hands it to
// the scheduler; its answer follows from pump(). A failure here is answered at once.
void api_routes::impl::prepare(endpoint kind, api_family api, const std::shared_ptr<completion_state> & st) {
    std::unique_lock<std::mutex> lock(st->m);
    http_exchange & ex = *st->ex;
    try {
        if (shutting_down.load()) {
            svc.stats->add_rejected();
            throw unavailable("the server is shutting down", "shutting_down");
        }
        request_limits limits;
        limits.model_id = svc.model_id;
        limits.model_aliases = svc.model_aliases;
        limits.strict_model = svc.strict_model;
        limits.n_ctx = svc.n_ctx;
        limits.n_slots = std::max<uint32_t>(svc.n_slots, 1);
        st->api = api;
        if (api == api_family::anthropic) {
            st->r = parse_anthropic_request(ex.take_body(), limits);
            st->stop_sequences = st->r.stop;
        } else if (api == api_family::llama) {
            if (ex.request().path == "/infill") {
                st->infill.emplace();
                st->r = parse_native_infill(ex.take_body(), limits, st->native, *st->infill);
            } else {
                st->r = parse_native_completion(ex.take_body(), limits, st->native);
            }
            st->stop_sequences = st->r.stop;
        } else if (api == api_family::responses) {
            responses_request rr = parse_responses_request(ex.take_body(), limits);
            st->r = std::move(rr.chat);
            st->response.echo = std::move(rr.echo);
            st->response.encrypted_reasoning = rr.encrypted_reasoning;
        } else {
            st->r = parse_request(kind, ex.take_body(), limits);
            st->stop_sequences = st->r.stop;
        }
        parsed_request & r = st->r;
        // The field that holds the conversation, which errors about the prompt name.
        const char * const prompt_field = kind == endpoint::completions ? "prompt" : api == api_family::responses ? "input" : "messages";
        // No position holds more than max_prompt_bytes / n_ctx bytes of text:
        // a longer text cannot fit, and is refused before it is templated or tokenized.
        size_t n_text = 0;
        for (const parsed_request::completion_prompt & p : r.prompts) {
            n_text += p.text.size();
        }
        for (const chat_message & m : r.messages) {
            n_text += m.content.size() + m.reasoning_content.size();
            for (const tool_call & call : m.tool_calls) {
                n_text += call.name.size() + call.arguments.size();
            }
        }
        for (const tool_function & f : r.tools.functions) {
            n_text += f.name.size() + f.description.size() + f.parameters.size();
        }
        // Each message takes a position at least (its role's marker), and the
        // template engine's time grows with their number, under a shared lock.
        if (r.messages.size() >= static_cast<size_t>(svc.n_ctx)) {
            throw invalid_request("the request has " + std::to_string(r.messages.size()) + " messages, which exceeds the available "
                                      "context size: " + std::to_string(svc.n_ctx) + " positions per request (-c), and each message "
                                      "takes one at least",
                                  prompt_field, "context_length_exceeded");
        }
        if (svc.max_prompt_bytes > 0 && n_text > svc.max_prompt_bytes) {
            throw invalid_request("the prompt has " + std::to_string(n_text) + " bytes of text, which exceeds the available context "
                                      "size: " + std::to_string(svc.n_ctx) + " positions per request (-c), which no text longer than " +
                                      std::to_string(svc.max_prompt_bytes) + " bytes fits",
                                  prompt_field, "context_length_exceeded");
        }

        std::string text; // chat: the templated prompt
        if (kind == endpoint::chat) {
            if (!r.tools.functions.empty() && r.tools.choice != tool_choice::none && !svc.chat->writes_tool_calls()) {
                throw invalid_request("this model's chat template writes no tool calls, so its tools cannot be called; send "
                                      "'tool_choice': \"none\" or no tools",
                                      "tools", "unsupported_parameter");
            }
            const chat_options options = chat_options_for(r, svc.chat_defaults);
            try {
                st->chat = svc.chat->apply(r.messages, r.tools, options);
            } catch (const std::exception & e) {
                throw invalid_request(e.what(), r.tools.functions.empty() ? prompt_field : "tools");
            }
            const chat_prompt & chat = st->chat; // its grammar triggers are borrowed until the request is admitted
            text = chat.prompt;
            // The tool-call format's grammar and stop strings (parse_request refuses a grammar of the client's with them).
            if (!chat.grammar.empty()) {
                r.grammar = chat.grammar;
            }
            for (const std::string & t : chat.grammar_triggers) {
                r.grammar_triggers.push_back(t.c_str());
            }
            r.grammar_prefix = chat.grammar_prefix;
            // The engine tracks the reasoning block where a budget or a lazy grammar needs it, as llama-server does.
            if (r.reasoning_budget.value_or(-1) >= 0 && chat.reasoning_end.empty()) {
                throw invalid_request("this model's chat template has no reasoning markers llama.cpp recognises, so a reasoning "
                                      "budget cannot apply",
                                      "reasoning_budget_tokens", "unsupported_parameter");
            }
            if (!chat.reasoning_end.empty() && (options.reasoning_budget >= 0 || !chat.grammar_triggers.empty())) {
                r.reasoning_start = chat.reasoning_start;
                r.reasoning_end = chat.reasoning_end;
                r.reasoning_prefix = chat.generation_prompt;
                r.reasoning_budget = options.reasoning_budget;
                r.reasoning_budget_message = options.reasoning_budget_message;
            }
            for (const std::string & s : chat.stops) {
                if (std::find(r.stop.begin(), r.stop.end(), s) == r.stop.end()) {
                    r.stop.push_back(s);
                }
            }
        }
        const llama_vocab * vocab = llama_model_get_vocab(svc.model);
        std::vector<std::vector<llama_token>> prompts; // one per prompt (chat: the templated one)
        try {
            if (kind == endpoint::chat) {
                prompts.push_back(tokenize(svc.model, text, true)); // templates spell special tokens as text
            }
            for (const parsed_request::completion_prompt & p : r.prompts) {
                std::vector<llama_token> & prompt = prompts.emplace_back();
                if (p.parts.empty()) {
                    prompt = tokenize(svc.model, p.text, false);
                }
                // Token ids as sent; a text part as a text prompt is tokenized (with the vocabulary's BOS only when it comes first).
                for (size_t i = 0; i < p.parts.size(); ++i) {
                    const parsed_request::prompt_part & part = p.parts[i];
                    if (part.token >= llama_vocab_n_tokens(vocab)) {
                        throw invalid_request("'prompt' holds the token " + std::to_string(part.token) + ", outside the vocabulary [0, " +
                                                  std::to_string(llama_vocab_n_tokens(vocab)) + ")",
                                              "prompt");
                    }
                    if (part.token >= 0) {
                        prompt.push_back(part.token);
                    } else {
                        const std::vector<llama_token> t = specdec::tokenize(vocab, part.text, i == 0, false);
                        prompt.insert(prompt.end(), t.begin(), t.end());
                    }
                }
            }
        } catch (const specdec::error & e) {
            throw invalid_request(e.what(), prompt_field);
        }
        if (st->infill) {
            prompts[0] = infill_prompt(vocab, *st->infill, svc.n_batch, svc.n_ctx);
        }
        // logit_bias's texts, tokenized as llama-server does (no special tokens added or read).
        std::vector<llama_token> eog;
        if (r.ignore_eos) {
            for (llama_token t = 0; t < llama_vocab_n_tokens(vocab); ++t) {
                if (llama_vocab_is_eog(vocab, t)) {
                    eog.push_back(t);
                }
            }
        }
        try {
            resolve_logit_bias(r, [vocab](const std::string & t) { return specdec::tokenize(vocab, t, false, false); }, eog);
        } catch (const specdec::error & e) {
            throw invalid_request(e.what(), "logit_bias");
        }
        for (const std::vector<llama_token> & prompt : prompts) {
            if (prompt.empty()) {
                throw invalid_request("the prompt is empty (it has no tokens)", prompt_field);
            }
            if (prompt.size() >= static_cast<size_t>(svc.n_ctx)) {
                throw invalid_request("the prompt has " + std::to_string(prompt.size()) + " tokens, which exceeds the available context "
                                          "size: " + std::to_string(svc.n_ctx) + " positions per request (-c), so at most " +
                                          std::to_string(svc.n_ctx - 1) + " leave room for one token",
                                      prompt_field, "context_length_exceeded");
            }
        }
        if (r.json_schema) {
            try {
                r.grammar = json_schema_grammar(*r.json_schema);
            } catch (const std::exception & e) {
                throw invalid_request(std::string("the JSON schema cannot be turned into a grammar: ") + e.what(),
                                      r.json_schema_field);
            }
        }
        st->echo = r.echo;
        const specdec::request_params params = to_engine_params(r, svc.n_ctx, svc.seed ? *svc.seed : random_seed(), svc.n_draft, svc.accept);
        // The grammar is parsed here, on a worker, so that a bad one never
        // reaches the engine's thread (which parses it again).
        if (specdec_logit_shaping_validate(llama_model_get_vocab(svc.model), &params) != SPECDEC_STATUS_OK) {
            const std::string field = !st->chat.grammar.empty() ? "tools"
                                      : r.json_schema          ? r.json_schema_field
                                      : !r.grammar.empty()      ? "grammar"
                                                                : "logit_bias";
            throw invalid_request(specdec_last_error(), field);
        }
        st->stream = r.stream;
        st->verbose = api == api_family::openai && !r.stream && r.verbose.value_or(svc.verbose_answers);
        if (api == api_family::llama || st->verbose) {
            st->native.settings = native_settings(params, r.stream, st->native.n_probs, r.stop);
        }
        response_info & info = st->info;
        info.kind = kind;
        info.id = (api == api_family::anthropic   ? "msg_"
                   : api == api_family::responses ? "resp_"
                   : kind == endpoint::completions ? "cmpl-"
                                                   : "chatcmpl-") +
                  std::to_string(next_id.fetch_add(1));
        info.created = static_cast<int64_t>(std::time(nullptr));
        info.model = svc.model_id;
        info.strategy = svc.strategy;
        info.accept = accept_mode_name(accept_ran(params));
        info.n_top_logprobs = r.n_top_logprobs;
        info.include_usage = r.include_usage;
        info.piece = [vocab = llama_model_get_vocab(svc.model)](llama_token t) { return token_text(vocab, t); };

        // n choices per prompt, each prompt's decoded once (scheduler::submit); choice i has the seed + i.
        st->n = r.n;
        std::vector<std::vector<std::shared_ptr<request_channel>>> groups;
        for (size_t k = 0; k < prompts.size(); ++k) {
            std::vector<std::shared_ptr<request_channel>> & group = groups.emplace_back();
            for (uint32_t i = 0; i < r.n; ++i) {
                specdec::request_params p = params;
                p.seed = params.seed + i;
                completion_choice & ch = st->choices.emplace_back();
                ch.c = std::make_shared<request_channel>(prompts[k], p, r.stop);
                ch.info = info;
                ch.info.index = static_cast<uint32_t>(st->choices.size() - 1);
                if (r.echo) {
                    ch.echo_text = r.prompts[k].parts.empty() ? r.prompts[k].text : specdec::detokenize(vocab, prompts[k], false, true);
                    ch.echo_tokens = prompts[k];
                }
                if (api == api_family::llama || st->verbose) {
                    ch.prompt_text = specdec::detokenize(vocab, prompts[k], false, true);
                }
                // The engine thread calls it after each change; the pumps run on the writer.
                ch.c->set_notify([this, st] {
                    if (!st->scheduled.exchange(true)) {
                        writer.post([this, st] { pump(st); });
                    }
                });
                group.push_back(ch.c);
            }
        }
        for (size_t k = 0; k < groups.size(); ++k) {
            if (!svc.sched->submit(groups[k])) {
                for (size_t g = 0; g < k; ++g) {
                    for (const auto & c : groups[g]) {
                        svc.sched->cancel(c); // their finished events give the place back
                    }
                }
                for (size_t g = k; g < groups.size(); ++g) {
                    for (const auto & c : groups[g]) {
                        c->set_notify(nullptr);
                    }
                }
                st->choices.resize(k * r.n); // the submitted ones, whose finished events the pumps still see
                svc.stats->add_rejected();
                throw unavailable("the server is shutting down", "shutting_down");
            }
        }
        // A client gone cancels them; their finished events follow (and end the answer, to no one).
        ex.on_gone([sched = svc.sched, groups] {
            for (const auto & group : groups) {
                for (const auto & c : group) {
                    sched->cancel(c);
                }
            }
        });
        // A client that reads slower than it is sent: its requests hold their slots but no step's work until it catches up.
        ex.on_backlog([sched = svc.sched, groups](bool full) {
            for (const auto & group : groups) {
                for (const auto & c : group) {
                    sched->pause(c, full);
                }
            }
        });
    } catch (const api_error & e) {
        st->finished = true;
        ex.respond(error_response(e, api));
    } catch (const specdec::error & e) {
        st->finished = true;
        ex.respond(error_response(e.kind() == SPECDEC_STATUS_KIND_CONFIGURATION ? invalid_request(e.what()) : internal_error(e.what()), api));
    } catch (const std::exception & e) {
        st->finished = true;
        ex.respond(error_response(internal_error(e.what()), api));
    }
    if (st->finished) {
        ex.release_body();
        st->place.reset();
    }
}

// The writer, after the engine thread's notification: writes what the
// channel holds; once answered and done in the engine, the admission place goes back.
void api_routes::impl::pump(const std::shared_ptr<completion_state> & st) {
    std::lock_guard<std::mutex> lock(st->m);
    st->scheduled.store(false); // a notification from here on queues another pump
    if (!st->finished) {
        answer(st.get());
    }
    // Answered, and the engine is done with every choice: the place goes back.
    const bool engine_done = std::all_of(st->choices.begin(), st->choices.end(), [](const completion_choice & ch) {
        const request_channel::state s = ch.c->wait_admission(0ms);
        return s == request_channel::state::finished || s == request_channel::state::rejected;
    });
    if (st->finished && engine_done) {
        st->place.reset();
    }
}

namespace {

// A finished choice's failure, as its answer says it: cancelled (the server is shutting down) or failed.
std::optional<api_error> failure_of(const specdec::request_result & out) {
    if (out.output.stop == SPECDEC_STOP_CANCELLED) {
        return unavailable("the request was cancelled: the server is shutting down", "shutting_down");
    }
    if (out.output.stop == SPECDEC_STOP_ERROR) {
        return api_error(500, "server_error", "generation failed (run the server with -v for the reason)", "", "internal_error");
    }
    return std::nullopt;
}

// The client's stop string that ended `out`, else "": the text stops right
// before it, and the tokens' text holds it there.
std::string stopping_word(const completion_state & st, const response_info & info, const specdec::request_result & out) {
    if (out.output.stop != SPECDEC_STOP_STRING) {
        return "";
    }
    const std::string pieces = pieces_of(info, out.output.tokens);
    if (pieces.size() < out.output.text.size()) {
        return "";
    }
    for (const std::string & s : st.stop_sequences) {
        if (pieces.compare(out.output.text.size(), s.size(), s) == 0) {
            return s;
        }
    }
    return "";
}

} // namespace

// Under st->m: what the channels hold, written once every choice is
// admitted (or one refused: the answer is its error, the others are
// cancelled); st->finished once the final answer is handed over.
void api_routes::impl::answer(completion_state * st) {
    const request_channel * refused = nullptr;
    for (const completion_choice & ch : st->choices) {
        const request_channel::state s = ch.c->wait_admission(0ms);
        if (s == request_channel::state::pending) {
            return;
        }
        if (s == request_channel::state::rejected && refused == nullptr) {
            refused = ch.c.get();
        }
    }
    if (!st->admitted) {
        // The engine copied what it needs: what the request was parsed into, and its body's charge, go.
        st->admitted = true;
        st->r = parsed_request();
        st->ex->release_body();
    }
    try {
        if (refused != nullptr) {
            st->finished = true;
            st->cancel_all(*svc.sched);
            st->ex->respond(error_response(rejection(*refused), st->api));
        } else if (st->stream && st->api == api_family::anthropic) {
            stream_anthropic(*st);
        } else if (st->stream && st->api == api_family::responses) {
            stream_responses(*st);
        } else if (st->stream && st->api == api_family::llama) {
            stream_native(*st);
        } else if (st->stream) {
            stream_out(*st);
        } else {
            std::string ignored;
            for (completion_choice & ch : st->choices) {
                if (!ch.c->wait_output(0ms, ignored)) {
                    return;
                }
            }
            st->finished = true;
            for (const completion_choice & ch : st->choices) {
                if (const std::optional<api_error> e = failure_of(ch.c->result())) {
                    st->cancel_all(*svc.sched);
                    throw *e;
                }
            }
            std::vector<response_info> infos;
            std::vector<finished_request> fs;
            std::vector<parsed_answer> answers;
            answers.reserve(st->choices.size()); // infos point into it
            for (completion_choice & ch : st->choices) {
                const specdec::request_result & out = ch.c->result();
                response_info & info = infos.emplace_back(ch.info);
                if (st->echo) {
                    info.echo_text = &ch.echo_text;
                    info.echo_tokens = &ch.echo_tokens;
                }
                if (st->chat.parser != nullptr) {
                    answers.push_back(*st->chat.parser->parse(out.output.text, false));
                    if (st->api == api_family::openai) {
                        name_tool_calls(answers.back());
                    }
                    info.answer = &answers.back();
                }
                fs.push_back({&out, ch.c->n_prompt()});
            }
            if (st->api == api_family::llama) {
                // One prompt: its answer; several: a list of them, in order (llama-server's).
                nlohmann::json bodies = nlohmann::json::array();
                for (size_t i = 0; i < fs.size(); ++i) {
                    const specdec::request_result & out = *fs[i].result;
                    bodies.push_back(native_completion_body(st->native, infos[i], fs[i], out.output.text, st->choices[i].prompt_text,
                                                            stopping_word(*st, infos[i], out), false));
                }
                st->ex->respond(json_response(200, bodies.size() == 1 ? std::move(bodies[0]) : std::move(bodies)));
            } else if (st->api == api_family::anthropic) {
                const specdec::request_result & out = *fs[0].result;
                const parsed_answer a = infos[0].answer != nullptr ? *infos[0].answer : parsed_answer{out.output.text, {}, {}};
                const anthropic_stop stop = anthropic_stop_of(fs[0], a, st->stop_sequences, pieces_of(infos[0], out.output.tokens));
                st->ex->respond(json_response(200, anthropic_message_body(infos[0], fs[0], a, stop)));
            } else if (st->api == api_family::responses) {
                const specdec::request_result & out = *fs[0].result;
                const parsed_answer a = infos[0].answer != nullptr ? *infos[0].answer : parsed_answer{out.output.text, {}, {}};
                const size_t n_reasoning = responses_reasoning_tokens(a, token_pieces(infos[0], out.output.tokens), st->chat.reasoning_end);
                st->ex->respond(json_response(200, responses_body(infos[0], st->response.echo, st->response.encrypted_reasoning, fs[0],
                                                                  responses_items_of(a), n_reasoning)));
            } else {
                nlohmann::json body = fs.size() == 1 ? response_body(infos[0], fs[0]) : response_body(infos, fs, st->n);
                if (st->verbose) {
                    const specdec::request_result & out = *fs[0].result;
                    body["__verbose"] = native_completion_body(st->native, infos[0], fs[0], out.output.text, st->choices[0].prompt_text,
                                                               stopping_word(*st, infos[0], out), false);
                }
                st->ex->respond(json_response(200, body));
            }
        }
    } catch (const api_error & e) {
        st->finished = true;
        st->ex->respond(error_response(e, st->api));
    } catch (const std::exception & e) {
        st->finished = true;
        if (st->begun) {
            st->cancel_all(*svc.sched); // their finished events give the place back
            if (svc.log) {
                svc.log("a stream failed: " + std::string(e.what()));
            }
            st->ex->stream_end(); // without [DONE]: the stream cannot carry a status any more
        } else {
            st->ex->respond(error_response(internal_error(e.what()), st->api));
        }
    }
}

// Under st.m: a stream's head, once: server-sent events, not cached, not
// buffered by proxies; its probe is an SSE comment, which clients skip.
static void begin_sse(completion_state & st) {
    st.begun = true;
    http_response head;
    head.content_type = "text/event-stream";
    head.set("Cache-Control", "no-cache");
    head.set("X-Accel-Buffering", "no");
    st.ex->stream_begin(std::move(head), ":\n\n");
}

// Under st.m: the stream's head at admission, then a chunk per release of
// each choice (its index in it), each choice's last chunk as it finishes,
// then the usage (include_usage) and the end once every choice finished.
// A choice cancelled or failed ends the stream with its error, and the
// others are cancelled.
void api_routes::impl::stream_out(completion_state & st) {
    if (!st.begun) {
        begin_sse(st);
    }
    bool all_done = true;
    for (completion_choice & ch : st.choices) {
        if (!ch.done && !write_choice(st, ch)) {
            all_done = false;
        }
        if (st.finished) {
            return;
        }
    }
    if (!all_done) {
        return;
    }
    st.finished = true;
    std::string tail;
    if (st.info.include_usage) {
        std::vector<finished_request> fs;
        for (const completion_choice & ch : st.choices) {
            fs.push_back({&ch.c->result(), ch.c->n_prompt()});
        }
        tail += sse_event(usage_chunk_body(st.info, fs, st.n));
    }
    tail += sse_done();
    st.ex->stream_write(std::move(tail));
    st.ex->stream_end();
}

// Under st.m: the chunks of what one choice released; its last one when it
// finished (true). A failed or cancelled choice ends the stream (st.finished).
bool api_routes::impl::write_choice(completion_state & st, completion_choice & ch) {
    request_channel & c = *ch.c;
    const response_info & info = ch.info;
    std::string text = ch.first ? std::move(ch.echo_text) : std::string(); // the prompt's text, which the first chunk carries (echo)
    ch.echo_text.clear();
    specdec::sequence_result lp;
    const bool finished = c.wait_output(0ms, text, info.n_top_logprobs >= 0 ? &lp : nullptr);
    const bool carries = !text.empty() || !lp.tokens.empty();
    const std::shared_ptr<const chat_parser> & parser = st.chat.parser;
    // With tools, what the answer reads as so far; once finished, all of it.
    std::optional<parsed_answer> answer;
    nlohmann::json delta = nlohmann::json::object();
    if (parser != nullptr && (carries || finished)) {
        ch.text += text;
        answer = parser->parse(ch.text, !finished);
        if (answer) {
            delta = answer_delta(ch.sent, *answer, !finished);
        }
    }
    const bool writes = parser != nullptr ? !delta.empty() || !lp.tokens.empty() : carries;
    if (ch.first && (writes || finished) && info.kind != endpoint::completions) {
        st.ex->stream_write(sse_event(role_chunk_body(info))); // a chat stream opens with the role alone
    }
    if (writes) {
        const nlohmann::json logprobs = lp.tokens.empty() ? nlohmann::json() : logprobs_body(info, token_logprobs::of(lp), ch.text_offset);
        st.ex->stream_write(sse_event(parser != nullptr ? delta_chunk_body(info, std::move(delta), logprobs)
                                                        : chunk_body(info, text, logprobs)));
    }
    if (writes || finished) {
        ch.first = false;
    }
    if (!finished) {
        return false;
    }
    ch.done = true;
    const specdec::request_result & out = c.result();
    if (const std::optional<api_error> e = failure_of(out)) {
        st.finished = true;
        st.cancel_all(*svc.sched);
        st.ex->stream_write(sse_event(error_body(*e)) + std::string(sse_done()));
        st.ex->stream_end();
        return true;
    }
    response_info last = info;
    if (answer) {
        for (size_t i = 0; i < answer->tool_calls.size() && i < ch.sent.calls.size(); ++i) {
            answer->tool_calls[i].id = ch.sent.calls[i].id;
        }
        last.answer = &*answer;
    }
    st.ex->stream_write(sse_event(final_chunk_body(last, {&out, c.n_prompt()})));
    return true;
}

// Under st.m: llama-server's native stream: for each prompt (its index in
// every event), an event per release ({content, tokens, stop: false, ...}),
// then its last one (native_completion_body, content "", stop: true), the
// prompts' events interleaved as they come; the stream ends once every
// prompt's last event is written. A failed or cancelled prompt ends it with
// an error event, and the others are cancelled. No [DONE].
void api_routes::impl::stream_native(completion_state & st) {
    if (!st.begun) {
        begin_sse(st);
    }
    bool all_done = true;
    for (completion_choice & ch : st.choices) {
        if (ch.done) {
            continue;
        }
        request_channel & c = *ch.c;
        std::string text;
        specdec::sequence_result lp;
        const bool finished = c.wait_output(0ms, text, &lp);
        ch.text_offset += lp.tokens.size(); // tokens predicted so far
        if (!text.empty() || (st.native.return_tokens && !lp.tokens.empty())) {
            st.ex->stream_write(sse_event(native_chunk_body(st.native, ch.info, text, lp, ch.text_offset, c.n_prompt())));
        }
        if (!finished) {
            all_done = false;
            continue;
        }
        ch.done = true;
        const specdec::request_result & out = c.result();
        if (const std::optional<api_error> e = failure_of(out)) {
            st.finished = true;
            st.cancel_all(*svc.sched);
            st.ex->stream_write(sse_event(error_body(*e)));
            st.ex->stream_end();
            return;
        }
        st.ex->stream_write(sse_event(native_completion_body(st.native, ch.info, {&out, c.n_prompt()}, "", ch.prompt_text,
                                                             stopping_word(st, ch.info, out), true)));
    }
    if (all_done) {
        st.finished = true;
        st.ex->stream_end();
    }
}

// The API-specific parts of a stream of typed events (Anthropic's, the
// Responses API's), each writing its events: at admission; for what the
// answer read so far (`partial`: more may come) adds; at the end, with the
// whole answer; on a failure once begun.
struct typed_stream {
    std::function<std::string()> start;
    std::function<std::string(const parsed_answer &, bool partial)> events;
    std::function<std::string(const parsed_answer &, const finished_request &)> end;
    std::function<std::string(const api_error &)> failure;
};

// Under st.m: `format`'s start at admission, its events of what each
// release adds to the answer, then its end (or its failure). These APIs'
// answers have one choice.
static void stream_typed(completion_state & st, const typed_stream & format) {
    completion_choice & ch = st.choices.front();
    request_channel & c = *ch.c;
    if (!st.begun) {
        begin_sse(st);
        st.ex->stream_write(format.start());
    }
    std::string text;
    const bool finished = c.wait_output(0ms, text);
    ch.text += text;
    // Without a parser (no tools, no reasoning), the text is the content.
    std::optional<parsed_answer> answer =
        st.chat.parser != nullptr ? st.chat.parser->parse(ch.text, !finished) : parsed_answer{ch.text, {}, {}};
    if (answer && (!text.empty() || finished)) {
        if (std::string events = format.events(*answer, !finished); !events.empty()) {
            st.ex->stream_write(std::move(events));
        }
    }
    if (!finished) {
        return;
    }
    st.finished = true;
    const specdec::request_result & out = c.result();
    if (const std::optional<api_error> e = failure_of(out)) {
        st.ex->stream_write(format.failure(*e));
    } else {
        st.ex->stream_write(format.end(answer ? *answer : parsed_answer{}, {&out, c.n_prompt()}));
    }
    st.ex->stream_end();
}

// Under st.m: Anthropic's stream (serve-anthropic.h): message_start, content
// blocks, message_delta and message_stop; an error event on a failure.
void api_routes::impl::stream_anthropic(completion_state & st) {
    const completion_choice & ch = st.choices.front();
    const response_info & info = ch.info;
    stream_typed(st, {[&] { return anthropic_stream_start(info, ch.c->n_prompt()); },
                      [&](const parsed_answer & a, bool partial) { return anthropic_stream_events(st.events, a, partial); },
                      [&](const parsed_answer & a, const finished_request & f) {
                          const anthropic_stop stop = anthropic_stop_of(f, a, st.stop_sequences, pieces_of(info, f.result->output.tokens));
                          return anthropic_stream_end(st.events, info, f, stop);
                      },
                      [](const api_error & e) { return typed_sse_event(anthropic_error_body(e)); }});
}

// Under st.m: the Responses API's stream (serve-responses.h):
// response.created and response.in_progress, the items' events, then
// response.completed or response.incomplete; response.failed on a failure.
void api_routes::impl::stream_responses(completion_state & st) {
    const response_info & info = st.choices.front().info;
    stream_typed(st, {[&] { return responses_stream_start(st.response, info); },
                      [&](const parsed_answer & a, bool partial) { return responses_stream_events(st.response, a, partial); },
                      [&](const parsed_answer & a, const finished_request & f) {
                          const size_t n_reasoning =
                              responses_reasoning_tokens(a, token_pieces(info, f.result->output.tokens), st.chat.reasoning_end);
                          return responses_stream_end(st.response, info, f, n_reasoning);
                      },
                      [&](const api_error & e) { return responses_stream_failure(st.response, info, e); }});
}

api_routes::api_routes(service & svc, const route_options & options) : impl_(std::make_unique<impl>(svc, options)) {}

api_routes::~api_routes() = default;

http_handlers api_routes::handlers() {
    impl * p = impl_.get();
    http_handlers h;
    h.on_headers = [p](const http_request & req, std::shared_ptr<void> & hold) { return p->on_headers(req, hold); };
    h.on_request = [p](const std::shared_ptr<http_exchange> & ex, std::shared_ptr<void> hold) { p->on_request(ex, std::move(hold)); };
    h.on_failure = [p](http_failure f, const http_request & req) { return p->on_failure(f, req); };
    h.decorate = [p](const http_request & req, http_response & res) { p->decorate(req, res); };
    if (p->svc.log) {
        h.on_answered = [p](const http_request & req, int status) { p->svc.log(req.method + " " + req.path + " " + std::to_string(status)); };
    }
    return h;
}

void api_routes::begin_shutdown() {
    impl_->shutting_down.store(true);
}

} // namespace cli::serve
