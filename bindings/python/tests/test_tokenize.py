"""Tokenizing through the C ABI (specdec_tokenize, specdec_detokenize,
specdec_token_to_piece): text the fixture's vocabulary lacks raises
UnrepresentableTextError, where llama_tokenize used to end the interpreter.

The fixtures' vocabulary (fixtures/gguf-builder.cpp): <unk> <s> </s>, the word
separator U+2581 (id 3), then printable ASCII from '!' (id 4), one character
per token, then lowercase pairs; no newline, nothing outside ASCII."""

from __future__ import annotations

import ctypes

import pytest
from conftest import fixture_path

import specdec
from specdec import _native

SEP = 3  # U+2581, which the tokenizer puts before the text and for each space


def ascii_id(c: str) -> int:
    return 4 + ord(c) - ord("!")


@pytest.fixture(scope="module")
def model():
    with specdec.Model(fixture_path("llama")) as m:
        yield m


def test_token_ids_round_trip(model):
    # No two of these characters form a token, so each is one.
    assert model.tokenize("1+2=3") == [SEP] + [ascii_id(c) for c in "1+2=3"]
    assert model.tokenize("1 2") == [SEP, ascii_id("1"), SEP, ascii_id("2")]
    assert model.tokenize(b"#") == [SEP, ascii_id("#")]
    assert model.tokenize("") == []
    for text in ["1+2=3", "1 2", "hello world", "{|}~ !"]:
        assert model.detokenize(model.tokenize(text)) == text
    assert model.token_to_piece(ascii_id("a")) == b"a"
    assert model.token_to_piece(SEP) == b" "
    assert model.token_to_piece(SEP, lstrip=1) == b""


def test_special_tokens(model):
    # The fixture adds no BOS; parse_special reads "<s>" as token 1.
    assert model.tokenize("1", add_special=True) == [SEP, ascii_id("1")]
    assert model.tokenize("<s>1", parse_special=True) == [1, SEP, ascii_id("1")]
    plain = model.tokenize("<s>1")
    assert 1 not in plain and len(plain) == 5  # separator, '<', 's', '>', '1'
    assert model.token_to_piece(1) == b"<s>"
    assert model.token_to_piece(1, special=False) == b""
    assert model.detokenize([1, SEP, ascii_id("1")]) == "<s> 1"
    # llama.cpp strips the tokenizer's leading space from the first token only.
    assert model.detokenize([1, SEP, ascii_id("1")], unparse_special=False) == " 1"


def test_text_the_vocabulary_lacks_is_a_typed_error(model):
    with pytest.raises(specdec.UnrepresentableTextError) as e:
        model.tokenize("ab\ncd")
    assert e.value.status == specdec.Status.UNREPRESENTABLE_TEXT
    assert isinstance(e.value, specdec.ConfigurationError) and isinstance(e.value, ValueError)
    assert "0x0A at byte 2" in e.value.message
    with pytest.raises(specdec.UnrepresentableTextError) as e:
        model.tokenize("café")
    assert "'é' (0xC3 0xA9) at byte 3" in e.value.message
    # The interpreter is still here, and the model still tokenizes.
    assert model.tokenize("ok") == model.tokenize("ok")


def test_token_ids_outside_the_vocabulary(model):
    n = model.n_vocab
    with pytest.raises(specdec.InvalidArgumentError) as e:
        model.detokenize([ascii_id("a"), n])
    assert "tokens[1]" in e.value.message
    with pytest.raises(specdec.InvalidArgumentError):
        model.token_to_piece(-1)
    with pytest.raises(specdec.InvalidArgumentError):
        model.token_to_piece(n)


def test_buffer_sizes_through_the_c_abi(model):
    lib = _native.lib
    data = b"1+2=3"
    n = ctypes.c_size_t(99)
    # A size query writes nothing and reports the exact count.
    assert lib.specdec_tokenize(model._vocab, data, len(data), True, False, None, 0, ctypes.byref(n)) == 0
    assert n.value == 6
    small = (_native.llama_token * 5)(*[-7] * 5)
    status = lib.specdec_tokenize(model._vocab, data, len(data), True, False, small, 5, ctypes.byref(n))
    assert status == specdec.Status.BUFFER_TOO_SMALL and n.value == 6
    assert list(small) == [-7] * 5  # untouched
    assert b"5; 6 are needed" in lib.specdec_last_error()
    exact = (_native.llama_token * 6)()
    assert lib.specdec_tokenize(model._vocab, data, len(data), True, False, exact, 6, ctypes.byref(n)) == 0
    assert list(exact) == [SEP] + [ascii_id(c) for c in "1+2=3"]
    # NULL arguments are refused before llama.cpp runs.
    assert lib.specdec_tokenize(None, data, len(data), True, False, None, 0, ctypes.byref(n)) == specdec.Status.INVALID_ARGUMENT
    assert lib.specdec_tokenize(model._vocab, None, 3, True, False, None, 0, ctypes.byref(n)) == specdec.Status.INVALID_ARGUMENT
    assert lib.specdec_tokenize(model._vocab, data, len(data), True, False, None, 4, ctypes.byref(n)) == specdec.Status.INVALID_ARGUMENT
