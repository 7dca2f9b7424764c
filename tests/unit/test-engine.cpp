// The continuous-batching engine against the scripted backend, no model:
// requests joining mid-run get their solo tokens, per-request parameters,
// cancellation from another thread, the bounded queue, slot reuse, timings,
// chunked prefill beside others' decoding, and failed steps.
#include "engine.h"

#include "fake-backend.h"

#include <gtest/gtest.h>

#include <thread>

namespace specdec::test {
namespace {

using detail::engine_core;
using detail::run_generation;

// Without prompt reuse unless asked: most tests follow each request's own positions.
engine_params slots(uint32_t n_seq, int32_t chunk = 0, uint32_t max_waiting = 8, bool reuse = false) {
    engine_params p = specdec_engine_default_params();
    p.n_seq = n_seq;
    p.n_prefill_chunk = chunk;
    p.max_waiting = max_waiting;
    p.reuse_prompts = reuse;
    return p;
}

// Collects every event of an engine.
struct event_log {
    std::map<request_id, request_result> finished;
    std::map<request_id, std::string>    streamed;
    std::map<request_id, int>            n_tokens; // token events per request
    std::map<request_id, std::vector<llama_seq_id>> slots; // the slot of each event, in order

    event_callback callback() {
        return [this](const engine_event & e) {
            slots[e.id].push_back(e.seq_id);
            if (e.type == SPECDEC_ENGINE_EVENT_FINISHED) {
                EXPECT_FALSE(finished.count(e.id)) << "one finished event per request";
                finished[e.id] = *e.result;
            } else {
                EXPECT_FALSE(finished.count(e.id)) << "no token after the finished event";
                streamed[e.id] += e.piece;
                n_tokens[e.id]++;
            }
            return true;
        };
    }
};

// What the request's prompt gives alone (generate of one prompt; its seed as given).
sequence_result solo(const std::vector<llama_token> & prompt, const request_params & p, int32_t n_draft_max = 4,
                     const std::function<void(llama_token, float *)> & logits = {}) {
    fake_backend plain(n_draft_max, chained_drafter(3));
    if (logits) {
        plain.logits_for = logits;
    }
    return run_generation(plain, {{prompt}}, p, {}).sequences[0];
}

void spread(llama_token t, float * out) {
    for (int x = 0; x < V; ++x) {
        out[x] = static_cast<float>((x * 7 + t * 3) % 11) * 0.3f;
    }
}

request_params sampled(int n_predict, uint32_t seed) {
    request_params p = greedy(n_predict);
    p.temperature = 1.0f;
    p.seed = seed;
    p.ignore_eog = true;
    p.accept = SPECDEC_ACCEPT_EXACT; // seed for seed plain decoding's draws
    return p;
}

TEST(Engine, RequestsJoiningMidRunGetTheirSoloTokens) {
    for (const bool sampling : {false, true}) {
        SCOPED_TRACE(sampling);
        fake_backend spec(4, chained_drafter(3));
        if (sampling) {
            spec.logits_for = spread;
        }
        event_log log;
        engine_core engine(spec, slots(3), log.callback());
        const std::vector<std::vector<llama_token>> prompts = {{1, 2, 3}, {4}, {7, 8, 9, 10, 11}};
        std::vector<request_params> params;
        for (uint32_t i = 0; i < 3; ++i) {
            params.push_back(sampling ? sampled(30, 11 + i) : greedy(30, i == 2 ? SPECDEC_N_DRAFT_AUTO : -1));
        }
        std::vector<request_id> ids;
        ids.push_back(engine.add(prompts[0], params[0]));
        engine.step();
        engine.step();
        ids.push_back(engine.add(prompts[1], params[1]));
        engine.step();
        ids.push_back(engine.add(prompts[2], params[2]));
        while (engine.has_work()) {
            engine.step();
        }
        for (size_t i = 0; i < 3; ++i) {
            const auto ref = solo(prompts[i], params[i], 4, sampling ? spread : std::function<void(llama_token, float *)>{});
            const request_result & r = log.finished.at(ids[i]);
            EXPECT_EQ(r.output.tokens, ref.tokens) << "request " << i;
            EXPECT_EQ(r.output.text, ref.text);
            EXPECT_EQ(log.streamed[ids[i]], r.output.text);
            EXPECT_EQ(r.output.stop, SPECDEC_STOP_BUDGET);
            EXPECT_EQ(log.slots[ids[i]].front(), static_cast<llama_seq_id>(i)) << "the lowest free slot";
        }
        EXPECT_TRUE(spec.pending.empty());
    }
}

TEST(Engine, ParametersArePerRequest) {
    fake_backend spec(4, chained_drafter(2));
    event_log log;
    engine_core engine(spec, slots(3), log.callback());
    const std::vector<const char *> stops = {"kb"};
    request_params a = greedy(7);
    request_params b = greedy(40);
    b.stop_strings = stops.data();
    b.n_stop_strings = stops.size();
    request_params c = sampled(25, 5);
    const request_id ia = engine.add({{1, 2}}, a);
    const request_id ib = engine.add({{1}}, b);
    const request_id ic = engine.add({{3}}, c);
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(ia).output.tokens, solo({1, 2}, a).tokens);
    EXPECT_EQ(log.finished.at(ia).output.tokens.size(), 7u);
    EXPECT_EQ(log.finished.at(ib).output.stop, SPECDEC_STOP_STRING);
    EXPECT_EQ(log.finished.at(ib).output.text, "en");
    EXPECT_EQ(log.finished.at(ic).output.tokens, solo({3}, c).tokens);
    EXPECT_EQ(log.finished.at(ic).output.tokens.size(), 25u);
}

TEST(Engine, CancelFromAnotherThreadStopsAtTheNextStepAndFreesTheSlot) {
    fake_backend spec(4, chained_drafter());
    event_log log;
    engine_core engine(spec, slots(1), log.callback());
    request_params endless = greedy(100000);
    endless.ignore_eog = true;
    const request_id a = engine.add({{1}}, endless);
    const request_id b = engine.add({{2, 3}}, greedy(9));
    engine.step();
    engine.step();
    const int emitted = log.n_tokens[a];
    EXPECT_GT(emitted, 0);
    std::thread other([&] { engine.cancel(a); });
    other.join();
    EXPECT_FALSE(log.finished.count(a)); // nothing happens before the next step
    engine.step();
    ASSERT_TRUE(log.finished.count(a));
    const request_result & ra = log.finished.at(a);
    EXPECT_EQ(ra.output.stop, SPECDEC_STOP_CANCELLED);
    EXPECT_EQ(static_cast<int>(ra.output.tokens.size()), emitted); // kept, nothing more
    EXPECT_EQ(ra.output.tokens, expected(1, emitted));
    EXPECT_EQ(log.n_tokens[b] > 0, true) << "b took the freed slot in the same step";
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(b).output.tokens, solo({2, 3}, greedy(9)).tokens);
    EXPECT_EQ(log.finished.at(b).seq_id, 0);
    // Cancelling a finished request changes nothing; an id never issued is an error.
    EXPECT_NO_THROW(engine.cancel(a));
    engine.step();
    EXPECT_EQ(log.finished.size(), 2u);
    try {
        engine.cancel(b + 1);
        ADD_FAILURE() << "no error";
    } catch (const error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_UNKNOWN_REQUEST);
    }
}

