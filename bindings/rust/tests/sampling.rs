//! Speculative sampling through the crate (specdec 0.4): `AcceptMode` on
//! generation, `draft_sampled` / `DraftRequest::sampling` and
//! `proposal_probs` on a session, `n_reached_at` in the statistics.
//!
//! On the hard MTP fixtures the target's choice is nearly certain; on the
//! soft ones the target draws t's successors 1, 2, 3 with probabilities
//! 0.5 / 0.25 / 0.25 and the MTP head drafts them with 0.7 / 0.05 / 0.25, so
//! sampled output varies and acceptance has a closed form: sum_t min(p, q) =
//! 0.8 in rejection mode, p(the drafted token) = 0.5 in exact mode (the
//! head's greedy draft is successor 1).

mod common;

use std::ffi::{CStr, CString};

use common::{expected_cycle, fixture, params, toks};
use specdec::*;

const N: i32 = 32;
const HARD: [&str; 2] = ["qwen35-mtp", "glm4moe-mtp"];
const SOFT: [&str; 2] = ["qwen35-mtp-soft", "glm4moe-mtp-soft"];
const SOFT_DRAFTER: [f32; 3] = [0.7, 0.05, 0.25];

fn prompt() -> Vec<LlamaToken> {
    toks(&[19, 20, 21, 22, 23])
}

/// An MTP session over `name` (n_seq sequences, proposals of up to 4), handed to `f`.
fn with_mtp<R>(backend: &LlamaBackend, name: &str, n_seq: u32, n_ctx: u32, f: impl FnOnce(&mut MtpSession<'_, '_>) -> R) -> R {
    let model = LlamaModel::load_from_file(backend, fixture(name), &LlamaModelParams::default().with_load_mtp(true)).unwrap();
    let mut target = model.new_context(backend, params(n_ctx, n_seq).with_n_rs_seq(4)).unwrap();
    let mut draft = target.new_draft_context(None, Strategy::Mtp, n_seq, 4, params(n_ctx, n_seq)).unwrap();
    let mut session = MtpSession::new(&mut target, &mut draft, n_seq, 4).unwrap();
    f(&mut session)
}

/// Plain decoding of `name` with `p`: the reference.
fn plain(backend: &LlamaBackend, name: &str, prompts: &[Vec<LlamaToken>], p: &GenerateParams) -> Vec<Vec<LlamaToken>> {
    let model = LlamaModel::load_from_file(backend, fixture(name), &LlamaModelParams::default()).unwrap();
    let mut ctx = model.new_context(backend, params(512 * prompts.len() as u32, prompts.len() as u32)).unwrap();
    let refs: Vec<&[LlamaToken]> = prompts.iter().map(|q| q.as_slice()).collect();
    generate_plain(&mut ctx, &refs, p, None).unwrap().sequences.into_iter().map(|s| s.tokens).collect()
}

fn generate<S: SpeculativeSession + ?Sized>(session: &mut S, prompt: &[LlamaToken], p: &GenerateParams) -> Completion {
    session.generate(&[prompt], p, None).unwrap().sequences.remove(0)
}

fn successor(t: LlamaToken) -> LlamaToken {
    expected_cycle(t.0, 1, 128)[0]
}

/// Per-position counters hang together: `n_reached_at[0]` is every non-empty
/// proposal, and reaching `i + 1` needs token `i` kept.
fn check_stats_shape(s: &SequenceStats, n_draft_max: usize) {
    assert_eq!((s.n_proposed_at.len(), s.n_accepted_at.len(), s.n_reached_at.len()), (n_draft_max, n_draft_max, n_draft_max));
    assert_eq!(s.n_proposed_at.iter().sum::<u64>(), s.n_drafted);
    assert_eq!(s.n_accepted_at.iter().sum::<u64>(), s.n_accepted);
    assert_eq!(s.n_reached_at[0], s.n_proposed_at[0]);
    for i in 0..n_draft_max {
        assert!(s.n_accepted_at[i] <= s.n_reached_at[i] && s.n_reached_at[i] <= s.n_proposed_at[i], "{:?}", s);
        if i + 1 < n_draft_max {
            assert!(s.n_reached_at[i + 1] <= s.n_accepted_at[i], "{:?}", s);
        }
    }
}

