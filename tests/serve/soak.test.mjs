// A bounded soak: SPECDEC_SOAK_REQUESTS (default 240) requests, 8 at a time,
// with random parameters (greedy and seeded sampling, random max_tokens,
// stop strings, streaming or not) and random cancellations, at most
// SPECDEC_SOAK_SECONDS (default 90) of issuing. The server stays up, every
// finished greedy request equals plain decoding of the same request, every
// sampled one is well-formed, and its resident memory grows by less than
// SPECDEC_SOAK_RSS_MIB (default 64) after warm-up.
// (Seeded sampling is not compared here: the fixture's tail tokens have
// near-equal logits, and which of them a draw lands on depends on rounding
// that changes with what else shares the batch, in plain decoding too. The
// api test compares seeded sampling on requests that run alone.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, metrics, reference, rssKiB, startServer, stopServer, waitForMetrics } from './server.mjs';

const N = Number(process.env.SPECDEC_SOAK_REQUESTS ?? 240);
const SECONDS = Number(process.env.SPECDEC_SOAK_SECONDS ?? 90);
const RSS_MIB = Number(process.env.SPECDEC_SOAK_RSS_MIB ?? 64);
const WORKERS = 8;
const WARMUP = Math.min(24, Math.floor(N / 4));

// A small deterministic PRNG (mulberry32), so a failure can be replayed.
function prng(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6D2B79F5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

const PROMPTS = ['abc', 'hello world', 'xyz', 'The quick brown fox', 'mno pqr', 'Zebra', 'a', 'qrstu', '0123', 'Lorem ipsum'];
const STOPS = ['gh', 'pq', 'yz', '~a', 'ac', 'zz', 'ba', 'q'];

function randomRequest(rand) {
    const pick = (xs) => xs[Math.floor(rand() * xs.length)];
    const req = { prompt: pick(PROMPTS), max_tokens: 1 + Math.floor(rand() * 160) };
    if (rand() < 0.6) {
        req.temperature = 0;
    } else {
        req.temperature = Math.round((0.2 + rand() * 1.6) * 100) / 100;
        req.seed = Math.floor(rand() * 1e6);
        if (rand() < 0.5) req.top_k = 1 + Math.floor(rand() * 40);
        if (rand() < 0.3) req.top_p = Math.round((0.5 + rand() * 0.5) * 100) / 100;
        if (rand() < 0.3) req.min_p = Math.round(rand() * 0.2 * 100) / 100;
    }
    if (rand() < 0.3) req.stop = rand() < 0.5 ? pick(STOPS) : [pick(STOPS), pick(STOPS)];
    return { req, stream: rand() < 0.5, cancel: rand() < 0.15, cancelAfter: Math.floor(rand() * 6) };
}

describe('serve soak', { timeout: (SECONDS + 120) * 1000 }, () => {
    let s;
    let plain;
    let plainOf;

    before(async () => {
        // Under AddressSanitizer freed memory waits in a quarantine (256 MiB by
        // default) that would pass for growth: a small one keeps the bound meaningful.
        const env = process.env.ASAN_OPTIONS ? { ASAN_OPTIONS: `${process.env.ASAN_OPTIONS}:quarantine_size_mb=16` } : {};
        s = await startServer(['-np', '4', '--max-waiting', '256', '-c', '1024'], { env });
        plain = await startServer(['--spec', 'none', '-np', '2', '-c', '1024']);
        plainOf = reference(plain);
    });
    after(async () => {
        assert.deepEqual(await stopServer(s), { code: 0, signal: null }, s.log);
        assert.deepEqual(await stopServer(plain), { code: 0, signal: null }, plain.log);
    });

    test(`${N} random requests, ${WORKERS} at a time, with cancellations`, async () => {
        const seed = Number(process.env.SPECDEC_SOAK_SEED ?? 20261201);
        const rand = prng(seed);
        const jobs = Array.from({ length: N }, () => randomRequest(rand));
        const client = s.client();
        const deadline = Date.now() + SECONDS * 1000;
        let next = 0;
        let rssWarm = null;
        const counts = { done: 0, compared: 0, sampled: 0, cancelled: 0, skipped: 0 };

        // A request that takes far longer than the rest is reported as it hangs.
        const active = new Map();
        const watchdog = setInterval(() => {
            for (const [i, t0] of active) {
                if (Date.now() - t0 > 15000) console.error(`soak: request ${i} ${JSON.stringify(jobs[i])} has run ${Date.now() - t0} ms`);
            }
        }, 5000);
        watchdog.unref();
        const runOne = async (job, i) => {
            active.set(i, Date.now());
            try {
                await runJob(job, i);
            } finally {
                active.delete(i);
            }
        };
        const runJob = async (job, i) => {
            const ac = new AbortController();
            const { req } = job;
            let text = '';
            let tokens = null;
            let finish = null;
            let aborted = false;
            try {
                if (job.stream) {
                    const stream = await client.completions.create({ ...req, stream: true }, { signal: ac.signal });
                    let chunks = 0;
                    for await (const chunk of stream) {
                        chunks += 1;
                        if (chunk.choices[0]) {
                            text += chunk.choices[0].text;
                            finish = chunk.choices[0].finish_reason ?? finish;
                        }
                        if (chunk.specdec) tokens = chunk.specdec.tokens;
                        if (job.cancel && chunks > job.cancelAfter) {
                            // Leaving the loop is the client's way to cancel (it aborts the
                            // request); an abort() alone can leave the iterator waiting for a
                            // chunk that never comes when it lands after the last one.
                            aborted = true;
                            break;
                        }
                    }
                } else {
                    const timer = job.cancel ? setTimeout(() => { aborted = true; ac.abort(); }, job.cancelAfter * 3) : null;
                    const r = await client.completions.create(req, { signal: ac.signal });
                    clearTimeout(timer);
                    text = r.choices[0].text;
                    tokens = r.specdec.tokens;
                    finish = r.choices[0].finish_reason;
                }
            } catch (e) {
                if (!aborted) throw new Error(`request ${i} ${JSON.stringify(job)} failed: ${e}`);
            }
            if (aborted && tokens === null) {
                counts.cancelled += 1;
                return;
            }
            assert.ok(tokens !== null, `request ${i}: no statistics`);
            assert.ok(tokens.length <= req.max_tokens, `request ${i}: ${tokens.length} tokens`);
            assert.ok(finish === 'stop' || finish === 'length', `request ${i}: finish_reason ${finish}`);
            if (req.temperature !== 0) {
                counts.sampled += 1;
                return;
            }
            const want = await plainOf(req);
            assert.equal(text, want.text, `request ${i} ${JSON.stringify(job)}`);
            assert.deepEqual(tokens, want.tokens, `request ${i} ${JSON.stringify(job)}`);
            assert.equal(finish, want.finish, `request ${i} ${JSON.stringify(job)}`);
            counts.compared += 1;
        };

        const worker = async () => {
            while (next < jobs.length && Date.now() < deadline) {
                const i = next++;
                await runOne(jobs[i], i);
                counts.done += 1;
                if (counts.done === WARMUP && rssWarm === null) rssWarm = rssKiB(s.proc.pid);
            }
        };
        await Promise.all(Array.from({ length: WORKERS }, worker));
        counts.skipped = jobs.length - next;

        // Every request left the engine; the server still answers.
        const m = await waitForMetrics(s, (x) => x.get('llamacpp:requests_processing') === 0 && x.get('llamacpp:requests_deferred') === 0);
        const health = await fetch(`${s.url}/health`);
        assert.equal(health.status, 200);
        const r = await client.completions.create({ prompt: 'abc', max_tokens: 5, temperature: 0 });
        assert.equal(r.choices[0].text, 'defgh');
        const rssEnd = rssKiB(s.proc.pid);
        const grewMiB = (rssEnd - (rssWarm ?? rssEnd)) / 1024;
        console.log(`soak: seed ${seed}, ${counts.done} requests (${counts.compared} compared with plain decoding, ` +
            `${counts.sampled} sampled, ${counts.cancelled} cancelled early, ${counts.skipped} not issued in ${SECONDS} s); ` +
            `cancelled in the engine: ${m.get('specdec:requests_finished_total{reason="cancelled"}')}; ` +
            `RSS ${Math.round((rssWarm ?? 0) / 1024)} -> ${Math.round(rssEnd / 1024)} MiB; ` +
            `drafted ${m.get('llamacpp:spec_decode_num_draft_tokens_total')}, accepted ${m.get('llamacpp:spec_decode_num_accepted_tokens_total')}`);
        assert.ok(counts.done >= Math.min(N, 40), `only ${counts.done} requests in ${SECONDS} s`);
        assert.ok(counts.compared > counts.done / 3);
        assert.ok(grewMiB < RSS_MIB, `RSS grew by ${grewMiB.toFixed(1)} MiB (bound ${RSS_MIB})`);
        assert.ok(m.get('llamacpp:spec_decode_num_accepted_tokens_total') > 0);
    });
});
