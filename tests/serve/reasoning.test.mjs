// Thinking models through the official client (issue 44): fixtures whose
// chat templates think in printable ASCII that the controlled target writes
// itself. Qwen-style (thinking-qwen.jinja): the model opens its reasoning
// with '<=>' after '[assistant];' and closes it with '[\]'; DeepSeek-style
// (thinking-deepseek.jinja): the generation prompt opens it, the model
// closes it. Both with enable_thinking false put an empty block in the
// prompt. llama.cpp's chat code finds the markers from each template. The
// reasoning comes back as reasoning_content (streamed as deltas), as
// llama-server's reasoning_format values say; chat_template_kwargs and
// reasoning_effort reach the template; a conversation that ends with an
// assistant message continues it, in its reasoning or its content
// (assistant prefill, continue_final_message); a speculative server's every
// answer equals plain decoding's; reasoning and tool calls work together
// (thinking-tools.jinja).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertError, post, startServer, stopServer } from './server.mjs';

const REASONING = '?@ABCDEFGHIJKLMNOPQRSTUVWXYZ'; // between the markers, in the target's cycle
const messages = [{ role: 'user', content: 'hi' }];
const base = { messages, max_tokens: 40, temperature: 0 };

// A stream added up as a client does.
async function collect(stream) {
    const out = { reasoning: '', content: '', finish: null };
    for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        out.reasoning += c.delta.reasoning_content ?? '';
        out.content += c.delta.content ?? '';
        if (c.finish_reason) out.finish = c.finish_reason;
    }
    return out;
}

const styles = [
    // [name, fixture, what the model writes after the generation prompt (40 tokens from its first)]
    ['qwen', 'SPECDEC_THINK_QWEN_MODEL', '<=>'],
    ['deepseek', 'SPECDEC_THINK_DEEPSEEK_MODEL', ''],
];

