// What a request asks to change in the target's logits before each token is
// chosen: logit biases, presence / frequency / repeat penalties over the
// tokens it generated, a grammar, and a reasoning budget (which forces the
// end of a thinking block once its tokens are spent). Applied at every row where a token is
// chosen (a prompt's last row, every verification row), after the tokens
// emitted before that row and only those were accepted, so a speculative
// request chooses what plain decoding with the same request would.
#pragma once

#include "grammar-memo.h"
#include "specdec/specdec.h"

#include "llama-cpp.h"

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct llama_vocab;
struct llama_grammar;
struct llama_grammar_element;

namespace specdec::detail {

class logit_shaper {
public:
    // Whether `p` asks for any shaping at all.
    static bool needed(const specdec_generate_params & p);
    // Throws error(INVALID_ARGUMENT) for values out of range, a biased token
    // outside the vocabulary, or a grammar given with no vocabulary. (The
    // grammar itself is parsed once, by the constructor.)
    static void validate(const specdec_generate_params & p, const llama_vocab * vocab, int32_t n_vocab);

    // Copies what it needs of `p` (validated). vocab: for the grammar.
    // memo: the tokens grammar states allow, for every request on this
    // vocabulary (borrowed; it must outlive the shaper). Throws
    // error(INVALID_ARGUMENT) when the grammar or a trigger does not parse,
    // or the grammar refuses its prefix.
    logit_shaper(const specdec_generate_params & p, const llama_vocab * vocab, int32_t n_vocab, grammar_memo & memo);
    logit_shaper(const logit_shaper &) = delete;
    logit_shaper & operator=(const logit_shaper &) = delete;

    // The shaped copy of n_vocab logits, valid until the next call. Throws
    // error(INVALID_ARGUMENT) when the grammar allows no token here, or when
    // a lazy grammar's trigger started it on text it refuses.
    const float * apply(const float * logits);
    // A greedy choice without masking the whole vocabulary, in two steps.
    // shape() applies the biases and penalties and returns those logits
    // (throws as apply() when a lazy grammar was left). allows(t): whether
    // the grammar takes token t next (true without a grammar). A grammar
    // decides each token alone, so when it allows the favourite of shape()'s
    // logits, that is also the favourite of apply()'s. When it does not,
    // best_allowed() gives apply()'s favourite (the highest logit, the lowest
    // id among equal ones) by asking the grammar about the best-ranked
    // tokens first, 64, then eight times as many at each round, instead of
    // about all of them (throws as apply()). shape()'s logits must hold no
    // NaN (the greedy choice from them, which comes first, refuses one).
    const float * shape(const float * logits);
    bool          allows(llama_token t);
    llama_token   best_allowed();
    // `token` was emitted (chosen from the last apply()).
    void accept(llama_token token);

    // Frees llama.cpp's grammar matcher.
    struct grammar_deleter {
        void operator()(llama_grammar * g) const;
    };

private:
    bool grammar_applies() const;
    // Applies the grammar to shape()'s logits over the whole vocabulary,
    // with the tokens the grammar's state allows as the memo has them (asked
    // of llama.cpp over the whole vocabulary when no request met the state
    // before). Output that follows a grammar meets the same states again and
    // again: within a string, a number, between items, request after request.
    const float * mask();
    // The grammar's state as the memo's key (see the .cpp).
    std::string state_key() const;

    std::vector<specdec_logit_bias> bias_;
    float                           presence_;
    float                           frequency_;
    float                           repeat_;
    int32_t                         repeat_last_n_;
    int32_t                         n_vocab_;
    std::unique_ptr<llama_grammar, grammar_deleter> grammar_; // lazy when the request has grammar triggers
    std::string                     grammar_text_;      // the grammar, as the memo's keys begin
    std::vector<std::pair<const llama_grammar_element *, uint32_t>> rule_starts_; // each rule's first element, by address
    grammar_memo *                  memo_;
    bool                            lazy_ = false;      // the grammar waits for a trigger
    llama_sampler_ptr               budget_;            // llama.cpp's reasoning budget, with both markers
    bool                            left_grammar_ = false; // a trigger started it on text it refuses
    std::map<llama_token, int32_t>  counts_;  // generated tokens and how often
    std::deque<llama_token>         recent_;  // the last repeat_last_n generated
    std::map<llama_token, int32_t>  recent_counts_; // and how often each is among them
    std::vector<float>              shaped_;
    std::vector<llama_token_data>   candidates_; // for the grammar and the reasoning budget's forcing
    std::vector<llama_token>        ranked_;     // best_allowed()'s order of the vocabulary
};

} // namespace specdec::detail