/// A distribution as `specdec_session_proposal_probs` promises it.
fn check_distribution(probs: &[TokenProb], drafted: LlamaToken) {
    assert!(!probs.is_empty(), "no distribution reported");
    let sum: f32 = probs.iter().map(|e| e.p).sum();
    assert!((sum - 1.0).abs() < 1e-4, "sums to {}", sum);
    assert!(probs.iter().all(|e| e.p > 0.0 && e.p <= 1.0));
    assert!(probs.windows(2).all(|w| w[0].p >= w[1].p), "not most likely first");
    assert!(probs.iter().any(|e| e.token == drafted), "the drafted token {:?} is not listed", drafted);
}

#[test]
fn accept_modes_parse_display_and_map_onto_the_c_values() {
    assert_eq!("rejection".parse::<AcceptMode>().unwrap(), AcceptMode::Rejection);
    assert_eq!("Exact".parse::<AcceptMode>().unwrap(), AcceptMode::Exact);
    assert_eq!(AcceptMode::Rejection.to_string(), "rejection");
    assert_eq!(AcceptMode::default(), AcceptMode::Rejection);
    assert_eq!(GenerateParams::default().accept, AcceptMode::Rejection);
    assert_eq!(GenerateParams::default().with_accept(AcceptMode::Exact).accept, AcceptMode::Exact);
    // SAFETY: plain data.
    assert_eq!(unsafe { sys::specdec_generate_default_params() }.accept, AcceptMode::Rejection.raw());
    assert_eq!((AcceptMode::Exact.raw(), AcceptMode::Rejection.raw()), (sys::SPECDEC_ACCEPT_EXACT, sys::SPECDEC_ACCEPT_REJECTION));
    assert_eq!(AcceptMode::from_raw(1).unwrap(), AcceptMode::Rejection);
    for bad in [2, -1, sys::SPECDEC_ACCEPT_MAX_ENUM] {
        let e = AcceptMode::from_raw(bad).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }) && e.message().contains("accept"), "{}", e);
    }
    let e = "greedy".parse::<AcceptMode>().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }) && e.message().contains("greedy"), "{}", e);
    assert_eq!(DraftSampling::default(), DraftSampling::new(1.0, 0));
    let s = DraftSampling::new(0.7, 3).with_top_k(5).with_top_p(0.9).with_min_p(0.1);
    assert_eq!((s.temperature, s.top_k, s.top_p, s.min_p, s.seed), (0.7, 5, 0.9, 0.1, 3));
}

/// The C struct as `sys.rs` lays it out: an `accept` that is no mode is refused
/// by the library, through the crate's typed error; a real one runs.
#[test]
fn the_library_refuses_an_accept_value_that_is_no_mode() {
    let _backend = LlamaBackend::init();
    let path = CString::new(fixture("llama").to_str().unwrap()).unwrap();
    // SAFETY: the model and context are freed below, after their last use;
    // every pointer passed outlives its call.
    unsafe {
        let model = sys::llama_model_load_from_file(path.as_ptr(), sys::llama_model_default_params());
        assert!(!model.is_null());
        let mut cp = sys::llama_context_default_params();
        cp.n_ctx = 256;
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        let ctx = sys::llama_init_from_model(model, cp);
        assert!(!ctx.is_null());
        let prompt: [sys::llama_token; 3] = [19, 20, 21];
        let prompts = [prompt.as_ptr()];
        let sizes = [prompt.len()];
        let mut p = sys::specdec_generate_default_params();
        p.n_predict = 4;
        for (accept, ok) in [(7, false), (-3, false), (sys::SPECDEC_ACCEPT_REJECTION, true), (sys::SPECDEC_ACCEPT_EXACT, true)] {
            p.accept = accept;
            let mut out = std::ptr::null_mut();
            let st = sys::specdec_generate(std::ptr::null_mut(), ctx, prompts.as_ptr(), sizes.as_ptr(), 1, &p, None, std::ptr::null_mut(), &mut out);
            if ok {
                assert_eq!(st, sys::SPECDEC_STATUS_OK, "accept {}", accept);
                let mut n = 0usize;
                let t = sys::specdec_generation_tokens(out, 0, &mut n);
                assert_eq!(toks(std::slice::from_raw_parts(t, n)), expected_cycle(21, 4, 128));
            } else {
                let message = CStr::from_ptr(sys::specdec_last_error()).to_string_lossy().into_owned();
                let e = Error::from_status(st, message);
                assert!(matches!(e, Error::InvalidArgument { .. }) && e.message().contains("accept"), "{}", e);
            }
            sys::specdec_generation_free(out);
        }
        sys::llama_free(ctx);
        sys::llama_model_free(model);
    }
}

