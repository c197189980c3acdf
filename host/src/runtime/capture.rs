//! What a guest leaves for the event log: its stdout and stderr, captured and capped per call,
//! and the spool that holds them (and its HTTP requests' lines) between two reports.

use super::limits::MAX_OUTPUT_BYTES_PER_CALL;
use std::sync::Arc;

/// A guest output stream: kept up to [`MAX_OUTPUT_BYTES_PER_CALL`] per call, the rest
/// dropped (the guest is never told: a chatty plugin must not fail because of it).
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Spool<u8>>);

impl Captured {
    /// What was written since the last take.
    pub fn take(&self) -> Vec<u8> {
        self.0.take()
    }
}

/// What an instance leaves for the event log between two reports (its output, its requests'
/// lines). A flag says whether anything was left, so that the report after a call that left
/// nothing (nearly every call) takes no lock.
pub(crate) struct Spool<T> {
    items: std::sync::Mutex<Vec<T>>,
    any: std::sync::atomic::AtomicBool,
}

impl<T> Default for Spool<T> {
    fn default() -> Self {
        Spool {
            items: std::sync::Mutex::new(Vec::new()),
            any: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl<T> Spool<T> {
    /// Adds to the spool through `add`.
    pub fn add<R>(&self, add: impl FnOnce(&mut Vec<T>) -> R) -> R {
        let added = add(&mut self.items.lock().unwrap_or_else(|e| e.into_inner()));
        // Set after the items are in: a take that sees the flag finds them.
        self.any.store(true, std::sync::atomic::Ordering::Release);
        added
    }

    /// Everything added since the last take.
    pub fn take(&self) -> Vec<T> {
        if !self.any.swap(false, std::sync::atomic::Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.items.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl wasmtime_wasi::cli::IsTerminal for Captured {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for Captured {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    /// Written synchronously, always ready: no task behind it (WASI's default adapter spawns
    /// one per stream), and a directly called instance ([`super::direct`]) never waits on it.
    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::OutputStream> {
        Box::new(self.clone())
    }
}

impl Captured {
    fn keep(&self, buf: &[u8]) {
        self.0.add(|kept| {
            let room = MAX_OUTPUT_BYTES_PER_CALL.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..buf.len().min(room)]);
        });
    }
}

impl wasmtime_wasi::p2::OutputStream for Captured {
    fn write(&mut self, bytes: bytes::Bytes) -> wasmtime_wasi::p2::StreamResult<()> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> wasmtime_wasi::p2::StreamResult<usize> {
        // What is past the cap is dropped, so any size is accepted.
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Captured {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Captured {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.keep(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
