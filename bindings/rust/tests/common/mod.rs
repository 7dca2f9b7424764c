//! Generated fixtures (the build's `specdec-fixture`, the constructions the
//! C++ tests use: a target whose greedy next token is t + 1 in a cycle, and
//! drafters that err on every 4th token id), written once into
//! `$SPECDEC_FIXTURE_DIR` (default `BUILD/fixtures/rust/`).
#![allow(dead_code, unused_macros, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::Command;

use specdec::*;

pub fn build_dir() -> PathBuf {
    std::env::var("SPECDEC_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build"))
}

pub fn fixture(name: &str) -> PathBuf {
    let args: &[&str] = match name {
        "llama" => &["llama"],
        "llama-v16" => &["llama", "--n-vocab", "16"],
        // Q1_0: written by llama.cpp's quantizer, not covered by exact kernels.
        "llama-q1_0" => &["llama", "--type", "q1_0"],
        "eagle3" => &["eagle3", "--drafter", "wrong"],
        "eagle3-w128" => &["eagle3", "--drafter", "wrong", "--n-embd", "128"],
        "dflash" => &["dflash", "--drafter", "wrong"],
        "dflash2" => &["dflash2", "--drafter", "wrong"],
        "draft" => &["llama-draft", "--drafter", "wrong"],
        "qwen35-mtp" => &["qwen35-mtp", "--drafter", "wrong"],
        "glm4moe-mtp" => &["glm4moe-mtp", "--drafter", "wrong"],
        // Soft (speculative sampling): after t the target draws t's successors
        // 1, 2, 3 with probabilities 0.5 / 0.25 / 0.25, the MTP head drafts them
        // with 0.7 / 0.05 / 0.25.
        "qwen35-mtp-soft" => &["qwen35-mtp", "--soft-target", "0.5,0.25,0.25", "--soft-drafter", "0.7,0.05,0.25"],
        "glm4moe-mtp-soft" => &["glm4moe-mtp", "--soft-target", "0.5,0.25,0.25", "--soft-drafter", "0.7,0.05,0.25"],
        other => panic!("no fixture {}", other),
    };
    let dir = std::env::var("SPECDEC_FIXTURE_DIR").map(PathBuf::from).unwrap_or_else(|_| build_dir().join("fixtures/rust"));
    let path = dir.join(format!("{}.gguf", name));
    if !path.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let tool = std::env::var("SPECDEC_FIXTURE_TOOL").map(PathBuf::from).unwrap_or_else(|_| build_dir().join("bin/specdec-fixture"));
        // A name per process and thread: tests run in parallel.
        let tmp = dir.join(format!("{}.tmp.{}.{:?}.gguf", name, std::process::id(), std::thread::current().id()));
        let st = Command::new(&tool).arg(args[0]).arg(&tmp).args(&args[1..]).status().unwrap_or_else(|e| panic!("{}: {}", tool.display(), e));
        assert!(st.success(), "specdec-fixture {:?} failed", args);
        std::fs::rename(&tmp, &path).unwrap();
    }
    path
}

/// The controlled targets' greedy continuation after `last` (fixtures.h).
pub fn expected_cycle(last: i32, n: usize, n_vocab: i32) -> Vec<LlamaToken> {
    let active = n_vocab.min(128);
    let mut t = last;
    (0..n)
        .map(|_| {
            t = if t < 3 || t + 1 >= active { 3 } else { t + 1 };
            LlamaToken(t)
        })
        .collect()
}

pub fn toks(v: &[i32]) -> Vec<LlamaToken> {
    v.iter().map(|t| LlamaToken(*t)).collect()
}

/// Each ends one before a multiple of 4, so the first draft errs.
pub fn prompts() -> Vec<Vec<LlamaToken>> {
    vec![toks(&[19, 20, 21, 22, 23]), toks(&[90, 6, 7]), toks(&[50, 51, 59, 60, 61, 62, 63])]
}

