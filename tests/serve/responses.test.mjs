// OpenAI's Responses API through the official client's `responses.create`
// (whole and `stream: true`) and `responses.stream()`: POST /v1/responses
// answered with the tokens plain decoding and the chat route choose for the
// same conversation; instructions and input items; max_output_tokens ends
// it incomplete; function calls and their outputs round-trip on the tools
// fixture; reasoning items on the thinking fixtures; every field this
// server does not implement refused with 400 naming it, as the SDK's
// BadRequestError.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAI, assertError, post, startServer, stopServer } from './server.mjs';

const base = { model: 'exact', input: 'hi', max_output_tokens: 24, temperature: 0 };
const chatOf = (extra = {}) => ({ model: 'exact', messages: [{ role: 'user', content: 'hi' }], max_tokens: 24, temperature: 0, ...extra });

// A raw event stream added up: the events' types in order (sequence numbers
// checked), the items as output_item.done gave them, the text deltas of
// each kind, and the final response.
async function collect(stream) {
    const out = { types: [], items: [], text: '', reasoning: '', args: '', final: null };
    for await (const e of stream) {
        assert.equal(e.sequence_number, out.types.length, `events numbered in order: ${JSON.stringify(e)}`);
        out.types.push(e.type);
        if (e.type === 'response.output_text.delta') out.text += e.delta;
        if (e.type === 'response.reasoning_text.delta') out.reasoning += e.delta;
        if (e.type === 'response.function_call_arguments.delta') out.args += e.delta;
        if (e.type === 'response.output_item.added') assert.equal(e.output_index, out.items.length, 'items added in order');
        if (e.type === 'response.output_item.done') out.items[e.output_index] = e.item;
        if (['response.completed', 'response.incomplete', 'response.failed'].includes(e.type)) out.final = e.response;
    }
    assert.deepEqual(out.types.slice(0, 2), ['response.created', 'response.in_progress']);
    assert.ok(out.final, 'the stream ended with the response');
    assert.deepEqual(out.final.output, out.items, 'the final response holds the items as they were done');
    return out;
}

// The output without its ids (random per response) and what responses.stream()'s parser adds (parsed, parsed_arguments).
const withoutIds = (output) => output.map(({ id, call_id, parsed_arguments, ...item }) => ({
    ...item, ...(item.content ? { content: item.content.map(({ parsed, ...part }) => part) } : {}),
}));

