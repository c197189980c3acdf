//! `palisade check DIR`.

use crate::output::table;
use palisade::{Capability, Error, Mode, Plugins, Point};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Validate every plugin of a directory and print what each hook may do.
#[derive(clap::Args)]
pub struct CheckCommand {
    /// The plugin directory (one folder per plugin, each with a plugin.toml).
    dir: PathBuf,
    /// Refuse hooks that fail open (`on_failure = "allow"` on a guard, a transform, a
    /// wrapper or a steer), as every command does when PALISADE_STRICT=1.
    #[arg(long)]
    strict: bool,
}

impl CheckCommand {
    /// Loads the directory and prints its hooks, or its problems (exit 1).
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        check(&self.dir, self.strict)
    }
}

fn check(dir: &Path, strict: bool) -> anyhow::Result<ExitCode> {
    let mut builder = crate::cache::host_builder();
    if strict {
        builder = builder.forbid_fail_open(true);
    }
    let host = builder.build()?;
    let plugins = match host.load_dir(dir) {
        Ok(plugins) => plugins,
        Err(Error::Invalid { problems }) => {
            eprintln!(
                "{} problem{} in {}:",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                dir.display()
            );
            for problem in &problems {
                eprintln!("  - {}", crate::output::printable(&problem.to_string()));
            }
            return Ok(ExitCode::FAILURE);
        }
        Err(err) => return Err(err.into()),
    };
    let (hooks_table, hooks) = hooks_table(&plugins);
    print!("{hooks_table}");
    println!();
    print!("{}", plugins_table(&plugins));
    print_notes(&plugins);
    if plugins.iter().any(|p| p.manifest().state.is_some()) {
        println!(
            "plugin state (the bridges' and `palisade serve`'s default) is kept in {}",
            palisade::state::StateStore::default().describe()
        );
    }
    print_warnings(&plugins);
    let points: std::collections::BTreeSet<Point> = plugins
        .iter()
        .flat_map(|p| p.manifest().hooks.iter().map(|h| h.point))
        .collect();
    println!(
        "\nok: {} plugin{}, {hooks} hook{} on {} point{}",
        plugins.iter().count(),
        if plugins.iter().count() == 1 { "" } else { "s" },
        if hooks == 1 { "" } else { "s" },
        points.len(),
        if points.len() == 1 { "" } else { "s" },
    );
    Ok(ExitCode::SUCCESS)
}