TEST(Engine, APausedRequestHoldsItsSlotEmitsNothingAndResumesWithItsSoloTokens) {
    for (const bool sampling : {false, true}) {
        SCOPED_TRACE(sampling);
        const std::function<void(llama_token, float *)> logits = sampling ? spread : std::function<void(llama_token, float *)>{};
        fake_backend spec(4, chained_drafter(3));
        if (logits) {
            spec.logits_for = logits;
        }
        event_log log;
        engine_core engine(spec, slots(2), log.callback());
        const request_params pa = sampling ? sampled(40, 3) : greedy(40);
        const request_params pb = sampling ? sampled(12, 4) : greedy(12);
        const request_id a = engine.add({{1, 2}}, pa);
        const request_id b = engine.add({{5}}, pb);
        engine.step();
        engine.step();
        const int before = log.n_tokens[a];
        EXPECT_GT(before, 0);
        std::thread other([&] { engine.pause(a, true); });
        other.join();
        EXPECT_TRUE(engine.has_work()) << "the pause waits for a step";
        while (engine.has_work()) {
            engine.step();
        }
        EXPECT_EQ(log.n_tokens[a], before) << "paused: nothing emitted";
        EXPECT_FALSE(log.finished.count(a));
        ASSERT_TRUE(log.finished.count(b)) << "the other request ran to its end";
        EXPECT_EQ(log.finished.at(b).output.tokens, solo({5}, pb, 4, logits).tokens);
        // A request that waits behind the paused one, in the only other slot's place: taken, and run.
        const request_id c = engine.add({{7, 8}}, greedy(6));
        EXPECT_TRUE(engine.has_work());
        while (engine.has_work()) {
            engine.step();
        }
        ASSERT_TRUE(log.finished.count(c));
        EXPECT_EQ(log.finished.at(c).output.tokens, solo({7, 8}, greedy(6), 4, logits).tokens);
        engine.pause(a, false);
        EXPECT_TRUE(engine.has_work());
        while (engine.has_work()) {
            engine.step();
        }
        ASSERT_TRUE(log.finished.count(a));
        EXPECT_EQ(log.finished.at(a).output.tokens, solo({1, 2}, pa, 4, logits).tokens)
            << "its output is what it would have been unpaused";
        EXPECT_EQ(log.streamed[a], log.finished.at(a).output.text);
        // Pausing a finished request changes nothing; an id never issued is an error.
        EXPECT_NO_THROW(engine.pause(a, true));
        engine.step();
        EXPECT_FALSE(engine.has_work());
        try {
            engine.pause(c + 1, true);
            ADD_FAILURE() << "no error";
        } catch (const error & e) {
            EXPECT_EQ(e.code(), SPECDEC_STATUS_UNKNOWN_REQUEST);
        }
    }
}

TEST(Engine, APausedRequestInTheQueueLetsOthersPassAndGoesOnLater) {
    fake_backend spec(4, chained_drafter());
    event_log log;
    engine_core engine(spec, slots(1, 0, 1), log.callback());
    const request_id a = engine.add({{1}}, greedy(5));
    const request_id b = engine.add({{2, 3}}, greedy(7));
    engine.pause(b, true);
    engine.step(); // the pause is applied
    const request_id c = engine.add({{4}}, greedy(3)); // a paused request does not count against max_waiting
    while (engine.has_work()) {
        engine.step();
    }
    ASSERT_TRUE(log.finished.count(a));
    ASSERT_TRUE(log.finished.count(c)) << "c passed b, which is paused";
    EXPECT_FALSE(log.finished.count(b));
    EXPECT_EQ(log.n_tokens[b], 0);
    engine.pause(b, false);
    engine.pause(b, true);
    engine.pause(b, false); // the last one asked wins
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(b).output.tokens, solo({2, 3}, greedy(7)).tokens);
    EXPECT_EQ(log.finished.at(c).output.tokens, solo({4}, greedy(3)).tokens);
    // A paused request is cancelled as any other.
    const request_id d = engine.add({{5}}, greedy(50));
    engine.step();
    engine.pause(d, true);
    engine.step();
    engine.cancel(d);
    EXPECT_TRUE(engine.has_work());
    engine.step();
    ASSERT_TRUE(log.finished.count(d));
    EXPECT_EQ(log.finished.at(d).output.stop, SPECDEC_STOP_CANCELLED);
}

// A paused request gives up its slot to a request that waits for one, then
// reads its prompt and output again and goes on: token for token what it
// would have given unpaused (greedy and seeded sampling, with and without
// prompt reuse, paused before, while and after its prompt is read).
TEST(Engine, APausedRequestGivesItsSlotToAWaitingOneAndResumesExactly) {
    for (const bool sampling : {false, true}) {
        for (const bool reuse : {false, true}) {
            for (const int steps_before : {0, 1, 4}) {
                SCOPED_TRACE(testing::Message() << "sampling " << sampling << " reuse " << reuse << " steps " << steps_before);
                const std::function<void(llama_token, float *)> logits = sampling ? spread : std::function<void(llama_token, float *)>{};
                fake_backend spec(4, chained_drafter(2));
                if (logits) {
                    spec.logits_for = logits;
                }
                event_log log;
                engine_core engine(spec, slots(1, 2, 8, reuse), log.callback());
                const request_params pa = sampling ? sampled(30, 9) : greedy(30);
                const request_params pb = sampling ? sampled(10, 2) : greedy(10);
                const request_id a = engine.add({{1, 2, 3, 4, 5}}, pa);
                for (int i = 0; i < steps_before; ++i) {
                    engine.step();
                }
                engine.pause(a, true);
                const request_id b = engine.add({{6, 7}}, pb);
                while (engine.has_work()) {
                    engine.step();
                }
                ASSERT_TRUE(log.finished.count(b)) << "b took a's slot";
                EXPECT_FALSE(log.finished.count(a));
                EXPECT_EQ(log.finished.at(b).output.tokens, solo({6, 7}, pb, 4, logits).tokens);
                const int before = log.n_tokens[a];
                engine.pause(a, false);
                while (engine.has_work()) {
                    engine.step();
                }
                ASSERT_TRUE(log.finished.count(a));
                const request_result & ra = log.finished.at(a);
                EXPECT_EQ(ra.output.tokens, solo({1, 2, 3, 4, 5}, pa, 4, logits).tokens);
                EXPECT_EQ(log.streamed[a], ra.output.text) << "each token emitted once";
                EXPECT_EQ(log.n_tokens[a], static_cast<int>(ra.output.tokens.size()));
                EXPECT_EQ(before > 0, steps_before == 4) << "1 step: evicted while its prompt is read (2 tokens a step)";
                EXPECT_TRUE(spec.pending.empty());
            }
        }
    }
}

