//! The library's integration tests, one module per file (`sandbox.rs`, `semantics.rs`, …),
//! built into one binary: `cargo test -p palisade-tests --test all` runs them all,
//! `… --test all sandbox::` one file's.

mod agent_loop;
mod architecture;
mod direct;
mod facts;
mod grants;
mod interception;
mod languages;
mod lifecycle;
mod loading;
mod outbound;
mod overlapped;
mod pipeline;
mod pre_tool;
mod prepare;
mod runtimes;
mod sandbox;
mod semantics;
mod state;
