#include "serve-chat.h"

#include "chat.h" // llama.cpp common

#include <mutex>
#include <stdexcept>

namespace cli::serve {

struct chat_formatter::impl {
    common_chat_templates_ptr templates;
    bool                      from_model = false;
    mutable std::mutex        m; // rendering is not documented as thread-safe upstream
};

chat_formatter::chat_formatter(const llama_model * model) : impl_(std::make_unique<impl>()) {
    try {
        impl_->templates = common_chat_templates_init(model, "");
    } catch (const std::exception & e) {
        throw std::runtime_error(std::string("the model's chat template cannot be parsed: ") + e.what());
    }
    if (!impl_->templates) {
        throw std::runtime_error("llama.cpp could not load the model's chat template");
    }
    impl_->from_model = common_chat_templates_was_explicit(impl_->templates.get());
}

chat_formatter::~chat_formatter() = default;

bool chat_formatter::from_model() const {
    return impl_->from_model;
}

std::string chat_formatter::apply(const std::vector<chat_message> & messages) const {
    common_chat_templates_inputs in;
    in.use_jinja = true;
    in.add_generation_prompt = true;
    in.force_pure_content = true; // the prompt only: no tool-call or reasoning parser is built
    for (const auto & m : messages) {
        common_chat_msg msg;
        msg.role = m.role;
        msg.content = m.content;
        in.messages.push_back(std::move(msg));
    }
    std::lock_guard<std::mutex> lock(impl_->m);
    try {
        return common_chat_templates_apply(impl_->templates.get(), in).prompt;
    } catch (const std::exception & e) {
        throw std::runtime_error(std::string("the chat template failed on these messages: ") + e.what());
    }
}

} // namespace cli::serve
