#include "serve-http.h"

#include "cli-common.h"
#include "json-text.h"
#include "serve-openai.h"

#include "httplib.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <condition_variable>
#include <mutex>
#include <random>
#include <utility>

namespace cli::serve {

namespace {

using namespace std::chrono_literals;

// How long a provider waits for text before it checks that the client is still there.
constexpr auto poll_interval = 100ms;

void send_error(httplib::Response & res, const api_error & e) {
    res.status = e.status();
    if (e.status() == 503) {
        res.set_header("Retry-After", "1");
    }
    res.set_content(json_text(error_body(e), -1), "application/json");
}

api_error unavailable(const std::string & message, const std::string & code) {
    return api_error(503, "unavailable_error", message, "", code);
}

api_error server_error(const std::string & message) {
    return api_error(500, "server_error", message, "", "internal_error");
}

// Compares without an early exit, so the time taken does not tell how much of the key matched.
bool same_secret(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
    }
    return diff == 0;
}

// Answers a request the scheduler refused (before it ran).
api_error rejection(const request_channel & c) {
    switch (c.status()) {
        case SPECDEC_STATUS_QUEUE_FULL:
            return unavailable("the server is busy: every slot is taken and the waiting queue is full; retry later", "queue_full");
        case SPECDEC_STATUS_CONTEXT_FULL:
        case SPECDEC_STATUS_PROMPT_TOO_LONG:
            return invalid_request(c.message(), "prompt", "context_length_exceeded");
        case SPECDEC_STATUS_INVALID_ARGUMENT:
            return invalid_request(c.message());
        default:
            return server_error(c.message());
    }
}

} // namespace

// Completions being answered: entered when a handler starts, left when its
// response (for a stream: its last chunk) is out.
class in_flight {
public:
    void enter() {
        std::lock_guard<std::mutex> lock(m_);
        ++n_;
    }
    void leave() {
        std::lock_guard<std::mutex> lock(m_);
        if (--n_ == 0) {
            cv_.notify_all();
        }
    }
    bool wait_idle(std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(m_);
        return cv_.wait_for(lock, timeout, [this] { return n_ == 0; });
    }

private:
    std::mutex              m_;
    std::condition_variable cv_;
    size_t                  n_ = 0;
};

// Leaves at scope end unless released (a stream hands its place to the provider).
class flight_guard {
public:
    explicit flight_guard(in_flight & f) : f_(&f) { f_->enter(); }
    ~flight_guard() {
        if (f_ != nullptr) {
            f_->leave();
        }
    }
    flight_guard(const flight_guard &) = delete;
    flight_guard & operator=(const flight_guard &) = delete;
    in_flight * release() { return std::exchange(f_, nullptr); }

private:
    in_flight * f_;
};

struct http_server::impl {
    impl(service & s, const http_options & o) : svc(s), opt(o) {}

    service &             svc;
    http_options          opt;
    httplib::Server       server;
    std::atomic<bool>     shutting_down{false};
    in_flight             flights;
    std::atomic<uint64_t> next_id{1};
    const int64_t         started = static_cast<int64_t>(std::time(nullptr));
    std::mutex            seed_m;
    std::mt19937          seeds{std::random_device{}()};

    uint32_t random_seed() {
        std::lock_guard<std::mutex> lock(seed_m);
        return static_cast<uint32_t>(seeds());
    }

    void routes();
    void completion(endpoint kind, const httplib::Request & req, httplib::Response & res);
    void stream(const std::shared_ptr<request_channel> & c, const response_info & info, httplib::Response & res,
                flight_guard & guard);
};

http_server::http_server(service & svc, const http_options & options) : impl_(std::make_unique<impl>(svc, options)) {
    impl_->routes();
}

http_server::~http_server() = default;

int http_server::bind() {
    httplib::Server & s = impl_->server;
    const int port = impl_->opt.port == 0 ? s.bind_to_any_port(impl_->opt.host)
                                          : (s.bind_to_port(impl_->opt.host, impl_->opt.port) ? impl_->opt.port : -1);
    if (port <= 0) {
        throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot listen on " + impl_->opt.host + ":" + std::to_string(impl_->opt.port) +
                                                          " (in use, or not an address of this machine)");
    }
    return port;
}

void http_server::run() {
    impl_->server.listen_after_bind();
}

void http_server::begin_shutdown() {
    impl_->shutting_down.store(true);
}

bool http_server::wait_idle(std::chrono::milliseconds timeout) {
    return impl_->flights.wait_idle(timeout);
}

