//! The proxy's child (the agent of `acp`, the server of `mcp`) and everything it starts: how
//! it is started, how its end is waited for, and how nothing it started outlives the proxy.
//!
//! On Linux the child runs under a small reaper: a fork of the proxy, made between the fork
//! and the exec of the child, that is the subreaper of the child's descendants. A process the
//! child leaves behind (a shell tool's background command whose shell exited) is reparented
//! to the reaper and waited for there when it ends, instead of staying a zombie of the proxy
//! until the proxy exits. The proxy cannot wait for such orphans itself: it also runs command
//! hooks, and a wait for "any child" could take a hook's exit status from the hook's runner.

/// Starts the proxy's child, `what` (`command` and its arguments): its stdin and stdout piped
/// to the proxy, its stderr the proxy's own, in a process group of its own (see [`reap`]),
/// killed when the proxy goes.
pub fn spawn_child(command: &[String], what: &str) -> anyhow::Result<tokio::process::Child> {
    use anyhow::Context as _;
    // What the child starts in a session or group of its own, and leaves behind when it
    // dies, becomes the proxy's: [`exit`](super::exit) finds it to end it.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let mut spawning = tokio::process::Command::new(&command[0]);
    spawning
        .args(&command[1..])
        .process_group(0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    // SAFETY: `under_reaper` makes only async-signal-safe calls and allocates nothing.
    #[cfg(target_os = "linux")]
    #[expect(
        unsafe_code,
        reason = "a fork between fork and exec has no safe wrapper"
    )]
    unsafe {
        spawning.pre_exec(under_reaper);
    }
    let child = spawning
        .spawn()
        .with_context(|| format!("cannot start {what} `{}`", command[0]))?;
    if let Some(group) = child.id().and_then(|id| i32::try_from(id).ok()) {
        GROUPS.lock().unwrap_or_else(|e| e.into_inner()).push(group);
    }
    Ok(child)
}

/// The process groups of the children started by [`spawn_child`]: [`exit`](super::exit) ends them.
static GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// How long a child has to exit by itself, once the proxy exits (its input closed, see
/// [`Writer::close`](super::Writer::close)) or once its output ended ([`reap`]), before its group is killed.
const END_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Ends the children of [`GROUPS`] and what they started: each child gets up to
/// [`END_GRACE`] to exit by itself (its input closed: it has what was sent to it), and then
/// whatever is left of its group is killed. Whichever side the proxy exits from (the editor or
/// client gone, or the agent or server), nothing the child started outlives it: a child killed
/// by someone else leaves its own children behind, which hold its session's files and go on
/// running.
pub(super) fn end_children() {
    use nix::errno::Errno;
    use nix::sys::signal::{Signal, killpg};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::Pid;
    let groups = std::mem::take(&mut *GROUPS.lock().unwrap_or_else(|e| e.into_inner()));
    // A group's leader is the child itself: it has exited once it can be reaped (or was).
    let running = |group: i32| match waitpid(Pid::from_raw(group), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => true,
        Ok(_) | Err(_) => false,
    };
    let deadline = std::time::Instant::now() + END_GRACE;
    let mut waiting = groups.clone();
    while !waiting.is_empty() && std::time::Instant::now() < deadline {
        waiting.retain(|&group| running(group));
        if !waiting.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    for group in groups {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
    #[cfg(target_os = "linux")]
    kill_descendants();
}

/// Kills every process descended from this one: what a child started in a session or group
/// of its own (a shell tool's command, say), which killing the child's group misses. The
/// proxy is their subreaper ([`spawn_child`]), so they stay its descendants when the child
/// that started them has died. Read from `/proc`, until a pass finds none (a process may fork
/// while the table is read).
#[cfg(target_os = "linux")]
fn kill_descendants() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let me = std::process::id() as i32;
    for _ in 0..5 {
        let mut parents: Vec<(i32, i32)> = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`: the name may hold spaces and parentheses.
            let after_name = stat
                .rfind(')')
                .map(|at| &stat[at + 1..])
                .unwrap_or_default();
            let mut fields = after_name.split_whitespace();
            // A zombie has died already.
            if let (Some(state), Some(parent)) = (fields.next(), fields.next())
                && state != "Z"
                && let Ok(parent) = parent.parse::<i32>()
            {
                parents.push((pid, parent));
            }
        }
        let mut descendants = vec![me];
        let mut next = 0;
        while next < descendants.len() {
            let parent = descendants[next];
            for (pid, _) in parents.iter().filter(|(_, p)| *p == parent) {
                if !descendants.contains(pid) {
                    descendants.push(*pid);
                }
            }
            next += 1;
        }
        if descendants.len() == 1 {
            return;
        }
        for pid in &descendants[1..] {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// How the child ended: its exit status, waited for [`END_GRACE`] at most (then it is killed).
/// What it started goes with it (its process group is killed): nothing of the child's outlives
/// the proxy holding its output or the files it had open.
pub async fn reap(child: &mut tokio::process::Child) -> String {
    let group = child.id();
    let status = match tokio::time::timeout(END_GRACE, child.wait()).await {
        Ok(Ok(status)) => status.to_string(),
        _ => {
            let _ = child.kill().await;
            "killed".to_string()
        }
    };
    if let Some(group) = group.and_then(|g| i32::try_from(g).ok()) {
        use nix::sys::signal::{Signal, killpg};
        let _ = killpg(nix::unistd::Pid::from_raw(group), Signal::SIGKILL);
    }
    status
}

/// Runs in the forked child before its exec: forks once more. The new process returns and goes
/// on to exec the command; this one becomes the reaper (see the module's head). It is the
/// subreaper of the command's descendants, closes every file (the command's pipes included,
/// so that the proxy sees their ends when the command and its descendants close them), waits
/// for every process that becomes its child, and exits as the command did once the command
/// has ended. The proxy sees the reaper as its child: same process group, same exit status.
///
/// Only async-signal-safe calls: the proxy that forked is multi-threaded.
#[cfg(target_os = "linux")]
#[expect(
    unsafe_code,
    reason = "fork, waitpid and _exit in a forked child: libc only"
)]
fn under_reaper() -> std::io::Result<()> {
    // SAFETY: plain system calls on this process; nothing is allocated or locked.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let command = libc::fork();
        if command < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if command == 0 {
            // The command: on to its exec.
            return Ok(());
        }
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            for fd in 0..4096 {
                libc::close(fd);
            }
        }
        let mut status = 0;
        loop {
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == command {
                break;
            }
            if pid < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            // Dies of the same signal, without a core file of the proxy's memory.
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(signal, libc::SIG_DFL);
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::sigprocmask(libc::SIG_UNBLOCK, &all, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}
