#!/usr/bin/env node
// Closed-loop load generator for OpenAI-compatible completion servers
// (specdec serve, llama-server): C clients each send their next streamed
// request as soon as the previous one finished, until R requests are done.
// Greedy (temperature 0), fixed prompts, fixed max_tokens; records every
// request's full text so that servers can be compared token for token.
// Node 20, no dependencies: built-in fetch and web streams.
//
// How tokens are timed (see docs/serving.md):
//  - every SSE event's arrival time is the time the read that completed it
//    returned (events that arrive in one read share it);
//  - an event carries k tokens: the count the server states (a `tokens`
//    array or number, or a cumulative `usage.completion_tokens` /
//    `timings.predicted_n` in a non-final event), else 1 when it carries
//    text, else 0; when no event states a count and the final usage counts
//    more tokens than that, the final count is spread over the text events
//    in proportion to their text (the record says which method it used);
//  - TTFT: from sending the request to the first event carrying a token;
//  - ITL: the gaps between successive tokens' arrivals; the k - 1 tokens that
//    arrive with another in one event have gap 0 (llama-server sends one event
//    per token, so a speculative step's accepted tokens arrive microseconds
//    apart, and a server that packs them into one event measures the same);
//  - TPOT: per request, (last token - first token) / (tokens - 1);
//  - throughput: all completion tokens (the final usage count when the server
//    gives one) over the wall time from the first request sent to the last
//    one finished.

import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

// Fixed prompts of varied lengths; request i uses prompt i mod their count.
export const DEFAULT_PROMPTS = [
    'The quick brown fox jumps over the lazy dog.',
    'Once upon a time',
    'In a distant galaxy, a small crew of explorers found a signal that repeated every seven minutes.',
    'List the first ten prime numbers:',
    'def fibonacci(n):',
    'The capital of France is',
    'Speculative decoding lets a small drafter propose tokens that a large target verifies in one batch, so that',
    'Hello',
];

// With opt.varied, request lengths by prompt index, as fractions of
// max_tokens: requests then end at different steps, so slots free up while
// others run, as in a server whose requests come and go.
export const VARIED_FRACTIONS = [1, 1 / 4, 5 / 8, 1 / 8, 7 / 8, 3 / 8, 1 / 2, 3 / 4];

// The max_tokens a request of this prompt asks for.
export function request_tokens(opt, prompt_index) {
    if (!opt.varied) return opt.max_tokens;
    return Math.max(1, Math.round(opt.max_tokens * VARIED_FRACTIONS[prompt_index % VARIED_FRACTIONS.length]));
}

// p in [0, 100]; linear interpolation between closest ranks (numpy's default).
export function percentile(values, p) {
    if (values.length === 0) return null;
    const v = [...values].sort((a, b) => a - b);
    const rank = (p / 100) * (v.length - 1);
    const lo = Math.floor(rank), hi = Math.ceil(rank);
    return v[lo] + (v[hi] - v[lo]) * (rank - lo);
}

export function mean(values) {
    return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
}

// Splits an SSE byte stream into events; feed() returns the complete ones.
export class SseParser {
    constructor() { this.buf = ''; this.decoder = new TextDecoder(); }
    feed(bytes) {
        this.buf += this.decoder.decode(bytes, { stream: true });
        const events = [];
        for (;;) {
            const m = /\r?\n\r?\n/.exec(this.buf);
            if (!m) break;
            const block = this.buf.slice(0, m.index);
            this.buf = this.buf.slice(m.index + m[0].length);
            const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
            if (data.length > 0) events.push(data.join('\n'));
        }
        return events;
    }
}

// What one event carries: {text, tokens (null = not stated), cumulative, final_usage, finish_reason, timings}.
export function read_event(obj, endpoint) {
    const choice = Array.isArray(obj.choices) && obj.choices.length > 0 ? obj.choices[0] : null;
    let text = '';
    if (choice) {
        text = endpoint === 'chat' ? (choice.delta?.content ?? '') : (choice.text ?? '');
    }
    const finish = choice?.finish_reason ?? null;
    let tokens = null, cumulative = null;
    const stated = choice?.tokens ?? obj.tokens;
    if (Array.isArray(stated)) tokens = stated.length;
    else if (typeof stated === 'number') tokens = stated;
    const usage = obj.usage && typeof obj.usage.completion_tokens === 'number' ? obj.usage.completion_tokens : null;
    // A usage in an event with a finish reason or no choices is the final count.
    const is_final = finish !== null || choice === null;
    if (!is_final && usage !== null) cumulative = usage;
    else if (obj.timings && typeof obj.timings.predicted_n === 'number' && !is_final) cumulative = obj.timings.predicted_n;
    return { text, tokens, cumulative, final_usage: is_final ? usage : null, finish_reason: finish,
             timings: obj.timings ?? null, specdec: obj.specdec ?? null };
}

