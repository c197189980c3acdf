//! A small pool of scoped threads for loading plugins side by side: each worker takes the next
//! job until none is left. May touch: nothing but the jobs it is given.

use crate::host::Host;
use std::sync::Arc;

/// The loads a load's threads share out (plugins, or an overlapped load's components):
/// each takes the next in `order` until none is left.
pub(super) struct Jobs<T> {
    pub(super) order: Vec<usize>,
    pub(super) slots: Vec<std::sync::Mutex<Option<T>>>,
    pub(super) next: std::sync::atomic::AtomicUsize,
}

impl<T> Jobs<T> {
    /// Does `work` with `host` until none is left, handing each result (with its index) to
    /// `each`.
    pub(super) fn run<R>(
        &self,
        host: &Host,
        work: fn(&Host, T) -> R,
        mut each: impl FnMut((usize, R)),
    ) {
        loop {
            let taken = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&index) = self.order.get(taken) else {
                return;
            };
            let job = self.slots[index]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .expect("each load is taken once");
            each((index, work(host, job)));
        }
    }
}

/// Loads begun on helper threads: [`Parallel::finish`] does this thread's share and waits
/// for the rest.
pub(super) struct Parallel<T, R> {
    pub(super) jobs: Arc<Jobs<T>>,
    pub(super) work: fn(&Host, T) -> R,
    pub(super) received: std::sync::mpsc::Receiver<(usize, R)>,
}

impl<T, R> Parallel<T, R> {
    /// Does this thread's share of the loads, then waits for the helpers' (over their
    /// channel, not for their exit: the first may still be opening the state store). The
    /// results keep the order of the loads given.
    pub(super) fn finish(self, host: &Host) -> Vec<R> {
        let count = self.jobs.slots.len();
        let mut done: Vec<(usize, R)> = Vec::with_capacity(count);
        self.jobs.run(host, self.work, |one| done.push(one));
        done.extend(self.received.iter());
        assert_eq!(
            done.len(),
            count,
            "a plugin loader thread ended (panicked) before its plugin was loaded"
        );
        done.sort_by_key(|(index, _)| *index);
        done.into_iter().map(|(_, result)| result).collect()
    }
}
