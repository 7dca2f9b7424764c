// Anthropic's Messages API (issue 44) through the official `@anthropic-ai/sdk`
// client: POST /v1/messages, whole and streamed (raw events and the SDK's
// messages.stream()), answered with the tokens plain decoding and the OpenAI
// route choose for the same conversation; system prompts, stop_sequences,
// max_tokens, tool use and tool results on the tools fixture, thinking
// blocks on the thinking fixtures, count_tokens, and errors in Anthropic's
// shape as the SDK's typed errors.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startServer, stopServer } from './server.mjs';

const require = createRequire(`${process.env.SPECDEC_ANTHROPIC_DIR}/node_modules/`);
const Anthropic = require('@anthropic-ai/sdk').Anthropic;
const KEY = 'sk-local';
const anthropic = (server, options = {}) => new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0, timeout: 120000, ...options });
const openai = (server) => server.client({ apiKey: KEY });

const messages = [{ role: 'user', content: 'hi' }];
const base = { model: 'claude-any', max_tokens: 24, temperature: 0, messages };

// A raw event stream added up: the events' types in order, the blocks (text,
// thinking, tool_use input as JSON text), the final stop and usage.
async function collect(stream) {
    const out = { types: [], blocks: [], start: null, delta: null };
    for await (const e of stream) {
        out.types.push(e.type);
        if (e.type === 'message_start') out.start = e.message;
        if (e.type === 'content_block_start') {
            assert.equal(e.index, out.blocks.length, 'blocks start in order');
            out.blocks.push({ ...e.content_block, json: '', open: true });
        }
        if (e.type === 'content_block_delta') {
            const b = out.blocks[e.index];
            assert.ok(b?.open, `a delta of an open block: ${JSON.stringify(e)}`);
            if (e.delta.type === 'text_delta') b.text += e.delta.text;
            else if (e.delta.type === 'thinking_delta') b.thinking += e.delta.thinking;
            else if (e.delta.type === 'input_json_delta') b.json += e.delta.partial_json;
            else assert.fail(`a delta of type ${e.delta.type}`);
        }
        if (e.type === 'content_block_stop') out.blocks[e.index].open = false;
        if (e.type === 'message_delta') out.delta = e;
    }
    assert.equal(out.types[0], 'message_start');
    assert.deepEqual(out.types.slice(-2), ['message_delta', 'message_stop']);
    assert.ok(out.blocks.every((b) => !b.open), 'every block stopped');
    return out;
}

