//! A `palisade serve` process for a test, and a minimal HTTP/1.1 client (so a test can send
//! exactly the bytes it wants: malformed, oversized, wrong path).
#![allow(dead_code)] // each test module uses a part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A running `palisade serve`; killed when dropped.
pub struct Server {
    pub child: Child,
    pub address: SocketAddr,
    /// The bearer token file it reads (in a temporary folder of its own unless the test named
    /// one with `--token-file`), and the token.
    pub token_file: std::path::PathBuf,
    pub token: String,
    _token_dir: tempfile::TempDir,
    /// Every line it wrote to stderr so far.
    lines: Arc<(Mutex<Vec<String>>, Condvar)>,
}

impl Server {
    /// Starts `palisade serve --plugins DIR --listen 127.0.0.1:0 ARGS…` and waits until it
    /// listens.
    pub fn start(plugins: &Path, args: &[&str], envs: &[(&str, &str)]) -> Server {
        Server::try_start(plugins, "127.0.0.1:0", args, envs)
            .unwrap_or_else(|said| panic!("palisade serve did not start:\n{said}"))
    }

    /// As [`Server::start`], with the `palisade` at `binary` (a bench measuring another build).
    pub fn start_binary(
        binary: &Path,
        plugins: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Server {
        Server::try_start_binary(binary, plugins, "127.0.0.1:0", args, envs)
            .unwrap_or_else(|said| panic!("palisade serve did not start:\n{said}"))
    }

    /// As [`Server::start`] on `listen`; `Err` with what it printed when it exits instead.
    pub fn try_start(
        plugins: &Path,
        listen: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Result<Server, String> {
        let binary = Path::new(env!("CARGO_BIN_EXE_palisade"));
        Server::try_start_binary(binary, plugins, listen, args, envs)
    }

    fn try_start_binary(
        binary: &Path,
        plugins: &Path,
        listen: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Result<Server, String> {
        let token_dir = tempfile::tempdir().unwrap();
        let token_file = match args.iter().position(|a| *a == "--token-file") {
            Some(i) => std::path::PathBuf::from(args[i + 1]),
            None => token_dir.path().join("serve-token"),
        };
        let mut command = Command::new(binary);
        command
            .arg("serve")
            .arg("--plugins")
            .arg(plugins)
            .args(["--listen", listen])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if !args.contains(&"--token-file") {
            command.arg("--token-file").arg(&token_file);
        }
        // Its own state (a test may name another with an env or `--state`).
        command.env("PALISADE_STATE_DIR", token_dir.path().join("state"));
        for (k, v) in envs {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("palisade serve starts");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let (lock, ready) = &*sink;
                lock.lock().unwrap().push(line);
                ready.notify_all();
            }
        });
        let started = Instant::now();
        loop {
            let found: Option<SocketAddr> = lines
                .0
                .lock()
                .unwrap()
                .iter()
                .find_map(|l| l.split("listening on http://").nth(1))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|a| a.parse().ok());
            if let Some(address) = found {
                let token = std::fs::read_to_string(&token_file)
                    .expect("the server made its token file")
                    .trim()
                    .to_string();
                return Ok(Server {
                    child,
                    address,
                    token_file,
                    token,
                    _token_dir: token_dir,
                    lines,
                });
            }
            if let Some(status) = child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(100));
                let said = lines.0.lock().unwrap().join("\n");
                return Err(format!("exited with {status}:\n{said}"));
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "palisade serve did not listen within 2 minutes"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// What it printed on stderr so far.
    pub fn said(&self) -> String {
        self.lines.0.lock().unwrap().join("\n")
    }

    /// Waits (up to `within`) for a stderr line containing `needle`.
    pub fn wait_for(&self, needle: &str, within: Duration) -> bool {
        let (lock, ready) = &*self.lines;
        let deadline = Instant::now() + within;
        let mut lines = lock.lock().unwrap();
        loop {
            if lines.iter().any(|l| l.contains(needle)) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            lines = ready.wait_timeout(lines, deadline - now).unwrap().0;
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// POSTs `body` to `path`, with the token.
    pub fn post(&self, path: &str, body: &[u8]) -> Response {
        self.request("POST", path, body, &[])
    }

    /// A request with the token and `headers`.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> Response {
        let bearer = format!("Bearer {}", self.token);
        let mut all = vec![("Authorization", bearer.as_str())];
        all.extend_from_slice(headers);
        request(self.address, method, path, body, &all)
    }

    /// A Claude Code hook event.
    pub fn event(&self, event: serde_json::Value) -> Response {
        self.post("/claude-code", event.to_string().as_bytes())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response: status and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// One HTTP/1.1 request on a fresh connection (with no token unless `headers` has one).
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> Response {
    let mut stream = TcpStream::connect(address).expect("the server accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before reading a large body, and close.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    Response {
        status,
        body: body.to_string(),
    }
}

/// Adds a plugin folder `name` of the scripted test guest to `dir`; `body` is its manifest
/// after the `name` and `wasm` lines.
pub fn scripted(dir: &Path, name: &str, body: &str) {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(palisade_fixtures::SCRIPTED, folder.join("plugin.wasm")).unwrap();
    std::fs::write(
        folder.join("plugin.toml"),
        format!("name = \"{name}\"\nwasm = \"plugin.wasm\"\n{body}"),
    )
    .unwrap();
}

/// The audit log at `path` once `wanted` holds of it, or after 10 s, whatever it has then: its
/// lines are written by a thread of their own, a moment after the answer they belong to.
pub fn log_having(path: &Path, wanted: impl Fn(&str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let log = std::fs::read_to_string(path).unwrap_or_default();
        if wanted(&log) || started.elapsed() > Duration::from_secs(10) {
            return log;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A FIFO `name` in `dir` whose reader reads nothing, its pipe already full: opened for
/// reading and writing (which does not wait), and filled to its capacity. It stays so while
/// the file returned (both ends of it) is open and unread.
pub fn full_fifo(dir: &Path, name: &str) -> (std::path::PathBuf, std::fs::File) {
    let fifo = dir.join(name);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    let mut pipe = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    // SAFETY: F_GETPIPE_SZ reads the capacity of the pipe behind a descriptor we own.
    #[allow(unsafe_code)]
    let capacity =
        unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&pipe), libc::F_GETPIPE_SZ) };
    assert!(capacity > 0, "F_GETPIPE_SZ: {capacity}");
    pipe.write_all(&vec![b'\n'; capacity as usize]).unwrap();
    (fifo, pipe)
}
