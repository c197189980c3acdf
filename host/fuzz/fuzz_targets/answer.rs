//! `palisade::fuzzing::answer`: see its docs for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade::fuzzing::answer(data));
