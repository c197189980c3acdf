//! The HTTP runtime: one POST per invocation, the same JSON as a command's stdin, the answer
//! in the response body.
//!
//! Redirects are not followed and no proxy is used: the hook is the URL the manifest names.
//! A 2xx status is a success (the body is the answer, read up to `payload_max_bytes`); any
//! other status is a hook error; a refused or failed connection is `unavailable`.

use super::wire::Raw;
use crate::failure::{Failure, FailureReason};
use std::sync::OnceLock;
use std::time::Duration;

/// One client per process: its connection pool is shared by every HTTP hook.
fn client() -> Result<&'static reqwest::Client, Failure> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .user_agent(concat!("palisade/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Failure::new(FailureReason::Unavailable, format!("no HTTP client: {e}")))
}

/// POSTs `input` to `url` under `timeout`; the body bounded by `max_output`.
pub(crate) async fn post(
    url: &str,
    headers: &[(&str, &str)],
    input: Vec<u8>,
    timeout: Duration,
    max_output: usize,
) -> Result<Raw, Failure> {
    let client = client()?;
    let exchange = async {
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .body(input);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = request.send().await.map_err(|e| {
            Failure::new(
                FailureReason::Unavailable,
                format!("cannot reach {url}: {}", error_chain(&e)),
            )
        })?;
        let status = response.status();
        if let Some(length) = response.content_length()
            && length > max_output as u64
        {
            return Err(too_large(max_output));
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > max_output {
                        return Err(too_large(max_output));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Failure::new(
                        FailureReason::Unavailable,
                        format!("the answer from {url} broke off: {}", error_chain(&e)),
                    ));
                }
            }
        }
        Ok(Raw {
            // 2xx is success; everything else is reported with its status.
            status: if status.is_success() {
                Ok(0)
            } else {
                Err(format!("answered HTTP {status}"))
            },
            output: body,
            stderr: Vec::new(),
        })
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(Failure::new(
            FailureReason::Timeout,
            format!("{url} passed its deadline of {} ms", timeout.as_millis()),
        )),
    }
}

fn too_large(max: usize) -> Failure {
    Failure::new(
        FailureReason::InvalidResponse,
        format!("the answer is larger than payload_max_bytes ({max} bytes)"),
    )
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