#[test]
fn rejection_at_temperature_zero_is_greedy_plain_decoding() {
    let backend = LlamaBackend::init();
    let p = GenerateParams::default().with_n_predict(N).with_accept(AcceptMode::Rejection);
    for name in HARD.iter().chain(SOFT.iter()) {
        let want = plain(&backend, name, &[prompt()], &GenerateParams::default().with_n_predict(N));
        assert_eq!(want[0], expected_cycle(23, N as usize, 128));
        let out = with_mtp(&backend, name, 1, 512, |s| generate(s, &prompt(), &p));
        assert_eq!(out.tokens, want[0], "{}", name);
        assert!(out.stats.n_accepted > 0, "{}", name);
    }
    // A drafter without a distribution (EAGLE-3): its drafts are point masses.
    let target_model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let draft_model = LlamaModel::load_from_file(&backend, fixture("eagle3"), &LlamaModelParams::default()).unwrap();
    let mut target = target_model.new_context(&backend, params(512, 1)).unwrap();
    let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 1, 4, params(512, 1)).unwrap();
    let mut session = Eagle3Session::new(&mut target, &mut draft, 1, 4).unwrap();
    assert_eq!(generate(&mut session, &prompt(), &p).tokens, expected_cycle(23, N as usize, 128));
}

#[test]
fn exact_mode_when_sampling_gives_plain_decodings_draws() {
    let backend = LlamaBackend::init();
    for name in HARD.iter().chain(SOFT.iter()) {
        for seed in [1u32, 42] {
            let p = GenerateParams::default().with_n_predict(N).with_sampling(1.0, seed);
            let want = plain(&backend, name, &[prompt()], &p);
            let got = with_mtp(&backend, name, 1, 512, |s| generate(s, &prompt(), &p.clone().with_accept(AcceptMode::Exact)));
            assert_eq!(got.tokens, want[0], "{} seed {}", name, seed);
            if name.ends_with("soft") {
                assert_ne!(want[0], expected_cycle(23, N as usize, 128), "{}: sampling drew the greedy chain", name);
            }
        }
    }
}

#[test]
fn rejection_sampling_is_deterministic_per_seed() {
    let backend = LlamaBackend::init();
    for name in HARD.iter().chain(SOFT.iter()) {
        let p = GenerateParams::default().with_n_predict(N).with_n_draft(DraftLength::Fixed(3)).with_sampling(1.0, 9).with_accept(AcceptMode::Rejection);
        with_mtp(&backend, name, 1, 512, |s| {
            let first = generate(s, &prompt(), &p);
            let again = generate(s, &prompt(), &p);
            assert_eq!(again.tokens, first.tokens, "{}", name);
            assert_eq!(again.stats, first.stats, "{}", name);
            assert_eq!(first.tokens.len(), N as usize);
            if name.ends_with("soft") {
                let mut other = p.clone();
                other.seed = 10;
                assert_ne!(generate(s, &prompt(), &other).tokens, first.tokens, "{}: another seed", name);
                assert_ne!(generate(s, &prompt(), &p.clone().with_accept(AcceptMode::Exact)).tokens, first.tokens, "{}: exact mode", name);
            }
            // Through the engine: the same request, the same tokens.
            let mut engine = Engine::new(s, EngineParams::default()).unwrap();
            engine.add(&prompt(), &p).unwrap();
            let events = engine.run_until_idle().unwrap();
            let done: Vec<&Completion> = events.iter().filter_map(|e| if let Event::Finished { completion, .. } = e { Some(completion) } else { None }).collect();
            assert_eq!(done.len(), 1);
            assert_eq!(done[0].tokens, first.tokens, "{} engine", name);
        });
    }
}

