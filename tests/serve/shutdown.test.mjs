// SIGTERM: the server stops accepting, finishes the requests in flight and
// exits 0; past --shutdown-timeout the rest are cancelled, still exit 0. A
// second SIGINT or SIGTERM during that drain ends the process at once.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, post, sleep, startServer, stopServer, waitForMetrics } from './server.mjs';

async function waitForLog(server, re, ms = 10000) {
    const until = Date.now() + ms;
    while (!re.test(server.log)) {
        assert.ok(Date.now() < until, `${re} not in the log:\n${server.log}`);
        await sleep(10);
    }
}

describe('serve shutdown', { timeout: 240000 }, () => {
    test('SIGTERM finishes the requests in flight, then exits 0', async () => {
        const s = await startServer(['-np', '2', '-c', '2048']);
        try {
            const plain = s.client().completions.create({ prompt: 'abc', max_tokens: 1500, temperature: 0 });
            const streamed = s.client().completions.create({ prompt: 'xyz', max_tokens: 1500, temperature: 0, stream: true,
                                                             stream_options: { include_usage: true } }).then(collect);
            await waitForMetrics(s, (m) => m.get('llamacpp:requests_processing') === 2, 20000);
            s.proc.kill('SIGTERM');
            await waitForLog(s, /SIGTERM: finishing/);
            // New requests are refused while the ones in flight finish.
            const refused = await post(s, '/v1/completions', { prompt: 'abc', max_tokens: 2 });
            assert.equal(refused.status, 503, refused.text);
            assert.equal(refused.json.error.code, 'shutting_down');
            assert.ok(refused.headers.get('retry-after'));
            const [a, b] = await Promise.all([plain, streamed]);
            assert.equal(a.usage.completion_tokens, 1500);
            assert.equal(a.choices[0].finish_reason, 'length');
            assert.equal(b.usage.completion_tokens, 1500);
            assert.equal(b.finished.choices[0].finish_reason, 'length');
            assert.deepEqual(await s.exitPromise, { code: 0, signal: null }, s.log);
            assert.match(s.log, /SIGTERM: finishing 2 requests in flight/);
        } finally {
            await stopServer(s);
        }
    });

    for (const [sig, code] of [['SIGTERM', 143], ['SIGINT', 130]]) {
        test(`a second ${sig} during the drain exits at once with ${code}`, async () => {
            const s = await startServer(['-np', '1', '-c', '65536', '--shutdown-timeout', '120']);
            try {
                const long = post(s, '/v1/completions', { prompt: 'abc', max_tokens: 60000, temperature: 0 }).catch((e) => ({ status: 0, error: String(e) }));
                await waitForMetrics(s, (m) => m.get('llamacpp:requests_processing') === 1, 20000);
                s.proc.kill(sig);
                await waitForLog(s, new RegExp(`${sig}: finishing 1 requests in flight`));
                const t0 = Date.now();
                s.proc.kill(sig);
                const exit = await Promise.race([s.exitPromise, sleep(10000).then(() => 'still running 10 s after the second signal')]);
                assert.deepEqual(exit, { code, signal: null }, s.log);
                assert.ok(Date.now() - t0 < 10000);
                assert.match(s.log, new RegExp(`${sig} again: exiting now \\(exit ${code}\\), 1 requests unfinished`));
                assert.equal((await long).status, 0, 'the request in flight got no answer: the process ended');
            } finally {
                await stopServer(s);
            }
        });
    }

    test('past --shutdown-timeout the rest are cancelled; still exit 0', async () => {
        const s = await startServer(['-np', '1', '-c', '65536', '--shutdown-timeout', '0.3']);
        try {
            const started = Date.now();
            const long = post(s, '/v1/completions', { prompt: 'abc', max_tokens: 60000, temperature: 0 });
            await waitForMetrics(s, (m) => m.get('llamacpp:requests_processing') === 1, 20000);
            s.proc.kill('SIGTERM');
            const r = await long;
            assert.equal(r.status, 503, r.text);
            assert.equal(r.json.error.code, 'shutting_down');
            assert.deepEqual(await s.exitPromise, { code: 0, signal: null }, s.log);
            assert.ok(Date.now() - started < 20000);
            assert.match(s.log, /cancelled 1 requests at the deadline/);
        } finally {
            await stopServer(s);
        }
    });
});
