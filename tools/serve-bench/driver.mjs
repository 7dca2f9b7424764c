#!/usr/bin/env node
// The serving benchmark's matrix: for each fixture, each server and each
// concurrency, closed-loop load runs (loadgen.mjs; with --workload chat,
// multi-turn conversations, chat.mjs) against servers this script starts
// and stops, every one at its defaults (llama-server's prompt cache on). A fixture's servers all run at once, and each
// point is measured in rounds: every round runs each server in turn, so
// that a slow spell of a shared host falls on every server alike rather
// than on whichever happened to run then. Writes the raw JSON of every
// point, summary.json, results.md (tables and ratios) and tokens-per-s.svg;
// scripts/serve-bench.sh --record keeps them as a dated record in docs/results/.
// Normally started by scripts/serve-bench.sh, which builds what it needs.
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { pool_conversations, run_conversations, turn_tokens } from './chat.mjs';
import { pool_rounds, request_tokens, run_closed_loop, warm_up, DEFAULT_PROMPTS } from './loadgen.mjs';
import { structured_body, STRUCTURED_KINDS, STRUCTURED_PROMPTS } from './structured.mjs';

const FIXTURES = ['exact', 'mixed', 'random', 'soft'];
const DEFAULT_FIXTURES = ['exact', 'mixed', 'random'];
// specdec-fixture's options per fixture: the MTP drafter's kind; `soft` is
// a target that samples among three tokens (0.5/0.25/0.25) with a head that
// draws 0.7/0.05/0.25 (fixtures.h, soft_mix), where rejection sampling keeps
// 0.8 of the drafts and exact matching half (docs/sampling.md).
const FIXTURE_ARGS = {
    exact: ['--drafter', 'exact'], mixed: ['--drafter', 'mixed'], random: ['--drafter', 'random'],
    soft: ['--soft-target', '0.5,0.25,0.25', '--soft-drafter', '0.7,0.05,0.25'],
};
// Each server: how it is started and what it is called in the tables.
const SERVERS = {
    'specdec-none': { title: 'specdec serve, --spec none', kind: 'specdec' },
    'specdec-mtp': { title: 'specdec serve, --spec mtp --n-draft auto', kind: 'specdec' },
    'specdec-mtp-exact': { title: 'specdec serve, --spec mtp --n-draft auto --accept exact', kind: 'specdec' },
    'llama-plain': { title: 'llama-server, no speculation', kind: 'llama' },
    'llama-mtp': { title: 'llama-server, --spec-type draft-mtp', kind: 'llama' },
};
const RATIOS = [
    ['specdec-mtp', 'specdec-none', 'specdec auto ÷ specdec none'],
    ['specdec-mtp', 'llama-mtp', 'specdec auto ÷ llama-server MTP'],
    ['specdec-mtp', 'specdec-mtp-exact', 'specdec auto: rejection ÷ exact'],
    ['specdec-none', 'llama-plain', 'specdec none ÷ llama-server plain'],
    ['llama-mtp', 'llama-plain', 'llama-server MTP ÷ llama-server plain'],
];

// Progress on stderr: one line rewritten in place on a terminal; elsewhere a
// plain line per step (a run of one server), and within a step a line at
// most every 20 s. Silent with --quiet. log() lines are printed in any case.
class Progress {
    constructor(quiet) { this.quiet = quiet; this.live = !quiet && Boolean(process.stderr.isTTY); this.shown = false; this.last = 0; }
    step(text) {
        if (this.quiet) return;
        if (this.live) { this.draw(text); return; }
        console.error(`serve-bench: ${text}`);
        this.last = performance.now();
    }
    update(text) {
        if (this.live) this.draw(text);
        else if (!this.quiet && performance.now() - this.last >= 20000) this.step(text);
    }
    clear() {
        if (this.shown) { process.stderr.write('\r\x1b[K'); this.shown = false; }
    }
    draw(text) {
        let line = `serve-bench: ${text}`;
        const w = process.stderr.columns;
        if (w && line.length >= w) line = line.slice(0, w - 1);
        process.stderr.write(`\r\x1b[K${line}`);
        this.shown = true;
    }
}
let progress = new Progress(true);

