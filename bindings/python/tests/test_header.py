"""The ctypes declarations (specdec/_native.py) against the C headers: every
function of specdec.h is declared with the same parameter and return types,
every struct field in order with the same type, every status value; and the
llama.h structs and functions the package uses. A header change that is not
mirrored fails here, instead of corrupting memory at run time."""

from __future__ import annotations

import ctypes
import os
import pathlib
import re

import pytest
from conftest import BUILD, REPO

import specdec
from specdec import _native

SPECDEC_H = REPO / "include" / "specdec" / "specdec.h"


def llama_h() -> pathlib.Path:
    if os.environ.get("SPECDEC_LLAMA_DIR"):
        return pathlib.Path(os.environ["SPECDEC_LLAMA_DIR"]) / "include" / "llama.h"
    cache = BUILD / "CMakeCache.txt"
    if cache.exists():
        m = re.search(r"^SPECDEC_LLAMA_DIR:\w+=(.*)$", cache.read_text(), re.M)
        if m:
            return pathlib.Path(m.group(1)) / "include" / "llama.h"
    pytest.skip("llama.h not found (set SPECDEC_LLAMA_DIR)")


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


SCALARS = {
    "uint8_t": ctypes.c_uint8,
    "int8_t": ctypes.c_int8,
    "uint16_t": ctypes.c_uint16,
    "uint32_t": ctypes.c_uint32,
    "int32_t": ctypes.c_int32,
    "uint64_t": ctypes.c_uint64,
    "int64_t": ctypes.c_int64,
    "float": ctypes.c_float,
    "bool": ctypes.c_bool,
    "size_t": ctypes.c_size_t,
    "int": ctypes.c_int,
    "char": ctypes.c_char,
    "llama_token": ctypes.c_int32,
    "llama_pos": ctypes.c_int32,
    "llama_seq_id": ctypes.c_int32,
    "llama_state_seq_flags": ctypes.c_uint32,
    "specdec_request_id": ctypes.c_uint64,
}
OPAQUE = {"void", "specdec_session", "specdec_engine", "specdec_generation", "llama_context", "llama_model",
          "llama_vocab", "llama_batch", "ggml_backend_dev_t", "llama_model_tensor_buft_override",
          "llama_model_kv_override", "llama_sampler_seq_config", "llama_memory_t"}
CALLBACKS = {"specdec_token_callback", "specdec_engine_callback", "ggml_log_callback", "llama_progress_callback",
             "ggml_backend_sched_eval_callback", "ggml_abort_callback"}


def enums_of(text: str) -> set:
    return set(re.findall(r"typedef\s+enum\s+(\w+)", text)) | set(re.findall(r"\benum\s+(\w+)\s*\{", text))


def expected(ctype: str, enums: set):
    """What the ctypes declaration of a C type must be: a ctypes type, or a
    predicate for pointers whose ctypes spelling may vary."""
    t = re.sub(r"\b(const|struct|enum)\b", " ", ctype)
    t = " ".join(t.split())
    stars = t.count("*")
    base = t.replace("*", "").strip()
    if stars == 0:
        if base in SCALARS:
            return SCALARS[base]
        if base in enums:
            return ctypes.c_int
        if base in CALLBACKS:
            return "callback"
        struct = getattr(_native, base, None)
        assert struct is not None, f"no ctypes mirror of {ctype!r}"
        return struct
    if stars == 1 and base == "char":
        return "string"
    if stars == 1 and base in OPAQUE | {"ggml_backend_dev_t"}:
        return "handle"
    inner = expected(" ".join([base] + ["*"] * (stars - 1)), enums)
    return ("pointer", inner)


def matches(declared, want) -> bool:
    if want == "handle":
        return declared is ctypes.c_void_p
    if want == "string":
        return declared in (ctypes.c_char_p,) or declared is ctypes.POINTER(ctypes.c_char)
    if want == "callback":
        return declared is ctypes.c_void_p or (isinstance(declared, type) and issubclass(declared, ctypes._CFuncPtr))
    if isinstance(want, tuple):
        if declared is ctypes.c_void_p:
            return want[1] == "handle"  # void ** and the like
        inner = getattr(declared, "_type_", None)
        if not isinstance(inner, type):
            return False
        return matches(inner, want[1]) or (want[1] == "handle" and inner is ctypes.c_void_p)
    if declared is want:
        return True
    # ctypes aliases: c_int32 is c_int, c_int64 is c_long on LP64
    return isinstance(declared, type) and isinstance(want, type) and ctypes.sizeof(declared) == ctypes.sizeof(want) and \
        getattr(declared, "_type_", None) == getattr(want, "_type_", None)


