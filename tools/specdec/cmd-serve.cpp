#include "cmd-serve.h"

#include "serve-chat.h"
#include "serve-http.h"
#include "serve-metrics.h"
#include "serve-openai.h"
#include "serve-routes.h"
#include "serve-scheduler.h"
#include "serve-token-counts.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include <pthread.h>

namespace cli {

namespace {

// What is wrong with a --chat-template-kwargs value ("" when nothing):
// it must be a JSON object, and its enable_thinking a boolean.
std::string template_kwargs_error(const std::string & text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return "expected a JSON object of template variables";
    }
    if (j.contains("enable_thinking") && !j["enable_thinking"].is_boolean()) {
        return "enable_thinking must be true or false";
    }
    return "";
}

// The names of a comma-separated list, stripped of blanks (empty names
// skipped), as llama-server reads --alias, --tags and --host; `sorted`:
// sorted and without repeats (llama-server keeps aliases and tags in a set).
std::vector<std::string> comma_list(const std::string & text, bool sorted = true) {
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string name; std::getline(in, name, ',');) {
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t") + 1);
        if (!name.empty()) {
            out.push_back(name);
        }
    }
    if (sorted) {
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
    }
    return out;
}

// The server's chat defaults from its options (validated by the parser).
serve::chat_options chat_defaults(const serve_options & o) {
    serve::chat_options c;
    c.reasoning = serve::reasoning_format_from_name(o.reasoning_format).value_or(serve::reasoning_format::automatic);
    if (!o.chat_template_kwargs.empty()) {
        const nlohmann::json kwargs = nlohmann::json::parse(o.chat_template_kwargs);
        for (const auto & [name, value] : kwargs.items()) {
            c.template_kwargs[name] = value.dump();
        }
    }
    if (const auto it = c.template_kwargs.find("enable_thinking"); it != c.template_kwargs.end()) {
        c.enable_thinking = it->second == "true";
    }
    c.reasoning_budget = o.reasoning_budget;
    c.reasoning_budget_message = o.reasoning_budget_message;
    c.prefill_assistant = o.prefill_assistant;
    return c;
}

} // namespace

