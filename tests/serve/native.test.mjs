// llama-server's own endpoints and route names (issue 44): the routes
// without /v1, GET /v1/models/{id} for any name, POST /tokenize,
// /detokenize and /apply-template, GET /props; through the official client
// where it reaches them (a baseURL without /v1), else fetch.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MODEL_ID, assertError, post, startServer, stopServer } from './server.mjs';

const TEMPLATE = '{% for m in messages %}[{{ m.role }}] {{ m.content }} {% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}'; // run.sh's

describe('llama-server endpoints', { timeout: 120000 }, () => {
    let s;
    before(async () => {
        s = await startServer(['-np', '3', '-c', '1024']);
    });
    after(async () => {
        assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
    });

    test('every OpenAI route answers without /v1 too, the official client included', async () => {
        const req = { model: MODEL_ID, prompt: 'hello', max_tokens: 12, temperature: 0 };
        const a = await s.client().completions.create(req);
        const bare = s.client({ baseURL: s.url }); // llama-server's users point clients at the root as often
        const b = await bare.completions.create(req);
        assert.deepEqual(b.specdec.tokens, a.specdec.tokens);
        const chat = { model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 12, temperature: 0 };
        const c = await s.client().chat.completions.create(chat);
        const d = await bare.chat.completions.create(chat);
        assert.deepEqual(d.specdec.tokens, c.specdec.tokens);
        assert.deepEqual((await bare.models.list()).data.map((m) => m.id), [MODEL_ID]);
        assert.equal((await fetch(`${s.url}/v1/health`)).status, 200);
    });

    test('GET /v1/models/{id} answers for any name, as llama-server does', async () => {
        for (const id of [MODEL_ID, 'gpt-4o-mini']) {
            const m = await s.client().models.retrieve(id);
            assert.equal(m.id, id);
            assert.equal(m.object, 'model');
        }
        const strict = await startServer(['--strict-model']);
        try {
            const r = await fetch(`${strict.url}/v1/models/gpt-4o-mini`);
            assert.equal(r.status, 404);
            assert.equal((await r.json()).error.code, 'model_not_found');
            assert.equal((await fetch(`${strict.url}/v1/models/${MODEL_ID}`)).status, 200);
        } finally {
            assert.deepEqual(await stopServer(strict), { code: 0, signal: null }, strict.log);
        }
    });

    test('/tokenize and /detokenize round-trip; pieces spell the text; add_special tokenizes as a completion does', async () => {
        const text = 'hello world [x]';
        const t = await post(s, '/tokenize', { content: text });
        assert.equal(t.status, 200, t.text);
        assert.ok(t.json.tokens.length >= text.length - 2 && t.json.tokens.every(Number.isInteger), t.text);
        const d = await post(s, '/detokenize', { tokens: t.json.tokens });
        assert.equal(d.json.content.trim(), text);
        const p = await post(s, '/tokenize', { content: text, with_pieces: true });
        assert.deepEqual(p.json.tokens.map((x) => x.id), t.json.tokens);
        assert.equal(p.json.tokens.map((x) => x.piece).join('').trim(), text);
        // add_special: what the vocabulary adds (a BOS where it has one; this fixture's adds none).
        const b = await post(s, '/tokenize', { content: text, add_special: true });
        assert.deepEqual(b.json.tokens.slice(b.json.tokens.length - t.json.tokens.length), t.json.tokens);
        // The same tokens through the OpenAI route: a prompt of them gives the same text.
        const viaText = await post(s, '/v1/completions', { prompt: text, max_tokens: 6, temperature: 0 });
        assert.equal(viaText.json.usage.prompt_tokens, b.json.tokens.length, 'a completion tokenizes with the BOS');
    });

    test('a prompt of token ids, or of ids and text, is decoded as its tokens', async () => {
        const ids = (await post(s, '/tokenize', { content: 'hello', add_special: true })).json.tokens;
        const xIds = (await post(s, '/tokenize', { content: 'x' })).json.tokens;
        const req = { max_tokens: 10, temperature: 0 };
        const text = await s.client().completions.create({ ...req, prompt: 'hello' });
        for (const prompt of [ids, [ids]]) {
            const r = await s.client().completions.create({ ...req, prompt });
            assert.deepEqual(r.specdec.tokens, text.specdec.tokens, JSON.stringify(prompt));
            assert.equal(r.usage.prompt_tokens, ids.length);
        }
        const mixed = await post(s, '/v1/completions', { ...req, prompt: [...ids, 'x'] });
        const joined = await post(s, '/v1/completions', { ...req, prompt: [...ids, ...xIds] });
        assert.equal(mixed.status, 200, mixed.text);
        assert.deepEqual(mixed.json.specdec.tokens, joined.json.specdec.tokens);
        assert.equal(mixed.json.usage.prompt_tokens, ids.length + xIds.length);
        const echo = await post(s, '/v1/completions', { ...req, prompt: ids, echo: true });
        assert.ok(echo.json.choices[0].text.startsWith(`${(await post(s, '/detokenize', { tokens: ids })).json.content}`), echo.text);
        for (const [prompt, code] of [[[99999999], 'invalid_value'], [[1, 2.5], 'invalid_type'], [['a', 'b'], 'unsupported_parameter'], [[[1], [2]], 'unsupported_parameter']]) {
            const r = await post(s, '/v1/completions', { ...req, prompt });
            assertError(r, 400, code);
            assert.equal(r.json.error.param, 'prompt', r.text);
        }
    });

    test('/apply-template gives the prompt a chat completion decodes', async () => {
        const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }];
        const a = await post(s, '/apply-template', { messages });
        assert.equal(a.status, 200, a.text);
        assert.equal(a.json.prompt, '[system] be brief [user] hi [assistant] ');
        const tokens = (await post(s, '/tokenize', { content: a.json.prompt, add_special: true })).json.tokens;
        const c = await s.client().chat.completions.create({ messages, max_tokens: 4, temperature: 0 });
        assert.equal(c.usage.prompt_tokens, tokens.length);
    });

    test('--chat-template and --chat-template-file replace the model\'s template (--jinja accepted)', async () => {
        const tmpl = '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>';
        const dir = mkdtempSync(join(tmpdir(), 'specdec-template-'));
        writeFileSync(join(dir, 't.jinja'), tmpl);
        for (const args of [['--chat-template', tmpl], ['--jinja', '--chat-template-file', join(dir, 't.jinja')]]) {
            const t = await startServer(args);
            try {
                const a = await post(t, '/apply-template', { messages: [{ role: 'user', content: 'hi' }] });
                assert.equal(a.json.prompt, '<user>hi<assistant>', args.join(' '));
                assert.equal((await (await fetch(`${t.url}/props`)).json()).chat_template, tmpl);
            } finally {
                assert.deepEqual(await stopServer(t), { code: 0, signal: null }, t.log);
            }
        }
        rmSync(dir, { recursive: true });
    });

    test('/props: the server\'s settings with llama-server\'s names', async () => {
        const r = await fetch(`${s.url}/props`);
        assert.equal(r.status, 200);
        const p = await r.json();
        assert.equal(p.total_slots, 3);
        assert.equal(p.default_generation_settings.n_ctx, 1024);
        assert.equal(p.model_alias, MODEL_ID);
        assert.ok(p.model_path.endsWith(`${MODEL_ID}.gguf`), p.model_path);
        assert.equal(p.chat_template, TEMPLATE);
        assert.equal(p.speculative.strategy, 'mtp');
        assert.equal(typeof p.bos_token, 'string');
        assert.deepEqual(p.modalities, { vision: false, audio: false });
        assert.deepEqual(await (await fetch(`${s.url}/v1/props`)).json(), p);
    });

    test('bad input: 400 naming the field, never a crash', async () => {
        const cases = [
            ['/tokenize', {}, 'content'],
            ['/tokenize', { content: 5 }, 'content'],
            ['/tokenize', { content: 'a\nb' }, 'content'], // the fixture's vocabulary has no newline
            ['/tokenize', { content: 'a', with_pieces: 'yes' }, 'with_pieces'],
            ['/detokenize', { tokens: 'abc' }, 'tokens'],
            ['/detokenize', { tokens: [1, -2] }, 'tokens'],
            ['/detokenize', { tokens: [99999999] }, 'tokens'],
            ['/apply-template', { messages: 'hi' }, 'messages'],
            ['/apply-template', { messages: [{ role: 'user', content: 'a' }], chat_template_kwargs: { enable_thinking: 1 } }, 'chat_template_kwargs.enable_thinking'],
            ['/tokenize', `{"content": ${'['.repeat(100000)}`, 'content'], // json_too_deep
        ];
        for (const [path, body, param] of cases) {
            const r = await post(s, path, body);
            assertError(r, 400);
            assert.equal(r.json.error.param ?? '', param, `${path}: ${r.text.slice(0, 200)}`);
        }
        assert.equal((await fetch(`${s.url}/health`)).status, 200);
    });
});