const log = (msg) => { progress.clear(); console.error(`serve-bench: ${msg}`); };
const duration = (s) => (s < 60 ? `${Math.round(s)} s` : s < 3600 ? `${Math.floor(s / 60)} min ${String(Math.round(s % 60)).padStart(2, '0')} s`
                                                        : `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const list = (s) => s.split(',').map((x) => x.trim()).filter((x) => x !== '');

const USAGE = `usage: driver.mjs --specdec BIN --llama-server BIN --fixture-tool BIN [options]
       driver.mjs --report DIR   (rewrites DIR/results.md and DIR/tokens-per-s.svg from DIR/summary.json)
  --out DIR              results directory (default: $TMPDIR/specdec-serve-bench-<UTC time>)
  --workload NAME        single: single-turn requests over fixed prompts (default); chat: conversations
                         of --turns turns, each turn resending the conversation so far (chat.mjs);
                         structured: single-turn requests whose output a JSON schema or grammar
                         constrains (structured.mjs)
  --turns N              chat: turns per conversation (default 5)
  --temperature T        chat and structured: sampling temperature, seeded per turn (chat) or per prompt
                         (structured: every request of a prompt has the same seed, so it must repeat
                         its text); default 0; identity across servers is checked at 0 only
  --conversations N|auto chat: conversations per round; auto = max(2, C) (default auto)
  --fixtures LIST        exact,mixed,random,soft (default exact,mixed,random; soft: a target that samples
                         among three tokens, for the chat workload at a temperature)
  --servers LIST         specdec-none,specdec-mtp,specdec-mtp-exact,llama-plain,llama-mtp (default all but
                         specdec-mtp-exact, which is specdec-mtp with --accept exact)
  --concurrency LIST     default 1,2,4,8,16
  --rounds N             measured rounds per point, each server in turn in each (default 2)
  --requests N|auto      requests per round; auto = max(--min-requests, --requests-per-client x C) (default auto)
  --min-requests N       default 8
  --requests-per-client N default 2
  --max-tokens N         tokens per request (default 64); chat: the scale of each turn's length (chat.mjs TURN_TOKENS)
  --varied-lengths       each prompt's requests ask their own share of --max-tokens (loadgen's
                         VARIED_FRACTIONS: 1, 1/4, 5/8, 1/8, 7/8, 3/8, 1/2, 3/4), so requests
                         end at different steps and slots free up while others run
  --threads N            server threads, -t (default 2)
  --slots N              parallel slots, -np (default: the largest concurrency)
  --ctx N                context per slot (default 512)
  --llama-mtp-n-max N    llama-server's --spec-draft-n-max (default 3, upstream's default)
  --shape NAME           fixture shape (default qwen3-0.6b)
  --type TYPE            fixture weights (default q4_k_m)
  --fixture-dir DIR      keep the fixtures there, reusing files already there (default: OUT/fixtures, removed at the end)
  --reference SERVER     whose texts the others must equal (default specdec-none, else llama-plain)
  --warmup N             unmeasured requests before each point, N at a time, 8 tokens each (default: C)
  --startup-timeout-s N  wait this long for /health (default 300)
  --request-timeout-s N  default 600
  --quiet                no progress lines on stderr (which fixture, server, concurrency and round
                         runs, how many remain and the time left); results and errors still`;

function parse_args(argv) {
    const a = {
        specdec: null, llama_server: null, fixture_tool: null, out: null, fixtures: DEFAULT_FIXTURES,
        servers: ['specdec-none', 'specdec-mtp', 'llama-plain', 'llama-mtp'],
        concurrency: [1, 2, 4, 8, 16], rounds: 2, requests: 'auto', min_requests: 8, requests_per_client: 2, max_tokens: 64, threads: 2,
        slots: null, ctx: 512, llama_mtp_n_max: 3, shape: 'qwen3-0.6b', type: 'q4_k_m', fixture_dir: null, reference: null,
        warmup: null, startup_timeout_s: 300, request_timeout_s: 600, varied: false, quiet: false,
        workload: 'single', turns: 5, temperature: 0, conversations: 'auto',
    };
    const int = (k, v) => { const n = Number(v); if (!Number.isInteger(n) || n < 1) throw new Error(`${k} needs a positive integer`); return n; };
    for (let i = 0; i < argv.length; i++) {
        const k = argv[i];
        if (k === '-h' || k === '--help') { console.log(USAGE); process.exit(0); }
        if (k === '--varied-lengths') { a.varied = true; continue; }
        if (k === '--quiet') { a.quiet = true; continue; }
        if (i + 1 >= argv.length) throw new Error(`${k} needs a value (or is unknown)`);
        const v = argv[++i];
        switch (k) {
            case '--specdec': a.specdec = v; break;
            case '--llama-server': a.llama_server = v; break;
            case '--fixture-tool': a.fixture_tool = v; break;
            case '--out': a.out = v; break;
            case '--fixtures': a.fixtures = list(v); break;
            case '--servers': a.servers = list(v); break;
            case '--concurrency': a.concurrency = list(v).map((x) => int(k, x)); break;
            case '--rounds': a.rounds = int(k, v); break;
            case '--requests': a.requests = v === 'auto' ? 'auto' : int(k, v); break;
            case '--min-requests': a.min_requests = int(k, v); break;
            case '--requests-per-client': a.requests_per_client = int(k, v); break;
            case '--max-tokens': a.max_tokens = int(k, v); break;
            case '--threads': a.threads = int(k, v); break;
            case '--slots': a.slots = int(k, v); break;
            case '--ctx': a.ctx = int(k, v); break;
            case '--llama-mtp-n-max': a.llama_mtp_n_max = int(k, v); break;
            case '--shape': a.shape = v; break;
            case '--type': a.type = v; break;
            case '--fixture-dir': a.fixture_dir = v; break;
            case '--reference': a.reference = v; break;
            case '--warmup': a.warmup = Number(v); break;
            case '--startup-timeout-s': a.startup_timeout_s = int(k, v); break;
            case '--request-timeout-s': a.request_timeout_s = int(k, v); break;
            case '--workload': a.workload = v; break;
            case '--turns': a.turns = int(k, v); break;
            case '--temperature': a.temperature = Number(v); break;
            case '--conversations': a.conversations = v === 'auto' ? 'auto' : int(k, v); break;
            default: throw new Error(`unknown option ${k}`);
        }
    }
    if (!['single', 'chat', 'structured'].includes(a.workload)) throw new Error(`unknown workload ${a.workload} (single, chat, structured)`);
    if (!(a.temperature >= 0 && a.temperature <= 2)) throw new Error('--temperature must be within [0, 2]');
    if (a.temperature > 0 && a.workload === 'single') throw new Error('--temperature: the single workload is greedy (chat and structured sample)');
    for (const f of a.fixtures) if (!FIXTURES.includes(f)) throw new Error(`unknown fixture ${f} (${FIXTURES.join(', ')})`);
    for (const s of a.servers) if (!(s in SERVERS)) throw new Error(`unknown server ${s} (${Object.keys(SERVERS).join(', ')})`);
    if (a.servers.some((s) => SERVERS[s].kind === 'specdec') && !a.specdec) throw new Error('--specdec is required for the specdec servers');
    if (a.servers.some((s) => SERVERS[s].kind === 'llama') && !a.llama_server) throw new Error('--llama-server is required for the llama-server servers');
    if (!a.fixture_tool) throw new Error('--fixture-tool is required');
    a.concurrency.sort((x, y) => x - y);
    a.slots ??= a.concurrency[a.concurrency.length - 1];
    a.reference ??= a.servers.includes('specdec-none') ? 'specdec-none' : a.servers.includes('llama-plain') ? 'llama-plain' : a.servers[0];
    if (!a.servers.includes(a.reference)) throw new Error(`--reference ${a.reference} is not among --servers`);
    if (!a.out) a.out = path.join(os.tmpdir(), `specdec-serve-bench-${new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19)}`);
    return a;
}

const requests_for = (a, c) => (a.requests === 'auto' ? Math.max(a.min_requests, a.requests_per_client * c) : a.requests);
const conversations_for = (a, c) => (a.conversations === 'auto' ? Math.max(2, c) : a.conversations);
// One measured run of the workload, and the pooling of a point's runs.
const measure = (a, load) => (a.workload === 'chat' ? run_conversations(load) : run_closed_loop(load));
const pool = (a, rounds, load) => (a.workload === 'chat' ? pool_conversations(rounds, load) : pool_rounds(rounds, load));
// The single-turn workloads' prompts, and the fields each prompt's requests add.
const prompts_of = (a) => (a.workload === 'structured' ? STRUCTURED_PROMPTS : DEFAULT_PROMPTS);
const body_for = (a) => (a.workload !== 'structured' ? undefined
    : (i) => ({ ...structured_body(i), ...(a.temperature > 0 ? { temperature: a.temperature, seed: 1000 + i } : {}) }));

// --- child processes: every one is killed on every way out -----------------
const children = new Set();
function kill_all(signal = 'SIGKILL') {
    for (const ch of children) {
        try { process.kill(-ch.pid, signal); } catch { try { ch.kill(signal); } catch { /* gone */ } }
    }
}
process.on('exit', () => kill_all());
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => { log(`${sig}: stopping servers`); kill_all(); process.exit(128 + (sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1)); });
}

function free_port() {
    return new Promise((resolve, reject) => {
        const s = createServer();
        s.unref();
        s.on('error', reject);
        s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    });
}

function server_command(a, name, model, port) {
    const common_llama = ['-m', model, '-t', String(a.threads), '-tb', String(a.threads), '-np', String(a.slots),
                          '-c', String(a.slots * a.ctx), '--host', '127.0.0.1', '--port', String(port),
                          '--metrics', '--no-webui'];
    switch (name) {
        case 'specdec-none':
        case 'specdec-mtp':
        case 'specdec-mtp-exact':
            return [a.specdec, ['serve', '-m', model, '--spec', name === 'specdec-none' ? 'none' : 'mtp',
                                ...(name !== 'specdec-none' ? ['--n-draft', 'auto'] : []),
                                ...(name === 'specdec-mtp-exact' ? ['--accept', 'exact'] : []),
                                '-np', String(a.slots), '-c', String(a.ctx), '-t', String(a.threads), '--host', '127.0.0.1', '--port', '0']];
        case 'llama-plain':
            return [a.llama_server, common_llama];
        case 'llama-mtp':
            return [a.llama_server, [...common_llama, '--spec-type', 'draft-mtp', '--spec-draft-n-max', String(a.llama_mtp_n_max)]];
    }
    throw new Error(name);
}

// Starts a server and waits for GET /health to answer 200. Returns {url, stop, cmd}.
async function start_server(a, name, model, log_path) {
    const port = SERVERS[name].kind === 'llama' ? await free_port() : 0;
    const [bin, args] = server_command(a, name, model, port);
    const out = createWriteStream(log_path);
    out.write(`$ ${bin} ${args.join(' ')}\n`);
    const ch = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    children.add(ch);
    let exited = null;
    ch.on('exit', (code, signal) => { exited = { code, signal }; children.delete(ch); });
    ch.on('error', (e) => { exited = { code: null, signal: null, error: e.message }; children.delete(ch); });
    let url = port > 0 ? `http://127.0.0.1:${port}` : null;
    let stderr_tail = '';
    ch.stdout.pipe(out, { end: false });
    ch.stderr.on('data', (d) => {
        out.write(d);
        stderr_tail = (stderr_tail + d.toString()).slice(-4000);
        const m = /listening on (http:\/\/[0-9.]+:[0-9]+)/.exec(stderr_tail);
        if (m && !url) url = m[1];
    });
    const stop = async () => {
        if (exited === null) {
            try { process.kill(-ch.pid, 'SIGTERM'); } catch { /* gone */ }
            for (let i = 0; i < 100 && exited === null; i++) await sleep(100);
            if (exited === null) { try { process.kill(-ch.pid, 'SIGKILL'); } catch { /* gone */ } }
            for (let i = 0; i < 50 && exited === null; i++) await sleep(100);
        }
        out.end();
    };
    const t0 = performance.now();
    for (;;) {
        if (exited !== null) {
            await stop();
            throw new Error(`${name} exited before it was ready (${JSON.stringify(exited)}); the end of ${log_path}:\n${stderr_tail.slice(-1500)}`);
        }
        if ((performance.now() - t0) / 1000 > a.startup_timeout_s) {
            await stop();
            throw new Error(`${name} not ready after ${a.startup_timeout_s} s; see ${log_path}`);
        }
        if (url) {
            try {
                const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
                if (r.status === 200) break;
            } catch { /* not yet */ }
        }
        await sleep(100);
    }
    let model_id = 'default';
    try {
        const r = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(5000) });
        const j = await r.json();
        if (Array.isArray(j.data) && j.data.length > 0 && j.data[0].id) model_id = j.data[0].id;
    } catch { /* keep the default name */ }
    return { url, stop, model_id, cmd: [bin, ...args].join(' '), startup_s: (performance.now() - t0) / 1000 };
}

