//! Cost of one `pre-tool` dispatch through the public async API.
//!
//! - `warm`: a per-session instance, reused (the common case);
//! - `fresh`: a per-call plugin, a new store and instance every call (maximum isolation),
//!   instantiated for the call (a host without spare instances);
//! - `spare`: the same plugin on a host that makes each call's instance ahead of it, after the
//!   call before (`HostBuilder::spare_instances`): each call is timed once its spare is ready,
//!   as an agent's calls, spaced out, find it;
//! - each with the minimal guard (the `allow` test guest: it allows, making no host call), the
//!   scripted test guest (three `config` host calls per call, then allow) and the real
//!   `shell-guard` and `secret-guard` examples (each alone in its plugin set: secret-guard
//!   guards every tool).
//!
//! Run: `cargo bench -p palisade --bench dispatch`.

use criterion::{Criterion, criterion_group, criterion_main};
use palisade::{Host, Plugin, Plugins, PreToolDecision, ToolCall};
use serde_json::json;
use std::path::Path;

mod support;

/// Installs the test guest `wasm` as plugin `name`, guarding the tool `tool`.
fn guest(dir: &Path, name: &str, wasm: &str, tool: &str, instance: &str) {
    let plugin = dir.join(name);
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::copy(wasm, plugin.join("plugin.wasm")).unwrap();
    std::fs::write(
        plugin.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nwasm = \"plugin.wasm\"\ninstance = \"{instance}\"\n\
             [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"{tool}\"\n"
        ),
    )
    .unwrap();
}

fn plugin_dir(instance: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    guest(
        dir.path(),
        "allow",
        palisade_fixtures::ALLOW,
        "Minimal",
        instance,
    );
    guest(
        dir.path(),
        "scripted",
        palisade_fixtures::SCRIPTED,
        "Scripted",
        instance,
    );
    example(dir.path(), "shell-guard", instance);
    dir
}

/// Installs the example plugin `name`, with the instance lifetime `instance`.
fn example(dir: &Path, name: &str, instance: &str) {
    palisade_examples::install_one(palisade_examples::get(name).unwrap(), dir).unwrap();
    let manifest = dir.join(name).join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("per-session", instance)).unwrap();
}

/// The plugin `name` of `plugins`.
fn named<'a>(plugins: &'a Plugins, name: &str) -> &'a Plugin {
    plugins.iter().find(|p| p.name() == name).unwrap()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // `fresh` measures instantiating for the call: a host without spare instances.
    let host = Host::new().unwrap();
    let no_spares = Host::builder().spare_instances(false).build().unwrap();
    for label in ["warm", "fresh", "spare"] {
        let (host, instance) = match label {
            "warm" => (&host, "per-session"),
            "fresh" => (&no_spares, "per-call"),
            _ => (&host, "per-call"),
        };
        let dir = plugin_dir(instance);
        let plugins = host.load_dir(Path::new(dir.path())).unwrap();
        let session = plugins.session("bench");
        let secrets_dir = tempfile::tempdir().unwrap();
        example(secrets_dir.path(), "secret-guard", instance);
        let secret_plugins = host.load_dir(secrets_dir.path()).unwrap();
        let secrets = secret_plugins.session("bench");
        let minimal = ToolCall::new("t", "Minimal", json!({ "command": "ls" }));
        let scripted = ToolCall::new("t", "Scripted", json!({ "command": "ls" }));
        let shell = ToolCall::new("t", "Bash", json!({ "command": "ls -la /tmp" }));
        let build = ToolCall::new("t", "Bash", json!({ "command": "cargo test --workspace" }));
        // Warm up (instantiate the per-session instances, compile the regexes).
        rt.block_on(async {
            assert_eq!(session.pre_tool(&minimal).await, PreToolDecision::Allow);
            assert_eq!(session.pre_tool(&scripted).await, PreToolDecision::Allow);
            assert_eq!(session.pre_tool(&shell).await, PreToolDecision::Allow);
            assert_eq!(secrets.pre_tool(&build).await, PreToolDecision::Allow);
        });
        for (name, session, call, plugin) in [
            (
                "minimal-guard",
                &session,
                &minimal,
                named(&plugins, "allow"),
            ),
            (
                "scripted-guard",
                &session,
                &scripted,
                named(&plugins, "scripted"),
            ),
            (
                "shell-guard",
                &session,
                &shell,
                named(&plugins, "shell-guard"),
            ),
            (
                "secret-guard",
                &secrets,
                &build,
                named(&secret_plugins, "secret-guard"),
            ),
        ] {
            c.bench_function(&format!("pre-tool/{label}/{name}"), |b| {
                if label != "spare" {
                    b.to_async(&rt).iter(|| session.pre_tool(call));
                    return;
                }
                b.to_async(&rt).iter_custom(|iters| {
                    support::on_spares(iters, plugin, || session.pre_tool(call))
                });
            });
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