void http_server::stop() {
    impl_->server.stop();
}

void http_server::impl::routes() {
    const size_t n = std::max<size_t>(opt.n_threads, 1);
    server.new_task_queue = [n] { return new httplib::ThreadPool(n, n * 4); };
    server.set_payload_max_length(opt.max_body);
    // SO_REUSEADDR only: httplib's default, SO_REUSEPORT, would let a second
    // server bind the same port and take half of the connections.
    server.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    server.set_keep_alive_timeout(5);

    server.set_pre_routing_handler([this](const httplib::Request & req, httplib::Response & res) {
        if (opt.api_key.empty() || req.path == "/health") {
            return httplib::Server::HandlerResponse::Unhandled;
        }
        const std::string auth = req.get_header_value("Authorization");
        const std::string prefix = "Bearer ";
        if (auth.compare(0, prefix.size(), prefix) == 0 && same_secret(auth.substr(prefix.size()), opt.api_key)) {
            return httplib::Server::HandlerResponse::Unhandled;
        }
        send_error(res, api_error(401, "authentication_error",
                                  auth.empty() ? "an API key is required: send Authorization: Bearer KEY" : "the API key is not valid",
                                  "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
    });
    // Statuses httplib sets by itself (no route, body over the limit, bad framing) get an OpenAI body too.
    server.set_error_handler([](const httplib::Request &, httplib::Response & res) {
        if (!res.body.empty()) {
            return;
        }
        if (res.status == 413) {
            send_error(res, api_error(413, "invalid_request_error", "the request body is larger than this server takes", "",
                                      "payload_too_large"));
        } else if (res.status == 404) {
            send_error(res, api_error(404, "invalid_request_error", "no such route", "", "not_found"));
        } else {
            send_error(res, api_error(res.status, res.status >= 500 ? "server_error" : "invalid_request_error",
                                      httplib::status_message(res.status), "", ""));
        }
    });
    server.set_exception_handler([](const httplib::Request &, httplib::Response & res, std::exception_ptr ep) {
        std::string what = "unexpected failure";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, server_error(what));
    });
    if (svc.verbosity >= 1) {
        server.set_logger([](const httplib::Request & req, const httplib::Response & res) {
            std::fprintf(stderr, "specdec serve: %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
        });
    }

    server.Get("/health", [this](const httplib::Request &, httplib::Response & res) {
        if (shutting_down.load()) {
            res.status = 503;
            res.set_content(R"({"status":"shutting down"})", "application/json");
            return;
        }
        res.set_content(R"({"status":"ok"})", "application/json");
    });
    server.Get("/v1/models", [this](const httplib::Request &, httplib::Response & res) {
        const nlohmann::json j = {
            {"object", "list"},
            {"data", nlohmann::json::array({{{"id", svc.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "specdec"}}})},
        };
        res.set_content(json_text(j, -1), "application/json");
    });
    server.Get("/metrics", [this](const httplib::Request &, httplib::Response & res) {
        res.set_content(svc.stats->render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    server.Post("/v1/completions", [this](const httplib::Request & req, httplib::Response & res) {
        completion(endpoint::completions, req, res);
    });
    server.Post("/v1/chat/completions", [this](const httplib::Request & req, httplib::Response & res) {
        completion(endpoint::chat, req, res);
    });
}

void http_server::impl::completion(endpoint kind, const httplib::Request & req, httplib::Response & res) {
    flight_guard guard(flights);
    try {
        if (shutting_down.load()) {
            svc.stats->add_rejected();
            throw unavailable("the server is shutting down", "shutting_down");
        }
        request_limits limits;
        limits.model_id = svc.model_id;
        limits.n_ctx = svc.n_ctx;
        const parsed_request r = parse_request(kind, req.body, limits);

        std::string text = r.prompt;
        if (kind == endpoint::chat) {
            try {
                text = svc.chat->apply(r.messages);
            } catch (const std::exception & e) {
                throw invalid_request(e.what(), "messages");
            }
        }
        std::vector<llama_token> prompt;
        try {
            prompt = tokenize(svc.model, text, kind == endpoint::chat); // templates spell special tokens as text
        } catch (const std::exception & e) { // llama.cpp throws through llama_tokenize (a byte its vocabulary lacks)
            throw invalid_request(std::string("the model's vocabulary cannot tokenize this text (llama.cpp: ") + e.what() + ")",
                                  kind == endpoint::chat ? "messages" : "prompt");
        }
        if (prompt.empty()) {
            throw invalid_request("the prompt is empty (it has no tokens)", "prompt");
        }
        if (prompt.size() >= static_cast<size_t>(svc.n_ctx)) {
            throw invalid_request("the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                                      std::to_string(svc.n_ctx) + " per request (-c), so at most " +
                                      std::to_string(svc.n_ctx - 1) + " leave room for one token",
                                  kind == endpoint::chat ? "messages" : "prompt", "context_length_exceeded");
        }
        auto c = std::make_shared<request_channel>(std::move(prompt), to_engine_params(r, svc.n_ctx, random_seed(), svc.n_draft),
                                                   r.stop);
        if (!svc.sched->submit(c)) {
            svc.stats->add_rejected();
            throw unavailable("the server is shutting down", "shutting_down");
        }
        while (c->wait_admission(1s) == request_channel::state::pending) {
        }
        if (c->wait_admission(0ms) == request_channel::state::rejected) {
            throw rejection(*c);
        }
        response_info info;
        info.kind = kind;
        info.id = (kind == endpoint::completions ? "cmpl-" : "chatcmpl-") + std::to_string(next_id.fetch_add(1));
        info.created = static_cast<int64_t>(std::time(nullptr));
        info.model = svc.model_id;
        info.strategy = svc.strategy;
        if (r.stream) {
            stream(c, info, res, guard);
            return;
        }
        std::string ignored;
        bool cancelled = false;
        while (!c->wait_output(poll_interval, ignored)) {
            ignored.clear();
            if (!cancelled && req.is_connection_closed()) {
                svc.sched->cancel(c); // the client went away; its finished event follows
                cancelled = true;
            }
        }
        const specdec::request_result & out = c->result();
        if (out.output.stop == SPECDEC_STOP_CANCELLED) {
            throw unavailable("the request was cancelled: the server is shutting down", "shutting_down");
        }
        if (out.output.stop == SPECDEC_STOP_ERROR) {
            throw server_error("generation failed (run the server with -v for the reason)");
        }
        res.set_content(json_text(response_body(info, {&out, c->n_prompt()}), -1), "application/json");
    } catch (const api_error & e) {
        send_error(res, e);
    } catch (const specdec::error & e) {
        send_error(res, e.kind() == SPECDEC_STATUS_KIND_CONFIGURATION ? invalid_request(e.what()) : server_error(e.what()));
    } catch (const std::exception & e) {
        send_error(res, server_error(e.what()));
    }
}

void http_server::impl::stream(const std::shared_ptr<request_channel> & c, const response_info & info, httplib::Response & res,
                               flight_guard & guard) {
    struct state {
        bool first = true;
        bool done = false;
    };
    auto st = std::make_shared<state>();
    scheduler * sched = svc.sched;
    in_flight * flight = guard.release(); // left by the releaser, which httplib calls once the stream ends
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [c, info, st, sched](size_t, httplib::DataSink & sink) {
            try {
                std::string text;
                const bool finished = c->wait_output(poll_interval, text);
                if (!text.empty()) {
                    const std::string ev = sse_event(chunk_body(info, text, st->first));
                    st->first = false;
                    if (!sink.write(ev.data(), ev.size())) {
                        sched->cancel(c); // the client went away
                        return false;
                    }
                } else if (!finished && !sink.is_writable()) {
                    sched->cancel(c);
                    return false;
                }
                if (!finished) {
                    return true;
                }
                const specdec::request_result & out = c->result();
                std::string tail;
                if (out.output.stop == SPECDEC_STOP_CANCELLED || out.output.stop == SPECDEC_STOP_ERROR) {
                    const api_error e = out.output.stop == SPECDEC_STOP_CANCELLED
                                            ? unavailable("the request was cancelled: the server is shutting down", "shutting_down")
                                            : server_error("generation failed (run the server with -v for the reason)");
                    tail = sse_event(error_body(e));
                } else {
                    tail = sse_event(final_chunk_body(info, {&out, c->n_prompt()}));
                }
                tail += sse_done();
                st->done = true;
                if (!sink.write(tail.data(), tail.size())) {
                    return false;
                }
                sink.done();
                return true;
            } catch (...) {
                sched->cancel(c);
                return false; // closes the connection: the stream cannot carry a status any more
            }
        },
        [c, st, sched, flight](bool success) {
            if (!success || !st->done) {
                sched->cancel(c); // a finished request is left alone
            }
            flight->leave();
        });
}

} // namespace cli::serve
