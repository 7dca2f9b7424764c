// Hostile clients, bounded in count and time, on 127.0.0.1 only (issue 33):
// four times the server's bound (-np + --max-waiting) in concurrent streams
// at the defaults, /health probed throughout; 100 slowloris sockets beside a
// valid request; half-closed requests; a client that never reads its
// stream; deep and wide JSON; stop strings over the caps; SIGTERM while all
// of these are open. Statuses, tokens and exits are asserted; latencies are
// printed (reported, never asserted).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { assertError, metrics, post, probeHealth, quantile, rawRequest, sleep, sseEvents, startServer, stopServer, waitForMetrics } from './server.mjs';

const NP = 4; // the defaults of -np and --max-waiting
const MAX_WAITING = 64;
const BOUND = NP + MAX_WAITING;
const PROMPTS = ['abc', 'xyz', 'hello'];

// One streaming completion over fetch: its status, and for a 200 the text
// and how the stream ended ('done', or the error event's code).
async function stream(server, prompt, maxTokens, timeoutMs = 120000) {
    const res = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, stream: true }),
        signal: AbortSignal.timeout(timeoutMs),
    });
    const out = { status: res.status, retryAfter: res.headers.get('retry-after'), text: '', end: null, code: null };
    const body = await res.text();
    if (res.status !== 200) {
        out.code = JSON.parse(body).error.code;
        return out;
    }
    for (const line of body.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { out.end ??= 'done'; continue; }
        const j = JSON.parse(data);
        if (j.error) { out.end = j.error.code; continue; }
        out.text += j.choices[0].text;
    }
    return out;
}



// A socket that sends half a request header, then one header byte a second:
// each read returns something, so only a deadline on the whole header ends
// it. What the server answered is kept in .answer.
function slowloris(server, closed) {
    const { port } = new URL(server.url);
    const sock = net.connect(Number(port), '127.0.0.1');
    const x = { sock, answer: '' };
    sock.on('error', () => {});
    sock.on('data', (d) => { x.answer += d; });
    sock.on('close', () => closed.push(performance.now()));
    sock.write('POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n');
    const timer = setInterval(() => { if (!sock.destroyed) sock.write('X'); }, 1000);
    sock.on('close', () => clearInterval(timer));
    x.destroy = () => { clearInterval(timer); sock.destroy(); };
    return x;
}

// A streaming request over a socket that never reads: once the kernel's
// buffers are full, the server's writes wait.
function neverReader(server, body) {
    const { port } = new URL(server.url);
    const sock = net.connect(Number(port), '127.0.0.1');
    sock.on('error', () => {});
    sock.pause(); // node reads nothing from the socket from now on
    const text = JSON.stringify(body);
    sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
    return sock;
}

// A completion's output tokens from a raw answer: the body's (plain) or the last event's (stream).
function tokensOf(r) {
    if (r.json) return r.json.specdec.tokens;
    const { events } = sseEvents(r.body);
    return events.at(-1)?.specdec?.tokens;
}

