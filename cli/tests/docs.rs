//! The docs are run: every ```console block of the docs listed here is executed in order in one
//! shell, in a fresh directory, with the `palisade` just built on PATH; each `$ command` must
//! succeed (unless its line ends with `# fails`), and every line shown under it must appear in
//! what it printed (`...` stands for anything, e.g. a latency). A block whose info string is
//! `file=PATH` (after the language) is written to PATH before the commands that follow it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::toolchain;

/// One step of a doc.
enum Step {
    /// A file to write.
    File { path: String, text: String },
    /// A command, what it must print, and whether it must fail.
    Run {
        command: String,
        expect: Vec<String>,
        fails: bool,
    },
}

fn steps(doc: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut body = Vec::new();
        for line in lines.by_ref() {
            if line.starts_with("```") {
                break;
            }
            body.push(line);
        }
        if let Some(path) = info
            .split_whitespace()
            .find_map(|w| w.strip_prefix("file="))
        {
            steps.push(Step::File {
                path: path.to_string(),
                text: body.join("\n") + "\n",
            });
        } else if info.trim() == "console" {
            for line in body {
                if let Some(command) = line.strip_prefix("$ ") {
                    let fails = command.trim_end().ends_with("# fails");
                    steps.push(Step::Run {
                        command: command.to_string(),
                        expect: Vec::new(),
                        fails,
                    });
                } else if let Some(Step::Run { expect, .. }) = steps.last_mut()
                    && !line.trim().is_empty()
                    && line.trim() != "..."
                {
                    expect.push(line.trim().to_string());
                }
            }
        }
    }
    steps
}

/// Whether `line` (with `...` standing for anything) appears in one line of `output`; runs of
/// spaces count as one (tables are aligned to their content).
fn shown(line: &str, output: &str) -> bool {
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = squeeze(line);
    output.lines().any(|have| {
        let have = squeeze(have);
        let mut rest = have.as_str();
        line.split("...").all(|part| {
            let part = part.trim();
            match rest.find(part) {
                Some(i) => {
                    rest = &rest[i + part.len()..];
                    true
                }
                None => false,
            }
        })
    })
}

fn run_doc(doc: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(doc);
    let text = std::fs::read_to_string(&path).unwrap();
    let steps = steps(&text);
    assert!(
        steps.iter().any(|s| matches!(s, Step::Run { .. })),
        "{doc} has no console block to run"
    );
    let work = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // One shell for the whole doc, so `cd` carries over; each command's output and status
    // go to files.
    let mut script = String::from("set -u\n");
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::File { path, text } => {
                script.push_str(&format!(
                    "mkdir -p \"$(dirname '{path}')\" && cat > '{path}' <<'PALISADE_DOC_EOF'\n{text}PALISADE_DOC_EOF\n"
                ));
            }
            Step::Run { command, .. } => {
                let o = out.path().join(i.to_string());
                script.push_str(&format!(
                    "{{ {command}\n}} > '{o}.out' 2>&1 < /dev/null; echo $? > '{o}.rc'\n",
                    o = o.display()
                ));
            }
        }
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_palisade"));
    let path_var = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut shell = Command::new("bash");
    shell
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())
        .env("PATH", path_var)
        // The doc's plugin state, never the user's.
        .env("PALISADE_STATE_DIR", work.path().join(".state"))
        .env("PALISADE_CACHE_DIR", toolchain::component_cache())
        // A Rust plugin that a doc generates builds where the tests' ones do.
        .env("CARGO_TARGET_DIR", toolchain::user_plugin_target());
    for lang in ["python", "js", "c"] {
        shell.envs(toolchain::toolchain(lang));
    }
    let status = shell.status().expect("bash runs");
    assert!(status.success(), "{doc}: the script failed to run");
    for (i, step) in steps.iter().enumerate() {
        let Step::Run {
            command,
            expect,
            fails,
        } = step
        else {
            continue;
        };
        let o = out.path().join(i.to_string());
        let rc: i32 = std::fs::read_to_string(format!("{}.rc", o.display()))
            .unwrap_or_else(|_| {
                panic!("{doc}: `{command}` did not run (an earlier step ended the shell)")
            })
            .trim()
            .parse()
            .unwrap();
        let printed = std::fs::read_to_string(format!("{}.out", o.display())).unwrap();
        assert_eq!(
            rc != 0,
            *fails,
            "{doc}: `{command}` exited with {rc}:\n{printed}"
        );
        for line in expect {
            assert!(
                shown(line, &printed),
                "{doc}: `{command}` did not print `{line}`; it printed:\n{printed}"
            );
        }
    }
}