describe('anthropic messages', { timeout: 240000 }, () => {
    let spec; // MTP with the exact drafter
    let plain; // --spec none, the reference
    let first; // the plain answer to `base`
    before(async () => {
        spec = await startServer(['-np', '2', '--api-key', KEY]);
        plain = await startServer(['--spec', 'none', '-np', '1', '--api-key', KEY]);
        first = await anthropic(plain).messages.create(base);
    });
    after(async () => {
        assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
        assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
    });

    test('messages.create: a message with the tokens of plain decoding and of the OpenAI route; max_tokens ends it', async () => {
        const r = await anthropic(spec).messages.create(base);
        assert.match(r.id, /^msg_/);
        assert.equal(r.type, 'message');
        assert.equal(r.role, 'assistant');
        assert.equal(r.content.length, 1);
        assert.equal(r.content[0].type, 'text');
        assert.equal(r.stop_reason, 'max_tokens');
        assert.equal(r.stop_sequence, null);
        assert.equal(r.usage.output_tokens, 24);
        assert.deepEqual(r.specdec.tokens, first.specdec.tokens, 'speculation chose what plain decoding chose');
        assert.equal(r.content[0].text, first.content[0].text);
        assert.ok(r.specdec.drafted > 0);
        const o = await openai(spec).chat.completions.create({ ...base, model: 'exact' });
        assert.deepEqual(r.specdec.tokens, o.specdec.tokens, 'the OpenAI route chose the same');
        assert.equal(r.content[0].text, o.choices[0].message.content);
        assert.equal(r.usage.input_tokens, o.usage.prompt_tokens);
    });

    test('streams: raw events, and messages.stream().finalMessage(), add up to the message', async () => {
        const s = await collect(await anthropic(spec).messages.create({ ...base, stream: true }));
        assert.deepEqual(s.start.content, []);
        assert.equal(s.start.usage.input_tokens, first.usage.input_tokens);
        assert.equal(s.blocks.length, 1);
        assert.equal(s.blocks[0].type, 'text');
        assert.equal(s.blocks[0].text, first.content[0].text);
        assert.ok(s.types.includes('content_block_delta')); // how many depends on how the writer's pumps fall
        assert.equal(s.delta.delta.stop_reason, 'max_tokens');
        assert.equal(s.delta.usage.output_tokens, 24);
        assert.deepEqual(s.delta.specdec.tokens, first.specdec.tokens);
        const m = await anthropic(spec).messages.stream(base).finalMessage();
        assert.deepEqual(m.content, first.content);
        assert.equal(m.stop_reason, 'max_tokens');
        assert.equal(m.usage.output_tokens, 24);
    });

    test('system prompts, a string or text blocks, reach the prompt as a system message does', async () => {
        const system = 'be brief';
        const r = await anthropic(spec).messages.create({ ...base, system });
        const b = await anthropic(plain).messages.create({ ...base, system: [{ type: 'text', text: system }] });
        const o = await openai(plain).chat.completions.create({ ...base, model: 'exact', messages: [{ role: 'system', content: system }, ...messages] });
        assert.deepEqual(r.specdec.tokens, o.specdec.tokens);
        assert.deepEqual(b.specdec.tokens, o.specdec.tokens);
        assert.equal(r.usage.input_tokens, o.usage.prompt_tokens);
        assert.ok(r.usage.input_tokens > first.usage.input_tokens);
    });

    test('stop_sequences: the text before the first one, stop_reason stop_sequence and the matched string', async () => {
        const text = first.content[0].text;
        const seq = text.slice(6, 9);
        const want = text.slice(0, text.indexOf(seq));
        const r = await anthropic(spec).messages.create({ ...base, stop_sequences: ['never-there', seq] });
        assert.equal(r.stop_reason, 'stop_sequence');
        assert.equal(r.stop_sequence, seq);
        assert.equal(r.content[0].text, want);
        const s = await collect(await anthropic(spec).messages.create({ ...base, stop_sequences: [seq], stream: true }));
        assert.equal(s.blocks[0].text, want);
        assert.deepEqual(s.delta.delta, { stop_reason: 'stop_sequence', stop_sequence: seq });
    });

    test('count_tokens equals the usage.input_tokens of the same request', async () => {
        const c = anthropic(spec);
        for (const extra of [{}, { system: 'be brief' }, { messages: [...messages, { role: 'assistant', content: 'abc' }, { role: 'user', content: 'more' }] }]) {
            const { max_tokens, ...req } = { ...base, ...extra };
            const n = await c.messages.countTokens(req);
            const r = await c.messages.create({ ...req, max_tokens: 1 });
            assert.deepEqual(n, { input_tokens: r.usage.input_tokens }, JSON.stringify(extra));
        }
    });

    test('errors in Anthropic\'s shape, as the SDK\'s typed errors', async () => {
        const c = anthropic(spec);
        const refused = (status, Type, type, pattern) => (e) => {
            assert.ok(e instanceof Type, `${e}`);
            assert.equal(e.status, status);
            assert.equal(e.error.type, 'error');
            assert.equal(e.error.error.type, type);
            assert.match(e.error.error.message, pattern);
            return true;
        };
        const bad = refused.bind(null, 400, Anthropic.BadRequestError, 'invalid_request_error');
        await assert.rejects(c.messages.create({ model: 'x', messages }), bad(/max_tokens/));
        await assert.rejects(c.messages.create({ ...base, temperature: 1.5 }), bad(/temperature/));
        await assert.rejects(c.messages.create({ ...base, top_logprobs: 3 }), bad(/top_logprobs/));
        await assert.rejects(c.messages.create({ ...base, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }),
            bad(/messages\[0\]\.content\[0\]\.type/));
        await assert.rejects(c.messages.create({ ...base, stop_sequences: [''] }), bad(/stop/));
        await assert.rejects(c.messages.countTokens({ model: 'x', messages: [] }), bad(/messages/));
        await assert.rejects(anthropic(spec, { apiKey: 'wrong' }).messages.create(base),
            refused(401, Anthropic.AuthenticationError, 'authentication_error', /API key/));
        await assert.rejects(c.messages.batches.list(), refused(404, Anthropic.NotFoundError, 'not_found_error', /no such route/));
        const ok = await c.messages.create({ ...base, metadata: { user_id: 'u' }, max_tokens: 4 }); // ignored: the same answer
        assert.deepEqual(ok.specdec.tokens, first.specdec.tokens.slice(0, 4));
    });
});