#[test]
fn n_reached_at_counts_the_proposals_that_reach_each_position() {
    let backend = LlamaBackend::init();
    let greedy = GenerateParams::default().with_n_predict(N);
    let sampled = greedy.clone().with_sampling(1.0, 3);
    for name in HARD.iter().chain(SOFT.iter()) {
        with_mtp(&backend, name, 1, 512, |s| {
            for p in [greedy.clone(), sampled.clone().with_accept(AcceptMode::Rejection), sampled.clone()] {
                let before = s.stats().n_proposals;
                let out = generate(s, &prompt(), &p);
                // The session counts the non-empty proposals on its own.
                assert_eq!(out.stats.n_reached_at[0], s.stats().n_proposals - before, "{} {:?}", name, p);
                assert!(out.stats.n_reached_at[0] > 0);
                check_stats_shape(&out.stats, 4);
            }
        });
    }
    // Plain decoding drafts nothing: no positions.
    let model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let mut ctx = model.new_context(&backend, params(256, 1)).unwrap();
    let out = generate_plain(&mut ctx, &[&prompt()], &greedy, None).unwrap();
    assert!(out.sequences[0].stats.n_reached_at.is_empty());
}

/// `n_accepted_at[i] / n_reached_at[i]` is the acceptance at `i` given the ones
/// before were kept: 0.8 at every position in rejection mode, 0.5 in exact
/// mode (8 sequences x 128 tokens: 0.1 is over 3 standard deviations for
/// every rate checked).
#[test]
fn acceptance_per_position_has_the_closed_form() {
    let backend = LlamaBackend::init();
    let prompts: Vec<Vec<LlamaToken>> = [20, 40, 60, 80, 30, 50, 70, 90].iter().map(|t| toks(&[*t])).collect();
    let refs: Vec<&[LlamaToken]> = prompts.iter().map(|q| q.as_slice()).collect();
    with_mtp(&backend, "glm4moe-mtp-soft", 8, 8 * 160, |s| {
        for (mode, want) in [(AcceptMode::Rejection, 0.8), (AcceptMode::Exact, 0.5)] {
            let p = GenerateParams::default().with_n_predict(128).with_n_draft(DraftLength::Fixed(3)).with_sampling(1.0, 5).with_accept(mode);
            let out = s.generate(&refs, &p, None).unwrap();
            let mut reached = [0u64; 3];
            let mut accepted = [0u64; 3];
            for c in &out.sequences {
                check_stats_shape(&c.stats, 4);
                assert_eq!((c.stats.n_proposed_at[3], c.stats.n_reached_at[3]), (0, 0)); // n_draft 3
                for i in 0..3 {
                    reached[i] += c.stats.n_reached_at[i];
                    accepted[i] += c.stats.n_accepted_at[i];
                }
                let at = c.stats.acceptance_at();
                assert_eq!(at.len(), 4);
                assert_eq!(at[3], 0.0);
            }
            assert!(reached.iter().all(|r| *r > 100), "{} {:?}", mode, reached);
            let mut rates: Vec<f64> = (0..3).map(|i| accepted[i] as f64 / reached[i] as f64).collect();
            rates.push(accepted.iter().sum::<u64>() as f64 / reached.iter().sum::<u64>() as f64);
            // Exact mode keeps fewer, so fewer proposals reach the last positions: position 0 and the pool.
            let checked: Vec<f64> = if mode == AcceptMode::Rejection { rates.clone() } else { vec![rates[0], rates[3]] };
            assert!(checked.iter().all(|r| (r - want).abs() < 0.1), "{}: {:?}", mode, rates);
        }
    });
}

/// (n_past, id_last) of sequence 0 after a short greedy generate: a quiescent
/// point to draft from by hand.
fn after_generate<S: SpeculativeSession + ?Sized>(s: &mut S, prompt: &[LlamaToken]) -> (i32, LlamaToken) {
    let out = generate(s, prompt, &GenerateParams::default().with_n_predict(4));
    ((prompt.len() + out.tokens.len() - 1) as i32, *out.tokens.last().unwrap())
}

