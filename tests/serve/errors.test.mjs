// Every bad request gets a 4xx with OpenAI's error object, and the server
// goes on: malformed JSON, wrong types, out-of-range parameters, a prompt
// longer than the context, an unknown model, a body over the limit (413), a
// missing or wrong API key (401), a full queue (503 with Retry-After).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { OpenAI, assertError, post, sleep, startServer, stopServer } from './server.mjs';

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
        small = await startServer(['-np', '1', '--max-waiting', '1', '-c', '8192', '--api-key', 'sk-test', '--max-body', '65536']);
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
            ['/v1/completions', { prompt: 'abc', echo: true }, 400, 'unsupported_parameter'],
            ['/v1/completions', { prompt: 'abc', logit_bias: { 5: 100 } }, 400, 'unsupported_parameter'],
            ['/v1/completions', { prompt: 'abc'.repeat(600) }, 400, 'context_length_exceeded'],
            ['/v1/completions', { prompt: 'abc', model: 'gpt-4o' }, 404, 'model_not_found'],
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

    test('the official client sees typed errors', async () => {
        const c = s.client();
        await assert.rejects(c.completions.create({ model: 'exact', prompt: 'abc', temperature: 5 }),
            (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
        await assert.rejects(c.completions.create({ model: 'no-such-model', prompt: 'abc' }),
            (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
        await assert.rejects(c.completions.create({ model: 'exact', prompt: 'abc', max_tokens: -1, stream: true }),
            (e) => e instanceof OpenAI.BadRequestError);
        // A field that would change the result and is not implemented is refused, named, not ignored.
        await assert.rejects(c.chat.completions.create({ messages: [{ role: 'user', content: 'abc' }], logprobs: true, top_logprobs: 2 }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'logprobs' && e.code === 'unsupported_parameter');
        await assert.rejects(c.chat.completions.create({ messages: [{ role: 'user', content: 'abc' }], response_format: { type: 'json_object' } }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format');
        // The server still works.
        const r = await c.completions.create({ prompt: 'abc', max_tokens: 3, temperature: 0 });
        assert.equal(r.choices[0].text, 'def');
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