describe('anthropic tool use', { timeout: 240000 }, () => {
    const tools = [{
        name: 'get_weather',
        description: 'The weather of a city over the next days',
        input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer' } }, required: ['city', 'days'] },
    }];
    const req = { ...base, max_tokens: 120, tools, tool_choice: { type: 'auto', disable_parallel_tool_use: true } };
    let spec;
    let plain;
    before(async () => {
        const model = process.env.SPECDEC_TOOLS_MODEL;
        spec = await startServer(['-np', '2', '-c', '2048', '--api-key', KEY], { model });
        plain = await startServer(['--spec', 'none', '-np', '1', '-c', '2048', '--api-key', KEY], { model });
    });
    after(async () => {
        assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
        assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
    });

    test('a tool_use block with its input parsed, stop_reason tool_use, streamed alike, as plain decoding', async () => {
        const r = await anthropic(spec).messages.create(req);
        const p = await anthropic(plain).messages.create(req);
        assert.equal(r.stop_reason, 'tool_use', JSON.stringify(r));
        const calls = r.content.filter((b) => b.type === 'tool_use');
        assert.equal(calls.length, 1, JSON.stringify(r.content));
        assert.match(calls[0].id, /^toolu_[A-Za-z0-9]{24}$/);
        assert.equal(calls[0].name, 'get_weather');
        assert.equal(typeof calls[0].input.city, 'string');
        assert.ok(Number.isInteger(calls[0].input.days), JSON.stringify(calls[0].input));
        assert.deepEqual(r.specdec.tokens, p.specdec.tokens);
        const strip = (content) => JSON.parse(JSON.stringify(content.map(({ id, ...b }) => b))); // -0 as 0 (see below)
        assert.deepEqual(strip(r.content), strip(p.content));
        const s = await collect(await anthropic(spec).messages.create({ ...req, stream: true }));
        assert.equal(s.delta.delta.stop_reason, 'tool_use');
        const streamed = s.blocks.find((b) => b.type === 'tool_use');
        assert.match(streamed.id, /^toolu_/);
        // The streamed JSON is the model's text; the whole message's input is it parsed and written again (-0 as 0).
        assert.deepEqual(JSON.parse(JSON.stringify(JSON.parse(streamed.json))), calls[0].input);
        const m = await anthropic(spec).messages.stream(req).finalMessage();
        assert.deepEqual(strip(m.content), strip(r.content));
        const n = await anthropic(spec).messages.countTokens({ model: 'x', messages, tools, tool_choice: req.tool_choice });
        assert.equal(n.input_tokens, r.usage.input_tokens);
    });

    test('a tool_result turn reaches the next prompt', async () => {
        const c = anthropic(spec);
        const r = await c.messages.create(req);
        const call = r.content.find((b) => b.type === 'tool_use');
        const result = 'sunny and mild, 21 degrees';
        const next = [...messages, { role: 'assistant', content: r.content },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: result }] }];
        const second = await c.messages.create({ ...req, messages: next });
        assert.ok(second.content.length > 0);
        const grown = second.usage.input_tokens - r.usage.input_tokens;
        const written = call.name.length + JSON.stringify(call.input).length + result.length;
        assert.ok(grown >= written / 2, `the prompt grew by ${grown} tokens for ${written} characters`);
        // The same conversation through the OpenAI route: the same prompt, the same answer.
        const o = await openai(spec).chat.completions.create({
            model: 'tools', max_tokens: 120, temperature: 0, parallel_tool_calls: false, tool_choice: 'auto',
            tools: tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
            messages: [...messages,
                { role: 'assistant', content: '', tool_calls: [{ id: call.id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.input) } }] },
                { role: 'tool', tool_call_id: call.id, content: result }],
        });
        assert.equal(second.usage.input_tokens, o.usage.prompt_tokens);
        assert.deepEqual(second.specdec.tokens, o.specdec.tokens);
    });
});

