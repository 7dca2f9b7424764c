// Helpers of the serve tests: start `specdec serve` on a free port, the
// official OpenAI client for it, raw HTTP, Prometheus parsing, RSS.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import assert from 'node:assert/strict';

const require = createRequire(`${process.env.SPECDEC_OPENAI_DIR}/node_modules/`);
export const OpenAI = require('openai').OpenAI;

export const MODEL_ID = 'exact'; // the fixture's file name without .gguf

// Starts a server on `model` (default: the exact fixture) with `args` added
// to the defaults; resolves once its "listening on" line names the port. Its
// stderr is kept in .log. `nofile`: its descriptor limit, soft and hard
// (prlimit execs it, so .proc.pid is the server's).
export async function startServer(args = [], { env = {}, model = process.env.SPECDEC_MODEL, nofile = null } = {}) {
    const argv = ['serve', '-m', model, '--port', '0', '-t', '1', ...args];
    const [bin, all] = nofile ? ['prlimit', [`--nofile=${nofile}:${nofile}`, process.env.SPECDEC_BIN, ...argv]] : [process.env.SPECDEC_BIN, argv];
    const proc = spawn(bin, all, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
    const server = { proc, log: '', exited: null };
    server.exitPromise = new Promise((resolve) => proc.on('exit', (code, signal) => { server.exited = { code, signal }; resolve(server.exited); }));
    const url = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no "listening" line in 60 s:\n${server.log}`)), 60000);
        proc.stderr.on('data', (d) => {
            server.log += d.toString();
            const m = server.log.match(/specdec serve: listening on (https?:\/\/[0-9.]+:[0-9]+)/);
            if (m) { clearTimeout(timer); resolve(m[1]); }
        });
        proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`the server exited (${code}) before listening:\n${server.log}`)); });
    });
    server.url = url;
    server.client = (options = {}) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000, ...options });
    return server;
}

// SIGTERM, then the exit status (SIGKILL after `ms`).
export async function stopServer(server, ms = 30000) {
    if (!server || server.exited) return server?.exited;
    server.proc.kill('SIGTERM');
    const killer = setTimeout(() => server.proc.kill('SIGKILL'), ms);
    const st = await server.exitPromise;
    clearTimeout(killer);
    return st;
}

// Prometheus text -> Map from the series (name with labels) to its value.
export function parseMetrics(text) {
    const out = new Map();
    for (const line of text.split('\n')) {
        if (line === '' || line.startsWith('#')) continue;
        const at = line.lastIndexOf(' ');
        assert.ok(at > 0, `not a sample line: ${line}`);
        const value = Number(line.slice(at + 1));
        assert.ok(!Number.isNaN(value), `not a number: ${line}`);
        out.set(line.slice(0, at), value);
    }
    return out;
}

export async function metrics(server, headers = {}) {
    const res = await fetch(`${server.url}/metrics`, { headers });
    assert.equal(res.status, 200);
    return parseMetrics(await res.text());
}

// Polls `predicate(metrics)` until it holds (or fails after `ms`).
export async function waitForMetrics(server, predicate, ms = 10000) {
    const until = Date.now() + ms;
    let m;
    while (Date.now() < until) {
        m = await metrics(server);
        if (predicate(m)) return m;
        await sleep(50);
    }
    assert.fail(`metrics never matched; last:\n${[...m].map(([k, v]) => `${k} ${v}`).join('\n')}`);
}

export function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

// POST a body (a string is sent as is) and return { status, headers, json|text }.
export async function post(server, path, body, headers = {}) {
    const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, headers: res.headers, json, text };
}

// The OpenAI error object's shape.
export function assertError(r, status, code) {
    assert.equal(r.status, status, r.text);
    assert.equal(typeof r.json?.error?.message, 'string', r.text);
    assert.equal(typeof r.json.error.type, 'string', r.text);
    assert.ok('param' in r.json.error && 'code' in r.json.error, r.text);
    if (code !== undefined) assert.equal(r.json.error.code, code, r.text);
}

// Resident memory of a process in KiB.
export function rssKiB(pid) {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
    return Number(m[1]);
}

// Collects a completion stream: the text, the chunk count and the last chunk.
// A stream's text, its chunk count, the chunk that ended its choice (with
// finish_reason and specdec's statistics), the usage of the chunk after it
// (with stream_options.include_usage; else null), the last chunk, and the
// log-probability entries of every chunk in order (chat: `content`
// entries; completions: {token, logprob, top, offset}).
export async function collect(stream) {
    let text = '';
    let chunks = 0;
    let last = null;
    let finished = null;
    let usage = null;
    const logprobs = [];
    for await (const chunk of stream) {
        chunks += 1;
        const c = chunk.choices?.[0];
        if (c) text += c.text ?? c.delta?.content ?? '';
        if (c?.finish_reason) finished = chunk;
        if (chunk.usage) usage = chunk.usage;
        const lp = c?.logprobs;
        if (lp?.content) logprobs.push(...lp.content);
        if (lp?.tokens) {
            lp.tokens.forEach((token, i) => logprobs.push({ token, logprob: lp.token_logprobs[i], top: lp.top_logprobs[i], offset: lp.text_offset[i] }));
        }
        last = chunk;
    }
    return { text, chunks, finished, usage, last, logprobs };
}

// Plain decoding's answer for a greedy request, from a `--spec none` server (memoized).
export function reference(server) {
    const cache = new Map();
    return async (request) => {
        const key = JSON.stringify(request);
        if (!cache.has(key)) {
            const r = await server.client().completions.create({ ...request, stream: false, temperature: 0 });
            cache.set(key, { text: r.choices[0].text, tokens: r.specdec.tokens, finish: r.choices[0].finish_reason });
        }
        return cache.get(key);
    };
}

// What fetch cannot do, over a raw socket to 127.0.0.1: one request, written
// at once, with any headers (`headers` replace Host, Connection: close and
// the body's); `halfClose` then shuts the socket's write side (socket.end(),
// a TCP half-close) while it reads on. Resolves when the server closes the
// connection, with parseResponse's fields (status 0: no response at all).
export function rawRequest(server, { method = 'POST', path = '/v1/completions', body = '', headers = {}, halfClose = false, timeoutMs = 60000 } = {}) {
    return new Promise((resolve, reject) => {
        const { port } = new URL(server.url);
        const sock = net.connect(Number(port), '127.0.0.1');
        const data = [];
        const timer = setTimeout(() => { sock.destroy(); reject(new Error(`raw ${method} ${path}: the connection is open after ${timeoutMs} ms`)); }, timeoutMs);
        sock.on('data', (d) => data.push(d));
        sock.on('error', () => {}); // a reset: what came before it is the answer
        sock.on('close', () => { clearTimeout(timer); resolve(parseResponse(Buffer.concat(data))); });
        const all = { Host: `127.0.0.1:${port}`, Connection: 'close', ...(body !== '' ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } : {}), ...headers };
        const head = [`${method} ${path} HTTP/1.1`, ...Object.entries(all).map(([k, v]) => `${k}: ${v}`)];
        sock.write(`${head.join('\r\n')}\r\n\r\n${body}`);
        if (halfClose) sock.end();
    });
}

// Every HTTP/1.1 response in `buf`, in order: the interim (1xx) statuses
// before it, its status, headers (lower-case names), body (de-chunked; with
// neither chunks nor Content-Length, the rest of the connection), and the
// body's JSON when it is JSON. A response cut short ends the list.
export function parseResponses(buf) {
    const out = [];
    let interim = [];
    let at = 0;
    for (;;) {
        const end = buf.indexOf('\r\n\r\n', at);
        if (end < 0) return out;
        const lines = buf.subarray(at, end).toString().split('\r\n');
        const status = Number(lines[0].split(' ')[1]);
        const headers = {};
        for (const l of lines.slice(1)) {
            const i = l.indexOf(':');
            headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
        }
        at = end + 4;
        if (status >= 100 && status < 200) { interim.push(status); continue; }
        let body = '';
        if ((headers['transfer-encoding'] ?? '').includes('chunked')) {
            for (;;) {
                const eol = buf.indexOf('\r\n', at);
                if (eol < 0) { at = buf.length; break; }
                const n = parseInt(buf.subarray(at, eol).toString(), 16);
                at = eol + 2;
                if (!(n > 0)) { at += 2; break; }
                body += buf.subarray(at, at + n).toString();
                at += n + 2;
            }
        } else {
            const n = headers['content-length'] !== undefined ? Number(headers['content-length']) : buf.length - at;
            body = buf.subarray(at, at + n).toString();
            at += n;
        }
        let json = null;
        try { json = JSON.parse(body); } catch { /* not JSON */ }
        out.push({ status, interim, headers, body, json });
        interim = [];
    }
}

// The first response of a connection (parseResponses), or status 0 and the raw bytes when none came whole.
export function parseResponse(buf) {
    return parseResponses(buf)[0] ?? { status: 0, interim: [], headers: {}, body: '', json: null, raw: buf.toString() };
}

// The `data:` events of a server-sent event body: the JSON objects in
// order, and whether `[DONE]` ended them.
export function sseEvents(body) {
    const events = [];
    let done = false;
    for (const line of body.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        if (line === 'data: [DONE]') { done = true; continue; }
        events.push(JSON.parse(line.slice(6)));
    }
    return { events, done };
}

// Probes /health every `everyMs` until stop(); every answer must be a 200
// (the caller asserts on `failures` and reports `latencies`, in ms).
export function probeHealth(server, everyMs) {
    const latencies = [];
    const failures = [];
    let running = true;
    const done = (async () => {
        while (running) {
            const t0 = performance.now();
            try {
                const r = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(10000) });
                await r.text();
                if (r.status !== 200) failures.push(`status ${r.status}`);
            } catch (e) {
                failures.push(String(e));
            }
            latencies.push(performance.now() - t0);
            await sleep(everyMs);
        }
    })();
    return { latencies, failures, stop: async () => { running = false; await done; } };
}

export function quantile(xs, q) {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}
