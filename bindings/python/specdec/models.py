"""Model files, loaded models and llama.cpp contexts.

Only what specdec.h and llama.h offer: a model is checked with
specdec_inspect before llama.cpp loads it (llama.cpp's loader aborts the
process on some malformed files; inspect turns those into errors), then
loaded with llama_model_load_from_file.

Lifetimes: a Context keeps its Model alive; _handle says how every object
is freed.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Callable, Optional, Union

from . import _native
from ._handle import _Handle
from .engine import Stream
from .errors import FileReadError, NativeFailureError, Status, check
from .generation import _generate, _Source
from .types import ModelInfo, Strategy, model_info_from_c

lib = _native.lib
PathLike = Union[str, bytes, "os.PathLike[str]"]

# --- llama.cpp's log ---------------------------------------------------------------
# llama.cpp logs every load to stderr unless told otherwise; a library should
# not print, so the log is silent until set_log_callback(fn) says where it goes.
_log_lock = threading.Lock()
_log_user: Optional[Callable[[int, str], None]] = None
_capture = threading.local()


def _on_log(level: int, text: Optional[bytes], _user) -> None:
    if text is None:
        return
    lines = getattr(_capture, "lines", None)
    if lines is not None and level == 4:  # GGML_LOG_LEVEL_ERROR: the reason a load failed
        lines.append(text.decode("utf-8", "replace").strip())
    user = _log_user
    if user is not None:
        try:
            user(level, text.decode("utf-8", "replace"))
        except Exception:  # never raise into llama.cpp
            pass


_log_trampoline = _native.ggml_log_callback(_on_log)


def set_log_callback(callback: Optional[Callable[[int, str], None]]) -> None:
    """Sends llama.cpp's log lines to callback(level, text) (ggml_log_level:
    1 debug, 2 info, 3 warn, 4 error, 5 continuation); None silences them
    (the default). The drafters' own logger is separate:
    specdec_set_upstream_log_level, exposed as set_upstream_log_level."""
    global _log_user
    with _log_lock:
        _log_user = callback


def set_upstream_log_level(level: int) -> None:
    """specdec_set_upstream_log_level: -1 silent (the default), 1 errors ... 5 debug."""
    lib.specdec_set_upstream_log_level(level)


lib.llama_log_set(_log_trampoline, None)
lib.llama_backend_init()


# --- metadata ----------------------------------------------------------------------
def _path(p: PathLike) -> bytes:
    return os.fsencode(p)


def inspect(path: PathLike) -> ModelInfo:
    """A GGUF file's metadata and the strategies it can take part in (specdec_inspect)."""
    info = _native.specdec_model_info()
    check(lib.specdec_inspect(_path(path), ctypes.byref(info)))
    return model_info_from_c(info)


def inspect_bytes(data: bytes) -> ModelInfo:
    """The same from a file's bytes in memory (specdec_inspect_buffer)."""
    info = _native.specdec_model_info()
    buf = ctypes.create_string_buffer(bytes(data), len(data))
    check(lib.specdec_inspect_buffer(buf, len(data), ctypes.byref(info)))
    return model_info_from_c(info)


def check_pair(target: PathLike, draft: Optional[PathLike], strategy: Union[Strategy, str]) -> None:
    """Returns when the files can run `strategy` together (from metadata alone);
    raises the compatibility error saying why not (specdec_check_pair)."""
    s = Strategy.parse(strategy)
    check(lib.specdec_check_pair(_path(target), None if draft is None else _path(draft), int(s)))


def check_exact(path: PathLike) -> None:
    """Returns when exact kernels make this build compute the model at `path`
    batch-invariantly (from its tensor types alone); raises UnavailableError
    naming the weight type or build option not covered (specdec_check_exact).
    Says nothing of whether exact kernels are on now."""
    check(lib.specdec_check_exact(_path(path)))