const REASONING = '?@ABCDEFGHIJKLMNOPQRSTUVWXYZ'; // the thinking fixtures' reasoning (reasoning.test.mjs)

for (const [style, env] of [['qwen', 'SPECDEC_THINK_QWEN_MODEL'], ['deepseek', 'SPECDEC_THINK_DEEPSEEK_MODEL']]) {
    describe(`anthropic thinking, ${style}-style`, { timeout: 240000 }, () => {
        let spec;
        let plain;
        before(async () => {
            const model = process.env[env];
            spec = await startServer(['-np', '2', '--api-key', KEY], { model });
            plain = await startServer(['--spec', 'none', '-np', '1', '--api-key', KEY], { model });
        });
        after(async () => {
            assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
            assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
        });

        test('a thinking block, then the text; streamed as thinking_delta and text_delta; as plain decoding', async () => {
            const req = { ...base, max_tokens: 40, thinking: { type: 'enabled', budget_tokens: 1024 } };
            const r = await anthropic(spec).messages.create(req);
            const p = await anthropic(plain).messages.create(req);
            assert.deepEqual(r.specdec.tokens, p.specdec.tokens);
            assert.equal(r.content[0].type, 'thinking', JSON.stringify(r.content));
            assert.equal(r.content[0].thinking, REASONING);
            assert.equal(r.content[1].type, 'text');
            const o = await openai(spec).chat.completions.create({ ...base, model: 'x', max_tokens: 40 });
            assert.equal(r.content[1].text, o.choices[0].message.content);
            assert.equal(o.choices[0].message.reasoning_content, REASONING);
            const s = await collect(await anthropic(spec).messages.create({ ...req, stream: true }));
            assert.deepEqual(s.blocks.map((b) => b.type), ['thinking', 'text']);
            assert.equal(s.blocks[0].thinking, REASONING);
            assert.equal(s.blocks[1].text, r.content[1].text);
            const m = await anthropic(spec).messages.stream(req).finalMessage();
            assert.deepEqual(m.content, r.content);
        });

        test('thinking disabled: no thinking block, as enable_thinking false', async () => {
            const r = await anthropic(spec).messages.create({ ...base, max_tokens: 20, thinking: { type: 'disabled' } });
            const o = await openai(spec).chat.completions.create({ ...base, model: 'x', max_tokens: 20, chat_template_kwargs: { enable_thinking: false } });
            assert.deepEqual(r.specdec.tokens, o.specdec.tokens);
            assert.ok(r.content.every((b) => b.type !== 'thinking'), JSON.stringify(r.content));
            assert.equal(r.usage.input_tokens, o.usage.prompt_tokens);
        });
    });
}