// One streamed request. Returns its record (never throws; errors are recorded).
export async function run_request(opt, index, prompt_index) {
    const endpoint = opt.endpoint ?? 'completions';
    const body = {
        model: opt.model ?? 'default',
        max_tokens: request_tokens(opt, prompt_index),
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
        ...(opt.extra_body ?? {}),
        ...(opt.body_for?.(prompt_index) ?? {}),
    };
    const prompt = opt.prompts[prompt_index];
    if (endpoint === 'chat') body.messages = [{ role: 'user', content: prompt }];
    else body.prompt = prompt;
    const path = endpoint === 'chat' ? '/v1/chat/completions' : '/v1/completions';

    const rec = { index, prompt_index, max_tokens: body.max_tokens, start_ms: 0, ttft_ms: null, end_ms: 0, completion_tokens: 0, streamed_tokens: 0,
                  prompt_tokens: null, cached_tokens: null,
                  events: 0, text_events: 0, text: '', finish_reason: null, token_times_ms: [], token_count_method: null,
                  timings: null, specdec: null, error: null, retries: 0 };
    const t0 = performance.now();
    rec.start_ms = t0;
    let cum_prev = 0;
    try {
        // A kept-alive connection the server closes just as the request
        // goes out fails before any answer ("other side closed"): sent again
        // on a new connection, as the official OpenAI clients retry
        // connection errors (twice by default). The time counts from the
        // first try.
        const send = () => fetch(opt.url.replace(/\/$/, '') + path, {
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
            body: JSON.stringify(body),
            signal: opt.timeout_ms ? AbortSignal.timeout(opt.timeout_ms) : undefined,
        });
        let res;
        for (;;) {
            try {
                res = await send();
                break;
            } catch (e) {
                if (!(e instanceof TypeError) || rec.retries >= 2) throw e;
                rec.retries++;
            }
        }
        if (!res.ok) {
            rec.error = `HTTP ${res.status}: ${(await res.text()).slice(0, 500)}`;
        } else {
            const parser = new SseParser();
            let done = false, final_usage = null, stated = false;
            const text_events = []; // [arrival ms, text length]
            for await (const chunk of res.body) {
                const now = performance.now();
                for (const data of parser.feed(chunk)) {
                    if (data.trim() === '[DONE]') { done = true; continue; }
                    let obj;
                    try { obj = JSON.parse(data); } catch { rec.error = `bad SSE data: ${data.slice(0, 200)}`; continue; }
                    if (obj.error) { rec.error = `server error: ${JSON.stringify(obj.error).slice(0, 500)}`; continue; }
                    const ev = read_event(obj, endpoint);
                    rec.events++;
                    if (ev.text.length > 0 || (ev.tokens ?? 0) > 0) rec.text_events++;
                    let k;
                    if (ev.tokens !== null) { k = ev.tokens; stated = true; }
                    else if (ev.cumulative !== null) { k = Math.max(0, ev.cumulative - cum_prev); cum_prev = ev.cumulative; stated = true; }
                    else k = ev.text.length > 0 ? 1 : 0;
                    if (ev.text.length > 0) text_events.push([now - t0, ev.text.length]);
                    rec.text += ev.text;
                    for (let j = 0; j < k; j++) rec.token_times_ms.push(now - t0);
                    rec.streamed_tokens += k;
                    if (ev.final_usage !== null) final_usage = ev.final_usage;
                    if (ev.finish_reason !== null) rec.finish_reason = ev.finish_reason;
                    if (ev.timings) rec.timings = ev.timings;
                    // Prompt tokens, and how many the server reused rather than decoded:
                    // OpenAI's usage.prompt_tokens_details.cached_tokens, or llama-server's timings.
                    if (typeof obj.usage?.prompt_tokens === 'number') rec.prompt_tokens = obj.usage.prompt_tokens;
                    if (typeof obj.usage?.prompt_tokens_details?.cached_tokens === 'number') rec.cached_tokens = obj.usage.prompt_tokens_details.cached_tokens;
                    else if (typeof ev.timings?.cache_n === 'number') rec.cached_tokens = ev.timings.cache_n;
                    if (ev.specdec) rec.specdec = ev.specdec;
                }
            }
            if (!done && rec.error === null) rec.error = 'stream ended without data: [DONE]';
            rec.completion_tokens = final_usage ?? rec.streamed_tokens;
            rec.token_count_method = stated ? 'stated' : 'one per event';
            if (!stated && final_usage !== null && final_usage > rec.streamed_tokens && text_events.length > 0) {
                // Events carried several tokens without saying so: spread the
                // final count over them by text length (the first gets >= 1).
                const total = text_events.reduce((a, e) => a + e[1], 0);
                rec.token_times_ms = [];
                let chars = 0, given = 0;
                for (const [t, len] of text_events) {
                    chars += len;
                    const upto = Math.ceil((final_usage * chars) / total);
                    for (; given < upto; given++) rec.token_times_ms.push(t);
                }
                rec.streamed_tokens = rec.token_times_ms.length;
                rec.token_count_method = 'estimated from text length';
            }
        }
    } catch (e) {
        rec.error = `${e.name}: ${e.message}${e.cause ? ` (${e.cause.message ?? e.cause})` : ''}`;
    }
    rec.end_ms = performance.now();
    if (rec.token_times_ms.length > 0) rec.ttft_ms = rec.token_times_ms[0];
    return rec;
}

