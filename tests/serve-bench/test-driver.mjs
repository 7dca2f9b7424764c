// The serving benchmark's driver end to end with stand-in servers and a
// stand-in fixture tool (tests/serve-bench/fake-server.mjs): the matrix,
// its rounds, the reports, `identical`, its progress lines, a server that fails to start, and
// that no server outlives the driver, on success or when the driver is killed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const driver = path.join(here, '../../tools/serve-bench/driver.mjs');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'specdec-serve-bench-test-'));
process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));

const script = (name, body) => { const p = path.join(tmp, name); writeFileSync(p, `#!/bin/sh\n${body}\n`); chmodSync(p, 0o755); return p; };
const fake = script('fake-server', `exec "${process.execPath}" "${path.join(here, 'fake-server.mjs')}" "$@"`);
const fixture_tool = script('fake-fixture', 'echo fixture > "$2"');

function run_driver(out, args, env = {}, on_spawn = null) {
    return new Promise((resolve) => {
        const ch = spawn(process.execPath, [driver, '--specdec', fake, '--llama-server', fake, '--fixture-tool', fixture_tool,
                                             '--out', out, '--max-tokens', '6', '--min-requests', '3', '--requests-per-client', '1', ...args],
                         { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
        let stderr = '';
        ch.stderr.on('data', (d) => { stderr += d; });
        if (on_spawn) on_spawn(ch);
        ch.on('exit', (code, signal) => resolve({ code, signal, stderr }));
    });
}

const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
async function all_dead(pid_dir) {
    const pids = readdirSync(pid_dir).map(Number);
    for (let i = 0; i < 50 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
    return pids.filter(alive);
}

test('the matrix, its reports and identical', async () => {
    const out = path.join(tmp, 'ok'), pids = mkdtempSync(path.join(tmp, 'pids-'));
    const r = await run_driver(out, ['--fixtures', 'exact,random', '--concurrency', '1,2'], { FAKE_PID_DIR: pids });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readdirSync(pids).length, 8);                 // 2 fixtures x 4 servers
    assert.deepEqual(await all_dead(pids), []);
    assert.equal(readdirSync(path.join(out, 'raw')).length, 16);
    assert.equal(existsSync(path.join(out, 'fixtures')), false); // its own fixture directory is removed
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
    assert.equal(summary.runs.length, 16);
    for (const run of summary.runs) {
        assert.equal(run.identical, true, `${run.fixture}/${run.server}/${run.concurrency}: ${run.identical_why}`);
        assert.equal(run.completion_tokens, run.requests * 6);
        assert.equal(run.requests, 2 * Math.max(3, run.concurrency)); // two rounds by default
        assert.deepEqual(run.rounds.map((x) => x.requests), [Math.max(3, run.concurrency), Math.max(3, run.concurrency)]);
    }
    const mtp = summary.runs.find((x) => x.server === 'specdec-mtp');
    assert.equal(mtp.token_count_method, 'estimated from text length'); // two tokens an event, unstated
    assert.equal(summary.runs.find((x) => x.server === 'llama-mtp').draft.acceptance, 0.5);
    assert.match(summary.meta.commands['llama-mtp'], /--spec-type draft-mtp --spec-draft-n-max 3/);
    assert.match(summary.meta.commands['specdec-mtp'], /serve -m FIXTURE.gguf --spec mtp --n-draft auto -np 2 -c 512 -t 2/);
    const md = readFileSync(path.join(out, 'results.md'), 'utf8');
    assert.match(md, /\| specdec-mtp \| 2 \| 6 \| [0-9.]+ \([0-9.]+–[0-9.]+\) \|/);
    assert.match(md, /\| random \| 2 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|/); // four ratios
    assert.doesNotMatch(md, /\*\*no\*\*/);
    const svg = readFileSync(path.join(out, 'tokens-per-s.svg'), 'utf8');
    assert.equal((svg.match(/<polyline/g) ?? []).length, 8);
    assert.match(md, /^Measured .*; llama-server version: 0 \(fake\)\./);
    // Progress off a terminal: a line per run, the time left once a round was timed.
    assert.match(r.stderr, /^serve-bench: \[1\/32\] exact \/ specdec-none \/ C=1, round 1\/2$/m);
    assert.match(r.stderr, /^serve-bench: \[5\/32\] exact \/ \S+ \/ C=1, round 2\/2 \(about \d+ s left\)$/m);
    assert.match(r.stderr, /^serve-bench: \[32\/32\] random \/ \S+ \/ C=2, round 2\/2 \(about \d+ s left\)$/m);
    assert.match(r.stderr, /^serve-bench: random \/ llama-mtp \/ C=2: warming up$/m);
});

test('--quiet: no progress lines, the results still', async () => {
    const out = path.join(tmp, 'quiet');
    const r = await run_driver(out, ['--fixtures', 'exact', '--concurrency', '1', '--servers', 'specdec-none,llama-plain', '--quiet']);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /round 1\/2|warming up|: starting$/m);
    assert.match(r.stderr, /exact \/ llama-plain \/ C=1: [0-9.]+ tok\/s/);
    assert.ok(existsSync(path.join(out, 'summary.json')));
});

test('rounds measure the servers in turn, each round in another order', async () => {
    const out = path.join(tmp, 'rounds'), log_file = path.join(tmp, 'requests.log');
    const r = await run_driver(out, ['--fixtures', 'exact', '--concurrency', '1', '--servers', 'specdec-none,specdec-mtp,llama-plain',
                                     '--rounds', '3'], { FAKE_REQUEST_LOG: log_file });
    assert.equal(r.code, 0, r.stderr);
    const lines = readFileSync(log_file, 'utf8').trim().split('\n');
    // Warm-up first (one 8-token request a server), then 3 rounds of 3 measured 6-token requests each.
    assert.deepEqual(lines.slice(0, 3), ['specdec-none 8', 'specdec-mtp 8', 'llama-plain 8']);
    const blocks = [];
    for (const l of lines.slice(3)) {
        const [server, n] = l.split(' ');
        assert.equal(n, '6');
        if (blocks.length === 0 || blocks[blocks.length - 1][0] !== server) blocks.push([server, 0]);
        blocks[blocks.length - 1][1]++;
    }
    assert.deepEqual(blocks, [
        ['specdec-none', 3], ['specdec-mtp', 3], ['llama-plain', 3],
        ['specdec-mtp', 3], ['llama-plain', 3], ['specdec-none', 3],
        ['llama-plain', 3], ['specdec-none', 3], ['specdec-mtp', 3],
    ]);
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
    for (const run of summary.runs) {
        assert.equal(run.rounds.length, 3);
        assert.equal(run.requests, 9);
        // Each round's wall_s is rounded to the millisecond, so their sum is the pooled time within half a
        // millisecond a round; the fake server's rounds are short enough that this alone is over 1%.
        const wall = run.rounds.reduce((t, x) => t + x.wall_s, 0), slack = 0.0005 * run.rounds.length;
        const lo = run.completion_tokens / (wall + slack) - 0.005, hi = run.completion_tokens / (wall - slack) + 0.005;
        assert.ok(run.tokens_per_s >= lo && run.tokens_per_s <= hi, `${run.tokens_per_s} not in [${lo}, ${hi}]`);
    }
});

test('varied lengths: each prompt asks its share of --max-tokens, and identical counts against it', async () => {
    const out = path.join(tmp, 'varied'), log_file = path.join(tmp, 'varied-requests.log');
    const r = await run_driver(out, ['--fixtures', 'exact', '--concurrency', '1', '--servers', 'specdec-none,llama-plain',
                                     '--max-tokens', '16', '--varied-lengths'], { FAKE_REQUEST_LOG: log_file });
    assert.equal(r.code, 0, r.stderr);
    const asked = readFileSync(log_file, 'utf8').trim().split('\n').map((l) => l.split(' ')[1]);
    // Warm-ups (8 tokens), then 2 rounds x 2 servers x prompts 0, 1, 2.
    assert.deepEqual(asked, ['8', '8', ...Array(4).fill(['16', '4', '10']).flat()]);
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
    for (const run of summary.runs) {
        assert.equal(run.identical, true, `${run.server}: ${run.identical_why}`);
        assert.equal(run.completion_tokens, 2 * (16 + 4 + 10));
    }
    assert.match(readFileSync(path.join(out, 'results.md'), 'utf8'), /up to 16 tokens a request \(by prompt: 16, 4, 10, 2, 14, 6, 8, 12\)/);
});

test('a server that fails its warm-up is stopped and reported, and the others go on', async () => {
    const out = path.join(tmp, 'dropped'), pids = mkdtempSync(path.join(tmp, 'pids-'));
    const r = await run_driver(out, ['--fixtures', 'exact', '--concurrency', '1,2', '--servers', 'specdec-none,llama-mtp'],
                               { FAKE_PID_DIR: pids, FAKE_DROP_ARG: '--spec-type' });
    assert.equal(r.code, 1, r.stderr);
    assert.deepEqual(await all_dead(pids), []);
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
    assert.deepEqual(summary.runs.map((x) => `${x.server}/${x.concurrency}`), ['specdec-none/1', 'specdec-none/2']);
    for (const run of summary.runs) assert.equal(run.completion_tokens, run.requests * 6);
    assert.equal(summary.failures.length, 1);
    assert.match(summary.failures[0], /^exact \/ llama-mtp: warm-up failed/);
});

test('a server that fails to start and texts that differ are reported', async () => {
    const out = path.join(tmp, 'fail'), pids = mkdtempSync(path.join(tmp, 'pids-'));
    const r = await run_driver(out, ['--fixtures', 'mixed', '--concurrency', '1', '--servers', 'llama-plain,llama-mtp,specdec-mtp'],
                               { FAKE_PID_DIR: pids, FAKE_FAIL_ARG: '--spec-type', FAKE_WRONG_ARG: 'mtp' });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /llama-mtp exited before it was ready/);
    assert.deepEqual(await all_dead(pids), []);
    const md = readFileSync(path.join(out, 'results.md'), 'utf8');
    assert.match(md, /\| llama-mtp \| 1 \| – \| not run/);
    assert.match(md, /\| specdec-mtp \| 1 \| 6 \| [0-9.]+ .*\*\*no\*\*: 3 of 3 prompts differ from llama-plain/);
    assert.match(md, /Failures:\n\n- mixed \/ llama-mtp: could not start/);
});

