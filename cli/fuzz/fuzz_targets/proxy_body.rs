//! `palisade_cli_fuzz::proxy_body`: see its docs for what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| palisade_cli_fuzz::proxy_body(data));
