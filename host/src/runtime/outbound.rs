//! A component's outbound HTTP: `wasi:http/outgoing-handler`, as its manifest's `http` grant
//! allows and no further.
//!
//! Every request is checked here before anything leaves the host: its scheme, host and port
//! must be a granted origin's (a redirect is the guest's next request, checked the same way);
//! a granted name is resolved once, and the request goes to an address it resolved to that is
//! in the grant's network — never to one the name was rebound to afterwards, and never, through
//! a name, to a link-local, unspecified, multicast or reserved address. The request runs inside
//! the hook's deadline (resolving, connecting, the answer's first byte and every later byte),
//! its body and the answer's are bounded, and one invocation may send a bounded number of
//! requests. A refusal is the guest's error code (`HTTP-request-denied`,
//! `destination-IP-prohibited`, ...), and each request, sent or refused, is recorded as a
//! `plugin_log` line at level `http`.
//!
//! The sender is ours, not wasmtime-wasi-http's default, so the connection goes to the checked
//! address: over TLS the certificate is still verified for the granted name (Mozilla's roots
//! and the system's store, which honours `SSL_CERT_FILE` and `SSL_CERT_DIR`).

use crate::manifest::{HttpGrant, HttpHost, Network};
use crate::runtime::capture::Spool;
use crate::runtime::clock::Clock;
use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// Most HTTP requests one invocation may send; further ones are refused
/// (`HTTP-request-denied`).
pub const MAX_HTTP_REQUESTS_PER_CALL: u32 = 16;
/// Largest request body a component may send, in bytes; past it the request fails
/// (`HTTP-request-body-size`).
pub const MAX_HTTP_REQUEST_BODY_BYTES: u64 = 1024 * 1024;
/// Largest response body a component may read, in bytes; past it the body fails
/// (`HTTP-response-body-size`).
pub const MAX_HTTP_RESPONSE_BODY_BYTES: u64 = 4 * 1024 * 1024;

/// The lines an instance's requests leave for the event log, reported with its output.
pub(crate) type Records = Arc<Spool<String>>;

/// The `wasi:http` policy of one instance: its grants, the deadline of the invocation it
/// serves, and what that invocation may still send.
pub(crate) struct Outbound {
    grants: Arc<[HttpGrant]>,
    clock: Arc<Clock>,
    left: u32,
    pub records: Records,
    /// Set while its instance is made ahead of its call ([`super::sandbox::State::ahead`]):
    /// a request then is refused and spoils the instance.
    pub ahead: bool,
    /// Whether a request was made ahead of the call.
    pub spoiled: bool,
}

impl Outbound {
    pub fn new(grants: Arc<[HttpGrant]>, clock: Arc<Clock>) -> Outbound {
        Outbound {
            grants,
            clock,
            left: MAX_HTTP_REQUESTS_PER_CALL,
            records: Records::default(),
            ahead: false,
            spoiled: false,
        }
    }

    /// Prepares for a new invocation, under its deadline.
    pub fn begin(&mut self, clock: Arc<Clock>) {
        self.clock = clock;
        self.left = MAX_HTTP_REQUESTS_PER_CALL;
        self.ahead = false;
    }

    /// The grant `request` falls under, or why it is refused.
    fn admit(&mut self, request: &http::Request<WasiBody>) -> Result<HttpGrant, String> {
        let uri = request.uri();
        if self.grants.is_empty() {
            return Err(format!(
                "refused {uri}: the plugin's manifest grants no `http`"
            ));
        }
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        if authority.contains('@') {
            return Err(format!("refused {uri}: a URL with credentials"));
        }
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let address = host.parse::<IpAddr>().ok();
        let grant = self.grants.iter().find(|g| {
            g.https == https
                && g.port == port
                && match &g.host {
                    HttpHost::Name { name, .. } => *name == host,
                    HttpHost::Address(ip) => Some(*ip) == address,
                }
        });
        let Some(grant) = grant else {
            return Err(format!(
                "refused {uri}: not an origin of the plugin's `http` grant"
            ));
        };
        if self.left == 0 {
            return Err(format!(
                "refused {uri}: more than {MAX_HTTP_REQUESTS_PER_CALL} requests in one invocation"
            ));
        }
        self.left -= 1;
        Ok(grant.clone())
    }
}

fn record(records: &Records, line: String) {
    records.add(|lines| lines.push(line));
}

type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
>;