TEST(Engine, ARequestCancelledWhileWaitingNeverRuns) {
    fake_backend spec(4, chained_drafter());
    event_log log;
    engine_core engine(spec, slots(1), log.callback());
    engine.add({{1}}, greedy(5));
    const request_id waiting = engine.add({{2}}, greedy(5));
    engine.cancel(waiting);
    engine.step();
    ASSERT_TRUE(log.finished.count(waiting));
    EXPECT_EQ(log.finished.at(waiting).output.stop, SPECDEC_STOP_CANCELLED);
    EXPECT_EQ(log.finished.at(waiting).seq_id, -1);
    EXPECT_TRUE(log.finished.at(waiting).output.tokens.empty());
}

TEST(Engine, TheQueueRefusesPastItsBound) {
    fake_backend spec(4, chained_drafter());
    event_log log;
    engine_core engine(spec, slots(1, 0, 2), log.callback());
    engine.add({{1}}, greedy(30)); // takes the free slot at the next step
    engine.add({{2}}, greedy(3));
    engine.add({{3}}, greedy(3));
    try {
        engine.add({{4}}, greedy(3));
        ADD_FAILURE() << "no error";
    } catch (const error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_QUEUE_FULL);
        EXPECT_EQ(e.kind(), SPECDEC_STATUS_KIND_LIFECYCLE);
    }
    engine.step(); // the first runs, two wait: still full
    EXPECT_THROW(engine.add({{4}}, greedy(3)), error);
    engine.cancel(1);
    engine.step(); // the first left, the second took the slot: room for one more
    EXPECT_NO_THROW(engine.add({{4}}, greedy(3)));
    // Bad input is refused at once, typed as generate's.
    EXPECT_THROW(engine.add({}, greedy(3)), error);
    EXPECT_THROW(engine.add({{1}}, greedy(-1)), error);
}

TEST(Engine, AsksTheBackendWhetherItsSlotsBatchExactly) {
    // The engine's slots and generate()'s prompts are what decode together:
    // the backend refuses a count its cache cannot batch exactly.
    fake_backend spec(4, chained_drafter(), 4);
    event_log log;
    engine_core engine(spec, slots(3, 0, 2), log.callback());
    EXPECT_EQ(spec.checked_n_seq, 3u);
    const std::vector<std::vector<llama_token>> two = {{1}, {2}};
    run_generation(spec, two, greedy(2), {});
    EXPECT_EQ(spec.checked_n_seq, 2u);
}

// Issue 33: a burst between two steps was counted against max_waiting
// before admission put it into free slots, so four requests for four free
// slots with max_waiting 1 got QUEUE_FULL.
TEST(Engine, ABurstThatFitsTheFreeSlotsIsNeverQueueFull) {
    fake_backend spec(4, chained_drafter(3));
    event_log log;
    engine_core engine(spec, slots(4, 0, 1), log.callback());
    std::vector<request_id> ids;
    for (llama_token t = 1; t <= 5; ++t) { // four free slots, one waiting place
        ASSERT_NO_THROW(ids.push_back(engine.add({{t}}, greedy(40)))) << "request " << t;
    }
    EXPECT_THROW(engine.add({{6}}, greedy(40)), error);
    engine.step(); // four run, one waits
    EXPECT_THROW(engine.add({{6}}, greedy(40)), error);
    while (engine.has_work()) {
        engine.step();
    }
    for (size_t i = 0; i < ids.size(); ++i) {
        EXPECT_EQ(log.finished.at(ids[i]).output.tokens, solo({static_cast<llama_token>(i + 1)}, greedy(40)).tokens);
    }
}

TEST(Engine, ASlotIsReusedAfterARequestFinishes) {
    fake_backend spec(4, chained_drafter(3));
    event_log log;
    engine_core engine(spec, slots(1), log.callback());
    std::vector<request_id> ids;
    const std::vector<std::vector<llama_token>> prompts = {{1, 2, 3}, {4}, {5, 6}};
    for (const auto & p : prompts) {
        ids.push_back(engine.add(p, greedy(11)));
    }
    while (engine.has_work()) {
        engine.step();
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(log.finished.at(ids[i]).seq_id, 0);
        EXPECT_EQ(log.finished.at(ids[i]).output.tokens, solo(prompts[i], greedy(11)).tokens);
    }
    EXPECT_TRUE(spec.kv[0].empty()) << "a finished request's positions leave with it";
}

// Prompt tokens each decode of `spec` carried, from decode `from` on.
int32_t decoded_rows(const fake_backend & spec, size_t from = 0) {
    int32_t n = 0;
    for (size_t i = from; i < spec.batches.size(); ++i) {
        n += spec.batches[i].first;
    }
    return n;
}

// A conversation's second turn: its prompt is the first turn's prompt, its
// answer and more. It takes the slot that holds the first turn, decodes
// only what the slot does not hold, and gets the tokens the whole prompt
// gives alone. A prompt with no common prefix, or one of a tenth of it or
// less (a BOS), takes an empty slot, leaving the conversation's slot alone.
TEST(Engine, APromptReusesTheLongestPrefixAFreeSlotHolds) {
    fake_backend spec(4, chained_drafter(3));
    event_log log;
    engine_core engine(spec, slots(3, 0, 8, true), log.callback());
    const std::vector<llama_token> turn1 = {1, 2, 3, 4, 5};
    const request_id a = engine.add(turn1, greedy(6));
    while (engine.has_work()) {
        engine.step();
    }
    const request_result & first = log.finished.at(a);
    ASSERT_EQ(first.output.tokens.size(), 6u);
    EXPECT_EQ(first.n_prompt_cached, 0u);
    const llama_seq_id slot = first.seq_id;
    const std::vector<llama_token> held = spec.kv[slot];
    ASSERT_GE(held.size(), turn1.size() + 5) << "the finished request's positions stay";

    const request_id other = engine.add(std::vector<llama_token>{9, 9, 9}, greedy(2));
    engine.step();
    EXPECT_NE(log.slots.at(other).front(), slot) << "no common prefix: an empty slot";
    std::vector<llama_token> bos_only_prompt(11, 9);
    bos_only_prompt[0] = 1; // its first token in common: a tenth of it or less
    const request_id bos_only = engine.add(bos_only_prompt, greedy(2));
    engine.step();
    EXPECT_NE(log.slots.at(bos_only).front(), slot) << "its first token in common only: an empty slot, which loses nothing";

    std::vector<llama_token> turn2 = turn1;
    turn2.insert(turn2.end(), first.output.tokens.begin(), first.output.tokens.end());
    turn2.insert(turn2.end(), {7, 8});
    const size_t before = spec.batches.size();
    const request_id b = engine.add(turn2, greedy(8));
    while (engine.has_work()) {
        engine.step();
    }
    const request_result & second = log.finished.at(b);
    EXPECT_EQ(second.seq_id, slot);
    EXPECT_EQ(second.n_prompt_cached, held.size());
    EXPECT_EQ(second.output.tokens, solo(turn2, greedy(8)).tokens);
    // Its prompt's rows: the part the slot did not hold, once (the other
    // request had finished before this one arrived).
    int32_t verify_rows = 0;
    for (size_t i = before; i < spec.batches.size(); ++i) {
        verify_rows += spec.batches[i].second == spec.batches[i].first ? spec.batches[i].first : 0;
    }
    EXPECT_EQ(decoded_rows(spec, before) - verify_rows, static_cast<int32_t>(turn2.size() - held.size()));

    // The same prompt again: all but its last token are reused.
    const request_id c = engine.add(turn2, greedy(8));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(c).seq_id, slot);
    EXPECT_EQ(log.finished.at(c).n_prompt_cached, turn2.size() - 1);
    EXPECT_EQ(log.finished.at(c).output.tokens, second.output.tokens);

    // The first turn again, which the slot holds ahead of far more answer
    // than it has tokens: reused all the same.
    const request_id d = engine.add(turn1, greedy(6));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(d).seq_id, slot);
    EXPECT_EQ(log.finished.at(d).n_prompt_cached, turn1.size() - 1);
    EXPECT_EQ(log.finished.at(d).output.tokens, first.output.tokens);
}

