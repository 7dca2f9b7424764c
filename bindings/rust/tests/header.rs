//! `src/sys.rs` against the C headers: every function of `specdec.h` is
//! declared with the same parameter and return types, every struct has the
//! same fields in order with the same types, every enum value and constant
//! is the same; and the `llama.h` structs and functions the crate declares.
//! A header change that is not mirrored in `sys.rs` fails here.
//!
//! The comparison is textual after normalising both sides to Rust type
//! spelling (`const T * const *` becomes `*const *const T`), so it needs no
//! C compiler and no bindgen.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn strip_c_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            out.push(' ');
        } else if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A C type (without the declarator's name) in Rust spelling.
fn c_type_to_rust(c: &str) -> String {
    let spaced = c.replace('*', " * ");
    let mut tokens: Vec<&str> = spaced.split_whitespace().filter(|t| *t != "struct" && *t != "enum").collect();
    let mut base_const = false;
    let mut base = String::new();
    let mut stars: Vec<bool> = Vec::new(); // const after each star
    while !tokens.is_empty() {
        let t = tokens.remove(0);
        match t {
            "const" if stars.is_empty() => base_const = true,
            "const" => *stars.last_mut().unwrap() = true,
            "*" => stars.push(false),
            other => base = other.to_string(),
        }
    }
    let mut out = match base.as_str() {
        "uint8_t" => "u8",
        "int8_t" => "i8",
        "uint16_t" => "u16",
        "int16_t" => "i16",
        "uint32_t" => "u32",
        "int32_t" => "i32",
        "uint64_t" => "u64",
        "int64_t" => "i64",
        "float" => "f32",
        "double" => "f64",
        "size_t" => "usize",
        "int" => "c_int",
        "char" => "c_char",
        "void" => "c_void",
        other => other,
    }
    .to_string();
    for i in 0..stars.len() {
        let pointee_const = if i == 0 { base_const } else { stars[i - 1] };
        out = format!("{} {}", if pointee_const { "*const" } else { "*mut" }, out);
    }
    out
}

/// `name(type, ...) -> ret` of every `api` function in C text.
fn c_functions(text: &str, api: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find(api) {
        let defined = rest[..at].trim_end().ends_with("define");
        rest = &rest[at + api.len()..];
        if defined {
            continue; // #define SPECDEC_API ...
        }
        let end = rest.find(';').unwrap();
        let decl = squash(&rest[..end]);
        rest = &rest[end..];
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let head = decl[..open].trim();
        let name_at = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map(|i| i + 1).unwrap_or(0);
        let name = &head[name_at..];
        let ret = head[..name_at].trim();
        let args = decl[open + 1..close].trim();
        let mut params = Vec::new();
        if !args.is_empty() && args != "void" {
            for a in args.split(',') {
                params.push(c_type_to_rust(strip_name(a.trim())));
            }
        }
        let ret = if ret == "void" { String::new() } else { format!(" -> {}", c_type_to_rust(ret)) };
        out.insert(name.to_string(), format!("({}){}", params.join(", "), ret));
    }
    out
}

/// A parameter or field declaration without its name: "const char * name" -> "const char *".
fn strip_name(decl: &str) -> &str {
    let decl = decl.trim();
    let cut = decl.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map(|i| i + 1).unwrap_or(0);
    let ty = decl[..cut].trim();
    if ty.is_empty() || ty == "const" || ty == "struct" || ty == "enum" {
        decl
    } else {
        ty
    }
}

fn rust_functions(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find("pub fn ") {
        rest = &rest[at + 7..];
        let end = rest.find(';').unwrap();
        let decl = squash(&rest[..end]);
        rest = &rest[end..];
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let name = decl[..open].trim();
        let mut params = Vec::new();
        for a in decl[open + 1..close].split(',') {
            let a = a.trim();
            if a.is_empty() {
                continue;
            }
            let colon = a.find(':').unwrap();
            params.push(a[colon + 1..].trim().to_string());
        }
        let ret = decl[close + 1..].trim();
        let ret = if ret.is_empty() { String::new() } else { format!(" {}", ret) };
        out.insert(name.to_string(), format!("({}){}", params.join(", "), ret));
    }
    out
}

/// Struct name -> [(field, Rust type)] from C text; None for a field this parser cannot read.
fn c_structs(text: &str) -> BTreeMap<String, Vec<Option<(String, String)>>> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find("struct ") {
        rest = &rest[at + 7..];
        let brace = match rest.find(|c: char| c == '{' || c == ';' || c == ')' || c == ',' || c == '*') {
            Some(i) if rest.as_bytes()[i] == b'{' => i,
            _ => continue,
        };
        let name = rest[..brace].trim().to_string();
        if name.is_empty() || name.contains(' ') {
            continue;
        }
        let close = rest.find('}').unwrap();
        let body = &rest[brace + 1..close];
        let mut fields = Vec::new();
        for decl in body.split(';') {
            let decl = squash(decl);
            if decl.is_empty() {
                continue;
            }
            if decl.contains('(') {
                fields.push(None);
                continue;
            }
            let (decl, dim) = match decl.find('[') {
                Some(i) => (decl[..i].trim().to_string(), Some(decl[i + 1..decl.len() - 1].trim().to_string())),
                None => (decl.clone(), None),
            };
            let ty = strip_name(&decl);
            let field = decl[ty.len()..].trim().to_string();
            let mut rust = c_type_to_rust(ty);
            if let Some(dim) = dim {
                rust = format!("[{}; {}]", rust, dim);
            }
            let field = if field == "type" { "type_".to_string() } else { field };
            fields.push(Some((field, rust)));
        }
        out.insert(name, fields);
        rest = &rest[close..];
    }
    out
}

