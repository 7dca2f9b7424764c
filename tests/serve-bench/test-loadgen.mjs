// The serving load generator against a scripted SSE server: token counts,
// TTFT / ITL arithmetic, packing of several events in one write, stated
// token counts, closed-loop concurrency, errors and text comparison.
// No model; runs in about a second.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const lg = await import(path.join(here, '../../tools/serve-bench/loadgen.mjs'));

const FIRST_MS = 60;  // delay before the first token
const GAP_MS = 30;    // between the writes that follow

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ev = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
const chunk = (text, extra = {}) => ev({ object: 'text_completion', choices: [{ text, index: 0, finish_reason: null }], ...extra });

// Each response: "a" | "b","c" in one write | "def" stated as 3 tokens | an
// empty event | the final event with usage 6 | [DONE]. The prompt "bad"
// gets HTTP 500; "flip" alternates between two texts.
async function start_fake() {
    const state = { in_flight: 0, max_in_flight: 0, requests: 0, flips: 0, drops: 0, max_tokens: [] };
    const server = createServer(async (req, res) => {
        let body = '';
        for await (const part of req) body += part;
        const q = JSON.parse(body);
        state.requests++;
        state.max_tokens.push(q.max_tokens);
        if (req.url !== '/v1/completions' || q.stream !== true || q.temperature !== 0) {
            res.writeHead(400); res.end('bad request'); return;
        }
        if (q.prompt === 'bad') { res.writeHead(500); res.end('boom'); return; }
        // "drop N": the connection is closed unanswered the first N times.
        if (q.prompt.startsWith('drop ') && state.drops++ < Number(q.prompt.slice(5))) { req.socket.destroy(); return; }
        if (q.prompt === 'packed') { // several tokens an event, count not stated
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            await sleep(FIRST_MS);
            res.write(chunk('ab'));
            await sleep(GAP_MS);
            res.write(chunk('cdef'));
            res.write(ev({ object: 'text_completion', choices: [{ text: '', index: 0, finish_reason: 'length' }],
                           usage: { completion_tokens: 6 }, specdec: { drafted: 5, accepted: 4, tokens: [1, 2] } }));
            res.end('data: [DONE]\n\n');
            return;
        }
        state.in_flight++;
        state.max_in_flight = Math.max(state.max_in_flight, state.in_flight);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const tail = q.prompt === 'flip' && state.flips++ % 2 === 1 ? 'X' : 'f';
        await sleep(FIRST_MS);
        res.write(chunk('a'));
        await sleep(GAP_MS);
        res.write(chunk('b') + chunk('c'));
        await sleep(GAP_MS);
        res.write(chunk('de' + tail, { tokens: [11, 12, 13] }));
        res.write(chunk(''));
        res.write(ev({ object: 'text_completion', choices: [{ text: '', index: 0, finish_reason: 'length' }],
                       usage: { completion_tokens: 6, prompt_tokens: 3 }, timings: { draft_n: 4, draft_n_accepted: 3 } }));
        res.end('data: [DONE]\n\n');
        state.in_flight--;
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    return { server, state, url: `http://127.0.0.1:${server.address().port}` };
}

test('percentile interpolates between ranks', () => {
    assert.equal(lg.percentile([], 50), null);
    assert.equal(lg.percentile([5], 99), 5);
    assert.equal(lg.percentile([4, 1, 3, 2], 50), 2.5);
    assert.equal(lg.percentile([0, 10], 99), 9.9);
});

test('SSE parser joins events split across reads, CRLF included', () => {
    const p = new lg.SseParser();
    const enc = new TextEncoder();
    assert.deepEqual(p.feed(enc.encode('data: {"a":1}\r\n')), []);
    assert.deepEqual(p.feed(enc.encode('\r\ndata: [DO')), ['{"a":1}']);
    assert.deepEqual(p.feed(enc.encode('NE]\n\n: comment\n\n')), ['[DONE]']);
});

test('closed loop: counts, TTFT, ITL, texts', async () => {
    const fake = await start_fake();
    try {
        const r = await lg.run_load({ url: fake.url, concurrency: 2, requests: 4, max_tokens: 6,
                                      prompts: ['p0', 'p1'], warmup: 2, warmup_tokens: 2 });
        assert.equal(fake.state.requests, 6);          // 2 warm-up + 4 measured
        assert.equal(fake.state.max_in_flight, 2);     // never more than C at once
        assert.equal(r.errors, 0);
        assert.equal(r.completion_tokens, 24);         // the final usage, 6 per request
        assert.equal(r.itl_ms.samples, 4 * 5);         // 6 tokens each: 5 gaps
        assert.equal(r.tokens_per_event, 1.5);         // 6 tokens over the events a, b, c, def
        assert.deepEqual(r.texts, { 0: 'abcdef', 1: 'abcdef' });
        assert.equal(r.consistent, true);
        assert.deepEqual(r.draft, { drafted: 16, accepted: 12, acceptance: 0.75 });
        // Timer jitter on a busy host can delay any write, so check absolute
        // lower bounds and the arithmetic, not the exact gaps.
        const gaps = [];
        for (const rec of r.records) {
            const t = rec.tokens_at_ms;
            assert.equal(t.length, 6);
            assert.ok(t[0] >= FIRST_MS - 5, `TTFT ${t[0]}`);
            assert.ok(t[1] > t[0] && t[1] >= FIRST_MS + GAP_MS - 5, `b at ${t[1]}`);
            assert.equal(t[2], t[1]);                  // c arrived in b's write
            assert.ok(t[3] > t[2] && t[3] >= FIRST_MS + 2 * GAP_MS - 5);
            assert.equal(t[4], t[3]);                  // the 3 tokens of "def" share one event
            assert.equal(t[5], t[3]);
            assert.ok(Math.abs(rec.ttft_ms - t[0]) < 0.01);
            for (let j = 1; j < 6; j++) gaps.push(t[j] - t[j - 1]);
        }
        // 3 of every 5 gaps are 0: the median is 0, the 99th percentile a write's gap.
        assert.equal(r.itl_ms.p50, 0);
        assert.ok(Math.abs(r.itl_ms.p99 - lg.percentile(gaps, 99)) < 0.01);
        assert.ok(r.itl_ms.p99 > 0);
        assert.equal(r.chunk_gap_ms.samples, 4 * 2);
        assert.ok(Math.abs(r.ttft_ms.mean - lg.mean(r.records.map((x) => x.ttft_ms))) < 0.01);
        assert.ok(r.ttft_ms.p50 >= FIRST_MS - 5);
        assert.ok(Math.abs(r.tpot_ms.mean - lg.mean(r.records.map((x) => (x.tokens_at_ms[5] - x.tokens_at_ms[0]) / 5))) < 0.01);
        // Four requests of at least FIRST + 2 GAP ms, two at a time.
        assert.ok(r.wall_s >= 2 * (FIRST_MS + 2 * GAP_MS - 10) / 1000, `wall ${r.wall_s}`);
        assert.ok(Math.abs(r.tokens_per_s * r.wall_s / 24 - 1) < 0.01); // wall_s is rounded to ms
    } finally {
        fake.server.close();
    }
});

test('varied lengths: each prompt asks its own share of max_tokens; warm-up does not vary', async () => {
    const fake = await start_fake();
    try {
        const r = await lg.run_load({ url: fake.url, concurrency: 1, requests: 5, max_tokens: 16, varied: true,
                                      prompts: ['p0', 'p1', 'p2', 'p3'], warmup: 1, warmup_tokens: 2 });
        assert.deepEqual(fake.state.max_tokens, [2, 16, 4, 10, 2, 16]);
        assert.equal(r.requested_tokens, 48);
        assert.equal(r.varied, true);
        assert.deepEqual(r.records.map((x) => x.max_tokens), [16, 4, 10, 2, 16]);
        const same = await lg.run_load({ url: fake.url, concurrency: 1, requests: 2, max_tokens: 16, prompts: ['p0', 'p1'] });
        assert.equal(same.requested_tokens, 32);
    } finally {
        fake.server.close();
    }
});

test('errors are counted and texts that differ are flagged', async () => {
    const fake = await start_fake();
    try {
        const r = await lg.run_load({ url: fake.url, concurrency: 1, requests: 3, max_tokens: 6, prompts: ['flip', 'bad'] });
        assert.equal(r.errors, 1);
        assert.match(r.first_error, /HTTP 500/);
        assert.equal(r.completion_tokens, 12);
        assert.equal(r.consistent, false);             // 'flip' answered abcdef, then abcdeX
    } finally {
        fake.server.close();
    }
});

test('a connection closed before any answer is retried twice, as the OpenAI clients do', async () => {
    for (const [drops, errors, retries] of [[2, 0, 2], [3, 1, 2]]) {
        const fake = await start_fake();
        try {
            const r = await lg.run_load({ url: fake.url, concurrency: 1, requests: 1, max_tokens: 6, prompts: [`drop ${drops}`] });
            assert.equal(r.errors, errors, `${drops} drops`);
            assert.equal(r.records[0].retries, retries);
            assert.equal(fake.state.requests, 3);
            if (errors === 0) assert.equal(r.records[0].text, 'abcdef');
        } finally {
            fake.server.close();
        }
    }
});

test('unstated counts in packed events are spread by text length', async () => {
    const fake = await start_fake();
    try {
        const r = await lg.run_load({ url: fake.url, concurrency: 1, requests: 1, max_tokens: 6, prompts: ['packed'] });
        assert.equal(r.errors, 0);
        const [rec] = r.records;
        assert.equal(rec.token_count_method, 'estimated from text length');
        assert.equal(r.completion_tokens, 6);
        const t = rec.tokens_at_ms;
        assert.equal(t.length, 6);
        assert.ok(t[0] === t[1] && t[1] < t[2] && t.slice(2).every((x) => x === t[2])); // 2 tokens, then 4
        assert.equal(r.itl_ms.samples, 5);
        assert.equal(r.tokens_per_event, 3);
        assert.deepEqual(r.draft, { drafted: 5, accepted: 4, acceptance: 0.8 });
        assert.equal(rec.specdec.tokens, undefined); // the token list is not copied into the record
    } finally {
        fake.server.close();
    }
});