void add_serve_command(CLI::App & app, serve_options & o) {
    CLI::App * cmd = app.add_subcommand("serve", "serve the model over HTTP (OpenAI-compatible), speculatively unless --spec none");
    add_decoder_options(cmd, o.decoder);
    cmd->add_option("--parallel", o.n_parallel, "-np: requests decoded together (sequence slots)")
        ->check(CLI::Range(1u, static_cast<unsigned>(SPECDEC_MAX_SEQ)))
        ->capture_default_str();
    cmd->add_option("--max-waiting", o.max_waiting, "requests that may wait for a slot; beyond: 503 with Retry-After")
        ->check(CLI::Range(1u, 1u << 16))
        ->capture_default_str();
    cmd->add_option("--host", o.host, "the address to listen on; several, comma-separated (e.g. 127.0.0.1,::1), each on --port")
        ->capture_default_str();
    cmd->add_option("--port", o.port, "port to listen on (0: a free one, printed)")->check(CLI::Range(0, 65535))->capture_default_str();
    cmd->add_option("--api-key", o.api_keys,
                    "require this key as Authorization: Bearer KEY or X-Api-Key: KEY (every route but /health); repeatable: any of them");
    cmd->add_option("--api-key-file", o.api_key_file,
                    "API keys from a file, one a line (blank lines and # comments skipped), besides --api-key: not visible in ps")
        ->check(CLI::ExistingFile);
    cmd->add_option("--allowed-host", o.allowed_hosts,
                    "on a loopback --host, a Host header name served besides localhost, 127.0.0.1 and [::1] (others: 403, "
                    "against DNS rebinding); repeatable");
    cmd->add_option("--alias", o.alias,
                    "the model's names, comma-separated: the id /v1/models shows is the first in sorted order, and with "
                    "--strict-model a request may name any (default: the file name without .gguf)");
    cmd->add_option("--tags", o.tags, "informational tags of the model, comma-separated, in /v1/models");
    cmd->add_flag("--strict-model", o.strict_model,
                  "a request whose `model` names another model than the alias gets 404 (default: any name is served, as "
                  "llama-server does)");
    cmd->add_option("-s,--seed", o.seed,
                    "the sampling seed of a request that names none (choice i of a request takes seed + i); -1: a random one "
                    "per request")
        ->check(CLI::Range(int64_t(-1), int64_t(UINT32_MAX)))
        ->capture_default_str();
    cmd->add_option("--shutdown-timeout", o.shutdown_timeout, "seconds requests in flight may take after SIGINT/SIGTERM")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str();
    cmd->add_option("--timeout", o.write_timeout,
                    "-to: seconds a client may leave its answer unread before it is taken as gone (its request cancelled); "
                    "a stream it does not read meanwhile is paused, and gives its slot to a waiting request")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    cmd->add_option("--max-body", o.max_body, "largest request body in bytes (beyond: 413)")
        ->check(CLI::Range(size_t(1024), size_t(1) << 30))
        ->capture_default_str();
    cmd->add_option("--max-body-memory", o.body_budget,
                    "bytes of request bodies read and parsed at once, all connections together (beyond: 503 before a body is read)")
        ->check(CLI::Range(size_t(1024), size_t(1) << 34))
        ->capture_default_str();
    cmd->add_option("--max-connections", o.max_connections,
                    "connections open at once (beyond: new ones wait to be accepted); 0: the descriptor limit less 64")
        ->check(CLI::Range(size_t(0), size_t(1) << 24))
        ->capture_default_str();
    cmd->add_option("--accept", o.accept, std::string(accept_help) + "; a request may name its own (speculative_accept)")
        ->check(CLI::IsMember({"exact", "rejection"}))
        ->capture_default_str();
    cmd->add_option("--prefill-chunk", o.n_prefill_chunk, "prompt tokens decoded per request per step (0: whole prompts)")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    cmd->add_flag("!--no-prompt-reuse", o.reuse_prompts,
                  "decode every prompt whole (default: a request reuses the longest prefix of its prompt that a free "
                  "slot holds from earlier requests, as llama-server's prompt cache)");
    cmd->add_option("--cache-ram", o.cache_ram_mib,
                    "-cram: MiB of host memory for the prompt cache: when a prompt takes a slot and keeps less than half of what "
                    "it held, what it held is saved there, and that conversation's next turn is loaded back instead of decoded "
                    "(-1: no limit; 0: no cache; as llama-server's)")
        ->check(CLI::Range(int64_t(-1), int64_t(1) << 40))
        ->capture_default_str();
    cmd->add_flag("--slots,!--no-slots", o.slots_endpoint, "GET /slots: what each slot is doing (default: on, as llama-server)");
    cmd->add_option("--reasoning-format", o.reasoning_format,
                    "thinking models: none leaves the reasoning in content; auto and deepseek return it as reasoning_content "
                    "(also in stream deltas); deepseek-legacy as reasoning_content, and in content while streaming. A request "
                    "may name its own (reasoning_format)")
        ->check(CLI::IsMember({"none", "auto", "deepseek", "deepseek-legacy"}))
        ->capture_default_str();
    cmd->add_option("--chat-template-kwargs", o.chat_template_kwargs,
                    "a JSON object of extra chat template variables, e.g. '{\"enable_thinking\": false}'; a request's "
                    "chat_template_kwargs override them name by name")
        ->check(CLI::Validator([](const std::string & v) { return template_kwargs_error(v); }, "JSON"));
    auto * tmpl = cmd->add_option("--chat-template", o.chat_template,
                                  "a Jinja chat template used instead of the model's, or the name of one of llama.cpp's built-in "
                                  "templates (llama3, command-r, ...: messages only, as llama-server renders them)");
    cmd->add_option("--chat-template-file", o.chat_template_file, "the same, read from a file")
        ->check(CLI::ExistingFile)
        ->excludes(tmpl);
    cmd->add_flag_function("--jinja", [](int64_t) {},
                           "accepted as llama-server takes it: chat templates are always rendered by llama.cpp's Jinja engine");
    cmd->add_option("--reasoning-budget", o.reasoning_budget,
                    "tokens a thinking model's answer may spend in its reasoning before the end of it is forced (-1: no "
                    "limit, 0: none); a request may set its own (reasoning_budget_tokens)")
        ->check(CLI::Range(-1, std::numeric_limits<int32_t>::max()))
        ->capture_default_str();
    cmd->add_option("--reasoning-budget-message", o.reasoning_budget_message,
                    "text forced before the end of the reasoning when its budget is spent");
    cmd->add_flag("--prefill-assistant,!--no-prefill-assistant", o.prefill_assistant,
                  "a conversation that ends with an assistant message has that message continued, not a new turn opened "
                  "(default: on, as llama-server); a request's continue_final_message decides for itself");
    cmd->add_option("--slot-save-path", o.slot_save_path,
                    "a folder (created if absent) for slot files: POST /slots/{id}?action=save|restore|erase saves what a slot "
                    "holds to a file there, restores it, or erases the slot (as llama-server)");
    auto * cert = cmd->add_option("--ssl-cert-file", o.ssl_cert_file, "serve HTTPS: the TLS certificate chain, PEM (with --ssl-key-file)")
                      ->check(CLI::ExistingFile);
    auto * key = cmd->add_option("--ssl-key-file", o.ssl_key_file, "the TLS certificate's private key, PEM (with --ssl-cert-file)")
                     ->check(CLI::ExistingFile);
    cert->needs(key);
    key->needs(cert);
    cmd->add_option("--draft-vocab-counts", o.draft_vocab_counts,
                    "a file of how often the server generated each token (read at start, created if absent, written as it "
                    "goes and at exit): the restricted draft vocabulary (--draft-vocab) is re-ranked by it as the counts grow");
    cmd->add_option("--log-file", o.log_file,
                    "also append every line of the log (the server's, and llama.cpp's at the -v level) to this file");
    cmd->add_option("--cors-origin", o.cors_origins,
                    "a web page origin (http[s]://host[:port]) whose pages may call the server from a browser; repeatable; * allows "
                    "any. Other requests with an Origin header get 403 unless it is the server's own address")
        ->check(CLI::Validator(
            [](const std::string & v) {
                return serve::normalize_origin(v).empty() ? std::string("expected *, null or http[s]://host[:port] (no path)") : std::string();
            },
            "ORIGIN"));
}