for (const [style, env, opener] of styles) {
    describe(`${style}-style thinking`, { timeout: 240000 }, () => {
        let spec; // MTP with the exact drafter
        let plain; // --spec none, the reference
        before(async () => {
            const model = process.env[env];
            spec = await startServer(['-np', '2'], { model });
            plain = await startServer(['--spec', 'none', '-np', '1'], { model });
        });
        after(async () => {
            assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
            assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
        });

        // The text plain decoding writes, read by no parser.
        const raw = async (extra = {}) => (await plain.client().chat.completions.create({ ...base, ...extra, reasoning_format: 'none' })).choices[0].message.content;

        test('reasoning_format: reasoning apart (auto, deepseek, deepseek-legacy) or left in the content (none); as plain decoding', async () => {
            const text = await raw();
            assert.ok(text.startsWith(`${opener}${REASONING}[\\]^_\`abc`), text);
            const answer = text.slice(opener.length + REASONING.length + 3);
            for (const reasoning_format of [undefined, 'auto', 'deepseek', 'deepseek-legacy', 'none']) {
                const req = { ...base, ...(reasoning_format ? { reasoning_format } : {}) };
                const r = await spec.client().chat.completions.create(req);
                const p = await plain.client().chat.completions.create(req);
                const m = r.choices[0].message;
                if (reasoning_format === 'none') {
                    assert.equal(m.content, text);
                    assert.equal(m.reasoning_content, undefined);
                } else {
                    assert.equal(m.reasoning_content, REASONING, String(reasoning_format));
                    assert.equal(m.content, answer, String(reasoning_format));
                }
                assert.deepEqual(r.specdec.tokens, p.specdec.tokens, 'speculation chose what plain decoding chose');
                assert.deepEqual(m, p.choices[0].message);
                assert.ok(r.specdec.drafted > 0);
                // Streamed: the deltas add up to the answer (deepseek-legacy leaves the reasoning in the streamed content).
                const s = await collect(await spec.client().chat.completions.create({ ...req, stream: true }));
                const sp = await collect(await plain.client().chat.completions.create({ ...req, stream: true }));
                assert.deepEqual(s, sp);
                assert.equal(s.finish, 'length');
                if (reasoning_format === 'deepseek-legacy') {
                    assert.ok(s.content.endsWith(answer), s.content); // llama.cpp's parser leaves what it read of the reasoning in the content
                } else {
                    assert.equal(s.reasoning, m.reasoning_content ?? '');
                    assert.equal(s.content, m.content);
                }
            }
        });

        test('enable_thinking false (chat_template_kwargs) and reasoning_effort none: the template closes the block, no reasoning', async () => {
            const thinking = await spec.client().chat.completions.create(base);
            for (const extra of [{ chat_template_kwargs: { enable_thinking: false } }, { reasoning_effort: 'none' }]) {
                const r = await spec.client().chat.completions.create({ ...base, ...extra });
                const p = await plain.client().chat.completions.create({ ...base, ...extra });
                const m = r.choices[0].message;
                assert.equal(m.reasoning_content, undefined, JSON.stringify(m));
                assert.ok(m.content.startsWith('^_`abcdefghijklmnopqrstuvwxyz'), m.content);
                assert.equal(r.usage.prompt_tokens, thinking.usage.prompt_tokens + 3 + (opener ? 3 : 0), 'the closed block is in the prompt');
                assert.deepEqual(r.specdec.tokens, p.specdec.tokens);
            }
            const on = await spec.client().chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: true } });
            assert.equal(on.choices[0].message.reasoning_content, REASONING);
        });

        test('a reasoning budget forces the end of the reasoning once spent, as plain decoding does', async () => {
            const cases = [
                [{ reasoning_budget_tokens: 5 }, '?@ABC'],
                [{ thinking_budget_tokens: 3 }, '?@A'],
                [{ reasoning_budget_tokens: 5, reasoning_budget_message: 'xy' }, '?@ABCxy'],
                [{ reasoning_budget_tokens: 0 }, undefined],
                [{ reasoning_budget_tokens: -1 }, REASONING],
            ];
            for (const [extra, reasoning] of cases) {
                const req = { ...base, ...extra };
                const r = await spec.client().chat.completions.create(req);
                const p = await plain.client().chat.completions.create(req);
                const m = r.choices[0].message;
                assert.equal(m.reasoning_content, reasoning, JSON.stringify(extra));
                assert.ok(m.content.startsWith('^_`abc'), `${JSON.stringify(extra)}: ${m.content}`);
                assert.deepEqual(r.specdec.tokens, p.specdec.tokens);
                const s = await collect(await spec.client().chat.completions.create({ ...req, stream: true }));
                assert.equal(s.reasoning, reasoning ?? '');
                assert.equal(s.content, m.content);
            }
        });

        test('a conversation that ends with an assistant message continues it (assistant prefill), as plain decoding does', async () => {
            const cases = [
                // [the last message, the prompt's end, reasoning and the content's start of the answer]
                [{ role: 'assistant', content: 'abc' }, 'abc', undefined, 'defghij'],
                [{ role: 'assistant', content: '', reasoning_content: 'ABC' }, '<=>ABC', 'DEFGHIJKLMNOPQRSTUVWXYZ', '^_`abc'],
            ];
            for (const [last, end, reasoning, start] of cases) {
                const req = { ...base, messages: [...messages, last] };
                const prompt = (await post(spec, '/apply-template', req)).json.prompt;
                assert.ok(prompt.endsWith(end), prompt);
                assert.equal(prompt.indexOf('[assistant];'), prompt.lastIndexOf('[assistant];'), `no second turn is opened: ${prompt}`);
                const r = await spec.client().chat.completions.create(req);
                const p = await plain.client().chat.completions.create(req);
                const m = r.choices[0].message;
                assert.equal(m.reasoning_content, reasoning, JSON.stringify(m));
                assert.ok(m.content.startsWith(start), `the answer holds the continuation only: ${m.content}`);
                assert.deepEqual(r.specdec.tokens, p.specdec.tokens, 'speculation chose what plain decoding chose');
                assert.deepEqual(m, p.choices[0].message);
                const explicit = await spec.client().chat.completions.create({ ...req, continue_final_message: true, add_generation_prompt: false });
                assert.deepEqual(explicit.specdec.tokens, r.specdec.tokens, 'continue_final_message: true as the prefill');
                const s = await collect(await spec.client().chat.completions.create({ ...req, stream: true }));
                assert.equal(s.reasoning, m.reasoning_content ?? '');
                assert.equal(s.content, m.content);
            }
            // continue_final_message false: the message is complete, a new turn opens.
            const turn = { ...base, messages: [...messages, { role: 'assistant', content: 'abc' }], continue_final_message: false };
            const opened = (await post(spec, '/apply-template', turn)).json.prompt;
            assert.ok(opened.endsWith(style === 'qwen' ? 'abc [assistant];' : 'abc [assistant];<=>'), opened);
            // add_generation_prompt false: the messages alone.
            const bare = (await post(spec, '/apply-template', { ...base, add_generation_prompt: false })).json.prompt;
            assert.equal(bare, '[user] hi ');
        });

        test('an assistant message\'s reasoning_content is templated into the next prompt', async () => {
            const turn = [...messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' }];
            const without = await spec.client().chat.completions.create({ ...base, messages: turn });
            turn[1] = { ...turn[1], reasoning_content: 'because' };
            const withIt = await spec.client().chat.completions.create({ ...base, messages: turn });
            assert.ok(withIt.usage.prompt_tokens >= without.usage.prompt_tokens + 'because'.length,
                `${withIt.usage.prompt_tokens} prompt tokens with the reasoning, ${without.usage.prompt_tokens} without`);
        });
    });
}

