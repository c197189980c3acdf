//! `palisade::fuzzing::manifest`: see its docs for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade::fuzzing::manifest(data));