#[test]
fn draft_sampling_reports_the_drafters_distribution() {
    let backend = LlamaBackend::init();
    let prompt = toks(&[20]);
    for name in SOFT {
        with_mtp(&backend, name, 1, 512, |s| {
            // Without sampling: the greedy chain, and no distribution.
            let (n_past, id_last) = after_generate(s, &prompt);
            let greedy = s.draft(0, n_past, id_last).unwrap();
            assert_eq!(greedy, expected_cycle(id_last.0, 4, 128));
            assert_eq!(s.proposal(0).unwrap(), greedy);
            for i in 0..4 {
                assert!(s.proposal_probs(0, i).unwrap().is_empty());
            }
            s.accept(0, 0).unwrap();

            let mut drafts = Vec::new();
            for seed in 0..8u64 {
                let (n_past, id_last) = after_generate(s, &prompt);
                let proposal = s.draft_sampled(0, n_past, id_last, DraftSampling::new(1.0, seed)).unwrap();
                assert_eq!(proposal.len(), 4);
                let mut prev = id_last;
                for (i, tok) in proposal.iter().enumerate() {
                    let probs = s.proposal_probs(0, i).unwrap();
                    check_distribution(&probs, *tok);
                    // The soft head's mixture on the successors of the token before.
                    let succ = [successor(prev), successor(successor(prev)), successor(successor(successor(prev)))];
                    let p_of = |t: LlamaToken| probs.iter().find(|e| e.token == t).map_or(0.0, |e| e.p);
                    for k in 0..3 {
                        assert!((p_of(succ[k]) - SOFT_DRAFTER[k]).abs() < 0.01, "{} position {}: {:?}", name, i, &probs[..3]);
                    }
                    let rest: f32 = probs.iter().filter(|e| !succ.contains(&e.token)).map(|e| e.p).sum();
                    assert!(rest < 1e-3);
                    prev = *tok;
                }
                drafts.push(proposal);
                s.accept(0, 0).unwrap();
            }
            // Sampled, not argmax: some draft leaves the greedy chain; and seeded.
            assert!(drafts.iter().any(|d| *d != greedy), "{}: {:?}", name, drafts);
            let (n_past, id_last) = after_generate(s, &prompt);
            assert_eq!(s.draft_sampled(0, n_past, id_last, DraftSampling::new(1.0, 5)).unwrap(), drafts[5]);
            s.accept(0, 0).unwrap();

            // The transforms reach the drafter: top_k keeps two successors,
            // renormalised; temperature 0.5 squares the mixture; top_p 0.6 keeps one.
            let cases: [(DraftSampling, &[f32], bool); 3] = [
                (DraftSampling::new(1.0, 1).with_top_k(2), &[0.7 / 0.95, 0.25 / 0.95], true),
                (DraftSampling::new(0.5, 1), &[0.49 / 0.555, 0.0625 / 0.555, 0.0025 / 0.555], false),
                (DraftSampling::new(1.0, 1).with_top_p(0.6), &[1.0], true),
            ];
            for (sampling, want, exactly) in cases.iter() {
                let (n_past, id_last) = after_generate(s, &prompt);
                let request = DraftRequest::new(0, n_past, id_last).with_n_max(2).with_sampling(*sampling);
                let proposal = s.draft_many(&[request]).unwrap().remove(0);
                assert_eq!(proposal.len(), 2);
                let probs = s.proposal_probs(0, 0).unwrap();
                check_distribution(&probs, proposal[0]);
                for (e, w) in probs.iter().zip(want.iter()) {
                    assert!((e.p - w).abs() < 0.01, "{:?}: {:?}", sampling, &probs[..want.len().min(probs.len())]);
                }
                if *exactly {
                    assert_eq!(probs.len(), want.len(), "{:?}", sampling);
                }
                s.accept(0, 0).unwrap();
            }
            // Below SPECDEC_MIN_SAMPLING_TEMPERATURE: greedy, as with no sampling.
            let (n_past, id_last) = after_generate(s, &prompt);
            assert_eq!(s.draft_sampled(0, n_past, id_last, DraftSampling::new(0.0, 1)).unwrap(), greedy);
            assert!(s.proposal_probs(0, 0).unwrap().is_empty());
            s.accept(0, 0).unwrap();
        });
    }
}

/// Two sequences drafted in one batched call, one sampled and one not: each
/// request's sampling reaches its own sequence.
#[test]
fn draft_many_samples_per_request() {
    let backend = LlamaBackend::init();
    for name in ["glm4moe-mtp-soft", "qwen35-mtp"] {
        with_mtp(&backend, name, 2, 1024, |s| {
            let prompts = [toks(&[20]), toks(&[60])];
            let refs: Vec<&[LlamaToken]> = prompts.iter().map(|q| q.as_slice()).collect();
            let out = s.generate(&refs, &GenerateParams::default().with_n_predict(4), None).unwrap();
            let requests: Vec<DraftRequest> = (0..2)
                .map(|i| {
                    let tokens = &out.sequences[i].tokens;
                    let r = DraftRequest::new(i as i32, (prompts[i].len() + tokens.len() - 1) as i32, *tokens.last().unwrap());
                    if i == 0 { r.with_sampling(DraftSampling::new(1.0, 11)) } else { r }
                })
                .collect();
            let proposals = s.draft_many(&requests).unwrap();
            assert!(proposals.iter().all(|p| p.len() == 4), "{:?}", proposals);
            for (i, tok) in proposals[0].iter().enumerate() {
                check_distribution(&s.proposal_probs(0, i).unwrap(), *tok);
            }
            for i in 0..4 {
                assert!(s.proposal_probs(1, i).unwrap().is_empty());
            }
            s.accept(0, 0).unwrap();
            s.accept(1, 0).unwrap();
        });
    }
}