// A memory that cannot be cut back anywhere (recurrent state): a prompt that
// leaves the slot's text inside the last answer restarts from where the last
// prompt ended; one that leaves it inside that prompt, before any recorded
// point, from nothing. The tokens are the whole prompt's alone either way.
TEST(Engine, ARecurrentMemoryReusesUpToARecordedPoint) {
    fake_backend spec(4, chained_drafter(3));
    spec.cuts_anywhere = false;
    event_log log;
    engine_core engine(spec, slots(1, 0, 8, true), log.callback());
    const std::vector<llama_token> turn1 = {1, 2, 3, 4, 5};
    const request_id a = engine.add(turn1, greedy(6));
    while (engine.has_work()) {
        engine.step();
    }
    const std::vector<llama_token> out = log.finished.at(a).output.tokens;
    ASSERT_EQ(out.size(), 6u);

    std::vector<llama_token> edited = turn1; // the answer's second token differs
    edited.insert(edited.end(), {out[0], static_cast<llama_token>((out[1] + 1) % 15), 2, 2});
    const request_id b = engine.add(edited, greedy(5));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(b).n_prompt_cached, turn1.size()) << "back to where the first prompt ended";
    EXPECT_EQ(log.finished.at(b).output.tokens, solo(edited, greedy(5)).tokens);

    const std::vector<llama_token> early = {1, 2, 6, 6};
    const request_id c = engine.add(early, greedy(5));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(c).n_prompt_cached, 0u) << "no point at or below 2 positions";
    EXPECT_EQ(log.finished.at(c).output.tokens, solo(early, greedy(5)).tokens);
    EXPECT_EQ(spec.keeps.back(), (std::pair<llama_seq_id, int32_t>{0, 0}));
}

// Runs a request to its end; returns its result.
request_result run_one(engine_core & engine, event_log & log, const std::vector<llama_token> & prompt, int n_predict) {
    const request_id id = engine.add(prompt, greedy(n_predict));
    while (engine.has_work()) {
        engine.step();
    }
    return log.finished.at(id);
}

std::vector<llama_token> next_turn(std::vector<llama_token> turn, const request_result & answer,
                                   std::initializer_list<llama_token> more) {
    turn.insert(turn.end(), answer.output.tokens.begin(), answer.output.tokens.end());
    turn.insert(turn.end(), more);
    return turn;
}

engine_params cached_slots(uint32_t n_seq, uint64_t cache_bytes) {
    engine_params p = slots(n_seq, 0, 8, true);
    p.prompt_cache_bytes = cache_bytes;
    return p;
}

// Two conversations over one slot: when the second takes the slot, what the
// first held goes to the prompt cache, whether the second shares nothing
// with it or only an opening (a chat template's first tokens, which it
// keeps: less than half of the slot), and the first's next turn has it
// loaded back and decodes only its new tokens; its output is what its
// whole prompt gives alone. The cache then holds the second conversation.
// A turn that continues what the slot holds saves nothing.
TEST(Engine, APromptCacheBringsBackWhatAnotherPromptTookTheSlotFrom) {
    for (const std::vector<llama_token> & b1 : {std::vector<llama_token>{9, 8, 7, 6}, std::vector<llama_token>{1, 2, 9, 8, 7, 6}}) {
        const size_t opening = b1[0] == 1 ? 2 : 0;
        SCOPED_TRACE(opening > 0 ? "the second shares an opening" : "the second shares nothing");
        fake_backend spec(4, chained_drafter(3));
        event_log log;
        engine_core engine(spec, cached_slots(1, 1 << 20), log.callback());
        const std::vector<llama_token> a1 = {1, 2, 3, 4, 5};
        const request_result ra1 = run_one(engine, log, a1, 6);
        const std::vector<llama_token> held_a = spec.kv[0];
        const request_result rb1 = run_one(engine, log, b1, 4);
        EXPECT_EQ(rb1.n_prompt_cached, opening);
        ASSERT_EQ(spec.saves.size(), 1u);
        EXPECT_EQ(spec.saves[0].second, held_a);
        EXPECT_EQ(engine.n_cached(), 1u);
        EXPECT_EQ(engine.cached_bytes(), held_a.size() * fake_backend::bytes_per_token);

        const std::vector<llama_token> held_b = spec.kv[0];
        const std::vector<llama_token> a2 = next_turn(a1, ra1, {7, 8});
        const size_t before = spec.batches.size();
        const request_result ra2 = run_one(engine, log, a2, 8);
        ASSERT_EQ(spec.loads.size(), 1u);
        EXPECT_EQ(spec.loads[0].second, held_a);
        EXPECT_EQ(ra2.n_prompt_cached, held_a.size());
        EXPECT_EQ(ra2.output.tokens, solo(a2, greedy(8)).tokens);
        EXPECT_EQ(spec.batches[before].first, static_cast<int32_t>(a2.size() - held_a.size())) << "only the new tokens are decoded";
        ASSERT_EQ(spec.saves.size(), 2u);
        EXPECT_EQ(spec.saves[1].second, held_b);
        EXPECT_EQ(engine.n_cached(), 1u) << "the loaded state left the cache; the second conversation's came in";

        // The second conversation's next turn: back from the cache, the first's saved again.
        const std::vector<llama_token> b2 = next_turn(b1, rb1, {3});
        const request_result rb2 = run_one(engine, log, b2, 5);
        EXPECT_EQ(rb2.n_prompt_cached, held_b.size());
        EXPECT_EQ(rb2.output.tokens, solo(b2, greedy(5)).tokens);
        EXPECT_EQ(engine.n_cached(), 1u);

        // The first conversation's third turn: a state that begins with its
        // earlier one replaced it in the cache.
        const std::vector<llama_token> a3 = next_turn(a2, ra2, {4});
        const request_result ra3 = run_one(engine, log, a3, 3);
        EXPECT_EQ(ra3.n_prompt_cached, a2.size() + ra2.output.tokens.size() - 1);
        EXPECT_EQ(ra3.output.tokens, solo(a3, greedy(3)).tokens);

        // Its fourth turn continues what the slot holds: nothing is saved.
        const size_t saves = spec.saves.size();
        const request_result ra4 = run_one(engine, log, next_turn(a3, ra3, {6}), 2);
        EXPECT_EQ(ra4.n_prompt_cached, a3.size() + ra3.output.tokens.size() - 1);
        EXPECT_EQ(spec.saves.size(), saves);
    }
}

