//! The library's modules read from the bottom up: no module of `host/src` depends, through
//! `crate::…`, `super::…` or `child::…` paths, on one that depends back on it. A module that
//! two others need lives below both (CONTRIBUTING.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every `.rs` file under `dir`, by module path (`runtime/mod.rs` is `runtime`, `lib.rs` the
/// root).
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut parts: Module = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            found.insert(parts, path);
        }
    }
    found
}

/// What `module` (its source `text`) refers to, tests left out: the longest known module of
/// each `crate::…` or `super::…` path in its code (each path of a `{…}` group too), and each
/// of its own child modules it names (`child::…`).
fn references(module: &Module, text: &str, known: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    // Up to its tests (a `#[cfg(…test…)]` line before `mod tests`), comments left out.
    let lines: Vec<&str> = text.lines().collect();
    let tests = (0..lines.len())
        .find(|&i| {
            let line = lines[i].trim_start();
            line.starts_with("#[cfg(")
                && line.contains("test")
                && lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with("mod tests"))
        })
        .unwrap_or(lines.len());
    let code: String = lines[..tests]
        .iter()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let is_path_char = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    let mut out = BTreeSet::new();
    let mut add = |target: Module| {
        let mut target = target;
        while !target.is_empty() && !known.contains_key(&target) {
            target.pop();
        }
        if !target.is_empty() && target != *module {
            out.insert(target);
        }
    };
    // Where a path starts: the crate's root, or this module's parent (`super` of a file
    // module `a/b` is `a`; of `a/mod.rs`, which is `a`, it is the root).
    let base_of = |first: &str| -> Module {
        match first {
            "crate" => Vec::new(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        }
    };
    let children: Vec<&str> = known
        .keys()
        .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
        .map(|k| k.last().unwrap().as_str())
        .collect();
    for (at, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
        .chain(children.iter().flat_map(|child| {
            code.match_indices(format!("{child}::").as_str())
                .collect::<Vec<_>>()
        }))
    {
        if at > 0 && code[..at].chars().last().is_some_and(is_path_char) {
            continue;
        }
        let rest = &code[at..];
        let end = rest.find(|c: char| !is_path_char(c)).unwrap_or(rest.len());
        let segments: Vec<&str> = rest[..end].split("::").filter(|s| !s.is_empty()).collect();
        let mut base: Module = match segments.first() {
            Some(&"crate") | Some(&"super") => base_of(segments[0]),
            // A child of this module, named from it.
            _ => module.clone(),
        };
        let mut tail = segments.iter().skip(match segments.first() {
            Some(&"crate") | Some(&"super") => 1,
            _ => 0,
        });
        let mut tail: Vec<&str> = {
            let mut t = Vec::new();
            for s in tail.by_ref() {
                if *s == "super" && t.is_empty() {
                    base.pop();
                } else {
                    t.push(*s);
                }
            }
            t
        };
        let mut target = base.clone();
        target.extend(tail.drain(..).map(String::from));
        // A `{…}` group after the path: each of its items is a path from there.
        if rest[end..].starts_with('{') {
            let mut depth = 0;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in rest[end..].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        if depth == 1 {
                            continue;
                        }
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            items.push(std::mem::take(&mut item));
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        items.push(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            for item in items {
                let item = item.trim();
                let path = item
                    .split(|c: char| !is_path_char(c))
                    .next()
                    .unwrap_or_default();
                let mut from = target.clone();
                from.extend(
                    path.split("::")
                        .filter(|s| !s.is_empty() && *s != "self")
                        .map(String::from),
                );
                add(from);
            }
        } else {
            add(target);
        }
    }
    out
}

/// The groups of two or more modules that depend on each other (Tarjan's components).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<BTreeSet<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in &self.edges[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    group.insert(w.join("/"));
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn host_cycles(root: &Path) -> Vec<BTreeSet<String>> {
    let known = modules(root);
    let edges: BTreeMap<Module, BTreeSet<Module>> = known
        .iter()
        .map(|(module, path)| {
            let text = std::fs::read_to_string(path).unwrap();
            (module.clone(), references(module, &text, &known))
        })
        .collect();
    cycles(&edges)
}

#[test]
fn no_module_of_the_library_depends_on_one_that_depends_back_on_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src");
    let found = host_cycles(&root);
    assert!(
        found.is_empty(),
        "modules of host/src that depend on each other (break the cycle: move what both need \
         into a module below them): {found:#?}"
    );
}

/// The check sees a cycle planted in a copy of the library: two leaf modules that name each
/// other.
#[test]
fn the_cycle_check_finds_a_planted_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct B(super::a::A);\n").unwrap();
    let found = host_cycles(src);
    assert_eq!(found, [BTreeSet::from(["a".to_string(), "b".to_string()])]);
}

/// It sees one through a `{…}` group of paths, and one between a module and its child.
#[test]
fn the_cycle_check_sees_groups_and_children() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("p")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod p;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::{b::B, p};\npub struct A;\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "use crate::{\n    a::A,\n};\npub struct B;\n",
    )
    .unwrap();
    std::fs::write(src.join("p/mod.rs"), "mod q;\npub struct P(q::Q);\n").unwrap();
    std::fs::write(
        src.join("p/q.rs"),
        "use super::{P};\npub struct Q(Box<P>);\n",
    )
    .unwrap();
    let mut found = host_cycles(src);
    found.sort();
    assert_eq!(
        found,
        [
            BTreeSet::from(["a".to_string(), "b".to_string()]),
            BTreeSet::from(["p".to_string(), "p/q".to_string()]),
        ]
    );
}

/// An embedder who wants wasm guards only builds the library without its default features,
/// and gets none of the SQLite, Redis or HTTP machinery (`host/examples/wasm_only.rs` is
/// such an embedding).
#[test]
fn the_library_without_default_features_has_no_sqlite_redis_or_http() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "palisade",
            "--no-default-features",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-f",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let tree = String::from_utf8(out.stdout).unwrap();
    let crates: BTreeSet<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(crates.contains("wasmtime"), "{tree}");
    for left_out in [
        "rusqlite",
        "redis",
        "reqwest",
        "hyper",
        "wasmtime-wasi-http",
        "rustls",
    ] {
        assert!(!crates.contains(left_out), "{left_out} is in:\n{tree}");
    }
}

/// Each public type has one path: the crate root re-exports only from private modules, so
/// nothing a public module holds is also at the root.
#[test]
fn the_crate_root_re_exports_nothing_a_public_module_holds() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src/lib.rs"))
            .unwrap();
    let public: BTreeSet<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches([';', ' ', '{']))
        .collect();
    assert!(public.contains("events"), "{public:?}");
    let twice: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub use "))
        .filter(|path| public.contains(path.split("::").next().unwrap_or_default()))
        .collect();
    assert!(
        twice.is_empty(),
        "re-exported at the root from a public module (two paths for one type): {twice:?}"
    );
}
