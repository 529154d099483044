//! The core's modules import one another without a circle: the definition
//! (record, error, protocol) at the bottom, what uses it (store, guard,
//! relay) above. A circle means no module can be read, tested or changed
//! without the others; this test names the circle when one comes back.
//!
//! A module is a child of the crate root (`src/<m>.rs` or `src/<m>/`, its
//! submodules included). It uses another when its source names it by path:
//! `crate::<m>::...`, `use crate::{<m>::..}`, or an item the root
//! re-exports (`crate::Error` is `error`'s), and `super::` that climbs to the
//! root. Comments and string literals do not count; `#[cfg(test)]` code
//! does. A re-export counts as a use of the module it names: import an item
//! from the module that defines it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where a module names another: the first place, for the message.
type Edges = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn the_core_modules_import_without_a_circle() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &src, &mut files);
    let edges = module_graph(&files);
    assert!(
        edges.len() > 10,
        "found only {:?}: is src/lib.rs read?",
        edges.keys()
    );
    if let Some(report) = circles(&edges) {
        panic!("{report}");
    }
}

/// The checker itself: a circle through a re-export, a `use` group and a
/// `super::` that climbs to the root is found and named; comments, strings,
/// lifetimes and a submodule's `super::` are not uses.
#[test]
fn a_circle_is_found_and_named() {
    let files = |inner_extra: &str, c: &str| {
        vec![
            (
                "lib.rs".to_owned(),
                "mod a;\npub mod b;\nmod c;\npub use c::{Thing, other::More};\n".to_owned(),
            ),
            (
                "a.rs".to_owned(),
                "use crate::{b::X, c};\n// crate::b in a comment\nmod t { use super::*; }\n"
                    .to_owned(),
            ),
            (
                "b/mod.rs".to_owned(),
                "mod inner;\nconst S: &str = \"crate::a\";\n".to_owned(),
            ),
            (
                "b/inner.rs".to_owned(),
                format!("use super::X; fn f<'a>(_: &'a str) -> char {{ '\\'' }}\n{inner_extra}"),
            ),
            ("c.rs".to_owned(), c.to_owned()),
        ]
    };
    let clean = module_graph(&files("", ""));
    assert_eq!(
        clean["a"].keys().collect::<Vec<_>>(),
        ["b", "c"],
        "{clean:?}"
    );
    assert!(clean["b"].is_empty() && clean["c"].is_empty(), "{clean:?}");
    assert!(circles(&clean).is_none());

    let looped = module_graph(&files(
        "fn g() -> crate::More { todo!() }\n",
        "\nuse super::a;\n",
    ));
    assert_eq!(looped["b"]["c"], "src/b/inner.rs:2", "{looped:?}");
    assert_eq!(looped["c"]["a"], "src/c.rs:2", "{looped:?}");
    let report = circles(&looped).expect("a -> c -> a is a circle");
    assert!(report.contains("  a -> c -> a\n"), "{report}");
    assert!(report.contains("    c -> a: src/c.rs:2\n"), "{report}");
    assert!(report.contains("{a, b, c}"), "{report}");
}