// A conversation the cache saved from one slot comes back into another
// when its own is busy, where the drafter's state can move between
// sequences; where it cannot, only into its own, and the prompt is decoded
// whole. Either way the tokens are those of the prompt alone.
TEST(Engine, APromptCacheLoadsIntoAnotherSlotWhereTheDrafterMoves) {
    for (const bool copyable : {true, false}) {
        SCOPED_TRACE(copyable ? "copyable" : "bound to its sequence");
        fake_backend spec(4, chained_drafter(3), 2);
        spec.copyable = copyable;
        spec.movable = copyable;
        event_log log;
        engine_core engine(spec, cached_slots(2, 1 << 20), log.callback());
        const std::vector<llama_token> a1 = {1, 2, 3, 4, 5};
        const request_result ra1 = run_one(engine, log, a1, 6);
        const std::vector<llama_token> held_a = spec.kv[0];
        run_one(engine, log, {9, 8, 7, 6}, 4); // slot 1, the empty one
        const std::vector<llama_token> c1 = {6, 7, 8, 9};
        const request_result rc1 = run_one(engine, log, c1, 4); // slot 0: a1's conversation is saved
        ASSERT_EQ(spec.saves.size(), 1u);
        EXPECT_EQ(spec.saves[0], std::make_pair(llama_seq_id{0}, held_a));

        // c's next turn takes slot 0 again; a's comes at once and finds slot 1.
        const request_id c = engine.add(next_turn(c1, rc1, {2}), greedy(3));
        const std::vector<llama_token> a2 = next_turn(a1, ra1, {7, 8});
        const request_id a = engine.add(a2, greedy(8));
        while (engine.has_work()) {
            engine.step();
        }
        EXPECT_EQ(log.finished.at(c).seq_id, 0);
        const request_result & ra2 = log.finished.at(a);
        EXPECT_EQ(ra2.seq_id, 1);
        EXPECT_EQ(ra2.n_prompt_cached, copyable ? held_a.size() : 0u);
        EXPECT_EQ(spec.loads.size(), copyable ? 1u : 0u);
        // Slot 1's conversation was saved; a's stays in the cache unless loaded.
        EXPECT_EQ(engine.n_cached(), copyable ? 1u : 2u);
        EXPECT_EQ(ra2.output.tokens, solo(a2, greedy(8)).tokens);
    }
}

// The cache's bytes: the least recently saved state goes first; the
// backend's restore points count against the same budget; a state that
// would not fit is not saved; without a budget nothing is. Four
// conversations take one slot in turn, then the first comes back.
TEST(Engine, APromptCacheKeepsWithinItsBytes) {
    const std::vector<std::vector<llama_token>> firsts = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {2, 4, 6, 8}};
    const auto first_again = [&](uint64_t budget, size_t restore_bytes) {
        fake_backend spec(4, chained_drafter(3));
        spec.restore_bytes_held = restore_bytes;
        event_log log;
        engine_core engine(spec, cached_slots(1, budget), log.callback());
        std::vector<request_result> answers;
        for (const auto & p : firsts) {
            answers.push_back(run_one(engine, log, p, 4));
        }
        const std::vector<llama_token> again = next_turn(firsts[0], answers[0], {13});
        const request_result r = run_one(engine, log, again, 2);
        EXPECT_EQ(r.output.tokens, solo(again, greedy(2)).tokens);
        return r.n_prompt_cached;
    };
    // Each first turn leaves 4 + 3 positions (its last token is not decoded).
    const size_t one = 7 * fake_backend::bytes_per_token;
    EXPECT_EQ(first_again(3 * one, 0), 7u) << "room for the three that lost the slot";
    EXPECT_EQ(first_again(2 * one, 0), 0u) << "room for two: the first went when the third's came in";
    EXPECT_EQ(first_again(4 * one, 2 * one), 0u) << "the restore points take two's room";
    EXPECT_EQ(first_again(4 * one, one), 7u);
    EXPECT_EQ(first_again(one - 1, 0), 0u);
    EXPECT_EQ(first_again(0, 0), 0u);
    EXPECT_EQ(first_again(UINT64_MAX, 0), 7u);
}

// A state the backend cannot save or load costs only the reuse: the
// prompt is decoded whole and its tokens are the same.
TEST(Engine, APromptCacheThatFailsDecodesThePromptWhole) {
    for (const bool fail_save : {true, false}) {
        fake_backend spec(4, chained_drafter(3));
        event_log log;
        engine_core engine(spec, cached_slots(1, UINT64_MAX), log.callback());
        const std::vector<llama_token> a1 = {1, 2, 3, 4, 5};
        const request_result ra1 = run_one(engine, log, a1, 6);
        spec.fail_save = fail_save;
        run_one(engine, log, {9, 8, 7, 6}, 4);
        spec.fail_load = !fail_save;
        const std::vector<llama_token> a2 = next_turn(a1, ra1, {7, 8});
        const request_result ra2 = run_one(engine, log, a2, 8);
        EXPECT_EQ(ra2.n_prompt_cached, 0u);
        EXPECT_EQ(ra2.output.tokens, solo(a2, greedy(8)).tokens);
        EXPECT_EQ(ra2.output.stop, SPECDEC_STOP_BUDGET);
    }
}

// A memory that cannot be cut back anywhere: a loaded state keeps its
// restore points, so an edit inside the answer restarts from where the
// saved conversation's prompt ended.
TEST(Engine, APromptCacheKeepsARecurrentMemorysRestorePoints) {
    fake_backend spec(4, chained_drafter(3));
    spec.cuts_anywhere = false;
    event_log log;
    engine_core engine(spec, cached_slots(1, UINT64_MAX), log.callback());
    const std::vector<llama_token> a1 = {1, 2, 3, 4, 5};
    const request_result ra1 = run_one(engine, log, a1, 6);
    run_one(engine, log, {9, 8, 7, 6}, 4);
    std::vector<llama_token> edited = a1; // the answer's second token differs
    edited.insert(edited.end(), {ra1.output.tokens[0], static_cast<llama_token>((ra1.output.tokens[1] + 1) % 15), 2, 2});
    const request_result r = run_one(engine, log, edited, 5);
    EXPECT_EQ(spec.loads.size(), 1u);
    EXPECT_EQ(r.n_prompt_cached, a1.size()) << "back to where the saved prompt ended";
    EXPECT_EQ(r.output.tokens, solo(edited, greedy(5)).tokens);
}