describe('server options and errors', { timeout: 120000 }, () => {
    test('--no-prefill-assistant: a last assistant message is complete, and a new turn opens unless a request continues it', async () => {
        const s = await startServer(['--no-prefill-assistant'], { model: process.env.SPECDEC_THINK_QWEN_MODEL });
        try {
            const req = { ...base, messages: [...messages, { role: 'assistant', content: 'abc' }] };
            const opened = (await post(s, '/apply-template', req)).json.prompt;
            assert.ok(opened.endsWith('abc [assistant];'), opened);
            const continued = (await post(s, '/apply-template', { ...req, continue_final_message: true, add_generation_prompt: false })).json.prompt;
            assert.ok(continued.endsWith('abc'), continued);
            // Two assistant messages are a conversation like any other here.
            const two = await post(s, '/v1/chat/completions', { ...req, messages: [...req.messages, { role: 'assistant', content: 'd' }] });
            assert.equal(two.status, 200, two.text);
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('--reasoning-format none and --chat-template-kwargs set the defaults; a request overrides them', async () => {
        const model = process.env.SPECDEC_THINK_QWEN_MODEL;
        const none = await startServer(['--reasoning-format', 'none'], { model });
        const off = await startServer(['--chat-template-kwargs', '{"enable_thinking": false}', '--reasoning-budget', '5'], { model }).catch(async (e) => {
            await stopServer(none);
            throw e;
        });
        try {
            const a = (await none.client().chat.completions.create(base)).choices[0].message;
            assert.equal(a.reasoning_content, undefined);
            assert.ok(a.content.startsWith(`<=>${REASONING}[\\]`), a.content);
            const b = (await none.client().chat.completions.create({ ...base, reasoning_format: 'auto' })).choices[0].message;
            assert.equal(b.reasoning_content, REASONING);
            const c = (await off.client().chat.completions.create(base)).choices[0].message;
            assert.equal(c.reasoning_content, undefined);
            assert.ok(c.content.startsWith('^_`abc'), c.content);
            const d = (await off.client().chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: true } })).choices[0].message;
            // (5, not less: the prompt's closed block counts its 3-token end marker against the budget, as llama.cpp counts it.)
            assert.equal(d.reasoning_content, '?@ABC', '--reasoning-budget 5');
            const e = (await off.client().chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: true }, reasoning_budget_tokens: -1 })).choices[0].message;
            assert.equal(e.reasoning_content, REASONING, 'the request\'s budget over the server\'s');
        } finally {
            assert.deepEqual(await stopServer(none), { code: 0, signal: null }, none.log);
            assert.deepEqual(await stopServer(off), { code: 0, signal: null }, off.log);
        }
    });

    test('bad values are 400s naming the field; completions have no template to think in', async () => {
        const s = await startServer([], { model: process.env.SPECDEC_THINK_QWEN_MODEL });
        try {
            const cases = [
                ['/v1/chat/completions', { ...base, reasoning_format: 'bogus' }, 'reasoning_format'],
                ['/v1/chat/completions', { ...base, reasoning_format: 3 }, 'reasoning_format'],
                ['/v1/chat/completions', { ...base, chat_template_kwargs: [] }, 'chat_template_kwargs'],
                ['/v1/chat/completions', { ...base, chat_template_kwargs: { enable_thinking: 'no' } }, 'chat_template_kwargs.enable_thinking'],
                ['/v1/chat/completions', { ...base, reasoning_effort: 5 }, 'reasoning_effort'],
                ['/v1/chat/completions', { ...base, messages: [{ role: 'assistant', content: 'a', reasoning_content: 5 }] }, 'messages[0].reasoning_content'],
                ['/v1/completions', { prompt: 'a', reasoning_format: 'none' }, 'reasoning_format'],
                ['/v1/completions', { prompt: 'a', chat_template_kwargs: {} }, 'chat_template_kwargs'],
                ['/v1/chat/completions', { ...base, reasoning_budget_tokens: -2 }, 'reasoning_budget_tokens'],
                ['/v1/chat/completions', { ...base, reasoning_budget_message: 1 }, 'reasoning_budget_message'],
                ['/v1/chat/completions', { ...base, add_generation_prompt: 'yes' }, 'add_generation_prompt'],
                ['/v1/chat/completions', { ...base, continue_final_message: 'all' }, 'continue_final_message'],
                ['/v1/chat/completions', { ...base, continue_final_message: true }, 'add_generation_prompt'],
                ['/v1/chat/completions', { ...base, continue_final_message: true, add_generation_prompt: false }, 'continue_final_message'],
                ['/v1/chat/completions', { ...base, messages: [...messages, { role: 'assistant', content: 'a' }, { role: 'assistant', content: 'b' }] }, 'messages'],
                ['/v1/chat/completions', { ...base, messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }] }, 'messages'],
                ['/apply-template', { ...base, continue_final_message: true }, 'add_generation_prompt'],
                ['/v1/completions', { prompt: 'a', add_generation_prompt: false }, 'add_generation_prompt'],
                ['/v1/completions', { prompt: 'a', continue_final_message: true }, 'continue_final_message'],
            ];
            for (const [path, body, param] of cases) {
                const r = await post(s, path, body);
                assertError(r, 400);
                assert.equal(r.json.error.param, param, r.text);
            }
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
        // A model whose template does not think has no block to budget: 400, not silence.
        const plainModel = await startServer([]);
        try {
            const r = await post(plainModel, '/v1/chat/completions', { ...base, reasoning_budget_tokens: 5 });
            assertError(r, 400, 'unsupported_parameter');
            assert.equal(r.json.error.param, 'reasoning_budget_tokens');
        } finally {
            assert.deepEqual(await stopServer(plainModel), { code: 0, signal: null }, plainModel.log);
        }
    });
});

