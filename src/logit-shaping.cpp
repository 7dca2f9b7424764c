#include "logit-shaping.h"

#include "error.h"
#include "grammar-limits.h"

#include "llama-grammar.h"    // llama.cpp src: the matcher its grammar sampler holds
#include "reasoning-budget.h" // llama.cpp common

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace specdec::detail {

namespace {

bool is_set(const char * text) {
    return text != nullptr && text[0] != '\0';
}

bool has_grammar(const specdec_generate_params & p) {
    return is_set(p.grammar);
}

bool has_reasoning(const specdec_generate_params & p) {
    return is_set(p.reasoning_start) && is_set(p.reasoning_end);
}

// The tokens of text the output is to match (a generation prompt, a
// marker), as llama.cpp's common sampler reads a generation prompt: special
// tokens parsed, less a leading space the tokenizer may add that the text
// does not have.
std::vector<llama_token> text_tokens(const llama_vocab * vocab, std::string_view text) {
    std::vector<llama_token> tokens = specdec::tokenize(vocab, text, false, true);
    if (!tokens.empty() && !text.empty() && !std::isspace(static_cast<unsigned char>(text[0]))) {
        const std::string piece = specdec::token_to_piece(vocab, tokens[0]);
        if (!piece.empty() && std::isspace(static_cast<unsigned char>(piece[0]))) {
            tokens.erase(tokens.begin());
        }
    }
    return tokens;
}

// llama.cpp's reasoning budget over `p`'s markers (as its common sampler
// builds one: no limit is INT_MAX), having read reasoning_prefix.
llama_sampler * make_budget(const llama_vocab * vocab, const specdec_generate_params & p) {
    const std::vector<llama_token> start = text_tokens(vocab, p.reasoning_start);
    const std::vector<llama_token> end = text_tokens(vocab, p.reasoning_end);
    std::vector<llama_token> forced = end;
    if (is_set(p.reasoning_budget_message)) {
        const std::vector<llama_token> message = text_tokens(vocab, p.reasoning_budget_message);
        forced.insert(forced.begin(), message.begin(), message.end());
    }
    llama_sampler_ptr budget(common_reasoning_budget_init(vocab, {start}, {end}, forced,
                                                          p.reasoning_budget < 0 ? INT_MAX : p.reasoning_budget));
    if (!budget) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not make the reasoning budget");
    }
    if (is_set(p.reasoning_prefix)) {
        for (const llama_token t : text_tokens(vocab, p.reasoning_prefix)) {
            llama_sampler_accept(budget.get(), t);
        }
    }
    return budget.release();
}

// The grammar of `p`, lazy when it has triggers, having read its prefix:
// what llama.cpp's grammar samplers hold (llama_sampler_init_grammar and
// ..._lazy_patterns make it with the same call).
llama_grammar * parse_grammar(const llama_vocab * vocab, const specdec_generate_params & p) {
    llama_grammar * g = nullptr;
    try { // llama.cpp reports a grammar it cannot parse with null, and some faults by throwing
        g = llama_grammar_init_impl(vocab, p.grammar, "root", p.n_grammar_triggers > 0, const_cast<const char **>(p.grammar_triggers),
                                    p.n_grammar_triggers, nullptr, 0);
    } catch (const std::exception & e) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar is not valid GBNF: ", e.what());
    }
    if (g == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar is not valid GBNF with a rule 'root', or a trigger is not a valid "
             "regular expression (llama.cpp could not parse them)");
    }
    std::unique_ptr<llama_grammar, logit_shaper::grammar_deleter> grammar(g);
    if (is_set(p.grammar_prefix)) {
        const std::vector<llama_token> prefix = text_tokens(vocab, p.grammar_prefix); // UNREPRESENTABLE_TEXT as it is
        try {
            for (const llama_token t : prefix) {
                llama_grammar_accept_impl(*grammar, t);
            }
        } catch (const std::exception & e) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar does not accept its prefix: ", e.what());
        }
    }
    return grammar.release();
}

} // namespace

void logit_shaper::grammar_deleter::operator()(llama_grammar * g) const {
    llama_grammar_free_impl(g);
}