namespace {

void log_line(const std::string & s) {
    log_text(("specdec serve: " + s + "\n").c_str());
}

// The most bytes of prompt text n_ctx positions can hold, for byte-level BPE
// vocabularies (every byte is covered, so a token never stands for more text
// than its own piece): n_ctx x the longest piece. 0 (no bound) for the
// others, whose unknown-text token can stand for any length.
size_t max_prompt_bytes(const llama_model * model, uint32_t n_ctx) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    if (llama_vocab_type(vocab) != LLAMA_VOCAB_TYPE_BPE) {
        return 0;
    }
    size_t longest = 1;
    for (llama_token t = 0; t < llama_vocab_n_tokens(vocab); ++t) {
        longest = std::max(longest, specdec::token_to_piece(vocab, t).size());
    }
    return longest * n_ctx;
}

// The keys of --api-key and of --api-key-file.
std::vector<std::string> api_keys(const serve_options & o) {
    std::vector<std::string> keys = o.api_keys;
    if (!o.api_key_file.empty()) {
        std::ifstream in(o.api_key_file);
        std::stringstream text;
        text << in.rdbuf();
        if (!in) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "cannot read --api-key-file " + o.api_key_file);
        }
        const std::vector<std::string> from_file = serve::parse_api_keys(text.str());
        if (from_file.empty()) {
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--api-key-file " + o.api_key_file + " holds no key");
        }
        keys.insert(keys.end(), from_file.begin(), from_file.end());
    }
    if (std::any_of(keys.begin(), keys.end(), [](const std::string & k) { return k.empty(); })) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "an empty --api-key");
    }
    return keys;
}

// --draft-vocab-counts' file, checked before the model is loaded; null
// without the option.
std::unique_ptr<serve::token_counts> token_counts_of(const serve_options & o) {
    if (o.draft_vocab_counts.empty()) {
        return nullptr;
    }
    if (o.decoder.draft_vocab.size == "0") {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT,
                             "--draft-vocab-counts ranks a restricted draft vocabulary: give --draft-vocab N or auto too");
    }
    if (!o.decoder.draft_vocab.file.empty()) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT,
                             "--draft-vocab-counts and --draft-vocab-file both rank the draft vocabulary: give one");
    }
    specdec_model_info info{};
    if (const specdec_status st = specdec_inspect(o.decoder.model.c_str(), &info); st != SPECDEC_STATUS_OK) {
        throw specdec::error(st, o.decoder.model + ": " + specdec_last_error());
    }
    return std::make_unique<serve::token_counts>(o.draft_vocab_counts, info.n_vocab);
}

} // namespace