// Fetches Prometheus text and returns {name{labels}: value} (null when unavailable).
export async function scrape_metrics(url) {
    try {
        const res = await fetch(url.replace(/\/$/, '') + '/metrics', { signal: AbortSignal.timeout(10000) });
        if (!res.ok) return null;
        const out = {};
        for (const line of (await res.text()).split('\n')) {
            if (line.startsWith('#') || line.trim() === '') continue;
            const m = /^(\S+)\s+(\S+)/.exec(line);
            if (m && !Number.isNaN(Number(m[2]))) out[m[1]] = Number(m[2]);
        }
        return out;
    } catch { return null; }
}

// The options of the functions below: url, concurrency (C), requests (R),
// max_tokens, varied (request_tokens), prompts (default DEFAULT_PROMPTS), body_for (prompt index ->
// more request fields; optional), model, endpoint,
// timeout_ms, warmup and warmup_tokens (warm_up), metrics (bool), and
// on_request(done, total), called as each request of a run ends (for progress).

// Requests 0 .. n-1, C at a time (a client takes the next as soon as its
// last one ends): request i uses prompt i mod their count. Returns the
// records in request order.
async function closed_loop(opt, n) {
    const o = { ...opt, prompts: opt.prompts ?? DEFAULT_PROMPTS };
    const records = new Array(n);
    let next = 0;
    let done = 0;
    await Promise.all(Array.from({ length: Math.min(opt.concurrency, n) }, async () => {
        while (next < n) {
            const i = next++;
            records[i] = await run_request(o, i, i % o.prompts.length);
            opt.on_request?.(++done, n);
        }
    }));
    return records;
}

// Unmeasured requests before a run: opt.warmup of them (0: none), C at a
// time, opt.warmup_tokens each (default min(8, max_tokens)). Once they have
// ended, throws with the first failure's error, if any.
export async function warm_up(opt) {
    const w = { ...opt, varied: false, max_tokens: opt.warmup_tokens ?? Math.min(8, opt.max_tokens) };
    const failed = (await closed_loop(w, opt.warmup ?? 0)).find((r) => r.error);
    if (failed) throw new Error(`warm-up failed: ${failed.error}`);
}

// One measured run, no warm-up: C closed-loop clients over R requests.
// Returns { records, wall_ms, metrics_delta } (metrics_delta: how each
// /metrics value changed, when opt.metrics; else null).
export async function run_closed_loop(opt) {
    const before = opt.metrics ? await scrape_metrics(opt.url) : null;
    const t_start = performance.now();
    const records = await closed_loop(opt, opt.requests);
    const wall_ms = performance.now() - t_start;
    const after = opt.metrics ? await scrape_metrics(opt.url) : null;
    let metrics_delta = null;
    if (before && after) {
        metrics_delta = {};
        for (const [k, v] of Object.entries(after)) {
            if (k in before && v !== before[k]) metrics_delta[k] = v - before[k];
        }
    }
    return { records, wall_ms, metrics_delta };
}

