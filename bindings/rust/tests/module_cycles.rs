//! The crate's modules use one another in layers, without a cycle.
//!
//! Read from `src/*.rs`: every `crate::<module>` path (`use crate::model::X`,
//! `crate::error::last_error()`, `use crate::{a, b}`, a macro's `$crate::`)
//! is an edge to that module, and `crate::<Item>` to the module `lib.rs`
//! re-exports the item from (`pub use generate::{GenerateParams, ...}`).
//! Comments are skipped: a doc link (`[x](crate::Engine)`) is no dependency.
//! `lib.rs` is the root that re-exports every module, not a layer.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The code of a Rust source with its comments, string and char literals blanked.
fn code_only(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (i == 0 || !is_ident(s[i - 1])) && matches!(next, Some('"') | Some('#')) {
            // A raw string r"..." or r#"..."#; otherwise an identifier starting with r.
            let mut j = i + 1;
            while j < s.len() && s[j] == '#' {
                j += 1;
            }
            if s.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            j += 1;
            while j < s.len() && !(s[j] == '"' && (0..hashes).all(|k| s.get(j + 1 + k) == Some(&'#'))) {
                j += 1;
            }
            i = j + 1 + hashes;
            out.push(' ');
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' && s.get(i + 2) == Some(&'\'') {
            i += 3; // 'x'; a lifetime ('a) has no closing quote
            out.push(' ');
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_at(s: &[char], mut i: usize) -> (String, usize) {
    let start = i;
    while i < s.len() && is_ident(s[i]) {
        i += 1;
    }
    (s[start..i].iter().collect(), i)
}

fn skip_space(s: &[char], mut i: usize) -> usize {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The first path segment after every `crate::` (each one of a `crate::{a::X, b}` group).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let s: Vec<char> = code.chars().collect();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i + 7 <= s.len() {
        let at_crate = s[i..i + 7].iter().collect::<String>() == "crate::" && (i == 0 || !is_ident(s[i - 1]));
        if !at_crate {
            i += 1;
            continue;
        }
        i = skip_space(&s, i + 7);
        if s.get(i) == Some(&'{') {
            let mut depth = 0;
            let mut item_start = true;
            while i < s.len() {
                match s[i] {
                    '{' => {
                        depth += 1;
                        item_start = depth == 1;
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && is_ident(c) => {
                        let (name, end) = ident_at(&s, i);
                        found.insert(name);
                        item_start = false;
                        i = end;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            let (name, end) = ident_at(&s, i);
            if !name.is_empty() {
                found.insert(name);
            }
            i = end;
        }
    }
    found
}

/// `lib.rs`'s `pub use module::{Item, ...}` and `pub use module::Item`: each item's module.
fn reexports(lib_code: &str) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    for statement in lib_code.split(';') {
        let statement = statement.trim();
        let path = match statement.strip_prefix("pub use ") {
            Some(p) => p,
            None => continue,
        };
        let (module, rest) = match path.split_once("::") {
            Some(split) => split,
            None => continue,
        };
        for item in rest.trim_matches(|c: char| c == '{' || c == '}' || char::is_whitespace(c)).split(',') {
            let name = item.split(" as ").last().unwrap_or("").rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                items.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    items
}

fn crate_graph(src: &Path) -> Graph {
    let mut sources = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().map_or(false, |e| e == "rs") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            sources.insert(stem, code_only(&fs::read_to_string(&path).unwrap()));
        }
    }
    let lib = sources.remove("lib").expect("src/lib.rs");
    let items = reexports(&lib);
    let mut graph = Graph::new();
    for (module, code) in &sources {
        let uses = crate_paths(code)
            .into_iter()
            .filter_map(|name| if sources.contains_key(&name) { Some(name) } else { items.get(&name).cloned() })
            .filter(|used| used != module)
            .collect();
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A cycle of the graph as its nodes, the first repeated at the end.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(graph: &Graph, node: &str, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(graph, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

fn graph_of(edges: &[(&str, &[&str])]) -> Graph {
    edges.iter().map(|(n, succ)| (n.to_string(), succ.iter().map(|s| s.to_string()).collect())).collect()
}

#[test]
fn find_cycle_finds_one() {
    let cyclic = graph_of(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
    assert_eq!(find_cycle(&cyclic), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    assert_eq!(find_cycle(&graph_of(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[])])), None);
}

#[test]
fn paths_are_read_from_code_only() {
    let code = code_only(concat!(
        "//! [`Engine`](crate::engine::Engine)\n",
        "use crate::error::{check, Error};\n",
        "use crate::{model::LlamaToken, sys};\n",
        "fn f<'a>(x: &'a str) -> char { let _ = \"crate::quoted\"; let _ = r#\"crate::raw\"#; '\"' }\n",
        "/* crate::block */ macro_rules! m { () => { $crate::Strategy::Mtp } }\n",
    ));
    let expected: BTreeSet<String> = ["error", "model", "sys", "Strategy"].iter().map(|s| s.to_string()).collect();
    assert_eq!(crate_paths(&code), expected);
}

#[test]
fn the_crate_has_no_module_cycle() {
    let graph = crate_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.contains_key("model") && graph.contains_key("session"), "{:?}", graph.keys());
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
}
