// `specdec serve`'s scheduler (the bridge between the HTTP layer and the
// engine thread) on a generated fixture, plain decoding: shutdown() sees
// every request handed in, wherever it is on its way to the engine; a
// channel's notification tells of every change, and is dropped after the
// last; a paused request.
#include "harness.h"
#include "serve-metrics.h"
#include "serve-scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace specdec::test {
namespace {

using cli::serve::request_channel;
using cli::serve::scheduler;
using namespace std::chrono_literals;

struct fixture_context {
    llama_model_ptr   model = load_model(fixture("llama-target-2-256", [](const std::string & p) { fixtures::write_llama_target(p, {}); }));
    llama_context_ptr ctx = make_context(model.get(), [] {
        context_options o;
        o.n_ctx = 512;
        o.n_seq_max = 2;
        return o;
    }());
};

// A scheduler whose engine loop runs on a thread of its own, so that the
// test's thread can submit and shut down.
struct running_scheduler {
    running_scheduler(llama_context * ctx, const engine_params & ep, cli::serve::metrics & m)
        : sched(nullptr, ctx, ep, m, {}), loop([this] { sched.run(); }) {}
    ~running_scheduler() {
        sched.shutdown(0ms);
        loop.join();
    }
    scheduler   sched;
    std::thread loop;
};

engine_params two_slots() {
    engine_params ep = specdec_engine_default_params();
    ep.n_seq = 2;
    ep.max_waiting = 8;
    return ep;
}

// Holds the engine thread inside a channel's notification (its second: the
// first tells of the admission, the second of a token) until the test lets
// it go, so that the test acts on a request known to be admitted and
// decoding, however late its own thread is scheduled. The notification runs
// under the channel's lock: nothing may touch the channel before release().
class notification_gate {
public:
    explicit notification_gate(request_channel & c) : c_(c) {
        c_.set_notify([this] {
            std::unique_lock<std::mutex> lock(m_);
            if (++n_calls_ == 2) {
                cv_.notify_all();
                cv_.wait(lock, [this] { return released_; });
            }
        });
    }
    ~notification_gate() {
        release();
        c_.set_notify(nullptr);
    }
    bool wait_held(std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(m_);
        return cv_.wait_for(lock, timeout, [this] { return n_calls_ >= 2; });
    }
    void release() {
        std::lock_guard<std::mutex> lock(m_);
        released_ = true;
        cv_.notify_all();
    }

private:
    request_channel &       c_;
    std::mutex              m_;
    std::condition_variable cv_;
    int                     n_calls_ = 0;
    bool                    released_ = false;
};

request_params greedy(int32_t n_predict) {
    request_params rp = specdec_generate_default_params();
    rp.n_predict = n_predict;
    rp.temperature = 0;
    return rp;
}

std::shared_ptr<request_channel> request(const request_params & rp, std::vector<std::string> stops = {}) {
    return std::make_shared<request_channel>(std::vector<llama_token>{19, 20, 21}, rp, std::move(stops));
}

// Every channel has finished, cancelled.
void expect_all_cancelled(const std::vector<std::shared_ptr<request_channel>> & cs, int round) {
    for (const auto & c : cs) {
        std::string text;
        ASSERT_TRUE(c->wait_output(0ms, text)) << "round " << round << ": every request finished when shutdown() returns";
        EXPECT_EQ(c->result().output.stop, SPECDEC_STOP_CANCELLED) << "round " << round;
    }
}

// A request the engine thread has taken from the inbox and is adding to the
// engine (the engine copies its 100k stop strings, which takes a while) when
// shutdown(0) comes: shutdown() counts it and cancels it. It was invisible
// there, in neither the inbox nor the engine: shutdown() stopped the engine
// thread without cancelling it, and it ran to its budget past the deadline.
TEST(ServeScheduler, ShutdownCancelsARequestTakenFromTheInboxNotYetAdded) {
    fixture_context f;
    cli::serve::metrics m;
    running_scheduler r(f.ctx.get(), two_slots(), m);
    scheduler & sched = r.sched;
    const auto slow = request(greedy(200), std::vector<std::string>(100000, std::string(512, 'q')));
    ASSERT_TRUE(sched.submit({slow}));
    std::this_thread::sleep_for(20ms); // the engine thread took it and is copying its stop strings
    EXPECT_EQ(sched.shutdown(0ms), 1u);
    expect_all_cancelled({slow}, 0);
}

// Requests handed in, then shutdown(0) at once, racing the engine thread,
// which takes the inbox and adds what it took to the engine: each is
// cancelled, whether it was still in the inbox, taken, or in the engine, and
// shutdown() counts it. The moment of the shutdown moves by a few
// microseconds a round.
TEST(ServeScheduler, ShutdownCancelsEveryRequestHandedIn) {
    fixture_context f;
    constexpr int n_requests = 4;
    for (int round = 0; round < 200; ++round) {
        cli::serve::metrics m;
        running_scheduler r(f.ctx.get(), two_slots(), m);
        scheduler & sched = r.sched;
        std::vector<std::shared_ptr<request_channel>> cs;
        for (int i = 0; i < n_requests; ++i) {
            cs.push_back(request(greedy(200)));
            ASSERT_TRUE(sched.submit({cs.back()}));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(round % 30 * 3));
        EXPECT_EQ(sched.shutdown(0ms), static_cast<size_t>(n_requests)) << "round " << round;
        EXPECT_FALSE(sched.submit({request(greedy(1))})) << "shut down";
        expect_all_cancelled(cs, round);
        if (HasFailure()) {
            break;
        }
    }
}

// How the HTTP layer reads a channel without waiting on it: the
// notification (called on the engine thread) tells of the admission, each
// release of text and the end, and a read with no wait after each one gets
// the whole output, as waiting on the channel does. Dropped, it is not called.
TEST(ServeScheduler, TheNotificationTellsOfEveryChange) {
    fixture_context f;
    cli::serve::metrics m;
    running_scheduler r(f.ctx.get(), two_slots(), m);
    const auto waited = request(greedy(32));
    ASSERT_TRUE(r.sched.submit({waited}));
    std::string want;
    while (!waited->wait_output(1s, want)) {
    }
    ASSERT_FALSE(want.empty());

    std::mutex mu;
    std::condition_variable cv;
    size_t n_notified = 0;
    const auto c = request(greedy(32));
    c->set_notify([&] {
        std::lock_guard<std::mutex> lock(mu);
        ++n_notified;
        cv.notify_all();
    });
    ASSERT_TRUE(r.sched.submit({c}));
    std::string text;
    size_t seen = 0;
    for (bool finished = false; !finished;) {
        {
            std::unique_lock<std::mutex> lock(mu);
            ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return n_notified > seen; })) << "no notification in 10 s; read so far: " << text;
            seen = n_notified;
        }
        finished = c->wait_output(0ms, text);
    }
    EXPECT_EQ(text, want);
    {
        // The finished state is visible to wait_output before its notification
        // has run (it is called after the channel's lock is released): wait for it.
        std::unique_lock<std::mutex> lock(mu);
        EXPECT_TRUE(cv.wait_for(lock, 10s, [&] { return n_notified >= 3; })) << "admitted, text, finished: " << n_notified;
    }
    EXPECT_EQ(c->result().output.stop, waited->result().output.stop);

    const auto quiet = request(greedy(8));
    quiet->set_notify([&] {
        std::lock_guard<std::mutex> lock(mu);
        ++n_notified;
    });
    quiet->set_notify(nullptr);
    const size_t before = [&] {
        std::lock_guard<std::mutex> lock(mu);
        return n_notified;
    }();
    ASSERT_TRUE(r.sched.submit({quiet}));
    std::string ignored;
    while (!quiet->wait_output(1s, ignored)) {
    }
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(n_notified, before);
}

