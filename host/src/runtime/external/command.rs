//! The command runtime: one process per invocation, JSON on stdin, the answer on stdout.
//!
//! The process runs in its plugin's folder, in a process group of its own, with an environment
//! of only `PATH`, `HOME`, `LANG`, the `PALISADE_*` variables of the invocation and the names
//! its manifest lists under `env` — nothing else of the host's (no tokens, no keys). Its
//! deadline holds whatever it does — never read stdin, ignore SIGTERM, fork children that keep
//! the pipes open: at the deadline the whole group is killed (SIGKILL), and so it is when the
//! invocation is cancelled (its future dropped). When the process exits, any children it left
//! behind are killed too; one that escaped the group (`setsid`) and holds the pipes open gets
//! a short grace to let the answer through, and is then no longer waited for.

use super::wire::Raw;
use crate::failure::{Failure, FailureReason};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Most of stderr kept (the reason of a blocking exit, log lines).
const STDERR_MAX_BYTES: usize = 16 * 1024;
/// How long the answer may still be read once the process has exited: what it wrote is in the
/// pipe already; a child that escaped its group and holds the pipe open is not waited for.
const EXIT_GRACE: Duration = Duration::from_millis(100);
/// The host's variables every command hook gets (when the host has them).
pub(crate) const INHERITED_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// Kills a process group when dropped: on the deadline, on cancellation, after the exit.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// The hook's command: `argv` in `dir`, with no environment but [`INHERITED_ENV`], the names
/// in `inherit` and `env`; its pipes captured, in a process group of its own (killed as one),
/// and killed if its handle is dropped. A command line the shell would only split into words
/// is run without the shell when `plain` ([`plain_words`]); the flag says whether it is.
fn command(
    argv: &[String],
    dir: &Path,
    env: &[(&str, &str)],
    inherit: &[String],
    plain: bool,
) -> (Command, bool) {
    let inherited: Vec<(&str, std::ffi::OsString)> = INHERITED_ENV
        .iter()
        .copied()
        .chain(inherit.iter().map(String::as_str))
        .filter_map(|name| Some((name, std::env::var_os(name)?)))
        .collect();
    // The `PATH` the process gets: a manifest's `env` wins over the host's.
    let path = env
        .iter()
        .rev()
        .find(|(name, _)| *name == "PATH")
        .map(|(_, value)| std::ffi::OsString::from(value))
        .or_else(|| {
            inherited
                .iter()
                .rev()
                .find(|(name, _)| *name == "PATH")
                .map(|(_, value)| value.clone())
        });
    let words = match plain {
        true => plain_words(argv, path.as_deref(), dir, env, &inherited),
        false => None,
    };
    let without_shell = words.is_some();
    let mut command = match &words {
        Some((program, _)) => Command::new(program),
        None => Command::new(resolve(&argv[0], path.as_deref(), dir)),
    };
    command.env_clear();
    for (name, value) in inherited {
        command.env(name, value);
    }
    command.current_dir(dir).envs(env.iter().copied());
    match words {
        Some((_, words)) => {
            // As the shell would start it: its name as written, and the shell's `PWD`.
            #[cfg(unix)]
            command.arg0(words[0]);
            command.args(&words[1..]).env("PWD", dir);
        }
        None => {
            command.args(&argv[1..]);
        }
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    (command, without_shell)
}

/// The shell's own words: its keywords and the builtins of `dash` and `bash` (a builtin is
/// found before a program of the same name), none of which is a program to start.
const SHELL_WORDS: &[&str] = &[
    "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if",
    "in", "select", "then", "time", "until", "while", ".", ":", "alias", "bg", "bind", "break",
    "builtin", "caller", "cd", "chdir", "command", "compgen", "complete", "continue", "declare",
    "dirs", "disown", "echo", "enable", "eval", "exec", "exit", "export", "false", "fc", "fg",
    "getopts", "hash", "help", "history", "jobs", "kill", "let", "local", "logout", "popd",
    "printf", "pushd", "pwd", "read", "readonly", "return", "set", "shift", "shopt", "source",
    "suspend", "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias",
    "unset", "wait",
];

/// For a command line (`argv` = `sh -c LINE`) that the shell would only split into words and
/// start as a program — no quoting, expansion, glob, redirection, operator, assignment or
/// comment, only letters, digits and `_-./,:+@%=` (`=` not in the first word), and a first
/// word that is a path (`./hook.sh`) or names a program on `path` that is not one of the
/// shell's own words — the program and the words: it is started without the shell, as GNU
/// make starts such lines. The shell is a process more per invocation, which only starts
/// the hook's and waits for it. `None`: the shell runs the line (and so it
/// does when a program started this way cannot be: [`run`]).
///
/// What the program gets is what the shell would give it: the same words, its name as
/// written as `argv[0]`, the same environment and the `PWD` the shell adds (the plugin
/// folder, already canonical). Not when a `PWD` is passed on, which the shell would check.
fn plain_words<'a>(
    argv: &'a [String],
    path: Option<&std::ffi::OsStr>,
    dir: &Path,
    env: &[(&str, &str)],
    inherited: &[(&str, std::ffi::OsString)],
) -> Option<(std::path::PathBuf, Vec<&'a str>)> {
    let [sh, c, line] = argv else { return None };
    if sh != "sh" || c != "-c" || !cfg!(unix) {
        return None;
    }
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-./,:+@%=".contains(&b);
    if !line.bytes().all(|b| plain(b) || b == b' ' || b == b'\t') {
        return None;
    }
    let words: Vec<&str> = line.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
    let first = *words.first()?;
    let passes_pwd = env.iter().any(|(name, _)| *name == "PWD")
        || inherited.iter().any(|(name, _)| *name == "PWD");
    if first.contains('=') || passes_pwd {
        return None;
    }
    let program = if first.contains('/') {
        // As written: a relative path is found from the folder it runs in (the standard
        // library changes to it before the `exec`), as the shell finds it, and a script
        // sees it as its `$0`.
        first.into()
    } else if SHELL_WORDS.contains(&first) {
        return None;
    } else {
        let found = resolve(first, path, dir);
        // Not found: the shell reports it, as it always has.
        if found.as_os_str() == first {
            return None;
        }
        found
    };
    Some((program, words))
}

