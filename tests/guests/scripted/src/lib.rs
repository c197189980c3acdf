//! A test guest: what it does at each point is chosen by its manifest's `[config]`, so one
//! component serves every behaviour the tests need (allow, deny, loop forever, bomb memory,
//! panic, ...). `tag` is logged on every call so tests can see the order hooks ran in.
//!
//! `[config] pre_tool` is one of: `allow`, `deny`, `ask`, `loop`, `membomb`, `panic`,
//! `bad-payload`, `probe` (try files, env and network), `deny-after:N` (deny from the N+1-th call of this instance on).
//! `[config] tool_result` is one of: `ok`, `panic`, `loop`.

use palisade_sdk::{
    Deny, PreTool, PreToolDecision, ToolCall, ToolOutcome, ToolResult, export, log,
};
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};

static CALLS: AtomicU32 = AtomicU32::new(0);

fn tag() {
    if let Some(tag) = palisade_sdk::config::<String>("tag") {
        log::info(&tag);
    }
}

fn spin() -> ! {
    let mut x = 0u64;
    loop {
        x = black_box(x.wrapping_add(1));
    }
}

fn membomb() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1u8; 1 << 20]);
        black_box(&hoard);
    }
}

/// Tries every ambient authority a sandboxed hook must not have; denies naming any that
/// worked, allows when none did.
fn probe() -> PreToolDecision {
    let mut escaped = Vec::new();
    if std::fs::read_dir("/").is_ok() || std::fs::read("/etc/passwd").is_ok() {
        escaped.push("filesystem");
    }
    if std::fs::write("escape.txt", b"x").is_ok() {
        escaped.push("filesystem-write");
    }
    if std::env::vars().next().is_some() {
        escaped.push("environment");
    }
    if let Some(port) = palisade_sdk::config::<u16>("port")
        && tcp_connect(port)
    {
        escaped.push("network");
    }
    // Goes nowhere: a hook's stdout is not the host's.
    println!("PROBE-STDOUT-MARKER");
    eprintln!("PROBE-STDERR-MARKER");
    if escaped.is_empty() {
        PreToolDecision::Allow
    } else {
        PreToolDecision::deny("escaped", escaped.join(","))
    }
}

/// Whether a TCP connection to 127.0.0.1:`port` succeeds, through raw WASI sockets.
#[cfg(target_arch = "wasm32")]
fn tcp_connect(port: u16) -> bool {
    use wasi::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};
    let network = wasi::sockets::instance_network::instance_network();
    let Ok(socket) = wasi::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
    else {
        log::info("probe: tcp socket refused");
        return false;
    };
    let address = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (127, 0, 0, 1),
    });
    if let Err(err) = socket.start_connect(&network, address) {
        log::info(&format!("probe: tcp connect refused: {err:?}"));
        return false;
    }
    socket.subscribe().block();
    match socket.finish_connect() {
        Ok(_) => true,
        Err(err) => {
            log::info(&format!("probe: tcp connect failed: {err:?}"));
            false
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn tcp_connect(_port: u16) -> bool {
    false
}

struct Scripted;

impl PreTool for Scripted {
    fn on_pre_tool(call: ToolCall) -> PreToolDecision {
        tag();
        let n = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        let behaviour: String = palisade_sdk::config("pre_tool").unwrap_or_else(|| "allow".into());
        match behaviour.as_str() {
            "allow" => PreToolDecision::Allow,
            "deny" => PreToolDecision::Deny(
                Deny::new("scripted-deny", format!("denied {}", call.name))
                    .with_payload(&serde_json::json!({ "call": n })),
            ),
            "ask" => PreToolDecision::ask(format!("may {} run?", call.name)),
            "loop" => spin(),
            "membomb" => membomb(),
            "panic" => panic!("scripted panic"),
            "probe" => probe(),
            "bad-payload" => PreToolDecision::Deny(Deny {
                reason_code: "bad".into(),
                message: "bad payload".into(),
                payload: Some("{not json".into()),
            }),
            other => match other
                .strip_prefix("deny-after:")
                .and_then(|n| n.parse().ok())
            {
                Some(limit) if n > limit => PreToolDecision::deny(
                    "rate-limit",
                    format!("call {n} is over the limit of {limit}"),
                ),
                Some(_) => PreToolDecision::Allow,
                None => panic!("unknown pre_tool behaviour `{other}`"),
            },
        }
    }
}

impl ToolResult for Scripted {
    fn on_tool_result(_call: ToolCall, _outcome: ToolOutcome) {
        tag();
        match palisade_sdk::config::<String>("tool_result").as_deref() {
            Some("panic") => panic!("scripted panic"),
            Some("loop") => spin(),
            _ => {}
        }
    }
}

export!(Scripted: PreTool + ToolResult);
