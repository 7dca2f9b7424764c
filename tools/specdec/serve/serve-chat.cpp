#include "serve-chat.h"

#include "chat.h" // llama.cpp common

#include <algorithm>
#include <mutex>
#include <span>
#include <stdexcept>

namespace cli::serve {

struct chat_parser::impl {
    common_chat_parser_params params;
    // A continued message's own text, which the format's generation prompt
    // holds and every parse therefore begins with: taken off each answer.
    common_chat_msg continued;
};

chat_parser::chat_parser(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

chat_parser::~chat_parser() = default;

std::optional<parsed_answer> chat_parser::parse(const std::string & text, bool partial) const {
    common_chat_msg msg;
    try {
        msg = common_chat_parse(text, partial, impl_->params);
    } catch (const std::exception &) {
        if (partial) {
            return std::nullopt; // nothing it reads yet
        }
        try { // cut short (the budget ended it), or a call the grammar did not hold (auto, before its marker)
            msg = common_chat_parse(text, true, impl_->params);
        } catch (const std::exception &) {
            return parsed_answer{text, {}, {}};
        }
    }
    const auto after = [](const std::string & s, const std::string & head) {
        return s.compare(0, head.size(), head) == 0 ? s.substr(head.size()) : s;
    };
    parsed_answer out;
    out.reasoning_content = after(msg.reasoning_content, impl_->continued.reasoning_content);
    out.content = after(msg.content, impl_->continued.content);
    for (const common_chat_tool_call & c : msg.tool_calls) {
        out.tool_calls.push_back({c.id, c.name, c.arguments});
    }
    return out;
}

namespace {

common_reasoning_format to_common(reasoning_format f) {
    switch (f) {
        case reasoning_format::none:            return COMMON_REASONING_FORMAT_NONE;
        case reasoning_format::deepseek:        return COMMON_REASONING_FORMAT_DEEPSEEK;
        case reasoning_format::deepseek_legacy: return COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY;
        case reasoning_format::automatic:
        default:                                return COMMON_REASONING_FORMAT_AUTO;
    }
}

} // namespace

struct chat_formatter::impl {
    common_chat_templates_ptr templates;
    bool                      from_model = false;
    bool                      builtin = false;        // a built-in template named, rendered by llama.cpp's own code
    bool                      parallel_calls = false; // the template shows several calls in one message
    bool                      tool_calls = false;     // the template shows calls at all
    mutable std::mutex        m; // rendering is not documented as thread-safe upstream
};

namespace {

// Whether `name` is one of llama.cpp's built-in templates (llama2, llama3,
// command-r, ...), which it renders without Jinja. "chatml" is not taken as
// one: llama.cpp's chat code gives its Jinja text for it.
bool builtin_template(const std::string & name) {
    std::vector<const char *> names(static_cast<size_t>(llama_chat_builtin_templates(nullptr, 0)));
    llama_chat_builtin_templates(names.data(), names.size());
    return name != "chatml" && std::any_of(names.begin(), names.end(), [&](const char * n) { return name == n; });
}

} // namespace

chat_formatter::chat_formatter(const llama_model * model, const std::string & override_template) : impl_(std::make_unique<impl>()) {
    impl_->builtin = builtin_template(override_template);
    try {
        impl_->templates = common_chat_templates_init(model, override_template);
    } catch (const std::exception & e) {
        throw std::runtime_error(std::string("the model's chat template cannot be parsed: ") + e.what());
    }
    if (!impl_->templates) {
        throw std::runtime_error("llama.cpp could not load the model's chat template");
    }
    impl_->from_model = common_chat_templates_was_explicit(impl_->templates.get());
    const auto caps = common_chat_templates_get_caps(impl_->templates.get());
    impl_->tool_calls = caps.at("supports_tool_calls");
    impl_->parallel_calls = caps.at("supports_parallel_tool_calls");
}

chat_formatter::~chat_formatter() = default;

bool chat_formatter::from_model() const {
    return impl_->from_model;
}

bool chat_formatter::writes_tool_calls() const {
    return impl_->tool_calls && !impl_->builtin;
}

std::string chat_formatter::source() const {
    return common_chat_templates_source(impl_->templates.get());
}

namespace {

common_chat_msg to_common(const chat_message & m) {
    common_chat_msg msg;
    msg.role = m.role;
    if (m.content_parts.empty()) {
        msg.content = m.content;
    }
    for (const std::string & text : m.content_parts) {
        msg.content_parts.push_back({"text", text});
    }
    msg.reasoning_content = m.reasoning_content;
    for (const tool_call & c : m.tool_calls) {
        msg.tool_calls.push_back({c.name, c.arguments, c.id});
    }
    msg.tool_call_id = m.tool_call_id;
    msg.tool_name = m.name;
    return msg;
}

std::vector<common_chat_msg> to_common(std::span<const chat_message> messages) {
    std::vector<common_chat_msg> out;
    for (const chat_message & m : messages) {
        out.push_back(to_common(m));
    }
    return out;
}

common_chat_tool to_common(const tool_function & f) {
    return {f.name, f.description, f.parameters.empty() ? "{}" : f.parameters};
}

// A trigger as the regular expression llama.cpp's lazy grammar sampler takes
// (as its common sampler turns each kind into one).
std::string trigger_pattern(const common_grammar_trigger & t) {
    switch (t.type) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
            return t.value;
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
            if (t.value.empty()) {
                return "^$";
            }
            return (t.value.front() == '^' ? "" : "^") + t.value + (t.value.back() == '$' ? "" : "$");
        }
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN: // its text: the token is what spells it
        default:
            return regex_escape(t.value);
    }
}

// The reader of answers in `format`: its calls when `callable`, its
// reasoning as options ask (deepseek-legacy streams leave it in the content
// too, as llama-server's do); `continued`: the prompt continues a message,
// whose text the answers leave out.
std::shared_ptr<const chat_parser> make_parser(const common_chat_params & format, bool callable, const chat_options & options,
                                               bool continued) {
    auto parser = std::make_unique<chat_parser::impl>();
    parser->params = common_chat_parser_params(format);
    parser->params.parse_tool_calls = callable;
    parser->params.reasoning_format = to_common(options.reasoning);
    parser->params.reasoning_in_content = options.stream && options.reasoning == reasoning_format::deepseek_legacy;
    if (!format.parser.empty()) {
        parser->params.parser.load(format.parser);
    }
    if (continued) {
        try {
            parser->continued = common_chat_parse("", true, parser->params);
        } catch (const std::exception &) {
            // nothing it reads: the answers keep what they read
        }
    }
    return std::make_shared<const chat_parser>(std::move(parser));
}

} // namespace