#[test]
fn a_circle_through_the_root_re_export_is_named_with_its_places() {
    let files = vec![
        (
            "lib.rs".to_owned(),
            "mod error;\nmod record;\npub use error::Error;\n".to_owned(),
        ),
        (
            "error.rs".to_owned(),
            "use crate::record::Record;\n".to_owned(),
        ),
        (
            "record.rs".to_owned(),
            "\n\nfn f() -> crate::Error { todo!() }\n".to_owned(),
        ),
    ];
    let report = circles(&module_graph(&files)).expect("error <-> record is a circle");
    assert!(
        report.contains("error -> record -> error") || report.contains("record -> error -> record"),
        "{report}"
    );
    assert!(report.contains("error.rs:1"), "{report}");
    assert!(report.contains("record.rs:3"), "{report}");
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// The modules (children of the root) and which others each names, from
/// the files of `src/` as `(path relative to src, text)`.
fn module_graph(files: &[(String, String)]) -> Edges {
    let lib = &files
        .iter()
        .find(|(p, _)| p == "lib.rs")
        .expect("src/lib.rs")
        .1;
    let lib = without_attributes(&code_only(lib));
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for stmt in lib.split(';') {
        let words: Vec<&str> = stmt.split_whitespace().collect();
        let words: &[&str] = match words.first() {
            Some(w) if w.starts_with("pub") => &words[1..],
            _ => &words,
        };
        match words {
            ["mod", name] => {
                modules.insert(name.to_string());
            }
            ["use", rest @ ..] => {
                let path = rest.concat();
                let (module, items) = path.split_once("::").expect("pub use <module>::..");
                for item in items
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                {
                    reexports.insert(item.to_owned(), module.to_owned());
                }
            }
            _ => {}
        }
    }
    let mut edges: Edges = modules
        .iter()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    for (path, text) in files {
        if path == "lib.rs" {
            continue;
        }
        let module = path
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_owned();
        assert!(
            modules.contains(&module),
            "src/{path} belongs to no module declared in lib.rs"
        );
        // How many `super::` reach the root from the file's top level.
        let depth = path.matches('/').count() + usize::from(!path.ends_with("mod.rs"));
        let code = code_only(text);
        for (at, target) in uses(&code, depth) {
            let target = if modules.contains(&target) {
                target
            } else if let Some(m) = reexports.get(&target) {
                m.clone()
            } else {
                panic!(
                    "src/{path}:{}: crate::{target} names neither a module nor a re-export of src/lib.rs",
                    line_of(&code, at)
                );
            };
            if target != module {
                edges
                    .get_mut(&module)
                    .unwrap()
                    .entry(target)
                    .or_insert_with(|| format!("src/{path}:{}", line_of(&code, at)));
            }
        }
    }
    edges
}

/// `#[..]` and `#![..]` removed.
fn without_attributes(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find('#') {
        out.push_str(&rest[..at]);
        let after = rest[at + 1..].trim_start_matches('!');
        if !after.starts_with('[') {
            out.push('#');
            rest = &rest[at + 1..];
            continue;
        }
        let mut depth = 0;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '[' => 1,
                    ']' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(after.len(), |(j, _)| j + 1);
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// The first segment after the root of every path that starts at the root:
/// `crate::x`, each member of `crate::{x, y::z}`, and `super::` climbing
/// out of the file's module tree (`depth` climbs from the file's top
/// level; each inline `mod m { }` adds one). With the byte offset.
fn uses(code: &str, depth: usize) -> Vec<(usize, String)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    // Open braces; `true` for those of an inline `mod m {`.
    let mut braces: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'{' {
            let before = code[..i].trim_end();
            let word_start = before
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |p| p + 1);
            let is_mod = before[..word_start].trim_end().ends_with("mod")
                && before[..word_start]
                    .trim_end()
                    .strip_suffix("mod")
                    .is_some_and(|b| b.is_empty() || b.ends_with(|c: char| !is_ident(c)));
            braces.push(is_mod && word_start < before.len());
            i += 1;
            continue;
        }
        if c == b'}' {
            braces.pop();
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !is_ident(bytes[i - 1] as char) && bytes[i - 1] != b'$';
        if !starts_word {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        if let Some(after) = rest.strip_prefix("crate::") {
            out.extend(first_segments(after, i + 7));
            i += 7;
        } else if rest.starts_with("super::") {
            let mut climbs = 0;
            let mut tail = rest;
            while let Some(t) = tail.strip_prefix("super::") {
                climbs += 1;
                tail = t;
            }
            let offset = i + (rest.len() - tail.len());
            let inline_mods = braces.iter().filter(|m| **m).count();
            if climbs >= depth + inline_mods {
                out.extend(first_segments(tail, offset));
            }
            i = offset;
        } else {
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `x::..` gives `x`; `{x::a, y, z::{b, c}}` gives `x`, `y`, `z`.
fn first_segments(text: &str, offset: usize) -> Vec<(usize, String)> {
    let ident = |s: &str| -> String { s.chars().take_while(|c| is_ident(*c)).collect() };
    if !text.starts_with('{') {
        return vec![(offset, ident(text))];
    }
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 1;
    for (j, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' | ',' if depth == 1 => {
                let member = text[start..j].trim_start();
                if !member.is_empty() {
                    let at = offset + j - text[start..j].trim_start().len();
                    out.push((at, ident(member)));
                }
                start = j + 1;
                if c == '}' {
                    break;
                }
            }
            '}' => depth -= 1,
            _ => {}
        }
    }
    out
}

/// The source with comments and the insides of string and char literals
/// blanked (newlines kept, so offsets and line numbers stay).
fn code_only(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !is_ident(chars[i - 1]))
        {
            // A raw string: r"..", r#".."#.
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body_start = j + 1;
            let rest: String = chars[body_start..].iter().collect();
            let body_len = rest
                .find(&close)
                .map_or(rest.len(), |p| rest[..p].chars().count());
            out.extend(std::iter::repeat_n(' ', body_start - i));
            out.extend(
                chars[body_start..body_start + body_len]
                    .iter()
                    .map(|c| blank(*c)),
            );
            out.extend(std::iter::repeat_n(' ', hashes + 1));
            i = body_start + body_len + hashes + 1;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a).
            let close = if next == Some('\\') {
                (i + 2..chars.len()).find(|&j| chars[j] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.extend(std::iter::repeat_n(' ', end + 1 - i));
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `None` without a circle; otherwise one circle of each knot, each step
/// with the place it is written.
fn circles(edges: &Edges) -> Option<String> {
    let knots = strongly_connected(edges);
    if knots.is_empty() {
        return None;
    }
    let mut report = String::from("the core's modules import in a circle:\n");
    for knot in knots {
        let start = knot.iter().next().unwrap();
        let path = shortest_cycle(edges, &knot, start);
        let _ = writeln!(report, "  {}", path.join(" -> "));
        for step in path.windows(2) {
            let _ = writeln!(
                report,
                "    {} -> {}: {}",
                step[0], step[1], edges[&step[0]][&step[1]]
            );
        }
        let _ = writeln!(
            report,
            "  all of {{{}}} reach one another, through:",
            knot.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        for (from, to) in knot.iter().flat_map(|m| {
            edges[m]
                .iter()
                .filter(|(to, _)| knot.contains(*to))
                .map(move |(to, at)| (m, (to, at)))
        }) {
            let _ = writeln!(report, "    {from} -> {}: {}", to.0, to.1);
        }
    }
    report.push_str(
        "Move what both sides need into the lower module, or import an item \
         from the module that defines it rather than from a re-export.",
    );
    Some(report)
}

/// The strongly connected sets of more than one module (Tarjan's algorithm).
fn strongly_connected(edges: &Edges) -> Vec<BTreeSet<String>> {
    struct Walk<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for u in w.edges[v].keys() {
            let u = u.as_str();
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.stack.contains(&u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut knot = BTreeSet::new();
            loop {
                let u = w.stack.pop().unwrap();
                knot.insert(u.to_owned());
                if u == v {
                    break;
                }
            }
            if knot.len() > 1 {
                w.found.push(knot);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found
}

/// `start`, the modules of a shortest way back to it inside `knot`, and
/// `start` again.
fn shortest_cycle(edges: &Edges, knot: &BTreeSet<String>, start: &str) -> Vec<String> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for u in edges[v].keys().filter(|u| knot.contains(*u)) {
            if u == start {
                let mut path = vec![start.to_owned()];
                let mut at = v;
                while at != start {
                    path.push(at.to_owned());
                    at = came_from[at];
                }
                path.push(start.to_owned());
                path.reverse();
                return path;
            }
            if !came_from.contains_key(u.as_str()) {
                came_from.insert(u, v);
                queue.push_back(u);
            }
        }
    }
    unreachable!("{start} is in a knot, so a way back exists")
}