function make_fixture(a, drafter, dir) {
    const file = path.join(dir, `${a.shape}-${a.type}-${drafter}.gguf`);
    if (existsSync(file) && statSync(file).size > 0) { log(`fixture ${file} (reused)`); return file; }
    log(`writing the ${drafter} fixture (${a.shape}, ${a.type}) to ${file}`);
    const t0 = performance.now();
    // Its progress and errors go straight to our stderr.
    const r = spawnSync(a.fixture_tool, ['glm4moe-mtp', file + '.tmp', '--shape', a.shape, ...FIXTURE_ARGS[drafter], '--type', a.type,
                                         ...(a.quiet ? ['--quiet'] : [])],
                        { encoding: 'utf8', stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`${a.fixture_tool} failed (${r.status})${r.error ? `: ${r.error.message}` : ''}`);
    spawnSync('mv', [file + '.tmp', file]);
    log(`  ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    return file;
}

// --- reporting ----------------------------------------------------------------
const fmt = (x, d = 1) => (x === null || x === undefined ? '–' : Number(x).toFixed(d));

// Marks every run `identical`: each prompt's text equals the reference
// server's on the same fixture (from its lowest-concurrency run that had the
// prompt), every request of a prompt got the same text, no request failed
// and each produced the max_tokens it asked for.
function mark_identical(runs, a) {
    for (const fixture of a.fixtures) {
        const ref_runs = runs.filter((r) => r.fixture === fixture && r.server === a.reference && r.errors === 0)
            .sort((x, y) => x.concurrency - y.concurrency);
        const ref = ref_runs.length > 0 ? { texts: {} } : null;
        for (const r of ref_runs) for (const [p, t] of Object.entries(r.texts)) if (!(p in ref.texts)) ref.texts[p] = t;
        for (const r of runs.filter((x) => x.fixture === fixture)) {
            const why = [];
            if (!ref) why.push(`no reference (${a.reference}) run`);
            if (r.errors > 0) why.push(`${r.errors} failed requests`);
            if (!r.consistent && a.workload !== 'chat') why.push('requests of one prompt differ');
            const requested = r.requested_tokens ?? r.requests * a.max_tokens; // (summaries written before it was recorded)
            if (!r.consistent && a.workload === 'chat') why.push('rounds differ');
            // (A grammar may end an answer before max_tokens: there the texts decide.)
            if (a.workload !== 'structured' && r.completion_tokens !== requested) why.push(`${r.completion_tokens} tokens, expected ${requested}`);
            if (ref) {
                const compared = Object.keys(r.texts).filter((p) => p in ref.texts);
                const differ = compared.filter((p) => r.texts[p] !== ref.texts[p]);
                if (differ.length > 0) why.push(`${differ.length} of ${compared.length} prompts differ from ${a.reference}`);
                if (compared.length < Object.keys(r.texts).length) why.push(`${Object.keys(r.texts).length - compared.length} prompts not in the reference runs`);
            }
            if (a.temperature > 0) {
                // Sampled: servers draw differently; each must still repeat itself, round after round
                // (chat) or request after request of one prompt (structured: one seed a prompt). Failed
                // requests still fail the run.
                r.identical = r.errors > 0 ? false : null;
                r.identical_why = r.errors > 0 ? `${r.errors} failed requests (sampled: texts not compared)`
                    : r.consistent ? 'sampled: not compared'
                    : `sampled, and ${a.workload === 'chat' ? 'rounds' : 'requests of one prompt'} differ`;
                continue;
            }
            r.identical = why.length === 0;
            r.identical_why = why.join('; ');
        }
    }
}

// The report's last lines: each server and the command it ran.
function servers_list(a, meta) {
    return ['Servers:', '', ...a.servers.map((s) => `- \`${s}\`: ${SERVERS[s].title}: \`${meta.commands[s] ?? '(not started)'}\``), ''];
}

