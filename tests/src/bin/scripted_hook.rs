//! The command-runtime twin of the scripted test guest (see `palisade_tests::external`).
//!
//! Flags for what only a process can do wrong:
//! `--sleep-unread` sleeps 30 s without reading stdin; `--ignore-sigterm` ignores SIGTERM
//! before that; `--fork PIDFILE` starts a child that holds stdout open and sleeps, writing
//! its pid to PIDFILE.

use std::io::{Read, Write};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--fork") {
        // Left running on purpose: the host must kill it with the process group.
        #[expect(
            clippy::zombie_processes,
            reason = "the child must outlive this process"
        )]
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        std::fs::write(&args[i + 1], child.id().to_string()).unwrap();
    }
    if args.iter().any(|a| a == "--ignore-sigterm") {
        // Replaces this process with a shell that ignores SIGTERM and sleeps.
        let error = exec_ignoring_sigterm();
        panic!("cannot exec sh: {error}");
    }
    if args.iter().any(|a| a == "--sleep-unread") {
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    let input: serde_json::Value = serde_json::from_str(&input).expect("JSON on stdin");
    let behaviour = palisade_tests::external::behave(&input);
    if behaviour.sleep_ms > 0 {
        std::thread::sleep(Duration::from_millis(behaviour.sleep_ms));
    }
    print!("{}", behaviour.stdout);
    eprint!("{}", behaviour.stderr);
    let _ = std::io::stdout().flush();
    std::process::exit(behaviour.exit_code);
}

#[cfg(unix)]
fn exec_ignoring_sigterm() -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new("sh")
        .args(["-c", "trap '' TERM; sleep 30"])
        .exec()
}

#[cfg(not(unix))]
fn exec_ignoring_sigterm() -> std::io::Error {
    std::io::Error::other("unix only")
}
