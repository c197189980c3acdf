//! Reading a `plugin.toml`: serde's raw form, each field checked as it is read
//! ([`super::checked`]), then the rules across fields, every problem listed at once.

use super::checked::{
    Checked, EnvName, Fuel, HttpOrigin, HttpUrl, MemoryCap, PayloadBound, PluginName, Sha256,
    StateBytes, StateDomain, StateKeys, Timeout, ToolMatcher, take,
};
use super::*;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: Checked<PluginName>,
    description: Option<String>,
    wasm: Option<String>,
    command: Option<OneOrMany>,
    url: Option<Checked<HttpUrl>>,
    sha256: Option<Checked<Sha256>>,
    instance: Option<InstanceLifetime>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    hooks: Vec<RawHook>,
    #[serde(default)]
    config: toml::Table,
    env: Option<Vec<Checked<EnvName>>>,
    files: Option<Vec<RawFile>>,
    protocol: Option<Protocol>,
    state: Option<RawState>,
    http: Option<Vec<RawHttp>>,
}

/// An `http` entry: an origin, or an origin with the network its name may lead to.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "an origin (`\"https://host:8443\"`) or a table (`{ url = \"https://host\", network = \"private\" }`)"
)]
enum RawHttp {
    Origin(Checked<HttpOrigin>),
    Table(RawHttpTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpTable {
    url: Checked<HttpOrigin>,
    network: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: String,
    #[serde(rename = "as")]
    guest: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    scopes: Vec<String>,
    max_keys: Option<Checked<StateKeys>>,
    max_bytes: Option<Checked<StateBytes>>,
    shared: Option<Checked<StateDomain>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    timeout_ms: Option<Checked<Timeout>>,
    fuel: Option<Checked<Fuel>>,
    memory_mb: Option<Checked<MemoryCap>>,
    payload_max_bytes: Option<Checked<PayloadBound>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    point: String,
    capability: OneOrMany,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    priority: i32,
    matcher: Option<Checked<ToolMatcher>>,
    #[serde(default)]
    on_failure: OnFailure,
    #[serde(default = "enforced")]
    enforce: bool,
    timeout_ms: Option<Checked<Timeout>>,
    fuel: Option<Checked<Fuel>>,
    memory_mb: Option<Checked<MemoryCap>>,
    payload_max_bytes: Option<Checked<PayloadBound>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Parses and validates a manifest. Every problem found is pushed to `problems`; the manifest
/// is returned only when there were none.
pub(crate) fn parse(path: &Path, text: &str, problems: &mut Vec<Problem>) -> Option<Manifest> {
    let raw: RawManifest = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(err) => {
            let mut problem = Problem::new(path, toml_message(text, &err));
            problem.fix = Some(
                "see the manifest reference in the `palisade::manifest` docs for every field"
                    .into(),
            );
            problems.push(problem);
            return None;
        }
    };
    let before = problems.len();

    let name = raw.name.take(path, "name", problems);
    let sha256 = raw
        .sha256
        .as_ref()
        .and_then(|sha| sha.take(path, "sha256", problems));
    let runtime = runtime(path, &raw, problems);
    let wasm = matches!(runtime, Some(RuntimeSpec::Wasm(_)));
    if let Some(runtime) = runtime
        .as_ref()
        .filter(|r| !matches!(r, RuntimeSpec::Wasm(_)))
    {
        refuse_wasm_only_fields(path, &raw, runtime.family(), problems);
    }
    if matches!(runtime, Some(RuntimeSpec::Http { .. })) && raw.env.is_some() {
        problems.push(
            Problem::new(path, "`env` applies to command hooks only")
                .field("env")
                .fix("remove it: an HTTP hook runs in its own server's environment"),
        );
    }
    let base = limits(path, "limits", &raw.limits, Limits::default(), problems);
    if raw.hooks.is_empty() {
        problems.push(
            Problem::new(path, "the plugin subscribes to no point")
                .field("hooks")
                .fix("add a `[[hooks]]` table with `point` and `capability`"),
        );
    }

    let mut hooks: Vec<HookSpec> = Vec::new();
    for (i, hook) in raw.hooks.iter().enumerate() {
        if let Some(spec) = hook_spec(path, i, hook, runtime.as_ref(), base, &hooks, problems) {
            hooks.push(spec);
        }
    }

    let config = match serde_json::to_value(&raw.config) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => {
            problems.push(
                Problem::new(path, "the config table cannot be expressed as JSON")
                    .field("config")
                    .fix("use strings, numbers, booleans, arrays and tables only"),
            );
            serde_json::Map::new()
        }
    };

    let env = env_names(path, raw.env.as_deref().unwrap_or_default(), problems);
    if wasm && raw.protocol.is_some() {
        problems.push(
            Problem::new(path, "`protocol` applies to command and HTTP hooks only")
                .field("protocol")
                .fix("remove it: a component answers through its WIT exports"),
        );
    }

    let state = raw
        .state
        .as_ref()
        .and_then(|state| state_grant(path, state, problems));
    let files = file_grants(path, raw.files.as_deref().unwrap_or_default(), problems);
    let http = http_grants(path, raw.http.as_deref().unwrap_or_default(), problems);
    let (runtime, name) = (runtime?, name?);
    (problems.len() == before).then(|| Manifest {
        name: name.0,
        description: raw.description,
        runtime,
        sha256: sha256.map(|s| s.0),
        instance: raw.instance.unwrap_or_default(),
        hooks,
        config,
        env,
        protocol: raw.protocol.unwrap_or_default(),
        state,
        files,
        http,
    })
}

/// Validates `[[hooks]]` number `i`; `earlier` are the hooks before it.
fn hook_spec(
    path: &Path,
    i: usize,
    hook: &RawHook,
    runtime: Option<&RuntimeSpec>,
    base: Limits,
    earlier: &[HookSpec],
    problems: &mut Vec<Problem>,
) -> Option<HookSpec> {
    let at = |field: &str| format!("hooks[{i}].{field}");
    let point = match hook.point.parse::<Point>() {
        Ok(point) => point,
        Err(message) => {
            problems.push(
                Problem::new(path, message)
                    .field(at("point"))
                    .fix("use one of the listed names"),
            );
            return None;
        }
    };
    if earlier.iter().any(|h| h.point == point) {
        problems.push(
            Problem::new(path, format!("a second hook on `{point}`"))
                .field(at("point"))
                .fix("one hook per point and plugin: merge the matchers with `|`"),
        );
    }
    let capabilities = capabilities(path, &at("capability"), point, &hook.capability, problems);
    if point == Point::ToolExecute
        && runtime
            .as_ref()
            .is_some_and(|r| !matches!(r, RuntimeSpec::Wasm(_)))
    {
        problems.push(
            Problem::new(path, "a tool-execute wrapper must be a wasm component: it calls `next()` inside its run, which a command or HTTP hook cannot")
                .field(at("point"))
                .fix("write the wrapper as a component (see the `retry` and `timeout` examples), or subscribe to another point"),
        );
    }
    if point == Point::ToolExecute && !hook.enforce {
        problems.push(
            Problem::new(path, "a tool-execute wrapper cannot run in shadow: it runs the tool itself (its `next()` calls are the tool's execution), so what it does cannot be left unapplied")
                .field(at("enforce"))
                .fix("remove `enforce = false`; try the wrapper on a test session first (`palisade run`, `palisade replay`)"),
        );
    }
    if hook.mode == Mode::Background && capabilities != [Capability::Observe] {
        problems.push(
            Problem::new(path, "a background hook must be observe-only")
                .field(at("mode"))
                .fix("set `capability = \"observe\"`, or `mode = \"foreground\"`"),
        );
    }
    let matcher = match &hook.matcher {
        None => None,
        Some(_) if !point.has_tool() => {
            problems.push(
                Problem::new(path, format!("`{point}` has no tool to match"))
                    .field(at("matcher"))
                    .fix("remove the matcher"),
            );
            None
        }
        Some(checked) => checked.take(path, &at("matcher"), problems),
    };
    let raw_limits = RawLimits {
        timeout_ms: hook.timeout_ms.clone(),
        fuel: hook.fuel.clone(),
        memory_mb: hook.memory_mb.clone(),
        payload_max_bytes: hook.payload_max_bytes.clone(),
    };
    let limits = limits(path, &format!("hooks[{i}]"), &raw_limits, base, problems);
    Some(HookSpec {
        point,
        capabilities,
        mode: hook.mode,
        priority: hook.priority,
        matcher: matcher.as_ref().map(|m| m.pattern.clone()),
        compiled_matcher: matcher.map(|m| m.compiled),
        on_failure: hook.on_failure,
        limits,
        enforce: hook.enforce,
    })
}

fn enforced() -> bool {
    true
}

/// The capabilities granted to a hook on `point` (`field`: where the grant is written), each
/// one known and allowed there, sorted, without repeats.
fn capabilities(
    path: &Path,
    field: &str,
    point: Point,
    granted: &OneOrMany,
    problems: &mut Vec<Problem>,
) -> Vec<Capability> {
    let names = match granted {
        OneOrMany::One(c) => std::slice::from_ref(c),
        OneOrMany::Many(cs) => cs.as_slice(),
    };
    let mut capabilities = Vec::new();
    for name in names {
        match name.parse::<Capability>() {
            Ok(c) => capabilities.push(c),
            Err(message) => problems.push(Problem::new(path, message).field(field).fix(format!(
                "grant one of: {}",
                names_of(point.allowed_capabilities())
            ))),
        }
    }
    capabilities.sort();
    capabilities.dedup();
    if capabilities.is_empty() && names.is_empty() {
        problems.push(
            Problem::new(path, "no capability granted")
                .field(field)
                .fix("grant `observe` at least"),
        );
    }
    for capability in &capabilities {
        if !point.allowed_capabilities().contains(capability) {
            let why = if point.is_committed_fact() {
                " (committed-fact points are observe-only, in either mode)"
            } else if point == Point::ToolResult {
                " (tool-result is observe-only)"
            } else if point == Point::SessionStart && *capability == Capability::Guard {
                " (session-start cannot block startup)"
            } else {
                ""
            };
            problems.push(
                Problem::new(
                    path,
                    format!("`{capability}` cannot be granted on `{point}`{why}"),
                )
                .field(field)
                .fix(format!(
                    "grant one of: {}",
                    names_of(point.allowed_capabilities())
                )),
            );
        }
    }
    capabilities
}

/// `env`: the names of the variables a plugin is given, each a valid name.
fn env_names(path: &Path, env: &[Checked<EnvName>], problems: &mut Vec<Problem>) -> Vec<String> {
    env.iter()
        .filter_map(|name| name.take(path, "env", problems))
        .map(|name| name.0)
        .collect()
}

/// What only a component can use is refused on a command or HTTP hook, not silently ignored.
fn refuse_wasm_only_fields(
    path: &Path,
    raw: &RawManifest,
    family: &str,
    problems: &mut Vec<Problem>,
) {
    if raw.state.is_some() {
        problems.push(
            Problem::new(path, "`[state]` applies to wasm components only")
                .field("state")
                .fix(format!("remove it: a {family} hook keeps its state itself")),
        );
    }
    let mut wasm_only = |field: &str, set: bool| {
        if set {
            problems.push(
                Problem::new(path, format!("`{field}` applies to wasm components only"))
                    .field(field)
                    .fix(format!("remove it: a {family} hook is bounded by `timeout_ms` and `payload_max_bytes`")),
            );
        }
    };
    wasm_only("sha256", raw.sha256.is_some());
    wasm_only("instance", raw.instance.is_some());
    wasm_only("files", raw.files.is_some());
    wasm_only("http", raw.http.is_some());
    wasm_only("limits.fuel", raw.limits.fuel.is_some());
    wasm_only("limits.memory_mb", raw.limits.memory_mb.is_some());
    for (i, hook) in raw.hooks.iter().enumerate() {
        wasm_only(&format!("hooks[{i}].fuel"), hook.fuel.is_some());
        wasm_only(&format!("hooks[{i}].memory_mb"), hook.memory_mb.is_some());
    }
}

/// The runtime family: exactly one of `wasm`, `command` and `url`.
fn runtime(path: &Path, raw: &RawManifest, problems: &mut Vec<Problem>) -> Option<RuntimeSpec> {
    let named: Vec<&str> = [
        ("wasm", raw.wasm.is_some()),
        ("command", raw.command.is_some()),
        ("url", raw.url.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    if named.len() != 1 {
        let message = if named.is_empty() {
            "the plugin names no runtime".to_string()
        } else {
            format!(
                "the plugin names {} runtimes: {}",
                named.len(),
                named.join(", ")
            )
        };
        problems.push(
            Problem::new(path, message)
                .field(named.first().copied().unwrap_or("wasm"))
                .fix("set exactly one of `wasm = \"plugin.wasm\"`, `command = \"./hook.sh\"` or `url = \"http://…\"`"),
        );
        return None;
    }
    if let Some(wasm) = &raw.wasm {
        return Some(RuntimeSpec::Wasm(wasm.clone()));
    }
    if let Some(command) = &raw.command {
        let argv = match command {
            OneOrMany::One(line) => vec!["sh".into(), "-c".into(), line.clone()],
            OneOrMany::Many(argv) => argv.clone(),
        };
        if argv.last().is_none_or(|a| a.trim().is_empty()) {
            problems.push(
                Problem::new(path, "empty command")
                    .field("command")
                    .fix("a command line (`command = \"./hook.sh\"`) or an argv list (`command = [\"python3\", \"hook.py\"]`)"),
            );
            return None;
        }
        return Some(RuntimeSpec::Command { argv });
    }
    let url = raw.url.as_ref()?.take(path, "url", problems)?;
    Some(RuntimeSpec::Http { url: url.0 })
}

/// `files`: each folder's guest path absolute, plain (no `..`, not `/` itself) and used once.
/// Whether the folder exists and stays inside its bounds is the loader's check.
fn file_grants(path: &Path, raw: &[RawFile], problems: &mut Vec<Problem>) -> Vec<FileGrant> {
    let mut grants: Vec<FileGrant> = Vec::new();
    for (i, file) in raw.iter().enumerate() {
        let field = format!("files[{i}].as");
        let plain = file.guest.starts_with('/')
            && file.guest.len() > 1
            && file
                .guest
                .split('/')
                .skip(1)
                .all(|part| !part.is_empty() && part != "." && part != "..");
        if !plain {
            problems.push(
                Problem::new(
                    path,
                    format!("`{}` is not a plain absolute guest path", file.guest),
                )
                .field(field)
                .fix("an absolute path below `/`, such as `/policy`"),
            );
        } else if grants.iter().any(|g| g.guest == file.guest) {
            problems.push(
                Problem::new(path, format!("`{}` is granted twice", file.guest))
                    .field(field)
                    .fix("one folder per guest path"),
            );
        } else if file.path.is_empty() {
            problems.push(
                Problem::new(path, "an empty folder path")
                    .field(format!("files[{i}].path"))
                    .fix("a folder, relative to the plugin folder (`policy`) or absolute"),
            );
        } else {
            grants.push(FileGrant {
                path: file.path.clone(),
                guest: file.guest.clone(),
            });
        }
    }
    grants
}

/// `http`: each origin once, and a `network` only for a host name.
fn http_grants(path: &Path, raw: &[RawHttp], problems: &mut Vec<Problem>) -> Vec<HttpGrant> {
    let mut grants: Vec<HttpGrant> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let (origin, network, field) = match entry {
            RawHttp::Origin(origin) => (origin, None, format!("http[{i}]")),
            RawHttp::Table(table) => (
                &table.url,
                table.network.as_deref(),
                format!("http[{i}].url"),
            ),
        };
        let Some(origin) = origin.take(path, &field, problems) else {
            continue;
        };
        let network = match network {
            None => Network::Public,
            Some("public") => Network::Public,
            Some("private") => Network::Private,
            Some("loopback") => Network::Loopback,
            Some(other) => {
                problems.push(
                    Problem::new(path, format!("unknown network `{other}`"))
                        .field(format!("http[{i}].network"))
                        .fix("`public` (the default), `private` or `loopback`"),
                );
                continue;
            }
        };
        let host = match origin.host {
            url::Host::Domain(name) => HttpHost::Name { name, network },
            url::Host::Ipv4(ip) => HttpHost::Address(ip.into()),
            url::Host::Ipv6(ip) => HttpHost::Address(ip.into()),
        };
        if matches!(host, HttpHost::Address(_))
            && let RawHttp::Table(RawHttpTable {
                network: Some(_), ..
            }) = entry
        {
            problems.push(
                Problem::new(path, "`network` applies to a host name, not to an address")
                    .field(format!("http[{i}].network"))
                    .fix("remove it: a request to an address goes to that address"),
            );
            continue;
        }
        let grant = HttpGrant {
            https: origin.https,
            host,
            port: origin.port,
        };
        if grants.iter().any(|g| {
            g.https == grant.https && g.port == grant.port && same_host(&g.host, &grant.host)
        }) {
            problems.push(
                Problem::new(path, format!("{grant} is granted twice"))
                    .field(format!("http[{i}]"))
                    .fix("one entry per origin"),
            );
            continue;
        }
        grants.push(grant);
    }
    grants
}

fn same_host(a: &HttpHost, b: &HttpHost) -> bool {
    match (a, b) {
        (HttpHost::Name { name: a, .. }, HttpHost::Name { name: b, .. }) => a == b,
        (HttpHost::Address(a), HttpHost::Address(b)) => a == b,
        _ => false,
    }
}

/// The `[state]` grant: its scopes (at least one, each known) and its bounds.
fn state_grant(path: &Path, raw: &RawState, problems: &mut Vec<Problem>) -> Option<StateGrant> {
    let before = problems.len();
    let mut grant = StateGrant {
        session: false,
        global: false,
        max_keys: DEFAULT_STATE_KEYS,
        max_bytes: DEFAULT_STATE_BYTES,
        shared: take(&raw.shared, path, "state.shared", problems).map(|d| d.0),
    };
    for scope in &raw.scopes {
        match scope.as_str() {
            "session" => grant.session = true,
            "global" => grant.global = true,
            other => problems.push(
                Problem::new(path, format!("unknown state scope `{other}`"))
                    .field("state.scopes")
                    .fix("`session` (this session's values) or `global` (every session's)"),
            ),
        }
    }
    if raw.scopes.is_empty() {
        problems.push(
            Problem::new(path, "`[state]` grants no scope")
                .field("state.scopes")
                .fix("`scopes = [\"session\"]`, `[\"global\"]` or both; or remove `[state]`"),
        );
    }
    if let Some(keys) = take(&raw.max_keys, path, "state.max_keys", problems) {
        grant.max_keys = keys.0;
    }
    if let Some(bytes) = take(&raw.max_bytes, path, "state.max_bytes", problems) {
        grant.max_bytes = bytes.0;
    }
    (problems.len() == before).then_some(grant)
}

fn limits(
    path: &Path,
    table: &str,
    raw: &RawLimits,
    base: Limits,
    problems: &mut Vec<Problem>,
) -> Limits {
    let mut limits = base;
    let field = |name: &str| format!("{table}.{name}");
    if let Some(timeout) = take(&raw.timeout_ms, path, &field("timeout_ms"), problems) {
        limits.timeout = timeout.0;
    }
    if let Some(fuel) = take(&raw.fuel, path, &field("fuel"), problems) {
        limits.fuel = fuel.0;
    }
    if let Some(memory) = take(&raw.memory_mb, path, &field("memory_mb"), problems) {
        limits.memory_bytes = memory.0;
    }
    if let Some(bytes) = take(
        &raw.payload_max_bytes,
        path,
        &field("payload_max_bytes"),
        problems,
    ) {
        limits.payload_max_bytes = bytes.0;
    }
    limits
}

/// A TOML error as `line L, column C: message`.
fn toml_message(text: &str, err: &toml::de::Error) -> String {
    let message = err.message().trim_end();
    match err.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message.to_string(),
    }
}

fn names_of(capabilities: &[Capability]) -> String {
    let names: Vec<_> = capabilities.iter().map(|c| c.as_str()).collect();
    names.join(", ")
}
