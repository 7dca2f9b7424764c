//! Tokenizing through the C ABI (`specdec_tokenize`, `specdec_detokenize`,
//! `specdec_token_to_piece`): text the fixture's vocabulary lacks is
//! `Error::UnrepresentableText`, where `llama_tokenize` used to abort the
//! process.
//!
//! The fixtures' vocabulary (fixtures/gguf-builder.cpp): `<unk> <s> </s>`, the
//! word separator U+2581 (id 3), then printable ASCII from '!' (id 4), one
//! character per token, then lowercase pairs; no newline, nothing outside ASCII.

mod common;

use common::*;
use specdec::*;

const SEP: i32 = 3; // U+2581, which the tokenizer puts before the text and for each space

fn ascii(text: &str) -> Vec<LlamaToken> {
    text.bytes().map(|c| LlamaToken(if c == b' ' { SEP } else { 4 + i32::from(c) - i32::from(b'!') })).collect()
}

fn with_sep(text: &str) -> Vec<LlamaToken> {
    let mut out = vec![LlamaToken(SEP)];
    out.extend(ascii(text));
    out
}

#[test]
fn token_ids_round_trip() {
    let backend = LlamaBackend::init();
    let model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    // No two of these characters form a token, so each is one.
    assert_eq!(model.tokenize("1+2=3", true).unwrap(), with_sep("1+2=3"));
    assert_eq!(model.tokenize("1 2", false).unwrap(), with_sep("1 2"));
    assert_eq!(model.tokenize("", true).unwrap(), Vec::<LlamaToken>::new());
    for text in ["1+2=3", "1 2", "hello world", "{|}~ !"] {
        let tokens = model.tokenize(text, true).unwrap();
        assert_eq!(model.detokenize(&tokens, false, true).unwrap(), text.as_bytes());
    }
    assert_eq!(model.token_to_piece(LlamaToken(4 + i32::from(b'a' - b'!'))).unwrap(), b"a");
    assert_eq!(model.token_to_piece(LlamaToken(1)).unwrap(), b"<s>");
    // parse_special reads "<s>" as token 1; without it, as its three characters.
    assert_eq!(model.tokenize_bytes(b"<s>1", false, true).unwrap(), vec![LlamaToken(1), LlamaToken(SEP), ascii("1")[0]]);
    assert_eq!(model.tokenize_bytes(b"<s>1", false, false).unwrap(), with_sep("<s>1"));
}

#[test]
fn text_the_vocabulary_lacks_is_a_typed_error() {
    let backend = LlamaBackend::init();
    let model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let e = model.tokenize("ab\ncd", true).unwrap_err();
    assert!(matches!(e, Error::UnrepresentableText { .. }), "{}", e);
    assert_eq!(e.status(), 102);
    assert_eq!(e.kind(), Some(StatusKind::Configuration));
    assert!(e.message().contains("0x0A at byte 2"), "{}", e);
    let e = model.tokenize("café", true).unwrap_err();
    assert!(e.message().contains("'é' (0xC3 0xA9) at byte 3"), "{}", e);
    // The process is still here, and the model still tokenizes.
    assert_eq!(model.tokenize("ok", true).unwrap().len(), model.tokenize("ok", false).unwrap().len());
}

#[test]
fn token_ids_outside_the_vocabulary() {
    let backend = LlamaBackend::init();
    let model = LlamaModel::load_from_file(&backend, fixture("llama"), &LlamaModelParams::default()).unwrap();
    let n = model.n_vocab();
    let e = model.detokenize(&[LlamaToken(5), LlamaToken(n)], false, true).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }) && e.message().contains("tokens[1]"), "{}", e);
    assert!(matches!(model.token_to_piece(LlamaToken(-1)), Err(Error::InvalidArgument { .. })));
    assert!(matches!(model.token_to_piece(LlamaToken(n)), Err(Error::InvalidArgument { .. })));
}
