// Chat on the models scripts/demo.sh writes, with the chat template their
// fixtures carry (no --chat-template given): the official client, streaming
// and not, and the very request the demo prints for curl, each answered 200
// with the model's text. (A fixture once had no template of its own, and
// llama.cpp's fallback, ChatML, needs a newline its vocabulary lacks: 400.)
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { post, startServer, stopServer } from './server.mjs';

// name=path,... (run.sh writes them as the demo does)
const MODELS = process.env.SPECDEC_DEMO_MODELS.split(',').map((kv) => kv.split('='));
// The JSON body of the curl command scripts/demo.sh prints (run.sh reads it from the script).
const DEMO_REQUEST = process.env.SPECDEC_DEMO_CHAT_REQUEST;

describe('chat on the demo models', { timeout: 240000 }, () => {
    const servers = [];
    after(async () => {
        for (const s of servers) assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
    });

    for (const [name, model] of MODELS) {
        test(`${name}: chat, streaming and not, and the demo's curl request`, async () => {
            const s = await startServer(['-np', '2', '-c', '1024'], { model });
            servers.push(s);
            const id = path.basename(model, '.gguf');
            const req = { model: id, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello! Who are you?' }],
                          max_tokens: 12, temperature: 0 };
            const r = await s.client().chat.completions.create(req);
            assert.equal(r.choices[0].message.role, 'assistant');
            assert.ok(r.choices[0].message.content.length > 0, JSON.stringify(r));
            assert.equal(r.usage.completion_tokens, 12);

            const stream = await s.client().chat.completions.create({ ...req, stream: true });
            let text = '';
            for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
            assert.equal(text, r.choices[0].message.content);

            assert.ok(DEMO_REQUEST, 'no chat request found in scripts/demo.sh');
            const demo = await post(s, '/v1/chat/completions', DEMO_REQUEST);
            assert.equal(demo.status, 200, demo.text);
            assert.equal(typeof demo.json.choices[0].message.content, 'string');
        });
    }
});
