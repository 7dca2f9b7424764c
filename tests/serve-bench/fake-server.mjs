#!/usr/bin/env node
// A stand-in for both servers the serving benchmark starts, for its driver
// test: answers like `llama-server ... --port P` (one event per token, HTTP
// on P) or like `specdec serve ... --port 0` (prints the listening line;
// with --spec mtp, two tokens an event). The text is a function of the
// prompt and max_tokens only, as greedy decoding's is. No model.
// Environment, for the test's failure cases: FAKE_PID_DIR (write the pid
// there), FAKE_FAIL_ARG (exit at start when this argument is given),
// FAKE_WRONG_ARG (change one token when it is given), FAKE_TOKEN_MS (delay
// between events, default 2), FAKE_REQUEST_LOG (append "SERVER MAX_TOKENS"
// there for each completion request, SERVER as the driver names it),
// FAKE_DROP_ARG (close the connection of every completion request when this
// argument is given), FAKE_PROMPT_LOG (append each completion request's
// prompt there, one JSON string a line), FAKE_BODY_LOG (append each
// completion request's body there, one JSON object a line). Each character of a prompt counts
// as a token, and the final usage says how many of them the longest common
// prefix with an earlier prompt covered, as a prompt cache would reuse.
import { createServer } from 'node:http';
import { appendFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : dflt; };
const specdec = argv[0] === 'serve';
const port = Number(opt('--port', '0'));
const per_event = specdec && opt('--spec', 'none') === 'mtp' ? 2 : 1;
if (argv.includes('--version')) { console.error('version: 0 (fake)'); process.exit(0); }
const env = process.env;
if (env.FAKE_PID_DIR) writeFileSync(path.join(env.FAKE_PID_DIR, String(process.pid)), argv.join(' '));
if (env.FAKE_FAIL_ARG && argv.includes(env.FAKE_FAIL_ARG)) { console.error('fake-server: failing on purpose'); process.exit(3); }
const wrong = env.FAKE_WRONG_ARG && argv.includes(env.FAKE_WRONG_ARG);
const drop = env.FAKE_DROP_ARG && argv.includes(env.FAKE_DROP_ARG);
const token_ms = Number(env.FAKE_TOKEN_MS ?? 2);
const name = specdec ? `specdec-${opt('--spec', 'none')}` : argv.includes('--spec-type') ? 'llama-mtp' : 'llama-plain';

const token = (prompt, i) => (wrong && i === 1 ? 'X ' : `${prompt.length % 7}${i} `);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const server = createServer(async (req, res) => {
    if (req.url === '/health') { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"status":"ok"}'); return; }
    if (req.url === '/v1/models') { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"data":[{"id":"fake"}]}'); return; }
    if (req.url === '/metrics') { res.writeHead(200); res.end(`# TYPE x counter\nfake_requests_total ${server.n ?? 0}\n`); return; }
    let body = '';
    for await (const part of req) body += part;
    const q = JSON.parse(body);
    if (q.model !== 'fake') { res.writeHead(400); res.end('model'); return; }
    server.n = (server.n ?? 0) + 1;
    if (env.FAKE_REQUEST_LOG) appendFileSync(env.FAKE_REQUEST_LOG, `${name} ${q.max_tokens}\n`);
    if (env.FAKE_PROMPT_LOG) appendFileSync(env.FAKE_PROMPT_LOG, `${JSON.stringify(q.prompt)}\n`);
    if (env.FAKE_BODY_LOG) appendFileSync(env.FAKE_BODY_LOG, `${JSON.stringify(q)}\n`);
    let cached = 0;
    for (const p of server.prompts ?? []) {
        let n = 0;
        while (n < p.length && n < q.prompt.length - 1 && p[n] === q.prompt[n]) n++;
        cached = Math.max(cached, n);
    }
    server.prompts = [...(server.prompts ?? []), q.prompt];
    if (drop) { req.socket.destroy(); return; }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    await sleep(5);
    for (let i = 0; i < q.max_tokens; i += per_event) {
        let text = '';
        for (let j = i; j < Math.min(q.max_tokens, i + per_event); j++) text += token(q.prompt, j);
        res.write(`data: ${JSON.stringify({ choices: [{ text, index: 0, finish_reason: null }] })}\n\n`);
        await sleep(token_ms);
    }
    const final = { choices: [{ text: '', index: 0, finish_reason: 'length' }],
                    usage: { completion_tokens: q.max_tokens, prompt_tokens: q.prompt.length, prompt_tokens_details: { cached_tokens: cached } } };
    if (!specdec && argv.includes('--spec-type')) final.timings = { draft_n: 4, draft_n_accepted: 2 };
    res.end(`data: ${JSON.stringify(final)}\n\ndata: [DONE]\n\n`);
});
server.listen(port, '127.0.0.1', () => {
    if (specdec) console.error(`specdec serve: listening on http://127.0.0.1:${server.address().port}`);
});
process.on('SIGTERM', () => process.exit(0));
