//! What a plugin instance lives in: its store state, its resource limiter, the host imports it
//! may call and a WASI context with no ambient authority.
//!
//! Nothing is inherited from the host process: no stdin, no environment, no arguments, no
//! preopened directories, no network (sockets and name lookup denied). What the manifest
//! grants is added: the `env` values, the `files` folders read-only, and `wasi:http` requests
//! to the `http` origins ([`super::outbound`]). Guest stdout and stderr
//! are captured, capped per call ([`MAX_OUTPUT_BYTES_PER_CALL`]), and reported as `plugin_log`
//! events (levels `stdout` / `stderr`) attributed to the plugin. Clocks and randomness are
//! allowed.

use super::bindings;
use super::bindings::{Level, wit};
use super::capture::Captured;
use super::clock::Clock;
use super::limits::{
    DIRECT_TICKS, Limiter, MAX_LOG_LINE_BYTES, MAX_NEXT_CALLS, MAX_WASI_RESOURCES,
};
use crate::events::{Event, EventKind, EventSink, now_ms};
use crate::hook::NextLayer;
use crate::manifest::StateGrant;
use crate::point::Point;
use crate::runtime::convert::to_wit_outcome;
#[cfg(feature = "http")]
use crate::runtime::outbound::Outbound;
use crate::state::{Bounds, Done, MAX_KEY_BYTES, Namespace, Op, Refused, StateStore};
use crate::types::ToolOutcome;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
#[cfg(feature = "http")]
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// Plugin-wide facts the host imports read.
#[derive(Debug)]
pub(crate) struct PluginEnv {
    pub name: String,
    /// `[config]` values, pre-serialized to JSON.
    pub config: std::collections::HashMap<String, String>,
    /// The host-kept state it was granted (`[state]`).
    pub state: Option<GrantedState>,
    /// The environment it was granted (`env`), as read at load.
    pub vars: Vec<(String, String)>,
    /// The folders it was granted (`files`), read-only: the host folder (resolved at load)
    /// and the guest path.
    pub folders: Vec<(std::path::PathBuf, String)>,
    /// The origins it may send HTTP requests to (`http`).
    pub http: Arc<[crate::manifest::HttpGrant]>,
}

/// A plugin's `[state]` grant, where its values are kept, and whose values they are.
#[derive(Debug)]
pub(crate) struct GrantedState {
    pub grant: StateGrant,
    pub store: StateStore,
    /// Its state domain: the grant's `shared`, or its folder's own
    /// ([`crate::state::folder_domain`]), never its name.
    pub domain: Arc<str>,
}

/// The invocation the instance is serving right now.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    pub session_id: Arc<str>,
    pub invocation_id: u64,
    pub hook_id: Arc<str>,
    pub point: Point,
    pub clock: Arc<Clock>,
    pub logs_left: u32,
    /// State calls left ([`MAX_STATE_CALLS_PER_CALL`]).
    pub state_left: u32,
    /// `next()` calls left ([`MAX_NEXT_CALLS`]).
    pub next_left: u32,
    /// The size of the largest outcome `next()` returned in this invocation: a wrapper may
    /// answer that much whatever its `payload_max_bytes`.
    pub next_bytes: usize,
}

pub(crate) struct State {
    /// Its WASI context: made with the state when the plugin is granted folders (opening them
    /// may fail, and then the instance is not made), else at the guest's first WASI call — a
    /// guest that makes none (most guards) never pays for one.
    wasi: Option<WasiCtx>,
    /// Its `wasi:random/insecure-seed`, made at the guest's first ask ([`State::seed`]).
    seed: Option<(u64, u64)>,
    pub stdout: Captured,
    pub stderr: Captured,
    table: ResourceTable,
    pub limiter: Limiter,
    pub env: Arc<PluginEnv>,
    /// Where the guest's logs go (`plugin_log`): none when no sink wants them.
    pub sink: Option<Arc<dyn EventSink>>,
    pub call: CallContext,
    /// Set while a `tool-execute` hook runs.
    pub next: Option<NextLayer>,
    /// While the instance runs directly, on the caller's thread, where it cannot yield: the
    /// epoch ticks it has seen so far ([`State::direct_tick`]).
    direct: Option<u32>,
    #[cfg(feature = "http")]
    http: WasiHttpCtx,
    /// What its `wasi:http` requests may reach.
    #[cfg(feature = "http")]
    outbound: Outbound,
    /// Whether the instance is being made ahead of its call ([`State::ahead`]).
    ahead: Ahead,
}

