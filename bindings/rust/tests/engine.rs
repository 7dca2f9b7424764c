//! The higher layer: the engine (requests that come and go, cancellation
//! from another thread while a step runs, pausing, prompt reuse) against plain decoding.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{expected_cycle, fixture, params, plain, prompts, toks};
use specdec::*;

fn finished(events: &[Event]) -> Vec<(u64, Completion, usize)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Finished { id, completion, n_prompt_cached, .. } => Some((*id, completion.clone(), *n_prompt_cached)),
            _ => None,
        })
        .collect()
}

#[test]
fn engine_requests_equal_plain_decoding() {
    let backend = LlamaBackend::init();
    let target_model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let draft_model = LlamaModel::load_from_file(&backend, fixture("eagle3"), &LlamaModelParams::default()).unwrap();
    let want = plain(&backend, &fixture("llama"), &prompts(), 24);
    let mut target = target_model.new_context(&backend, params(1024, 2)).unwrap();
    let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 2, 4, params(1024, 2)).unwrap();
    let mut session = Eagle3Session::new(&mut target, &mut draft, 2, 4).unwrap();
    let mut engine = Engine::new(&mut session, EngineParams::default()).unwrap();
    let p = GenerateParams::default().with_n_predict(24);
    let ids: Vec<u64> = prompts().iter().map(|q| engine.add(q, &p).unwrap()).collect(); // 3 requests, 2 slots
    let events = engine.run_until_idle().unwrap();
    assert!(!engine.has_work());
    let done = finished(&events);
    assert_eq!(done.len(), 3);
    for (i, id) in ids.iter().enumerate() {
        let (_, c, _) = done.iter().find(|(d, _, _)| d == id).unwrap();
        assert_eq!(c.tokens, want[i]);
        let pieces: Vec<u8> = events
            .iter()
            .filter_map(|e| match e {
                Event::Token { id: t, piece, .. } if t == id => Some(piece.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(pieces, c.text);
    }
    // Unknown ids and a full queue are their variants.
    assert!(matches!(engine.cancel(999).unwrap_err(), Error::UnknownRequest { .. }));
    // A paused request holds its slot and emits nothing until it goes on; its tokens stay plain decoding's.
    let id = engine.add(&prompts()[0], &p).unwrap();
    let mut events = engine.step().unwrap();
    engine.pause(id, true).unwrap();
    events.extend(engine.run_until_idle().unwrap());
    assert!(!engine.has_work());
    assert!(finished(&events).is_empty());
    engine.pause(id, false).unwrap();
    events.extend(engine.run_until_idle().unwrap());
    assert_eq!(finished(&events)[0].1.tokens, want[0]);
    assert!(matches!(engine.pause(999, true).unwrap_err(), Error::UnknownRequest { .. }));
    drop(engine);
    let mut engine = Engine::new(&mut session, EngineParams { max_waiting: 1, n_seq: 1, ..EngineParams::default() }).unwrap();
    engine.add(&toks(&[20]), &p).unwrap();
    engine.add(&toks(&[20]), &p).unwrap();
    assert!(matches!(engine.add(&toks(&[20]), &p).unwrap_err(), Error::QueueFull { .. }));
    engine.run_until_idle().unwrap();
    // A second request continuing the first reuses its positions.
    let first = toks(&(10..40).collect::<Vec<_>>());
    engine.add(&first, &p.clone().with_n_predict(8)).unwrap();
    let (_, a, cached_a) = finished(&engine.run_until_idle().unwrap()).remove(0);
    let mut second = first.clone();
    second.extend_from_slice(&a.tokens);
    second.extend_from_slice(&toks(&[90, 91]));
    engine.add(&second, &p.clone().with_n_predict(8)).unwrap();
    let (_, b, cached_b) = finished(&engine.run_until_idle().unwrap()).remove(0);
    assert_eq!(cached_a, 0);
    assert!(cached_b >= first.len(), "{} cached", cached_b);
    assert_eq!(b.tokens, expected_cycle(91, 8, 128));
    drop(engine);
    // The prompt cache: a stranger takes the only slot; the second turn has
    // the first's state loaded back from host memory.
    let cache = EngineParams { n_seq: 1, prompt_cache_bytes: 1 << 30, ..EngineParams::default() };
    let mut engine = Engine::new(&mut session, cache).unwrap();
    engine.add(&first, &p.clone().with_n_predict(8)).unwrap();
    engine.run_until_idle().unwrap();
    engine.add(&toks(&(60..80).collect::<Vec<_>>()), &p.clone().with_n_predict(4)).unwrap();
    engine.run_until_idle().unwrap();
    engine.add(&second, &p.clone().with_n_predict(8)).unwrap();
    let (_, c, cached_c) = finished(&engine.run_until_idle().unwrap()).remove(0);
    // Its prompt and answer less the answer's last token (never decoded),
    // less the row llama.cpp's EAGLE-3 drafter defers to the next token.
    assert_eq!(cached_c, first.len() + 8 - 2);
    assert_eq!(c.tokens, expected_cycle(91, 8, 128));
}

#[test]
fn cancel_from_another_thread_while_a_step_runs() {
    let backend = LlamaBackend::init();
    let target_model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let draft_model = LlamaModel::load_from_file(&backend, fixture("eagle3"), &LlamaModelParams::default()).unwrap();
    let mut target = target_model.new_context(&backend, params(4096, 1)).unwrap();
    let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 1, 4, params(4096, 1)).unwrap();
    let mut session = Eagle3Session::new(&mut target, &mut draft, 1, 4).unwrap();
    // The whole 3,000-token prompt in one step: the other thread cancels while it runs.
    let mut engine = Engine::new(&mut session, EngineParams { n_prefill_chunk: 0, ..EngineParams::default() }).unwrap();
    let prompt: Vec<LlamaToken> = (0..3000).map(|i| LlamaToken(3 + i % 120)).collect();
    let id = engine.add(&prompt, &GenerateParams::default().with_n_predict(500)).unwrap();
    let canceller = engine.canceller();
    let (tx, rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<bool>();
    let worker = std::thread::spawn(move || {
        rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(10));
        done_tx.send(canceller.cancel(id).unwrap()).unwrap();
    });
    tx.send(()).unwrap();
    let mut events = engine.step().unwrap(); // the prompt's step
    let cancelled_during_step = done_rx.try_recv().is_ok();
    worker.join().unwrap();
    events.extend(engine.run_until_idle().unwrap());
    let (_, c, _) = finished(&events).remove(0);
    assert_eq!(c.stop, StopReason::Cancelled);
    assert!(c.tokens.len() < 500);
    assert!(cancelled_during_step, "the cancel did not land while the step ran");
    // A canceller outliving its engine does nothing.
    let late = engine.canceller();
    drop(engine);
    assert!(!late.cancel(id).unwrap());
}

#[test]
fn plain_engine_and_mtp_engine() {
    let backend = LlamaBackend::init();
    let model = LlamaModel::load_from_file(&backend, fixture("qwen35-mtp"), &LlamaModelParams::default().with_load_mtp(true)).unwrap();
    let want = plain(&backend, &fixture("qwen35-mtp"), &prompts()[..2], 16);
    {
        let mut ctx = model.new_context(&backend, params(512, 2)).unwrap();
        let mut engine = Engine::plain(&mut ctx, EngineParams::default()).unwrap();
        let p = GenerateParams::default().with_n_predict(16);
        let a = engine.add(&prompts()[0], &p).unwrap();
        let done = finished(&engine.run_until_idle().unwrap());
        assert_eq!(done[0].0, a);
        assert_eq!(done[0].1.tokens, want[0]);
        assert_eq!(done[0].1.stats.n_drafted, 0);
    }
    let mut target = model.new_context(&backend, params(512, 2).with_n_rs_seq(3)).unwrap();
    let mut draft = target.new_draft_context(None, Strategy::Mtp, 2, 3, params(512, 2)).unwrap();
    let mut session = MtpSession::new(&mut target, &mut draft, 2, 3).unwrap();
    let mut engine = Engine::new(&mut session, EngineParams::default()).unwrap();
    let p = GenerateParams::default().with_n_predict(16).with_top_logprobs(1);
    for q in &prompts()[..2] {
        engine.add(q, &p).unwrap();
    }
    let events = engine.run_until_idle().unwrap();
    let mut done = finished(&events);
    done.sort_by_key(|d| d.0);
    assert_eq!(done[0].1.tokens, want[0]);
    assert_eq!(done[1].1.tokens, want[1]);
    assert_eq!(done[0].1.logprobs.as_ref().unwrap().len(), 16);
    assert!(events.iter().any(|e| matches!(e, Event::Token { logprob: Some(_), .. })));
}

#[test]
fn engine_n_requests_of_one_prompt_equal_plain_decoding() {
    let backend = LlamaBackend::init();
    let target_model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let draft_model = LlamaModel::load_from_file(&backend, fixture("eagle3"), &LlamaModelParams::default()).unwrap();
    let want = plain(&backend, &fixture("llama"), &prompts(), 24);
    let mut target = target_model.new_context(&backend, params(1024, 2)).unwrap();
    let mut draft = target.new_draft_context(Some(&draft_model), Strategy::Eagle3, 2, 4, params(1024, 2)).unwrap();
    let mut session = Eagle3Session::new(&mut target, &mut draft, 2, 4).unwrap();
    let mut engine = Engine::new(&mut session, EngineParams::default()).unwrap();
    let p = GenerateParams::default().with_n_predict(24);
    let first = engine.add_n(&prompts()[0], &p, 2).unwrap();
    assert!(engine.add_n(&prompts()[0], &p, 3).is_err(), "n above the slots");
    let done = finished(&engine.run_until_idle().unwrap());
    assert_eq!(done.len(), 2);
    for id in [first, first + 1] {
        let (_, c, _) = done.iter().find(|(d, _, _)| *d == id).unwrap();
        assert_eq!(c.tokens, want[0]);
    }
}
