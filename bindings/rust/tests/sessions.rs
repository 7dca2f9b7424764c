//! The seeds' session API on generated fixtures: greedy identity with plain
//! decoding for every strategy the fixtures have (through the seeds' loop by
//! hand and through `generate`), each seed error variant's trigger, and
//! speculative state save/restore.

mod common;

use common::{argmax, expected_cycle, fixture, manual_loop, params, plain, prompts, toks};
use specdec::*;

const N: usize = 32;

fn load(backend: &LlamaBackend, name: &str, mtp: bool) -> LlamaModel {
    LlamaModel::load_from_file(backend, fixture(name), &LlamaModelParams::default().with_load_mtp(mtp)).unwrap()
}

#[test]
fn mtp_sessions_equal_plain_decoding() {
    let backend = LlamaBackend::init();
    for name in ["qwen35-mtp", "glm4moe-mtp"] {
        let model = load(&backend, name, true);
        let want = plain(&backend, &fixture(name), &prompts()[..1], N as i32);
        assert_eq!(want[0], expected_cycle(23, N, 128));
        // A recurrent (hybrid) target rolls rejected drafts back through n_rs_seq snapshots.
        let mut target = model.new_context(&backend, params(512, 1).with_n_rs_seq(4)).unwrap();
        let mut draft = target.new_draft_context(None, Strategy::Mtp, 1, 4, params(512, 1)).unwrap();
        let config = MtpSessionConfig::new(1, 4).with_n_min(0).with_p_min(0.0);
        let mut session = MtpSession::new_with_config(&mut target, &mut draft, config).unwrap();
        assert!(session.reads_target_features() && session.draft_is_mtp());
        assert_eq!(session.n_nextn_heads(), 1);
        session.set_nextn_head(0).unwrap();
        let (tokens, accepted, _, _) = manual_loop!(session, &prompts()[0], N);
        assert_eq!(tokens[..N], want[0][..], "{} by hand", name);
        assert!(accepted > 0);
        assert!(session.is_quiescent());
        let stats = session.stats();
        assert!(stats.n_drafted > stats.n_accepted && stats.n_accepted == accepted as u64);
        assert_eq!(stats.n_accepted_at.len(), 4);
        // The whole loop in the library.
        let out = session.generate(&[&prompts()[0]], &GenerateParams::default().with_n_predict(N as i32), None).unwrap();
        assert_eq!(out.sequences[0].tokens, want[0], "{} generate", name);
    }
}

/// Counts of plain decoding's output move its tokens into a 16-token draft
/// vocabulary that held none of them: the next generation keeps drafts where
/// the first kept none, with the same tokens; the same counts again copy
/// nothing; counts of another size are refused.
#[test]
fn counts_rerank_the_draft_vocabulary() {
    let backend = LlamaBackend::init();
    let model = load(&backend, "glm4moe-mtp", true);
    let want = plain(&backend, &fixture("glm4moe-mtp"), &prompts()[..1], N as i32);
    let mut target = model.new_context(&backend, params(512, 1)).unwrap();
    let mut draft = target.new_draft_context(None, Strategy::Mtp, 1, 4, params(512, 1)).unwrap();
    let config = MtpSessionConfig::new(1, 4).with_draft_vocab(16);
    let mut session = MtpSession::new_with_config(&mut target, &mut draft, config).unwrap();
    let gp = GenerateParams::default().with_n_predict(N as i32);
    let before = session.generate(&[&prompts()[0]], &gp, None).unwrap();
    let mut counts = vec![0u64; 128];
    for &t in &want[0] {
        counts[t.0 as usize] += 1;
    }
    assert_eq!(session.rank_draft_vocab(&counts).unwrap(), 16);
    assert_eq!(session.rank_draft_vocab(&counts).unwrap(), 0);
    let after = session.generate(&[&prompts()[0]], &gp, None).unwrap();
    assert_eq!(before.sequences[0].tokens, want[0]);
    assert_eq!(after.sequences[0].tokens, want[0]);
    assert_eq!(before.sequences[0].stats.n_accepted, 0);
    assert!(after.sequences[0].stats.n_accepted > 0);
    assert!(matches!(session.rank_draft_vocab(&counts[1..]), Err(Error::InvalidArgument { .. })));
}