// Measured runs (run_closed_loop results) of one point, pooled: the summary
// of all their requests over their summed wall time, the /metrics changes
// summed (when any run had them), and each run's own summary in `rounds`.
export function pool_rounds(rounds, opt) {
    const r = summarize(rounds.flatMap((x) => x.records), rounds.reduce((t, x) => t + x.wall_ms, 0), opt);
    for (const x of rounds) {
        for (const [k, v] of Object.entries(x.metrics_delta ?? {})) {
            r.metrics_delta ??= {};
            r.metrics_delta[k] = (r.metrics_delta[k] ?? 0) + v;
        }
    }
    r.rounds = rounds.map((x) => {
        const s = summarize(x.records, x.wall_ms, opt);
        return { requests: s.requests, wall_s: s.wall_s, tokens_per_s: s.tokens_per_s };
    });
    return r;
}

// Warm-up (opt.warmup requests), then one measured run, summarized.
export async function run_load(opt) {
    await warm_up(opt);
    return pool_rounds([await run_closed_loop(opt)], opt);
}

// Aggregates request records into the run's numbers.
export function summarize(records, wall_ms, opt) {
    const ok = records.filter((r) => r.error === null);
    const ttft = ok.map((r) => r.ttft_ms).filter((x) => x !== null);
    const itl = [], chunk_gaps = [], tpot = [];
    for (const r of ok) {
        const t = r.token_times_ms;
        for (let j = 1; j < t.length; j++) {
            itl.push(t[j] - t[j - 1]);
            if (t[j] !== t[j - 1]) chunk_gaps.push(t[j] - t[j - 1]);
        }
        if (t.length > 1) tpot.push((t[t.length - 1] - t[0]) / (t.length - 1));
    }
    const total_tokens = ok.reduce((a, r) => a + r.completion_tokens, 0);
    // Each prompt's text; `consistent` when every request of a prompt got the same.
    const texts = {};
    let consistent = true;
    for (const r of ok) {
        if (!(r.prompt_index in texts)) texts[r.prompt_index] = r.text;
        else if (texts[r.prompt_index] !== r.text) consistent = false;
    }
    // Drafting statistics as each server reports them in its final event:
    // llama-server's timings.draft_n / draft_n_accepted, specdec's specdec.drafted / accepted.
    let draft_n = 0, draft_accepted = 0, has_draft = false;
    for (const r of ok) {
        if (r.timings && typeof r.timings.draft_n === 'number') {
            has_draft = true;
            draft_n += r.timings.draft_n;
            draft_accepted += r.timings.draft_n_accepted ?? 0;
        } else if (r.specdec && typeof r.specdec.drafted === 'number') {
            has_draft = true;
            draft_n += r.specdec.drafted;
            draft_accepted += r.specdec.accepted ?? 0;
        }
    }
    const methods = [...new Set(ok.map((r) => r.token_count_method))];
    const round = (x, d = 2) => (x === null ? null : Number(x.toFixed(d)));
    return {
        url: opt.url,
        endpoint: opt.endpoint ?? 'completions',
        concurrency: opt.concurrency,
        requests: records.length,
        max_tokens: opt.max_tokens,
        varied: Boolean(opt.varied),
        requested_tokens: records.reduce((a, r) => a + r.max_tokens, 0),
        errors: records.length - ok.length,
        first_error: records.find((r) => r.error !== null)?.error ?? null,
        retries: records.reduce((a, r) => a + (r.retries ?? 0), 0), // requests sent again after a closed connection
        wall_s: round(wall_ms / 1000, 3),
        completion_tokens: total_tokens,
        tokens_per_s: round(total_tokens / (wall_ms / 1000)),
        requests_per_s: round(ok.length / (wall_ms / 1000), 3),
        ttft_ms: { mean: round(mean(ttft)), p50: round(percentile(ttft, 50)), p99: round(percentile(ttft, 99)) },
        itl_ms: { mean: round(mean(itl), 3), p50: round(percentile(itl, 50), 3), p99: round(percentile(itl, 99), 3), samples: itl.length },
        chunk_gap_ms: { p50: round(percentile(chunk_gaps, 50), 3), p99: round(percentile(chunk_gaps, 99), 3), samples: chunk_gaps.length },
        tpot_ms: { mean: round(mean(tpot), 3), p50: round(percentile(tpot, 50), 3) },
        token_count_method: methods.join(', '),
        // Tokens per event that carried any (1 for llama-server; more for a server that packs them).
        tokens_per_event: round(ok.reduce((a, r) => a + r.streamed_tokens, 0) / Math.max(1, ok.reduce((a, r) => a + r.text_events, 0)), 3),
        draft: has_draft ? { drafted: draft_n, accepted: draft_accepted, acceptance: draft_n > 0 ? round(draft_accepted / draft_n, 4) : null } : null,
        consistent,
        texts,
        records: records.map(({ token_times_ms, specdec, ...r }) => ({ ...r, start_ms: undefined, end_ms: undefined,
                                                            specdec: specdec ? { ...specdec, tokens: undefined } : null,
                                                            latency_ms: round(r.end_ms - r.start_ms), tokens_at_ms: token_times_ms.map((x) => round(x, 3)) })),
    };
}

