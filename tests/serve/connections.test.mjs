// The event-driven transport under many connections (issue 43), on
// 127.0.0.1 only: 1,000 silent and slowloris sockets and 100 slow readers
// while /health is probed and a valid stream runs; a stream its client
// stops reading, paused and resumed; pipelined
// requests; keep-alive held for the advertised timeout; connection storms
// past the descriptor limit; 100 concurrent large bodies against the body
// memory budget; the Host allow-list; HTTPS; API key files and headers.
// Statuses, tokens and text are asserted; latencies and memory are printed
// (with generous bounds where they are asserted). Node raises its own
// descriptor limit to the hard one at start, which the 1,000 sockets need.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import https from 'node:https';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MODEL_ID, metrics, parseResponses, post, probeHealth, quantile, rssKiB, sleep, sseEvents, startServer, stopServer, waitForMetrics } from './server.mjs';

// A sanitizer build (tests/CMakeLists.txt): ASan's quarantine holds freed
// memory, and UBSan's vptr check opens a pipe, which fails out of descriptors.
const SANITIZED = process.env.SPECDEC_SANITIZED === '1';
// Slow readers beside the crowd: 100, as issue 43 measures; fewer under the
// sanitizers, whose builds decode several times slower (what is checked there
// is the behaviour, not the measurement).
const N_READERS = SANITIZED ? 20 : 100;



// A streamed completion over fetch: its text and its tokens (the last event's).
async function streamed(server, request, headers = {}) {
    const res = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...headers },
        body: JSON.stringify({ ...request, stream: true }),
        signal: AbortSignal.timeout(120000),
    });
    const body = await res.text();
    assert.equal(res.status, 200, body);
    const { events, done } = sseEvents(body);
    assert.ok(done, 'the stream ends with [DONE]');
    return { text: events.map((e) => e.choices[0]?.text ?? '').join(''), tokens: events.at(-1).specdec.tokens };
}

function connect(server) {
    const sock = net.connect(Number(new URL(server.url).port), '127.0.0.1');
    sock.on('error', () => {});
    return sock;
}

// Writes `bytes` on a new socket (nothing more), reads until the server closes it.
function exchangeRaw(server, bytes, { timeoutMs = 60000 } = {}) {
    return new Promise((resolve, reject) => {
        const sock = connect(server);
        const data = [];
        const timer = setTimeout(() => { sock.destroy(); reject(new Error(`still open after ${timeoutMs} ms`)); }, timeoutMs);
        sock.on('data', (d) => data.push(d));
        sock.on('close', () => { clearTimeout(timer); resolve(Buffer.concat(data)); });
        sock.write(bytes);
    });
}