#[test]
fn draft_model_sessions_equal_plain_decoding() {
    let backend = LlamaBackend::init();
    let target_model = load(&backend, "llama", false);
    let want = plain(&backend, &fixture("llama"), &prompts(), N as i32);
    for (name, strategy) in [("eagle3", Strategy::Eagle3), ("dflash", Strategy::DFlash), ("dflash2", Strategy::DFlash), ("draft", Strategy::Draft)] {
        let draft_model = load(&backend, name, false);
        let mut target = target_model.new_context(&backend, params(512, 3)).unwrap();
        let mut draft = target.new_draft_context(Some(&draft_model), strategy, 3, 4, params(512, 3)).unwrap();
        let config = Eagle3SessionConfig::new(3, 4);
        let mut session = match strategy {
            Strategy::Eagle3 => Eagle3Session::new_with_config(&mut target, &mut draft, config).unwrap(),
            Strategy::DFlash => DFlashSession::new_dflash_with_config(&mut target, &mut draft, config).unwrap(),
            s => Eagle3Session::new_with_strategy(&mut target, &mut draft, s, config).unwrap(),
        };
        assert_eq!(session.strategy(), strategy);
        let (tokens, accepted, _, _) = manual_loop!(session, &prompts()[0], N);
        assert_eq!(tokens[..N], want[0][..], "{} by hand", name);
        assert!(accepted > 0, "{}", name);
        // Three sequences verified together, streamed.
        let mut pieces: Vec<Vec<u8>> = vec![Vec::new(); 3];
        let mut on_piece = |seq: i32, _t: LlamaToken, piece: &[u8]| {
            pieces[seq as usize].extend_from_slice(piece);
            true
        };
        let all = prompts();
        let refs: Vec<&[LlamaToken]> = all.iter().map(|p| p.as_slice()).collect();
        let out = session.generate(&refs, &GenerateParams::default().with_n_predict(N as i32), Some(&mut on_piece)).unwrap();
        for i in 0..3 {
            assert_eq!(out.sequences[i].tokens, want[i], "{} sequence {}", name, i);
            assert_eq!(out.sequences[i].stop, StopReason::Budget);
            assert_eq!(pieces[i], out.sequences[i].text);
        }
        assert!(out.sequences.iter().map(|s| s.stats.n_drafted).sum::<u64>() > out.sequences.iter().map(|s| s.stats.n_accepted).sum::<u64>());
    }
}

#[test]
fn ngram_sessions_equal_plain_decoding() {
    let backend = LlamaBackend::init();
    let model = load(&backend, "llama-v16", false);
    let prompt = common::ngram_prompt(9, 5);
    let want = plain(&backend, &fixture("llama-v16"), &[prompt.clone()], N as i32);
    assert_eq!(want[0], expected_cycle(prompt[prompt.len() - 1].0, N, 16));
    for strategy in [Strategy::NgramSimple, Strategy::NgramMapK, Strategy::NgramMapK4v, Strategy::NgramMod, Strategy::NgramCache] {
        let mut target = model.new_context(&backend, params(512, 1)).unwrap();
        let mut session = NgramSession::new(&mut target, strategy, SessionConfig::new(1, 4)).unwrap();
        let out = session.generate(&[&prompt], &GenerateParams::default().with_n_predict(N as i32), None).unwrap();
        assert_eq!(out.sequences[0].tokens, want[0], "{}", strategy);
        assert!(out.sequences[0].stats.n_accepted > 0, "{}", strategy);
    }
}

#[test]
fn sampling_and_log_probabilities_equal_plain_decoding() {
    let backend = LlamaBackend::init();
    let target_model = load(&backend, "llama", false);
    let draft_model = load(&backend, "eagle3", false);
    let p = GenerateParams::default().with_n_predict(16).with_sampling(0.8, 7).with_top_logprobs(2);
    let mut reference = target_model.new_context(&backend, params(512, 1)).unwrap();
    let want = generate_plain(&mut reference, &[&prompts()[0]], &p, None).unwrap();
    let mut target = target_model.new_context(&backend, params(512, 1)).unwrap();
    let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 1, 4, params(512, 1)).unwrap();
    let mut session = Eagle3Session::new(&mut target, &mut draft, 1, 4).unwrap();
    let got = session.generate(&[&prompts()[0]], &p, None).unwrap();
    assert_eq!(got.sequences[0].tokens, want.sequences[0].tokens);
    assert_eq!(got.sequences[0].logprobs, want.sequences[0].logprobs);
    let top = got.sequences[0].top_logprobs.as_ref().unwrap();
    assert_eq!(top.len(), 16);
    assert!(top.iter().all(|pos| pos.len() == 2));
}