describe('responses', { timeout: 240000 }, () => {
    let spec; // MTP with the exact drafter
    let plain; // --spec none, the reference
    let first; // the plain answer to `base`
    before(async () => {
        spec = await startServer(['-np', '2']);
        plain = await startServer(['--spec', 'none', '-np', '1']);
        first = await plain.client().responses.create(base);
    });
    after(async () => {
        assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
        assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
    });

    test('responses.create: the tokens of plain decoding and of the chat route; max_output_tokens ends it incomplete', async () => {
        const r = await spec.client().responses.create(base);
        assert.match(r.id, /^resp_/);
        assert.equal(r.object, 'response');
        assert.equal(typeof r.created_at, 'number');
        assert.equal(r.status, 'incomplete');
        assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
        assert.equal(r.error, null);
        assert.equal(r.model, 'exact');
        assert.equal(r.output.length, 1);
        const [m] = r.output;
        assert.equal(m.type, 'message');
        assert.equal(m.role, 'assistant');
        assert.match(m.id, /^msg_/);
        assert.equal(m.status, 'incomplete');
        assert.equal(m.content.length, 1);
        assert.equal(m.content[0].type, 'output_text');
        assert.equal(r.output_text, m.content[0].text, 'the SDK\'s output_text');
        assert.ok(r.output_text.length > 0);
        assert.equal(r.usage.output_tokens, 24);
        assert.equal(r.usage.total_tokens, r.usage.input_tokens + 24);
        assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
        assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
        assert.deepEqual(r.specdec.tokens, first.specdec.tokens, 'speculation chose what plain decoding chose');
        assert.equal(r.output_text, first.output_text);
        assert.ok(r.specdec.drafted > 0);
        const o = await spec.client().chat.completions.create(chatOf());
        assert.deepEqual(r.specdec.tokens, o.specdec.tokens, 'the chat route chose the same');
        assert.equal(r.output_text, o.choices[0].message.content);
        assert.equal(r.usage.input_tokens, o.usage.prompt_tokens);
        // What the request asked, repeated.
        assert.equal(r.temperature, 0);
        assert.equal(r.max_output_tokens, 24);
        assert.equal(r.tool_choice, 'auto');
        assert.deepEqual(r.tools, []);
        assert.equal(r.store, false, 'nothing is stored');
    });

    test('streams: the raw events, and responses.stream().finalResponse(), add up to the response', async () => {
        const s = await collect(await spec.client().responses.create({ ...base, stream: true }));
        assert.equal(s.text, first.output_text, 'the deltas add up to the whole text');
        assert.deepEqual(s.types.slice(2, 4), ['response.output_item.added', 'response.content_part.added']);
        assert.ok(s.types.includes('response.output_text.delta'));
        assert.deepEqual(s.types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done',
            'response.incomplete']);
        assert.equal(s.final.status, 'incomplete');
        assert.deepEqual(s.final.specdec.tokens, first.specdec.tokens);
        assert.deepEqual(withoutIds(s.final.output), withoutIds(first.output));
        assert.equal(s.final.usage.input_tokens, first.usage.input_tokens);
        assert.equal(s.final.usage.output_tokens, 24);
        const events = [];
        const stream = spec.client().responses.stream(base);
        stream.on('response.output_text.delta', (e) => events.push(e.delta));
        const r = await stream.finalResponse();
        assert.equal(r.output_text, first.output_text);
        assert.equal(events.join(''), first.output_text);
        assert.deepEqual(withoutIds(r.output), withoutIds(first.output));
    });

    test('instructions and input items reach the prompt as the chat route\'s messages do', async () => {
        const c = spec.client();
        const system = 'be brief';
        const a = await c.responses.create({ ...base, instructions: system });
        const o = await plain.client().chat.completions.create(chatOf({ messages: [{ role: 'system', content: system }, { role: 'user', content: 'hi' }] }));
        assert.deepEqual(a.specdec.tokens, o.specdec.tokens);
        assert.equal(a.usage.input_tokens, o.usage.prompt_tokens);
        assert.ok(a.usage.input_tokens > first.usage.input_tokens);
        const parts = await c.responses.create({ ...base, input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }] });
        assert.deepEqual(parts.specdec.tokens, first.specdec.tokens);
        // A conversation: the earlier answer's output items sent back as input, then a developer's and a user's turn.
        const turns = [{ role: 'user', content: 'hi' }, ...first.output, { type: 'message', role: 'developer', content: 'dev' },
            { role: 'user', content: 'more' }];
        const t = await c.responses.create({ ...base, input: turns });
        const ot = await c.chat.completions.create(chatOf({ messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: first.output_text },
            { role: 'developer', content: 'dev' }, { role: 'user', content: 'more' }] }));
        assert.deepEqual(t.specdec.tokens, ot.specdec.tokens);
        assert.equal(t.usage.input_tokens, ot.usage.prompt_tokens);
    });

    test('text.format json_object: the chat route\'s response_format', async () => {
        const r = await spec.client().responses.create({ ...base, max_output_tokens: 8, text: { format: { type: 'json_object' } } });
        const o = await spec.client().chat.completions.create(chatOf({ max_tokens: 8, response_format: { type: 'json_object' } }));
        assert.deepEqual(r.specdec.tokens, o.specdec.tokens);
        assert.match(r.output_text, /^\s*\{/);
    });

    test('what is not implemented is a 400 naming it, as the SDK\'s BadRequestError', async () => {
        const c = spec.client();
        const refused = (param, code = 'unsupported_parameter') => (e) => {
            assert.ok(e instanceof OpenAI.BadRequestError, `${e}`);
            assert.equal(e.status, 400);
            assert.equal(e.param, param, e.message);
            assert.equal(e.code, code, e.message);
            assert.equal(e.type, 'invalid_request_error');
            assert.ok(e.message.includes(param.replace(/[.[].*/, '')), e.message);
            return true;
        };
        const cases = [
            [{ previous_response_id: 'resp_1' }, 'previous_response_id'],
            [{ conversation: 'conv_1' }, 'conversation'],
            [{ background: true }, 'background'],
            [{ include: ['message.output_text.logprobs'] }, 'include[0]'],
            [{ top_logprobs: 3 }, 'top_logprobs'],
            [{ truncation: 'auto' }, 'truncation'],
            [{ prompt: { id: 'pmpt_1' } }, 'prompt'],
            [{ max_tool_calls: 2 }, 'max_tool_calls'],
            [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
            [{ tools: [{ type: 'function', name: 'f', parameters: {}, strict: true, defer_loading: true }] }, 'tools[0].defer_loading'],
            [{ tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [] } }, 'tool_choice'],
            [{ text: { verbosity: 'high' } }, 'text.verbosity'],
            [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png', detail: 'auto' }] }] }, 'input[0].content[0].type'],
            [{ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }, 'input[0].content[0].type'],
            [{ input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type'],
            [{ stop: ['x'] }, 'stop'],
            [{ max_output_tokens: 0 }, 'max_output_tokens', 'invalid_value'],
            [{ temperature: 3 }, 'temperature', 'invalid_value'],
            [{ input: undefined }, 'input', 'missing_field'],
        ];
        for (const [extra, param, code] of cases) {
            await assert.rejects(c.responses.create({ ...base, ...extra }), refused(param, code), JSON.stringify(extra));
        }
        // What changes no token is taken: the same answer.
        const ok = await c.responses.create({ ...base, max_output_tokens: 4, metadata: { k: 'v' }, user: 'u', store: true, background: false,
            truncation: 'disabled', service_tier: 'auto', prompt_cache_key: 'k', reasoning: { summary: 'auto' }, include: [] });
        assert.deepEqual(ok.specdec.tokens, first.specdec.tokens.slice(0, 4));
        assert.deepEqual(ok.metadata, { k: 'v' });
        // Nothing stored, nothing to fetch.
        for (const call of [() => c.responses.retrieve(first.id), () => c.responses.delete(first.id), () => c.responses.inputItems.list(first.id)]) {
            await assert.rejects(call(), (e) => e instanceof OpenAI.NotFoundError && /stores no responses/.test(e.message));
        }
    });

    test('deep and wide JSON in its fields: 400 naming the field, at once; the server goes on', async () => {
        const deep = (n) => '['.repeat(n) + ']'.repeat(n);
        const body = (o) => JSON.stringify({ model: 'exact', input: 'hi', max_output_tokens: 4, ...o });
        const deepIn = (json) => json.replace('"@"', deep(100000));
        const cases = [
            ['input 100k deep', `{"input": ${deep(100000)}}`, 'json_too_deep', 'input'],
            ['content 100k deep', deepIn(body({ input: [{ role: 'user', content: '@' }] })), 'json_too_deep', 'input'],
            ['tool parameters 100k deep', deepIn(body({ tools: [{ type: 'function', name: 'f', parameters: '@' }] })), 'json_too_deep', 'tools'],
            ['schema 100k deep', deepIn(body({ text: { format: { type: 'json_schema', name: 'x', schema: '@' } } })), 'json_too_deep', 'text'],
            ['metadata 100k deep', deepIn(body({ metadata: { k: '@' } })), 'json_too_deep', 'metadata'],
            ['call arguments text 100k deep', body({ input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: deep(100000) }] }),
                'json_too_deep', 'input[0].arguments'],
            ['100k items', body({ input: Array(100000).fill({ role: 'user', content: 'a' }) }), 'json_too_large', 'input'],
            ['a prompt the context cannot hold', body({ input: 'hi '.repeat(100000) }), 'context_length_exceeded', 'input'],
        ];
        for (const [name, text, code, param] of cases) {
            const r = await post(spec, '/v1/responses', text);
            assertError(r, 400, code);
            assert.equal(r.json.error.param, param, `${name}: ${r.text.slice(0, 300)}`);
            assert.equal((await fetch(`${spec.url}/health`)).status, 200, `after ${name}`);
        }
        const r = await post(spec, '/responses', body({ max_output_tokens: 24 })); // also without /v1
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.json.specdec.tokens, first.specdec.tokens);
    });
});