/// `program` as the process's `path` finds it (relative entries from `dir`, where it runs),
/// as a path: so that the standard library starts it with `posix_spawn` (a `vfork`), which it
/// does not when it must search a `PATH` it was given itself. A `fork` copies the page tables
/// of all the host's memory — every live instance's — which a `serve` holding many sessions
/// pays at every command hook (docs/performance.md, "Choices measured").
/// A program that is not found is left as it is, for the spawn to report.
fn resolve(program: &str, path: Option<&std::ffi::OsStr>, dir: &Path) -> std::path::PathBuf {
    if program.contains('/') {
        return program.into();
    }
    let Some(path) = path else {
        return program.into();
    };
    std::env::split_paths(path)
        .map(|entry| {
            // An empty entry is the working directory, as for `execvp`.
            dir.join(entry).join(program)
        })
        .find(|candidate| std::fs::metadata(candidate).is_ok_and(|m| executable(&m)))
        .unwrap_or_else(|| program.into())
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(meta: &std::fs::Metadata) -> bool {
    meta.is_file()
}

/// Runs `argv` in `dir` with `input` on stdin, under `timeout`; stdout bounded by
/// `max_output`. The environment is `env` and the host's values of `inherit`, nothing else.
pub(crate) async fn run(
    argv: &[String],
    dir: &Path,
    env: &[(&str, &str)],
    inherit: &[String],
    input: &[u8],
    timeout: Duration,
    max_output: usize,
) -> Result<Raw, Failure> {
    let (program, _) = argv.split_first().expect("validated: a non-empty argv");
    // A plain command line without the shell; should that program not start (not
    // executable, a script without a `#!` line, ...), the shell runs the line, and does
    // with it what it always did.
    let spawned = match command(argv, dir, env, inherit, true) {
        (mut plain, true) => match plain.spawn() {
            Ok(child) => Ok(child),
            Err(_) => command(argv, dir, env, inherit, false).0.spawn(),
        },
        (mut command, false) => command.spawn(),
    };
    let mut child = spawned.map_err(|e| {
        Failure::new(
            FailureReason::Unavailable,
            format!("cannot start `{program}` in {}: {e}", dir.display()),
        )
    })?;
    let group = Group(child.id());
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");

    let write = async move {
        // A program that never reads its stdin is fine: its exit breaks the pipe.
        let _ = stdin.write_all(input).await;
        drop(stdin);
    };
    let (mut out, mut out_overflow) = (Vec::new(), false);
    let (mut err, mut err_overflow) = (Vec::new(), false);
    let everything = async {
        let mut readers = std::pin::pin!(async {
            tokio::join!(
                write,
                read_bounded(stdout, max_output, &mut out, &mut out_overflow),
                read_bounded(stderr, STDERR_MAX_BYTES, &mut err, &mut err_overflow)
            )
        });
        let mut read = false;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                _ = &mut readers, if !read => read = true,
            }
        };
        // Children left behind would keep the pipes open: they go with their parent.
        kill_group(group.0);
        if !read {
            // One that escaped the group may still hold them: what the process wrote is in
            // the pipes already; it gets a moment to arrive, and no more.
            let _ = tokio::time::timeout(EXIT_GRACE, &mut readers).await;
        }
        status
    };
    let status = match tokio::time::timeout(timeout, everything).await {
        Ok(status) => status,
        Err(_) => {
            kill_group(group.0);
            return Err(Failure::new(
                FailureReason::Timeout,
                format!(
                    "passed its deadline of {} ms; its process group was killed",
                    timeout.as_millis()
                ),
            ));
        }
    };
    drop(group);
    let status = status
        .map_err(|e| Failure::new(FailureReason::Unavailable, format!("lost the process: {e}")))?;
    if out_overflow {
        return Err(Failure::new(
            FailureReason::InvalidResponse,
            format!("the answer is larger than payload_max_bytes ({max_output} bytes)"),
        ));
    }
    let _ = err_overflow;
    Ok(Raw {
        status: match status.code() {
            Some(code) => Ok(code),
            None => Err(describe_signal(&status)),
        },
        output: out,
        stderr: err,
    })
}