test('chat: conversations resend what came before, and report reuse per turn', async () => {
    const out = path.join(tmp, 'chat'), prompts = path.join(tmp, 'chat-prompts.log');
    const r = await run_driver(out, ['--workload', 'chat', '--turns', '3', '--fixtures', 'exact', '--concurrency', '1,2',
                                     '--servers', 'specdec-mtp,llama-plain', '--rounds', '1', '--warmup', '0'],
                               { FAKE_PROMPT_LOG: prompts });
    assert.equal(r.code, 0, r.stderr);
    const sent = readFileSync(prompts, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    // Per server and concurrency: max(2, C) = 2 conversations of 3 turns.
    assert.equal(sent.length, 2 * 2 * 2 * 3);
    for (const p of sent) assert.ok(p.startsWith('System: ') && p.endsWith(' Assistant:') && !p.includes('\n'), p);
    // Each later turn extends an earlier turn's prompt by its answer and a new message.
    const later = sent.filter((p) => (p.match(/ User: /g) ?? []).length > 1);
    assert.equal(later.length, 16);
    for (const p of later) {
        const cut = p.lastIndexOf(' User: ');
        const earlier = p.slice(0, p.lastIndexOf(' Assistant:', cut) + ' Assistant:'.length);
        assert.ok(sent.includes(earlier), `no earlier turn for ${p}`);
    }
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
    assert.equal(summary.runs.length, 4);
    for (const run of summary.runs) {
        assert.equal(run.identical, true, `${run.server}/${run.concurrency}: ${run.identical_why}`);
        assert.equal(run.conversations, 2);
        assert.equal(run.requests, 6);
        const raw = JSON.parse(readFileSync(path.join(out, 'raw', `exact-${run.server}-c${run.concurrency}.json`), 'utf8'));
        assert.deepEqual(raw.records.filter((x) => x.conversation === 0).map((x) => x.max_tokens), [5, 2, 6]); // 48, 24, 64 x 6/64
        assert.ok(run.cached_share > 0.5 && run.cached_share < 1, String(run.cached_share));
        assert.equal(run.ttft_ms.by_turn.length, 3);
    }
    const md = readFileSync(path.join(out, 'results.md'), 'utf8');
    assert.match(md, /Chat workload: conversations of 3 turns \(answers of 5, 2, 6 tokens\)/);
    assert.match(md, /\| specdec-mtp \| 2 \| [0-9.]+ \| [0-9]+ \| [0-9]+ \/ [0-9]+ \| [0-9.]+ \| [0-9]+% \| yes \|/);
    assert.match(md, /\| exact \| 2 \| [0-9.]+ \| [0-9.]+ \|/); // specdec-mtp ÷ llama-plain
    assert.equal(existsSync(path.join(out, 'tokens-per-s.svg')), false);
});

test('structured: each prompt carries its schema or grammar', async () => {
    const out = path.join(tmp, 'structured'), bodies = path.join(tmp, 'structured-bodies.log');
    const r = await run_driver(out, ['--workload', 'structured', '--fixtures', 'exact', '--concurrency', '1', '--min-requests', '4',
                                     '--servers', 'specdec-mtp,llama-plain', '--rounds', '1', '--warmup', '0'],
                               { FAKE_BODY_LOG: bodies });
    assert.equal(r.code, 0, r.stderr);
    const sent = readFileSync(bodies, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(sent.length, 2 * 4);
    const constraint = (q) => (q.json_schema !== undefined ? `schema ${JSON.stringify(q.json_schema)}` : `grammar ${q.grammar}`);
    for (const prompt of new Set(sent.map((q) => q.prompt))) {
        const of_prompt = sent.filter((q) => q.prompt === prompt);
        assert.equal(new Set(of_prompt.map(constraint)).size, 1, `${prompt}: one constraint whichever server`);
    }
    // Four prompts: three JSON schemas (one of them {}, any object) and a grammar.
    const kinds = [...new Set(sent.map(constraint))];
    assert.equal(kinds.length, 4);
    assert.ok(kinds.includes('schema {}'));
    assert.equal(kinds.filter((k) => k.startsWith('grammar root ::= ')).length, 1);
    assert.equal(sent.filter((q) => q.response_format !== undefined).length, 0); // llama-server reads it on chat only
    const md = readFileSync(path.join(out, 'results.md'), 'utf8');
    assert.match(md, /Structured output: the prompts' answers follow, in turn, JSON schema/);
    assert.match(md, /at most 6 tokens a request/);
    assert.match(md, /\| specdec-mtp \| 1 \| 4 \| [0-9.]+ .*\| yes \|/);
    assert.equal(existsSync(path.join(out, 'tokens-per-s.svg')), false);
});

test('structured at a temperature: one seed a prompt, each server repeating itself, and the single workload refused', async () => {
    const out = path.join(tmp, 'structured-sampled'), bodies = path.join(tmp, 'structured-sampled-bodies.log');
    const r = await run_driver(out, ['--workload', 'structured', '--temperature', '0.7', '--fixtures', 'exact', '--concurrency', '1',
                                     '--min-requests', '8', '--servers', 'specdec-mtp,llama-plain', '--rounds', '1', '--warmup', '0'],
                               { FAKE_BODY_LOG: bodies });
    assert.equal(r.code, 0, r.stderr); // not compared across servers, so nothing is "not identical"
    const sent = readFileSync(bodies, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(sent.length, 2 * 8);
    for (const q of sent) {
        assert.equal(q.temperature, 0.7);
        assert.ok(q.json_schema !== undefined || q.grammar !== undefined);
    }
    const prompts = [...new Set(sent.map((q) => q.prompt))];
    assert.equal(prompts.length, 4);
    const seeds = prompts.map((p) => new Set(sent.filter((q) => q.prompt === p).map((q) => q.seed)));
    assert.ok(seeds.every((s) => s.size === 1), 'one seed a prompt');
    assert.equal(new Set(seeds.map((s) => [...s][0])).size, 4, 'a seed of its own for each prompt');
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
    for (const run of summary.runs) {
        assert.equal(run.identical, null);
        assert.equal(run.identical_why, 'sampled: not compared');
    }
    const md = readFileSync(path.join(out, 'results.md'), 'utf8');
    assert.match(md, /which both servers take\); temperature 0\.7, one seed a prompt\./);
    assert.match(md, /\| specdec-mtp \| 1 \| 8 \| [0-9.]+ .*\| sampled: not compared \|/);

    const single = await run_driver(path.join(tmp, 'single-sampled'), ['--temperature', '0.7', '--fixtures', 'exact']);
    assert.equal(single.code, 2);
    assert.match(single.stderr, /the single workload is greedy/);
});

test('killing the driver stops its server', async () => {
    const out = path.join(tmp, 'killed'), pids = mkdtempSync(path.join(tmp, 'pids-'));
    const r = await run_driver(out, ['--fixtures', 'exact', '--concurrency', '1', '--servers', 'llama-plain'],
                               { FAKE_PID_DIR: pids, FAKE_TOKEN_MS: '1000' }, (ch) => {
        ch.stderr.on('data', (d) => { if (/ready at/.test(String(d))) setTimeout(() => ch.kill('SIGTERM'), 300); });
    });
    assert.equal(r.code, 143, r.stderr);
    assert.equal(readdirSync(pids).length, 1);
    assert.deepEqual(await all_dead(pids), []);
});