// Slot files: a slot's contents exported, erased, and imported into another
// engine's slot (as after a restart); the next prompt that shares them
// reuses them and decodes only its new tokens, with the tokens it gets
// alone. A busy slot, one out of range, and bytes that are not a slot file
// are refused, and the slot is left as it was.
TEST(Engine, ASlotExportedAndImportedIsReusedByTheNextPrompt) {
    fake_backend spec(4, chained_drafter(3));
    event_log log;
    engine_core engine(spec, slots(2, 0, 8, true), log.callback());
    const std::vector<llama_token> a1 = {1, 2, 3, 4, 5};
    const request_result ra1 = run_one(engine, log, a1, 6);
    const uint32_t slot = static_cast<uint32_t>(ra1.seq_id);
    const std::vector<llama_token> held = spec.kv[slot];
    size_t n_tokens = 0;
    const std::vector<uint8_t> blob = engine.export_slot(slot, n_tokens);
    EXPECT_EQ(n_tokens, held.size());
    EXPECT_EQ(engine.erase_slot(slot), held.size());
    EXPECT_TRUE(spec.kv[slot].empty());
    EXPECT_EQ(engine.erase_slot(slot), 0u);

    fake_backend other(4, chained_drafter(3));
    event_log other_log;
    engine_core restarted(other, slots(2, 0, 8, true), other_log.callback());
    EXPECT_EQ(restarted.import_slot(1, blob), held.size());
    EXPECT_EQ(other.kv[1], held);
    const std::vector<llama_token> a2 = next_turn(a1, ra1, {7, 8});
    const size_t before = other.batches.size();
    const request_result ra2 = run_one(restarted, other_log, a2, 5);
    EXPECT_EQ(ra2.seq_id, 1) << "the prompt takes the slot that holds most of it";
    EXPECT_EQ(ra2.n_prompt_cached, held.size());
    EXPECT_EQ(ra2.output.tokens, solo(a2, greedy(5)).tokens);
    EXPECT_EQ(other.batches[before].first, static_cast<int32_t>(a2.size() - held.size())) << "only the new tokens are decoded";

    const auto status = [](auto && f) {
        try {
            f();
        } catch (const error & e) {
            return e.code();
        }
        return SPECDEC_STATUS_OK;
    };
    EXPECT_EQ(status([&] { restarted.erase_slot(2); }), SPECDEC_STATUS_BAD_SEQ_ID);
    std::vector<uint8_t> bad = blob;
    bad[0] ^= 1;
    EXPECT_EQ(status([&] { restarted.import_slot(0, bad); }), SPECDEC_STATUS_STATE_MALFORMED);
    bad = blob;
    bad.push_back(0);
    EXPECT_EQ(status([&] { restarted.import_slot(0, bad); }), SPECDEC_STATUS_STATE_MALFORMED);
    EXPECT_EQ(status([&] { restarted.import_slot(0, std::span<const uint8_t>(blob).first(blob.size() / 2)); }),
              SPECDEC_STATUS_STATE_MALFORMED);
    // A running request's slot.
    restarted.add(a2, greedy(20));
    restarted.step();
    EXPECT_EQ(status([&] { size_t n = 0; restarted.export_slot(1, n); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status([&] { restarted.erase_slot(1); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    while (restarted.has_work()) {
        restarted.step();
    }
    // Without prompt reuse, slots keep nothing between requests.
    fake_backend plain(4, chained_drafter(3));
    event_log plain_log;
    engine_core no_reuse(plain, slots(1, 0, 8, false), plain_log.callback());
    EXPECT_EQ(status([&] { no_reuse.import_slot(0, blob); }), SPECDEC_STATUS_INVALID_ARGUMENT);
}

// Four requests in slots 0-3; those in slots 0 and 2 finish first. With a
// stream per sequence, slots 1-3 are one run and nothing moves when slot 0
// frees; when slot 2 frees too, the request in slot 3 moves into slot 0, so
// every batch holds one run of consecutive sequences; its tokens stay its
// solo ones. With prompt reuse the same, what slot 0 kept of its request
// going to the prompt cache first. No move where it cannot help or is not
// allowed: a waiting request takes the free slot, keep_finished holds the
// slot's positions, a unified cache decodes any sequence ids in one pass,
// or the drafter cannot move.
TEST(Engine, ARequestOutsideTheRunOfHeldSlotsMovesIntoIt) {
    enum class setting { streams, waiting, keep_finished, reuse_prompts, unified, drafter_cannot_move };
    for (const setting how : {setting::streams, setting::waiting, setting::keep_finished, setting::reuse_prompts,
                              setting::unified, setting::drafter_cannot_move}) {
        SCOPED_TRACE(static_cast<int>(how));
        fake_backend spec(4, chained_drafter(3));
        spec.unified = how == setting::unified;
        spec.movable = how != setting::drafter_cannot_move;
        event_log log;
        engine_params ep = slots(4);
        ep.keep_finished = how == setting::keep_finished;
        ep.reuse_prompts = how == setting::reuse_prompts;
        ep.prompt_cache_bytes = 1 << 20;
        engine_core engine(spec, ep, log.callback());
        const std::vector<std::vector<llama_token>> prompts = {{1, 2}, {4}, {5, 6}, {7, 8, 9}, {10}};
        const std::vector<request_params> params = {greedy(2), greedy(30), greedy(6), greedy(30, SPECDEC_N_DRAFT_AUTO),
                                                    greedy(9)};
        std::vector<request_id> ids;
        for (size_t i = 0; i < 4; ++i) {
            ids.push_back(engine.add(prompts[i], params[i]));
        }
        if (how == setting::waiting) {
            ids.push_back(engine.add(prompts[4], params[4]));
        }
        while (engine.has_work()) {
            engine.step();
        }
        for (size_t i = 0; i < ids.size(); ++i) {
            EXPECT_EQ(log.finished.at(ids[i]).output.tokens, solo(prompts[i], params[i]).tokens) << "request " << i;
        }
        const std::vector<llama_seq_id> & d = log.slots.at(ids[3]);
        const bool moving = how == setting::streams || how == setting::reuse_prompts;
        if (moving) {
            EXPECT_EQ(spec.moves, (std::vector<std::pair<llama_seq_id, llama_seq_id>>{{3, 0}}));
            EXPECT_EQ(d.front(), 3);
            EXPECT_EQ(d.back(), 0) << "its events name the slot it is in";
        }
        if (how == setting::reuse_prompts) {
            const auto saved = [&](llama_seq_id seq, llama_token first) {
                return std::any_of(spec.saves.begin(), spec.saves.end(),
                                   [&](const auto & sv) { return sv.first == seq && !sv.second.empty() && sv.second[0] == first; });
            };
            EXPECT_TRUE(saved(0, prompts[0][0])) << "what slot 0 kept went to the prompt cache before the move";
            EXPECT_EQ(engine.n_cached(), 1u);
        }
        if (how == setting::waiting) {
            EXPECT_EQ(log.slots.at(ids[4]).front(), 0) << "the waiting request takes the free slot";
        }
        if (moving || how == setting::waiting) {
            for (const auto & seqs : spec.batch_seqs) {
                for (size_t k = 1; k < seqs.size(); ++k) {
                    EXPECT_EQ(seqs[k], seqs[k - 1] + 1) << "every batch holds one run of consecutive sequences";
                }
            }
        } else {
            EXPECT_TRUE(spec.moves.empty());
            EXPECT_TRUE(std::all_of(d.begin(), d.end(), [](llama_seq_id s) { return s == 3; }));
        }
        EXPECT_TRUE(spec.pending.empty());
    }
}

// Prompt reuse against one run of held slots: a prompt that a slot away from
// the running request holds takes that slot (its prefix is reused), then
// moves beside the running one, into the lowest slot that keeps the two one
// run, whose own positions go to the prompt cache first; a prompt with
// nothing to reuse takes a slot beside the running ones, not an empty one
// apart. Every batch holds one run; every request gets its solo tokens.
TEST(Engine, AReusedSlotApartFromTheRunningOnesMovesBesideThem) {
    fake_backend spec(4, chained_drafter(3));
    event_log log;
    engine_core engine(spec, cached_slots(4, 1 << 20), log.callback());
    const std::vector<std::vector<llama_token>> firsts = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {2, 4, 6, 8}};
    std::vector<request_result> turn1;
    for (const auto & p : firsts) {
        turn1.push_back(run_one(engine, log, p, 3));
    }
    for (size_t i = 0; i < firsts.size(); ++i) {
        EXPECT_EQ(turn1[i].seq_id, static_cast<llama_seq_id>(i)) << "alone, each takes an empty slot";
    }
    ASSERT_TRUE(spec.moves.empty()) << "one request alone never moves";
    const std::vector<llama_token> held_1 = spec.kv[1];

    const std::vector<llama_token> fresh = {13, 14, 12, 11, 10};
    const request_id e = engine.add(fresh, greedy(20));
    engine.step();
    EXPECT_EQ(log.slots.at(e).front(), 0) << "no slot empty, none held: the lowest";
    const std::vector<llama_token> again = next_turn(firsts[3], turn1[3], {1});
    const request_id f = engine.add(again, greedy(12));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(spec.moves, (std::vector<std::pair<llama_seq_id, llama_seq_id>>{{3, 1}})) << "from the slot that holds its prefix";
    EXPECT_EQ(log.slots.at(f).front(), 1) << "moved beside slot 0 before its first token";
    EXPECT_TRUE(std::any_of(spec.saves.begin(), spec.saves.end(), [&](const auto & sv) { return sv.first == 1 && sv.second == held_1; }))
        << "what slot 1 held went to the prompt cache first";
    EXPECT_EQ(log.finished.at(f).n_prompt_cached, firsts[3].size() + turn1[3].output.tokens.size() - 1);
    EXPECT_EQ(log.finished.at(f).output.tokens, solo(again, greedy(12)).tokens);
    EXPECT_EQ(log.finished.at(e).output.tokens, solo(fresh, greedy(20)).tokens);

    // Slot 0 runs, slots 1 and 2 hold earlier requests, slot 3 (moved from)
    // is empty: a prompt with nothing to reuse takes slot 1, beside the
    // running one, not the empty slot apart from it.
    const size_t n_moves = spec.moves.size();
    const request_id g = engine.add(fresh, greedy(20));
    engine.step();
    const request_id h = engine.add(std::vector<llama_token>{3, 3, 3}, greedy(4));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.slots.at(h).front(), log.slots.at(g).front() + 1);
    EXPECT_EQ(spec.moves.size(), n_moves) << "nothing moved";
    for (const auto & seqs : spec.batch_seqs) {
        for (size_t k = 1; k < seqs.size(); ++k) {
            EXPECT_EQ(seqs[k], seqs[k - 1] + 1) << "every batch holds one run of consecutive sequences";
        }
    }
}

TEST(Engine, TimeToFirstTokenIsReported) {
    fake_backend spec(4, chained_drafter());
    event_log log;
    engine_core engine(spec, slots(2), log.callback());
    const request_id a = engine.add({{1}}, greedy(9));
    const request_id none = engine.add({{1}}, greedy(0));
    while (engine.has_work()) {
        engine.step();
    }
    const request_times t = log.finished.at(a).times;
    EXPECT_GE(t.t_first_token_us, 0);
    EXPECT_LE(t.t_first_token_us, t.t_total_us);
    EXPECT_EQ(log.finished.at(none).times.t_first_token_us, -1);
}

TEST(Engine, TheFirstTokenComesFromThePromptsOwnDecode) {
    // Drafting and verifying must not delay the first token: it is drawn from
    // the logits of the prompt's last row, before anything is drafted.
    int drafts = 0;
    fake_backend spec(4, [&](llama_seq_id s, llama_token t, int32_t cap) {
        ++drafts;
        return chained_drafter()(s, t, cap);
    });
    int decodes_at_first = -1;
    int drafts_at_first = -1;
    engine_core engine(spec, slots(1), [&](const engine_event & e) {
        if (e.type == SPECDEC_ENGINE_EVENT_TOKEN && decodes_at_first < 0) {
            decodes_at_first = spec.n_decodes;
            drafts_at_first = drafts;
            EXPECT_EQ(e.token, greedy_next(3));
        }
        return true;
    });
    engine.add({{1, 2, 3}}, greedy(10));
    engine.step();
    EXPECT_EQ(decodes_at_first, 1); // the prompt's, its last row with logits
    EXPECT_EQ(drafts_at_first, 0);
    ASSERT_EQ(spec.batches.size(), 2u); // then the same step drafts from that token and verifies
    EXPECT_EQ(spec.batches[0], std::make_pair(3, 1));
    EXPECT_EQ(spec.batches[1], std::make_pair(5, 5));
}

TEST(Engine, ChunkedPrefillInterleavesWithOthersDecoding) {
    constexpr int32_t chunk = 4;
    fake_backend spec(2, chained_drafter());
    event_log log;
    engine_core engine(spec, slots(2, chunk), log.callback());
    const request_id a = engine.add({{1}}, greedy(200));
    engine.step();
    std::vector<llama_token> long_prompt(40);
    for (size_t i = 0; i < long_prompt.size(); ++i) {
        long_prompt[i] = static_cast<llama_token>(i % 14);
    }
    const request_id b = engine.add(long_prompt, greedy(5));
    spec.batches.clear();
    std::vector<int> a_tokens;
    for (int i = 0; i < 9; ++i) { // 36 of its 40 prompt tokens, in chunks of 4
        engine.step();
        a_tokens.push_back(log.n_tokens[a]);
        EXPECT_EQ(log.n_tokens[b], 0) << "step " << i;
    }
    for (size_t i = 1; i < a_tokens.size(); ++i) {
        EXPECT_GT(a_tokens[i], a_tokens[i - 1]) << "a emits every step while b's prompt is read";
    }
    for (const auto & [n_tokens, n_logits] : spec.batches) {
        EXPECT_LE(n_tokens, chunk + 2 * (1 + 2)); // a chunk, or each running request's id_last and drafts
        if (n_logits == 0) {
            EXPECT_LE(n_tokens, chunk);
        }
    }
    engine.step();
    EXPECT_GT(log.n_tokens[b], 1) << "b emits its first token as its last chunk is read, and joins that step's verification";
    engine.cancel(a);
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(b).output.tokens, solo(long_prompt, greedy(5), 2).tokens);
}

TEST(Engine, AFailedStepFailsTheRunningRequestsAndTheEngineGoesOn) {
    fake_backend spec(3, chained_drafter(4));
    event_log log;
    engine_core engine(spec, slots(2), log.callback());
    const request_id a = engine.add({{1, 2, 3}}, greedy(40));
    const request_id b = engine.add({{4}}, greedy(40));
    const request_id c = engine.add({{5}}, greedy(6)); // waits: two slots
    engine.step();
    engine.step();
    spec.fail_at_decode = spec.n_decodes;
    try {
        engine.step();
        ADD_FAILURE() << "no error";
    } catch (const error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_DECODE_FAILED);
    }
    for (const request_id id : {a, b}) {
        const request_result & r = log.finished.at(id);
        EXPECT_EQ(r.output.stop, SPECDEC_STOP_ERROR);
        EXPECT_FALSE(r.output.tokens.empty());
        const auto ref = solo(id == a ? std::vector<llama_token>{1, 2, 3} : std::vector<llama_token>{4}, greedy(40), 3);
        EXPECT_TRUE(std::equal(r.output.tokens.begin(), r.output.tokens.end(), ref.tokens.begin()));
    }
    EXPECT_FALSE(log.finished.count(c)) << "a waiting request stays queued";
    EXPECT_TRUE(spec.pending.empty());
    for (const auto & [seq, held] : spec.kv) {
        EXPECT_TRUE(held.empty()) << "sequence " << seq;
    }
    spec.fail_at_decode = -1;
    const request_id d = engine.add({{1, 2, 3}}, greedy(40));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(c).output.tokens, solo({5}, greedy(6), 3).tokens);
    EXPECT_EQ(log.finished.at(d).output.tokens, solo({1, 2, 3}, greedy(40), 3).tokens);
}