// The chat workload's tables: per server and concurrency, the conversation's
// time, time to first token on the first and the later turns, tokens/s and
// the share of later prompts reused; then ratios against llama-server.
function chat_markdown(runs, a, meta, head) {
    const out = [head, ''];
    out.push(`Chat workload: conversations of ${a.turns} turns (answers of ${Array.from({ length: a.turns }, (_, t) => turn_tokens(a, t)).join(', ')} tokens), ` +
             `each turn resending the conversation so far over a shared system prompt, temperature ${a.temperature}` +
             `${a.temperature > 0 ? ' (seeded per turn)' : ''}; ${a.conversations === 'auto' ? 'max(2, C)' : a.conversations} conversations a round, ` +
             `${a.rounds} round${a.rounds > 1 ? 's' : ''} a point; -t ${a.threads}, ${a.slots} slots of ${a.ctx} tokens, fixtures ${a.shape} ${a.type}; ` +
             `every server at its defaults (llama-server's prompt cache on). Whole run: ${(meta.elapsed_s / 60).toFixed(1)} min.`, '');
    for (const fixture of a.fixtures) {
        out.push(`**${fixture} drafter**`, '');
        out.push('| server | C | conversation s | TTFT turn 1 ms | TTFT later turns mean / p99 ms | tok/s | later prompts reused | identical |');
        out.push('|---|---|---|---|---|---|---|---|');
        for (const s of a.servers) {
            for (const c of a.concurrency) {
                const r = runs.find((x) => x.fixture === fixture && x.server === s && x.concurrency === c);
                if (!r) { out.push(`| ${s} | ${c} | not run | | | | | |`); continue; }
                const same = r.identical === null ? r.identical_why : r.identical ? 'yes' : `**no**: ${r.identical_why}`;
                out.push(`| ${s} | ${c} | ${fmt(r.conversation_s.mean)} | ${fmt(r.ttft_ms.first_turn, 0)} | ${fmt(r.ttft_ms.later_mean, 0)} / ${fmt(r.ttft_ms.later_p99, 0)} | ` +
                         `${fmt(r.tokens_per_s)} | ${r.cached_share === null ? '–' : `${(100 * r.cached_share).toFixed(0)}%`} | ${same} |`);
            }
        }
        out.push('');
    }
    const pairs = [['specdec-mtp', 'llama-plain'], ['specdec-mtp', 'llama-mtp'], ['specdec-none', 'llama-plain'],
                   ['specdec-mtp', 'specdec-mtp-exact']]
        .filter(([x, y]) => a.servers.includes(x) && a.servers.includes(y));
    if (pairs.length > 0) {
        out.push('**Ratios from this one run** (TTFT of turns 2 and later; conversation time)', '');
        out.push(`| fixture | C | ${pairs.map(([x, y]) => `${x} ÷ ${y}: TTFT later | conversation`).join(' | ')} |`);
        out.push(`|---|---|${pairs.map(() => '---|---').join('|')}|`);
        for (const fixture of a.fixtures) {
            for (const c of a.concurrency) {
                const run = (s) => runs.find((x) => x.fixture === fixture && x.server === s && x.concurrency === c);
                const ratio = (x, y, f) => (run(x) && run(y) && f(run(y)) ? (f(run(x)) / f(run(y))).toFixed(2) : '–');
                const cells = pairs.map(([x, y]) => `${ratio(x, y, (r) => r.ttft_ms.later_mean)} | ${ratio(x, y, (r) => r.conversation_s.mean)}`);
                out.push(`| ${fixture} | ${c} | ${cells.join(' | ')} |`);
            }
        }
        out.push('');
    }
    out.push(...servers_list(a, meta));
    return out.join('\n');
}