/// Where an instance made ahead of its call stands (a per-call plugin's spare instance,
/// [`crate::runtime::wasm::Spares`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ahead {
    /// Made for the invocation it serves (or taken by one): the usual case.
    No,
    /// Being made ahead, and it has asked for nothing only an invocation has.
    Clean,
    /// Being made ahead, and it asked for something only an invocation has — a Palisade
    /// host call other than `config`, or an HTTP request: it is thrown away, and its plugin
    /// gets no more spares.
    Spoiled,
}

impl State {
    /// A new instance's state. `Err`: a granted folder cannot be opened any more (it was
    /// removed or replaced since load), so the instance is not made.
    pub fn new(
        env: Arc<PluginEnv>,
        sink: Option<Arc<dyn EventSink>>,
        call: CallContext,
    ) -> Result<Self, String> {
        let (stdout, stderr) = (Captured::default(), Captured::default());
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_WASI_RESOURCES);
        #[cfg(feature = "http")]
        let outbound = Outbound::new(env.http.clone(), call.clock.clone());
        Ok(State {
            wasi: if env.folders.is_empty() {
                None
            } else {
                Some(sandboxed_wasi(&stdout, &stderr, &env)?)
            },
            seed: None,
            stdout,
            stderr,
            table,
            limiter: Limiter::default(),
            env,
            sink,
            call,
            next: None,
            direct: None,
            #[cfg(feature = "http")]
            http: WasiHttpCtx::new(),
            #[cfg(feature = "http")]
            outbound,
            ahead: Ahead::No,
        })
    }

    /// The state of an instance made ahead of its call (a per-call plugin's spare), before
    /// any invocation: its instantiation runs under `timeout` from now. Until an
    /// invocation takes it ([`State::begin`]), every Palisade host call but `config` and
    /// every HTTP request is refused and spoils it ([`State::spoiled`]): what it would have
    /// done with an invocation's context must not be done without one.
    pub fn ahead(
        env: Arc<PluginEnv>,
        sink: Option<Arc<dyn EventSink>>,
        timeout: std::time::Duration,
    ) -> Result<Self, String> {
        let call = CallContext {
            session_id: Arc::from(""),
            invocation_id: 0,
            hook_id: Arc::from(""),
            point: Point::PreTool,
            clock: Clock::new(Instant::now() + timeout),
            logs_left: 0,
            state_left: 0,
            next_left: 0,
            next_bytes: 0,
        };
        let mut state = State::new(env, sink, call)?;
        state.ahead = Ahead::Clean;
        #[cfg(feature = "http")]
        {
            state.outbound.ahead = true;
        }
        Ok(state)
    }

    /// Whether an instance made ahead of its call asked for what only an invocation has.
    pub fn spoiled(&self) -> bool {
        #[cfg(feature = "http")]
        if self.outbound.spoiled {
            return true;
        }
        self.ahead == Ahead::Spoiled
    }

    /// In an instance being made ahead of its call: marks it spoiled and returns `true`.
    fn without_invocation(&mut self) -> bool {
        if self.ahead == Ahead::No {
            return false;
        }
        self.ahead = Ahead::Spoiled;
        true
    }

    /// Marks the start of a direct call (or instantiation).
    pub fn enter_direct(&mut self) {
        self.direct = Some(0);
    }

    /// Marks its end; `true` when it ran long, past [`DIRECT_TICKS`] epoch ticks.
    pub fn leave_direct(&mut self) -> bool {
        self.direct
            .take()
            .is_some_and(|ticks| ticks >= DIRECT_TICKS)
    }

    /// A direct call (or instantiation) made a clock subscription, which it can only wait
    /// for by holding the thread: it counts as long (its plugin goes on a fiber after it).
    /// `false` when the instance is not running directly.
    pub fn direct_waits(&mut self) -> bool {
        self.direct
            .as_mut()
            .map(|ticks| *ticks = (*ticks).max(DIRECT_TICKS))
            .is_some()
    }

    /// Counts an epoch tick of a direct call; `false` when the instance is not running
    /// directly.
    pub fn direct_tick(&mut self) -> bool {
        self.direct.as_mut().map(|ticks| *ticks += 1).is_some()
    }

    /// Prepares a reused instance's state for a new invocation.
    pub fn begin(&mut self, call: CallContext) {
        #[cfg(feature = "http")]
        self.outbound.begin(call.clock.clone());
        self.call = call;
        self.ahead = Ahead::No;
    }
}