bool logit_shaper::needed(const specdec_generate_params & p) {
    return p.n_logit_bias > 0 || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.repeat_penalty != 1.0f ||
           has_grammar(p) || has_reasoning(p);
}

void logit_shaper::validate(const specdec_generate_params & p, const llama_vocab * vocab, int32_t n_vocab) {
    if (p.n_logit_bias > 0 && p.logit_bias == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "logit_bias must not be NULL when n_logit_bias > 0");
    }
    for (size_t i = 0; i < p.n_logit_bias; ++i) {
        const specdec_logit_bias & b = p.logit_bias[i];
        if (b.token < 0 || b.token >= n_vocab) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "logit_bias ", i, " names token ", b.token, ", outside the vocabulary [0, ", n_vocab, ")");
        }
        if (std::isnan(b.bias) || b.bias == INFINITY) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "logit_bias ", i, " is ", b.bias, "; it must be finite or -infinity");
        }
    }
    for (const auto & [name, v] : {std::pair{"presence_penalty", p.presence_penalty}, std::pair{"frequency_penalty", p.frequency_penalty}}) {
        if (!(v >= -2.0f && v <= 2.0f)) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, name, " is ", v, "; it must be within [-2, 2]");
        }
    }
    if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "repeat_penalty is ", p.repeat_penalty, "; it must be positive and finite (1: off)");
    }
    if (p.repeat_last_n < 0) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "repeat_last_n is ", p.repeat_last_n, "; it must be >= 0");
    }
    if (has_grammar(p) && vocab == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "a grammar needs the target's vocabulary");
    }
    if (has_grammar(p)) {
        check_grammar_limits(p.grammar);
    }
    const bool prefixed = is_set(p.grammar_prefix);
    if ((p.n_grammar_triggers > 0 || prefixed) && !has_grammar(p)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "grammar triggers and a grammar prefix need a grammar");
    }
    if (p.n_grammar_triggers > 0 && prefixed) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "a lazy grammar (with triggers) reads no prefix");
    }
    for (size_t i = 0; i < p.n_grammar_triggers; ++i) {
        if (p.grammar_triggers == nullptr || p.grammar_triggers[i] == nullptr || p.grammar_triggers[i][0] == '\0') {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "grammar trigger ", i, " is missing or empty");
        }
    }
    if (p.reasoning_budget < -1) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "reasoning_budget is ", p.reasoning_budget, "; it must be >= 0, or -1 (no limit)");
    }
    if (is_set(p.reasoning_start) != is_set(p.reasoning_end)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "reasoning_start and reasoning_end go together (a block needs both markers)");
    }
    if (!has_reasoning(p) && (p.reasoning_budget >= 0 || is_set(p.reasoning_budget_message) || is_set(p.reasoning_prefix))) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "a reasoning budget, its message and reasoning_prefix need reasoning_start and reasoning_end");
    }
    if (has_reasoning(p) && vocab == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "reasoning markers need the target's vocabulary");
    }
}

logit_shaper::logit_shaper(const specdec_generate_params & p, const llama_vocab * vocab, int32_t n_vocab, grammar_memo & memo)
    : bias_(p.logit_bias, p.logit_bias + p.n_logit_bias), presence_(p.presence_penalty), frequency_(p.frequency_penalty),
      repeat_(p.repeat_penalty), repeat_last_n_(p.repeat_last_n), n_vocab_(n_vocab), memo_(&memo), shaped_(static_cast<size_t>(n_vocab)) {
    if (has_grammar(p)) {
        grammar_.reset(parse_grammar(vocab, p));
        lazy_ = p.n_grammar_triggers > 0;
        candidates_.resize(static_cast<size_t>(n_vocab));
        grammar_text_.assign(p.grammar);
        grammar_text_.push_back('\0');
        for (size_t r = 0; r < grammar_->rules.size(); ++r) {
            rule_starts_.emplace_back(grammar_->rules[r].data(), static_cast<uint32_t>(r));
        }
        std::sort(rule_starts_.begin(), rule_starts_.end(),
                  [](const auto & x, const auto & y) { return std::less<const llama_grammar_element *>()(x.first, y.first); });
    }
    if (has_reasoning(p)) {
        candidates_.resize(static_cast<size_t>(n_vocab));
        budget_.reset(make_budget(vocab, p));
    }
}