describe('reasoning with tool calls', { timeout: 120000 }, () => {
    test('the reasoning, the content and a valid call, each as plain decoding writes them', async () => {
        const model = process.env.SPECDEC_THINK_TOOLS_MODEL;
        const spec = await startServer(['-np', '2'], { model });
        const plain = await startServer(['--spec', 'none', '-np', '1'], { model }).catch(async (e) => {
            await stopServer(spec);
            throw e;
        });
        try {
            const add = { type: 'function', function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] } } };
            // The target closes its reasoning, writes its cycle on to '<=>', the call marker, and the grammar writes the call.
            const req = { ...base, max_tokens: 230, tools: [add], parallel_tool_calls: false };
            const r = await spec.client().chat.completions.create(req);
            const p = await plain.client().chat.completions.create(req);
            const m = r.choices[0].message;
            assert.equal(m.reasoning_content, REASONING);
            assert.ok(m.content.startsWith('^_`abc'), m.content);
            assert.equal(m.tool_calls.length, 1, JSON.stringify(m));
            assert.equal(m.tool_calls[0].function.name, 'add');
            assert.ok(Number.isInteger(JSON.parse(m.tool_calls[0].function.arguments).a), m.tool_calls[0].function.arguments);
            assert.equal(r.choices[0].finish_reason, 'tool_calls');
            assert.deepEqual(r.specdec.tokens, p.specdec.tokens);
            const strip = (msg) => ({ ...msg, tool_calls: msg.tool_calls.map((c) => c.function) });
            assert.deepEqual(strip(m), strip(p.choices[0].message));
            const s = await collect(await spec.client().chat.completions.create({ ...req, stream: true }));
            assert.equal(s.reasoning, REASONING);
            assert.equal(s.content, m.content);
            assert.equal(s.finish, 'tool_calls');
        } finally {
            assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
            assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
        }
    });
});