int run_serve(const serve_options & o) {
    if (!o.log_file.empty()) {
        set_log_file(o.log_file);
    }
    // SIGINT and SIGTERM go to one thread that waits for them (blocked in
    // every other thread, which inherit the mask from here).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR1); // how run() ending by itself wakes the watcher below
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    // Connections are descriptors: the soft limit (often 1024) up to the hard one.
    serve::raise_fd_limit();
    const std::vector<std::string> keys = api_keys(o);

    std::unique_ptr<serve::token_counts> counts = token_counts_of(o);
    decoder d = load_decoder(o.decoder, o.n_parallel);
    serve::chat_formatter chat(d.target_model.get(), o.chat_template_file.empty() ? o.chat_template : read_file(o.chat_template_file));
    serve::metrics stats;

    specdec::engine_params ep = specdec_engine_default_params();
    ep.n_seq = o.n_parallel;
    ep.max_waiting = o.max_waiting;
    ep.n_prefill_chunk = o.n_prefill_chunk;
    ep.reuse_prompts = o.reuse_prompts;
    ep.prompt_cache_bytes = o.cache_ram_mib < 0 ? UINT64_MAX : static_cast<uint64_t>(o.cache_ram_mib) << 20;
    serve::engine_hooks hooks;
    if (counts) {
        const auto rank = [&o, &counts, session = d.session.get()](bool force) {
            try {
                const std::string line = counts->rank(session, force);
                if (!line.empty() && o.verbosity >= 1) {
                    log_line(line);
                }
            } catch (const std::exception & e) {
                log_line(std::string("draft vocabulary counts: ") + e.what());
            }
        };
        rank(true); // the file's counts, before the first request
        hooks.finished = [&counts](std::span<const llama_token> tokens) { counts->add(tokens); };
        hooks.between_steps = [rank] { rank(false); };
    }
    serve::scheduler sched(d.session.get(), d.target.get(), ep, stats, o.verbosity >= 1 ? log_line : std::function<void(const std::string &)>(),
                           hooks);

    serve::service svc;
    svc.model = d.target_model.get();
    svc.chat = &chat;
    svc.chat_defaults = chat_defaults(o);
    svc.sched = &sched;
    svc.stats = &stats;
    svc.model_aliases = comma_list(o.alias);
    svc.model_tags = comma_list(o.tags);
    svc.model_id = svc.model_aliases.empty() ? std::filesystem::path(o.decoder.model).stem().string() : svc.model_aliases.front();
    svc.strict_model = o.strict_model;
    svc.seed = o.seed < 0 ? std::nullopt : std::optional<uint32_t>(static_cast<uint32_t>(o.seed));
    svc.model_path = o.decoder.model;
    svc.n_slots = o.n_parallel;
    svc.slots_endpoint = o.slots_endpoint;
    if (!o.slot_save_path.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(o.slot_save_path, ec);
        if (!std::filesystem::is_directory(o.slot_save_path)) {
            throw specdec::error(SPECDEC_STATUS_IO_ERROR, "--slot-save-path " + o.slot_save_path + " is not a folder that can be created");
        }
        svc.slot_save_path = o.slot_save_path.back() == '/' ? o.slot_save_path : o.slot_save_path + "/";
    }
    svc.verbose_answers = o.verbosity >= 2;
    svc.strategy = d.strategy_name();
    svc.n_ctx = static_cast<int32_t>(o.decoder.n_ctx);
    svc.n_batch = static_cast<int32_t>(llama_n_batch(d.target.get()));
    svc.max_prompt_bytes = max_prompt_bytes(d.target_model.get(), o.decoder.n_ctx);
    svc.n_draft = d.n_draft;
    svc.accept = accept_mode_of(o.accept);
    if (o.verbosity >= 1) {
        svc.log = log_line; // a line per request, and the reason of each 500
    }

    const std::vector<std::string> hosts = comma_list(o.host, false);
    if (hosts.empty()) {
        throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "--host names no address");
    }
    serve::route_options ro;
    ro.hosts = hosts;
    ro.api_keys = keys;
    ro.allowed_hosts = o.allowed_hosts;
    ro.max_body = o.max_body;
    ro.max_completions = static_cast<size_t>(o.n_parallel) + o.max_waiting;
    for (const std::string & origin : o.cors_origins) {
        ro.cors_origins.push_back(serve::normalize_origin(origin));
    }
    serve::api_routes routes(svc, ro);

    serve::http_options ho;
    ho.hosts = hosts;
    ho.port = o.port;
    ho.max_connections = o.max_connections;
    ho.max_body = o.max_body;
    ho.body_budget = o.body_budget;
    ho.write_timeout_s = o.write_timeout;
    ho.tls_cert_file = o.ssl_cert_file;
    ho.tls_key_file = o.ssl_key_file;
    serve::http_server http(routes.handlers(), ho);
    const int port = http.bind();

    // The first SIGINT or SIGTERM drains: new requests get 503 while the
    // ones in flight finish (until --shutdown-timeout, then cancelled), and
    // the process exits 0. A second one during the drain exits at once,
    // with 128 + its number (130 for SIGINT, 143 for SIGTERM), as a shell
    // reports a process a signal ended; requests in flight get no answer.
    std::thread watcher([&] {
        std::thread drain;
        for (;;) {
            int sig = 0;
            sigwait(&signals, &sig);
            if (sig == SIGUSR1) {
                break; // run() ended
            }
            const char * name = sig == SIGINT ? "SIGINT" : "SIGTERM";
            if (drain.joinable()) {
                log_line(std::string(name) + " again: exiting now (exit " + std::to_string(128 + sig) + "), " +
                         std::to_string(sched.n_in_flight()) + " requests unfinished");
                std::_Exit(128 + sig);
            }
            char drain_line[160];
            std::snprintf(drain_line, sizeof(drain_line), "%s: finishing %zu requests in flight (at most %.0f s; %s again exits now)",
                          name, sched.n_in_flight(), o.shutdown_timeout, name);
            log_line(drain_line);
            drain = std::thread([&] {
                // The listening socket stays open until the requests in flight
                // are answered (new ones get 503), because stop() cuts every connection.
                routes.begin_shutdown();
                const auto deadline = std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_timeout * 1000.0));
                const size_t n_cancelled = sched.shutdown(deadline);
                if (n_cancelled > 0) {
                    log_line("cancelled " + std::to_string(n_cancelled) + " requests at the deadline");
                }
                http.wait_idle(std::chrono::seconds(5)); // their last chunks are written
                http.stop();
            });
        }
        if (drain.joinable()) {
            drain.join();
        }
    });
    std::string where;
    for (const std::string & h : hosts) {
        const std::string scheme = o.ssl_cert_file.empty() ? "http://" : "https://";
        where += (where.empty() ? "" : " and ") + scheme + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
                 std::to_string(port);
    }
    log_line("listening on " + where + " (model " + svc.model_id + ", " + svc.strategy + ", " + std::to_string(o.n_parallel) +
             " slots of " + std::to_string(o.decoder.n_ctx) + " positions)");
    std::thread server([&] {
        http.run();
        sched.shutdown(std::chrono::milliseconds(0)); // ends sched.run() below, if the drain has not
        pthread_kill(watcher.native_handle(), SIGUSR1); // pending until the watcher's next sigwait
    });
    // The engine decodes on this thread, which loaded the model and ran the
    // warm-up decode: llama.cpp's OpenMP build keeps a thread team for each
    // thread that computes a graph, and a second team (the engine on a thread
    // of its own) gave libgomp more threads than cores where -t equals their
    // number; it then spins only briefly at each barrier before sleeping:
    // about 400 sleeps and wake-ups per token, which made plain decoding on 2
    // cores 48 ms a token instead of 30.
    sched.run();
    server.join();
    watcher.join();
    if (counts) {
        try {
            counts->save();
        } catch (const specdec::error & e) {
            log_line(e.what());
        }
    }
    log_line("stopped");
    return exit_ok;
}

} // namespace cli