const weather = {
    type: 'function',
    name: 'get_weather',
    description: 'The weather of a city over the next days',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer' } }, required: ['city', 'days'] },
    strict: true,
};
const toolsReq = { model: 'tools', input: 'What is the weather in Paris?', tools: [weather], parallel_tool_calls: false, max_output_tokens: 120, temperature: 0 };
// The same through the chat route.
const chatTools = { model: 'tools', messages: [{ role: 'user', content: toolsReq.input }], parallel_tool_calls: false, max_tokens: 120, temperature: 0,
    tools: [{ type: 'function', function: { name: weather.name, description: weather.description, parameters: weather.parameters } }] };

describe('responses function calls', { timeout: 240000 }, () => {
    let spec;
    let plain;
    before(async () => {
        const model = process.env.SPECDEC_TOOLS_MODEL;
        spec = await startServer(['-np', '2', '-c', '2048'], { model });
        plain = await startServer(['--spec', 'none', '-np', '1', '-c', '2048'], { model });
    });
    after(async () => {
        assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
        assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
    });

    test('a function_call item with its call_id and arguments, status completed, streamed alike, as plain decoding', async () => {
        for (const tool_choice of ['auto', 'required', { type: 'function', name: 'get_weather' }]) {
            const req = { ...toolsReq, tool_choice };
            const r = await spec.client().responses.create(req);
            const p = await plain.client().responses.create(req);
            assert.equal(r.status, 'completed', JSON.stringify(r));
            assert.equal(typeof r.completed_at, 'number');
            const calls = r.output.filter((i) => i.type === 'function_call');
            assert.equal(calls.length, 1, JSON.stringify(r.output));
            assert.match(calls[0].call_id, /^call_[A-Za-z0-9]{24}$/);
            assert.match(calls[0].id, /^fc_/);
            assert.equal(calls[0].name, 'get_weather');
            const args = JSON.parse(calls[0].arguments);
            assert.equal(typeof args.city, 'string');
            assert.ok(Number.isInteger(args.days), calls[0].arguments);
            assert.deepEqual(r.specdec.tokens, p.specdec.tokens);
            assert.deepEqual(withoutIds(r.output), withoutIds(p.output));
            const o = await spec.client().chat.completions.create({ ...chatTools,
                tool_choice: typeof tool_choice === 'string' ? tool_choice : { type: 'function', function: { name: 'get_weather' } } });
            assert.deepEqual(r.specdec.tokens, o.specdec.tokens, 'the chat route chose the same');
            assert.equal(calls[0].arguments, o.choices[0].message.tool_calls[0].function.arguments);
            const s = await collect(await spec.client().responses.create({ ...req, stream: true }));
            assert.equal(s.final.status, 'completed');
            assert.equal(s.types.at(-1), 'response.completed');
            assert.ok(s.types.includes('response.function_call_arguments.done'));
            assert.deepEqual(withoutIds(s.final.output), withoutIds(r.output));
            assert.equal(s.args, calls[0].arguments, 'the argument deltas add up to the arguments');
            const f = await spec.client().responses.stream(req).finalResponse();
            assert.deepEqual(withoutIds(f.output), withoutIds(r.output));
        }
    });

    test('function_call and function_call_output items reach the next prompt as the chat route\'s tool messages do', async () => {
        const c = spec.client();
        const r = await c.responses.create({ ...toolsReq, tool_choice: 'required' });
        const call = r.output.find((i) => i.type === 'function_call');
        const result = 'sunny and mild, 21 degrees';
        const next = await c.responses.create({ ...toolsReq, tool_choice: 'auto',
            input: [{ role: 'user', content: toolsReq.input }, ...r.output, { type: 'function_call_output', call_id: call.call_id, output: result }] });
        const o = await c.chat.completions.create({ ...chatTools, tool_choice: 'auto',
            messages: [...chatTools.messages,
                { role: 'assistant', content: '', tool_calls: [{ id: call.call_id, type: 'function', function: { name: call.name, arguments: call.arguments } }] },
                { role: 'tool', tool_call_id: call.call_id, content: result }] });
        assert.equal(next.usage.input_tokens, o.usage.prompt_tokens);
        assert.deepEqual(next.specdec.tokens, o.specdec.tokens);
        const grown = next.usage.input_tokens - r.usage.input_tokens;
        assert.ok(grown >= (call.arguments.length + result.length) / 2, `the prompt grew by ${grown} tokens`);
    });
});