chat_prompt chat_formatter::apply_builtin(const std::vector<chat_message> & messages, const chat_tools & tools,
                                          const chat_options & options) const {
    if (!tools.functions.empty()) {
        throw std::runtime_error("the chat template is the built-in '" + source() + "', which renders messages only: tools need a "
                                 "Jinja template (--chat-template with its text, or the model's own)");
    }
    const bool continued = options.continue_final != continuation::none;
    common_chat_templates_inputs in;
    in.use_jinja = false;
    in.messages = to_common(std::span<const chat_message>(messages).first(messages.size() - (continued ? 1 : 0)));
    in.add_generation_prompt = options.add_generation_prompt || continued;
    chat_prompt out;
    std::lock_guard<std::mutex> lock(impl_->m);
    try {
        out.prompt = common_chat_templates_apply(impl_->templates.get(), in).prompt;
    } catch (const std::exception & e) {
        throw std::runtime_error(std::string("the chat template failed on these messages: ") + e.what());
    }
    if (continued) { // the assistant's turn opened, and its message's text after it
        out.prompt += to_common(messages.back()).render_content();
    }
    return out;
}

chat_prompt chat_formatter::apply(const std::vector<chat_message> & messages, const chat_tools & tools,
                                  const chat_options & options) const {
    if (impl_->builtin) {
        return apply_builtin(messages, tools, options);
    }
    common_chat_templates_inputs in;
    in.use_jinja = true;
    const bool continued = options.continue_final != continuation::none;
    in.add_generation_prompt = options.add_generation_prompt && !continued;
    in.continue_final_message = options.continue_final == continuation::automatic ? COMMON_CHAT_CONTINUATION_AUTO
                                : options.continue_final == continuation::reasoning ? COMMON_CHAT_CONTINUATION_REASONING
                                : options.continue_final == continuation::content   ? COMMON_CHAT_CONTINUATION_CONTENT
                                                                                     : COMMON_CHAT_CONTINUATION_NONE;
    in.messages = to_common(messages);
    in.reasoning_format = to_common(options.reasoning);
    in.enable_thinking = options.enable_thinking;
    in.chat_template_kwargs = options.template_kwargs;
    const bool callable = !tools.functions.empty() && tools.choice != tool_choice::none;
    const bool reads_reasoning = options.reasoning != reasoning_format::none;
    if (tools.functions.empty() && !reads_reasoning && !continued) {
        // The prompt only: no tool-call or reasoning parser is built (llama.cpp's
        // plain rendering drops a continued message, which the full one writes).
        in.force_pure_content = true;
    }
    for (const tool_function & f : tools.functions) {
        in.tools.push_back(to_common(f));
    }
    in.tool_choice = tools.choice == tool_choice::none       ? COMMON_CHAT_TOOL_CHOICE_NONE
                     : tools.choice == tool_choice::required ? COMMON_CHAT_TOOL_CHOICE_REQUIRED
                                                              : COMMON_CHAT_TOOL_CHOICE_AUTO;
    in.parallel_tool_calls = tools.parallel.value_or(impl_->parallel_calls);
    if (callable && !impl_->tool_calls) {
        throw std::runtime_error("this model's chat template has no tool-call format that llama.cpp recognises, so its "
                                 "tools cannot be called; send 'tool_choice': \"none\" or no tools");
    }

    std::lock_guard<std::mutex> lock(impl_->m);
    common_chat_params shown;  // the prompt: every tool
    common_chat_params format; // what the answer follows: the forced function only, when one is
    try {
        shown = common_chat_templates_apply(impl_->templates.get(), in);
        format = shown;
        if (callable && !tools.forced.empty()) {
            common_chat_templates_inputs only = in;
            only.tools.clear();
            for (const tool_function & f : tools.functions) {
                if (f.name == tools.forced) {
                    only.tools.push_back(to_common(f));
                }
            }
            only.tool_choice = COMMON_CHAT_TOOL_CHOICE_REQUIRED;
            format = common_chat_templates_apply(impl_->templates.get(), only);
        }
    } catch (const std::exception & e) {
        throw std::runtime_error(std::string("the chat template failed on these messages: ") + e.what());
    }
    chat_prompt out;
    out.prompt = shown.prompt;
    if (format.supports_thinking && !format.thinking_start_tag.empty() && !format.thinking_end_tags.empty()) {
        out.reasoning_start = format.thinking_start_tag;
        out.reasoning_end = format.thinking_end_tags.front();
        out.generation_prompt = format.generation_prompt;
    }
    if (tools.functions.empty()) {
        if (reads_reasoning && format.supports_thinking) {
            out.parser = make_parser(format, false, options, continued);
        }
        return out;
    }
    if (tools.choice == tool_choice::required && format.grammar.empty()) {
        throw std::runtime_error("llama.cpp gives no tool-call grammar for this model's chat template, so a call cannot be "
                                 "required; send 'tool_choice': \"auto\"");
    }
    out.grammar = format.grammar;
    if (format.grammar_lazy) {
        for (const common_grammar_trigger & t : format.grammar_triggers) {
            out.grammar_triggers.push_back(trigger_pattern(t));
        }
    } else if (!format.grammar.empty()) {
        out.grammar_prefix = format.generation_prompt;
    }
    out.stops = format.additional_stops;
    out.parser = make_parser(format, callable, options, continued);
    return out;
}

} // namespace cli::serve