// CPU seconds a process has used (user + system).
function cpuSeconds(pid) {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

describe('serve connections', { timeout: 240000 }, () => {
    let s; // API keys (a file and the command line), an allowed host
    let dir;
    const port = () => new URL(s.url).port;
    const auth = { 'X-Api-Key': 'sk-cli' };

    before(async () => {
        dir = mkdtempSync(join(tmpdir(), 'specdec-keys-'));
        writeFileSync(join(dir, 'keys'), '# the keys of this test\n\nsk-one\n  sk-two  \n');
        s = await startServer(['-np', '2', '-c', '2048', '--api-key-file', join(dir, 'keys'), '--api-key', 'sk-cli', '--allowed-host', 'My.Box']);
    });
    after(async () => {
        assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        rmSync(dir, { recursive: true, force: true });
    });

    test('1,000 silent and slowloris sockets and 100 slow readers: /health answers, a stream meanwhile is exact (its speed reported)', async () => {
        // Each slow reader holds an admission place (-np + --max-waiting): room for the 100 and the stream measured.
        const crowd = await startServer(['-c', '65536', '--max-waiting', '128']); // -np 4
        const socks = [];
        const timers = [];
        try {
            const req = { prompt: 'abc', max_tokens: 200, temperature: 0 };
            await streamed(crowd, req); // the first decode allocates and warms up
            let t = performance.now();
            const want = await streamed(crowd, req);
            const idleMs = performance.now() - t;
            for (let i = 0; i < 500; i++) socks.push(connect(crowd)); // silent
            for (let i = 0; i < 500; i++) {
                const sock = connect(crowd);
                sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
                const timer = setInterval(() => { if (!sock.destroyed) sock.write(`X-Slow-${i}: 1\r\n`); }, 2000);
                sock.on('close', () => clearInterval(timer));
                socks.push(sock);
            }
            // 100 streams read at 256 bytes a second (their chunks carry log-probabilities: large). Each
            // runs until its client's buffers are full, then is paused and lends its slot.
            const readers = [];
            for (let i = 0; i < N_READERS; i++) {
                const sock = connect(crowd);
                sock.pause();
                const body = JSON.stringify({ prompt: `xyz ${i}`, max_tokens: 30000, temperature: 0, logprobs: 5, stream: true });
                sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
                timers.push(setInterval(() => { if (!sock.destroyed) sock.read(256); }, 1000));
                readers.push(sock);
                socks.push(sock);
            }
            const fillStart = performance.now();
            await waitForMetrics(crowd, (m) => m.get('specdec:requests_paused') === N_READERS, 180000);
            const fillS = (performance.now() - fillStart) / 1000;
            const health = probeHealth(crowd, 20);
            const t0 = performance.now();
            const before = await metrics(crowd);
            t = performance.now();
            const got = await streamed(crowd, req);
            const crowdMs = performance.now() - t;
            assert.deepEqual(got.tokens, want.tokens, 'the stream beside the crowd equals the idle one, token for token');
            assert.equal(got.text, want.text);
            // Readers that caught up with 16 KiB go on for a while (reported: they read, so they are served).
            const m = await metrics(crowd);
            const theirs = m.get('llamacpp:tokens_predicted_total') - before.get('llamacpp:tokens_predicted_total') - req.max_tokens;
            assert.ok(readers.every((x) => !x.destroyed));
            while (performance.now() - t0 < 3000) await sleep(100);
            await health.stop();
            assert.deepEqual(health.failures, []);
            const p99 = quantile(health.latencies, 0.99);
            const rss = rssKiB(crowd.proc.pid) / 1024;
            console.log(`connections: /health beside 500 silent + 500 slowloris sockets and ${N_READERS} slow readers: ${health.latencies.length} probes, ` +
                `p50 ${quantile(health.latencies, 0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...health.latencies).toFixed(1)} ms; ` +
                `the readers paused ${fillS.toFixed(1)} s after they began, ${m.get('specdec:requests_paused')} paused and ${theirs} of their ` +
                `tokens decoded while the stream ran; RSS ${rss.toFixed(0)} MiB`);
            assert.ok(p99 <= 200, `/health p99 ${p99.toFixed(1)} ms (the issue's bound: 200 ms)`);
            // Reported, not asserted (speed is measured in benchmarks; one stream of a tiny model is noisy).
            console.log(`connections: a ${req.max_tokens}-token stream took ${idleMs.toFixed(0)} ms idle and ${crowdMs.toFixed(0)} ms beside the ` +
                `crowd: ${(idleMs / crowdMs).toFixed(2)}x its idle speed`);
        } finally {
            timers.forEach((x) => clearInterval(x));
            socks.forEach((x) => x.destroy());
            assert.deepEqual(await stopServer(crowd), { code: 0, signal: null }, crowd.log);
        }
    });

    test('a stream its client stops reading is paused: nothing decoded for it, its slot lent to a waiting request; read again, it ends as the idle stream', async () => {
        const one = await startServer(['-np', '1', '-c', '8192', '--timeout', '60']);
        const sock = connect(one);
        try {
            // About 230 bytes a token with log-probabilities: 6,000 tokens are some 1.4 MB, four times what
            // the buffers between the server and this test hold before the server sees a backlog (its
            // 128 KiB socket send buffer, the client's receive buffer, which Linux may grow, and Node's
            // high-water mark). With 1,500 tokens they held the whole stream on a loaded host.
            const req = { prompt: 'xyz', max_tokens: 6000, temperature: 0, logprobs: 5 };
            const want = await streamed(one, req);
            const predicted = async () => (await metrics(one)).get('llamacpp:tokens_predicted_total');
            sock.pause();
            const chunks = [];
            sock.on('data', (d) => chunks.push(d));
            const body = JSON.stringify({ ...req, stream: true });
            sock.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
            await waitForMetrics(one, (m) => m.get('specdec:requests_paused') === 1, 60000);
            // A paused stream resumes while the buffers on the way still take some of it (Linux grows a
            // receive buffer as it fills, so on a loaded host a few hundred more tokens may go): from when
            // nothing more is decoded for 300 ms, it stays paused.
            let before = await predicted();
            for (let i = 0; i < 100; i++) {
                await sleep(300);
                const now = await predicted();
                if (now === before) break;
                before = now;
            }
            // The only slot is the paused request's: a request that comes takes it, and is exact.
            const other = await post(one, '/v1/completions', { prompt: 'abc', max_tokens: 40, temperature: 0 });
            assert.equal(other.status, 200, other.text);
            const ref = await post(one, '/v1/completions', { prompt: 'abc', max_tokens: 40, temperature: 0 });
            assert.deepEqual(other.json.specdec.tokens, ref.json.specdec.tokens);
            await sleep(300);
            assert.equal(await predicted(), before + 80, 'while paused, only the other requests were decoded');
            assert.equal((await metrics(one)).get('specdec:requests_paused'), 1);
            // Read again: the rest comes, token for token the idle stream's.
            sock.resume();
            const t0 = performance.now();
            while (!Buffer.concat(chunks).includes('data: [DONE]') && performance.now() - t0 < 60000) await sleep(50);
            const [res] = parseResponses(Buffer.concat(chunks));
            assert.equal(res.status, 200);
            const { events, done } = sseEvents(res.body);
            assert.ok(done, 'the stream ends with [DONE]');
            assert.deepEqual(events.at(-1).specdec.tokens, want.tokens);
            assert.equal(events.map((e) => e.choices[0]?.text ?? '').join(''), want.text);
            await waitForMetrics(one, (m) => m.get('specdec:requests_paused') === 0);
        } finally {
            sock.destroy();
            assert.deepEqual(await stopServer(one), { code: 0, signal: null }, one.log);
        }
    });

    test('pipelined requests in one write are all answered, in order; HTTP/1.0 streams unchunked', async () => {
        const body = JSON.stringify({ prompt: 'abc', max_tokens: 8, temperature: 0 });
        const want = await post(s, '/v1/completions', body, auth);
        assert.equal(want.status, 200, want.text);
        const head = (method, path, extra = '') => `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\nX-Api-Key: sk-one\r\n${extra}`;
        const completion = (b) => `${head('POST', '/v1/completions', `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n`)}\r\n${b}`;
        const stream = JSON.stringify({ prompt: 'abc', max_tokens: 8, temperature: 0, stream: true });
        const bytes = `${head('GET', '/health')}\r\n${completion(body)}${completion(stream)}${head('GET', '/v1/models', 'Connection: close\r\n')}\r\n`;
        const rs = parseResponses(await exchangeRaw(s, bytes));
        assert.deepEqual(rs.map((r) => r.status), [200, 200, 200, 200]);
        assert.deepEqual(JSON.parse(rs[0].body), { status: 'ok' });
        assert.equal(JSON.parse(rs[1].body).choices[0].text, want.json.choices[0].text);
        assert.deepEqual(JSON.parse(rs[1].body).specdec.tokens, want.json.specdec.tokens);
        const { events, done } = sseEvents(rs[2].body);
        assert.ok(done);
        assert.equal(events.map((e) => e.choices[0]?.text ?? '').join(''), want.json.choices[0].text);
        assert.equal(JSON.parse(rs[3].body).data[0].id, MODEL_ID);
        // Pipelined after a half-close: both answered, then the connection ends.
        const two = await new Promise((resolve) => {
            const sock = connect(s);
            const data = [];
            sock.on('data', (d) => data.push(d));
            sock.on('close', () => resolve(parseResponses(Buffer.concat(data))));
            sock.end(`${completion(body)}${head('GET', '/health')}\r\n`);
        });
        assert.deepEqual(two.map((r) => r.status), [200, 200]);
        assert.deepEqual(JSON.parse(two[0].body).specdec.tokens, want.json.specdec.tokens);
        // An HTTP/1.0 client reads no chunks: its stream comes as it is, and ends
        // with the connection (20 times: its end adds no bytes, and once hung
        // when the last chunk was out before it).
        const old = `POST /v1/completions HTTP/1.0\r\nHost: 127.0.0.1\r\nX-Api-Key: sk-one\r\nContent-Type: application/json\r\nContent-Length: ${stream.length}\r\n\r\n${stream}`;
        for (let i = 0; i < 20; i++) {
            const [r10] = parseResponses(await exchangeRaw(s, old, { timeoutMs: 10000 }));
            assert.equal(r10.status, 200);
            assert.equal(r10.headers['transfer-encoding'], undefined);
            const ev10 = sseEvents(r10.body);
            assert.ok(ev10.done);
            assert.equal(ev10.events.map((e) => e.choices[0]?.text ?? '').join(''), want.json.choices[0].text);
        }
    });

    test('a kept-alive connection stays open for the advertised timeout, then closes', async () => {
        const sock = connect(s);
        let data = Buffer.alloc(0);
        let closedAt = null;
        sock.on('data', (d) => { data = Buffer.concat([data, d]); });
        sock.on('close', () => { closedAt = performance.now(); });
        const ask = async () => {
            const n = parseResponses(data).length;
            sock.write(`GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\nAuthorization: Bearer sk-one\r\n\r\n`);
            while (parseResponses(data).length === n && closedAt === null) await sleep(5);
            return [parseResponses(data).at(-1), performance.now()];
        };
        const [first] = await ask();
        assert.equal(first.status, 200);
        const timeout = Number(/timeout=(\d+)/.exec(first.headers['keep-alive'])?.[1]);
        assert.ok(timeout >= 1, `Keep-Alive: ${first.headers['keep-alive']}`);
        await sleep(timeout * 1000 - 700); // just inside the advertised timeout: still open
        assert.equal(closedAt, null, 'closed before the advertised timeout');
        const [second, t] = await ask();
        assert.equal(second.status, 200);
        while (closedAt === null && performance.now() - t < (timeout + 3) * 1000) await sleep(20);
        assert.ok(closedAt !== null, 'an idle connection is closed');
        const idle = (closedAt - t) / 1000;
        console.log(`connections: Keep-Alive: ${first.headers['keep-alive']}; an idle connection closed after ${idle.toFixed(2)} s`);
        assert.ok(idle >= timeout - 0.2 && idle <= timeout + 1, `closed after ${idle.toFixed(2)} s; advertised ${timeout} s`);
        sock.destroy();
    });

    for (const [name, extra] of [['at --max-connections (the limit less its reserve)', []], ['out of descriptors (EMFILE)', ['--max-connections', '1000']]]) {
        const skip = SANITIZED && extra.length > 0 ? 'UBSan needs descriptors of its own' : false;
        test(`a connection storm ${name}: no spinning, and /health answers once it is over`, { skip }, async () => {
            const limited = await startServer(extra, { nofile: 256 });
            const socks = [];
            try {
                for (let i = 0; i < 400; i++) socks.push(connect(limited));
                await sleep(1000);
                const cpu0 = cpuSeconds(limited.proc.pid);
                await sleep(2000);
                const cpu = cpuSeconds(limited.proc.pid) - cpu0;
                console.log(`connections: 400 sockets against 256 descriptors ${name}: ${cpu.toFixed(2)} s of CPU in 2 s`);
                assert.ok(cpu < 0.3, `the server used ${cpu.toFixed(2)} s of CPU in 2 s (spinning?)`);
                assert.equal(limited.exited, null, 'the server is alive');
                socks.forEach((x) => x.destroy());
                const until = performance.now() + 20000;
                let status = 0;
                while (status !== 200 && performance.now() < until) {
                    status = await fetch(`${limited.url}/health`, { signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0);
                    if (status !== 200) await sleep(100);
                }
                assert.equal(status, 200, '/health answers after the storm');
                const r = await post(limited, '/v1/completions', { prompt: 'abc', max_tokens: 4, temperature: 0 });
                assert.equal(r.json.choices[0].text, 'defg');
            } finally {
                socks.forEach((x) => x.destroy());
                assert.deepEqual(await stopServer(limited), { code: 0, signal: null }, limited.log);
            }
        });
    }

    test('100 concurrent large bodies: within the body memory budget, the rest refused with a status before they are read', async () => {
        const MiB = 1 << 20;
        const big = await startServer(['--max-body', String(4 * MiB), '--max-body-memory', String(8 * MiB)]);
        try {
            const req = { prompt: 'abc', max_tokens: 4, temperature: 0 };
            const want = (await post(big, '/v1/completions', req)).json.choices[0].text;
            const body = Buffer.from(JSON.stringify({ ...req, x: 'a'.repeat(2 * MiB) }));
            const head = Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
            const rss0 = rssKiB(big.proc.pid);
            let peak = rss0;
            const sampler = setInterval(() => { peak = Math.max(peak, rssKiB(big.proc.pid)); }, 10);
            const rs = await Promise.all(Array.from({ length: 100 }, () => new Promise((resolve) => {
                const sock = connect(big);
                const data = [];
                sock.on('data', (d) => data.push(d));
                sock.on('close', () => resolve(parseResponses(Buffer.concat(data))[0] ?? { status: 0 }));
                sock.write(head);
                sock.write(body);
            })));
            clearInterval(sampler);
            const ok = rs.filter((r) => r.status === 200);
            const refused = rs.filter((r) => r.status === 503);
            console.log(`connections: 100 bodies of 2 MiB against an 8 MiB budget: ${ok.length} x 200, ${refused.length} x 503; ` +
                `RSS ${(rss0 / 1024).toFixed(0)} MiB before, ${(peak / 1024).toFixed(0)} MiB at most`);
            assert.equal(ok.length + refused.length, 100, `other statuses (0: no answer): ${rs.filter((r) => r.status !== 200 && r.status !== 503).map((r) => r.status)}`);
            assert.ok(ok.length >= 1 && refused.length >= 1);
            ok.forEach((r) => assert.equal(JSON.parse(r.body).choices[0].text, want));
            refused.forEach((r) => {
                assert.equal(JSON.parse(r.body).error.code, 'body_budget');
                assert.ok(Number(r.headers['retry-after']) >= 1);
            });
            // Bodies in memory at once: the budget (8 MiB), each parsed once more (a copy of its string).
            assert.ok(peak - rss0 < (SANITIZED ? 256 : 48) * 1024, `RSS grew by ${((peak - rss0) / 1024).toFixed(0)} MiB`);
            // Above --max-body: 413, received as a status while the body is still being sent.
            const huge = Buffer.alloc(6 * MiB, 'a');
            const [tooLarge] = parseResponses(await exchangeRaw(big, Buffer.concat([
                Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${huge.length}\r\n\r\n`), huge])));
            assert.equal(tooLarge?.status, 413);
            assert.equal(JSON.parse(tooLarge.body).error.code, 'payload_too_large');
            // A chunked request body is refused with 411, not left unanswered.
            const [chunked] = parseResponses(await exchangeRaw(big,
                `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n0\r\n\r\n`));
            assert.equal(chunked?.status, 411);
            assert.equal(JSON.parse(chunked.body).error.code, 'length_required');
        } finally {
            assert.deepEqual(await stopServer(big), { code: 0, signal: null }, big.log);
        }
    });

    test('malformed requests get 400 (or 431) and the connection closes; the server goes on', async () => {
        const h = `Host: 127.0.0.1\r\nX-Api-Key: sk-one\r\n`;
        const cases = [
            ['no version', `GET /health\r\n${h}\r\n`, 400],
            ['HTTP/2.0', `GET /health HTTP/2.0\r\n${h}\r\n`, 400],
            ['a header without a colon', `GET /health HTTP/1.1\r\n${h}Oops\r\n\r\n`, 400],
            ['a space before the colon', `GET /health HTTP/1.1\r\n${h}X-A : 1\r\n\r\n`, 400],
            ['a folded header', `GET /health HTTP/1.1\r\n${h}X-A: 1\r\n  2\r\n\r\n`, 400],
            ['Content-Length 12a', `POST /v1/completions HTTP/1.1\r\n${h}Content-Length: 12a\r\n\r\n`, 400],
            ['two Content-Lengths that differ', `POST /v1/completions HTTP/1.1\r\n${h}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`, 400],
            ['a head over 16 KiB', `GET /health HTTP/1.1\r\n${h}X-Big: ${'a'.repeat(17000)}\r\n\r\n`, 431],
            ['a request cut short', `GET /health HTTP/1.1\r\nHost: 127.0.0.1`, 400],
        ];
        for (const [name, bytes, status] of cases) {
            const sock = connect(s);
            const data = [];
            sock.on('data', (d) => data.push(d));
            const closed = new Promise((resolve) => sock.on('close', resolve));
            sock.end(bytes);
            await closed;
            const [r] = parseResponses(Buffer.concat(data));
            assert.equal(r?.status, status, name);
            assert.equal(typeof JSON.parse(r.body).error.message, 'string', name);
        }
        assert.equal((await fetch(`${s.url}/health`)).status, 200);
    });

    test('on a loopback address, a Host that names another host is refused (DNS rebinding)', async () => {
        const get = async (host) => parseResponses(await exchangeRaw(s, `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nX-Api-Key: sk-one\r\nConnection: close\r\n\r\n`))[0];
        for (const host of [`evil.example:${port()}`, 'evil.example', `127.0.0.1.evil.example:${port()}`, `localhost.:${port()}`]) {
            const r = await get(host);
            assert.equal(r.status, 403, host);
            const e = JSON.parse(r.body).error;
            assert.equal(e.code, 'host_not_allowed');
            assert.equal(e.type, 'permission_error');
        }
        for (const host of [`127.0.0.1:${port()}`, '127.0.0.1', `localhost:${port()}`, 'LocalHost', `[::1]:${port()}`, `my.box:${port()}`]) {
            assert.equal((await get(host)).status, 200, host);
        }
    });

    test('--host with several addresses: each is served on the same port', async (t) => {
        const v6 = await new Promise((resolve) => {
            const probe = net.createServer();
            probe.once('error', () => resolve(false));
            probe.listen(0, '::1', () => probe.close(() => resolve(true)));
        });
        if (!v6) {
            t.skip('no IPv6 loopback on this host');
            return;
        }
        const two = await startServer(['-np', '1', '--host', '127.0.0.1, ::1']);
        try {
            const url = new URL(two.url);
            assert.ok(two.log.includes(`and http://[::1]:${url.port}`), two.log);
            const req = { model: MODEL_ID, prompt: 'abc', max_tokens: 4, temperature: 0 };
            for (const base of [two.url, `http://[::1]:${url.port}`]) {
                const r = await fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(req) });
                assert.equal(r.status, 200, base);
                assert.equal((await r.json()).choices[0].text, 'defg', base);
            }
        } finally {
            assert.deepEqual(await stopServer(two), { code: 0, signal: null }, two.log);
        }
        // An address of another machine: the server does not start.
        await assert.rejects(startServer(['--host', '127.0.0.1,192.0.2.1']), /cannot listen on 192\.0\.2\.1/);
    });

    test('--ssl-cert-file and --ssl-key-file: HTTPS, streams included; plain HTTP or an untrusted certificate gets no answer', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'specdec-tls-'));
        const cert = join(dir, 'cert.pem');
        const key = join(dir, 'key.pem');
        execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
            '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
        const tls = await startServer(['-np', '1', '--ssl-cert-file', cert, '--ssl-key-file', key]);
        try {
            assert.ok(tls.url.startsWith('https://127.0.0.1:'), tls.url);
            const ca = readFileSync(cert);
            const request = (path, body, options = { ca }) => new Promise((resolve, reject) => {
                const text = body ? JSON.stringify(body) : '';
                const headers = body ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) } : {};
                const req = https.request(`${tls.url}${path}`, { method: body ? 'POST' : 'GET', headers, ...options }, (res) => {
                    let data = '';
                    res.on('data', (d) => { data += d; });
                    res.on('end', () => resolve({ status: res.statusCode, body: data }));
                });
                req.on('error', reject);
                if (body) req.write(text);
                req.end();
            });
            assert.equal((await request('/health')).status, 200);
            const req = { model: MODEL_ID, prompt: 'abc', max_tokens: 4, temperature: 0 };
            const whole = await request('/v1/completions', req);
            assert.equal(whole.status, 200, whole.body);
            assert.equal(JSON.parse(whole.body).choices[0].text, 'defg');
            const streamed = await request('/v1/completions', { ...req, stream: true });
            const { events, done } = sseEvents(streamed.body);
            assert.ok(done);
            assert.equal(events.map((e) => e.choices[0]?.text ?? '').join(''), 'defg');
            // Plain HTTP on the port: the handshake fails, the connection closes without an answer.
            const plain = await new Promise((resolve) => {
                const sock = net.connect(Number(new URL(tls.url).port), '127.0.0.1');
                let data = '';
                sock.on('data', (d) => { data += d.toString('latin1'); });
                sock.on('error', () => {});
                sock.on('close', () => resolve(data));
                sock.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
            });
            assert.ok(!plain.includes('HTTP/1.1 200'), plain);
            await assert.rejects(request('/health', null, {}), /self[- ]signed|certificate/i);
        } finally {
            assert.deepEqual(await stopServer(tls), { code: 0, signal: null }, tls.log);
        }
        await assert.rejects(startServer(['--ssl-cert-file', cert]), /ssl-key-file/);
        rmSync(dir, { recursive: true });
    });

    test('API keys from a file and the command line, as Bearer (any case) or X-Api-Key', async () => {
        const models = (headers) => fetch(`${s.url}/v1/models`, { headers }).then((r) => r.status);
        for (const h of [{ Authorization: 'Bearer sk-one' }, { Authorization: 'bearer sk-two' }, { Authorization: 'BEARER  sk-cli' },
            { 'X-Api-Key': 'sk-two' }, { 'x-api-key': 'sk-cli' }, { Authorization: 'Bearer wrong', 'X-Api-Key': 'sk-one' }]) {
            assert.equal(await models(h), 200, JSON.stringify(h));
        }
        for (const h of [{}, { Authorization: 'Bearer sk-wrong' }, { Authorization: 'Basic sk-one' }, { Authorization: 'Bearer # the keys of this test' },
            { Authorization: 'Bearer' }, { 'X-Api-Key': '' }, { 'X-Api-Key': 'sk-one2' }]) {
            assert.equal(await models(h), 401, JSON.stringify(h));
        }
        const r = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 2 }, { Authorization: 'Bearer sk-nope' });
        assert.equal(r.status, 401);
        assert.equal(r.json.error.code, 'invalid_api_key');
        assert.equal((await fetch(`${s.url}/health`)).status, 200, '/health needs no key');
    });
});