#[test]
fn draft_sampling_on_the_hard_mtp_fixtures_and_strategies_without_a_distribution() {
    let backend = LlamaBackend::init();
    for name in HARD {
        with_mtp(&backend, name, 1, 512, |s| {
            let (n_past, id_last) = after_generate(s, &prompt());
            let proposal = s.draft_sampled(0, n_past, id_last, DraftSampling::new(1.0, 7).with_top_k(8)).unwrap();
            assert!(!proposal.is_empty());
            for (i, tok) in proposal.iter().enumerate() {
                check_distribution(&s.proposal_probs(0, i).unwrap(), *tok);
            }
            s.accept(0, 0).unwrap();
        });
    }
    // EAGLE-3 has no distribution: sampling drafts as without it and reports none.
    let target_model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let draft_model = LlamaModel::load_from_file(&backend, fixture("eagle3"), &LlamaModelParams::default()).unwrap();
    let mut target = target_model.new_context(&backend, params(512, 1)).unwrap();
    let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 1, 4, params(512, 1)).unwrap();
    let mut s = Eagle3Session::new(&mut target, &mut draft, 1, 4).unwrap();
    let (n_past, id_last) = after_generate(&mut s, &prompt());
    let greedy = s.draft(0, n_past, id_last).unwrap();
    s.accept(0, 0).unwrap();
    let (n_past, id_last) = after_generate(&mut s, &prompt());
    let sampled = s.draft_sampled(0, n_past, id_last, DraftSampling::new(1.0, 3)).unwrap();
    assert_eq!(sampled, greedy);
    assert!((0..sampled.len()).all(|i| s.proposal_probs(0, i).unwrap().is_empty()));
    s.accept(0, 0).unwrap();
}

#[test]
fn bad_draft_sampling_and_indices_are_typed_errors() {
    let backend = LlamaBackend::init();
    with_mtp(&backend, "glm4moe-mtp-soft", 1, 512, |s| {
        // A rejection-mode request with a transform out of range is refused.
        let bad = GenerateParams::default().with_n_predict(4).with_sampling(1.0, 1).with_accept(AcceptMode::Rejection);
        let mut bad_top_p = bad.clone();
        bad_top_p.top_p = 0.0;
        assert!(matches!(s.generate(&[&prompt()], &bad_top_p, None).unwrap_err().error, Error::InvalidArgument { .. }));

        let (n_past, id_last) = after_generate(s, &prompt());
        for sampling in [DraftSampling::new(1.0, 0).with_top_p(0.0), DraftSampling::new(1.0, 0).with_min_p(1.0), DraftSampling::new(f32::NAN, 0)] {
            let e = s.draft_sampled(0, n_past, id_last, sampling).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { .. }), "{:?}: {}", sampling, e);
            assert!(s.is_quiescent(), "a refused draft leaves no proposal");
        }
        let proposal = s.draft_sampled(0, n_past, id_last, DraftSampling::new(1.0, 1)).unwrap();
        assert!(matches!(s.proposal_probs(0, proposal.len()).unwrap_err(), Error::InvalidArgument { .. }));
        assert!(matches!(s.proposal_probs(0, usize::MAX).unwrap_err(), Error::InvalidArgument { .. }));
        assert!(matches!(s.proposal_probs(3, 0).unwrap_err(), Error::BadSeqId { seq_id: 3, n_seq: 1, .. }));
        s.accept(0, 0).unwrap();
        // No proposal: index 0 is past its end.
        assert!(matches!(s.proposal_probs(0, 0).unwrap_err(), Error::InvalidArgument { .. }));
    });
}
