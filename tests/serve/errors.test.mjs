// Every bad request gets a 4xx with OpenAI's error object, and the server
// goes on: malformed JSON, wrong types, out-of-range parameters, a prompt
// longer than the context, an unknown model, a body over the limit (413), a
// missing or wrong API key (401), a full queue (503 with Retry-After), a
// web page's request from an origin --cors-origin does not allow (403).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { OpenAI, assertError, metrics, post, rawRequest, sleep, startServer, stopServer } from './server.mjs';

// A raw POST with node:http (fetch hides what a server does mid-upload).
function rawPost(url, path, body, headers = {}) {
    return new Promise((resolve, reject) => {
        const req = http.request(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers } }, (res) => {
            let text = '';
            res.on('data', (d) => { text += d; });
            res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text, json: (() => { try { return JSON.parse(text); } catch { return null; } })() }));
        });
        req.on('error', reject);
        req.end(body);
    });
}

describe('serve errors', { timeout: 240000 }, () => {
    let s; // -c 512
    let small; // one slot, one waiting place, an API key, a small body limit

    before(async () => {
        s = await startServer(['-np', '2', '-c', '512']);
        small = await startServer(['-np', '1', '--max-waiting', '1', '-c', '8192', '--api-key', 'sk-test', '--max-body', '65536', '--strict-model']);
    });
    after(async () => {
        assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        assert.deepEqual(await stopServer(small), { code: 0, signal: null }, small.log);
    });

    test('the bad-request matrix', async () => {
        const cases = [
            ['/v1/completions', '{"prompt": "abc", ', 400, 'invalid_json'],
            ['/v1/completions', '[1, 2, 3]', 400, 'invalid_json'],
            ['/v1/completions', '{}', 400, 'missing_field'],
            ['/v1/completions', { prompt: 42 }, 400, 'invalid_type'],
            ['/v1/completions', { prompt: 'abc', max_tokens: '16' }, 400, 'invalid_type'],
            ['/v1/completions', { prompt: 'abc', stream: 1 }, 400, 'invalid_type'],
            ['/v1/completions', { prompt: 'abc', stop: 7 }, 400, 'invalid_type'],
            ['/v1/completions', { prompt: 'abc', temperature: 3 }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', temperature: -1 }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', top_p: 0 }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', top_p: 1.5 }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', max_tokens: -5 }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', min_p: 2 }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', seed: 1e12 }, 400, undefined],
            ['/v1/completions', { prompt: 'abc', n: 3 }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', stop: 'x'.repeat(257) }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', echo: 'yes' }, 400, 'invalid_type'],
            ['/v1/completions', { prompt: 'abc', suffix: 'xyz' }, 400, 'unsupported_parameter'],
            ['/v1/completions', { prompt: 'abc', logit_bias: { 5: 101 } }, 400, 'invalid_value'],
            ['/v1/completions', { prompt: 'abc', logit_bias: { 99999999: 1 } }, 400, 'invalid_value'], // the engine's check: outside the vocabulary
            ['/v1/completions', { prompt: 'abc'.repeat(600) }, 400, 'context_length_exceeded'],
            ['/v1/chat/completions', { messages: [] }, 400, 'invalid_value'],
            ['/v1/chat/completions', { messages: [{ role: 'wizard', content: 'x' }] }, 400, 'invalid_value'],
            ['/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, 400, 'invalid_value'],
            ['/v1/chat/completions', { prompt: 'abc' }, 400, 'missing_field'],
        ];
        for (const [path, body, status, code] of cases) {
            const r = await post(s, path, body);
            assertError(r, status, code);
            if (r.json.error.param !== null) assert.equal(typeof r.json.error.param, 'string');
        }
        const unknown = await fetch(`${s.url}/v1/nothing`);
        assert.equal(unknown.status, 404);
        assert.equal((await unknown.json()).error.code, 'not_found');
        // Unknown fields are ignored.
        const ok = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 4, temperature: 0, logit_bias: {}, user: 'u', frobnicate: [1] });
        assert.equal(ok.status, 200, ok.text);
        assert.equal(ok.json.choices[0].text, 'defg');
    });

    test('text the vocabulary lacks is a 400 naming the character, and the server goes on', async () => {
        // The fixture's vocabulary is printable ASCII: no newline, no 'é'.
        for (const [prompt, says] of [['ab\ncd', 'the character 0x0A at byte 2 has no token'],
                                      ['café', "the character 'é' (0xC3 0xA9) at byte 3 has no token"]]) {
            const r = await post(s, '/v1/completions', { prompt, max_tokens: 2 });
            assertError(r, 400, 'invalid_value');
            assert.equal(r.json.error.param, 'prompt');
            assert.ok(r.json.error.message.includes(says), r.text);
        }
        const ok = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 2 });
        assert.equal(ok.status, 200, ok.text);
    });

    test('the official client sees typed errors', async () => {
        const c = s.client();
        await assert.rejects(c.completions.create({ model: 'exact', prompt: 'abc', temperature: 5 }),
            (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
        // Any model name is served, as llama-server serves it (clients send their default, e.g. gpt-4o-mini) ...
        const other = await c.completions.create({ model: 'gpt-4o-mini', prompt: 'abc', max_tokens: 2 });
        assert.equal(other.choices[0].text.length > 0, true);
        // ... unless the server is started with --strict-model.
        await assert.rejects(small.client({ apiKey: 'sk-test' }).completions.create({ model: 'no-such-model', prompt: 'abc' }),
            (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
        await assert.rejects(c.completions.create({ model: 'exact', prompt: 'abc', max_tokens: -1, stream: true }),
            (e) => e instanceof OpenAI.BadRequestError);
        // A field that would change the result and is not implemented is refused, named, not ignored:
        // the legacy functions, and tools where the model's chat template writes no tool calls (this fixture's).
        await assert.rejects(c.chat.completions.create({ messages: [{ role: 'user', content: 'abc' }],
                                                        functions: [{ name: 'f' }] }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'functions' && e.code === 'unsupported_parameter');
        await assert.rejects(c.chat.completions.create({ messages: [{ role: 'user', content: 'abc' }],
                                                        tools: [{ type: 'function', function: { name: 'f' } }] }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools' && e.code === 'unsupported_parameter');
        await assert.rejects(c.chat.completions.create({ messages: [{ role: 'user', content: 'abc' }], top_logprobs: 2 }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_logprobs'); // needs logprobs: true
        await assert.rejects(c.chat.completions.create({ messages: [{ role: 'user', content: 'abc' }], response_format: { type: 'yaml' } }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format');
        // The server still works.
        const r = await c.completions.create({ prompt: 'abc', max_tokens: 3, temperature: 0 });
        assert.equal(r.choices[0].text, 'def');
    });

    test('a web page of another origin is refused with 403 before any work; no Origin, or this server\'s own address, passes', async () => {
        const port = new URL(s.url).port;
        const body = JSON.stringify({ prompt: 'abc', max_tokens: 4, temperature: 0 });
        const before = await metrics(s);
        const refused = [
            ['POST', '/v1/completions', { Origin: 'http://evil.example' }],
            ['POST', '/v1/completions', { Origin: 'http://evil.example', 'Content-Type': 'text/plain' }], // a form-like "simple" request: no preflight
            ['POST', '/v1/chat/completions', { Origin: 'null' }], // a sandboxed page or a file
            ['POST', '/v1/completions', { Origin: `http://localhost:${Number(port) + 1}` }], // another port is another origin
            // DNS rebinding: the attacker's name now points at 127.0.0.1, so Host and Origin agree; a name is not an address.
            ['POST', '/v1/completions', { Origin: `http://evil.example:${port}`, Host: `evil.example:${port}` }],
            ['OPTIONS', '/v1/completions', { Origin: 'http://evil.example', 'Access-Control-Request-Method': 'POST' }],
            ['GET', '/v1/models', { Origin: 'http://evil.example' }],
            ['GET', '/metrics', { Origin: 'http://evil.example' }],
        ];
        for (const [method, path, headers] of refused) {
            const r = await rawRequest(s, { method, path, body: method === 'POST' ? body : '', headers });
            assert.equal(r.status, 403, `${method} ${path} ${JSON.stringify(headers)}: ${r.body}`);
            assert.equal(r.json.error.code, 'origin_not_allowed');
            assert.equal(r.json.error.type, 'permission_error');
            assert.equal(r.headers['access-control-allow-origin'], undefined);
        }
        const after = await metrics(s);
        assert.equal(after.get('llamacpp:tokens_predicted_total'), before.get('llamacpp:tokens_predicted_total'), 'nothing refused ran');
        // Without Origin (curl, SDKs), and from this server's own address, by IP or localhost: served.
        for (const headers of [{}, { Origin: `http://127.0.0.1:${port}` }, { Origin: `http://localhost:${port}`, Host: `localhost:${port}` }]) {
            const r = await rawRequest(s, { body, headers });
            assert.equal(r.status, 200, `${JSON.stringify(headers)}: ${r.body}`);
            assert.equal(r.json.choices[0].text, 'defg');
            assert.equal(r.headers['access-control-allow-origin'], undefined, 'no CORS headers without --cors-origin');
        }
        assert.equal((await rawRequest(s, { method: 'OPTIONS', path: '/v1/completions' })).status, 204);
    });

    test('--cors-origin: listed origins are served with CORS headers and preflights; others still get 403', async () => {
        const cors = await startServer(['-np', '1', '-c', '512', '--api-key', 'sk-test', '--cors-origin', 'http://app.example', '--cors-origin', 'HTTPS://Other.example:8443/']);
        const any = await startServer(['-np', '1', '-c', '512', '--cors-origin', '*']);
        try {
            const auth = { Authorization: 'Bearer sk-test' };
            const body = JSON.stringify({ prompt: 'abc', max_tokens: 4, temperature: 0 });
            // The preflight carries no API key; the answer allows the headers asked for (Authorization too).
            const pre = await rawRequest(cors, {
                method: 'OPTIONS', path: '/v1/chat/completions',
                headers: { Origin: 'http://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' },
            });
            assert.equal(pre.status, 204, pre.body);
            assert.equal(pre.headers['access-control-allow-origin'], 'http://app.example');
            assert.match(pre.headers['access-control-allow-methods'], /POST/);
            assert.equal(pre.headers['access-control-allow-headers'], 'authorization, content-type');
            assert.equal(pre.headers.vary, 'Origin');
            // The request itself, plain and streamed, and its errors (the page must be able to read them).
            const ok = await rawRequest(cors, { body, headers: { ...auth, Origin: 'https://other.example:8443' } });
            assert.equal(ok.status, 200, ok.body);
            assert.equal(ok.json.choices[0].text, 'defg');
            assert.equal(ok.headers['access-control-allow-origin'], 'https://other.example:8443');
            assert.equal(ok.headers['access-control-expose-headers'], 'Retry-After');
            const streamed = await rawRequest(cors, { body: JSON.stringify({ prompt: 'abc', max_tokens: 4, temperature: 0, stream: true }), headers: { ...auth, Origin: 'http://app.example' } });
            assert.equal(streamed.status, 200, streamed.body);
            assert.equal(streamed.headers['access-control-allow-origin'], 'http://app.example');
            assert.match(streamed.body, /data: \[DONE\]/);
            const noKey = await rawRequest(cors, { body, headers: { Origin: 'http://app.example' } });
            assert.equal(noKey.status, 401, noKey.body);
            assert.equal(noKey.headers['access-control-allow-origin'], 'http://app.example');
            const unlisted = await rawRequest(cors, { body, headers: { ...auth, Origin: 'http://evil.example' } });
            assert.equal(unlisted.status, 403, unlisted.body);
            assert.equal(unlisted.headers['access-control-allow-origin'], undefined);
            // "*": any origin, and the answers say so.
            const star = await rawRequest(any, { body, headers: { Origin: 'http://evil.example' } });
            assert.equal(star.status, 200, star.body);
            assert.equal(star.headers['access-control-allow-origin'], '*');
        } finally {
            assert.deepEqual(await stopServer(cors), { code: 0, signal: null }, cors.log);
            assert.deepEqual(await stopServer(any), { code: 0, signal: null }, any.log);
        }
    });

    test('--cors-origin takes an origin, nothing else', () => {
        for (const bad of ['app.example', 'http://app.example/path', 'ftp://app.example', 'http://app.example:port']) {
            const r = spawnSync(process.env.SPECDEC_BIN, ['serve', '-m', process.env.SPECDEC_MODEL, '--port', '0', '--cors-origin', bad], { encoding: 'utf8', timeout: 30000 });
            assert.equal(r.status, 2, `${bad}: ${r.stderr}`);
            assert.match(r.stderr, /--cors-origin: expected \*, null or http\[s\]:\/\/host\[:port\]/);
        }
    });

    test('a port in use is an error (exit 1), not a second server on it', () => {
        const port = new URL(s.url).port;
        const r = spawnSync(process.env.SPECDEC_BIN, ['serve', '-m', process.env.SPECDEC_MODEL, '--port', port, '-t', '1'],
            { encoding: 'utf8', timeout: 30000 });
        assert.equal(r.status, 1, r.stderr);
        assert.match(r.stderr, /IO_ERROR: cannot listen on 127\.0\.0\.1:/);
    });

    test('a model llama.cpp would abort on at the first request: exit 1 before listening', () => {
        // The fixture with its rope wider than its heads (run.sh): llama.cpp
        // loads it and asserts in the first decode.
        const r = spawnSync(process.env.SPECDEC_BIN, ['serve', '-m', process.env.SPECDEC_BAD_MODEL, '--port', '0', '-t', '1'],
            { encoding: 'utf8', timeout: 60000 });
        assert.equal(r.status, 1, r.stderr);
        assert.doesNotMatch(r.stderr, /listening on/);
        assert.match(r.stderr, /MALFORMED_FILE: .*rope\.dimension_count is 128, above the head size 64/);
    });

    test('a body over --max-body is refused with 413', async () => {
        const body = JSON.stringify({ prompt: 'a'.repeat(100000) });
        const r = await rawPost(small.url, '/v1/completions', body, { Authorization: 'Bearer sk-test' });
        assert.equal(r.status, 413, r.text);
        assert.equal(r.json.error.code, 'payload_too_large');
    });

    test('the API key: 401 without or with a wrong one, /health stays open', async () => {
        assertError(await post(small, '/v1/completions', { prompt: 'abc', max_tokens: 2 }), 401, 'invalid_api_key');
        assertError(await post(small, '/v1/completions', { prompt: 'abc', max_tokens: 2 }, { Authorization: 'Bearer sk-wrong' }), 401, 'invalid_api_key');
        assert.equal((await fetch(`${small.url}/metrics`)).status, 401);
        assert.equal((await fetch(`${small.url}/v1/models`)).status, 401);
        assert.equal((await fetch(`${small.url}/health`)).status, 200);
        await assert.rejects(small.client({ apiKey: 'sk-wrong' }).completions.create({ prompt: 'abc', max_tokens: 2 }),
            (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
        const r = await small.client({ apiKey: 'sk-test' }).completions.create({ prompt: 'abc', max_tokens: 2, temperature: 0 });
        assert.equal(r.choices[0].text, 'de');
    });

    test('overload: 503 with Retry-After when the slot and the queue are taken', async () => {
        const c = small.client({ apiKey: 'sk-test' });
        const ac = new AbortController();
        const bc = new AbortController();
        // A runs (a long budget), B waits for the one slot: the queue (--max-waiting 1) is full.
        const a = await c.completions.create({ prompt: 'abc', max_tokens: 8000, temperature: 0, stream: true }, { signal: ac.signal });
        const ai = a[Symbol.asyncIterator]();
        await ai.next(); // A has its slot and streams
        const b = await c.completions.create({ prompt: 'xyz', max_tokens: 8, temperature: 0, stream: true }, { signal: bc.signal });
        const r = await post(small, '/v1/completions', { prompt: 'abc', max_tokens: 4 }, { Authorization: 'Bearer sk-test' });
        assertError(r, 503, 'queue_full');
        assert.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After');
        await assert.rejects(c.completions.create({ prompt: 'abc', max_tokens: 4 }), (e) => e.status === 503);
        const m = await fetch(`${small.url}/metrics`, { headers: { Authorization: 'Bearer sk-test' } });
        assert.match(await m.text(), /specdec:requests_rejected_total [1-9]/);
        ac.abort(); // A leaves; B runs to its end
        let text = '';
        for await (const chunk of b) text += chunk.choices[0]?.text ?? '';
        assert.equal(text, (await c.completions.create({ prompt: 'xyz', max_tokens: 8, temperature: 0 })).choices[0].text);
        await sleep(10);
    });
});
