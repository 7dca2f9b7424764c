// llama-server's own endpoints and route names (issue 44): the routes
// without /v1, GET /v1/models/{id} for any name, POST /tokenize,
// /detokenize and /apply-template, GET /props and /slots, slot files (POST /slots/{id}), POST /infill, POST /completion (the native
// completion, equal to /v1/completions' text and tokens); through the official client
// where it reaches them (a baseURL without /v1), else fetch.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MODEL_ID, assertError, post, sseEvents, startServer, stopServer } from './server.mjs';

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

    test('--alias with several names and --tags: the id is the first name in sorted order; with --strict-model any name is served', async () => {
        const named = await startServer(['-c', '1024', '--alias', 'tiny, fim,code', '--tags', 'chat,small', '--strict-model']);
        try {
            const models = await (await fetch(`${named.url}/v1/models`)).json();
            assert.equal(models.data.length, 1);
            const m = models.data[0];
            assert.equal(m.id, 'code');
            assert.deepEqual(m.aliases, ['code', 'fim', 'tiny']);
            assert.deepEqual(m.tags, ['chat', 'small']);
            assert.equal(m.meta.n_ctx, 1024);
            assert.ok(m.meta.n_vocab > 0 && m.meta.n_params > 0 && m.meta.size > 0, JSON.stringify(m.meta));
            assert.equal((await (await fetch(`${named.url}/props`)).json()).model_alias, 'code');
            for (const name of ['code', 'fim', 'tiny']) {
                const r = await post(named, '/v1/completions', { model: name, prompt: 'abc', max_tokens: 2, temperature: 0 });
                assert.equal(r.status, 200, r.text);
                assert.equal(r.json.model, 'code');
            }
            assertError(await post(named, '/v1/completions', { model: 'exact', prompt: 'abc', max_tokens: 2 }), 404, 'model_not_found');
            assert.equal((await fetch(`${named.url}/v1/models/fim`)).status, 200);
        } finally {
            assert.deepEqual(await stopServer(named), { code: 0, signal: null }, named.log);
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
        for (const [prompt, code] of [[[99999999], 'invalid_value'], [[1, 2.5], 'invalid_type'], [['a', ['b']], 'invalid_type'], [[], 'invalid_type']]) {
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

    test('--chat-template NAME: llama.cpp\'s built-in template of that name renders the messages, as llama-server', async () => {
        const messages = [{ role: 'system', content: 'You are a test.' }, { role: 'user', content: 'Hi there' }];
        const cases = [
            ['command-r', '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'],
            ['llama3', '<|start_header_id|>system<|end_header_id|>\n\nYou are a test.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'],
        ];
        for (const [name, want] of cases) {
            const t = await startServer(['--chat-template', name]);
            try {
                assert.equal((await post(t, '/apply-template', { messages })).json.prompt, want, name);
                // A conversation ending with the assistant's message continues it; add_generation_prompt false leaves the turn closed.
                const prefill = (await post(t, '/apply-template', { messages: [...messages, { role: 'assistant', content: 'Wh' }] })).json.prompt;
                assert.equal(prefill, `${want}Wh`, name);
                const bare = (await post(t, '/apply-template', { messages, add_generation_prompt: false })).json.prompt;
                assert.ok(want.startsWith(bare) && bare.length < want.length, `${name}: ${bare}`);
                // Tools need a Jinja template.
                const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
                const r = await post(t, '/v1/chat/completions', { messages, tools });
                assertError(r, 400);
            } finally {
                assert.deepEqual(await stopServer(t), { code: 0, signal: null }, t.log);
            }
        }
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

    test('POST /completion: llama-server\'s native answer, the tokens of /v1/completions', async () => {
        const base = { prompt: 'hello world', temperature: 0 };
        const oai = (await post(s, '/v1/completions', { ...base, max_tokens: 16 })).json;
        const want = oai.choices[0].text;
        const r = await post(s, '/completion', { ...base, n_predict: 16, return_tokens: true, cache_prompt: true, id_slot: -1 });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.json.content, want);
        assert.deepEqual(r.json.tokens, oai.specdec.tokens);
        assert.equal(r.json.stop, true);
        assert.equal(r.json.stop_type, 'limit');
        assert.equal(r.json.stopping_word, '');
        assert.equal(r.json.tokens_predicted, 16);
        assert.equal(r.json.tokens_evaluated, oai.usage.prompt_tokens);
        assert.equal(r.json.prompt, 'hello world');
        assert.equal(r.json.model, MODEL_ID);
        assert.equal(r.json.generation_settings.n_predict, 16);
        assert.equal(r.json.generation_settings.temperature, 0);
        assert.equal(r.json.timings.predicted_n, 16);
        assert.equal(r.json.timings.prompt_n + r.json.timings.cache_n, oai.usage.prompt_tokens);
        assert.ok(r.json.timings.draft_n > 0, JSON.stringify(r.json.timings));
        // The first token comes with the prompt: the rate is of the 15 after it, over predicted_ms.
        assert.ok(Math.abs(r.json.timings.predicted_per_second - 15e3 / r.json.timings.predicted_ms) < 1e-6, JSON.stringify(r.json.timings));
        const one = (await post(s, '/completion', { ...base, n_predict: 1 })).json.timings;
        assert.equal(one.predicted_n, 1);
        assert.equal(one.predicted_per_second, 0);
        assert.equal(one.predicted_per_token_ms, 0);
        assert.deepEqual((await post(s, '/completion', { ...base, n_predict: 16 })).json.tokens, [], 'tokens only with return_tokens');
        // max_tokens is read too; a prompt of token ids gives the same tokens.
        const ids = (await post(s, '/tokenize', { content: 'hello world', add_special: true })).json.tokens;
        const t = await post(s, '/completion', { prompt: ids, max_tokens: 16, temperature: 0, return_tokens: true });
        assert.deepEqual(t.json.tokens, oai.specdec.tokens);

        // Streamed: content events, then the last one (content "", stop true); no [DONE].
        const st = await post(s, '/completion', { ...base, n_predict: 16, stream: true, return_tokens: true });
        assert.equal(st.status, 200, st.text);
        const { events, done } = sseEvents(st.text);
        assert.equal(done, false, 'a native stream has no [DONE]');
        const last = events.at(-1);
        assert.equal(last.stop, true);
        assert.equal(last.content, '');
        assert.equal(last.stop_type, 'limit');
        assert.equal(last.tokens_predicted, 16);
        const parts = events.slice(0, -1);
        assert.ok(parts.length >= 1 && parts.every((e) => e.stop === false));
        assert.equal(parts.map((e) => e.content).join(''), want);
        assert.deepEqual(parts.flatMap((e) => e.tokens), oai.specdec.tokens);
        assert.equal(parts.at(-1).tokens_predicted, 16);

        // A stop string: the text before it, and which one it was.
        const word = want.slice(5, 7);
        const w = await post(s, '/completion', { ...base, n_predict: 16, stop: ['zzzz', word] });
        assert.equal(w.json.stop_type, 'word', w.text);
        assert.equal(w.json.stopping_word, word);
        assert.equal(w.json.content, want.slice(0, want.indexOf(word)));

        // n_probs: pre-sampling log-probabilities of each token and its alternatives.
        const p = await post(s, '/completion', { ...base, n_predict: 4, n_probs: 2, return_tokens: true });
        const probs = p.json.completion_probabilities;
        assert.equal(probs.length, 4);
        probs.forEach((x, i) => {
            assert.equal(x.id, p.json.tokens[i]);
            assert.equal(x.top_logprobs.length, 2);
            assert.equal(x.top_logprobs[0].id, x.id, 'greedy: the likeliest');
            assert.ok(x.logprob <= 0);
        });
    });

    test('POST /completion: several prompts, answered as a list, each as it is answered alone', async () => {
        const ids = (await post(s, '/tokenize', { content: 'abc', add_special: true })).json.tokens;
        const prompts = ['hello world', ids, { prompt_string: 'hello' }, { prompt_string: [...ids, ' x'], multimodal_data: [] }];
        const base = { n_predict: 12, temperature: 0, return_tokens: true };
        const alone = [];
        for (const prompt of prompts) {
            const r = await post(s, '/completion', { ...base, prompt });
            assert.equal(r.status, 200, r.text);
            assert.ok(!Array.isArray(r.json), 'one prompt (a prompt object included): one answer');
            alone.push(r.json);
        }
        // A prompt object is its prompt_string.
        assert.deepEqual(alone[2].tokens, (await post(s, '/completion', { ...base, prompt: 'hello' })).json.tokens);
        assert.deepEqual(alone[3].tokens, (await post(s, '/completion', { ...base, prompt: [...ids, ' x'] })).json.tokens);
        const all = await post(s, '/completion', { ...base, prompt: prompts });
        assert.equal(all.status, 200, all.text);
        assert.ok(Array.isArray(all.json) && all.json.length === prompts.length, all.text);
        all.json.forEach((a, i) => {
            assert.equal(a.index, i);
            assert.deepEqual(a.tokens, alone[i].tokens, `prompt ${i}`);
            assert.equal(a.content, alone[i].content);
            assert.equal(a.prompt, alone[i].prompt);
            assert.equal(a.tokens_evaluated, alone[i].tokens_evaluated);
            assert.equal(a.stop_type, alone[i].stop_type);
        });
        assert.notDeepEqual(all.json[0].tokens, all.json[1].tokens, 'the prompts differ, and so do their answers');
        // Streamed: each prompt's events carry its index; each ends with its own last event (stop: true).
        const st = await post(s, '/completion', { ...base, prompt: prompts, stream: true });
        assert.equal(st.status, 200, st.text);
        const { events, done } = sseEvents(st.text);
        assert.equal(done, false);
        prompts.forEach((_, i) => {
            const mine = events.filter((e) => e.index === i);
            const last = mine.filter((e) => e.stop === true);
            assert.equal(last.length, 1, `prompt ${i}: one last event`);
            assert.equal(mine.at(-1), last[0]);
            assert.deepEqual(mine.filter((e) => !e.stop).flatMap((e) => e.tokens), alone[i].tokens, `prompt ${i}`);
            assert.equal(mine.map((e) => e.content).join(''), alone[i].content);
        });
        assert.equal(events.length, events.filter((e) => prompts.some((_, i) => e.index === i)).length);
    });

    test('POST /completion: llama-server\'s logit_bias forms; false is never; generation_settings lists them', async () => {
        const base = { prompt: 'hello world', n_predict: 6, temperature: 0, return_tokens: true };
        const plain = await post(s, '/completion', { ...base, n_probs: 2 });
        const first = plain.json.tokens[0];
        const runnerUp = plain.json.completion_probabilities[0].top_logprobs[1].id;
        assert.notEqual(runnerUp, first);
        assert.deepEqual(plain.json.generation_settings.logit_bias, []);
        for (const logit_bias of [[[first, false]], { [first]: false }]) {
            const r = await post(s, '/completion', { ...base, logit_bias });
            assert.equal(r.status, 200, r.text);
            assert.equal(r.json.tokens[0], runnerUp, JSON.stringify(logit_bias));
            assert.ok(!r.json.tokens.includes(first), 'never chosen');
            assert.deepEqual(r.json.generation_settings.logit_bias, [{ bias: null, token: first }]);
        }
        // The OpenAI routes take the same forms.
        const oai = await post(s, '/v1/completions', { prompt: 'hello world', max_tokens: 6, temperature: 0, logit_bias: [[first, false]] });
        assert.equal(oai.status, 200, oai.text);
        assert.equal(oai.json.specdec.tokens[0], runnerUp);
        // A text: each of its tokens, in the request's order among the ids.
        const word = (await post(s, '/detokenize', { tokens: plain.json.tokens.slice(0, 2) })).json.content;
        const wordIds = (await post(s, '/tokenize', { content: word })).json.tokens;
        const t = await post(s, '/completion', { ...base, logit_bias: [[7, 2.5], [word, false], [9, -1]] });
        assert.equal(t.status, 200, t.text);
        assert.deepEqual(t.json.generation_settings.logit_bias,
            [{ bias: 2.5, token: 7 }, ...wordIds.map((token) => ({ bias: null, token })), { bias: -1, token: 9 }]);
        assert.ok(t.json.tokens.every((x) => !wordIds.includes(x)), t.text);
        const k = await post(s, '/completion', { ...base, logit_bias: { [word]: -100 } });
        assert.deepEqual(k.json.generation_settings.logit_bias, wordIds.map((token) => ({ bias: -100, token })));
        assert.ok(k.json.tokens.every((x) => !wordIds.includes(x)), k.text);
    });

    test('POST /completion: ignore_eos is a bias of -infinity on each end-of-generation token, listed as llama-server does', async () => {
        const eos = (await post(s, '/tokenize', { content: (await (await fetch(`${s.url}/props`)).json()).eos_token, parse_special: true })).json.tokens;
        assert.equal(eos.length, 1);
        const r = await post(s, '/completion', { prompt: 'hello', n_predict: 40, temperature: 0, ignore_eos: true, return_tokens: true });
        assert.equal(r.status, 200, r.text);
        const listed = r.json.generation_settings.logit_bias;
        assert.ok(listed.length >= 1 && listed.every((b) => b.bias === null), JSON.stringify(listed));
        assert.ok(listed.some((b) => b.token === eos[0]), 'the EOS is among them');
        assert.ok(r.json.tokens.every((x) => !listed.some((b) => b.token === x)), 'none is chosen');
        assert.equal(r.json.tokens_predicted, 40);
        const off = await post(s, '/completion', { prompt: 'hello', n_predict: 4, ignore_eos: false });
        assert.deepEqual(off.json.generation_settings.logit_bias, []);
        // A request's own biases first, then the end-of-generation tokens'.
        const both = await post(s, '/completion', { prompt: 'hello', n_predict: 4, ignore_eos: true, logit_bias: [[5, 1]] });
        assert.deepEqual(both.json.generation_settings.logit_bias, [{ bias: 1, token: 5 }, ...listed]);
    });

    test('POST /completion: response_fields projects the answer onto its paths, keyed by the path', async () => {
        const base = { prompt: 'hello world', n_predict: 5, temperature: 0, seed: 11 };
        const full = (await post(s, '/completion', base)).json;
        const fields = ['content', 'generation_settings/n_predict', 'tokens_predicted', 'timings/predicted_n', 'missing', 'content/x', 'timings/nope'];
        const r = await post(s, '/completion', { ...base, response_fields: fields });
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(Object.keys(r.json).sort(), ['content', 'generation_settings/n_predict', 'timings/predicted_n', 'tokens_predicted']);
        assert.equal(r.json.content, full.content);
        assert.equal(r.json['generation_settings/n_predict'], 5);
        assert.equal(r.json.tokens_predicted, 5);
        assert.equal(r.json['timings/predicted_n'], 5);
        assert.deepEqual((await post(s, '/completion', { ...base, response_fields: [] })).json.generation_settings, full.generation_settings);
        // Each prompt's answer, and a stream's last event, projected too (as llama-server's final result).
        const two = await post(s, '/completion', { ...base, prompt: ['hello', 'world'], response_fields: ['index', 'content'] });
        assert.deepEqual(two.json.map((a) => Object.keys(a).sort()), [['content', 'index'], ['content', 'index']]);
        assert.deepEqual(two.json.map((a) => a.index), [0, 1]);
        const st = sseEvents((await post(s, '/completion', { ...base, stream: true, response_fields: ['stop', 'tokens_predicted'] })).text).events;
        assert.deepEqual(st.at(-1), { stop: true, tokens_predicted: 5 });
    });

    test('POST /completion refuses what it cannot honour, naming the field', async () => {
        const cases = [
            [{ prompt: 'a', post_sampling_probs: true }, 'post_sampling_probs', 'unsupported_parameter'],
            [{ prompt: 'a', samplers: ['top_k'] }, 'samplers', 'unsupported_parameter'],
            [{ prompt: 'a', t_max_predict_ms: 10 }, 't_max_predict_ms', 'unsupported_parameter'],
            [{ prompt: { prompt_string: 'a', multimodal_data: ['iVBORw0KGgo='] } }, 'prompt', 'unsupported_parameter'],
            [{ prompt: ['a', { prompt_string: 'b', multimodal_data: 'iVBORw0KGgo=' }] }, 'prompt', 'unsupported_parameter'],
            [{ prompt: { text: 'a' } }, 'prompt', 'invalid_type'],
            [{ prompt: 'a', response_fields: 'content' }, 'response_fields', 'invalid_type'],
            [{ prompt: 'a', logit_bias: [[1, true]] }, 'logit_bias', undefined],
            [{ prompt: 'a', logit_bias: [[99999999, false]] }, 'logit_bias', undefined],
            [{ prompt: 'a', logit_bias: { 'a\nb': -1 } }, 'logit_bias', undefined], // the fixture's vocabulary has no newline
            [{ prompt: 'a', n_predict: 'x' }, 'n_predict', undefined],
            [{ prompt: 'a', id_slot: 3 }, 'id_slot', undefined], // 3 slots: 0..2
            [{ prompt: 'a', n_probs: -1 }, 'n_probs', undefined],
            [{ prompt: 'a', mirostat: 2 }, 'mirostat', 'unsupported_parameter'],
            [{ prompt: 'a', ignore_eos: 'yes' }, 'ignore_eos', undefined],
            [`{"prompt": "a", "n_probs": ${'['.repeat(100000)}`, 'n_probs', 'json_too_deep'],
        ];
        for (const [body, param, code] of cases) {
            const r = await post(s, '/completion', body);
            assertError(r, 400, code);
            assert.equal(r.json.error.param, param, r.text);
        }
    });

    test('GET /slots: each slot\'s request as the engine tells; slot actions 501 without --slot-save-path; --no-slots 501', async () => {
        await post(s, '/completion', { prompt: 'hello', n_predict: 7, temperature: 0, seed: 9 });
        const slots = await (await fetch(`${s.url}/slots`)).json();
        assert.deepEqual(slots.map((x) => x.id), [0, 1, 2]);
        assert.ok(slots.every((x) => x.n_ctx === 1024 && x.speculative === true && x.is_processing === false));
        const used = slots.filter((x) => x.id_task !== undefined);
        assert.ok(used.length >= 1);
        const last = used.reduce((a, b) => (b.id_task > a.id_task ? b : a));
        // Idle: no budget left over, nothing being decoded (as llama-server resets them); the last request's params stay.
        assert.deepEqual(last.next_token[0], { has_next_token: false, has_new_line: false, n_remain: -1, n_decoded: 0 });
        assert.equal(last.params.n_predict, 7);
        assert.equal(last.params.seed, 9);
        // A request generating is seen in its slot.
        const ctl = new AbortController();
        const long = fetch(`${s.url}/completion`, {
            method: 'POST', signal: ctl.signal, headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ prompt: 'abc', n_predict: 900, ignore_eos: true, stream: true }),
        });
        const res = await long;
        const reader = res.body.getReader();
        await reader.read();
        let busy = [];
        for (let i = 0; i < 50 && busy.length === 0; i++) {
            busy = (await (await fetch(`${s.url}/slots`)).json()).filter((x) => x.is_processing);
        }
        assert.equal(busy.length, 1);
        assert.ok(busy[0].next_token[0].n_decoded > 0);
        assert.equal(busy[0].next_token[0].n_remain, 900 - busy[0].next_token[0].n_decoded);
        ctl.abort();
        await reader.cancel().catch(() => {});
        const erase = await post(s, '/slots/0?action=erase', {});
        assertError(erase, 501, 'not_supported'); // no --slot-save-path
        const off = await startServer(['-np', '1', '-c', '256', '--no-slots']);
        try {
            const r = await fetch(`${off.url}/slots`);
            const text = await r.text();
            assertError({ status: r.status, text, json: JSON.parse(text) }, 501, 'not_supported');
        } finally {
            assert.deepEqual(await stopServer(off), { code: 0, signal: null }, off.log);
        }
    });

    test('--slot-save-path: a slot saved to a file, erased, and restored into another slot by a restarted server is reused by the next prompt', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'specdec-slots-'));
        const args = ['-np', '2', '-c', '256', '--slot-save-path', join(dir, 'slots')];
        const req = { prompt: 'hello world, once upon a time', n_predict: 12, temperature: 0, return_tokens: true };
        let want;
        let saved;
        const first = await startServer(args);
        try {
            want = (await post(first, '/completion', req)).json;
            saved = await post(first, '/slots/0?action=save', { filename: 'hello.bin' });
            assert.equal(saved.status, 200, saved.text);
            assert.equal(saved.json.id_slot, 0);
            assert.equal(saved.json.filename, 'hello.bin');
            assert.equal(saved.json.n_saved, want.tokens_evaluated + 12 - 1, 'the prompt and the answer but its last token');
            assert.equal(saved.json.n_written, statSync(join(dir, 'slots', 'hello.bin')).size);
            assert.ok(saved.json.timings.save_ms >= 0);
            const erased = await post(first, '/slots/0?action=erase', {});
            assert.deepEqual(erased.json, { id_slot: 0, n_erased: saved.json.n_saved });
            assert.equal((await post(first, '/completion', req)).json.timings.cache_n, 0, 'erased: nothing is reused');
        } finally {
            assert.deepEqual(await stopServer(first), { code: 0, signal: null }, first.log);
        }
        // The file saved from slot 0 goes into slot 1 (the MTP head's state
        // moves between slots).
        const second = await startServer(args);
        try {
            const restored = await post(second, '/slots/1?action=restore', { filename: 'hello.bin' });
            assert.equal(restored.status, 200, restored.text);
            assert.equal(restored.json.n_restored, saved.json.n_saved);
            assert.equal(restored.json.n_read, saved.json.n_written);
            const again = (await post(second, '/completion', req)).json;
            assert.equal(again.timings.cache_n, want.tokens_evaluated - 1, 'the restored slot holds the prompt');
            assert.equal(again.id_slot, 1);
            assert.deepEqual(again.tokens, want.tokens);
            // What is refused, naming the field.
            const cases = [
                ['/slots/0?action=save', { filename: '../escape.bin' }, 400, 'filename'],
                ['/slots/0?action=save', { filename: 'a/b.bin' }, 400, 'filename'],
                ['/slots/0?action=save', { filename: '..' }, 400, 'filename'],
                ['/slots/0?action=save', { filename: 'trailing.' }, 400, 'filename'],
                ['/slots/0?action=save', { filename: 'x'.repeat(256) }, 400, 'filename'],
                ['/slots/0?action=save', {}, 400, 'filename'],
                ['/slots/0?action=restore', { filename: 'absent.bin' }, 404, 'filename'],
                ['/slots/2?action=erase', {}, 400, 'id_slot'],
                ['/slots/x?action=erase', {}, 400, 'id_slot'],
                ['/slots/0?action=bogus', {}, 400, 'action'],
                ['/slots/0', {}, 400, 'action'],
            ];
            for (const [path, body, status, param] of cases) {
                const r = await post(second, path, body);
                assertError(r, status);
                assert.equal(r.json.error.param, param, `${path} ${JSON.stringify(body).slice(0, 40)}`);
            }
            assert.ok(!existsSync(join(dir, 'escape.bin')));
            writeFileSync(join(dir, 'slots', 'junk.bin'), 'not a slot file');
            const junk = await post(second, '/slots/0?action=restore', { filename: 'junk.bin' });
            assertError(junk, 400);
            assert.match(junk.json.error.message, /not a slot file/);
        } finally {
            assert.deepEqual(await stopServer(second), { code: 0, signal: null }, second.log);
        }
        // A file another drafter wrote (plain decoding reads no MTP state).
        const plain = await startServer([...args, '--spec', 'none']);
        try {
            const r = await post(plain, '/slots/0?action=restore', { filename: 'hello.bin' });
            assertError(r, 400);
            assert.match(r.json.error.message, /another target model or drafter/);
        } finally {
            assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
        }
        // A drafter whose per-sequence state llama.cpp keeps to itself: a
        // slot's file goes back into that slot only.
        const bound = await startServer([...args, '--spec', 'ngram-map-k']);
        try {
            assert.equal((await post(bound, '/completion', req)).status, 200);
            assert.equal((await post(bound, '/slots/0?action=save', { filename: 'bound.bin' })).status, 200);
            const elsewhere = await post(bound, '/slots/1?action=restore', { filename: 'bound.bin' });
            assertError(elsewhere, 400);
            assert.equal(elsewhere.json.error.param, 'id_slot');
            assert.match(elsewhere.json.error.message, /saved from another slot/);
            const home = await post(bound, '/slots/0?action=restore', { filename: 'bound.bin' });
            assert.equal(home.status, 200, home.text);
        } finally {
            assert.deepEqual(await stopServer(bound), { code: 0, signal: null }, bound.log);
        }
        rmSync(dir, { recursive: true });
    });

    test('POST /infill: llama-server\'s fill-in-the-middle prompt, decoded as /completion decodes its tokens', async () => {
        const none = await post(s, '/infill', { input_prefix: 'ab', input_suffix: 'c' });
        assertError(none, 400, 'not_supported'); // the exact fixture has no FIM tokens
        const fim = await startServer(['-np', '2', '-c', '512'], { model: process.env.SPECDEC_FIM_MODEL });
        try {
            const tok = async (content, add_special = false) => (await post(fim, '/tokenize', { content, add_special, parse_special: false })).json.tokens;
            const bos = await tok('', true); // [BOS] where the vocabulary adds one
            const body = { input_prefix: 'hello wor', input_suffix: 'abc', prompt: 'ld', n_predict: 12, temperature: 0, return_tokens: true };
            const want = [...bos, 3, ...(await tok('hello wor')), ...(await tok('ld')), 4, ...(await tok('abc')), 5];
            const r = await post(fim, '/infill', body);
            assert.equal(r.status, 200, r.text);
            assert.equal(r.json.tokens_evaluated, want.length);
            const c = await post(fim, '/completion', { prompt: want, n_predict: 12, temperature: 0, return_tokens: true });
            assert.deepEqual(r.json.tokens, c.json.tokens);
            assert.equal(r.json.content, c.json.content);
            assert.equal(r.json.tokens_predicted, 12);
            const st = sseEvents((await post(fim, '/infill', { ...body, stream: true })).text).events;
            assert.equal(st.slice(0, -1).map((e) => e.content).join(''), c.json.content);
            for (const [b, param] of [[{ input_suffix: 'a' }, 'input_prefix'], [{ input_prefix: 'a' }, 'input_suffix'],
                [{ input_prefix: 'a', input_suffix: 'b', input_extra: 'x' }, 'input_extra'],
                [{ input_prefix: 'a', input_suffix: 'b', input_extra: [{ filename: 'f' }] }, 'input_extra'],
                [{ input_prefix: 5, input_suffix: 'b' }, 'input_prefix']]) {
                const e = await post(fim, '/infill', b);
                assertError(e, 400);
                assert.equal(e.json.error.param, param, e.text);
            }
        } finally {
            assert.deepEqual(await stopServer(fim), { code: 0, signal: null }, fim.log);
        }
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