fn rust_structs(text: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find("pub struct ") {
        rest = &rest[at + 11..];
        let brace = rest.find('{').unwrap();
        let name = rest[..brace].trim().to_string();
        let close = rest.find("\n}").unwrap();
        let mut fields = Vec::new();
        for line in rest[brace + 1..close].lines() {
            let line = line.trim().trim_end_matches(',');
            if let Some(f) = line.strip_prefix("pub ") {
                let colon = f.find(':').unwrap();
                fields.push((f[..colon].trim().to_string(), squash(&f[colon + 1..])));
            }
        }
        if !fields.is_empty() {
            out.insert(name, fields);
        }
        rest = &rest[close..];
    }
    out
}

/// NAME -> value of `NAME = value` / `#define NAME value` (integers only).
fn c_constants(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let mut last: Option<i64> = None; // the previous enumerator, for one without a value
    for line in text.lines() {
        let line = squash(line);
        let bare = line.trim_end_matches(',');
        if line.ends_with(',') && bare.starts_with("SPECDEC_") && !bare.contains(' ') {
            if let Some(v) = last {
                out.insert(bare.to_string(), v + 1);
                last = Some(v + 1);
            }
            continue;
        }
        let (name, value) = if let Some(d) = line.strip_prefix("#define ") {
            let mut it = d.splitn(2, ' ');
            (it.next().unwrap_or("").to_string(), it.next().unwrap_or("").trim().to_string())
        } else if let Some(eq) = line.find(" = ") {
            (line[..eq].trim().to_string(), line[eq + 3..].trim_end_matches(',').trim().to_string())
        } else {
            continue;
        };
        let value = value.trim_start_matches('(').trim_end_matches(')');
        let parsed = if let Some(hex) = value.strip_prefix("0x") {
            i64::from_str_radix(hex, 16).ok()
        } else {
            value.parse::<i64>().ok()
        };
        last = parsed;
        if let (true, Some(v)) = (name.starts_with("SPECDEC_"), parsed) {
            out.insert(name, v);
        }
    }
    out
}

fn rust_constants(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("pub const ") {
            let colon = rest.find(':').unwrap();
            let eq = rest.find('=').unwrap();
            let value = rest[eq + 1..].trim().trim_end_matches(';').trim();
            let parsed = if let Some(hex) = value.strip_prefix("0x") {
                i64::from_str_radix(hex, 16).ok()
            } else {
                value.parse::<i64>().ok()
            };
            if let Some(v) = parsed {
                out.insert(rest[..colon].trim().to_string(), v);
            }
        }
    }
    out
}

/// `typedef RET (*NAME)(ARGS);` -> the Rust alias's spelling.
fn c_callbacks(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for chunk in text.split(';') {
        let chunk = squash(chunk);
        if let Some(t) = chunk.strip_prefix("typedef ") {
            if let Some(star) = t.find("(*") {
                let ret = t[..star].trim();
                let name_end = t[star..].find(')').unwrap() + star;
                let name = &t[star + 2..name_end];
                let args = &t[name_end + 1..];
                let args = args.trim().trim_start_matches('(').trim_end_matches(')');
                let mut params = Vec::new();
                for a in args.split(',') {
                    let a = a.trim();
                    let ty = strip_name(a);
                    let pname = a[ty.len()..].trim();
                    params.push(format!("{}: {}", pname, c_type_to_rust(ty)));
                }
                let ret = if ret == "void" { String::new() } else { format!(" -> {}", c_type_to_rust(ret)) };
                out.insert(name.to_string(), compact(&format!("Option<unsafe extern \"C\" fn({}){}>", params.join(", "), ret)));
            }
        }
    }
    out
}

fn rust_type_aliases(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let squashed = squash(text);
    let mut rest = squashed.as_str();
    while let Some(at) = rest.find("pub type ") {
        rest = &rest[at + 9..];
        let eq = rest.find('=').unwrap();
        let end = rest.find(';').unwrap();
        out.insert(rest[..eq].trim().to_string(), compact(&rest[eq + 1..end]));
        rest = &rest[end..];
    }
    out
}

