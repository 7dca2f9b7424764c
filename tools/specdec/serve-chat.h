// `specdec serve`, chat messages -> prompt text through the model's own chat
// template (its GGUF `tokenizer.chat_template`), rendered by llama.cpp's
// template engine (common/chat.h of the pinned tree). A model without a
// template gets llama.cpp's fallback, ChatML, as llama-server does.
// Kept apart from the JSON layer: it is the only file that sees llama.cpp's common library.
#pragma once

#include <memory>
#include <string>
#include <vector>

struct llama_model;

namespace cli::serve {

struct chat_message {
    std::string role;    // system, developer, user, assistant or tool
    std::string content; // text
};

class chat_formatter {
public:
    // Reads the template from `model` (borrowed; must outlive this). Throws
    // std::runtime_error when llama.cpp cannot parse it.
    explicit chat_formatter(const llama_model * model);
    ~chat_formatter();
    chat_formatter(const chat_formatter &) = delete;
    chat_formatter & operator=(const chat_formatter &) = delete;

    // Whether the model carries a template (false: the ChatML fallback is used).
    bool from_model() const;
    // The prompt for `messages`, ending with the assistant's turn opened.
    // Thread-safe. Throws std::runtime_error when the template fails on them
    // (the HTTP layer answers 400).
    std::string apply(const std::vector<chat_message> & messages) const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace cli::serve
