//! The direct linker: the imports of a plugin that can be called on the caller's thread,
//! without a fiber.
//!
//! wasmtime runs a call on a fiber (`call_async`) whenever the instance was linked with an
//! async host function, and that fiber — its switch in and out, the async lowering — is most
//! of a warm call's cost. Only a few of Palisade's imports need it: WASI's blocking I/O,
//! files, sockets, HTTP, host-kept state and `next()`. A component whose imports are all in
//! this linker — the hook host functions, `wasi:cli`, `wasi:random`, the clocks and `wasi:io`
//! — is linked here, and its calls are plain synchronous calls ([`super::instance`]).
//!
//! `wasi:io` is async in WASI's own bindings because a pollable may wait. In this linker
//! only a clock's can: every stream a directly linked instance can reach is ready at once
//! (stdout and stderr are [`super::sandbox::Captured`], written synchronously; stdin is
//! closed), the imports that make pollables which wait on the world (files, sockets, HTTP)
//! are not here, and a clock subscription is a [`Nap`], which holds the thread until it is
//! due (at most to the invocation's deadline) and sends the plugin to a fiber after the call
//! (its new instances are linked to the full linker then: see [`Nap`]).
//! So each blocking `wasi:io` function polls its operation once; should it ever not be
//! ready, the call traps (`would block`) instead of blocking the thread: it fails closed like
//! any trap, and never waits.

use super::bindings;
use super::sandbox::State;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use wasmtime::component::{HasData, HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, StreamError, StreamResult};
use wasmtime_wasi::{WasiView, cli::WasiCli, cli::WasiCliView, random::WasiRandom};
use wasmtime_wasi_io::bindings::wasi::io::poll::{
    Host as AsyncPoll, HostPollable as AsyncPollable,
};
use wasmtime_wasi_io::bindings::wasi::io::streams::{
    Host as AsyncStreams, HostInputStream as AsyncInput, HostOutputStream as AsyncOutput,
};

/// The monotonic clock's interface, as WASI 0.2 names it (a guest importing an earlier 0.2
/// version links to it too).
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Builds the direct linker for `engine`'s components.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<State>> {
    use wasmtime_wasi::p2::bindings::{cli, clocks, random};
    let mut linker = Linker::<State>::new(engine);
    let l = &mut linker;
    wasmtime_wasi_io::bindings::wasi::io::error::add_to_linker::<State, Table>(l, |s| {
        s.ctx().table
    })?;
    poll::add_to_linker::<State, Direct>(l, |s| Immediate(s.ctx().table))?;
    streams::add_to_linker::<State, Direct>(l, |s| Immediate(s.ctx().table))?;
    cli::exit::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::environment::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::stdin::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::stdout::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::stderr::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_input::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_output::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_stdin::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_stdout::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_stderr::add_to_linker::<State, WasiCli>(l, State::cli)?;
    random::random::add_to_linker::<State, WasiRandom>(l, |s| s.ctx().ctx.random())?;
    random::insecure::add_to_linker::<State, WasiRandom>(l, |s| s.ctx().ctx.random())?;
    // From the state, not the WASI context (see its `insecure_seed`).
    random::insecure_seed::add_to_linker::<State, HasSelf<State>>(l, |s| s)?;
    clocks::wall_clock::add_to_linker::<State, wasmtime_wasi::clocks::WasiClocks>(l, |s| {
        wasmtime_wasi::clocks::WasiClocksView::clocks(s)
    })?;
    // The monotonic clock without its subscriptions, whose pollables wait.
    let mut monotonic = l.instance(MONOTONIC_CLOCK)?;
    monotonic.func_wrap("now", |mut store, (): ()| {
        let mut clocks = wasmtime_wasi::clocks::WasiClocksView::clocks(store.data_mut());
        Ok((clocks::monotonic_clock::Host::now(&mut clocks)?,))
    })?;
    monotonic.func_wrap("resolution", |mut store, (): ()| {
        let mut clocks = wasmtime_wasi::clocks::WasiClocksView::clocks(store.data_mut());
        Ok((clocks::monotonic_clock::Host::resolution(&mut clocks)?,))
    })?;
    // Its subscriptions, as naps: see `Nap`.
    monotonic.func_wrap("subscribe-duration", |mut store, (after,): (u64,)| {
        let until = Instant::now().checked_add(Duration::from_nanos(after));
        nap(store.data_mut(), until)
    })?;
    monotonic.func_wrap("subscribe-instant", |mut store, (when,): (u64,)| {
        let state = store.data_mut();
        let mut clocks = wasmtime_wasi::clocks::WasiClocksView::clocks(state);
        let now = clocks::monotonic_clock::Host::now(&mut clocks)?;
        let until = Instant::now().checked_add(Duration::from_nanos(when.saturating_sub(now)));
        nap(state, until)
    })?;
    bindings::palisade::hooks::types::add_to_linker::<State, HasSelf<State>>(l, |s| s)?;
    bindings::palisade::hooks::host::add_to_linker::<State, HasSelf<State>>(l, |s| s)?;
    Ok(linker)
}