// The notification of a request's last change (finished or rejected) is its
// last: the channel then drops it, and what it holds. The server's
// notifications hold their completion, which holds the channel; kept, the
// two owned each other, and a completion whose final answer was never
// written (the server stopped first) leaked.
TEST(ServeScheduler, TheLastNotificationIsDroppedWithWhatItHolds) {
    fixture_context f;
    cli::serve::metrics m;
    running_scheduler r(f.ctx.get(), two_slots(), m);
    const auto finished = request(greedy(8));
    const auto rejected = std::make_shared<request_channel>(std::vector<llama_token>(600, 19), greedy(8), std::vector<std::string>{});
    for (const auto & [c, want] : {std::pair{finished, request_channel::state::finished}, std::pair{rejected, request_channel::state::rejected}}) {
        auto held = std::make_shared<int>(0);
        const std::weak_ptr<int> watch = held;
        c->set_notify([held] { ++*held; });
        held.reset();
        ASSERT_TRUE(r.sched.submit({c}));
        std::string text;
        request_channel::state s = request_channel::state::pending;
        for (int i = 0; i < 100 && s != request_channel::state::finished && s != request_channel::state::rejected; ++i) {
            c->wait_output(100ms, text); // returns at once when there is text or an end
            s = c->wait_admission(0ms);
        }
        ASSERT_EQ(s, want) << "600 tokens do not fit 512 positions; 8 do";
        // Its state is visible before its notification has run: wait for that.
        for (int i = 0; i < 1000 && !watch.expired(); ++i) {
            std::this_thread::sleep_for(10ms);
        }
        EXPECT_TRUE(watch.expired()) << "what the notification held is released after the last change";
    }
}

