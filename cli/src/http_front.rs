//! The HTTP front that `palisade serve` and `palisade mcp --listen` stand behind: accepting
//! connections (a slot each, kept by the connections that authenticate), the `Host` header a
//! server answers to, the bearer token, and the JSON problem every refusal is. May touch: the
//! listener it is given.

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::Semaphore;

/// Says `line` on stderr, after a timestamp, never waiting for it ([`crate::said`]).
pub(crate) fn say(line: impl AsRef<str>) {
    let at = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    crate::said::say(format!(
        "[{at:.3}] {}",
        crate::output::indented(line.as_ref())
    ));
}

/// How long shutdown waits for open connections to finish their requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Accepts connections until `stop` resolves: at most `--max-connections` at once, each with a
/// header read timeout, so a slow client (slow-loris) cannot hold a connection for long. A
/// connection whose request carried the bearer `token` is the server's to keep; when every
/// slot is taken, a new connection takes the slot of the oldest one that has not (yet)
/// authenticated — closing it — and is refused only when every connection has: connections
/// that never authenticate cannot starve the clients that do. On `stop`, the connections
/// finish their requests in flight and close. `label` names the server in what it says.
pub(crate) async fn serve_connections(
    label: &'static str,
    listener: tokio::net::TcpListener,
    app: Router,
    (max_connections, read_timeout): (usize, Duration),
    token: String,
    stop: impl Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use std::sync::atomic::{AtomicBool, Ordering};
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    // The open connections, oldest first: whether each has authenticated, and its task.
    let mut open: Vec<(Arc<AtomicBool>, tokio::task::AbortHandle)> = Vec::new();
    let token: Arc<str> = token.into();
    let mut refused = 0u64;
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: breathe, then go on accepting.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        open.retain(|(_, task)| !task.is_finished());
        let mut slot = slots.clone().try_acquire_owned().ok();
        if slot.is_none()
            && let Some(at) = open
                .iter()
                .position(|(known, _)| !known.load(Ordering::Relaxed))
        {
            // The oldest connection that never authenticated makes way.
            let (_, task) = open.remove(at);
            task.abort();
            let freed =
                tokio::time::timeout(Duration::from_millis(500), slots.clone().acquire_owned());
            slot = freed.await.ok().and_then(Result::ok);
        }
        let Some(slot) = slot else {
            refused += 1;
            if refused.is_power_of_two() {
                say(format!(
                    "{label}: refused a connection: {max_connections} open and \
                     authenticated, the limit; {refused} refused so far"
                ));
            }
            drop(stream);
            continue;
        };
        let known = Arc::new(AtomicBool::new(false));
        let service = {
            let (app, known, token) = (app.clone(), known.clone(), token.clone());
            tower::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                if !known.load(Ordering::Relaxed) && bearer_matches(&token, request.headers()) {
                    known.store(true, Ordering::Relaxed);
                }
                tower::ServiceExt::oneshot(app.clone(), request)
            })
        };
        let service = hyper_util::service::TowerToHyperService::new(service);
        let mut closed = closed.clone();
        let task = connections.spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(read_timeout)
                .max_buf_size(64 * 1024);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = async { let _ = closed.wait_for(|closing| *closing).await; } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        open.push((known, task));
    }
    drop(listener);
    let _ = closing.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        say(format!(
            "{label}: connections still open after the shutdown grace; closing them"
        ));
    }
}

/// A `Host` header this server answers to.
#[derive(Debug, Clone)]
pub(crate) enum AllowedHost {
    /// Exactly this `host:port`.
    Exact(String),
    /// Any host on this port (a server listening on every address, behind its token).
    Port(u16),
}

impl AllowedHost {
    pub(crate) fn accepts(&self, host: &str) -> bool {
        match self {
            AllowedHost::Exact(exact) => host.eq_ignore_ascii_case(exact),
            AllowedHost::Port(port) => host
                .rsplit_once(':')
                .is_some_and(|(_, p)| p == port.to_string()),
        }
    }

    /// The `Host` values of a server listening on `address`.
    pub(crate) fn of(address: SocketAddr) -> Vec<AllowedHost> {
        if address.ip().is_unspecified() {
            return vec![AllowedHost::Port(address.port())];
        }
        let mut hosts = vec![AllowedHost::Exact(address.to_string())];
        if address.ip().is_loopback() {
            hosts.push(AllowedHost::Exact(format!("localhost:{}", address.port())));
        }
        hosts
    }
}

/// Whether `headers` carry `Authorization: Bearer TOKEN`, compared in constant time.
pub(crate) fn bearer_matches(token: &str, headers: &HeaderMap) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Constant time in the token's length: no early exit on the first wrong byte.
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

pub(crate) fn problem(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": message.into() }))).into_response()
}
