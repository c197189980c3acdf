//! A component still loading on another thread while the hooks before it run
//! ([`Manifests::load_overlapped`](crate::Manifests::load_overlapped)): its hook's call waits
//! for the load, then runs as any other.

use super::wasm::Wasm;
use std::sync::{Arc, OnceLock};

/// A plugin's component, loaded (or refused) once, by one of the load's threads.
pub(crate) struct Loading {
    /// The component file's size when the load began (the largest are made ahead first).
    pub size: usize,
    /// The component, or its problems, one line each.
    done: OnceLock<Result<Box<Wasm>, String>>,
    /// Becomes `true` once `done` is set.
    ready: tokio::sync::watch::Sender<bool>,
}

impl Loading {
    pub fn new(size: usize) -> Arc<Loading> {
        Arc::new(Loading {
            size,
            done: OnceLock::new(),
            ready: tokio::sync::watch::Sender::new(false),
        })
    }

    /// The component, if it has loaded.
    pub fn get(&self) -> Option<&Wasm> {
        self.done.get().and_then(|done| done.as_deref().ok())
    }

    /// The component once it has loaded, or what kept it from loading.
    pub async fn wait(&self) -> Result<&Wasm, &str> {
        let mut ready = self.ready.subscribe();
        // The sender is this value's own: it lives as long as the wait.
        let _ = ready.wait_for(|ready| *ready).await;
        match self.done.get() {
            Some(Ok(wasm)) => Ok(wasm),
            Some(Err(problems)) => Err(problems),
            None => Err("its load ended without a result"),
        }
    }

    /// Ends the load and wakes the calls waiting for it.
    fn set(&self, outcome: Result<Box<Wasm>, String>) {
        let _ = self.done.set(outcome);
        self.ready.send_replace(true);
    }
}

/// The load's end of a [`Loading`]: [`Setter::set`] gives the outcome; dropped without one
/// (the thread loading it panicked, or the load was abandoned), the component is refused,
/// so that no call waits for it for ever.
pub(crate) struct Setter(Option<Arc<Loading>>);

impl Setter {
    pub fn new(loading: Arc<Loading>) -> Setter {
        Setter(Some(loading))
    }

    pub fn set(mut self, outcome: Result<Box<Wasm>, String>) {
        if let Some(loading) = self.0.take() {
            loading.set(outcome);
        }
    }
}

impl Drop for Setter {
    fn drop(&mut self) {
        if let Some(loading) = self.0.take() {
            loading.set(Err("its load was cut off before it ended".to_string()));
        }
    }
}
