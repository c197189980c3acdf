//! The deadline of one invocation, which a `tool-execute` wrapper's `next()` pauses.

use std::sync::Arc;
use std::time::Instant;

/// The deadline of one invocation. It stops while a `tool-execute` wrapper waits in `next()`
/// (the tool's time is not the wrapper's) and resumes, extended by the pause, when it returns.
#[derive(Debug)]
pub(crate) struct Clock {
    deadline: std::sync::Mutex<Instant>,
    paused_at: std::sync::Mutex<Option<Instant>>,
    pub resumed: tokio::sync::Notify,
}

impl Clock {
    pub fn new(deadline: Instant) -> Arc<Clock> {
        Arc::new(Clock {
            deadline: std::sync::Mutex::new(deadline),
            paused_at: std::sync::Mutex::new(None),
            resumed: tokio::sync::Notify::new(),
        })
    }

    pub fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_paused(&self) -> bool {
        self.paused_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Whether the deadline has passed (never while paused).
    pub fn expired(&self) -> bool {
        !self.is_paused() && Instant::now() >= self.deadline()
    }

    pub fn pause(&self) {
        *self.paused_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    pub fn resume(&self) {
        if let Some(at) = self
            .paused_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) += at.elapsed();
        }
        self.resumed.notify_one();
    }
}