// As llama.cpp's common sampler: a lazy grammar does not apply inside a reasoning block.
bool logit_shaper::grammar_applies() const {
    if (grammar_ == nullptr) {
        return false;
    }
    if (budget_ == nullptr || !lazy_) {
        return true;
    }
    const common_reasoning_budget_state st = common_reasoning_budget_get_state(budget_.get());
    return st == REASONING_BUDGET_IDLE || st == REASONING_BUDGET_DONE;
}

const float * logit_shaper::shape(const float * logits) {
    if (left_grammar_) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the output left the grammar where its trigger started it");
    }
    std::copy(logits, logits + n_vocab_, shaped_.begin());
    for (const specdec_logit_bias & b : bias_) {
        shaped_[static_cast<size_t>(b.token)] += b.bias;
    }
    for (const auto & [t, n] : counts_) {
        shaped_[static_cast<size_t>(t)] -= presence_ + frequency_ * static_cast<float>(n);
    }
    for (const auto & [t, n] : recent_counts_) { // once per token, as llama.cpp's penalties sampler
        float & l = shaped_[static_cast<size_t>(t)];
        l = l > 0.0f ? l / repeat_ : l * repeat_;
    }
    if (budget_ != nullptr && common_reasoning_budget_get_state(budget_.get()) == REASONING_BUDGET_FORCING) {
        // Every token but the forced one: -infinity (the sampler's own apply, over the whole vocabulary).
        for (llama_token t = 0; t < n_vocab_; ++t) {
            candidates_[static_cast<size_t>(t)] = {t, shaped_[static_cast<size_t>(t)], 0.0f};
        }
        llama_token_data_array arr = {candidates_.data(), candidates_.size(), -1, false};
        llama_sampler_apply(budget_.get(), &arr);
        for (size_t i = 0; i < arr.size; ++i) {
            shaped_[static_cast<size_t>(arr.data[i].id)] = arr.data[i].logit;
        }
    }
    return shaped_.data();
}

bool logit_shaper::allows(llama_token t) {
    if (!grammar_applies()) {
        return true;
    }
    llama_token_data one = {t, shaped_[static_cast<size_t>(t)], 0.0f};
    llama_token_data_array arr = {&one, 1, -1, false};
    llama_grammar_apply_impl(*grammar_, &arr);
    return one.logit != -INFINITY;
}

const float * logit_shaper::mask() {
    if (!grammar_applies()) {
        return shaped_.data();
    }
    bool any = false;
    if (grammar_->awaiting_trigger) { // a lazy grammar before its trigger allows every token
        any = std::any_of(shaped_.begin(), shaped_.end(), [](float l) { return l != -INFINITY; });
    } else {
        const std::shared_ptr<const grammar_memo::tokens> allowed = memo_->allowed(state_key(), [this] {
            for (llama_token t = 0; t < n_vocab_; ++t) {
                candidates_[static_cast<size_t>(t)] = {t, 0.0f, 0.0f};
            }
            llama_token_data_array arr = {candidates_.data(), candidates_.size(), -1, false};
            llama_grammar_apply_impl(*grammar_, &arr);
            grammar_memo::tokens out(static_cast<size_t>(n_vocab_));
            for (size_t i = 0; i < arr.size; ++i) {
                out[static_cast<size_t>(arr.data[i].id)] = arr.data[i].logit != -INFINITY;
            }
            return out;
        });
        for (size_t t = 0; t < shaped_.size(); ++t) {
            shaped_[t] = (*allowed)[t] ? shaped_[t] : -INFINITY;
            any = any || shaped_[t] != -INFINITY;
        }
    }
    if (!any) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar allows no token here");
    }
    return shaped_.data();
}

