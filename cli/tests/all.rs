//! The CLI's tests, one module per file (`bridge.rs`, `serve.rs`, …), built into one binary
//! (wasmtime and the rest linked once, not once per file): `cargo test -p palisade-cli --test
//! all` runs them all, `… --test all serve::` one file's.

#[path = "mock_model/mod.rs"]
mod mock_model;
#[path = "support/process.rs"]
mod process;
#[path = "support/server.rs"]
mod server;
#[path = "support/toolchain.rs"]
mod toolchain;

mod acp;
mod agents;
mod bridge;
mod cli;
mod conformance;
mod docs;
mod facts;
mod front_doors;
mod languages;
mod mcp;
mod policies;
mod serve;
mod telemetry;