describe('serve under hostile clients', { timeout: 240000 }, () => {
    test(`${4 * BOUND} concurrent streams at the defaults: each a 200 or a 503, /health answers throughout`, async () => {
        const s = await startServer([]); // -np 4, --max-waiting 64
        try {
            const want = {};
            for (const p of PROMPTS) want[p] = (await stream(s, p, 256)).text;
            const health = probeHealth(s, 25);
            const t0 = performance.now();
            const results = await Promise.all(Array.from({ length: 4 * BOUND }, (_, i) => stream(s, PROMPTS[i % PROMPTS.length], 256)));
            const wall = performance.now() - t0;
            await health.stop();
            const ok = results.filter((r) => r.status === 200);
            const busy = results.filter((r) => r.status === 503);
            assert.equal(ok.length + busy.length, results.length, `other statuses: ${results.filter((r) => r.status !== 200 && r.status !== 503).map((r) => r.status)}`);
            assert.ok(ok.length >= BOUND, `${ok.length} admitted; the bound is ${BOUND}`);
            assert.ok(busy.length > 0, 'four times the bound at once: some must be refused');
            results.forEach((r, i) => {
                if (r.status === 200) {
                    assert.equal(r.end, 'done');
                    assert.equal(r.text, want[PROMPTS[i % PROMPTS.length]], 'greedy text under load equals the unloaded one');
                } else {
                    assert.equal(r.code, 'queue_full');
                    assert.ok(Number(r.retryAfter) >= 1, 'Retry-After');
                }
            });
            assert.deepEqual(health.failures, []);
            assert.ok(health.latencies.length > 0);
            const m = await metrics(s);
            assert.equal(m.get('specdec:requests_rejected_total'), busy.length);
            console.log(`hostile: ${results.length} streams in ${(wall / 1000).toFixed(1)} s: ${ok.length} x 200, ${busy.length} x 503; ` +
                `/health ${health.latencies.length} probes, p50 ${quantile(health.latencies, 0.5).toFixed(1)} ms, ` +
                `p99 ${quantile(health.latencies, 0.99).toFixed(1)} ms, max ${Math.max(...health.latencies).toFixed(1)} ms`);
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('100 slowloris sockets: a valid request completes, and the header deadline closes them', async () => {
        const s = await startServer([]);
        const closed = [];
        const slow = [];
        const silent = [];
        try {
            const want = (await stream(s, 'abc', 16)).text;
            const t0 = performance.now();
            for (let i = 0; i < 100; i++) slow.push(slowloris(s, closed));
            // And sockets that send nothing at all: closed at the deadline, with no answer.
            for (let i = 0; i < 5; i++) {
                const sock = net.connect(Number(new URL(s.url).port), '127.0.0.1');
                const x = { answer: '', closed: false };
                sock.on('error', () => {});
                sock.on('data', (d) => { x.answer += d; });
                sock.on('close', () => { x.closed = true; });
                x.destroy = () => sock.destroy();
                silent.push(x);
            }
            await sleep(1500); // every socket has sent its half header and a byte
            const r = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 16, temperature: 0 });
            assert.equal(r.status, 200, r.text);
            assert.equal(r.json.choices[0].text, want);
            assert.equal((await fetch(`${s.url}/health`, { signal: AbortSignal.timeout(5000) })).status, 200);
            console.log(`hostile: a valid request beside 100 slowloris sockets answered after ${((performance.now() - t0) / 1000 - 1.5).toFixed(2)} s`);
            // They keep trickling; the server's 10 s header deadline ends them (bounded wait: 20 s).
            const until = performance.now() + 20000;
            while ((closed.length < slow.length || silent.some((x) => !x.closed)) && performance.now() < until) await sleep(100);
            assert.equal(closed.length, slow.length, `${slow.length - closed.length} slow sockets still open after 20 s`);
            // A request that did not arrive in time is 408 Request Timeout, not 400.
            for (const x of slow) assert.match(x.answer, /^HTTP\/1\.1 408 /, x.answer);
            for (const x of silent) assert.deepEqual([x.answer, x.closed], ['', true], 'a silent socket is closed without an answer');
        } finally {
            slow.forEach((x) => x.destroy());
            silent.forEach((x) => x.destroy());
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('half-closed requests get their whole answer; a client gone entirely is cancelled', async () => {
        const s = await startServer([]);
        try {
            const req = { prompt: 'abc', max_tokens: 1500, temperature: 0 };
            const want = await post(s, '/v1/completions', req);
            assert.equal(want.status, 200, want.text);
            assert.equal(want.json.specdec.tokens.length, 1500);
            // The client shuts its write side once the request is out (socket.end()):
            // it sends nothing more and reads the answer.
            const [plain, streamed] = await Promise.all([
                rawRequest(s, { body: JSON.stringify(req), halfClose: true }),
                rawRequest(s, { body: JSON.stringify({ ...req, stream: true }), halfClose: true }),
            ]);
            assert.equal(plain.status, 200, plain.raw ?? plain.body);
            plain.interim.forEach((st) => assert.equal(st, 102)); // an interim answer may come first
            assert.deepEqual(plain.json.specdec.tokens, want.json.specdec.tokens);
            assert.equal(plain.json.choices[0].text, want.json.choices[0].text);
            assert.equal(streamed.status, 200, streamed.raw ?? streamed.body);
            const { events, done } = sseEvents(streamed.body);
            assert.ok(done, 'the stream ends with [DONE]');
            assert.equal(events.map((e) => e.choices[0]?.text ?? '').join(''), want.json.choices[0].text);
            assert.deepEqual(tokensOf(streamed), want.json.specdec.tokens);
            assert.equal(events.at(-1).choices[0].finish_reason, 'length');

            // Closed entirely (no reset: nothing was left unread) while it waits: the
            // server tells it from a half-close by writing to it, and cancels it.
            const before = await metrics(s);
            const cancelled = before.get('specdec:requests_finished_total{reason="cancelled"}');
            for (const stream of [false, true]) {
                const sock = net.connect(Number(new URL(s.url).port), '127.0.0.1');
                sock.on('error', () => {});
                const body = JSON.stringify({ ...req, max_tokens: 4000, stream });
                sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
                await waitForMetrics(s, (m) => m.get('llamacpp:requests_processing') === 1);
                sock.destroy();
                await waitForMetrics(s, (m) => m.get('llamacpp:requests_processing') === 0);
            }
            const m = await waitForMetrics(s, (x) => x.get('specdec:requests_finished_total{reason="cancelled"}') === cancelled + 2);
            assert.ok(m.get('llamacpp:tokens_predicted_total') < before.get('llamacpp:tokens_predicted_total') + 8000,
                'the closed clients\' requests did not run to their budgets');
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('a client that never reads its stream holds up no one, and the server ends it', async () => {
        const s = await startServer(['-c', '65536', '--timeout', '5']);
        let sock = null;
        try {
            const req = { prompt: 'xyz', max_tokens: 64, temperature: 0 };
            const want = (await post(s, '/v1/completions', req)).json.specdec.tokens;
            const before = await metrics(s);
            const ended = (m) => m.get('specdec:requests_finished_total{reason="cancelled"}') + m.get('specdec:requests_finished_total{reason="length"}');
            const t0 = performance.now();
            sock = neverReader(s, { prompt: 'abc', max_tokens: 60000, temperature: 0, stream: true });
            // Once its client's buffers are full it is paused: it holds its connection and no step's work.
            await waitForMetrics(s, (m) => m.get('specdec:requests_paused') === 1, 60000);
            // Meanwhile the others are served, token for token.
            for (let i = 0; i < 3; i++) {
                await sleep(500);
                const r = await post(s, '/v1/completions', req);
                assert.equal(r.status, 200, r.text);
                assert.deepEqual(r.json.specdec.tokens, want);
                assert.equal((await fetch(`${s.url}/health`, { signal: AbortSignal.timeout(5000) })).status, 200);
            }
            // It ends: its write waits --timeout (5 s) at most, then it is cancelled (bounded wait: 60 s).
            const m = await waitForMetrics(s, (x) => ended(x) === ended(before) + 4 && x.get('llamacpp:requests_processing') === 0 &&
                x.get('specdec:requests_paused') === 0, 60000);
            assert.equal(m.get('specdec:requests_finished_total{reason="cancelled"}'), before.get('specdec:requests_finished_total{reason="cancelled"}') + 1,
                'the stream nobody read was cancelled, not run to its end');
            assert.ok(m.get('llamacpp:tokens_predicted_total') < before.get('llamacpp:tokens_predicted_total') + 60000 + 3 * 64);
            console.log(`hostile: a stream nobody read ended ${((performance.now() - t0) / 1000).toFixed(1)} s after it began, ` +
                `${m.get('llamacpp:tokens_predicted_total') - before.get('llamacpp:tokens_predicted_total') - 3 * 64} tokens in`);
            // And the server still answers.
            assert.deepEqual((await post(s, '/v1/completions', req)).json.specdec.tokens, want);
        } finally {
            sock?.destroy();
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('deep and wide JSON, deep grammars and patterns: 400 naming the field, at once; the server goes on', async () => {
        const s = await startServer(['-np', '2', '-c', '512']);
        try {
            const req = { prompt: 'abc', max_tokens: 8, temperature: 0 };
            const want = (await post(s, '/v1/completions', req)).json.specdec.tokens;
            // A schema is read again from the body, keys in the order sent: only its field.
            const schema = { ...req, json_schema: { type: 'object', properties: { b: { type: 'string' }, a: { type: 'string' } } } };
            const want_schema = (await post(s, '/v1/completions', schema)).json.specdec.tokens;
            const many = Array.from({ length: 200000 }, (_, i) => `"f${i}":${i}`).join(',');
            const deep = (n) => '['.repeat(n) + ']'.repeat(n);
            const fields = (o) => JSON.stringify(o).slice(1, -1);
            const chat = (o) => JSON.stringify({ messages: [{ role: 'user', content: 'abc' }], max_tokens: 8, temperature: 0, ...o });
            const deepIn = (json, n = 100000) => json.replace('"@"', deep(n));
            const parens = (n) => '('.repeat(n) + '"a"' + ')'.repeat(n);
            const ruleChain = (n) => Array.from({ length: n }, (_, i) => `r${i} ::= r${i + 1}`).join('\n') + `\nr${n} ::= "a"`;
            const atLimit = 128; // SPECDEC_MAX_GRAMMAR_NESTING
            // Each value nested 100k deep (about 200 KB) crashed the server before
            // bounded parsing: [name, path, body, status, code, param, tokens].
            const cases = [
                ['100k [ unclosed', '/v1/completions', '['.repeat(100000), 400, 'json_too_deep', null],
                ['100k [ closed', '/v1/completions', deep(100000), 400, 'json_too_deep', null],
                ['1M { unclosed', '/v1/completions', '{"a":'.repeat(1000000), 400, 'json_too_deep', 'a'],
                ['prompt 100k deep', '/v1/completions', `{"prompt": ${deep(100000)}}`, 400, 'json_too_deep', 'prompt'],
                ['stop 100k deep', '/v1/completions', `{"prompt": "abc", "stop": ${deep(100000)}}`, 400, 'json_too_deep', 'stop'],
                ['logit_bias 100k deep', '/v1/completions', deepIn(`{"prompt": "abc", "logit_bias": {"5": "@"}}`), 400, 'json_too_deep', 'logit_bias'],
                ['json_schema 100k deep', '/v1/completions', deepIn(`{"prompt": "abc", "json_schema": {"type": "object", "x": "@"}}`), 400, 'json_too_deep', 'json_schema'],
                ['response_format schema 100k deep', '/v1/chat/completions',
                    deepIn(chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: '@' } } })), 400, 'json_too_deep', 'response_format'],
                ['tool parameters 100k deep', '/v1/chat/completions',
                    deepIn(chat({ tools: [{ type: 'function', function: { name: 'f', parameters: '@' } }] })), 400, 'json_too_deep', 'tools'],
                ['tool-call arguments text 100k deep', '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'a' },
                    { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: deep(100000) } }] }] }),
                    400, 'json_too_deep', 'messages[1].tool_calls[0].function.arguments'],
                ['grammar of 100k nested groups', '/v1/completions', JSON.stringify({ ...req, grammar: `root ::= ${parens(100000)}` }), 400, 'invalid_value', 'grammar'],
                ['grammar of 50k nested groups (under the size limit)', '/v1/completions', JSON.stringify({ ...req, grammar: `root ::= ${parens(50000)}` }), 400, 'invalid_value', 'grammar'],
                ['grammar of a 6k-rule chain', '/v1/completions', JSON.stringify({ ...req, grammar: `root ::= r0\n${ruleChain(6000)}` }), 400, 'invalid_value', 'grammar'],
                ['schema pattern of 100k nested groups', '/v1/completions',
                    JSON.stringify({ ...req, json_schema: { type: 'string', pattern: '^' + '('.repeat(100000) + 'a' + ')'.repeat(100000) + '$' } }), 400, 'invalid_value', 'json_schema'],
                ['schema pattern nested 100k deep through response_format', '/v1/chat/completions',
                    chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '('.repeat(100000) + 'a' + ')'.repeat(100000) } } } }),
                    400, 'invalid_value', 'response_format'],
                ['prompt of 200k strings', '/v1/completions', JSON.stringify({ prompt: Array(200000).fill('a') }), 400, 'invalid_value', 'prompt'], // above the prompts one request may hold
                ['stop of 200k strings', '/v1/completions', JSON.stringify({ prompt: 'abc', stop: Array(200000).fill('x') }), 400, 'invalid_value', 'stop'],
                ['100k messages', '/v1/chat/completions', JSON.stringify({ messages: Array(100000).fill({ role: 'user', content: 'a' }) }), 400, 'json_too_large', 'messages'],
                ['20k messages', '/v1/chat/completions', JSON.stringify({ messages: Array(20000).fill({ role: 'user', content: 'a' }) }), 400, 'context_length_exceeded', 'messages'],
                ['an unknown field 100k deep', '/v1/completions', `{${fields(req)}, "x": ${deep(100000)}}`, 400, 'json_too_deep', 'x'],
                ['an unknown field at the depth limit', '/v1/completions', `{${fields(req)}, "x": ${deep(127)}}`, 200, null, null],
                ['a grammar at the nesting limit', '/v1/completions', JSON.stringify({ ...req, max_tokens: 1, grammar: `root ::= ${parens(atLimit).replace('"a"', '[a-z]')}` }), 200, null, null, 'grammar'],
                ['200k unknown fields', '/v1/completions', `{${fields(req)}, ${many}}`, 200, null, null],
                ['200k unknown fields beside a JSON schema', '/v1/completions', `{${fields(schema)}, ${many}}`, 200, null, null, want_schema],
            ];
            const took = [];
            for (const [name, path, body, status, code, param, tokens = want] of cases) {
                const t0 = performance.now();
                const r = await post(s, path, body);
                const ms = performance.now() - t0;
                took.push(`${name} ${ms.toFixed(0)} ms`);
                // Generous: each takes well under a second here; 100k messages took 10 s when
                // the chat template rendered them all (under a lock every chat request shares).
                assert.ok(ms < 5000, `${name}: ${ms.toFixed(0)} ms`);
                if (status === 200) {
                    assert.equal(r.status, 200, `${name}: ${r.text}`);
                    if (tokens === 'grammar') assert.match(r.json.choices[0].text, /^[a-z]$/, name);
                    else assert.deepEqual(r.json.specdec.tokens, tokens, name);
                } else {
                    assertError(r, status, code);
                    assert.equal(r.json.error.param, param, `${name}: ${r.text.slice(0, 300)}`);
                }
                assert.equal((await fetch(`${s.url}/health`)).status, 200, `after ${name}`);
            }
            console.log(`hostile: deep and wide JSON answered in ${took.join(', ')}`);
            assert.deepEqual((await post(s, '/v1/completions', req)).json.specdec.tokens, want);
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('stop strings over the caps: 400 naming stop; at the caps they work', async () => {
        const s = await startServer(['-np', '2', '-c', '512']);
        try {
            const over = [
                { stop: 'x'.repeat(257) },
                { stop: ['a', 'y'.repeat(200 * 1024)] }, // the 200 KB
                { stop: Array.from({ length: 16 }, (_, i) => String.fromCharCode(97 + i).repeat(65)) }, // 16 x 65 = 1040 bytes in all
                { stop: Array(17).fill('z') },
            ];
            for (const extra of over) {
                const r = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 8, temperature: 0, ...extra });
                assertError(r, 400);
                assert.equal(r.json.error.param, 'stop', r.text);
            }
            // At the caps: 4 strings of 256 bytes (1024 in all), none of them met; then one that is.
            const atCap = Array.from({ length: 4 }, (_, i) => String.fromCharCode(65 + i).repeat(256));
            const plain = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 32, temperature: 0 });
            const capped = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 32, temperature: 0, stop: atCap });
            assert.equal(capped.status, 200, capped.text);
            assert.deepEqual(capped.json.specdec.tokens, plain.json.specdec.tokens);
            const text = plain.json.choices[0].text;
            const stopped = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 32, temperature: 0, stop: [...atCap.slice(0, 3), text.slice(5, 7)] });
            assert.equal(stopped.status, 200, stopped.text);
            assert.equal(stopped.json.choices[0].text, text.slice(0, 5));
            assert.equal(stopped.json.choices[0].finish_reason, 'stop');
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('SIGTERM during all of the above: every request gets a status, exit 0', async () => {
        const s = await startServer(['--shutdown-timeout', '1', '-c', '65536']);
        const closed = [];
        const slow = Array.from({ length: 20 }, () => slowloris(s, closed));
        const readers = [];
        try {
            // These first, so that they are in before the streams fill the bound.
            for (let i = 0; i < 2; i++) readers.push(neverReader(s, { prompt: 'abc', max_tokens: 60000, temperature: 0, stream: true }));
            const req = { prompt: 'hello', max_tokens: 4000, temperature: 0 };
            const halfClosed = [false, true].map((stream) => rawRequest(s, { body: JSON.stringify({ ...req, stream }), halfClose: true }));
            const deep = ['['.repeat(100000), `{"prompt": ${'['.repeat(100000)}${']'.repeat(100000)}}`]
                .map((body) => post(s, '/v1/completions', body).catch((e) => ({ status: 0, error: String(e) })));
            await waitForMetrics(s, (m) => m.get('llamacpp:requests_processing') + m.get('llamacpp:requests_deferred') === 4);
            const pending = Array.from({ length: 2 * BOUND }, (_, i) => stream(s, PROMPTS[i % PROMPTS.length], 4000).catch((e) => ({ status: 0, error: String(e) })));
            await sleep(500);
            const t0 = performance.now();
            s.proc.kill('SIGTERM');
            const results = await Promise.all(pending);
            const exit = await Promise.race([s.exitPromise, sleep(30000).then(() => 'timeout')]);
            assert.deepEqual(exit, { code: 0, signal: null }, s.log);
            for (const r of results) {
                // A status for every request: finished, cancelled at the deadline (error event), or refused.
                assert.ok(r.status === 200 || r.status === 503, JSON.stringify(r));
                if (r.status === 200) assert.ok(r.end === 'done' || r.end === 'shutting_down', JSON.stringify(r));
            }
            const [plain, streamed] = await Promise.all(halfClosed);
            assert.ok(plain.status === 200 || plain.status === 503, plain.raw ?? plain.body);
            if (plain.status === 503) assert.equal(plain.json.error.code, 'shutting_down');
            assert.equal(streamed.status, 200, streamed.raw ?? streamed.body);
            const { events, done } = sseEvents(streamed.body);
            assert.ok(done, 'the half-closed stream ends with [DONE]');
            assert.ok(events.at(-1).choices?.[0]?.finish_reason === 'length' || events.at(-1).error?.code === 'shutting_down', JSON.stringify(events.at(-1)));
            for (const r of await Promise.all(deep)) assert.ok(r.status === 400 || r.status === 503, JSON.stringify(r));
            console.log(`hostile: exited ${((performance.now() - t0) / 1000).toFixed(1)} s after SIGTERM with ${results.length} streams, ` +
                `${readers.length} unread streams, 2 half-closed requests and ${slow.length} slow sockets open`);
        } finally {
            slow.forEach((x) => x.destroy());
            readers.forEach((x) => x.destroy());
            await stopServer(s);
        }
    });
});