/// Every seed error variant, triggered the way the seeds' callers would meet it.
/// Seed variant -> specdec status -> this crate's variant (docs/rust-seeds.md has the table).
#[test]
fn every_seed_error_variant_has_its_trigger() {
    let backend = LlamaBackend::init();
    let target_model = load(&backend, "llama", false);
    let draft_model = load(&backend, "eagle3", false);
    let mut target = target_model.new_context(&backend, params(512, 1)).unwrap();
    let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 1, 4, params(512, 1)).unwrap();

    // InvalidConfig: n_draft_max 0, checked before the contexts.
    let e = Eagle3Session::new(&mut target, &mut draft, 1, 0).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{}", e);
    assert!(e.message().contains("n_draft_max"));
    assert_eq!(e.kind(), Some(StatusKind::Configuration));
    let e = Eagle3Session::new_with_config(&mut target, &mut draft, Eagle3SessionConfig::new(1, 4).with_p_min(2.0)).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }));

    // Init / IncompatibleContexts: an MTP session over a default draft context, more sequences than the contexts hold.
    {
        let mut t2 = target_model.new_context(&backend, params(256, 1)).unwrap();
        let mut d2 = target_model.new_context(&backend, params(256, 1)).unwrap();
        let e = MtpSession::new(&mut t2, &mut d2, 1, 3).unwrap_err();
        assert_eq!(e.kind(), Some(StatusKind::Compatibility), "{}", e);
        let e = Eagle3Session::new(&mut target, &mut draft, 4, 3).unwrap_err();
        assert!(matches!(e, Error::SeqCapacity { .. }), "{}", e);
        // A draft made for another width: refused from the files alone, and before llama.cpp could abort.
        let e = check_pair(fixture("llama"), Some(&fixture("eagle3-w128")), Strategy::Eagle3).unwrap_err();
        assert!(matches!(e, Error::WidthMismatch { .. }), "{}", e);
        // Exact kernels: covered weight types pass; Q1_0 is named as not covered.
        check_exact(fixture("qwen35-mtp")).unwrap();
        let e = check_exact(fixture("llama-q1_0")).unwrap_err();
        assert!(matches!(e, Error::Unavailable { .. }) && e.to_string().contains("q1_0 weights are not covered"), "{}", e);
        let narrow = load(&backend, "eagle3-w128", false);
        let e = t2.new_draft_context(Some(&narrow), Strategy::Eagle3, 1, 3, params(256, 1)).unwrap_err();
        assert!(matches!(e, Error::WidthMismatch { .. }), "{}", e);
        // Batch capacity: verification batches of n_draft_max + 1 rows.
        let mut small = target_model.new_context(&backend, params(256, 1).with_n_batch(2)).unwrap();
        let mut d3 = small.new_draft_context(Some(&draft_model), Strategy::Eagle3, 1, 1, params(256, 1)).unwrap();
        let e = Eagle3Session::new(&mut small, &mut d3, 1, 4).unwrap_err();
        assert!(matches!(e, Error::BatchCapacity { .. }), "{}", e);
        // Recurrent slots: a hybrid target without rollback snapshots for the drafts.
        let hybrid = load(&backend, "qwen35-mtp", true);
        let mut ht = hybrid.new_context(&backend, params(256, 1)).unwrap();
        let mut hd = ht.new_draft_context(None, Strategy::Mtp, 1, 4, params(256, 1)).unwrap();
        let e = MtpSession::new(&mut ht, &mut hd, 1, 4).unwrap_err();
        assert!(matches!(e, Error::RecurrentSlots { .. }), "{}", e);
        // An MTP context over a model without NextN heads.
        assert!(matches!(t2.new_draft_context(None, Strategy::Mtp, 1, 3, params(256, 1)).unwrap_err(), Error::ModelUnsupported { .. }));
        assert!(matches!(target_model.new_context(&backend, params(256, 1).with_ctx_type(LlamaContextType::Mtp)).unwrap_err(), Error::ModelUnsupported { .. }));
    }

    // Decode: the target refuses a batch (a token outside the vocabulary).
    {
        let mut t3 = target_model.new_context(&backend, params(256, 1)).unwrap();
        let mut bad = LlamaBatch::new(1, 1);
        bad.add(LlamaToken(100_000), 0, &[0], true).unwrap();
        assert!(matches!(t3.decode(&mut bad).unwrap_err(), Error::Decode { .. }));
    }

    let mut session = Eagle3Session::new(&mut target, &mut draft, 1, 4).unwrap();
    // BadSeqId (Begin): fields from the call.
    match session.begin(5, &toks(&[1, 2])).unwrap_err() {
        Error::BadSeqId { seq_id: 5, n_seq: 1, message } => assert!(message.contains('5')),
        e => panic!("{}", e),
    }
    // PromptTooLong (Begin): more history than SPECDEC_MAX_PROMPT_TOKENS.
    let long = vec![LlamaToken(5); MAX_SPECULATIVE_PROMPT_TOKENS + 1];
    match session.begin(0, &long).unwrap_err() {
        Error::PromptTooLong { size, maximum, .. } => assert_eq!((size, maximum), (MAX_SPECULATIVE_PROMPT_TOKENS + 1, MAX_SPECULATIVE_PROMPT_TOKENS)),
        e => panic!("{}", e),
    }
    drop(long);
    // NoPendingProposal (Accept).
    assert!(matches!(session.accept(0, 1).unwrap_err(), Error::NoPendingProposal { seq_id: 0, .. }));
    // Process: a batch the target did not decode (the drafter reads its hidden states).
    let mut batch = LlamaBatch::new(8, 1);
    for (i, t) in [19, 20, 21, 22].iter().enumerate() {
        batch.add(LlamaToken(*t), i as i32, &[0], false).unwrap();
    }
    assert!(matches!(session.process(&batch).unwrap_err(), Error::InvalidArgument { .. }));
    session.decode_target_and_process(&mut batch).unwrap();
    session.begin(0, &toks(&[19, 20, 21, 22])).unwrap();
    // Draft: n_past disagrees with the history.
    assert!(matches!(session.draft(0, 9, LlamaToken(23)).unwrap_err(), Error::PositionMismatch { .. }));
    let proposal = session.draft(0, 4, LlamaToken(23)).unwrap();
    assert!(!proposal.is_empty());
    // ProposalPending: a second draft, begin and state capture while one is pending.
    assert!(matches!(session.draft(0, 4, LlamaToken(23)).unwrap_err(), Error::ProposalPending { seq_id: 0, .. }));
    assert!(matches!(session.begin(0, &[]).unwrap_err(), Error::ProposalPending { .. }));
    assert!(matches!(session.speculative_state(0).unwrap_err(), Error::ProposalPending { .. }));
    assert!(!session.is_quiescent());
    // AcceptedTooMany: fields from the call and the proposal.
    match session.accept(0, proposal.len() as u16 + 1).unwrap_err() {
        Error::AcceptedTooMany { accepted, proposed, .. } => assert_eq!((accepted as usize, proposed), (proposal.len() + 1, proposal.len())),
        e => panic!("{}", e),
    }
    session.accept(0, 0).unwrap();
    assert!(session.is_quiescent());

    // State (SpeculativeStateError): every rejection of a blob, the session unchanged.
    let blob = session.speculative_state(0).unwrap();
    let edit = |at: usize, v: u8| {
        let mut b = blob.clone();
        b[at] = v;
        b
    };
    let cases: Vec<(Vec<u8>, fn(&Error) -> bool)> = vec![
        (b"not a state".to_vec(), |e| matches!(e, Error::StateMalformed { .. })),
        (edit(8, 99), |e| matches!(e, Error::StateVersion { .. })),
        (edit(12, Strategy::DFlash as u8), |e| matches!(e, Error::StateStrategy { .. })),
        (edit(20, 3), |e| matches!(e, Error::StateConfig { .. })),
        (edit(32, 1), |e| matches!(e, Error::StateSequence { .. })),
        (vec![0u8; sys::SPECDEC_MAX_STATE_BYTES + 1], |e| matches!(e, Error::StateTooLarge { .. })),
    ];
    for (bytes, is) in cases {
        let e = session.restore_speculative_state(0, &bytes).unwrap_err();
        assert!(is(&e), "{}", e);
        assert_eq!(e.kind(), Some(StatusKind::State));
    }
    assert_eq!(session.speculative_state(0).unwrap(), blob);
    session.restore_speculative_state(0, &blob).unwrap();
}

