//! A cold component cache, warmed off the event's path: when an event's budget runs out while
//! a component compiles, one background `palisade check` of the plugin directory compiles it
//! into the cache, and the events after it wait for that compile instead of starting their own.

use std::path::Path;

/// After an event ran out of its budget while a component compiled: compiles the components
/// of `dir` into the cache in a process of its own (`palisade check DIR`, its output
/// discarded, in a process group of its own, which an agent that kills the hook's group
/// leaves be), unless one is already at it. Otherwise no event would ever find them compiled:
/// each would start the same compile and run out of its budget the same way, refused, until
/// somebody ran `palisade install` or `check`. Returns what to add to the refusal's message.
pub(super) fn compile_in_background(dir: &Path) -> String {
    let Some(cache) = crate::cache::cache_dir() else {
        return "; the component cache is off (PALISADE_CACHE_DIR=off), so every event \
                compiles its components"
            .into();
    };
    match spawn_compile(&cache, dir) {
        Ok((pid, true)) => format!(
            "; compiling the plugins into the cache in the background (pid {pid}), so that \
             the events after it do not wait for a compiler (`palisade check {}` does it ahead)",
            dir.display()
        ),
        Ok((pid, false)) => {
            format!("; the plugins are being compiled into the cache in the background (pid {pid})")
        }
        Err(e) => format!(
            "; compiling them in the background could not start ({e}): `palisade check {}` \
             compiles them into the cache",
            dir.display()
        ),
    }
}

/// Starts `palisade check dir` unless the one last started for `dir` (its pid kept under
/// `cache`) is still running: the pid, and whether it was started now.
fn spawn_compile(cache: &Path, dir: &Path) -> std::io::Result<(u32, bool)> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::process::CommandExt;
    // One name for the folder however the agent's command spells it.
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let marks = cache.join("compiling");
    std::fs::create_dir_all(&marks)?;
    let mut hasher = std::hash::DefaultHasher::new();
    dir.hash(&mut hasher);
    let mark = marks.join(format!("{:016x}.pid", hasher.finish()));
    let running = std::fs::read_to_string(&mark)
        .ok()
        .and_then(|pid| pid.trim().parse::<u32>().ok())
        .filter(|&pid| compiles(pid, &dir));
    if let Some(pid) = running {
        return Ok((pid, false));
    }
    let child = std::process::Command::new(std::env::current_exe()?)
        .arg("check")
        .arg(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()?;
    std::fs::write(&mark, child.id().to_string())?;
    Ok((child.id(), true))
}

/// Whether process `pid` is still a compile of `dir` as [`spawn_compile`] starts one (its
/// command line ends with `check DIR`): not one that has ended, nor another process that got
/// its pid since, which would otherwise stand for it as long as it lives. Where there is no
/// `/proc`, never: each overrun then starts a compile, which only costs time.
fn compiles(pid: u32, dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(&cmdline)
        .split(|&b| b == 0)
        .collect();
    args.ends_with(&[b"check".as_slice(), dir.as_os_str().as_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A compile left running is known by its command line, not its pid alone: a process that
    /// ended, or another one, is none.
    #[test]
    fn a_compile_left_running_is_known_by_its_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let spawn = |args: &[&std::ffi::OsStr]| {
            let child = std::process::Command::new("sh")
                .arg("-c")
                // Not a lone command, which a shell may exec in its place.
                .arg("sleep 30; exit 0")
                .args(args)
                .spawn()
                .unwrap();
            // `spawn` returns once the child is past the point of no return in `execve`, which
            // may not have laid out its arguments yet (`cmdline` reads empty until it has).
            let cmdline = format!("/proc/{}/cmdline", child.id());
            let waited = Instant::now();
            while std::fs::read(&cmdline).unwrap_or_default().is_empty() {
                assert!(waited.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(1));
            }
            child
        };
        let check = std::ffi::OsStr::new("check");
        let mut compile = spawn(&[check, dir.path().as_os_str()]);
        let mut other = spawn(&[check, std::ffi::OsStr::new("/elsewhere")]);
        assert!(compiles(compile.id(), dir.path()));
        assert!(!compiles(other.id(), dir.path()));
        for child in [&mut compile, &mut other] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        assert!(!compiles(compile.id(), dir.path()));
    }
}
