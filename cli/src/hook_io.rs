//! The process side of a command hook: the event read from stdin within a bound, the answer
//! written on stdout and stderr, the exit.

use palisade::bridge::Reply;
use std::io::{Read, Write};

/// The largest hook event read from stdin.
const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;
/// The default budget of one bridged event: well under the agents' hook timeouts (Claude
/// Code's is 60 s or more), so a slow or stuck plugin is answered for, not waited out.
pub const DEFAULT_BUDGET_MS: u64 = 10_000;

/// The hook event on stdin, at most [`MAX_INPUT_BYTES`], read on a blocking thread (so a
/// budget around it can still answer).
pub async fn read_stdin() -> Result<Vec<u8>, String> {
    tokio::task::spawn_blocking(|| {
        let mut raw = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES)
            .read_to_end(&mut raw)
            .map(|_| raw)
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|read| read.map_err(|e| e.to_string()))
}

/// The hook event on stdin, at most [`MAX_INPUT_BYTES`], read on this thread by `deadline`
/// (`None`: it had not all come by then — a writer that never closes stdin). For a process
/// with nothing else to do on this thread meanwhile: no thread is started, and the blocking
/// threads are left to work that can go on while the event is read.
pub fn read_stdin_by(deadline: std::time::Instant) -> Option<Result<Vec<u8>, String>> {
    use nix::errno::Errno;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        let wait = PollTimeout::try_from(left.max(std::time::Duration::from_millis(1)))
            .unwrap_or(PollTimeout::MAX);
        match poll(&mut [PollFd::new(fd, PollFlags::POLLIN)], wait) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(err) => return Some(Err(err.to_string())),
        }
        // Readable (or at its end, or failed): this read does not block. Straight from the
        // descriptor: Stdin's own buffer would hold bytes that poll no longer sees.
        let room = usize::try_from(MAX_INPUT_BYTES)
            .unwrap_or(usize::MAX)
            .saturating_sub(raw.len())
            .min(buf.len());
        match nix::unistd::read(fd, &mut buf[..room]) {
            Ok(0) => return Some(Ok(raw)),
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.len() as u64 >= MAX_INPUT_BYTES {
                    return Some(Ok(raw));
                }
            }
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            Err(err) => return Some(Err(err.to_string())),
        }
    }
}

/// Writes the reply: the JSON on stdout, flushed, and the message on stderr.
pub fn write(reply: &Reply) {
    if let Some(json) = &reply.stdout {
        let mut out = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut out, json);
        let _ = writeln!(out);
        let _ = out.flush();
    }
    if let Some(message) = &reply.stderr {
        eprintln!("{message}");
    }
}

/// Writes the reply and exits at once, once the audit log has taken its last lines (within
/// `flush_within`: what is left of the event's budget, so that the process is gone before the
/// agent's own timeout, which would take it as no objection): tearing the engine and its
/// compiled code down would only add to the agent's wait.
pub fn answer(reply: Reply, flush_within: std::time::Duration) -> ! {
    write(&reply);
    crate::audit::flush(flush_within);
    crate::telemetry::shutdown();
    exit_now(reply.exit_code)
}

/// Ends a hook process that has answered, its audit log and exporters flushed: what
/// `std::process::exit` would add — the C library's exit handlers, among them the allocator's,
/// which gives back its free pages, page by page — only adds to the agent's wait.
pub fn exit_now(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process at once; no code of this process runs after it.
    #[expect(unsafe_code, reason = "_exit has no safe wrapper in std or nix")]
    unsafe {
        libc::_exit(code)
    }
}

/// The signals an agent ends its hooks with when it exits.
fn ended_by() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set
}

/// Holds back the signals an agent ends its hooks with (`SIGTERM`, `SIGHUP`) until the event
/// says whether the agent waits for the answer: called first thing, before any thread starts
/// (threads inherit the mask), so that one that comes while the process starts and reads the
/// event waits, pending, for [`outlive_the_agent`] or [`end_with_the_agent`]. An agent that
/// does not wait (Claude Code at `StopFailure`) ends its hooks as it exits, often before a
/// hook has read its event.
pub fn hold_the_agents_signals() {
    use nix::sys::signal::{SigmaskHow, pthread_sigmask};
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ended_by()), None);
}

/// Ignores the signals an agent ends its hooks with when it exits (`SIGTERM`, `SIGHUP`), one
/// already held back too ([`hold_the_agents_signals`]): at an event it does not wait for, the
/// bridge finishes within its own budget instead.
pub fn outlive_the_agent() {
    use nix::sys::signal::{SigHandler, SigmaskHow, pthread_sigmask, signal};
    for ended_by in ended_by().iter() {
        // SAFETY: `SigIgn` runs no handler code; nothing else in the process sets these.
        #[expect(
            unsafe_code,
            reason = "nix's `signal` is unsafe for handlers; SIG_IGN is none"
        )]
        let _ = unsafe { signal(ended_by, SigHandler::SigIgn) };
    }
    let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&ended_by()), None);
}

/// Lets the signals an agent ends its hooks with act again, one held back meanwhile at once
/// ([`hold_the_agents_signals`]): at an event the agent waits for, its hook ends with it.
pub fn end_with_the_agent() {
    use nix::sys::signal::{SigmaskHow, pthread_sigmask};
    let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&ended_by()), None);
}