impl WasiHttpHooks for Outbound {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        if self.ahead {
            self.spoiled = true;
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let records = self.records.clone();
        let admitted = self.admit(&request);
        let deadline = Instant::from_std(self.clock.deadline());
        Box::new(async move {
            let grant = match admitted {
                Ok(grant) => grant,
                Err(why) => {
                    record(&records, why);
                    return Err(Error::HttpRequestDenied);
                }
            };
            let line = format!("{} {}", request.method(), request.uri());
            let sent = send(&grant, request, options, deadline, &records).await;
            match &sent {
                Ok((response, _)) => record(&records, format!("{line} → {}", response.status())),
                Err(error) => record(&records, format!("{line} → failed: {error}")),
            }
            sent
        })
    }
}

/// Sends `request` to `grant`'s checked address, within `deadline`.
async fn send(
    grant: &HttpGrant,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    deadline: Instant,
    records: &Records,
) -> Sent {
    let options = options.unwrap_or_default();
    let within = |limit: Option<Duration>| match limit {
        Some(limit) => deadline.min(Instant::now() + limit),
        None => deadline,
    };
    let addresses = tokio::time::timeout_at(deadline, resolve(grant, records))
        .await
        .map_err(|_| Error::DnsTimeout)??;
    let connect_by = within(options.connect_timeout);
    let tcp = tokio::time::timeout_at(connect_by, connect(&addresses))
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let stream: Box<dyn Stream> = if grant.https {
        let name = match &grant.host {
            HttpHost::Name { name, .. } => rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|_| Error::HttpRequestUriInvalid)?,
            HttpHost::Address(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
        };
        let tls = tokio_rustls::TlsConnector::from(tls_config()).connect(name, tcp);
        Box::new(
            tokio::time::timeout_at(connect_by, tls)
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(Error::Tls)?,
        )
    } else {
        Box::new(tcp)
    };
    let handshake = hyper::client::conn::http1::handshake(TokioIo::new(stream));
    let (mut sender, connection) = tokio::time::timeout_at(connect_by, handshake)
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    // The connection's I/O runs beside the request; it stops when the guest drops the answer.
    let connection =
        wasmtime_wasi::runtime::spawn(async move { connection.await.map_err(Error::from) });

    // To a server (not a proxy), the request line carries the path only.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let request = request.map(|body| {
        Bounded {
            body,
            left: MAX_HTTP_REQUEST_BODY_BYTES,
            too_large: || Error::HttpRequestBodySize(Some(MAX_HTTP_REQUEST_BODY_BYTES)),
            timer: None,
            between: None,
            deadline,
        }
        .boxed_unsync()
    });
    let response = tokio::time::timeout_at(
        within(options.first_byte_timeout),
        sender.send_request(request),
    )
    .await
    .map_err(|_| Error::ConnectionReadTimeout)?
    .map_err(body_error)?;
    let response = response.map(|incoming| {
        Bounded {
            body: incoming.map_err(Error::from),
            left: MAX_HTTP_RESPONSE_BODY_BYTES,
            too_large: || Error::HttpResponseBodySize(Some(MAX_HTTP_RESPONSE_BODY_BYTES)),
            timer: Some(Box::pin(tokio::time::sleep_until(within(
                options.between_bytes_timeout,
            )))),
            between: options.between_bytes_timeout,
            deadline,
        }
        .boxed_unsync()
    });
    Ok((response, Box::new(connection)))
}

/// A failed request, as its body's own error when the body is what failed (too large), so
/// the guest learns why.
fn body_error(error: hyper::Error) -> Error {
    let cause = std::error::Error::source(&error).and_then(|e| e.downcast_ref::<Error>());
    match cause {
        Some(Error::HttpRequestBodySize(limit)) => Error::HttpRequestBodySize(*limit),
        _ => Error::from(error),
    }
}

/// The addresses `grant`'s host may be reached at: an address as it is; a name's addresses
/// that are in its network (resolved once: the connection goes to one of these).
async fn resolve(grant: &HttpGrant, records: &Records) -> Result<Vec<SocketAddr>, Error> {
    let (name, network) = match &grant.host {
        HttpHost::Address(ip) => return Ok(vec![SocketAddr::new(*ip, grant.port)]),
        HttpHost::Name { name, network } => (name, *network),
    };
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), grant.port))
        .await
        .map_err(|e| Error::DnsError {
            rcode: Some(e.to_string()),
            info_code: None,
        })?
        .collect();
    let allowed: Vec<SocketAddr> = resolved
        .iter()
        .copied()
        .filter(|a| class(a.ip()) == Some(network))
        .collect();
    if allowed.is_empty() {
        let found: Vec<String> = resolved.iter().map(|a| a.ip().to_string()).collect();
        record(
            records,
            format!(
                "refused {name}: it resolved to {}, no {} address (the grant's network)",
                if found.is_empty() {
                    "nothing".to_string()
                } else {
                    found.join(", ")
                },
                network.as_str()
            ),
        );
        return Err(Error::DestinationIpProhibited);
    }
    Ok(allowed)
}