function parse_args(argv) {
    const a = { url: null, concurrency: 1, requests: 8, max_tokens: 64, endpoint: 'completions', model: 'default',
                timeout_s: 600, warmup: 0, warmup_tokens: 8, metrics: false, out: null, label: null, prompts: null, extra: null,
                varied: false };
    const need = (i) => { if (i >= argv.length) throw new Error(`${argv[i - 1]} needs a value`); return argv[i]; };
    for (let i = 0; i < argv.length; i++) {
        const k = argv[i];
        switch (k) {
            case '--url': a.url = need(++i); break;
            case '-c': case '--concurrency': a.concurrency = Number(need(++i)); break;
            case '-n': case '--requests': a.requests = Number(need(++i)); break;
            case '--max-tokens': a.max_tokens = Number(need(++i)); break;
            case '--varied-lengths': a.varied = true; break;
            case '--endpoint': a.endpoint = need(++i); break;
            case '--model': a.model = need(++i); break;
            case '--timeout-s': a.timeout_s = Number(need(++i)); break;
            case '--warmup': a.warmup = Number(need(++i)); break;
            case '--warmup-tokens': a.warmup_tokens = Number(need(++i)); break;
            case '--metrics': a.metrics = true; break;
            case '--out': a.out = need(++i); break;
            case '--label': a.label = need(++i); break;
            case '--prompts': a.prompts = need(++i); break;
            case '--extra-body': a.extra = JSON.parse(need(++i)); break;
            case '-h': case '--help':
                console.log(`usage: loadgen.mjs --url URL [-c C] [-n R] [--max-tokens N] [--varied-lengths] [--endpoint completions|chat]
  [--model NAME] [--warmup W] [--warmup-tokens N] [--metrics] [--prompts FILE.json] [--extra-body JSON]
  [--timeout-s S] [--label L] [--out FILE.json]
Closed loop: C clients, R streamed greedy requests in all; prints one JSON object (or writes --out).
--varied-lengths: request i asks max_tokens x ${VARIED_FRACTIONS.map((f) => f.toFixed(3)).join(', ')}[i's prompt mod 8].`);
                process.exit(0);
            default: throw new Error(`unknown option ${k}`);
        }
    }
    if (!a.url) throw new Error('--url is required');
    for (const [name, v] of [['concurrency', a.concurrency], ['requests', a.requests], ['max-tokens', a.max_tokens]]) {
        if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer`);
    }
    if (!['completions', 'chat'].includes(a.endpoint)) throw new Error('--endpoint is completions or chat');
    return a;
}

async function main() {
    let a;
    try { a = parse_args(process.argv.slice(2)); } catch (e) { console.error(`loadgen: ${e.message}`); process.exit(2); }
    let prompts = DEFAULT_PROMPTS;
    if (a.prompts) {
        const { readFileSync } = await import('node:fs');
        prompts = JSON.parse(readFileSync(a.prompts, 'utf8'));
    }
    const result = await run_load({ url: a.url, concurrency: a.concurrency, requests: a.requests, max_tokens: a.max_tokens, varied: a.varied,
                                    endpoint: a.endpoint, model: a.model, timeout_ms: a.timeout_s * 1000, warmup: a.warmup,
                                    warmup_tokens: a.warmup_tokens, metrics: a.metrics, prompts, extra_body: a.extra });
    if (a.label) result.label = a.label;
    result.prompts = prompts;
    const text = JSON.stringify(result, null, 1);
    if (a.out) writeFileSync(a.out, text + '\n');
    else console.log(text);
    console.error(`loadgen: c=${a.concurrency} n=${a.requests}: ${result.tokens_per_s} tok/s, TTFT p50 ${result.ttft_ms.p50} ms, ` +
                  `ITL p50/p99 ${result.itl_ms.p50}/${result.itl_ms.p99} ms, errors ${result.errors}`);
    process.exit(result.errors > 0 ? 1 : 0);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
    main().catch((e) => { console.error(`loadgen: ${e.stack ?? e}`); process.exit(1); });
}
