// `specdec serve`'s input on arbitrary bytes, as a request reaches it: the
// request's line and headers framed (parse_head, content_length), its body
// parsed by the route its path names (parse_request: every JSON field, with
// the depth and size bounds), the chat options it asks for, its JSON schema
// turned into a grammar, and every grammar checked against the bounds that
// keep llama.cpp's recursive parser off deep input. Each refusal is an
// api_error or a specdec::error; anything else (a crash, a sanitizer report,
// another exception) is a failure. No model is loaded.
#include "grammar-limits.h"
#include "serve-grammar.h"
#include "serve-http.h"
#include "serve-openai.h"

#include <string>
#include <string_view>

namespace {

void check_grammar(const std::string & gbnf) {
    try {
        specdec::detail::check_grammar_limits(gbnf);
    } catch (const specdec::error &) {
        // refused: a 400 on the server
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    using namespace cli::serve;
    const std::string_view bytes(reinterpret_cast<const char *>(data), size);
    const size_t end = bytes.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        return 0;
    }
    http_request req;
    if (!parse_head(bytes.substr(0, end), req)) {
        return 0;
    }
    const std::optional<size_t> n = content_length(req);
    if (!n) {
        return 0;
    }
    const std::string_view body = bytes.substr(end + 4, *n);
    const endpoint kind = req.path.find("chat") != std::string::npos ? endpoint::chat : endpoint::completions;
    request_limits limits;
    limits.model_id = "fuzz";
    limits.n_ctx = 4096;
    limits.n_slots = 4; // n up to 4 choices
    try {
        parsed_request r = parse_request(kind, body, limits);
        chat_options server;
        const chat_options options = chat_options_for(r, server);
        static_cast<void>(options);
        if (!r.grammar.empty()) {
            check_grammar(r.grammar);
        }
        if (r.json_schema) {
            try {
                check_grammar(json_schema_grammar(*r.json_schema));
            } catch (const std::exception &) {
                // the converter refused the schema: a 400
            }
        }
    } catch (const api_error &) {
        // refused: a 4xx
    }
    return 0;
}
