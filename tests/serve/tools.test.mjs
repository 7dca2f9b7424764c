// Tool calls through the official client: `tools` and `tool_choice` on a
// fixture whose chat template has a tool-call format llama.cpp recognises
// (tools-template.jinja). Its target calls a tool by itself; the grammar
// llama.cpp derives from the tools writes the call (lazy for "auto", from
// the first token for "required" and a named function). Calls come back as
// message.tool_calls, streamed as OpenAI streams them, equal to plain
// decoding's; tool_choice "none" calls nothing; an agent loop's assistant
// calls and tool results are templated into the next prompt.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAI, startServer, stopServer } from './server.mjs';

const weather = {
    type: 'function',
    function: {
        name: 'get_weather',
        description: 'The weather of a city over the next days',
        parameters: {
            type: 'object',
            properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer' } },
            required: ['city', 'days'],
        },
    },
};
const add = {
    type: 'function',
    function: {
        name: 'add',
        description: 'The sum of two integers',
        parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] },
    },
};
const tools = [weather, add];
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const base = { model: 'tools', messages, tools, parallel_tool_calls: false, max_tokens: 120, temperature: 0 };

// A call whose arguments are JSON holding its schema's required keys, each of its type.
function assertValidCall(call) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    const tool = tools.find((t) => t.function.name === call.function.name);
    assert.ok(tool, `a listed function: ${call.function.name}`);
    const args = JSON.parse(call.function.arguments);
    const { properties, required } = tool.function.parameters;
    for (const key of required) {
        assert.ok(key in args, `${key} in ${call.function.arguments}`);
        const want = properties[key].type;
        assert.ok(want === 'integer' ? Number.isInteger(args[key]) : typeof args[key] === want, `${key}: ${call.function.arguments}`);
    }
    if (typeof args.city === 'string') assert.ok(args.city.length <= 8, args.city);
    return args;
}

// A stream's chunks added up as a client does: role, content, calls by index (ids once).
async function collectCalls(stream) {
    let role = null;
    let content = '';
    let finish = null;
    const calls = [];
    for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        if (c.delta.role) { assert.equal(role, null, 'role once'); role = c.delta.role; }
        content += c.delta.content ?? '';
        for (const d of c.delta.tool_calls ?? []) {
            if (d.index === calls.length) {
                assert.ok(d.id && d.type === 'function' && d.function.name, `a call's first delta names it: ${JSON.stringify(d)}`);
                calls.push({ id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } });
            } else {
                assert.ok(d.index < calls.length, `calls open in order: ${JSON.stringify(d)}`);
                assert.equal(d.id, undefined, 'the id comes once');
            }
            calls[d.index].function.arguments += d.function?.arguments ?? '';
        }
        if (c.finish_reason) finish = c.finish_reason;
    }
    return { role, content, calls, finish };
}

const withoutIds = (calls) => calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));

