//! A small HTTP/1.1 server on loopback for the `http` grant's tests — plain or over TLS with a
//! certificate of a test authority ([`Tls`]): each request is answered by a handler (on a
//! thread of its own, so a slow answer holds nothing else) and recorded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request as the server read it.
#[derive(Debug, Clone)]
pub struct Received {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target (path and query).
    pub path: String,
    /// The `Host` header.
    pub host: String,
    /// The body.
    pub body: Vec<u8>,
}

/// What the server answers.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// How long to wait before answering.
    pub delay: Duration,
}

impl Reply {
    /// `200` with `body`.
    pub fn ok(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// A `302` to `location`.
    pub fn redirect(location: &str) -> Reply {
        Reply {
            status: 302,
            headers: vec![("location".into(), location.into())],
            body: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// The same, after `delay`.
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Handler = dyn Fn(&Received) -> Reply + Send + Sync;

/// A server on `127.0.0.1:port`, running until the test process ends.
#[derive(Debug)]
pub struct Server {
    /// Its port.
    pub port: u16,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    /// Starts a server answering with `handler`.
    pub fn start(handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Server {
        Server::listen(None, Arc::new(handler))
    }

    /// Starts a server speaking TLS with `tls`'s certificate, answering with `handler`.
    pub fn start_tls(
        tls: &Tls,
        handler: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> Server {
        Server::listen(Some(tls.config.clone()), Arc::new(handler))
    }

    fn listen(tls: Option<Arc<rustls::ServerConfig>>, handler: Arc<Handler>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (handler, log, tls) = (handler.clone(), log.clone(), tls.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    match tls {
                        None => serve(stream, &*handler, &log),
                        Some(config) => {
                            let Ok(connection) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            serve(
                                rustls::StreamOwned::new(connection, stream),
                                &*handler,
                                &log,
                            )
                        }
                    }
                });
            }
        });
        Server { port, received }
    }

    /// The requests it received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:port`.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn serve(stream: impl Read + Write, handler: &Handler, log: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().to_string(),
    );
    let (mut host, mut length, mut chunked) = (String::new(), 0usize, false);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "host" => host = value.trim().to_string(),
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                _ => {}
            }
        }
    }
    let body = if chunked {
        match read_chunked(&mut reader) {
            Some(body) => body,
            None => return,
        }
    } else {
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        body
    };
    let request = Received {
        method,
        path,
        host,
        body,
    };
    log.lock().unwrap().push(request.clone());
    let reply = handler(&request);
    std::thread::sleep(reply.delay);
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let stream = reader.get_mut();
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&reply.body);
    let _ = stream.flush();
}

/// A test certificate authority, and a server certificate it signed for some names.
pub struct Tls {
    /// The authority's certificate, PEM: what a client must trust.
    pub ca_pem: String,
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// A new authority, and a certificate for `names` (host names or addresses).
    pub fn for_names(names: &[&str]) -> Tls {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "Palisade test authority");
        ca.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        Tls {
            ca_pem: ca_cert.pem(),
            config: Arc::new(config),
        }
    }
}

/// A chunked body, whole; `None` if the client stopped sending.
fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).ok()? == 0 {
            return None;
        }
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}