/// One row per hook: what it may do, how it fails, its limits; and the number of hooks.
fn hooks_table(plugins: &Plugins) -> (String, usize) {
    let mut rows = vec![
        [
            "PLUGIN",
            "POINT",
            "CAPABILITY",
            "MODE",
            "PRIORITY",
            "MATCHER",
            "ON FAILURE",
            "LIMITS",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let mut hooks = 0;
    for plugin in plugins.iter() {
        for hook in &plugin.manifest().hooks {
            hooks += 1;
            let caps: Vec<_> = hook.capabilities.iter().map(|c| c.as_str()).collect();
            rows.push(vec![
                plugin.name().to_string(),
                hook.point.to_string(),
                caps.join("+"),
                // A shadow hook runs in the foreground, and what it says is only recorded.
                if hook.enforce {
                    hook.mode.as_str().to_string()
                } else {
                    "shadow".to_string()
                },
                hook.priority.to_string(),
                hook.matcher.clone().unwrap_or_else(|| "*".into()),
                // Only a hook that can change the outcome, at a point with a closed answer,
                // fails closed; others' failures are recorded (a shadow hook's as `would_deny`).
                if hook.enforce && hook.failure_decides() {
                    hook.on_failure.as_str().to_string()
                } else {
                    "record".to_string()
                },
                if plugin.manifest().runtime.family() == "wasm" {
                    format!(
                        "{} ms, {} fuel, {} MiB",
                        hook.limits.timeout.as_millis(),
                        hook.limits.fuel,
                        hook.limits.memory_bytes / (1024 * 1024)
                    )
                } else {
                    format!(
                        "{} ms, {} KiB payload",
                        hook.limits.timeout.as_millis(),
                        hook.limits.payload_max_bytes / 1024
                    )
                },
            ]);
        }
    }
    (table(&rows), hooks)
}

/// One row per plugin: its runtime, instance lifetime, component and exports.
fn plugins_table(plugins: &Plugins) -> String {
    let mut rows = vec![
        [
            "PLUGIN", "RUNTIME", "INSTANCE", "RUNS", "SIZE", "SHA256", "EXPORTS", "GRANTS",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for plugin in plugins.iter() {
        let mut exports: Vec<_> = plugin
            .exported_interfaces()
            .iter()
            .map(|i| i.name())
            .collect();
        if plugin.prepares() {
            exports.push("prepare");
        }
        let runtime = &plugin.manifest().runtime;
        let wasm = runtime.family() == "wasm";
        rows.push(vec![
            plugin.name().to_string(),
            if wasm {
                runtime.family().to_string()
            } else {
                // An external hook's answers are read as its protocol says.
                format!(
                    "{} ({} protocol)",
                    runtime.family(),
                    plugin.manifest().protocol.as_str()
                )
            },
            if wasm {
                plugin.manifest().instance.as_str()
            } else {
                "per-call"
            }
            .to_string(),
            runtime.target(),
            plugin
                .size()
                .map_or("-".into(), |s| format!("{} KiB", s.div_ceil(1024))),
            plugin.sha256().map_or("-".into(), |s| s[..12].to_string()),
            exports.join(", "),
            grants(plugin.manifest()),
        ]);
    }
    table(&rows)
}

/// What a plugin is given beyond compute, `-` for nothing.
fn grants(manifest: &palisade::manifest::Manifest) -> String {
    let mut grants = Vec::new();
    if let Some(state) = &manifest.state {
        let scopes: Vec<&str> = [("session", state.session), ("global", state.global)]
            .into_iter()
            .filter_map(|(name, granted)| granted.then_some(name))
            .collect();
        let shared = state
            .shared
            .as_ref()
            .map_or(String::new(), |domain| format!(", shared as {domain}"));
        grants.push(format!(
            "state: {} (≤ {} keys, ≤ {} bytes each scope{shared})",
            scopes.join(" + "),
            state.max_keys,
            state.max_bytes
        ));
    }
    let wasm = manifest.runtime.family() == "wasm";
    if wasm && !manifest.env.is_empty() {
        grants.push(format!("env: {}", manifest.env.join(", ")));
    }
    for file in &manifest.files {
        grants.push(format!("files: {} → {} (read-only)", file.path, file.guest));
    }
    for origin in &manifest.http {
        grants.push(format!("http: {origin}"));
    }
    if grants.is_empty() {
        "-".into()
    } else {
        grants.join("; ")
    }
}

/// What was skipped, and which plugin folders are symlinks.
fn print_notes(plugins: &Plugins) {
    for skipped in plugins.skipped() {
        println!(
            "skipped {} ({})",
            crate::output::printable(&skipped.path.display().to_string()),
            skipped.reason
        );
    }
    for plugin in plugins.iter() {
        if let Some(target) = plugin.symlink_target() {
            println!(
                "{} is a symlink to {}: followed",
                crate::output::printable(&plugin.dir().display().to_string()),
                crate::output::printable(&target.display().to_string())
            );
        }
    }
}

/// Configurations that load but may not do what the operator means.
fn print_warnings(plugins: &Plugins) {
    // A bridged event runs its points' foreground hooks one after another, within one budget.
    let mut events: Vec<(&str, &[Point])> = palisade::bridge::Dialect::ALL
        .iter()
        .flat_map(|dialect| dialect.hooked_events())
        .map(|event| (event.name, event.meaning.points()))
        .collect();
    events.sort_unstable();
    events.dedup();
    for (event, points) in events {
        let total: u128 = points
            .iter()
            .flat_map(|point| plugins.hooks(*point))
            .filter(|(_, hook)| hook.mode == Mode::Foreground && !hook.point.is_committed_fact())
            .map(|(_, hook)| hook.limits.timeout.as_millis())
            .sum();
        if total > u128::from(crate::hook_io::DEFAULT_BUDGET_MS) {
            println!(
                "warning: the foreground hooks of `{event}` may take {total} ms in all, past a \
                 bridge's budget of {} ms: past it the event is refused (fail closed); lower \
                 their timeout_ms, or raise the bridge's --budget-ms",
                crate::hook_io::DEFAULT_BUDGET_MS
            );
        }
    }
    for plugin in plugins.iter() {
        let manifest = plugin.manifest();
        for hook in &manifest.hooks {
            let held: Vec<_> = hook
                .capabilities
                .iter()
                .filter(|c| **c != Capability::Observe)
                .map(|c| c.as_str())
                .collect();
            if hook.enforce && hook.fails_open() {
                println!(
                    "warning: {}/{} holds `{}` and fails open (on_failure = \"allow\"): when it \
                     fails (times out, traps, answers garbage), what it guards goes through \
                     unchecked; PALISADE_STRICT=1 (or `check --strict`) refuses such a hook",
                    plugin.name(),
                    hook.point,
                    held.join("+")
                );
            }
            if manifest.runtime.family() != "wasm"
                && manifest.protocol == palisade::manifest::Protocol::ClaudeCode
                && hook.has(Capability::Guard)
            {
                println!(
                    "warning: {}/{} is a guard speaking Claude Code's lenient protocol: an exit \
                     status or plain text counts as its answer, and its denials carry no \
                     reason_code or payload; `protocol = \"palisade\"` takes only a typed \
                     decision",
                    plugin.name(),
                    hook.point,
                );
            }
        }
    }
}