/// Reads `reader` to its end into `kept`, keeping at most `max` bytes; sets `overflow` when
/// there was more. Stops reading at the bound: the writer then gets a broken pipe. What was
/// read stays in `kept` if the read is cancelled.
async fn read_bounded(
    mut reader: impl AsyncRead + Unpin,
    max: usize,
    kept: &mut Vec<u8>,
    overflow: &mut bool,
) {
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if kept.len() + n > max {
                    let room = max - kept.len();
                    kept.extend_from_slice(&buf[..room]);
                    *overflow = true;
                    return;
                }
                kept.extend_from_slice(&buf[..n]);
            }
        }
    }
}

#[cfg(unix)]
fn kill_group(group: Option<u32>) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Some(pid) = group.and_then(|g| i32::try_from(g).ok()) {
        // Fails with ESRCH when the group is already gone: nothing to do then.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill_group(_group: Option<u32>) {
    // `kill_on_drop` ends the direct child; there is no process group to end.
}

fn describe_signal(status: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    format!("ended without an exit status ({status})")
}

#[cfg(all(test, unix))]
mod tests {
    use super::{plain_words, resolve};
    use std::path::Path;

    /// What runs without the shell: the words of a line the shell would only split, its
    /// program a path or found on the path; anything else of the shell's keeps the shell.
    #[test]
    fn only_a_line_the_shell_would_only_split_into_words_runs_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for name in ["my-hook", "echo", "exit"] {
            let file = bin.join(name);
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::ffi::OsString::from(bin.as_os_str());
        let plain = |line: &str| {
            let argv = ["sh".to_string(), "-c".to_string(), line.to_string()];
            plain_words(&argv, Some(&path), dir.path(), &[], &[])
                .map(|(program, words)| (program, words.join("|")))
        };
        assert_eq!(
            plain("./hook.sh"),
            Some(("./hook.sh".into(), "./hook.sh".into()))
        );
        assert_eq!(
            plain("  my-hook\t--mode=strict a,b:c+d@e%f  "),
            Some((
                bin.join("my-hook"),
                "my-hook|--mode=strict|a,b:c+d@e%f".into()
            ))
        );
        assert_eq!(
            plain("/usr/bin/env python3 x.py"),
            Some(("/usr/bin/env".into(), "/usr/bin/env|python3|x.py".into()))
        );
        for line in [
            // The shell's own words, even where a program of the name exists.
            "echo hi",
            "exit 2",
            "cd sub",
            "! ./hook.sh",
            // Not found: the shell says so.
            "no-such-hook",
            // Assignments, expansions, globs, quoting, redirections, operators, comments.
            "MODE=x ./hook.sh",
            "./hook.sh $HOME",
            "./hook.sh ~/x",
            "./hook.sh *.json",
            "./hook.sh x?",
            "./hook.sh [ab]",
            "./hook.sh 'a b'",
            "./hook.sh \"a b\"",
            "./hook.sh a\\ b",
            "./hook.sh > out.txt",
            "./hook.sh < in.txt",
            "./hook.sh | tee log",
            "./hook.sh; echo",
            "./hook.sh && echo",
            "./hook.sh &",
            "./hook.sh # a comment",
            "(./hook.sh)",
            "{ ./hook.sh; }",
            "./hook.sh `id`",
            "./hook.sh\n./other.sh",
            "./hook.sh ^x",
            "./hook.sh caf\u{e9}",
            "",
            "   ",
        ] {
            assert_eq!(plain(line), None, "{line:?}");
        }
        // Not a shell line; or a `PWD` passed on, which the shell would check.
        let argv = ["./hook.sh".to_string()];
        assert_eq!(plain_words(&argv, Some(&path), dir.path(), &[], &[]), None);
        let argv = ["sh".to_string(), "-c".to_string(), "./hook.sh".to_string()];
        let pwd = [("PWD", std::ffi::OsString::from("/"))];
        assert_eq!(plain_words(&argv, Some(&path), dir.path(), &[], &pwd), None);
        assert_eq!(
            plain_words(&argv, Some(&path), dir.path(), &[("PWD", "/")], &[]),
            None
        );
    }

    #[test]
    fn a_program_is_resolved_against_the_hooks_path_so_it_is_spawned_not_forked() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let hook = bin.join("my-hook");
        std::fs::write(&hook, "#!/bin/sh\n").unwrap();
        let path = std::ffi::OsString::from(format!("/nonexistent:{}", bin.display()));
        // Not executable: not the program.
        assert_eq!(
            resolve("my-hook", Some(&path), dir.path()),
            Path::new("my-hook")
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve("my-hook", Some(&path), dir.path()), hook);
        // Relative entries are the process's: from its folder.
        assert_eq!(
            resolve("my-hook", Some("bin".as_ref()), dir.path()),
            dir.path().join("bin/my-hook")
        );
        // A path stays as it is; without a PATH, or not found, the name is left to the spawn.
        assert_eq!(
            resolve("./hook.sh", Some(&path), dir.path()),
            Path::new("./hook.sh")
        );
        assert_eq!(resolve("sh", None, dir.path()), Path::new("sh"));
        assert_eq!(
            resolve("no-such-program", Some(&path), dir.path()),
            Path::new("no-such-program")
        );
    }
}
