//! Outbound HTTP from a hook, to the origins its manifest's `http` grant lists and no others
//! (a request elsewhere is [`Error::Refused`]; so is a redirect the plugin follows off the
//! list). Blocking calls over `wasi:http`; the host runs each request inside the hook's
//! deadline and bounds both bodies.
//!
//! ```no_run
//! use palisade_sdk::http;
//!
//! # fn classify() -> Result<bool, http::Error> {
//! let answer = http::post(
//!     "https://policy.internal:8443/v1/classify",
//!     "application/json",
//!     br#"{"tool":"Bash","arguments":{"command":"ls"}}"#,
//! )?;
//! Ok(answer.status == 200 && answer.body.starts_with(b"{\"verdict\":\"allow\""))
//! # }
//! ```
//!
//! A guard should fail closed: when the call fails, deny (or let the hook fail, and its
//! `on_failure` decide).

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::streams::StreamError;

/// An answer: its status, headers and whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, in the order received (names lowercase).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::Failed(format!("the answer is not the JSON expected: {e}")))
    }

    /// The first value of header `name` (any case), as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The host refused it: the origin is not granted (`HTTP-request-denied`), or the granted
    /// name led to an address outside the grant's network (`destination-IP-prohibited`).
    Refused(String),
    /// It did not complete in time (connecting, the first byte or a later one, or the hook's
    /// deadline).
    Timeout(String),
    /// Anything else: a bad URL, connection refused, TLS, a body too large, a protocol error.
    Failed(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Refused(why) => write!(f, "refused: {why}"),
            Error::Timeout(why) => write!(f, "timed out: {why}"),
            Error::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Error {
        let text = format!("{code:?}")
            .trim_start_matches("ErrorCode::")
            .to_string();
        match code {
            ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => {
                Error::Refused(text)
            }
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::HttpResponseTimeout
            | ErrorCode::DnsTimeout => Error::Timeout(text),
            _ => Error::Failed(text),
        }
    }
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, Error> {
    Request::get(url).send()
}

/// `POST url` with `body` of `content_type`.
pub fn post(url: &str, content_type: &str, body: &[u8]) -> Result<Response, Error> {
    Request::post(url)
        .header("content-type", content_type)
        .body(body)
        .send()
}

/// A request to build and [`send`](Request::send).
///
/// ```no_run
/// use palisade_sdk::http::Request;
/// use std::time::Duration;
///
/// let answer = Request::post("https://policy.internal:8443/v1/classify")
///     .json(&serde_json::json!({ "text": "hello" }))
///     .timeout(Duration::from_millis(150))
///     .send();
/// ```
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Option<Vec<u8>>,
    timeout: Option<std::time::Duration>,
}

impl Request {
    /// A `method` request to `url` (`https://host[:port]/path?query`).
    pub fn new(method: &str, url: &str) -> Request {
        Request {
            method: method.to_string(),
            url: url.to_string(),
            headers: Vec::new(),
            body: None,
            timeout: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: &str) -> Request {
        Request::new("GET", url)
    }

    /// A `POST` request.
    pub fn post(url: &str) -> Request {
        Request::new("POST", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers
            .push((name.to_string(), value.as_bytes().to_vec()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = Some(body.into());
        self
    }

    /// Sets a JSON body (and `content-type: application/json`).
    pub fn json(self, value: &impl serde::Serialize) -> Request {
        let body = serde_json::to_vec(value).unwrap_or_default();
        self.header("content-type", "application/json").body(body)
    }

    /// Gives up after `timeout` to connect, to the first byte of the answer, and between
    /// later bytes ([`Error::Timeout`]) — set it below the hook's `timeout_ms` to answer for
    /// yourself rather than be stopped at the deadline.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Request {
        self.timeout = Some(timeout);
        self
    }

    /// Sends it; waits for the whole answer. A redirect is answered as it is (3xx with its
    /// `location`): following it is a new request, to a granted origin or refused.
    pub fn send(&self) -> Result<Response, Error> {
        let url = self.url.as_str();
        let (scheme, authority, path) = split(url)?;
        let fields = Fields::from_list(&self.headers)
            .map_err(|e| Error::Failed(format!("header not allowed: {e:?}")))?;
        let request = OutgoingRequest::new(fields);
        let method = match self.method.as_str() {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            "PATCH" => Method::Patch,
            other => Method::Other(other.to_string()),
        };
        let bad = |what: &str| Error::Failed(format!("invalid {what} in {url}"));
        request.set_method(&method).map_err(|()| bad("method"))?;
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| bad("scheme"))?;
        request
            .set_authority(Some(authority))
            .map_err(|()| bad("host"))?;
        request
            .set_path_with_query(Some(path))
            .map_err(|()| bad("path"))?;
        let options = self.timeout.map(|timeout| {
            let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
            let options = RequestOptions::new();
            // A host that does not support one leaves it to the hook's deadline.
            let _ = options.set_connect_timeout(Some(nanos));
            let _ = options.set_first_byte_timeout(Some(nanos));
            let _ = options.set_between_bytes_timeout(Some(nanos));
            options
        });
        let outgoing = request.body().map_err(|()| bad("body"))?;
        // Sent first: the body streams to the server as it is written.
        let pending = outgoing_handler::handle(request, options)?;
        let written = match &self.body {
            Some(body) => write_body(&outgoing, body),
            None => Ok(()),
        };
        // A body the host stopped taking (too large, the connection gone): the request's own
        // error says why.
        let finished = written.and_then(|()| Ok(OutgoingBody::finish(outgoing, None)?));
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(result)) => result?,
            _ => return Err(Error::Failed("the answer was lost".into())),
        };
        finished?;
        let status = response.status();
        let headers = response.headers().entries();
        let incoming = response
            .consume()
            .map_err(|()| Error::Failed("the body was taken".into()))?;
        let body = read_body(&incoming)?;
        drop(incoming);
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// `scheme://authority/path?query` in its parts.
fn split(url: &str) -> Result<(Scheme, &str, &str), Error> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Error::Failed(format!("not an absolute URL: {url}")))?;
    let scheme = match scheme {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => return Err(Error::Failed(format!("not an http(s) URL: {other}"))),
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    Ok((scheme, authority, path))
}

fn write_body(outgoing: &OutgoingBody, body: &[u8]) -> Result<(), Error> {
    let stream = outgoing
        .write()
        .map_err(|()| Error::Failed("the request body was taken".into()))?;
    // `blocking-write-and-flush` takes at most 4096 bytes at a time.
    for chunk in body.chunks(4096) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(stream_error)?;
    }
    Ok(())
}

fn read_body(incoming: &IncomingBody) -> Result<Vec<u8>, Error> {
    let stream = incoming
        .stream()
        .map_err(|()| Error::Failed("the body was taken".into()))?;
    let mut body = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => body.extend_from_slice(&chunk),
            Err(StreamError::Closed) => return Ok(body),
            Err(err) => return Err(stream_error(err)),
        }
    }
}

fn stream_error(err: StreamError) -> Error {
    match err {
        StreamError::LastOperationFailed(err) => match wasip2::http::types::http_error_code(&err) {
            Some(code) => code.into(),
            None => Error::Failed(err.to_debug_string()),
        },
        StreamError::Closed => Error::Failed("the stream closed early".into()),
    }
}