/// The WASI context of a plugin's instance, its granted folders opened.
fn sandboxed_wasi(
    stdout: &Captured,
    stderr: &Captured,
    env: &PluginEnv,
) -> Result<WasiCtx, String> {
    let mut builder = wasi_builder(stdout, stderr, env);
    // Each folder read-only (a capability-based directory: no `..` out of it, no symlink out
    // of it, no writes).
    for (host, guest) in &env.folders {
        builder
            .preopened_dir(host, guest, wasmtime_wasi::FsPerms::ReadOnly)
            .map_err(|e| format!("cannot open its granted folder {}: {e:#}", host.display()))?;
    }
    Ok(builder.build())
}

/// Everything of [`sandboxed_wasi`] but the folders: what cannot fail.
fn wasi_builder(stdout: &Captured, stderr: &Captured, env: &PluginEnv) -> WasiCtxBuilder {
    let mut builder = WasiCtx::builder();
    builder
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }));
    // Its grants only: the named variables as read at load (the folders: above).
    for (name, value) in &env.vars {
        builder.env(name, value);
    }
    builder
}

impl State {
    /// Reports what the guest wrote to stdout and stderr during the call, one event per line,
    /// and the HTTP requests it sent or was refused.
    pub fn report_output(&mut self) {
        #[cfg(feature = "http")]
        for line in self.outbound.records.take() {
            self.emit_log("http", line);
        }
        let output = [
            (self.stdout.take(), "stdout"),
            (self.stderr.take(), "stderr"),
        ];
        for (bytes, level) in output {
            if bytes.is_empty() || self.sink.is_none() {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                self.emit_log(level, line.to_string());
            }
        }
    }

    fn emit_log(&self, level: &'static str, message: String) {
        let Some(sink) = &self.sink else { return };
        let caller = crate::events::CallerFields::now();
        sink.emit(&Event {
            kind: EventKind::PluginLog { level, message },
            at_ms: now_ms(),
            session_id: self.call.session_id.to_string(),
            invocation_id: invocation_id(self.call.invocation_id),
            hook_id: self.call.hook_id.to_string(),
            plugin: self.env.name.clone(),
            point: self.call.point,
            agent_id: caller.agent_id,
            agent_type: caller.agent_type,
            trace_parent: caller.trace_parent,
        });
    }
}

#[cfg(feature = "http")]
impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.outbound,
        }
    }
}

/// `wasi:random/insecure-seed`, the keys of a guest's hash maps (Rust's `RandomState` asks
/// for them when it makes its first), answered here rather than by the WASI context: a Rust
/// guard that only seeds its hash maps makes no WASI context at all, whose making (its random
/// generators seeded from the thread's, boxed clocks and streams) a per-call instance would
/// pay in every call. Both linkers serve it from here ([`crate::runtime::engines`],
/// [`super::direct`]).
impl wasmtime_wasi::p2::bindings::random::insecure_seed::Host for State {
    fn insecure_seed(&mut self) -> wasmtime::Result<(u64, u64)> {
        Ok(*self.seed.get_or_insert_with(new_seed))
    }
}