const REASONING = '?@ABCDEFGHIJKLMNOPQRSTUVWXYZ'; // the thinking fixtures' reasoning (reasoning.test.mjs)

for (const [style, env] of [['qwen', 'SPECDEC_THINK_QWEN_MODEL'], ['deepseek', 'SPECDEC_THINK_DEEPSEEK_MODEL']]) {
    describe(`responses reasoning, ${style}-style`, { timeout: 240000 }, () => {
        let spec;
        let plain;
        const req = { model: 'x', input: 'hi', max_output_tokens: 40, temperature: 0 };
        before(async () => {
            const model = process.env[env];
            spec = await startServer(['-np', '2'], { model });
            plain = await startServer(['--spec', 'none', '-np', '1'], { model });
        });
        after(async () => {
            assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
            assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
        });

        test('a reasoning item, then the message; streamed as reasoning_text deltas; as plain decoding and the chat route', async () => {
            const r = await spec.client().responses.create(req);
            const p = await plain.client().responses.create(req);
            assert.deepEqual(r.specdec.tokens, p.specdec.tokens);
            assert.deepEqual(r.output.map((i) => i.type), ['reasoning', 'message'], JSON.stringify(r.output));
            assert.match(r.output[0].id, /^rs_/);
            assert.deepEqual(r.output[0].content, [{ type: 'reasoning_text', text: REASONING }]);
            const o = await spec.client().chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 40, temperature: 0 });
            assert.equal(o.choices[0].message.reasoning_content, REASONING);
            assert.equal(r.output_text, o.choices[0].message.content);
            assert.deepEqual(r.specdec.tokens, o.specdec.tokens);
            // The reasoning's tokens: the text and both markers, or the text and the end marker when the template opened the block.
            const n = r.usage.output_tokens_details.reasoning_tokens;
            assert.ok(n >= REASONING.length / 2 && n < r.usage.output_tokens, `${n} of ${r.usage.output_tokens}`);
            const s = await collect(await spec.client().responses.create({ ...req, stream: true }));
            assert.equal(s.reasoning, REASONING);
            assert.equal(s.text, r.output_text);
            assert.deepEqual(withoutIds(s.final.output), withoutIds(r.output));
            assert.equal(s.final.usage.output_tokens_details.reasoning_tokens, n);
            const f = await spec.client().responses.stream(req).finalResponse();
            assert.deepEqual(withoutIds(f.output), withoutIds(r.output));
        });

        test('reasoning.effort none: no reasoning item, as enable_thinking false', async () => {
            const r = await spec.client().responses.create({ ...req, max_output_tokens: 20, reasoning: { effort: 'none' } });
            const o = await spec.client().chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20, temperature: 0,
                chat_template_kwargs: { enable_thinking: false } });
            assert.deepEqual(r.specdec.tokens, o.specdec.tokens);
            assert.ok(r.output.every((i) => i.type !== 'reasoning'), JSON.stringify(r.output));
            assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
        });

        test('a reasoning item sent back reaches the prompt as an assistant\'s reasoning_content; encrypted_content round-trips', async () => {
            const r = await spec.client().responses.create({ ...req, include: ['reasoning.encrypted_content'] });
            assert.equal(typeof r.output[0].encrypted_content, 'string');
            const turn = [{ role: 'user', content: 'hi' }, ...r.output, { role: 'user', content: 'more' }];
            const next = await spec.client().responses.create({ ...req, input: turn });
            const o = await spec.client().chat.completions.create({ model: 'x', max_tokens: 40, temperature: 0, messages: [{ role: 'user', content: 'hi' },
                { role: 'assistant', content: r.output_text, reasoning_content: REASONING }, { role: 'user', content: 'more' }] });
            assert.equal(next.usage.input_tokens, o.usage.prompt_tokens);
            assert.deepEqual(next.specdec.tokens, o.specdec.tokens);
            // Only the encrypted content (Codex keeps that): the same prompt.
            const opaque = r.output.map((i) => (i.type === 'reasoning' ? { type: 'reasoning', id: i.id, summary: [], encrypted_content: i.encrypted_content } : i));
            const again = await spec.client().responses.create({ ...req, input: [{ role: 'user', content: 'hi' }, ...opaque, { role: 'user', content: 'more' }] });
            assert.equal(again.usage.input_tokens, next.usage.input_tokens);
        });
    });
}