function markdown(runs, a, meta) {
    const out = [];
    const v = meta.versions ?? {};
    const head = [`Measured ${meta.finished} on ${meta.host}`];
    if (v.commit) head.push(`commit ${v.commit}`);
    if (v.specdec) head.push(v.specdec);
    if (v.llama_server) head.push(`llama-server ${v.llama_server}`);
    if (a.workload === 'chat') return chat_markdown(runs, a, meta, head.join('; ') + '.');
    out.push(head.join('; ') + '.');
    out.push('');
    const rounds = a.rounds ?? 1;
    const lengths = a.varied ? `up to ${a.max_tokens} tokens a request (by prompt: ${prompts_of(a).map((_, i) => request_tokens(a, i)).join(', ')})`
                             : `${a.workload === 'structured' ? 'at most ' : ''}${a.max_tokens} tokens a request`;
    if (a.workload === 'structured') {
        out.push(`Structured output: the prompts' answers follow, in turn, ${STRUCTURED_KINDS.join('; ')} ` +
                 '(tools/serve-bench/structured.mjs; `json_schema` and `grammar` on /v1/completions, which both servers take); ' +
                 (a.temperature > 0 ? `temperature ${a.temperature}, one seed a prompt.` : 'greedy.'));
        out.push('');
    }
    out.push(`${lengths}, ${rounds} round${rounds > 1 ? 's' : ''} a point of ` +
             `${a.requests === 'auto' ? `max(${a.min_requests}, ${a.requests_per_client} x C)` : a.requests} requests ` +
             `(each round runs a fixture's servers in turn; tok/s: all rounds' tokens over their time, the rounds' own in brackets), ` +
             `-t ${a.threads}, ${a.slots} slot${a.slots > 1 ? 's' : ''} of ${a.ctx} tokens, fixtures ${a.shape} ${a.type}; ` +
             `reference for \`identical\`: ${a.reference}. Whole run: ${(meta.elapsed_s / 60).toFixed(1)} min.`);
    out.push('');
    for (const fixture of a.fixtures) {
        out.push(`**${fixture} drafter**`, '');
        out.push('| server | C | requests | tok/s | TTFT mean / p50 / p99 ms | ITL p50 / p99 ms | TPOT ms | acceptance | identical |');
        out.push('|---|---|---|---|---|---|---|---|---|');
        for (const s of a.servers) {
            for (const c of a.concurrency) {
                const r = runs.find((x) => x.fixture === fixture && x.server === s && x.concurrency === c);
                if (!r) { out.push(`| ${s} | ${c} | – | not run | | | | | |`); continue; }
                const acc = r.draft && r.draft.acceptance !== null ? r.draft.acceptance.toFixed(2) : '–';
                const spread = r.rounds && r.rounds.length > 1
                    ? ` (${fmt(Math.min(...r.rounds.map((x) => x.tokens_per_s)))}–${fmt(Math.max(...r.rounds.map((x) => x.tokens_per_s)))})` : '';
                out.push(`| ${s} | ${c} | ${r.requests} | ${fmt(r.tokens_per_s)}${spread} | ${fmt(r.ttft_ms.mean, 0)} / ${fmt(r.ttft_ms.p50, 0)} / ${fmt(r.ttft_ms.p99, 0)} | ` +
                         `${fmt(r.itl_ms.p50)} / ${fmt(r.itl_ms.p99)} | ${fmt(r.tpot_ms.mean)} | ${acc} | ${r.identical === null ? r.identical_why : r.identical ? 'yes' : `**no**: ${r.identical_why}`} |`);
            }
        }
        out.push('');
    }
    const present = RATIOS.filter(([x, y]) => a.servers.includes(x) && a.servers.includes(y));
    if (present.length > 0) {
        out.push('**Ratios of tokens/s, from this one run**', '');
        out.push(`| fixture | C | ${present.map((p) => p[2]).join(' | ')} |`);
        out.push(`|---|---|${present.map(() => '---').join('|')}|`);
        for (const fixture of a.fixtures) {
            for (const c of a.concurrency) {
                const tps = (s) => runs.find((x) => x.fixture === fixture && x.server === s && x.concurrency === c)?.tokens_per_s;
                const cells = present.map(([x, y]) => (tps(x) && tps(y) ? (tps(x) / tps(y)).toFixed(2) : '–'));
                out.push(`| ${fixture} | ${c} | ${cells.join(' | ')} |`);
            }
        }
        out.push('');
    }
    out.push(...servers_list(a, meta));
    return out.join('\n');
}

