// The serving benchmark's chat workload: each of C clients holds one
// conversation at a time of T turns. A turn sends the whole conversation so
// far (a system prompt all conversations share, every earlier user message
// and answer, the new user message) as one streamed greedy or sampled
// completion, as chat clients and agent loops do, so a server that keeps a
// conversation's earlier turns in memory decodes only the new text. Turns
// ask for varied answer lengths. The text format is plain ("User: ...
// Assistant: ...", on one line: the fixtures' vocabularies have no newline)
// through /v1/completions, so that no chat template (which those
// vocabularies may not cover either) enters the comparison.
import { mean, percentile, run_request } from './loadgen.mjs';

export const SYSTEM_PROMPT =
    'System: You are a careful assistant in a long conversation. Answer the question in the last user message, ' +
    'using what was said earlier when it helps. Keep answers short unless asked for detail, say when you are not sure, ' +
    'and never repeat the question back. Lists use one item per line; code goes in fenced blocks with its language.';

// User messages of varied lengths; conversation c's turn t says USER_TURNS[(c + t) mod 8].
export const USER_TURNS = [
    'What is speculative decoding, in one paragraph?',
    'Why would a small drafter make a large model faster if every token is still checked?',
    'Give me three examples of text where the drafter would be right most of the time, and say why for each one.',
    'And where would it be wrong?',
    'Write a short Python function that counts how often each word occurs in a string.',
    'Now make it ignore case and punctuation, and return the five most common words.',
    'Summarise everything we discussed so far in four bullet points, then suggest one question I should ask next.',
    'Thanks. One last thing: how does batching several users together change the picture?',
];

// Answer lengths (max_tokens) by turn: turn t asks TURN_TOKENS[t mod 8] x max_tokens / 64.
export const TURN_TOKENS = [48, 24, 64, 32, 96, 40, 56, 16];

export function turn_tokens(opt, turn) {
    return Math.max(1, Math.round((TURN_TOKENS[turn % TURN_TOKENS.length] * opt.max_tokens) / 64));
}

// The prompt of a turn: the system prompt, then each earlier exchange, then the new message.
export function transcript(exchanges, user) {
    let text = SYSTEM_PROMPT;
    for (const x of exchanges) text += ` User: ${x.user} Assistant:${x.assistant}`;
    return `${text} User: ${user} Assistant:`;
}

// One conversation's turns, in order; returns their records (run_request's,
// plus conversation and turn), stopping at the first failed turn.
async function converse(opt, c) {
    const exchanges = [];
    const records = [];
    for (let t = 0; t < opt.turns; t++) {
        const user = `${USER_TURNS[(c + t) % USER_TURNS.length]} (conversation ${c + 1})`;
        const body = { max_tokens: turn_tokens(opt, t), temperature: opt.temperature };
        if (opt.temperature > 0) body.seed = 1000 * c + t;
        const rec = await run_request({ ...opt, prompts: [transcript(exchanges, user)], extra_body: body }, t, 0);
        records.push({ ...rec, conversation: c, turn: t });
        opt.on_request?.();
        if (rec.error !== null) break;
        exchanges.push({ user, assistant: rec.text });
    }
    return records;
}

// One measured run: opt.conversations conversations, C at a time (a client
// starts the next as soon as its last one ended); opt.on_request(done,
// total) after each turn (optional). Returns { records, wall_ms }.
export async function run_conversations(opt) {
    const records = [];
    let next = 0;
    let done = 0;
    const total = opt.conversations * opt.turns;
    const turn_opt = { ...opt, on_request: () => opt.on_request?.(++done, total) };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: Math.min(opt.concurrency, opt.conversations) }, async () => {
        while (next < opt.conversations) {
            records.push(...(await converse(turn_opt, next++)));
        }
    }));
    return { records, wall_ms: performance.now() - t0 };
}

// Runs of one point, pooled: the numbers of all their turns over their summed wall time.
export function pool_conversations(rounds, opt) {
    const records = rounds.flatMap((x) => x.records);
    const wall_ms = rounds.reduce((t, x) => t + x.wall_ms, 0);
    const ok = records.filter((r) => r.error === null);
    const round = (x, d = 2) => (x === null || x === undefined ? null : Number(x.toFixed(d)));
    const ttft = (pred) => ok.filter(pred).map((r) => r.ttft_ms).filter((x) => x !== null);
    const later = ttft((r) => r.turn > 0);
    // A conversation's time: from its first turn sent to its last answer's end.
    const by_conversation = new Map();
    for (const [i, x] of rounds.entries()) {
        for (const r of x.records) {
            const key = `${i}/${r.conversation}`;
            const span = by_conversation.get(key) ?? { start: Infinity, end: 0 };
            span.start = Math.min(span.start, r.start_ms);
            span.end = Math.max(span.end, r.end_ms);
            by_conversation.set(key, span);
        }
    }
    const conversation_s = [...by_conversation.values()].map((s) => (s.end - s.start) / 1000);
    // Each conversation's answers, turn by turn, for the identity check:
    // the first round's, which every other round must repeat.
    const transcripts = (recs) => {
        const out = {};
        for (const r of recs.filter((x) => x.error === null).sort((x, y) => x.turn - y.turn)) {
            out[r.conversation] = [...(out[r.conversation] ?? []), r.text];
        }
        return out;
    };
    const texts = Object.fromEntries(Object.entries(transcripts(rounds[0].records)).map(([c, t]) => [c, t.join('\u0000')]));
    const consistent = rounds.every((x) => JSON.stringify(transcripts(x.records)) === JSON.stringify(transcripts(rounds[0].records)));
    const prompt_tokens = ok.filter((r) => r.turn > 0 && r.prompt_tokens !== null).reduce((a, r) => a + r.prompt_tokens, 0);
    const cached_tokens = ok.filter((r) => r.turn > 0 && r.cached_tokens !== null).reduce((a, r) => a + r.cached_tokens, 0);
    const total_tokens = ok.reduce((a, r) => a + r.completion_tokens, 0);
    const turn_means = [];
    for (let t = 0; t < opt.turns; t++) turn_means.push(round(mean(ttft((r) => r.turn === t))));
    return {
        url: opt.url,
        workload: 'chat',
        concurrency: opt.concurrency,
        turns: opt.turns,
        temperature: opt.temperature,
        conversations: by_conversation.size,
        requests: records.length,
        requested_tokens: records.reduce((a, r) => a + r.max_tokens, 0),
        errors: records.length - ok.length,
        first_error: records.find((r) => r.error !== null)?.error ?? null,
        wall_s: round(wall_ms / 1000, 3),
        completion_tokens: total_tokens,
        tokens_per_s: round(total_tokens / (wall_ms / 1000)),
        conversation_s: { mean: round(mean(conversation_s)), p50: round(percentile(conversation_s, 50)) },
        ttft_ms: { first_turn: round(mean(ttft((r) => r.turn === 0))), later_mean: round(mean(later)),
                   later_p50: round(percentile(later, 50)), later_p99: round(percentile(later, 99)), by_turn: turn_means },
        cached_share: prompt_tokens > 0 ? round(cached_tokens / prompt_tokens, 3) : null,
        consistent,
        texts,
        rounds: rounds.map((x) => ({ wall_s: round(x.wall_ms / 1000, 3),
                                     tokens_per_s: round(x.records.reduce((a, r) => a + (r.error === null ? r.completion_tokens : 0), 0) / (x.wall_ms / 1000)) })),
        records: records.map(({ token_times_ms, specdec, start_ms, end_ms, ...r }) => ({ ...r, latency_ms: round(end_ms - start_ms) })),
    };
}