def functions(text: str, api: str) -> dict:
    out = {}
    for m in re.finditer(api + r"\s+([^;{}()]*?)\b(\w+)\s*\(([^;{}]*?)\)\s*;", text):
        ret, name, args = m.group(1), m.group(2), m.group(3)
        params = []
        if args.strip() not in ("", "void"):
            for a in args.split(","):
                a = " ".join(a.split())
                # drop the parameter's name (the last identifier, unless the type is all there is)
                pm = re.match(r"^(.*?[\s\*])(\w+)$", a)
                params.append(pm.group(1).strip() if pm and pm.group(1).strip() not in ("const", "") else a)
        out[name] = (ret.strip(), params)
    return out


def structs(text: str) -> dict:
    out = {}
    for m in re.finditer(r"(?:typedef\s+)?struct\s+(\w+)\s*\{(.*?)\}\s*\w*\s*;", text, re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            fm = re.match(r"^(.*?[\s\*])(\w+)\s*(?:\[(\w+)\])?$", decl)
            # a declaration this parser does not read (a function pointer field) fails check_struct
            fields.append((fm.group(2), fm.group(1).strip(), fm.group(3)) if fm else (decl, "?", None))
        out[m.group(1)] = fields
    return out


def check_struct(name: str, c_fields: list, enums: set, defines: dict) -> None:
    cls = getattr(_native, name)
    declared = cls._fields_
    assert [f[0] for f in declared] == [f[0] for f in c_fields], f"{name}: fields differ"
    for (fname, ftype), (_, ctype, dim) in zip(declared, c_fields):
        if dim is not None:
            n = int(defines.get(dim, dim))
            assert issubclass(ftype, ctypes.Array) and ftype._length_ == n, f"{name}.{fname}: array length"
            want = expected(ctype, enums)
            assert matches(ftype._type_, want), f"{name}.{fname}: element type {ftype._type_} for {ctype}"
        else:
            assert matches(ftype, expected(ctype, enums)), f"{name}.{fname}: {ftype} for {ctype!r}"


def test_specdec_h_functions_are_declared_as_in_the_header():
    text = strip_comments(SPECDEC_H.read_text())
    enums = enums_of(text)
    fns = functions(text, "SPECDEC_API")
    assert len(fns) > 60
    assert set(fns) == set(_native.SPECDEC_FUNCTIONS), "functions differ: " + str(set(fns) ^ set(_native.SPECDEC_FUNCTIONS))
    for name, (ret, params) in fns.items():
        restype, argtypes = _native.SPECDEC_FUNCTIONS[name]
        if ret == "void":
            assert restype is None, name
        else:
            assert matches(restype, expected(ret, enums)), f"{name}: returns {restype} for {ret!r}"
        assert len(argtypes) == len(params), f"{name}: {len(argtypes)} parameters for {params}"
        for i, (declared, ctype) in enumerate(zip(argtypes, params)):
            assert matches(declared, expected(ctype, enums)), f"{name} parameter {i}: {declared} for {ctype!r}"


def test_specdec_h_structs_and_constants_are_mirrored():
    raw = SPECDEC_H.read_text()
    text = strip_comments(raw)
    enums = enums_of(text)
    defines = dict(re.findall(r"#define\s+(SPECDEC_\w+)\s+(-?\d+)\b", text))
    found = structs(text)
    for name, c_fields in found.items():
        check_struct(name, c_fields, enums, defines)
    mirrored = {n for n, v in vars(_native).items() if n.startswith("specdec_") and isinstance(v, type) and issubclass(v, ctypes.Structure)}
    assert set(found) == mirrored
    for name, value in defines.items():
        if name.startswith("SPECDEC_VERSION"):
            continue
        assert getattr(_native, name) == int(value), name
    assert float(re.search(r"SPECDEC_MIN_SAMPLING_TEMPERATURE\s+([\d.e-]+)f", text).group(1)) == _native.SPECDEC_MIN_SAMPLING_TEMPERATURE
    assert re.search(r'#define SPECDEC_VERSION "([^"]+)"', text).group(1) == specdec.__version__ == specdec.version()
    # Every status and strategy value.
    statuses = dict(re.findall(r"SPECDEC_STATUS_(\w+)\s*=\s*(\d+)\s*,", text))
    statuses.pop("MAX_ENUM", None)
    assert {k: int(v) for k, v in statuses.items() if not k.startswith("KIND_")} == {s.name: int(s) for s in specdec.Status}
    kinds = {k[5:]: int(v) for k, v in statuses.items() if k.startswith("KIND_")}
    assert kinds == {k.name: int(k) for k in specdec.StatusKind}
    strategies = dict(re.findall(r"SPECDEC_STRATEGY_(\w+)\s*=\s*(\d+)\s*,", text))
    strategies.pop("MAX_ENUM", None)
    assert {k: int(v) for k, v in strategies.items()} == {s.name: int(s) for s in specdec.Strategy}
    stops = dict(re.findall(r"SPECDEC_STOP_(\w+)\s*=\s*(-?\d+)\s*,", text))
    stops.pop("MAX_ENUM", None)
    stops.pop("INVALID", None)
    assert {k: int(v) for k, v in stops.items()} == {s.name: int(s) for s in specdec.StopReason}
    modes = dict(re.findall(r"SPECDEC_ACCEPT_(\w+)\s*=\s*(\d+)\s*,", text))
    modes.pop("MAX_ENUM", None)
    assert {k: int(v) for k, v in modes.items()} == {m.name: int(m) for m in specdec.AcceptMode}
    assert {k: int(v) for k, v in modes.items()} == {
        n[len("SPECDEC_ACCEPT_"):]: v for n, v in vars(_native).items() if n.startswith("SPECDEC_ACCEPT_")
    }


def test_llama_h_structs_and_functions_are_mirrored():
    text = strip_comments(llama_h().read_text())
    enums = enums_of(text) | {"llama_split_mode", "llama_load_mode", "llama_lazy_mode", "ggml_type"}
    found = structs(text)
    for name in ("llama_model_params", "llama_context_params"):
        check_struct(name, found[name], enums, {})
    fns = functions(text, "LLAMA_API")
    for name, (restype, argtypes) in _native.LLAMA_FUNCTIONS.items():
        ret, params = fns[name]
        if ret == "void":
            assert restype is None, name
        else:
            assert matches(restype, expected(ret, enums)), f"{name}: returns {restype} for {ret!r}"
        assert len(argtypes) == len(params), name
        for i, (declared, ctype) in enumerate(zip(argtypes, params)):
            assert matches(declared, expected(ctype, enums)), f"{name} parameter {i}: {declared} for {ctype!r}"


def test_defaults_equal_the_library_defaults():
    c = _native.lib.specdec_generate_default_params()
    p, _ = specdec.GenerateParams().to_c()
    for name, ctype in _native.specdec_generate_params._fields_:
        if name == "stop_strings":
            continue
        if hasattr(ctype, "contents"):  # a pointer: both NULL
            assert not getattr(p, name) and not getattr(c, name), name
        else:
            assert getattr(p, name) == getattr(c, name), name
    e = _native.lib.specdec_engine_default_params()
    import inspect

    sig = inspect.signature(specdec.Engine.__init__).parameters
    for name in ("n_seq", "max_waiting", "n_prefill_chunk", "keep_finished", "reuse_prompts", "prompt_cache_bytes"):
        assert sig[name].default == getattr(e, name), name
    s = _native.lib.specdec_session_default_params()
    sig = inspect.signature(specdec.Session.__init__).parameters
    assert (sig["n_draft_max"].default, sig["n_draft_min"].default, sig["p_min"].default) == (s.n_draft_max, s.n_draft_min, s.p_min)