describe('serve tools', { timeout: 240000 }, () => {
    let spec; // MTP with the exact drafter
    let plain; // --spec none, the reference

    before(async () => {
        const model = process.env.SPECDEC_TOOLS_MODEL;
        spec = await startServer(['-np', '2', '-c', '2048'], { model });
        plain = await startServer(['--spec', 'none', '-np', '1', '-c', '2048'], { model });
    });
    after(async () => {
        assert.deepEqual(await stopServer(spec), { code: 0, signal: null }, spec.log);
        assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
    });

    test('auto, required and a named function: a valid call, finish_reason tool_calls, as plain decoding', async () => {
        for (const tool_choice of ['auto', 'required', { type: 'function', function: { name: 'get_weather' } }]) {
            const req = { ...base, tool_choice };
            const r = await spec.client().chat.completions.create(req);
            const p = await plain.client().chat.completions.create(req);
            const m = r.choices[0].message;
            assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
            assert.equal(m.role, 'assistant');
            assert.equal(m.content, null, 'only a call');
            assert.equal(m.tool_calls.length, 1, JSON.stringify(m));
            assertValidCall(m.tool_calls[0]);
            if (typeof tool_choice === 'object') assert.equal(m.tool_calls[0].function.name, 'get_weather', 'the named function');
            assert.deepEqual(r.specdec.tokens, p.specdec.tokens, 'speculation chose what plain decoding chose');
            assert.deepEqual(withoutIds(m.tool_calls), withoutIds(p.choices[0].message.tool_calls));
            assert.ok(r.specdec.drafted > 0);
        }
    });

    test('the named function overrides the model\'s own choice, and every tool stays in the prompt', async () => {
        const free = await spec.client().chat.completions.create({ ...base, tool_choice: 'required' });
        const other = tools.map((t) => t.function.name).find((n) => n !== free.choices[0].message.tool_calls[0].function.name);
        const named = await spec.client().chat.completions.create({ ...base, tool_choice: { type: 'function', function: { name: other } } });
        assert.equal(named.choices[0].message.tool_calls[0].function.name, other);
        assertValidCall(named.choices[0].message.tool_calls[0]);
        assert.equal(named.usage.prompt_tokens, free.usage.prompt_tokens);
    });

    test('streamed deltas add up to the non-streamed answer', async () => {
        for (const tool_choice of ['auto', { type: 'function', function: { name: 'get_weather' } }]) {
            const req = { ...base, tool_choice };
            const whole = await spec.client().chat.completions.create(req);
            const got = await collectCalls(await spec.client().chat.completions.create({ ...req, stream: true }));
            assert.equal(got.role, 'assistant');
            assert.equal(got.content, '');
            assert.equal(got.finish, 'tool_calls');
            assert.deepEqual(withoutIds(got.calls), withoutIds(whole.choices[0].message.tool_calls));
            got.calls.forEach(assertValidCall);
            // The client's own stream helper assembles the same message.
            const final = await spec.client().chat.completions.stream(req).finalChatCompletion();
            assert.equal(final.choices[0].finish_reason, 'tool_calls');
            assert.deepEqual(withoutIds(final.choices[0].message.tool_calls), withoutIds(whole.choices[0].message.tool_calls));
        }
    });

    test('tool_choice none: no call, though the tools are in the prompt', async () => {
        const req = { ...base, tool_choice: 'none', max_tokens: 24 };
        for (const stream of [false, true]) {
            if (!stream) {
                const r = await spec.client().chat.completions.create(req);
                assert.equal(r.choices[0].message.tool_calls, undefined);
                assert.equal(typeof r.choices[0].message.content, 'string');
                assert.equal(r.choices[0].finish_reason, 'length');
                const shown = await spec.client().chat.completions.create({ ...base, max_tokens: 1 });
                const bare = await spec.client().chat.completions.create({ model: 'tools', messages, max_tokens: 1 });
                assert.equal(r.usage.prompt_tokens, shown.usage.prompt_tokens);
                assert.ok(r.usage.prompt_tokens > bare.usage.prompt_tokens + 100, `${r.usage.prompt_tokens} vs ${bare.usage.prompt_tokens}`);
            } else {
                const got = await collectCalls(await spec.client().chat.completions.create({ ...req, stream: true }));
                assert.deepEqual(got.calls, []);
                assert.equal(got.finish, 'length');
                assert.ok(got.content.length > 0);
            }
        }
    });

    test('an agent loop: assistant calls and tool results are templated into the next prompt', async () => {
        const first = await spec.client().chat.completions.create({ ...base, tool_choice: 'required' });
        const call = first.choices[0].message.tool_calls[0];
        const result = 'sunny and mild, 21 degrees';
        const next = [...messages, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: result }];
        const second = await spec.client().chat.completions.create({ ...base, messages: next, tool_choice: 'auto' });
        assertValidCall(second.choices[0].message.tool_calls[0]);
        // Each fixture token spells one or two characters: the call's text and the result's are in the prompt.
        const grown = second.usage.prompt_tokens - first.usage.prompt_tokens;
        const written = call.function.name.length + call.function.arguments.length + result.length;
        assert.ok(grown >= written / 2, `the prompt grew by ${grown} tokens for ${written} characters`);
        // The official client's tool runner: it calls our functions and sends their results back.
        const seen = [];
        const runner = spec.client().chat.completions.runTools({
            model: 'tools', messages, max_tokens: 120, temperature: 0, parallel_tool_calls: false,
            tools: tools.map((t) => ({ type: 'function', function: { ...t.function, parse: JSON.parse, function: (args) => { seen.push(args); return 'ok'; } } })),
        }, { maxChatCompletions: 2 });
        await runner.done().catch(() => {}); // it stops at 2 completions: this model calls at every turn
        assert.equal(runner.allChatCompletions().length, 2);
        assert.equal(seen.length, 2);
        assert.ok(runner.messages.some((m) => m.role === 'tool'));
    });

    test('a client\'s grammar on chat still holds, without tools or with tool_choice none', async () => {
        const g = await spec.client().chat.completions.create({ model: 'tools', messages, max_tokens: 8, temperature: 0, grammar: 'root ::= [a-c]+' });
        assert.match(g.choices[0].message.content, /^[a-c]+$/);
        const j = await spec.client().chat.completions.create({ ...base, tool_choice: 'none', max_tokens: 8, response_format: { type: 'json_object' } });
        assert.match(j.choices[0].message.content, /^\s*\{/);
        assert.equal(j.choices[0].message.tool_calls, undefined);
    });

    test('what is not taken is refused, named', async () => {
        const c = spec.client();
        await assert.rejects(c.chat.completions.create({ ...base, tool_choice: { type: 'function', function: { name: 'nope' } } }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
        await assert.rejects(c.chat.completions.create({ ...base, response_format: { type: 'json_object' } }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format' && e.code === 'unsupported_parameter');
        await assert.rejects(c.chat.completions.create({ ...base, functions: [add.function] }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'functions' && e.code === 'unsupported_parameter');
        await assert.rejects(c.completions.create({ model: 'tools', prompt: 'abc', tools }),
            (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools');
    });
});