// add_n: n requests of one prompt, the prompt decoded once (in the first
// one's slot, copied into the others), each with seed + i, each equal to
// its prompt alone with that seed; and each decoding its own prompt where
// the drafter cannot copy.
TEST(Engine, RequestsOfOnePromptShareItsDecodeAndGetTheirSoloTokens) {
    for (const bool copyable : {true, false}) {
        for (const bool sampling : {false, true}) {
            SCOPED_TRACE(testing::Message() << "copyable " << copyable << " sampling " << sampling);
            fake_backend spec(4, chained_drafter(3));
            spec.copyable = copyable;
            if (sampling) {
                spec.logits_for = spread;
            }
            event_log log;
            engine_core engine(spec, slots(4, 2), log.callback());
            const std::vector<llama_token> prompt = {1, 2, 3, 4, 5};
            const request_params p = sampling ? sampled(20, 40) : greedy(20);
            const request_id first = engine.add_n(prompt, p, 3);
            while (engine.has_work()) {
                engine.step();
            }
            size_t decoded = 0; // prompt tokens decoded, over the three
            for (uint32_t i = 0; i < 3; ++i) {
                request_params pi = p;
                pi.seed = p.seed + i;
                const request_result & r = log.finished.at(first + i);
                EXPECT_EQ(r.output.tokens, solo(prompt, pi, 4, sampling ? spread : std::function<void(llama_token, float *)>{}).tokens)
                    << "choice " << i;
                decoded += prompt.size() - r.n_prompt_cached;
            }
            EXPECT_EQ(decoded, copyable ? prompt.size() : 3 * prompt.size());
            EXPECT_EQ(spec.copies.size(), copyable ? 2u : 0u);
            if (sampling) {
                EXPECT_NE(log.finished.at(first).output.tokens, log.finished.at(first + 1).output.tokens);
            }
        }
    }
}