#[test]
fn error_variants_map_one_to_one_onto_statuses() {
    let statuses: Vec<i32> = (0..1000).filter(|s| unsafe { std::ffi::CStr::from_ptr(sys::specdec_status_name(*s)) }.to_bytes() != b"UNKNOWN").collect();
    assert_eq!(statuses.len(), 34); // OK and 33 failures
    let mut seen = std::collections::HashSet::new();
    for s in statuses.into_iter().filter(|s| *s != sys::SPECDEC_STATUS_OK) {
        let e = Error::from_status(s, "m");
        assert!(!matches!(e, Error::Unknown { .. }), "status {} has no variant", s);
        assert_eq!(e.status(), s);
        assert_eq!(e.message(), "m");
        assert!(seen.insert(std::mem::discriminant(&e)), "status {} shares a variant", s);
        assert!(e.to_string().starts_with(e.status_name()));
        assert!(e.kind().is_some());
    }
    assert!(matches!(Error::from_status(299, "newer"), Error::Unknown { status: 299, .. }));
}

/// Save at a quiescent point, generate on, restore target, draft and session
/// state, generate again: the same continuation.
#[test]
fn speculative_state_save_and_restore() {
    let backend = LlamaBackend::init();
    let llama = load(&backend, "llama", false);
    let eagle = load(&backend, "eagle3", false);
    let draft_lm = load(&backend, "draft", false);
    let glm = load(&backend, "glm4moe-mtp", true);
    let cases: Vec<(&LlamaModel, Option<&LlamaModel>, Strategy)> =
        vec![(&llama, Some(&eagle), Strategy::Eagle3), (&llama, Some(&draft_lm), Strategy::Draft), (&glm, None, Strategy::Mtp)];
    for (target_model, draft_model, strategy) in cases {
        let mut target = target_model.new_context(&backend, params(512, 1)).unwrap();
        let mut draft = target.new_draft_context(draft_model, strategy, 1, 4, params(512, 1)).unwrap();
        let config = SessionConfig::new(1, 4);
        macro_rules! check {
            ($session:expr) => {{
                let session = &mut $session;
                let (first, _, n_past, id_last) = manual_loop!(*session, &prompts()[0], 12);
                let target_state = session.context_state(ContextRole::Target, 0, 0).unwrap();
                let size = session.draft_state_seq_get_size_ext(0, 0);
                let mut draft_state = vec![0u8; size];
                assert_eq!(session.draft_state_seq_get_data_ext(&mut draft_state, 0, 0), size);
                let state = session.speculative_state(0).unwrap();
                let (after, _, _, _) = common::continue_loop!(&mut *session, n_past, id_last, 20);
                // Restore: clear both contexts, then contexts before the session.
                assert!(session.clear_target_kv_cache_seq(Some(0), None, None).unwrap());
                assert!(session.clear_draft_kv_cache_seq(None, None, None).unwrap());
                session.restore_context_state(ContextRole::Target, 0, 0, &target_state).unwrap();
                assert_eq!(session.draft_state_seq_set_data_ext(&draft_state, 0, 0), size);
                session.restore_speculative_state(0, &state).unwrap();
                let (again, _, _, _) = common::continue_loop!(&mut *session, n_past, id_last, 20);
                assert_eq!(again, after, "{}", strategy);
                let mut all = first.clone();
                all.extend_from_slice(&after);
                assert_eq!(all[..32], expected_cycle(23, 32, 128)[..], "{}", strategy);
            }};
        }
        match strategy {
            Strategy::Mtp => check!(MtpSession::new_with_config(&mut target, &mut draft, config).unwrap()),
            s => check!(Eagle3Session::new_with_strategy(&mut target, &mut draft, s, config).unwrap()),
        }
    }
}

#[test]
fn inspect_and_detect() {
    let info = inspect(fixture("dflash2")).unwrap();
    assert_eq!(info.architecture, "dflash");
    assert!(info.dflash2 && info.block_size > 0);
    assert_eq!(info.strategies, vec![Strategy::DFlash]);
    assert_eq!(detect_strategy(fixture("llama"), Some(&fixture("eagle3"))).unwrap(), Strategy::Eagle3);
    assert_eq!(detect_strategy(fixture("qwen35-mtp"), None).unwrap(), Strategy::Mtp);
    assert!(matches!(inspect("/nonexistent.gguf").unwrap_err(), Error::Io { .. }));
    assert!(matches!(inspect_buffer(&[0u8; 64]).unwrap_err(), Error::MalformedFile { .. }));
    assert_eq!(Strategy::from_name("ngram-map-k4v").unwrap(), Strategy::NgramMapK4v);
    assert!(matches!(Strategy::from_name("nope").unwrap_err(), Error::InvalidArgument { .. }));
    assert_eq!(argmax(&[0.0, 2.0, 1.0]), LlamaToken(1));
}