// A client that stops reading: its request is paused (marked before or after
// its admission), the others go on and one takes its slot; resumed, it ends
// with the tokens it would have had unpaused. Paused alone, the engine thread
// sleeps (nothing decodes: the request emits nothing), and a pause, a
// resumption or a shutdown wakes it.
TEST(ServeScheduler, APausedRequestWaitsForItsReaderAndOthersTakeItsSlot) {
    fixture_context f;
    cli::serve::metrics m;
    running_scheduler r(f.ctx.get(), two_slots(), m);
    const auto drain = [](const std::shared_ptr<request_channel> & c) {
        std::string text;
        while (!c->wait_output(1s, text)) {
        }
        return c->result().output.tokens;
    };
    const auto solo = request(greedy(64));
    ASSERT_TRUE(r.sched.submit({solo}));
    const std::vector<llama_token> want = drain(solo);
    ASSERT_EQ(want.size(), 64u);

    for (const bool before_admission : {true, false}) {
        SCOPED_TRACE(before_admission);
        const auto held = request(greedy(64));
        if (before_admission) {
            r.sched.pause(held, true);
            ASSERT_TRUE(r.sched.submit({held}));
        } else {
            notification_gate gate(*held);
            ASSERT_TRUE(r.sched.submit({held}));
            ASSERT_TRUE(gate.wait_held(10s)) << "admitted and a first token";
            gate.release();
            r.sched.pause(held, true);
        }
        std::string text;
        // Three others on two slots: one of them takes the paused request's.
        std::vector<std::shared_ptr<request_channel>> others;
        for (int i = 0; i < 3; ++i) {
            others.push_back(request(greedy(16)));
            ASSERT_TRUE(r.sched.submit({others.back()}));
        }
        for (const auto & o : others) {
            EXPECT_EQ(drain(o), std::vector<llama_token>(want.begin(), want.begin() + 16));
        }
        held->wait_output(200ms, text);
        const size_t seen = text.size();
        EXPECT_FALSE(held->wait_output(300ms, text)) << "paused: not finished";
        EXPECT_EQ(text.size(), seen) << "paused: nothing more emitted";
        r.sched.pause(held, false);
        EXPECT_EQ(drain(held), want) << "resumed: its tokens are those it would have had";
    }
    // Paused when the server stops: cancelled (the engine thread is woken for it).
    const auto last = request(greedy(200));
    {
        notification_gate gate(*last);
        ASSERT_TRUE(r.sched.submit({last}));
        ASSERT_TRUE(gate.wait_held(10s)) << "admitted and a first token";
        gate.release();
        r.sched.pause(last, true);
    }
    std::string text;
    EXPECT_EQ(r.sched.shutdown(0ms), 1u);
    ASSERT_TRUE(last->wait_output(0ms, text));
    EXPECT_EQ(last->result().output.stop, SPECDEC_STOP_CANCELLED);
}

} // namespace
} // namespace specdec::test
