//! `palisade::fuzzing::Decisions`: a component answering every point with arbitrary WIT
//! values. Needs the `arbitrary` test guest: build it first with
//! `cargo test -p palisade-tests --no-run` (or point PALISADE_FUZZ_GUEST at it).
#![no_main]

use std::sync::OnceLock;

fn decisions() -> &'static palisade::fuzzing::Decisions {
    static DECISIONS: OnceLock<palisade::fuzzing::Decisions> = OnceLock::new();
    DECISIONS.get_or_init(|| {
        let guest = std::env::var_os("PALISADE_FUZZ_GUEST")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../target/guests/wasm32-wasip2/guest/arbitrary_guest.wasm")
            });
        palisade::fuzzing::Decisions::new(&guest)
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| decisions().run(data));
