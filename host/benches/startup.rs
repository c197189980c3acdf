//! What a process that handles one hook event pays before it dispatches (the bridges start
//! one per event): building the host (the engine and its linker), with and without the
//! instance pool, loading the five bundled Rust examples from a warm component cache, and
//! both together (the linkers' build, on a thread of its own, included).
//!
//! Run: `cargo bench -p palisade --bench startup`.

use criterion::{Criterion, criterion_group, criterion_main};
use palisade::Host;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    palisade_examples::install(&plugins).unwrap();
    let cache = dir.path().join("cache");
    let mut group = c.benchmark_group("startup");
    group.sample_size(30);
    for (label, slots) in [("no pool", 0), ("a pool of 1000", 1000)] {
        group.bench_function(format!("build the host, {label}"), |b| {
            b.iter(|| {
                Host::builder()
                    .instance_pool(slots)
                    .cache_dir(&cache)
                    .build()
                    .unwrap()
            })
        });
    }
    let host = Host::builder()
        .instance_pool(0)
        .cache_dir(&cache)
        .build()
        .unwrap();
    // Fills the cache.
    host.load_dir(&plugins).unwrap();
    group.bench_function("load the five examples, warm cache", |b| {
        b.iter(|| host.load_dir(&plugins).unwrap())
    });
    // What a bridged event pays in all: the linkers are built on a thread of their own
    // while the manifests are read, and waited for at the first component.
    group.bench_function(
        "build the host and load the five examples, warm cache",
        |b| {
            b.iter(|| {
                Host::builder()
                    .instance_pool(0)
                    .cache_dir(&cache)
                    .build()
                    .unwrap()
                    .load_dir(&plugins)
                    .unwrap()
            })
        },
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
