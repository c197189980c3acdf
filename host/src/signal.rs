//! A cancellation signal, as a pre-step's payload carries one (docs/semantics.md S1.10): the agent (or its user)
//! cancels the request a step was proposed for, and whatever still decides that step stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// A request's cancellation signal. Cheap to clone; every clone sees one cancellation.
///
/// Handed to [`crate::Lifecycle::pre_step_until`] with a proposed step, it stops the step's
/// `prompt-submit` waterfall when it fires: the hook in flight is cut off (recorded as
/// dropped: a hook does not poll the signal, it is stopped), no later hook runs, and the step
/// does not open.
#[derive(Debug, Clone, Default)]
pub struct Signal {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Signal {
    /// A signal not yet cancelled.
    pub fn new() -> Signal {
        Signal::default()
    }

    /// Cancels the request: every waiter wakes, and [`Signal::is_cancelled`] is true from now
    /// on.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Whether the request has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Returns once the request is cancelled (at once if it already is).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a cancel between the two is not missed.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}
