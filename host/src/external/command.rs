//! The command runtime: one process per invocation, JSON on stdin, the answer on stdout.
//!
//! The process runs in its plugin's folder, in a process group of its own. Its deadline holds
//! whatever it does — never read stdin, ignore SIGTERM, fork children that keep the pipes
//! open: at the deadline the whole group is killed (SIGKILL). When the process exits, any
//! children it left behind are killed too: a hook's processes do not outlive its invocation.

use super::Raw;
use crate::failure::{Failure, FailureReason};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Most of stderr kept (the reason of a blocking exit, log lines).
const STDERR_MAX_BYTES: usize = 16 * 1024;

/// Runs `argv` in `dir` with `input` on stdin, under `timeout`; stdout bounded by
/// `max_output`.
pub(crate) async fn run(
    argv: &[String],
    dir: &Path,
    env: &[(&str, &str)],
    input: &[u8],
    timeout: Duration,
    max_output: usize,
) -> Result<Raw, Failure> {
    let (program, args) = argv.split_first().expect("validated: a non-empty argv");
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn().map_err(|e| {
        Failure::new(
            FailureReason::Unavailable,
            format!("cannot start `{program}` in {}: {e}", dir.display()),
        )
    })?;
    let group = child.id();
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");

    let write = async move {
        // A program that never reads its stdin is fine: its exit breaks the pipe.
        let _ = stdin.write_all(input).await;
        drop(stdin);
    };
    let exited = async {
        let status = child.wait().await;
        // Children left behind would keep the pipes open: they go with their parent.
        kill_group(group);
        status
    };
    let everything = async {
        tokio::join!(
            exited,
            write,
            read_bounded(stdout, max_output),
            read_bounded(stderr, STDERR_MAX_BYTES)
        )
    };
    let (status, (), stdout, stderr) = match tokio::time::timeout(timeout, everything).await {
        Ok(done) => done,
        Err(_) => {
            kill_group(group);
            return Err(Failure::new(
                FailureReason::Timeout,
                format!(
                    "passed its deadline of {} ms; its process group was killed",
                    timeout.as_millis()
                ),
            ));
        }
    };
    let status = status
        .map_err(|e| Failure::new(FailureReason::Unavailable, format!("lost the process: {e}")))?;
    let (stdout, stdout_overflow) = stdout;
    let (stderr, _) = stderr;
    if stdout_overflow {
        return Err(Failure::new(
            FailureReason::InvalidResponse,
            format!("the answer is larger than payload_max_bytes ({max_output} bytes)"),
        ));
    }
    Ok(Raw {
        status: match status.code() {
            Some(code) => Ok(code),
            None => Err(describe_signal(&status)),
        },
        output: stdout,
        stderr,
    })
}

/// Reads `reader` to its end, keeping at most `max` bytes; says whether there was more.
/// Stops reading at the bound: the writer then gets a broken pipe.
async fn read_bounded(mut reader: impl AsyncRead + Unpin, max: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return (kept, false),
            Ok(n) => {
                if kept.len() + n > max {
                    let room = max - kept.len();
                    kept.extend_from_slice(&buf[..room]);
                    return (kept, true);
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