#[test]
fn the_runner_matches_with_ellipses_and_reads_blocks() {
    assert!(shown(
        "pass ... in ... µs",
        "pass  a case  pre-tool: allow in 41 µs"
    ));
    assert!(shown("a b  c", "x a   b c"));
    assert!(!shown("deny ... allow", "allow then deny"));
    let steps =
        steps("```console\n$ echo hi\nhi\n$ false # fails\n```\n```text file=a/b.txt\nx\n```\n");
    assert!(
        matches!(&steps[0], Step::Run { command, expect, fails: false } if command == "echo hi" && expect == &["hi"])
    );
    assert!(matches!(&steps[1], Step::Run { fails: true, .. }));
    assert!(matches!(&steps[2], Step::File { path, text } if path == "a/b.txt" && text == "x\n"));
}

#[test]
fn first_hook_in_rust() {
    run_doc("docs/first-hook/rust.md");
}

#[test]
fn first_hook_in_python() {
    run_doc("docs/first-hook/python.md");
}

#[test]
fn first_hook_in_javascript() {
    run_doc("docs/first-hook/javascript.md");
}

#[test]
fn first_hook_in_c() {
    run_doc("docs/first-hook/c.md");
}

#[test]
fn rollout() {
    run_doc("docs/rollout.md");
}

#[test]
fn capability_model() {
    run_doc("docs/capabilities.md");
}

#[test]
fn manifest_reference() {
    run_doc("docs/manifest.md");
}

#[test]
fn the_manifest_reference_names_every_field() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join("host/src/manifest/parse.rs")).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/manifest.md")).unwrap();
    let mut fields = Vec::new();
    for raw in [
        "struct RawManifest {",
        "struct RawLimits {",
        "struct RawHook {",
        "struct RawState {",
    ] {
        let body = &source[source.find(raw).unwrap_or_else(|| panic!("{raw} is gone"))..];
        let body = &body[..body.find('}').unwrap()];
        for line in body.lines().skip(1) {
            let line = line.trim();
            if let Some((name, _)) = line.split_once(':')
                && !line.starts_with('#')
                && !line.starts_with("//")
            {
                fields.push(name.trim().to_string());
            }
        }
    }
    assert!(fields.len() > 15, "{fields:?}");
    for field in fields {
        assert!(
            doc.contains(&format!("`{field}`"))
                || doc.contains(&format!("`[{field}]`"))
                || doc.contains(&format!("`[[{field}]]`")),
            "docs/manifest.md does not describe `{field}`"
        );
    }
}

#[test]
fn wit_reference() {
    run_doc("docs/wit.md");
}

#[test]
fn the_wit_reference_is_generated_from_wit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = tempfile::tempdir().unwrap();
    let fresh = out.path().join("wit-reference.md");
    let status = Command::new(root.join("scripts/wit-docs.sh"))
        .arg(&fresh)
        .envs(toolchain::toolchain("c"))
        .env(
            "PALISADE_WIT_BINDGEN",
            toolchain::tool(
                "PALISADE_WIT_BINDGEN",
                "target/tools/cargo/bin/wit-bindgen",
                "wit-bindgen-cli",
            ),
        )
        .status()
        .expect("scripts/wit-docs.sh runs");
    assert!(status.success());
    assert!(
        std::fs::read_to_string(&fresh).unwrap()
            == std::fs::read_to_string(root.join("docs/wit-reference.md")).unwrap(),
        "docs/wit-reference.md is out of date: run scripts/wit-docs.sh"
    );
}