// tok/s against concurrency, one panel per fixture, one line per server.
function svg_chart(runs, a) {
    const colors = { 'specdec-none': '#1f77b4', 'specdec-mtp': '#d62728', 'specdec-mtp-exact': '#9467bd', 'llama-plain': '#7f7f7f',
                     'llama-mtp': '#ff7f0e' };
    const dashes = { 'specdec-none': '', 'specdec-mtp': '', 'specdec-mtp-exact': '2 3', 'llama-plain': '6 4', 'llama-mtp': '6 4' };
    const W = 340, H = 260, ml = 52, mr = 12, mt = 30, mb = 42, legend_h = 18 * a.servers.length + 10;
    const total_w = W * a.fixtures.length, total_h = H + legend_h;
    const ymax_all = Math.max(1, ...runs.map((r) => r.tokens_per_s ?? 0));
    const nice = (v) => { const p = 10 ** Math.floor(Math.log10(v)); return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v); };
    const ymax = nice(ymax_all * 1.05);
    const cs = a.concurrency;
    const lx = (c) => (cs.length === 1 ? 0.5 : (Math.log2(c) - Math.log2(cs[0])) / (Math.log2(cs[cs.length - 1]) - Math.log2(cs[0])));
    const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
    const el = [];
    el.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${total_w}" height="${total_h}" viewBox="0 0 ${total_w} ${total_h}" font-family="sans-serif" font-size="11">`);
    el.push(`<rect width="100%" height="100%" fill="white"/>`);
    a.fixtures.forEach((fixture, fi) => {
        const x0 = fi * W + ml, y0 = mt, pw = W - ml - mr, ph = H - mt - mb;
        const X = (c) => x0 + lx(c) * pw, Y = (v) => y0 + ph - (v / ymax) * ph;
        el.push(`<text x="${x0 + pw / 2}" y="18" text-anchor="middle" font-size="13" font-weight="bold">${esc(fixture)} drafter</text>`);
        for (let k = 0; k <= 5; k++) {
            const v = (ymax * k) / 5, y = Y(v);
            el.push(`<line x1="${x0}" y1="${y}" x2="${x0 + pw}" y2="${y}" stroke="#ddd"/>`);
            el.push(`<text x="${x0 - 5}" y="${y + 4}" text-anchor="end">${Number(v.toFixed(1))}</text>`);
        }
        for (const c of cs) {
            el.push(`<line x1="${X(c)}" y1="${y0 + ph}" x2="${X(c)}" y2="${y0 + ph + 4}" stroke="black"/>`);
            el.push(`<text x="${X(c)}" y="${y0 + ph + 16}" text-anchor="middle">${c}</text>`);
        }
        el.push(`<rect x="${x0}" y="${y0}" width="${pw}" height="${ph}" fill="none" stroke="black"/>`);
        el.push(`<text x="${x0 + pw / 2}" y="${y0 + ph + 32}" text-anchor="middle">concurrent clients</text>`);
        el.push(`<text x="${x0 - 5}" y="${y0 - 6}" text-anchor="end">tok/s</text>`);
        for (const s of a.servers) {
            const pts = cs.map((c) => runs.find((r) => r.fixture === fixture && r.server === s && r.concurrency === c))
                .filter((r) => r && r.tokens_per_s !== null).map((r) => [X(r.concurrency), Y(r.tokens_per_s)]);
            if (pts.length === 0) continue;
            el.push(`<polyline fill="none" stroke="${colors[s]}" stroke-width="2" ${dashes[s] ? `stroke-dasharray="${dashes[s]}"` : ''} points="${pts.map((p) => p.map((v) => v.toFixed(1)).join(',')).join(' ')}"/>`);
            for (const [px, py] of pts) el.push(`<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="3" fill="${colors[s]}"/>`);
        }
    });
    a.servers.forEach((s, i) => {
        const lx0 = 20, ly = H + 8 + 18 * i;
        el.push(`<line x1="${lx0}" y1="${ly}" x2="${lx0 + 28}" y2="${ly}" stroke="${colors[s]}" stroke-width="2" ${dashes[s] ? `stroke-dasharray="${dashes[s]}"` : ''}/>`);
        el.push(`<text x="${lx0 + 34}" y="${ly + 4}">${esc(SERVERS[s].title)}</text>`);
    });
    el.push('</svg>');
    return el.join('\n') + '\n';
}