TEST(Engine, RequestsOfOnePromptWaitForAsManySlotsAndOutliveTheirLeader) {
    fake_backend spec(4, chained_drafter(3));
    event_log log;
    engine_core engine(spec, slots(3), log.callback());
    request_params endless = greedy(100000);
    endless.ignore_eog = true;
    const request_id a = engine.add({{9}}, endless);
    engine.step(); // a holds a slot: two are free, three are needed
    const request_id first = engine.add_n({{1, 2, 3}}, greedy(8), 3);
    engine.step();
    engine.step();
    EXPECT_EQ(log.n_tokens[first] + log.n_tokens[first + 1] + log.n_tokens[first + 2], 0) << "admitted together or not at all";
    engine.cancel(first); // the first leaves while waiting: the second reads the prompt, the third copies it
    engine.step();
    EXPECT_GT(log.n_tokens[first + 1], 0);
    EXPECT_GT(log.n_tokens[first + 2], 0);
    engine.cancel(a);
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(log.finished.at(a).output.stop, SPECDEC_STOP_CANCELLED);
    EXPECT_EQ(log.finished.at(first).output.stop, SPECDEC_STOP_CANCELLED);
    EXPECT_EQ(log.finished.at(first + 1).n_prompt_cached, 0u);
    EXPECT_EQ(log.finished.at(first + 2).n_prompt_cached, 3u);
    for (request_id id : {first + 1, first + 2}) {
        EXPECT_EQ(log.finished.at(id).output.tokens, solo({1, 2, 3}, greedy(8)).tokens);
    }
    try {
        engine.add_n({{1}}, greedy(1), 4);
        ADD_FAILURE() << "n above the slots is refused";
    } catch (const error & e) {
        EXPECT_EQ(e.code(), SPECDEC_STATUS_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find("n is 4"), std::string::npos) << e.what();
    }
}

TEST(Engine, BadEngineParametersAreTypedErrors) {
    fake_backend spec(4, chained_drafter(), 2, 4096, 64);
    auto status = [&](const engine_params & p) {
        try {
            engine_core e(spec, p, {});
        } catch (const error & e) {
            return e.code();
        }
        return SPECDEC_STATUS_OK;
    };
    EXPECT_EQ(status(slots(3)), SPECDEC_STATUS_SEQ_CAPACITY);
    EXPECT_EQ(status(slots(1, -1)), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status(slots(1, 0, 0)), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status(slots(0)), SPECDEC_STATUS_OK);
}

} // namespace
} // namespace specdec::test
