//! A real `redis-server` for a test, on a Unix socket in a temporary directory of its own;
//! shut down when dropped. The binary is the one `scripts/tools.sh` installs into
//! `target/tools/redis` (`$PALISADE_REDIS_SERVER`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
#[derive(Debug)]
pub struct Redis {
    child: Child,
    dir: tempfile::TempDir,
}

/// The `redis-server` to run: `$PALISADE_REDIS_SERVER`, else the one in the build tree.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("PALISADE_REDIS_SERVER") {
        return path.into();
    }
    let installed =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tools/redis/redis-server");
    assert!(
        installed.exists(),
        "redis-server is not installed: run `scripts/tools.sh` (it unpacks Debian's redis-server \
         into target/tools/redis), or set PALISADE_REDIS_SERVER to a redis-server binary"
    );
    installed
}

impl Redis {
    /// Starts a server with no persistence and waits until it answers.
    pub fn start() -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("redis.sock");
        let child = Command::new(binary())
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(&socket)
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let started = Instant::now();
        while !socket.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not open its socket within 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Redis { child, dir }
    }

    /// Its URL, for `StateStore::redis` and `palisade serve --state`.
    pub fn url(&self) -> String {
        format!(
            "redis+unix://{}",
            self.dir.path().join("redis.sock").display()
        )
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
