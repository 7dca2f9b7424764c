// Hostile clients, bounded in count and time, on 127.0.0.1 only (issue 33):
// four times the server's bound (-np + --max-waiting) in concurrent streams
// at the defaults, /health probed throughout; 100 slowloris sockets beside a
// valid request; SIGTERM while streams and slow sockets are open. Statuses,
// texts and exits are asserted; latencies are printed (reported, never asserted).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { metrics, post, sleep, startServer, stopServer } from './server.mjs';

const NP = 4; // the defaults of -np and --max-waiting
const MAX_WAITING = 64;
const BOUND = NP + MAX_WAITING;
const PROMPTS = ['abc', 'xyz', 'hello'];

// One streaming completion over fetch: its status, and for a 200 the text
// and how the stream ended ('done', or the error event's code).
async function stream(server, prompt, maxTokens, timeoutMs = 120000) {
    const res = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, stream: true }),
        signal: AbortSignal.timeout(timeoutMs),
    });
    const out = { status: res.status, retryAfter: res.headers.get('retry-after'), text: '', end: null, code: null };
    const body = await res.text();
    if (res.status !== 200) {
        out.code = JSON.parse(body).error.code;
        return out;
    }
    for (const line of body.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { out.end ??= 'done'; continue; }
        const j = JSON.parse(data);
        if (j.error) { out.end = j.error.code; continue; }
        out.text += j.choices[0].text;
    }
    return out;
}

// Probes /health every `everyMs` until stop() is called; every answer must be 200.
function probeHealth(server, everyMs = 25) {
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

function quantile(xs, q) {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

// A socket that sends half a request header, then one header byte a second:
// each read returns something, so only a deadline on the whole header ends it.
function slowloris(server, closed) {
    const { port } = new URL(server.url);
    const sock = net.connect(Number(port), '127.0.0.1');
    sock.on('error', () => {});
    sock.on('close', () => closed.push(performance.now()));
    sock.write('POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n');
    const timer = setInterval(() => { if (!sock.destroyed) sock.write('X'); }, 1000);
    sock.on('close', () => clearInterval(timer));
    return { sock, timer, destroy: () => { clearInterval(timer); sock.destroy(); } };
}

describe('serve under hostile clients', { timeout: 240000 }, () => {
    test(`${4 * BOUND} concurrent streams at the defaults: each a 200 or a 503, /health answers throughout`, async () => {
        const s = await startServer([]); // -np 4, --max-waiting 64
        try {
            const want = {};
            for (const p of PROMPTS) want[p] = (await stream(s, p, 256)).text;
            const health = probeHealth(s);
            const t0 = performance.now();
            const results = await Promise.all(Array.from({ length: 4 * BOUND }, (_, i) => stream(s, PROMPTS[i % PROMPTS.length], 256)));
            const wall = performance.now() - t0;
            await health.stop();
            const ok = results.filter((r) => r.status === 200);
            const busy = results.filter((r) => r.status === 503);
            assert.equal(ok.length + busy.length, results.length, `other statuses: ${results.filter((r) => r.status !== 200 && r.status !== 503).map((r) => r.status)}`);
            assert.ok(ok.length >= BOUND, `${ok.length} admitted; the bound is ${BOUND}`);
            assert.ok(busy.length > 0, 'four times the bound at once: some must be refused');
            results.forEach((r, i) => {
                if (r.status === 200) {
                    assert.equal(r.end, 'done');
                    assert.equal(r.text, want[PROMPTS[i % PROMPTS.length]], 'greedy text under load equals the unloaded one');
                } else {
                    assert.equal(r.code, 'queue_full');
                    assert.ok(Number(r.retryAfter) >= 1, 'Retry-After');
                }
            });
            assert.deepEqual(health.failures, []);
            assert.ok(health.latencies.length > 0);
            const m = await metrics(s);
            assert.equal(m.get('specdec:requests_rejected_total'), busy.length);
            console.log(`hostile: ${results.length} streams in ${(wall / 1000).toFixed(1)} s: ${ok.length} x 200, ${busy.length} x 503; ` +
                `/health ${health.latencies.length} probes, p50 ${quantile(health.latencies, 0.5).toFixed(1)} ms, ` +
                `p99 ${quantile(health.latencies, 0.99).toFixed(1)} ms, max ${Math.max(...health.latencies).toFixed(1)} ms`);
        } finally {
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('100 slowloris sockets: a valid request completes, and the header deadline closes them', async () => {
        const s = await startServer([]);
        const closed = [];
        const slow = [];
        try {
            const want = (await stream(s, 'abc', 16)).text;
            const t0 = performance.now();
            for (let i = 0; i < 100; i++) slow.push(slowloris(s, closed));
            await sleep(1500); // every socket has sent its half header and a byte
            const r = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 16, temperature: 0 });
            assert.equal(r.status, 200, r.text);
            assert.equal(r.json.choices[0].text, want);
            assert.equal((await fetch(`${s.url}/health`, { signal: AbortSignal.timeout(5000) })).status, 200);
            console.log(`hostile: a valid request beside 100 slowloris sockets answered after ${((performance.now() - t0) / 1000 - 1.5).toFixed(2)} s`);
            // They keep trickling; the server's 10 s header deadline ends them (bounded wait: 20 s).
            const until = performance.now() + 20000;
            while (closed.length < slow.length && performance.now() < until) await sleep(100);
            assert.equal(closed.length, slow.length, `${slow.length - closed.length} slow sockets still open after 20 s`);
        } finally {
            slow.forEach((x) => x.destroy());
            assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        }
    });

    test('SIGTERM while streams and slow sockets are open: every stream ends, exit 0', async () => {
        const s = await startServer(['--shutdown-timeout', '1']);
        const closed = [];
        const slow = Array.from({ length: 20 }, () => slowloris(s, closed));
        try {
            const pending = Array.from({ length: 2 * BOUND }, (_, i) => stream(s, PROMPTS[i % PROMPTS.length], 4000).catch((e) => ({ status: 0, error: String(e) })));
            await sleep(500);
            const t0 = performance.now();
            s.proc.kill('SIGTERM');
            const results = await Promise.all(pending);
            const exit = await Promise.race([s.exitPromise, sleep(30000).then(() => 'timeout')]);
            assert.deepEqual(exit, { code: 0, signal: null }, s.log);
            for (const r of results) {
                // A status for every request: finished, cancelled at the deadline (error event), or refused.
                assert.ok(r.status === 200 || r.status === 503, JSON.stringify(r));
                if (r.status === 200) assert.ok(r.end === 'done' || r.end === 'shutting_down', JSON.stringify(r));
            }
            console.log(`hostile: exited ${((performance.now() - t0) / 1000).toFixed(1)} s after SIGTERM with ${results.length} streams and ${slow.length} slow sockets open`);
        } finally {
            slow.forEach((x) => x.destroy());
            await stopServer(s);
        }
    });
});