// --- the matrix -----------------------------------------------------------------
function write_reports(dir, a, runs, meta, failures) {
    const md = markdown(runs, a, meta) + (failures.length ? `\nFailures:\n\n${failures.map((f) => `- ${f}`).join('\n')}\n` : '');
    writeFileSync(path.join(dir, 'results.md'), md);
    if (a.workload === 'single') writeFileSync(path.join(dir, 'tokens-per-s.svg'), svg_chart(runs, a)); // the one with a chart
}

// What was measured: the repository's commit and both servers' versions.
function versions(a) {
    const first_line = (bin, args) => {
        if (!bin) return null;
        const r = spawnSync(bin, args, { encoding: 'utf8', timeout: 30000 });
        const out = `${r.stdout ?? ''}\n${r.stderr ?? ''}`.split('\n').map((l) => l.trim()).filter((l) => /version|specdec \d/.test(l));
        return out[0] ?? null;
    };
    const repo = path.dirname(fileURLToPath(import.meta.url));
    const git = (args) => spawnSync('git', ['-C', repo, ...args], { encoding: 'utf8' }).stdout?.trim() || null;
    const commit = git(['rev-parse', '--short', 'HEAD']);
    return {
        commit: commit ? commit + (git(['status', '--porcelain', '--untracked-files=no']) ? ' (modified)' : '') : null,
        specdec: first_line(a.specdec, ['--version']),
        llama_server: first_line(a.llama_server, ['--version']),
    };
}