/// The 16-token target's cycle with an extra token after each period.
pub fn ngram_prompt(extra: i32, tail: i32) -> Vec<LlamaToken> {
    let mut out = Vec::new();
    for _ in 0..5 {
        out.extend(3..16);
        out.push(extra);
    }
    out.extend((0..tail).map(|i| 3 + i));
    toks(&out)
}

pub fn params(n_ctx: u32, n_seq: u32) -> LlamaContextParams {
    LlamaContextParams::default().with_n_ctx(n_ctx).with_n_seq_max(n_seq).with_n_threads(1)
}

pub fn argmax(logits: &[f32]) -> LlamaToken {
    let mut best = 0;
    for (i, v) in logits.iter().enumerate() {
        if *v > logits[best] {
            best = i;
        }
    }
    LlamaToken(best as i32)
}

/// Plain greedy decoding of `path`'s model: the reference.
pub fn plain(backend: &LlamaBackend, path: &Path, prompts: &[Vec<LlamaToken>], n_predict: i32) -> Vec<Vec<LlamaToken>> {
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()).unwrap();
    let mut ctx = model.new_context(backend, params(512, prompts.len() as u32)).unwrap();
    let refs: Vec<&[LlamaToken]> = prompts.iter().map(|p| p.as_slice()).collect();
    let out = generate_plain(&mut ctx, &refs, &GenerateParams::default().with_n_predict(n_predict), None).unwrap();
    out.sequences.into_iter().map(|s| s.tokens).collect()
}

/// The seeds' loop by hand, greedy, on sequence 0: prefill, begin, then
/// draft -> decode_target_and_process -> compare -> accept -> clear the rejected tail.
/// Returns (tokens, accepted count, n_past, id_last); the tokens may run a
/// few past n_predict (a step emits its accepted drafts and one more).
macro_rules! manual_loop {
    ($session:expr, $prompt:expr, $n_predict:expr) => {{
        let session = &mut $session;
        let prompt: &[LlamaToken] = $prompt;
        let n = prompt.len();
        let mut batch = LlamaBatch::new(512, 1);
        for (i, t) in prompt[..n - 1].iter().enumerate() {
            batch.add(*t, i as i32, &[0], false).unwrap();
        }
        session.decode_target_and_process(&mut batch).unwrap();
        session.begin(0, &prompt[..n - 1]).unwrap();
        common::continue_loop!(session, (n - 1) as i32, prompt[n - 1], $n_predict)
    }};
}

macro_rules! continue_loop {
    ($session:expr, $n_past:expr, $id_last:expr, $n_predict:expr) => {{
        let session = $session;
        let mut n_past: i32 = $n_past;
        let mut id_last: LlamaToken = $id_last;
        let mut out: Vec<LlamaToken> = Vec::new();
        let mut accepted_total = 0usize;
        let mut batch = LlamaBatch::new(session.n_draft_max() as usize + 1, 1);
        while out.len() < $n_predict {
            let proposal = session.draft(0, n_past, id_last).unwrap();
            batch.clear();
            batch.add(id_last, n_past, &[0], true).unwrap();
            for (i, t) in proposal.iter().enumerate() {
                batch.add(*t, n_past + 1 + i as i32, &[0], true).unwrap();
            }
            session.decode_target_and_process(&mut batch).unwrap();
            let mut k = 0;
            while k < proposal.len() && common::argmax(session.target_context().logits_ith(k as i32).unwrap()) == proposal[k] {
                k += 1;
            }
            let next = common::argmax(session.target_context().logits_ith(k as i32).unwrap());
            if !proposal.is_empty() {
                session.accept(0, k as u16).unwrap();
            }
            if k < proposal.len() {
                assert!(session.clear_target_kv_cache_seq(Some(0), Some((n_past + 1 + k as i32) as u32), None).unwrap());
            }
            out.extend_from_slice(&proposal[..k]);
            out.push(next);
            accepted_total += k;
            n_past += 1 + k as i32;
            id_last = next;
        }
        (out, accepted_total, n_past, id_last)
    }};
}

pub(crate) use continue_loop;
pub(crate) use manual_loop;
