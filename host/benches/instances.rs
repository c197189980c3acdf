//! Cost of one `pre-tool` dispatch by plugin language and instance lifetime, with the
//! instance pool (the default) and without it (every instance allocated on demand):
//!
//! - `warm`: a per-session instance, reused;
//! - `fresh`: a per-call instance, made for the call and dropped after it (a host without
//!   spare instances);
//! - `spare`: a per-call instance made ahead of the call, after the call before
//!   (`HostBuilder::spare_instances`, the default): each call is timed once it is ready, as
//!   an agent's calls, spaced out, find it.
//!
//! The plugins are the examples: `shell-guard` (Rust), `url-guard` (Python) and the
//! JavaScript `path-guard`, as `scripts/build-examples.sh` builds them (run it first).
//!
//! Run: `cargo bench -p palisade --bench instances`.

use criterion::{Criterion, criterion_group, criterion_main};
use palisade::{Host, PreToolDecision, ToolCall};
use serde_json::json;
use std::path::{Path, PathBuf};

mod support;

fn example(path: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../example-plugins")
        .join(path);
    let manifest = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    let wasm = manifest
        .lines()
        .find_map(|l| l.strip_prefix("wasm = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap();
    assert!(
        dir.join(wasm).is_file(),
        "example-plugins/{path} is not built: run `scripts/build-examples.sh` first"
    );
    dir
}

/// A folder with the example at `path`, its instance lifetime set to `lifetime`.
fn plugin_dir(path: &str, lifetime: &str) -> tempfile::TempDir {
    let from = example(path);
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join(from.file_name().unwrap());
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    let manifest = to.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text
        .lines()
        .filter(|l| !l.starts_with("instance = "))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&manifest, format!("instance = \"{lifetime}\"\n{text}\n")).unwrap();
    dir
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let call = ToolCall::new(
        "t",
        "Bash",
        json!({ "command": "curl -s https://docs.rs/serde > /tmp/page.html" }),
    );
    // Each component compiles once (the Python one takes seconds), whatever the filter.
    let cache = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("instances");
    group.sample_size(20);
    for (pool, slots) in [("pool", palisade::DEFAULT_INSTANCE_POOL), ("no pool", 0)] {
        let host = |spares: bool| {
            Host::builder()
                .instance_pool(slots)
                .cache_dir(cache.path())
                .spare_instances(spares)
                .build()
                .unwrap()
        };
        // `fresh` instantiates for each call; `spare` takes an instance made ahead of it.
        let (host, no_spares) = (host(true), host(false));
        for (language, path) in [
            ("rust", "shell-guard"),
            ("python", "url-guard"),
            ("js", "languages/js/path-guard"),
        ] {
            for (label, lifetime, host) in [
                ("warm", "per-session", &host),
                ("fresh", "per-call", &no_spares),
                ("spare", "per-call", &host),
            ] {
                let dir = plugin_dir(path, lifetime);
                let plugins = host.load_dir(dir.path()).unwrap();
                let plugin = plugins.iter().next().unwrap();
                let session = plugins.session("bench");
                rt.block_on(async {
                    assert_eq!(session.pre_tool(&call).await, PreToolDecision::Allow);
                });
                group.bench_function(format!("{language}/{label}/{pool}"), |b| {
                    if label == "spare" {
                        b.to_async(&rt).iter_custom(|iters| {
                            support::on_spares(iters, plugin, || session.pre_tool(&call))
                        });
                    } else {
                        b.to_async(&rt).iter(|| session.pre_tool(&call));
                    }
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