def detect_strategy(target: PathLike, draft: Optional[PathLike] = None) -> Strategy:
    """The strategy for a target and an optional draft (specdec_detect_strategy)."""
    out = _native.c_enum()
    check(lib.specdec_detect_strategy(_path(target), None if draft is None else _path(draft), ctypes.byref(out)))
    return Strategy(out.value)


# --- models and contexts -----------------------------------------------------------
def _read_sized(call, ctype, guess: int):
    """Calls a specdec function that fills the caller's buffer, call(dst,
    capacity, &n): first with `guess` elements, then once more with the size
    it reported when that was too small (BUFFER_TOO_SMALL). The buffer and the
    count of elements it holds."""
    n = ctypes.c_size_t()
    buf = (ctype * max(1, guess))()
    status = call(buf, len(buf), ctypes.byref(n))
    if status == Status.BUFFER_TOO_SMALL:
        buf = (ctype * n.value)()
        status = call(buf, len(buf), ctypes.byref(n))
    check(status)
    return buf, n.value


class Model(_Handle):
    """A model loaded with llama.cpp.

    load_mtp: load the NextN (MTP) heads, which the MTP strategy drafts with
    (llama.cpp skips them by default). n_gpu_layers: layers to offload (None:
    llama.cpp's default)."""

    def __init__(self, path: PathLike, *, load_mtp: bool = False, n_gpu_layers: Optional[int] = None):
        self.path = os.fspath(path)
        self.info = inspect(path)  # typed errors where llama.cpp's loader would abort
        p = lib.llama_model_default_params()
        p.load_mtp = load_mtp
        if n_gpu_layers is not None:
            p.n_gpu_layers = n_gpu_layers
        _capture.lines = []
        try:
            handle = lib.llama_model_load_from_file(_path(path), p)
            reasons = _capture.lines
        finally:
            _capture.lines = None
        if not handle:
            reason = "; ".join(r for r in reasons if r) or "llama.cpp gave no reason"
            raise FileReadError(Status.IO_ERROR, f"cannot load model '{self.path}': {reason}")
        self._own(handle, lib.llama_model_free)
        self.load_mtp = load_mtp
        self._vocab = lib.llama_model_get_vocab(handle)

    @property
    def n_vocab(self) -> int:
        return lib.llama_vocab_n_tokens(self._vocab)

    @property
    def n_embd(self) -> int:
        return lib.llama_model_n_embd(self.handle)

    @property
    def is_recurrent(self) -> bool:
        """Recurrent or hybrid memory: its state rolls back through n_rs_seq snapshots."""
        return bool(lib.llama_model_is_recurrent(self.handle) or lib.llama_model_is_hybrid(self.handle))

    def is_eog(self, token: int) -> bool:
        return bool(lib.llama_vocab_is_eog(self._vocab, token))

    def tokenize(self, text: Union[str, bytes], *, add_special: bool = True, parse_special: bool = False) -> list:
        """Token ids of `text` (a str as UTF-8, bytes as they are), by
        specdec_tokenize. add_special: the BOS/EOS the model adds;
        parse_special: special tokens spelled in the text ("<s>") become those
        tokens. UnrepresentableTextError for a character the vocabulary has no
        token for (its message names the character and its byte offset)."""
        self.handle  # closed check
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        buf, n = _read_sized(
            lambda dst, cap, n: lib.specdec_tokenize(self._vocab, data, len(data), add_special, parse_special, dst, cap, n),
            _native.llama_token,
            len(data) + 2,
        )
        return buf[:n]

    def token_to_piece(self, token: int, *, special: bool = True, lstrip: int = 0) -> bytes:
        """The bytes of one token (specdec_token_to_piece). special: a special
        token's text, else b""; lstrip: leading spaces to skip.
        InvalidArgumentError for a token outside the vocabulary."""
        self.handle
        buf, n = _read_sized(
            lambda dst, cap, n: lib.specdec_token_to_piece(self._vocab, token, lstrip, special, dst, cap, n), ctypes.c_char, 16
        )
        return buf.raw[:n]

    def detokenize(self, tokens, *, remove_special: bool = False, unparse_special: bool = True) -> str:
        """The text of `tokens` (specdec_detokenize: the tokenizer's leading
        space removed, so detokenize(tokenize(text)) == text), undecodable
        UTF-8 replaced. remove_special: drop a leading BOS and trailing EOS the
        model adds; unparse_special: write special tokens' text.
        InvalidArgumentError for a token outside the vocabulary."""
        self.handle
        ids = (_native.llama_token * len(tokens))(*tokens)
        buf, n = _read_sized(
            lambda dst, cap, n: lib.specdec_detokenize(
                self._vocab, ids, len(ids), remove_special, unparse_special, dst, cap, n
            ),
            ctypes.c_char,
            8 * len(ids) + 16,
        )
        return buf.raw[:n].decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"Model({self.path!r}, architecture={self.info.architecture!r})"


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Context(_Source):
    """A llama.cpp context over a Model (llama_init_from_model).

    n_ctx: positions in all (0: the model's training length), shared by the
    n_seq sequences; n_rs_seq: recurrent-state snapshots per sequence, which
    speculation on a recurrent or hybrid target needs (>= n_draft_max);
    params: any other llama_context_params field by name."""

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int = 4096,
        n_seq: int = 1,
        n_batch: int = 512,
        n_ubatch: Optional[int] = None,
        n_threads: Optional[int] = None,
        n_rs_seq: int = 0,
        kv_unified: bool = False,
        **params,
    ):
        p = lib.llama_context_default_params()
        p.n_ctx = n_ctx
        p.n_seq_max = n_seq
        p.n_batch = n_batch
        p.n_ubatch = n_batch if n_ubatch is None else n_ubatch
        threads = default_threads() if n_threads is None else n_threads
        p.n_threads = threads
        p.n_threads_batch = threads
        p.n_rs_seq = n_rs_seq
        p.kv_unified = kv_unified
        for name, value in params.items():
            if name not in dict(_native.llama_context_params._fields_):
                raise TypeError(f"llama_context_params has no field {name!r}")
            setattr(p, name, value)
        _capture.lines = []
        try:
            handle = lib.llama_init_from_model(model.handle, p)
            reasons = _capture.lines
        finally:
            _capture.lines = None
        if not handle:
            reason = "; ".join(r for r in reasons if r) or "llama.cpp gave no reason"
            raise NativeFailureError(Status.NATIVE_FAILURE, f"llama.cpp could not create the context: {reason}")
        self._adopt(handle, model)

    @classmethod
    def _wrap(cls, handle: int, model: Model, *keep) -> "Context":
        self = cls.__new__(cls)
        self._adopt(handle, model, *keep)
        return self

    def _adopt(self, handle: int, model: Model, *keep) -> None:
        self.model = model
        self._own(handle, lib.llama_free, model, *keep)

    @property
    def n_ctx(self) -> int:
        return lib.llama_n_ctx(self.handle)

    @property
    def n_seq_max(self) -> int:
        return lib.llama_n_seq_max(self.handle)

    # Plain decoding of this context alone: the reference speculation equals.
    def generate(self, prompt, params=None, **kwargs):
        """Plain decoding (specdec_generate without a session); see Session.generate."""
        return _generate(self, [prompt], params, kwargs, None)[0]

    def generate_batch(self, prompts, params=None, on_piece=None, **kwargs):
        return _generate(self, prompts, params, kwargs, on_piece)

    def stream(self, prompt, params=None, **kwargs):
        return Stream(self, prompt, params, kwargs)

    def _handles(self):
        return None, self.handle, 0

    def __repr__(self) -> str:
        return f"Context(n_ctx={self.n_ctx}, n_seq={self.n_seq_max})" if not self.closed else "Context(closed)"