/// A seed no other instance of the process gets, and that no one can predict: SipHash of a
/// count under keys the process draws from the OS once (std's `RandomState`). What the seed
/// defends against is hash flooding, by input crafted to collide in a plugin's hash maps,
/// and it needs neither more randomness than that nor a generator per instance (WASI asks
/// for no more: the value "may even be entirely deterministic").
fn new_seed() -> (u64, u64) {
    use std::hash::BuildHasher;
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static KEYS: LazyLock<std::hash::RandomState> = LazyLock::new(std::hash::RandomState::new);
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    (KEYS.hash_one((n, 0u8)), KEYS.hash_one((n, 1u8)))
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // Made here only for a plugin granted no folders ([`State::wasi`]): nothing to fail.
        let ctx = self
            .wasi
            .get_or_insert_with(|| wasi_builder(&self.stdout, &self.stderr, &self.env).build());
        WasiCtxView {
            ctx,
            table: &mut self.table,
        }
    }
}

impl bindings::palisade::hooks::types::Host for State {}

impl bindings::palisade::hooks::host::Host for State {
    fn log(&mut self, level: Level, mut message: String) {
        if self.without_invocation() || self.call.logs_left == 0 {
            return;
        }
        self.call.logs_left -= 1;
        if self.sink.is_none() {
            return;
        }
        if message.len() > MAX_LOG_LINE_BYTES {
            let mut end = MAX_LOG_LINE_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.emit_log(level, message);
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.env.config.get(&key).cloned()
    }

    fn current_invocation(&mut self) -> bindings::palisade::hooks::host::Invocation {
        // Ahead of its call there is none: the placeholder answered here spoils the instance.
        self.without_invocation();
        bindings::palisade::hooks::host::Invocation {
            session_id: self.call.session_id.to_string(),
            invocation_id: invocation_id(self.call.invocation_id),
            hook_id: self.call.hook_id.to_string(),
        }
    }

    fn kind_of(&mut self, tool: String) -> Option<wit::ToolKind> {
        use crate::tool_kinds::ToolKind;
        Some(match crate::agents::kind_of(&tool)? {
            ToolKind::Shell => wit::ToolKind::Shell,
            ToolKind::FileRead => wit::ToolKind::FileRead,
            ToolKind::FileWrite => wit::ToolKind::FileWrite,
            ToolKind::Search => wit::ToolKind::Search,
            ToolKind::Web => wit::ToolKind::Web,
            ToolKind::Mcp => wit::ToolKind::Mcp,
            ToolKind::Subagent => wit::ToolKind::Subagent,
        })
    }
}

impl bindings::palisade::hooks::tool_dispatch::Host for State {
    async fn next(&mut self, timeout_ms: Option<u32>) -> wit::ToolOutcome {
        let layer = if self.without_invocation() {
            None
        } else {
            self.next.clone()
        };
        let Some(layer) = layer else {
            return to_wit_outcome(&ToolOutcome::error(
                "next() is only available inside a tool-execute hook",
            ));
        };
        if self.call.next_left == 0 {
            return to_wit_outcome(&ToolOutcome::error(format!(
                "next() was called more than {MAX_NEXT_CALLS} times in one tool-execute \
                 invocation; the tool was not run again"
            )));
        }
        self.call.next_left -= 1;
        let clock = self.call.clock.clone();
        clock.pause();
        let outcome = layer(timeout_ms).await;
        clock.resume();
        let outcome = to_wit_outcome(&outcome);
        self.call.next_bytes = self
            .call
            .next_bytes
            .max(crate::runtime::convert::outcome_bytes(&outcome));
        outcome
    }
}

use bindings::palisade::hooks::state::{Error as StateError, Scope as StateScope};

impl State {
    /// One state call: granted, bounded and counted here, done by the store. A store failure
    /// is the call's `Err` (a trap): the hook stops with `state-unavailable`.
    async fn state(
        &mut self,
        scope: StateScope,
        key: String,
        op: Op,
    ) -> wasmtime::Result<Result<Done, StateError>> {
        if self.without_invocation() {
            return Ok(Err(StateError::NotGranted));
        }
        let Some(GrantedState {
            grant,
            store,
            domain,
        }) = &self.env.state
        else {
            return Ok(Err(StateError::NotGranted));
        };
        let (granted, session) = match scope {
            StateScope::Session => (grant.session, Some(self.call.session_id.clone())),
            StateScope::Global => (grant.global, None),
        };
        if !granted {
            return Ok(Err(StateError::NotGranted));
        }
        if key.len() > MAX_KEY_BYTES {
            return Ok(Err(StateError::TooLarge));
        }
        if self.call.state_left == 0 {
            return Ok(Err(StateError::TooManyCalls));
        }
        self.call.state_left -= 1;
        let namespace = Namespace {
            domain: domain.clone(),
            session,
        };
        let bounds = Bounds {
            max_keys: grant.max_keys,
            max_bytes: grant.max_bytes,
        };
        match store.apply(namespace, key, op, bounds).await {
            Ok(Ok(done)) => Ok(Ok(done)),
            Ok(Err(Refused::TooLarge)) => Ok(Err(StateError::TooLarge)),
            Ok(Err(Refused::TooManyKeys)) => Ok(Err(StateError::TooManyKeys)),
            Ok(Err(Refused::NotACounter)) => Ok(Err(StateError::NotACounter)),
            Err(unavailable) => Err(wasmtime::Error::new(unavailable)),
        }
    }
}

impl bindings::palisade::hooks::state::Host for State {
    async fn get(
        &mut self,
        scope: StateScope,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, StateError>> {
        Ok(self
            .state(scope, key, Op::Get)
            .await?
            .map(|done| match done {
                Done::Value(value) => value,
                _ => unreachable!("a get answers a value"),
            }))
    }

    async fn set(
        &mut self,
        scope: StateScope,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), StateError>> {
        Ok(self.state(scope, key, Op::Set(value)).await?.map(|_| ()))
    }

    async fn delete(
        &mut self,
        scope: StateScope,
        key: String,
    ) -> wasmtime::Result<Result<bool, StateError>> {
        Ok(self.state(scope, key, Op::Delete).await?.map(flag))
    }

    async fn compare_and_swap(
        &mut self,
        scope: StateScope,
        key: String,
        expected: Option<Vec<u8>>,
        new: Option<Vec<u8>>,
    ) -> wasmtime::Result<Result<bool, StateError>> {
        let op = Op::CompareAndSwap { expected, new };
        Ok(self.state(scope, key, op).await?.map(flag))
    }

    async fn increment(
        &mut self,
        scope: StateScope,
        key: String,
        by: i64,
    ) -> wasmtime::Result<Result<i64, StateError>> {
        Ok(self
            .state(scope, key, Op::Increment(by))
            .await?
            .map(|done| match done {
                Done::Count(count) => count,
                _ => unreachable!("an increment answers a count"),
            }))
    }
}

fn flag(done: Done) -> bool {
    match done {
        Done::Flag(flag) => flag,
        _ => unreachable!("answers a flag"),
    }
}

/// The printed form of an invocation id.
pub(crate) fn invocation_id(n: u64) -> String {
    // `format!("inv-{n:08x}")` without the formatting machinery: one for every event.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (n.checked_ilog2().unwrap_or(0) / 4 + 1).max(8);
    let mut id = String::with_capacity(4 + digits as usize);
    id.push_str("inv-");
    for at in (0..digits).rev() {
        id.push(HEX[((n >> (4 * at)) & 0xf) as usize] as char);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::limits::{MAX_LOG_LINES_PER_CALL, MAX_STATE_CALLS_PER_CALL};

    #[test]
    fn invocation_ids_are_eight_hex_digits_at_least() {
        for n in [
            0,
            1,
            0xa,
            0x1234_abcd,
            0xffff_ffff,
            0x1_0000_0000,
            0xfedc_ba98_7654,
            u64::MAX,
        ] {
            assert_eq!(invocation_id(n), format!("inv-{n:08x}"));
        }
    }

    fn env() -> Arc<PluginEnv> {
        let grant = StateGrant {
            session: true,
            global: true,
            max_keys: 10,
            max_bytes: 1024,
            shared: None,
        };
        Arc::new(PluginEnv {
            name: "p".into(),
            config: [("k".to_string(), "\"v\"".to_string())].into(),
            state: Some(GrantedState {
                grant,
                store: StateStore::memory(),
                domain: "@p".into(),
            }),
            vars: Vec::new(),
            folders: Vec::new(),
            http: Arc::from([]),
        })
    }

    fn invocation() -> CallContext {
        CallContext {
            session_id: Arc::from("s"),
            invocation_id: 7,
            hook_id: Arc::from("p/pre-tool"),
            point: Point::PreTool,
            clock: Clock::new(Instant::now() + std::time::Duration::from_secs(10)),
            logs_left: MAX_LOG_LINES_PER_CALL,
            state_left: MAX_STATE_CALLS_PER_CALL,
            next_left: MAX_NEXT_CALLS,
            next_bytes: 0,
        }
    }

    /// An instance's `insecure-seed` is its own, the same at every ask, and asking for it
    /// makes no WASI context.
    #[test]
    fn each_state_has_its_own_insecure_seed_and_no_wasi_context_for_it() {
        use wasmtime_wasi::p2::bindings::random::insecure_seed::Host as _;
        let mut one = State::new(env(), None, invocation()).unwrap();
        let mut other = State::new(env(), None, invocation()).unwrap();
        let seed = one.insecure_seed().unwrap();
        assert_eq!(one.insecure_seed().unwrap(), seed);
        assert!(one.wasi.is_none(), "the seed made a WASI context");
        assert_ne!(other.insecure_seed().unwrap(), seed);
        assert_ne!(seed.0, seed.1);
    }

    /// Ahead of its call, each host call that needs an invocation spoils the instance and
    /// gets nothing of one (no state, no `next()`, an empty invocation); `config` does not.
    /// An invocation that takes the instance makes them work again.
    #[tokio::test]
    async fn made_ahead_what_needs_an_invocation_spoils_the_instance() {
        use bindings::palisade::hooks::host::Host as _;
        use bindings::palisade::hooks::state::Host as _;
        use bindings::palisade::hooks::tool_dispatch::Host as _;
        let ahead = || State::ahead(env(), None, std::time::Duration::from_secs(10)).unwrap();

        let mut state = ahead();
        assert_eq!(state.config("k".into()).as_deref(), Some("\"v\""));
        assert!(!state.spoiled(), "config needs no invocation");

        let mut state = ahead();
        state.log(Level::Info, "hello".into());
        assert!(state.spoiled(), "log");

        let mut state = ahead();
        assert_eq!(state.current_invocation().session_id, "");
        assert!(state.spoiled(), "current-invocation");

        let mut state = ahead();
        let got = state.get(StateScope::Session, "k".into()).await.unwrap();
        assert!(matches!(got, Err(StateError::NotGranted)), "{got:?}");
        assert!(state.spoiled(), "state");

        let mut state = ahead();
        state.next(None).await;
        assert!(state.spoiled(), "next");

        let mut state = ahead();
        let request = http::Request::builder()
            .uri("http://example.com/")
            .body(wasmtime_wasi_http::WasiBody::default())
            .unwrap();
        let sent = wasmtime_wasi_http::WasiHttpHooks::send_request(
            &mut state.outbound,
            request,
            None,
            Box::new(async { Ok(()) }),
        );
        assert!(Box::into_pin(sent).await.is_err());
        assert!(state.spoiled(), "an HTTP request");

        // Taken by an invocation, the same calls count as that invocation's.
        let mut state = ahead();
        state.begin(invocation());
        state.log(Level::Info, "hello".into());
        let set = state
            .set(StateScope::Session, "k".into(), b"1".to_vec())
            .await;
        assert!(matches!(set, Ok(Ok(()))), "{set:?}");
        assert_eq!(state.current_invocation().session_id, "s");
        assert!(!state.spoiled());
        assert!(!state.outbound.ahead);
    }
}