async function main() {
    const ri = process.argv.indexOf('--report');
    if (ri >= 0) {
        const dir = process.argv[ri + 1];
        const s = JSON.parse(readFileSync(path.join(dir, 'summary.json'), 'utf8'));
        mark_identical(s.runs, s.options);
        write_reports(dir, s.options, s.runs, s.meta, s.failures);
        log(`rewrote ${dir}/results.md and tokens-per-s.svg`);
        return;
    }
    let a;
    try { a = parse_args(process.argv.slice(2)); } catch (e) { console.error(`serve-bench: ${e.message}\n${USAGE}`); process.exit(2); }
    progress = new Progress(a.quiet);
    const t_begin = performance.now();
    mkdirSync(path.join(a.out, 'raw'), { recursive: true });
    mkdirSync(path.join(a.out, 'logs'), { recursive: true });
    const own_fixture_dir = a.fixture_dir === null;
    const fixture_dir = a.fixture_dir ?? path.join(a.out, 'fixtures');
    mkdirSync(fixture_dir, { recursive: true });
    const n_points = a.fixtures.length * a.servers.length * a.concurrency.length;
    log(`${a.fixtures.length} fixtures x ${a.servers.length} servers x ${a.concurrency.length} concurrencies = ${n_points} points ` +
        `of ${a.rounds} round${a.rounds > 1 ? 's' : ''} into ${a.out}`);

    const runs = [];
    const commands = {};
    const failures = [];
    // Every measured run of the matrix, in order, and how long each took:
    // the time left is estimated once a round has been timed, from the
    // same server at the same concurrency, else from that server's seconds
    // per requested token so far.
    const plan = [];
    for (const fixture of a.fixtures) for (const c of a.concurrency) for (let round = 0; round < a.rounds; round++) {
        for (const server of a.servers) plan.push({ fixture, c, round, server, done: false });
    }
    const seconds_of = new Map(); // `${server} ${c}` -> seconds of each run
    const pace = new Map();       // server -> { seconds, tokens }
    const tokens_of = (c) => requests_for(a, c) * a.max_tokens;
    const time_left = (live_now, fixture_now) => {
        let left = 0;
        for (const p of plan) {
            if (p.done || (p.fixture === fixture_now && !live_now.has(p.server))) continue;
            const same = seconds_of.get(`${p.server} ${p.c}`);
            const rate = pace.get(p.server);
            if (same) left += same.reduce((x, y) => x + y, 0) / same.length;
            else if (rate) left += (rate.seconds / rate.tokens) * tokens_of(p.c);
            else return null;
        }
        return left;
    };
    const plan_entry = (fixture, c, round, server) => plan.find((p) => p.fixture === fixture && p.c === c && p.round === round && p.server === server);
    try {
        // All fixtures first, so that every server runs on the same files.
        const models = {};
        for (const f of a.fixtures) models[f] = make_fixture(a, f, fixture_dir);
        for (const fixture of a.fixtures) {
            // Every server of the fixture runs at once (an idle one waits on
            // its socket), so that each round can measure them back to back.
            const [load1] = os.loadavg();
            if (load1 > 0.7) log(`warning: load average ${load1.toFixed(2)} before starting the ${fixture} servers: other processes share the CPU`);
            const live = new Map(); // name -> server
            for (const name of a.servers) {
                const log_path = path.join(a.out, 'logs', `${fixture}-${name}.log`);
                progress.step(`${fixture} / ${name}: starting`);
                try {
                    const srv = await start_server(a, name, models[fixture], log_path);
                    commands[name] = srv.cmd.replace(models[fixture], 'FIXTURE.gguf').replace(/--port [1-9][0-9]*/, '--port PORT');
                    log(`${fixture} / ${name}: ready at ${srv.url} in ${srv.startup_s.toFixed(1)} s`);
                    live.set(name, srv);
                } catch (e) {
                    log(`${fixture} / ${name}: ${e.message}`);
                    failures.push(`${fixture} / ${name}: could not start (${log_path})`);
                }
            }
            // A server that fails a request is dropped for the rest of the fixture.
            const drop = async (name, e) => {
                log(`${fixture} / ${name}: ${e.message}`);
                failures.push(`${fixture} / ${name}: ${e.message}`);
                await live.get(name).stop();
                live.delete(name);
            };
            for (const p of plan) if (p.fixture === fixture && !live.has(p.server)) p.done = true; // never started
            try {
                for (const c of a.concurrency) {
                    const load = (srv) => ({ url: srv.url, concurrency: c, requests: requests_for(a, c), max_tokens: a.max_tokens, varied: a.varied,
                                             prompts: prompts_of(a), body_for: body_for(a), model: srv.model_id, timeout_ms: a.request_timeout_s * 1000,
                                             warmup: a.warmup ?? c, warmup_tokens: 8, metrics: true,
                                             turns: a.turns, temperature: a.temperature, conversations: conversations_for(a, c) });
                    const done = new Map([...live.keys()].map((name) => [name, []])); // name -> its rounds
                    for (const [name, srv] of [...live]) {
                        progress.step(`${fixture} / ${name} / C=${c}: warming up`);
                        try { await warm_up(load(srv)); } catch (e) { await drop(name, e); }
                    }
                    for (let round = 0; round < a.rounds; round++) {
                        // Each round in another order, so that no server always follows the same one.
                        const order = [...done.keys()].filter((name) => live.has(name));
                        for (let k = 0; k < order.length; k++) {
                            const name = order[(k + round) % order.length];
                            const entry = plan_entry(fixture, c, round, name);
                            const left = time_left(live, fixture);
                            const what = `[${plan.filter((p) => p.done).length + 1}/${plan.length}] ${fixture} / ${name} / C=${c}, ` +
                                         `round ${round + 1}/${a.rounds}${left === null ? '' : ` (about ${duration(left)} left)`}`;
                            progress.step(what);
                            const t0 = performance.now();
                            const on_request = (n, total) => progress.update(`${what}: ${n}/${total} requests`);
                            try { done.get(name).push(await measure(a, { ...load(live.get(name)), on_request })); } catch (e) { await drop(name, e); }
                            const s = (performance.now() - t0) / 1000;
                            entry.done = true;
                            seconds_of.set(`${name} ${c}`, [...(seconds_of.get(`${name} ${c}`) ?? []), s]);
                            const r = pace.get(name) ?? { seconds: 0, tokens: 0 };
                            pace.set(name, { seconds: r.seconds + s, tokens: r.tokens + tokens_of(c) });
                        }
                    }
                    for (const [name, rounds] of done) {
                        if (!live.has(name)) continue; // dropped: its failure is reported
                        const r = pool(a, rounds, load(live.get(name)));
                        Object.assign(r, { fixture, server: name, command: commands[name], loadavg_after: os.loadavg().map((x) => Number(x.toFixed(2))) });
                        writeFileSync(path.join(a.out, 'raw', `${fixture}-${name}-c${c}.json`), JSON.stringify(a.workload === 'chat' ? r : { ...r, prompts: prompts_of(a) }, null, 1) + '\n');
                        const acc = r.draft?.acceptance != null ? `, acceptance ${r.draft.acceptance.toFixed(2)}` : '';
                        const latency = a.workload === 'chat'
                            ? `conversation ${r.conversation_s.mean} s, TTFT turn 1 ${r.ttft_ms.first_turn} ms, later turns ${r.ttft_ms.later_mean} ms, ` +
                              `cached ${r.cached_share ?? '–'} of later prompts`
                            : `TTFT p50 ${r.ttft_ms.p50} ms, ITL p50/p99 ${r.itl_ms.p50}/${r.itl_ms.p99} ms${acc}`;
                        log(`${fixture} / ${name} / C=${c}: ${r.tokens_per_s} tok/s (rounds ${r.rounds.map((x) => x.tokens_per_s).join(', ')}), ` +
                            `${latency}${r.errors ? `, ${r.errors} errors: ${r.first_error}` : ''} (${r.wall_s} s)`);
                        delete r.records;
                        runs.push(r);
                    }
                }
            } finally {
                for (const srv of live.values()) await srv.stop();
                for (const p of plan) if (p.fixture === fixture) p.done = true; // dropped servers' runs too
            }
        }
    } finally {
        if (own_fixture_dir) rmSync(fixture_dir, { recursive: true, force: true });
    }

    mark_identical(runs, a);
    const meta = {
        finished: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        host: `${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'})`,
        elapsed_s: (performance.now() - t_begin) / 1000,
        versions: versions(a),
        commands,
    };
    const summary = { options: a, meta, failures, runs };
    writeFileSync(path.join(a.out, 'summary.json'), JSON.stringify(summary, null, 1) + '\n');
    write_reports(a.out, a, runs, meta, failures);
    log(`done in ${(meta.elapsed_s / 60).toFixed(1)} min: ${a.out}/results.md, summary.json, tokens-per-s.svg, raw/, logs/`);
    const not_identical = runs.filter((r) => r.identical === false); // null: sampled, not compared
    if (not_identical.length > 0) log(`NOT identical: ${not_identical.map((r) => `${r.fixture}/${r.server}/C=${r.concurrency} (${r.identical_why})`).join(', ')}`);
    if (failures.length > 0) { log(`failures: ${failures.join('; ')}`); process.exit(1); }
    process.exit(not_identical.length > 0 ? 3 : 0);
}

main().catch((e) => { log(e.stack ?? String(e)); kill_all(); process.exit(1); });
