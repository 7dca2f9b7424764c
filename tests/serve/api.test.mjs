// The OpenAI endpoints through the official client: completions and chat,
// streaming and not, equal to plain decoding; aborting a stream cancels the
// request; staggered concurrent streams each equal plain decoding; /metrics
// moves; /v1/models and /health; n choices and several prompts in one request.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MODEL_ID, assertError, collect, metrics, post, reference, sleep, startServer, stopServer, waitForMetrics } from './server.mjs';

describe('serve api', { timeout: 240000 }, () => {
    let spec; // MTP with the exact drafter, 4 slots
    let plain; // --spec none, the reference
    let plainOf;

    before(async () => {
        spec = await startServer(['-np', '4', '-c', '2048']);
        plain = await startServer(['--spec', 'none', '-np', '2', '-c', '2048']);
        plainOf = reference(plain);
    });
    after(async () => {
        const a = await stopServer(spec);
        const b = await stopServer(plain);
        assert.deepEqual(a, { code: 0, signal: null }, spec.log);
        assert.deepEqual(b, { code: 0, signal: null }, plain.log);
    });

    test('health and models', async () => {
        const h = await fetch(`${spec.url}/health`);
        assert.equal(h.status, 200);
        assert.deepEqual(await h.json(), { status: 'ok' });
        const models = await spec.client().models.list();
        assert.deepEqual(models.data.map((m) => m.id), [MODEL_ID]);
    });

    test('completion equals plain decoding, with statistics', async () => {
        const req = { model: MODEL_ID, prompt: 'hello world', max_tokens: 40, temperature: 0 };
        const r = await spec.client().completions.create(req);
        const want = await plainOf(req);
        assert.equal(r.object, 'text_completion');
        assert.equal(r.model, MODEL_ID);
        assert.equal(r.choices[0].text, want.text);
        assert.deepEqual(r.specdec.tokens, want.tokens);
        assert.equal(r.choices[0].finish_reason, 'length');
        assert.equal(r.usage.completion_tokens, 40);
        assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 40);
        assert.equal(r.specdec.strategy, 'mtp');
        assert.ok(r.specdec.drafted > 0 && r.specdec.accepted === r.specdec.drafted, JSON.stringify(r.specdec)); // the exact drafter
        assert.ok(r.specdec.steps < 40);
        assert.equal(r.specdec.acceptance_by_position[0], 1);
        // The plain server drafts nothing.
        const p = await plain.client().completions.create(req);
        assert.equal(p.specdec.strategy, 'none');
        assert.equal(p.specdec.drafted, 0);
        assert.equal(p.specdec.steps, 40);
    });

    test('streamed completion equals the non-streamed one', async () => {
        const req = { prompt: 'abc', max_tokens: 60, temperature: 0 };
        const stream = await spec.client().completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
        const got = await collect(stream);
        const want = await plainOf(req);
        assert.equal(got.text, want.text);
        assert.ok(got.chunks >= 3, `${got.chunks} chunks`);
        assert.equal(got.finished.choices[0].finish_reason, 'length');
        assert.equal(got.finished.usage, null, 'the usage comes in a chunk of its own');
        assert.equal(got.usage.completion_tokens, 60);
        assert.deepEqual(got.last.choices, [], 'the usage chunk has no choices');
        assert.deepEqual(got.finished.specdec.tokens, want.tokens);
        assert.ok(got.finished.specdec.accepted > 0);
        // Without include_usage, no chunk carries a usage.
        const bare = await collect(await spec.client().completions.create({ ...req, stream: true }));
        assert.equal(bare.usage, null);
        assert.equal(bare.last.choices[0].finish_reason, 'length');
    });

    test('log-probabilities equal plain decoding\'s, streamed or not, in both shapes', async () => {
        const req = { model: MODEL_ID, prompt: 'hello world', max_tokens: 20, temperature: 0, logprobs: 3 };
        const got = await spec.client().completions.create(req);
        const want = await plain.client().completions.create(req);
        const lp = got.choices[0].logprobs;
        assert.equal(lp.tokens.length, 20);
        assert.equal(lp.tokens.join(''), got.choices[0].text);
        assert.deepEqual(lp, want.choices[0].logprobs, 'the MTP server reports what the plain one does');
        for (const [i, top] of lp.top_logprobs.entries()) {
            assert.equal(Object.keys(top).length, 3);
            assert.ok(lp.token_logprobs[i] <= 0 && lp.token_logprobs[i] >= Math.max(...Object.values(top)) - 1e-6, JSON.stringify(top));
        }
        assert.deepEqual(lp.text_offset, lp.tokens.map((_, i) => lp.tokens.slice(0, i).join('').length));
        const streamed = await collect(await spec.client().completions.create({ ...req, stream: true }));
        assert.deepEqual(streamed.logprobs.map((x) => x.logprob), lp.token_logprobs);
        assert.deepEqual(streamed.logprobs.map((x) => x.offset), lp.text_offset);

        const chat = { model: MODEL_ID, messages: [{ role: 'user', content: 'abc' }], max_tokens: 12, temperature: 0, logprobs: true,
                       top_logprobs: 2 };
        const c = await spec.client().chat.completions.create(chat);
        const p = await plain.client().chat.completions.create(chat);
        assert.equal(c.choices[0].logprobs.content.length, 12);
        assert.deepEqual(c.choices[0].logprobs, p.choices[0].logprobs);
        for (const e of c.choices[0].logprobs.content) {
            assert.equal(e.top_logprobs.length, 2);
            assert.equal(e.top_logprobs[0].token, e.token, 'greedy: the most likely token');
            assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
        }
        const cs = await collect(await spec.client().chat.completions.create({ ...chat, stream: true }));
        assert.deepEqual(cs.logprobs, c.choices[0].logprobs.content);
        // echo scores the prompt, as evaluation harnesses use it (max_tokens 0: the prompt alone).
        for (const max_tokens of [0, 5]) {
            const e = { model: MODEL_ID, prompt: 'hello world', max_tokens, temperature: 0, echo: true, logprobs: 1 };
            const r = await spec.client().completions.create(e);
            const w = await plain.client().completions.create(e);
            assert.deepEqual(r.choices[0].logprobs, w.choices[0].logprobs);
            assert.equal(r.choices[0].text, w.choices[0].text);
            assert.ok(r.choices[0].text.startsWith('hello world'), r.choices[0].text);
            const elp = r.choices[0].logprobs;
            assert.equal(elp.tokens.length, r.usage.prompt_tokens + max_tokens);
            assert.equal(elp.token_logprobs[0], null);
            assert.equal(elp.top_logprobs[0], null);
            assert.ok(elp.token_logprobs.slice(1).every((x) => typeof x === 'number' && x <= 0), JSON.stringify(elp.token_logprobs));
        }
        // Echo without logprobs streams the prompt first.
        const es = await collect(await spec.client().completions.create({ ...req, logprobs: undefined, echo: true, stream: true }));
        assert.equal(es.text, 'hello world' + got.choices[0].text);
        // Not asked for: null, as OpenAI's.
        assert.equal((await spec.client().completions.create({ ...req, logprobs: undefined })).choices[0].logprobs, null);
    });

    test('grammars, JSON mode, logit biases and penalties: what plain decoding gives under them', async () => {
        const base = { model: MODEL_ID, prompt: 'hello world', max_tokens: 24, temperature: 0 };
        const free = await spec.client().completions.create(base);
        const cases = [
            { grammar: 'root ::= "{" [a-f]+ "}"' },
            { response_format: { type: 'json_object' } },
            { response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] } } } },
            { logit_bias: { [String(free.specdec.tokens[0])]: -100 }, frequency_penalty: 1.5, presence_penalty: 0.5 },
        ];
        for (const extra of cases) {
            const req = { ...base, ...extra };
            const got = await spec.client().completions.create(req);
            const want = await plain.client().completions.create(req);
            assert.deepEqual(got.specdec.tokens, want.specdec.tokens, JSON.stringify(extra));
            assert.notDeepEqual(got.specdec.tokens, free.specdec.tokens, `${JSON.stringify(extra)} changed nothing`);
            if (extra.grammar) assert.match(got.choices[0].text, /^\{[a-f]+\}?$/);
            if (extra.response_format) assert.match(got.choices[0].text, /^\s*\{/, got.choices[0].text);
            if (extra.logit_bias) assert.ok(!got.specdec.tokens.includes(free.specdec.tokens[0]));
        }
        // A grammar that does not parse is refused up front.
        await assert.rejects(spec.client().completions.create({ ...base, grammar: 'root ::= (' }),
            (e) => e.status === 400 && /grammar/.test(e.message));
    });

    test('stop strings: the text ends before the stop', async () => {
        const req = { prompt: 'abc', max_tokens: 40, temperature: 0, stop: ['gh', 'xyz'] };
        const r = await spec.client().completions.create(req);
        assert.equal(r.choices[0].text, 'def');
        assert.equal(r.choices[0].finish_reason, 'stop');
        const s = await collect(await spec.client().completions.create({ ...req, stream: true }));
        assert.equal(s.text, 'def');
        assert.equal(s.last.choices[0].finish_reason, 'stop');
    });

    test('seeded sampling equals plain decoding with the same seed', async () => {
        const req = { prompt: 'abc', max_tokens: 30, temperature: 1.5, top_k: 20, seed: 7, speculative_accept: 'exact' };
        const a = await spec.client().completions.create(req);
        const b = await plain.client().completions.create(req);
        assert.deepEqual(a.specdec.tokens, b.specdec.tokens);
        assert.equal(a.choices[0].text, b.choices[0].text);
    });

    test('--seed: a request that names no seed samples with the server\'s; /props shows it', async () => {
        const seeded = await startServer(['--spec', 'none', '-np', '1', '--seed', '7']);
        try {
            const req = { prompt: 'abc', max_tokens: 30, temperature: 2 }; // hot enough for seeds 7 and 8 to differ
            const a = await seeded.client().completions.create(req);
            const b = await seeded.client().completions.create(req);
            assert.deepEqual(a.specdec.tokens, b.specdec.tokens);
            assert.deepEqual(a.specdec.tokens, (await plain.client().completions.create({ ...req, seed: 7 })).specdec.tokens);
            assert.notDeepEqual(a.specdec.tokens, (await plain.client().completions.create({ ...req, seed: 8 })).specdec.tokens);
            assert.equal((await (await fetch(`${seeded.url}/props`)).json()).default_generation_settings.params.seed, 7);
            assert.equal((await (await fetch(`${plain.url}/props`)).json()).default_generation_settings.params.seed, 4294967295);
        } finally {
            assert.deepEqual(await stopServer(seeded), { code: 0, signal: null }, seeded.log);
        }
    });

    test('--log-file: the log also goes to the file, appended', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'specdec-log-'));
        const file = join(dir, 'serve.log');
        writeFileSync(file, 'before\n');
        const logged = await startServer(['--spec', 'none', '-np', '1', '-v', '--log-file', file]);
        try {
            assert.equal((await post(logged, '/v1/completions', { prompt: 'abc', max_tokens: 2 })).status, 200);
        } finally {
            assert.deepEqual(await stopServer(logged), { code: 0, signal: null }, logged.log);
        }
        const text = readFileSync(file, 'utf8');
        assert.ok(text.startsWith('before\n'), text);
        for (const line of ['specdec serve: listening on http://127.0.0.1:', 'POST /v1/completions', 'specdec serve: stopped']) {
            assert.ok(text.includes(line), `${line} in ${text}`);
        }
        assert.ok(logged.log.includes('specdec serve: stopped'), 'stderr keeps the log');
        rmSync(dir, { recursive: true });
        await assert.rejects(startServer(['--log-file', join(dir, 'no', 'such', 'dir', 'x.log')]), /cannot open --log-file/);
    });

    test('--draft-vocab-counts: what the server generated ranks its draft vocabulary, kept across runs; the output unchanged', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'specdec-counts-'));
        const file = join(dir, 'counts.txt');
        const args = ['-np', '1', '-c', '1024', '--n-draft', '4', '--draft-vocab', '16', '--draft-vocab-counts', file, '-v'];
        // 'abc' continues d .. w: none of them among the tokenizer's first 16 ids.
        const req = { model: MODEL_ID, prompt: 'abc', max_tokens: 20, temperature: 0 };
        const want = await plainOf(req);
        const counted = (text) => text.split('\n').filter((l) => /^[0-9]+ [0-9]+$/.test(l)).map((l) => l.split(' ').map(Number));
        let s = await startServer(args);
        try {
            const created = readFileSync(file, 'utf8');
            assert.match(created, /^vocabulary 128$/m);
            assert.deepEqual(counted(created), []);
            const first = await s.client().completions.create(req);
            assert.deepEqual(first.specdec.tokens, want.tokens);
            assert.equal(first.specdec.accepted, 0, JSON.stringify(first.specdec));
            // 13 x 20 tokens reach the first re-ranking (256): the 16 most generated enter, in place of all 16.
            for (let i = 1; i < 13; ++i) {
                assert.deepEqual((await s.client().completions.create(req)).specdec.tokens, want.tokens);
            }
            // Re-ranked between steps, after the step that answered the 13th.
            for (let i = 0; i < 100 && !/draft vocabulary counts: 260/.test(s.log); ++i) await sleep(50);
            assert.match(s.log, /draft vocabulary counts: 260 tokens, 16 of the 16 drafted entered/);
            const ranked = counted(readFileSync(file, 'utf8'));
            assert.equal(ranked.length, 20);
            assert.deepEqual([...new Set(ranked.map(([, n]) => n))], [13]);
            assert.deepEqual(ranked.map(([id]) => id).sort((a, b) => a - b), [...want.tokens].sort((a, b) => a - b));
            const after = await s.client().completions.create(req);
            assert.deepEqual(after.specdec.tokens, want.tokens);
            assert.ok(after.specdec.accepted >= 10, JSON.stringify(after.specdec));
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
        // Written at exit (14 requests), read at the next start: drafts are accepted from the first request on.
        assert.deepEqual([...new Set(counted(readFileSync(file, 'utf8')).map(([, n]) => n))], [14]);
        s = await startServer(args);
        try {
            assert.match(s.log, /draft vocabulary counts: 280 tokens, 16 of the 16 drafted entered/);
            const again = await s.client().completions.create(req);
            assert.deepEqual(again.specdec.tokens, want.tokens);
            assert.ok(again.specdec.accepted >= 10, JSON.stringify(again.specdec));
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
        // Refused at start: a file of another vocabulary, a malformed line, a ranking file by mistake, no restriction to rank, two rankings.
        const refused = [
            ['# x\nvocabulary 151936\n', /counts.txt:2: counted over a vocabulary of 151936 tokens, but the model's has 128/],
            ['vocabulary 128\n5 2\n5 1\n', /counts.txt:3: token 5 was counted before/],
            ['vocabulary 128\n5 -2\n', /counts.txt:2: expected 'TOKEN_ID COUNT', not '5 -2'/],
            ['vocabulary 128\n500 2\n', /counts.txt:2: token 500 is outside the vocabulary of 128 tokens/],
            ['5 6 7\n', /counts.txt:1: expected 'vocabulary N' before the counts/],
        ];
        for (const [text, message] of refused) {
            writeFileSync(file, text);
            await assert.rejects(startServer(args), message);
            assert.equal(readFileSync(file, 'utf8'), text, 'a refused file is left as it was');
        }
        await assert.rejects(startServer(['--draft-vocab-counts', file]), /give --draft-vocab N or auto too/);
        writeFileSync(join(dir, 'ranking.txt'), '5 6 7\n');
        await assert.rejects(startServer([...args, '--draft-vocab-file', join(dir, 'ranking.txt')]), /give one/);
        // Counts of text like the output (`specdec rank-vocab`, the same form) start a server ranked: drafts are accepted at once.
        writeFileSync(join(dir, 'text.txt'), want.text);
        const ranked = spawnSync(process.env.SPECDEC_BIN, ['rank-vocab', '-q', '-m', process.env.SPECDEC_MODEL, join(dir, 'text.txt'), '-o', file],
            { encoding: 'utf8', timeout: 30000 });
        assert.equal(ranked.status, 0, ranked.stderr);
        s = await startServer(args);
        try {
            // 21 tokens: the text, and the word separator the tokenizer puts before it (one of the 16 already ranked first).
            assert.match(s.log, /draft vocabulary counts: 21 tokens, 15 of the 16 drafted entered/);
            const seeded = await s.client().completions.create(req);
            assert.deepEqual(seeded.specdec.tokens, want.tokens);
            assert.ok(seeded.specdec.accepted >= 10, JSON.stringify(seeded.specdec));
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
        rmSync(dir, { recursive: true });
    });

    test('verbose: the answer carries __verbose, llama-server\'s native answer with the prompt\'s text; -vv makes it the default', async () => {
        const chat = { messages: [{ role: 'user', content: 'count' }], max_tokens: 8, temperature: 0 };
        const r = await post(spec, '/v1/chat/completions', { ...chat, verbose: true });
        assert.equal(r.status, 200, r.text);
        const v = r.json.__verbose;
        const templated = (await post(spec, '/apply-template', chat)).json.prompt;
        assert.ok(v.prompt.endsWith(templated), `${v.prompt} / ${templated}`);
        assert.equal(v.content, r.json.choices[0].message.content);
        assert.equal(v.tokens_predicted, 8);
        assert.equal(v.tokens_evaluated, r.json.usage.prompt_tokens);
        assert.equal(v.generation_settings.n_predict, 8);
        assert.equal((await post(spec, '/v1/chat/completions', chat)).json.__verbose, undefined, 'only when asked');
        const c = await post(spec, '/v1/completions', { prompt: 'abc', max_tokens: 4, temperature: 0, stop: ['f'], verbose: true });
        assert.equal(c.json.__verbose.content, 'de');
        assert.equal(c.json.__verbose.stopping_word, 'f');
        assert.ok(c.json.__verbose.prompt.endsWith('abc'), c.json.__verbose.prompt);
        const loud = await startServer(['--spec', 'none', '-np', '1', '-vv']);
        try {
            assert.ok((await post(loud, '/v1/completions', { prompt: 'abc', max_tokens: 2 })).json.__verbose);
            assert.equal((await post(loud, '/v1/completions', { prompt: 'abc', max_tokens: 2, verbose: false })).json.__verbose, undefined);
        } finally {
            assert.deepEqual(await stopServer(loud), { code: 0, signal: null }, loud.log);
        }
    });

    test('the accept mode: asked per request, reported per response and in /metrics', async () => {
        const sampled = { prompt: 'abc', max_tokens: 24, temperature: 1.5, top_k: 20, seed: 11 };
        const counted = (m) => m.get('specdec:requests_rejection_sampled_total');
        const before = counted(await metrics(spec));
        const r = await spec.client().completions.create(sampled); // the server's default
        assert.equal(r.specdec.accept, 'rejection');
        assert.equal(r.usage.completion_tokens, 24);
        // Seeded per position: the same request draws the same tokens again.
        const again = await spec.client().completions.create({ ...sampled, speculative_accept: 'rejection' });
        assert.deepEqual(again.specdec.tokens, r.specdec.tokens);
        await waitForMetrics(spec, (m) => counted(m) === before + 2);
        // Exact matching when asked: seed for seed plain decoding's tokens.
        const exact = await spec.client().completions.create({ ...sampled, speculative_accept: 'exact' });
        assert.equal(exact.specdec.accept, 'exact');
        assert.deepEqual(exact.specdec.tokens, (await plain.client().completions.create(sampled)).specdec.tokens);
        // Greedy requests are exact in either mode.
        const greedy = { prompt: 'hello world', max_tokens: 16, temperature: 0 };
        const g = await spec.client().completions.create(greedy);
        assert.equal(g.specdec.accept, 'exact');
        assert.deepEqual(g.specdec.tokens, (await plainOf(greedy)).tokens);
        await assert.rejects(spec.client().completions.create({ ...sampled, speculative_accept: 'fast' }),
            (e) => e.status === 400 && /speculative_accept/.test(e.message));
    });

    test('chat completion, streaming and not, through the chat template', async () => {
        const req = { model: MODEL_ID, messages: [{ role: 'system', content: 'terse' }, { role: 'user', content: 'hi' }], max_tokens: 24, temperature: 0 };
        const r = await spec.client().chat.completions.create(req);
        assert.equal(r.object, 'chat.completion');
        assert.equal(r.choices[0].message.role, 'assistant');
        assert.equal(typeof r.choices[0].message.content, 'string');
        assert.equal(r.usage.completion_tokens, 24);
        assert.ok(r.usage.prompt_tokens > 4, 'the template adds its markup to the prompt');
        const p = await plain.client().chat.completions.create(req);
        assert.equal(r.choices[0].message.content, p.choices[0].message.content);
        assert.deepEqual(r.specdec.tokens, p.specdec.tokens);

        assert.match(r.system_fingerprint, /^b/, "llama-server's b<build>-<commit> form");
        const stream = await spec.client().chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
        let text = '';
        let role = null;
        let last = null;
        let finish = null;
        let n = 0;
        for await (const chunk of stream) {
            const d = chunk.choices[0]?.delta ?? {};
            if (n++ === 0) {
                // As llama-server and OpenAI: the role alone first, content null; never again.
                assert.deepEqual(d, { role: 'assistant', content: null });
            } else {
                assert.ok(!('role' in d), JSON.stringify(chunk));
            }
            assert.equal(chunk.system_fingerprint, r.system_fingerprint);
            if (d.role) role = d.role;
            text += d.content ?? '';
            finish = chunk.choices[0]?.finish_reason ?? finish;
            last = chunk;
        }
        assert.equal(role, 'assistant');
        assert.equal(last.object, 'chat.completion.chunk');
        assert.equal(text, r.choices[0].message.content);
        assert.equal(finish, 'length');
        assert.equal(last.usage.completion_tokens, 24);
    });

    test('aborting a stream cancels its request; the next one works', async () => {
        const before = await metrics(spec);
        const cancelledBefore = before.get('specdec:requests_finished_total{reason="cancelled"}');
        const controller = new AbortController();
        const stream = await spec.client().completions.create(
            { prompt: 'abc', max_tokens: 2000, temperature: 0, stream: true }, { signal: controller.signal });
        let chunks = 0;
        let last = null;
        try {
            for await (const chunk of stream) { // the client ends the iteration quietly on abort
                chunks += 1;
                last = chunk;
                if (chunks === 3) {
                    controller.abort();
                    break;
                }
            }
        } catch (e) {
            assert.equal(e.name, 'AbortError', String(e));
        }
        assert.ok(chunks >= 3);
        assert.equal(last.choices[0].finish_reason, null, 'the stream was cut before its end');
        const m = await waitForMetrics(spec, (x) => x.get('specdec:requests_finished_total{reason="cancelled"}') === cancelledBefore + 1
            && x.get('llamacpp:requests_processing') === 0);
        assert.ok(m.get('llamacpp:tokens_predicted_total') < before.get('llamacpp:tokens_predicted_total') + 2000,
            'the cancelled request did not run to its budget');
        const req = { prompt: 'xyz', max_tokens: 20, temperature: 0 };
        const r = await spec.client().completions.create(req);
        assert.equal(r.choices[0].text, (await plainOf(req)).text);
    });

    test('a non-streaming request whose client goes away is cancelled too', async () => {
        const before = await metrics(spec);
        const cancelledBefore = before.get('specdec:requests_finished_total{reason="cancelled"}');
        const controller = new AbortController();
        const pending = spec.client().completions.create({ prompt: 'abc', max_tokens: 2000, temperature: 0 }, { signal: controller.signal });
        await waitForMetrics(spec, (x) => x.get('llamacpp:requests_processing') === 1);
        controller.abort();
        await assert.rejects(pending, (e) => e.name === 'APIUserAbortError' || /abort/i.test(String(e)));
        const m = await waitForMetrics(spec, (x) => x.get('specdec:requests_finished_total{reason="cancelled"}') === cancelledBefore + 1
            && x.get('llamacpp:requests_processing') === 0);
        assert.ok(m.get('llamacpp:tokens_predicted_total') < before.get('llamacpp:tokens_predicted_total') + 2000);
    });

    test('staggered concurrent greedy streams each equal plain decoding', async () => {
        const prompts = ['abc', 'hello', 'xyz', 'The quick', 'mno', 'pq', 'uvw', 'Zebra'];
        const runs = prompts.map(async (prompt, i) => {
            await sleep(i * 40); // later ones join while earlier ones are mid-generation
            const req = { prompt, max_tokens: 150 + 20 * i, temperature: 0 };
            const got = await collect(await spec.client().completions.create({ ...req, stream: true }));
            return { req, got };
        });
        const results = await Promise.all(runs);
        for (const { req, got } of results) {
            const want = await plainOf(req);
            assert.equal(got.text, want.text, `prompt ${req.prompt}`);
            assert.deepEqual(got.finished.specdec.tokens, want.tokens, `prompt ${req.prompt}`);
        }
    });

    test('metrics: llama-server names, counters move', async () => {
        const res = await fetch(`${spec.url}/metrics`);
        assert.match(res.headers.get('content-type'), /^text\/plain/);
        const text = await res.text();
        assert.match(text, /# TYPE llamacpp:spec_decode_num_draft_tokens_total counter/);
        const m = await metrics(spec);
        const drafted = m.get('llamacpp:spec_decode_num_draft_tokens_total');
        const accepted = m.get('llamacpp:spec_decode_num_accepted_tokens_total');
        assert.ok(drafted > 0 && accepted > 0 && accepted <= drafted, `${drafted} ${accepted}`);
        assert.ok(m.get('llamacpp:spec_decode_num_drafts_total') > 0);
        assert.ok(m.get('llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"}') > 0);
        assert.ok(m.get('llamacpp:tokens_predicted_total') > 0);
        assert.ok(m.get('llamacpp:prompt_tokens_total') > 0);
        assert.equal(m.get('llamacpp:requests_processing'), 0);
        assert.equal(m.get('llamacpp:requests_deferred'), 0);
        assert.ok(m.get('specdec:time_to_first_token_seconds_count') > 0);
        assert.equal(m.get('specdec:time_to_first_token_seconds_bucket{le="+Inf"}'), m.get('specdec:time_to_first_token_seconds_count'));
        assert.ok(m.get('specdec:inter_token_latency_seconds_count') > 0);
        assert.equal(m.get('specdec:exact_kernels'), 1); // the default
        // One more request moves the counters.
        await spec.client().completions.create({ prompt: 'abc', max_tokens: 16, temperature: 0 });
        const n = await metrics(spec);
        assert.equal(n.get('llamacpp:tokens_predicted_total'), m.get('llamacpp:tokens_predicted_total') + 16);
        assert.ok(n.get('llamacpp:spec_decode_num_draft_tokens_total') > drafted);
    });

    test('n choices: greedy each equals plain decoding, the prompt counted once', async () => {
        const req = { model: MODEL_ID, prompt: 'hello world', max_tokens: 24, temperature: 0 };
        const want = await plainOf(req);
        const one = await spec.client().completions.create(req);
        const r = await spec.client().completions.create({ ...req, n: 3 });
        assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
        for (const c of r.choices) assert.equal(c.text, want.text);
        assert.deepEqual(r.specdec.map((s) => s.tokens), [want.tokens, want.tokens, want.tokens]);
        assert.equal(r.usage.prompt_tokens, one.usage.prompt_tokens, 'the prompt is counted once');
        assert.equal(r.usage.completion_tokens, 3 * 24);
        const e = await post(spec, '/v1/completions', { ...req, n: 5 });
        assertError(e, 400, 'invalid_value');
        assert.equal(e.json.error.param, 'n');
    });

    test('n choices with a seed: choice i equals a request of its own with the seed + i', async () => {
        const req = { prompt: 'abc', max_tokens: 20, temperature: 1.5, top_k: 50, seed: 41 };
        const r = await spec.client().completions.create({ ...req, n: 3 });
        for (let i = 0; i < 3; i++) {
            const own = await spec.client().completions.create({ ...req, seed: 41 + i });
            assert.equal(r.choices[i].text, own.choices[0].text, `choice ${i}`);
        }
        const again = await spec.client().completions.create({ ...req, n: 3 });
        assert.deepEqual(again.choices.map((c) => c.text), r.choices.map((c) => c.text), 'reproducible');
    });

    test('n chat choices streamed: chunks carry their index, each choice equals plain decoding', async () => {
        const chat = { messages: [{ role: 'user', content: 'count' }], max_tokens: 16, temperature: 0 };
        const want = (await plain.client().chat.completions.create(chat)).choices[0].message.content;
        const stream = await spec.client().chat.completions.create({ ...chat, n: 2, stream: true, stream_options: { include_usage: true } });
        const text = ['', ''];
        const finish = [null, null];
        let usage = null;
        for await (const chunk of stream) {
            for (const c of chunk.choices) {
                text[c.index] += c.delta?.content ?? '';
                if (c.finish_reason) finish[c.index] = c.finish_reason;
            }
            if (chunk.usage) usage = chunk.usage;
        }
        assert.deepEqual(text, [want, want]);
        assert.deepEqual(finish, ['length', 'length']);
        assert.equal(usage.completion_tokens, 32);
        const whole = await spec.client().chat.completions.create({ ...chat, n: 2 });
        assert.deepEqual(whole.choices.map((c) => c.message.content), [want, want]);
        assert.equal(whole.usage.prompt_tokens, usage.prompt_tokens);
    });

    test('several prompts: a choice per prompt times n, streamed or not', async () => {
        const prompts = ['hello world', 'abc', [5, 6, 7]];
        const base = { max_tokens: 12, temperature: 0 };
        const want = [];
        for (const p of prompts) want.push((await plainOf({ ...base, prompt: p })).text);
        const r = await spec.client().completions.create({ ...base, prompt: prompts, n: 2 });
        assert.equal(r.choices.length, 6);
        r.choices.forEach((c, i) => {
            assert.equal(c.index, i);
            assert.equal(c.text, want[Math.floor(i / 2)], `choice ${i}`);
        });
        let promptTokens = 0;
        for (const p of prompts) promptTokens += (await spec.client().completions.create({ ...base, prompt: p })).usage.prompt_tokens;
        assert.equal(r.usage.prompt_tokens, promptTokens, 'each prompt counted once');
        const stream = await spec.client().completions.create({ ...base, prompt: prompts, stream: true });
        const text = ['', '', ''];
        for await (const chunk of stream) {
            for (const c of chunk.choices) text[c.index] += c.text;
        }
        assert.deepEqual(text, want);
    });
});
