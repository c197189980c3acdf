//! Memory per live session of `palisade serve`: for each plugin set, a server is started,
//! warmed with one session, then `PALISADE_DENSITY_SESSIONS` sessions (default 1,000) each
//! send one `PreToolUse` of `Bash` that every plugin of the set judges (so each session holds
//! a used per-session instance of each). Reported, after the warm-up and at the end, and the
//! difference per session: the server's PSS (its memory, each page shared by N mappings
//! counted 1/N) and its RSS. RSS counts a page of a component's initial memory once per
//! instance that maps it copy-on-write, although there is one copy: it overstates. The
//! kernel's memory accounting (cgroups) counts such a page once, as PSS does.
//!
//! The sets: the bundled Rust guards (shell-guard, secret-guard), the Python `url-guard`, the
//! JavaScript `path-guard`, and the whole `example-plugins/` directory. The Python and
//! JavaScript components are built by `scripts/build-examples.sh`; run it first.
//!
//! Run: `cargo bench -p palisade-cli --bench density` (`PALISADE_INSTANCE_POOL=0` for no
//! instance pool).

#[path = "../tests/support/server.rs"]
mod server;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The process's (PSS, RSS), in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    let field = |name: &str| {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("Pss:"), field("Rss:"))
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../example-plugins")
}

/// A folder holding the plugins of `example-plugins/` named by `paths`.
fn set_of(dir: &Path, name: &str, paths: &[&str]) -> PathBuf {
    let set = dir.join(name);
    for path in paths {
        let from = examples().join(path);
        let to = set.join(Path::new(path).file_name().unwrap());
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
    }
    set
}

fn main() {
    // `cargo bench` passes `--bench`; a filter is not supported.
    let sessions: usize = std::env::var("PALISADE_DENSITY_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    for built in [
        "shell-guard/shell_guard.wasm",
        "url-guard/url_guard.wasm",
        "languages/js/path-guard/path_guard.wasm",
    ] {
        assert!(
            examples().join(built).is_file(),
            "example-plugins/{built} is not built: run `scripts/build-examples.sh` first"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let sets = [
        (
            "Rust: shell-guard + secret-guard",
            set_of(dir.path(), "rust", &["shell-guard", "secret-guard"]),
        ),
        (
            "Python: url-guard",
            set_of(dir.path(), "python", &["url-guard"]),
        ),
        (
            "JavaScript: path-guard",
            set_of(dir.path(), "js", &["languages/js/path-guard"]),
        ),
        ("example-plugins/ (all)", examples()),
    ];
    let max = (sessions + 10).to_string();
    println!(
        "{:<34} {:>18} {:>18} {:>22} {:>8}",
        "plugins", "PSS (RSS) warm", "PSS (RSS) end", "PSS (RSS) per session", "took"
    );
    let cache = dir.path().join("cache");
    for (name, plugins) in &sets {
        // Compiled first, so that the server's memory holds no compiler's leftovers.
        let checked = std::process::Command::new(env!("CARGO_BIN_EXE_palisade"))
            .arg("check")
            .arg(plugins)
            .env("PALISADE_CACHE_DIR", &cache)
            .output()
            .unwrap();
        assert!(checked.status.success(), "{checked:?}");
        let server = server::Server::start(
            plugins,
            &["--max-sessions", &max, "--state", "memory"],
            &[(
                "PALISADE_CACHE_DIR",
                &dir.path().join("cache").to_string_lossy(),
            )],
        );
        let event = |session: &str| {
            json!({
                "session_id": session,
                "transcript_path": "/tmp/t.jsonl",
                "cwd": "/tmp",
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_input": {
                    "command": "curl -s https://docs.rs/serde/latest/serde/ > /tmp/page.html"
                },
                "tool_use_id": "toolu_density",
            })
        };
        let warm = server.event(event("warm-up"));
        assert_eq!(warm.status, 200, "{warm:?}");
        std::thread::sleep(Duration::from_millis(200));
        let pid = server.child.id();
        let before = memory_kib(pid);
        let started = Instant::now();
        for i in 0..sessions {
            let answer = server.event(event(&format!("session-{i}")));
            assert_eq!(answer.status, 200, "{answer:?}");
            assert!(
                !answer.body.contains("\"deny\""),
                "{name}: the event was denied: {}",
                answer.body
            );
        }
        let took = started.elapsed();
        std::thread::sleep(Duration::from_millis(200));
        let after = memory_kib(pid);
        let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / sessions as f64 / 1024.0;
        println!(
            "{:<34} {:>6} ({:>5}) MiB {:>6} ({:>5}) MiB {:>8.3} ({:>6.3}) MiB {:>6.1} s",
            name,
            before.0 / 1024,
            before.1 / 1024,
            after.0 / 1024,
            after.1 / 1024,
            per(after.0, before.0),
            per(after.1, before.1),
            took.as_secs_f64()
        );
    }
    println!("({sessions} sessions; set PALISADE_DENSITY_SESSIONS for another count)");
}