// What decides which tokens llama.cpp's matcher allows (llama_grammar_apply_impl),
// written so that two requests with the same grammar write the same key:
// the grammar's text (its rules), its stacks of positions in the rules (each
// as the rule's index and the offset in it, not as an address, which is the
// request's own), and the UTF-8 character it has read part of (its bits so
// far count only while bytes of it remain: after a whole character they hold
// that character, which nothing reads). The vocabulary is the memo's.
std::string logit_shaper::state_key() const {
    std::string key = grammar_text_;
    const auto put = [&key](const auto & x) { key.append(reinterpret_cast<const char *>(&x), sizeof x); };
    const llama_partial_utf8 partial = grammar_->partial_utf8;
    put(partial.n_remain);
    put(partial.n_remain > 0 ? partial.value : 0u);
    const std::less<const llama_grammar_element *> before;
    for (const llama_grammar_stack & stack : grammar_->stacks) {
        put(stack.size());
        for (const llama_grammar_element * e : stack) {
            const auto in = std::prev(std::upper_bound(rule_starts_.begin(), rule_starts_.end(), e,
                                                       [&](const llama_grammar_element * x, const auto & r) { return before(x, r.first); }));
            put(in->second);
            put(static_cast<uint32_t>(e - in->first));
        }
    }
    return key;
}

llama_token logit_shaper::best_allowed() {
    constexpr size_t first_round = 64;
    constexpr size_t growth = 8;
    // apply()'s favourite first: the higher logit, then the lower id.
    const auto ahead = [this](llama_token a, llama_token b) {
        const float x = shaped_[static_cast<size_t>(a)];
        const float y = shaped_[static_cast<size_t>(b)];
        return x > y || (x == y && a < b);
    };
    if (!grammar_applies()) {
        return static_cast<llama_token>(std::max_element(shaped_.begin(), shaped_.end()) - shaped_.begin());
    }
    ranked_.resize(static_cast<size_t>(n_vocab_));
    std::iota(ranked_.begin(), ranked_.end(), 0);
    for (size_t done = 0, round = first_round; done < ranked_.size(); done += round, round *= growth) {
        // Tokens [done, end) of the ranking, in any order: each ranks ahead
        // of every token after them, so the best one the grammar allows
        // among them is the best it allows at all.
        const size_t end = std::min(ranked_.size(), done + round);
        if (end < ranked_.size()) {
            std::nth_element(ranked_.begin() + static_cast<std::ptrdiff_t>(done), ranked_.begin() + static_cast<std::ptrdiff_t>(end),
                             ranked_.end(), ahead);
        }
        bool finite = false; // a token of this round has a finite logit: when none has, no later one has
        for (size_t i = done; i < end; ++i) {
            const llama_token t = ranked_[i];
            candidates_[i - done] = {t, shaped_[static_cast<size_t>(t)], 0.0f};
            finite = finite || shaped_[static_cast<size_t>(t)] != -INFINITY;
        }
        if (!finite) {
            break; // every token left has logit -infinity, as apply() would leave it
        }
        llama_token_data_array arr = {candidates_.data(), end - done, -1, false};
        llama_grammar_apply_impl(*grammar_, &arr);
        llama_token best = LLAMA_TOKEN_NULL;
        for (size_t i = 0; i < arr.size; ++i) {
            if (arr.data[i].logit != -INFINITY && (best == LLAMA_TOKEN_NULL || ahead(arr.data[i].id, best))) {
                best = arr.data[i].id;
            }
        }
        if (best != LLAMA_TOKEN_NULL) {
            return best;
        }
    }
    fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the grammar allows no token here");
}

const float * logit_shaper::apply(const float * logits) {
    shape(logits);
    return mask();
}

void logit_shaper::accept(llama_token token) {
    if (presence_ != 0.0f || frequency_ != 0.0f) {
        counts_[token]++;
    }
    if (repeat_ != 1.0f && repeat_last_n_ > 0) {
        recent_.push_back(token);
        recent_counts_[token]++;
        if (recent_.size() > static_cast<size_t>(repeat_last_n_)) {
            if (--recent_counts_[recent_.front()] == 0) {
                recent_counts_.erase(recent_.front());
            }
            recent_.pop_front();
        }
    }
    const bool to_grammar = grammar_applies(); // decided before the budget reads the token, as llama.cpp does
    if (budget_ != nullptr) {
        llama_sampler_accept(budget_.get(), token);
    }
    if (to_grammar && !left_grammar_) {
        try { // a lazy grammar reads the text of a trigger's token, which was chosen before it applied
            llama_grammar_accept_impl(*grammar_, token);
        } catch (const std::exception &) {
            left_grammar_ = true; // the next apply() ends the request
        }
    }
}

} // namespace specdec::detail