describe('responses failing mid-stream', { timeout: 120000 }, () => {
    test('a stream cancelled past --shutdown-timeout ends with an error event and response.failed; the server exits 0', async () => {
        const s = await startServer(['-np', '1', '-c', '65536', '--shutdown-timeout', '0.3']);
        try {
            const stream = await s.client().responses.create({ model: 'exact', input: 'hi', max_output_tokens: 60000, temperature: 0, stream: true });
            const events = [];
            let text = '';
            for await (const e of stream) {
                assert.equal(e.sequence_number, events.length);
                events.push(e);
                if (e.type === 'response.output_text.delta') {
                    text += e.delta;
                    if (!s.proc.killed) s.proc.kill('SIGTERM'); // once it writes
                }
            }
            const [error, failed] = events.slice(-2);
            assert.equal(error.type, 'error', JSON.stringify(error));
            assert.equal(error.code, 'shutting_down');
            assert.equal(failed.type, 'response.failed');
            assert.equal(failed.response.status, 'failed');
            assert.equal(failed.response.error.code, 'server_error');
            assert.equal(failed.response.output[0].content[0].text, text, 'what was streamed');
            assert.deepEqual(await s.exitPromise, { code: 0, signal: null }, s.log);
        } finally {
            await stopServer(s);
        }
    });
});
