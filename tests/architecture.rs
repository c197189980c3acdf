//! The library's modules read from the bottom up: no module of `host/src` depends, through
//! `crate::…` or `super::…` paths, on one that depends back on it. A cycle known today is listed
//! in `KNOWN` until it is broken; the test fails on any other cycle, and on a known one that
//! grows, so none is added unseen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules of the one cycle left (issue #62): the runtime layer reaches
/// up into the host and the session it serves.
const KNOWN: &[&[&str]] = &[&[
    "engine",
    "facts",
    "lifecycle",
    "loader",
    "pipeline",
    "plugin",
    "runtime",
    "runtime/convert",
    "runtime/direct",
    "runtime/external",
    "runtime/instance",
    "runtime/loading",
    "runtime/outbound",
    "runtime/sandbox",
    "runtime/signatures",
    "runtime/wasm",
    "session",
    "state",
]];

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

/// What `module` (its source `text`) refers to: the longest known module of each `crate::…`
/// or `super::…` path in its code, tests left out.
fn references(module: &Module, text: &str, known: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        for (at, _) in line
            .match_indices("crate::")
            .chain(line.match_indices("super::"))
        {
            if at > 0
                && line[..at]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            {
                continue;
            }
            let path: Vec<&str> = line[at..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or_default()
                .split("::")
                .filter(|s| !s.is_empty())
                .collect();
            // Where the path starts: the crate's root, or this module's parent (`super` of a
            // file module `a/b` is `a`; of `a/mod.rs`, which is `a`, it is the root).
            let mut base: Module = match path.first() {
                Some(&"crate") => Vec::new(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = path[1..].iter().peekable();
            while rest.peek() == Some(&&"super") {
                rest.next();
                base.pop();
            }
            let mut target = base;
            target.extend(rest.map(|s| s.to_string()));
            while !target.is_empty() && !known.contains_key(&target) {
                target.pop();
            }
            if !target.is_empty() && target != *module {
                out.insert(target);
            }
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
    let known: Vec<BTreeSet<String>> = KNOWN
        .iter()
        .map(|c| c.iter().map(|m| m.to_string()).collect())
        .collect();
    let new: Vec<_> = host_cycles(&root)
        .into_iter()
        .filter(|c| !known.iter().any(|k| c.is_subset(k)))
        .collect();
    assert!(
        new.is_empty(),
        "modules of host/src that depend on each other (break the cycle: move what both need \
         into a module below them): {new:#?}"
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
