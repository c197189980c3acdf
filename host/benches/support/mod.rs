//! What the benches share.

use palisade::Plugin;
use std::time::{Duration, Instant};

/// The time of `iters` calls made by `call`, each started once `plugin` (per-call) has its
/// spare instance ready: calls spaced out as an agent's are, whose instance was made after
/// the call before, on this runtime, while this waited (`HostBuilder::spare_instances`).
pub async fn on_spares<F: Future>(
    iters: u64,
    plugin: &Plugin,
    mut call: impl FnMut() -> F,
) -> Duration {
    let mut took = Duration::ZERO;
    for _ in 0..iters {
        while !plugin.spare_ready() {
            assert!(
                !plugin.spares_refused(),
                "{}: spares refused",
                plugin.name()
            );
            tokio::task::yield_now().await;
        }
        let start = Instant::now();
        std::hint::black_box(call().await);
        took += start.elapsed();
    }
    took
}