/// A clock subscription of an instance linked for direct calls. Its imports are synchronous,
/// so nothing can wait for it without holding the thread: in a direct call, waiting for it —
/// or asking whether it is ready — holds the thread until it is due or the invocation's
/// deadline comes, whichever is first, as a direct call that computes holds it to its end,
/// and the call counts as long ([`State::direct_waits`]): the plugin's later calls go on a
/// fiber, and its new instances are linked to the full linker, where a sleep waits on the
/// executor ([`super::wasm::Loaded::pre`]). An instance of this linker that lives on — a
/// session's, made before — is called on a fiber too, where the same synchronous wait would
/// hold the thread at every call: there the subscription fails the call instead, closed.
/// (Rust's standard library links these subscriptions into every component that can write
/// to stdout or stderr, since rustc 1.97, whether it ever waits or not: were they left out
/// of this linker, no Rust plugin would be called directly.)
struct Nap {
    until: Instant,
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Nap {
    async fn ready(&mut self) {
        let now = Instant::now();
        if self.until > now {
            std::thread::sleep(self.until - now);
        }
    }
}

/// A nap until `until` (`None`: further than the clock can count), cut at the invocation's
/// deadline.
fn nap(state: &mut State, until: Option<Instant>) -> wasmtime::Result<(Resource<DynPollable>,)> {
    if !state.direct_waits() {
        return Err(wasmtime::Error::msg(
            "a clock wait on a fiber in an instance linked for direct calls (made before its \
             plugin first slept or ran long), whose waits would hold the thread: it fails \
             closed; the plugin's new instances wait on the executor",
        ));
    }
    let deadline = state.call.clock.deadline();
    let until = until.map_or(deadline, |until| until.min(deadline));
    let table = state.ctx().table;
    let nap = table.push(Nap { until })?;
    Ok((wasmtime_wasi_io::poll::subscribe(table, nap)?,))
}

struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

struct Direct;

impl HasData for Direct {
    type Data<'a> = Immediate<'a>;
}

/// `wasi:io` for a directly linked instance: each blocking operation polled once.
struct Immediate<'a>(&'a mut ResourceTable);

/// Polls `operation` once. `None`: it would have waited.
fn once<F: Future>(operation: F) -> Option<F::Output> {
    match pin!(operation).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(done) => Some(done),
        Poll::Pending => None,
    }
}

fn would_block(what: &str) -> wasmtime::Error {
    wasmtime::Error::msg(format!(
        "`{what}` would block, and this instance is called directly (it imports nothing that \
         may wait)"
    ))
}

fn stream_once<T>(what: &str, operation: impl Future<Output = StreamResult<T>>) -> StreamResult<T> {
    once(operation).unwrap_or_else(|| Err(StreamError::Trap(would_block(what))))
}

fn trap_once<T>(
    what: &str,
    operation: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    once(operation).unwrap_or_else(|| Err(would_block(what)))
}

impl poll::Host for Immediate<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        trap_once("poll", AsyncPoll::poll(self.0, pollables))
    }
}

impl poll::HostPollable for Immediate<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        trap_once("pollable.ready", AsyncPollable::ready(self.0, pollable))
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        trap_once("pollable.block", AsyncPollable::block(self.0, pollable))
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        AsyncPollable::drop(self.0, pollable)
    }
}

impl streams::Host for Immediate<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        Ok(AsyncStreams::convert_stream_error(self.0, err)?.into())
    }
}

impl streams::HostOutputStream for Immediate<'_> {
    fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        trap_once("output-stream.drop", AsyncOutput::drop(self.0, stream))
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<u64> {
        AsyncOutput::check_write(self.0, stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        AsyncOutput::write(self.0, stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        stream_once(
            "blocking-write-and-flush",
            AsyncOutput::blocking_write_and_flush(self.0, stream, bytes),
        )
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        stream_once(
            "blocking-write-zeroes-and-flush",
            AsyncOutput::blocking_write_zeroes_and_flush(self.0, stream, len),
        )
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        AsyncOutput::subscribe(self.0, stream)
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        AsyncOutput::write_zeroes(self.0, stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        // A borrow, as WASI's own synchronous binding passes it.
        AsyncOutput::flush(self.0, Resource::new_borrow(stream.rep()))
    }

    fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        stream_once(
            "blocking-flush",
            AsyncOutput::blocking_flush(self.0, Resource::new_borrow(stream.rep())),
        )
    }

    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        AsyncOutput::splice(self.0, dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        stream_once(
            "blocking-splice",
            AsyncOutput::blocking_splice(self.0, dst, src, len),
        )
    }
}

impl streams::HostInputStream for Immediate<'_> {
    fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        trap_once("input-stream.drop", AsyncInput::drop(self.0, stream))
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        AsyncInput::read(self.0, stream, len)
    }

    fn blocking_read(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        stream_once(
            "blocking-read",
            AsyncInput::blocking_read(self.0, stream, len),
        )
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        AsyncInput::skip(self.0, stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        stream_once(
            "blocking-skip",
            AsyncInput::blocking_skip(self.0, stream, len),
        )
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        AsyncInput::subscribe(self.0, stream)
    }
}
