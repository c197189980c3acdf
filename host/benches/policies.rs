//! Policies as data: a warm `pre-tool` decision of the example policies (five rules: four
//! denials and an ask) in Rego (`rego-guard`) and in Cedar (`cedar-guard`), against the same
//! decisions in Rust (`shell-guard`), through the public async API; and loading a policy of
//! 500 rules in each language (a per-call instance on a host without spares: every call reads
//! and parses the policy, then decides).
//!
//! Run: `cargo bench -p palisade --bench policies`.

use criterion::{Criterion, criterion_group, criterion_main};
use palisade::{Host, PreToolDecision, ToolCall};
use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;

/// Installs the example plugin `name` alone in a plugin directory, with the instance
/// lifetime `instance`.
fn example(name: &str, instance: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let example = palisade_examples::get(name).expect("the example (feature `all`)");
    palisade_examples::install_one(example, dir.path()).unwrap();
    let manifest = dir.path().join(name).join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = if text.contains("instance = ") {
        text.replace("per-session", instance)
    } else {
        text.replacen(
            "[limits]",
            &format!("instance = \"{instance}\"\n\n[limits]"),
            1,
        )
    };
    std::fs::write(&manifest, text).unwrap();
    dir
}

/// `rules` rules, each denying a command that holds its own word, in place of the example
/// policy of `name` (in `dir`).
fn many_rules(dir: &Path, name: &str, rules: usize) {
    let policy = dir.join(name).join("policy");
    for entry in std::fs::read_dir(&policy).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let mut text = String::new();
    if name == "rego-guard" {
        text.push_str("package palisade\n\nimport rego.v1\n\n");
        for n in 0..rules {
            writeln!(
                text,
                "deny contains {{\"reason_code\": \"rule-{n}\", \"message\": \"rule {n}\"}} if \
                 contains(input.tool.arguments.command, \"forbidden-{n} \")"
            )
            .unwrap();
        }
        std::fs::write(policy.join("many.rego"), text).unwrap();
    } else {
        for n in 0..rules {
            writeln!(
                text,
                "@reason_code(\"rule-{n}\")\nforbid (principal, action, resource) when \
                 {{ context has command && context.command like \"*forbidden-{n} *\" }};"
            )
            .unwrap();
        }
        std::fs::write(policy.join("many.cedar"), text).unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let host = Host::new().unwrap();
    let allowed = ToolCall::new("t", "Bash", json!({ "command": "cargo test --workspace" }));
    let denied = ToolCall::new(
        "t",
        "Bash",
        json!({ "command": "git push --force origin main" }),
    );
    for name in ["shell-guard", "rego-guard", "cedar-guard"] {
        let dir = example(name, "per-session");
        let plugins = host.load_dir(dir.path()).unwrap();
        let session = plugins.session("bench");
        rt.block_on(async {
            assert_eq!(session.pre_tool(&allowed).await, PreToolDecision::Allow);
            assert!(matches!(
                session.pre_tool(&denied).await,
                PreToolDecision::Deny(_)
            ));
        });
        for (case, call) in [("allow", &allowed), ("deny", &denied)] {
            c.bench_function(&format!("policy/warm/{name}/{case}"), |b| {
                b.to_async(&rt).iter(|| session.pre_tool(call));
            });
        }
    }
    // Loading: every call a new instance, which reads and parses 500 rules.
    let no_spares = Host::builder().spare_instances(false).build().unwrap();
    for name in ["rego-guard", "cedar-guard"] {
        let dir = example(name, "per-call");
        many_rules(dir.path(), name, 500);
        let plugins = no_spares.load_dir(dir.path()).unwrap();
        let session = plugins.session("bench");
        rt.block_on(async {
            assert_eq!(session.pre_tool(&allowed).await, PreToolDecision::Allow);
        });
        c.bench_function(&format!("policy/load-500-rules/{name}"), |b| {
            b.to_async(&rt).iter(|| session.pre_tool(&allowed));
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