/// Without whitespace or trailing commas: a spelling both sides share.
fn compact(s: &str) -> String {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    s.replace(",)", ")").replace(",>", ">")
}

fn sys() -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sys.rs")).unwrap()
}

fn specdec_h() -> String {
    strip_c_comments(&fs::read_to_string(repo().join("include/specdec/specdec.h")).unwrap())
}

fn llama_h() -> Option<String> {
    let dir = match std::env::var("SPECDEC_LLAMA_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => {
            let build = std::env::var("SPECDEC_BUILD_DIR").map(PathBuf::from).unwrap_or_else(|_| repo().join("build"));
            let cache = fs::read_to_string(build.join("CMakeCache.txt")).ok()?;
            let line = cache.lines().find(|l| l.starts_with("SPECDEC_LLAMA_DIR:"))?;
            PathBuf::from(line.splitn(2, '=').nth(1)?)
        }
    };
    fs::read_to_string(dir.join("include/llama.h")).ok().map(|t| strip_c_comments(&t))
}

#[test]
fn every_specdec_function_is_declared_as_in_the_header() {
    let c = c_functions(&specdec_h(), "SPECDEC_API");
    let rust = rust_functions(&sys());
    assert!(c.len() > 60, "parsed only {} functions", c.len());
    let mut problems = Vec::new();
    for (name, sig) in &c {
        match rust.get(name) {
            None => problems.push(format!("{} is not declared in sys.rs", name)),
            Some(r) if r != sig => problems.push(format!("{}: header {} vs sys.rs {}", name, sig, r)),
            _ => {}
        }
    }
    for name in rust.keys().filter(|n| n.starts_with("specdec_")) {
        if !c.contains_key(name) {
            problems.push(format!("{} is declared in sys.rs but not in specdec.h", name));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn every_specdec_struct_callback_and_constant_is_mirrored() {
    let text = specdec_h();
    let sys = sys();
    let c = c_structs(&text);
    let rust = rust_structs(&sys);
    let mut problems = Vec::new();
    for (name, fields) in &c {
        let fields: Vec<_> = fields.iter().map(|f| f.clone().expect("a struct field this test cannot read")).collect();
        match rust.get(name) {
            None => problems.push(format!("struct {} is not mirrored", name)),
            Some(r) if *r != fields => problems.push(format!("struct {}:\n  header {:?}\n  sys.rs {:?}", name, fields, r)),
            _ => {}
        }
    }
    for name in rust.keys().filter(|n| n.starts_with("specdec_")) {
        if !c.contains_key(name) {
            problems.push(format!("struct {} is not in specdec.h", name));
        }
    }
    let c_consts = c_constants(&text);
    let r_consts = rust_constants(&sys);
    assert!(c_consts.len() > 60);
    for (name, v) in &c_consts {
        match r_consts.get(name) {
            None => problems.push(format!("constant {} is not mirrored", name)),
            Some(r) if r != v => problems.push(format!("constant {} = {} in the header, {} in sys.rs", name, v, r)),
            _ => {}
        }
    }
    for name in r_consts.keys().filter(|n| n.starts_with("SPECDEC_")) {
        if !c_consts.contains_key(name) {
            problems.push(format!("constant {} is not in specdec.h", name));
        }
    }
    assert!(text.contains(&format!("#define SPECDEC_VERSION \"{}\"", specdec::sys::SPECDEC_VERSION)));
    let aliases = rust_type_aliases(&sys);
    for (name, sig) in c_callbacks(&text) {
        match aliases.get(&name) {
            Some(r) if *r == sig => {}
            other => problems.push(format!("callback {}: header {} vs sys.rs {:?}", name, sig, other)),
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_llama_h_subset_is_declared_as_in_the_header() {
    let text = match llama_h() {
        Some(t) => t,
        None => {
            eprintln!("llama.h not found (set SPECDEC_LLAMA_DIR or SPECDEC_BUILD_DIR); skipped");
            return;
        }
    };
    let sys = sys();
    let c = c_functions(&text, "LLAMA_API");
    let mut problems = Vec::new();
    for (name, sig) in rust_functions(&sys).iter().filter(|(n, _)| n.starts_with("llama_")) {
        match c.get(name) {
            None => problems.push(format!("{} is not in llama.h", name)),
            Some(s) if s != sig => problems.push(format!("{}: header {} vs sys.rs {}", name, s, sig)),
            _ => {}
        }
    }
    let c_structs = c_structs(&text);
    for (name, fields) in rust_structs(&sys).iter().filter(|(n, _)| n.starts_with("llama_")) {
        let want: Vec<_> = c_structs[name].iter().map(|f| f.clone().expect("unreadable field")).collect();
        if *fields != want {
            problems.push(format!("struct {}:\n  header {:?}\n  sys.rs {:?}", name, want, fields));
        }
    }
    let aliases = rust_type_aliases(&sys);
    let cb = c_callbacks(&text);
    if aliases.get("llama_progress_callback") != cb.get("llama_progress_callback") {
        problems.push("llama_progress_callback differs".into());
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_parser_sees_a_changed_declaration() {
    // The checks above are only as good as the parsing: a changed copy of the
    // header must compare unequal.
    let text = specdec_h();
    let c = c_functions(&text, "SPECDEC_API");
    let changed = text.replace("specdec_engine_cancel(specdec_engine * engine, specdec_request_id id)", "specdec_engine_cancel(specdec_engine * engine, uint32_t id)");
    assert_ne!(c["specdec_engine_cancel"], c_functions(&changed, "SPECDEC_API")["specdec_engine_cancel"]);
    let s = c_structs(&text);
    let changed = text.replace("uint32_t max_waiting;", "uint32_t max_waiting; uint32_t extra;");
    assert_ne!(s["specdec_engine_params"], c_structs(&changed)["specdec_engine_params"]);
    assert_eq!(c_type_to_rust("const llama_token * const *"), "*const *const llama_token");
    assert_eq!(c_type_to_rust("struct llama_context **"), "*mut *mut llama_context");
    assert_eq!(c_type_to_rust("const char * const *"), "*const *const c_char");
}

#[test]
fn the_speculative_sampling_declarations_are_seen_and_mirrored() {
    // specdec 0.4's additions, named, so that a parser which skipped them
    // (and so compared nothing) fails here rather than passing quietly.
    let text = specdec_h();
    let sys = sys();
    let (c, rust) = (c_structs(&text), rust_structs(&sys));
    let last = |fields: &[Option<(String, String)>]| fields.last().cloned().flatten().unwrap();
    let want = [
        ("specdec_generate_params", ("reasoning_prefix", "*const c_char")), // 0.5's reasoning block, after 0.4's accept
        ("specdec_draft_request", ("sampling", "*const specdec_draft_sampling")),
        ("specdec_sequence_stats", ("n_reached_at", "[u64; SPECDEC_MAX_DRAFT]")),
        ("specdec_token_prob", ("p", "f32")),
        ("specdec_draft_sampling", ("seed", "u64")),
    ];
    for (name, (field, ty)) in want {
        assert_eq!(last(&c[name]), (field.to_string(), ty.to_string()), "{} in the header", name);
        assert_eq!(rust[name].last().unwrap(), &(field.to_string(), ty.to_string()), "{} in sys.rs", name);
    }
    assert_eq!(
        c_functions(&text, "SPECDEC_API")["specdec_session_proposal_probs"],
        "(*const specdec_session, llama_seq_id, usize, *mut *const specdec_token_prob, *mut usize) -> specdec_status"
    );
    let consts = c_constants(&text);
    assert_eq!((consts["SPECDEC_ACCEPT_EXACT"], consts["SPECDEC_ACCEPT_REJECTION"]), (0, 1));
    assert_eq!(rust_type_aliases(&sys)["specdec_accept_mode"], "c_int");
    // Dropping the new array field is seen.
    let changed = text.replace("uint64_t n_reached_at[SPECDEC_MAX_DRAFT];", "");
    assert_ne!(c["specdec_sequence_stats"], c_structs(&changed)["specdec_sequence_stats"]);
}

#[test]
fn the_tokenizer_declarations_are_seen_and_mirrored() {
    // specdec 0.5's additions, named, so that a parser which skipped them
    // (and so compared nothing) fails here rather than passing quietly.
    let text = specdec_h();
    let (c, rust) = (c_functions(&text, "SPECDEC_API"), rust_functions(&sys()));
    let want = [
        (
            "specdec_tokenize",
            "(*const llama_vocab, *const c_char, usize, bool, bool, *mut llama_token, usize, *mut usize) -> specdec_status",
        ),
        (
            "specdec_detokenize",
            "(*const llama_vocab, *const llama_token, usize, bool, bool, *mut c_char, usize, *mut usize) -> specdec_status",
        ),
        ("specdec_token_to_piece", "(*const llama_vocab, llama_token, i32, bool, *mut c_char, usize, *mut usize) -> specdec_status"),
    ];
    for (name, signature) in want {
        assert_eq!(c[name], signature, "{} in the header", name);
        assert_eq!(rust[name], signature, "{} in sys.rs", name);
    }
    let consts = c_constants(&text);
    assert_eq!((consts["SPECDEC_STATUS_UNREPRESENTABLE_TEXT"], consts["SPECDEC_STATUS_BUFFER_TOO_SMALL"]), (102, 103));
}