/// Connects to the first of `addresses` that answers.
async fn connect(addresses: &[SocketAddr]) -> Result<tokio::net::TcpStream, Error> {
    let mut last = None;
    for address in addresses {
        match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or(Error::DestinationNotFound, Error::Connect))
}

trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static> Stream for T {}

/// The TLS client: TLS 1.2 and 1.3 on ring, HTTP/1.1, certificates checked against Mozilla's
/// roots and the system's store. Built once.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            // A store that cannot be read adds nothing; the Mozilla roots remain.
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        })
        .clone()
}

/// A body cut off past `left` bytes (`too_large`), and — for an answer — at the deadline or
/// when `between` passes with no byte.
struct Bounded<B> {
    body: B,
    left: u64,
    too_large: fn() -> Error,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    between: Option<Duration>,
    deadline: Instant,
}

impl<B: Body<Data = Bytes, Error = Error> + Unpin> Body for Bounded<B> {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let size = frame.data_ref().map_or(0, |d| d.len() as u64);
                if size > this.left {
                    this.left = 0;
                    return Poll::Ready(Some(Err((this.too_large)())));
                }
                this.left -= size;
                if let Some(timer) = &mut this.timer {
                    let next = match this.between {
                        Some(between) => this.deadline.min(Instant::now() + between),
                        None => this.deadline,
                    };
                    timer.as_mut().reset(next);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                let expired = this
                    .timer
                    .as_mut()
                    .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
                if expired {
                    Poll::Ready(Some(Err(Error::HttpResponseTimeout)))
                } else {
                    Poll::Pending
                }
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
}

/// The network an address belongs to, as a grant names it; `None` for an address no name may
/// lead to (link-local, unspecified, multicast, broadcast, documentation, benchmarking,
/// reserved, and the transition ranges that hide one of these).
pub(crate) fn class(ip: IpAddr) -> Option<Network> {
    match ip {
        IpAddr::V4(ip) => class_v4(ip),
        IpAddr::V6(ip) => class_v6(ip),
    }
}

fn class_v4(ip: Ipv4Addr) -> Option<Network> {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (127, _, _) => Some(Network::Loopback),
        (10, _, _) | (192, 168, _) => Some(Network::Private),
        (172, 16..=31, _) | (100, 64..=127, _) => Some(Network::Private),
        (0, _, _) | (169, 254, _) | (224..=255, _, _) => None,
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) | (198, 18..=19, _) => None,
        _ => Some(Network::Public),
    }
}

fn class_v6(ip: Ipv6Addr) -> Option<Network> {
    if ip == Ipv6Addr::LOCALHOST {
        return Some(Network::Loopback);
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return class_v4(v4);
    }
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s[0] {
        // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) lead to the IPv4 address they carry.
        0x64 if s[1] == 0xff9b && s[2..6] == [0; 4] => class_v4(embedded(s[6], s[7])),
        0x2002 => class_v4(embedded(s[1], s[2])),
        0xfc00..=0xfdff => Some(Network::Private),
        // Teredo (2001::/32) and documentation (2001:db8::/32) hide where they lead.
        0x2001 if s[1] == 0 || s[1] == 0xdb8 => None,
        0x2000..=0x3fff => Some(Network::Public),
        // ::/8 (unspecified, IPv4-compatible), 100::/64 (discard), link-local, site-local,
        // multicast and the rest of the unassigned space.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Option<Network> {
        class(text.parse().unwrap())
    }

    #[test]
    fn addresses_are_classed_and_the_unreachable_are_none() {
        for public in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert_eq!(of(public), Some(Network::Public), "{public}");
        }
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "fd00::1",
            "::ffff:10.0.0.1",
        ] {
            assert_eq!(of(private), Some(Network::Private), "{private}");
        }
        for loopback in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "::ffff:127.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert_eq!(of(loopback), Some(Network::Loopback), "{loopback}");
        }
        for never in [
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "::",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "2001:0:1::1",
            "::127.0.0.1",
            "2002:a9fe:a9fe::1",
            "::ffff:169.254.169.254",
        ] {
            assert_eq!(of(never), None, "{never}");
        }
        // Outside the private ranges by one.
        assert_eq!(of("172.32.0.1"), Some(Network::Public));
        assert_eq!(of("100.128.0.1"), Some(Network::Public));
    }
}
