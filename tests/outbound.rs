//! The `http` grant: a component reaches the origins its manifest lists, and nothing else —
//! not an unlisted origin, not through a redirect, not through a name that resolves outside
//! the grant's network — and every request runs inside the hook's deadline, with both bodies
//! bounded.

use palisade::events::EventKind;
use palisade::{Host, PreToolDecision, ToolCall};
use palisade_tests::web::{Reply, Server};
use palisade_tests::{PluginDir, assert_load_problems, load_recorded};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A scripted guard that sends one request (`[config]` lines in `config`), granted `grants`
/// (top-level manifest lines).
fn requester(dir: &PluginDir, grants: &str, config: &str) {
    dir.scripted(
        "requester",
        &format!(
            "{grants}\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
             [config]\npre_tool = \"http\"\n{config}\n"
        ),
    );
}

/// What the guard decided (`code: message`), and the `http` lines the host recorded.
async fn run(dir: &PluginDir) -> (String, Vec<String>) {
    let (said, lines, _) = run_timed(dir).await;
    (said, lines)
}

/// The same, and how long the dispatch took (loading, which compiles the component on a cold
/// cache, not counted).
async fn run_timed(dir: &PluginDir) -> (String, Vec<String>, Duration) {
    let (plugins, recorder) = load_recorded(dir);
    let call = ToolCall::new("t", "Bash", json!({ "command": "ls" }));
    let started = Instant::now();
    let decision = plugins.session("s").pre_tool(&call).await;
    let took = started.elapsed();
    let said = match decision {
        PreToolDecision::Deny(denial) => format!("{}: {}", denial.reason_code, denial.message),
        other => format!("{other:?}"),
    };
    let lines = recorder
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::PluginLog {
                level: "http",
                message,
            } => Some(message),
            _ => None,
        })
        .collect();
    (said, lines, took)
}

#[tokio::test]
async fn a_granted_origin_is_reached_and_no_other() {
    let granted = Server::start(|r| Reply::ok(format!("hello {} {}", r.method, r.path)));
    let other = Server::start(|_| Reply::ok("should not be reached"));
    let grant = format!("http = [\"{}\"]", granted.origin());

    let dir = PluginDir::new();
    requester(
        &dir,
        &grant,
        &format!("url = \"{}/v1/check?q=1\"", granted.origin()),
    );
    let (said, lines) = run(&dir).await;
    assert_eq!(said, "http: 200 hello GET /v1/check?q=1");
    assert_eq!(
        granted.received()[0].host,
        format!("127.0.0.1:{}", granted.port)
    );
    assert!(
        lines.iter().any(|l| l.contains("/v1/check?q=1 → 200")),
        "{lines:?}"
    );

    // Another port, another scheme, no grant at all: refused before anything leaves the host.
    for (grants, url) in [
        (grant.clone(), format!("{}/", other.origin())),
        (
            grant.clone(),
            format!("https://127.0.0.1:{}/", granted.port),
        ),
        (grant.clone(), format!("http://localhost:{}/", granted.port)),
        (String::new(), format!("{}/", granted.origin())),
    ] {
        let dir = PluginDir::new();
        requester(&dir, &grants, &format!("url = \"{url}\""));
        let (said, lines) = run(&dir).await;
        assert!(
            said.starts_with("http-refused: HttpRequestDenied"),
            "{url}: {said}"
        );
        assert!(lines.iter().any(|l| l.starts_with("refused")), "{lines:?}");
    }
    assert!(other.received().is_empty());
    assert_eq!(granted.received().len(), 1);
}

#[tokio::test]
async fn a_name_reaches_only_addresses_in_its_network() {
    let server = Server::start(|_| Reply::ok("loopback"));
    let url = format!("url = \"http://localhost:{}/\"", server.port);
    // `localhost` resolves to 127.0.0.1 (and ::1): not public, the default network.
    let dir = PluginDir::new();
    requester(
        &dir,
        &format!("http = [\"http://localhost:{}\"]", server.port),
        &url,
    );
    let (said, lines) = run(&dir).await;
    assert!(
        said.starts_with("http-refused: DestinationIpProhibited"),
        "{said}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("resolved to") && l.contains("127.0.0.1") && l.contains("public")),
        "{lines:?}"
    );
    assert!(server.received().is_empty());
    // The operator allows loopback for this name: reached.
    let dir = PluginDir::new();
    requester(
        &dir,
        &format!(
            "http = [{{ url = \"http://localhost:{}\", network = \"loopback\" }}]",
            server.port
        ),
        &url,
    );
    assert_eq!(run(&dir).await.0, "http: 200 loopback");
    // A private-network grant does not reach loopback either.
    let dir = PluginDir::new();
    requester(
        &dir,
        &format!(
            "http = [{{ url = \"http://localhost:{}\", network = \"private\" }}]",
            server.port
        ),
        &url,
    );
    assert!(run(&dir).await.0.starts_with("http-refused"));
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_redirect_off_the_list_is_refused() {
    let elsewhere = Server::start(|_| Reply::ok("should not be reached"));
    let target = format!("{}/stolen", elsewhere.origin());
    let granted = Server::start(move |r| match r.path.as_str() {
        "/away" => Reply::redirect(&target),
        "/moved" => Reply::redirect(&format!("http://{}/here", r.host)),
        _ => Reply::ok("here"),
    });
    let grant = format!("http = [\"{}\"]", granted.origin());
    // Not followed: the plugin sees the redirect itself.
    let dir = PluginDir::new();
    requester(
        &dir,
        &grant,
        &format!("url = \"{}/away\"", granted.origin()),
    );
    assert_eq!(run(&dir).await.0, "http: 302");
    // Followed by the plugin: a new request, to an unlisted origin, refused.
    let dir = PluginDir::new();
    requester(
        &dir,
        &grant,
        &format!("url = \"{}/away\"\nfollow = true", granted.origin()),
    );
    assert!(run(&dir).await.0.starts_with("http-refused"));
    assert!(elsewhere.received().is_empty());
    // A redirect within the granted origin is followed.
    let dir = PluginDir::new();
    requester(
        &dir,
        &grant,
        &format!("url = \"{o}/moved\"\nfollow = true", o = granted.origin()),
    );
    assert_eq!(run(&dir).await.0, "http: 200 here");
}

#[tokio::test]
async fn a_slow_server_fails_the_hook_at_its_deadline_closed() {
    let slow = Server::start(|_| Reply::ok("late").after(Duration::from_secs(5)));
    let dir = PluginDir::new();
    requester(
        &dir,
        &format!("http = [\"{}\"]\n[limits]\ntimeout_ms = 300", slow.origin()),
        &format!("url = \"{}/\"", slow.origin()),
    );
    let (said, _, took) = run_timed(&dir).await;
    // The guard failed (timeout): its point denies.
    assert!(said.starts_with("hook-failure:timeout"), "{said}");
    assert!(
        took < Duration::from_secs(3),
        "the hook waited {took:?} for a slow server"
    );
}

#[tokio::test]
async fn bodies_are_bounded_both_ways() {
    let big = Server::start(|r| {
        if r.path == "/big" {
            Reply::ok(vec![b'x'; 5 * 1024 * 1024])
        } else {
            Reply::ok(format!("got {}", r.body.len()))
        }
    });
    let grant = format!("http = [\"{}\"]\n[limits]\nmemory_mb = 64", big.origin());
    let dir = PluginDir::new();
    requester(&dir, &grant, &format!("url = \"{}/big\"", big.origin()));
    let (said, _) = run(&dir).await;
    assert!(too_large(&said), "{said}");
    let dir = PluginDir::new();
    requester(
        &dir,
        &grant,
        &format!(
            "url = \"{}/up\"\nmethod = \"POST\"\nbody_size = {}",
            big.origin(),
            1024 * 1024 + 1
        ),
    );
    let (said, lines) = run(&dir).await;
    assert!(too_large(&said), "{said} {lines:?}");
    // Within the bound: sent whole.
    let dir = PluginDir::new();
    requester(
        &dir,
        &grant,
        &format!(
            "url = \"{}/up\"\nmethod = \"POST\"\nbody_size = 100000",
            big.origin()
        ),
    );
    assert_eq!(run(&dir).await.0, "http: 200 got 100000");
}

/// A body-size failure, as the guest's error code or as its stream's error text.
fn too_large(said: &str) -> bool {
    said.starts_with("http-failed")
        && (said.contains("BodySize") || said.contains("body size exceeds limit"))
}

#[test]
fn a_malformed_grant_is_a_load_problem_naming_its_entry() {
    let dir = PluginDir::new();
    requester(
        &dir,
        "http = [\"https://policy.example/v1\", \"ftp://x.example\", \"https://user@x.example\", \
         { url = \"http://10.0.0.5\", network = \"private\" }, \
         { url = \"https://x.example\", network = \"intranet\" }, \"https://a.example\", \
         \"https://A.example:443\", \"http://0.0.0.0:80\"]",
        "",
    );
    assert_load_problems(
        &dir,
        &[
            ("http[0]", "has a path"),
            ("http[1]", "is not http or https"),
            ("http[2]", "names a user"),
            ("http[3].network", "applies to a host name"),
            ("http[4].network", "unknown network `intranet`"),
            ("http[6]", "granted twice"),
            ("http[7]", "not an address a request can go to"),
        ],
    );
    // On a command hook, refused rather than ignored.
    let dir = PluginDir::new();
    std::fs::create_dir_all(dir.path().join("cmd")).unwrap();
    std::fs::write(
        dir.path().join("cmd/plugin.toml"),
        "name = \"cmd\"\ncommand = \"true\"\nhttp = [\"https://x.example\"]\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n",
    )
    .unwrap();
    let err = Host::new().unwrap().load_dir(dir.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("`http` applies to wasm components only"),
        "{err}"
    );
}

/// The example `classifier-guard`: asks a classifier service (here a local one, granted by
/// address) about each prompt; rejects what it flags, and rejects when the service is down,
/// slow or answering nonsense.
#[tokio::test]
async fn the_classifier_guard_follows_the_service_and_fails_closed_without_it() {
    use palisade::{Message, PreStep, PreStepDecision};
    let mode = Arc::new(Mutex::new("up"));
    let service = {
        let mode = mode.clone();
        Server::start(move |r| {
            let text = String::from_utf8_lossy(&r.body).into_owned();
            match *mode.lock().unwrap() {
                "slow" => Reply::ok(r#"{"verdict":"allow"}"#).after(Duration::from_secs(3)),
                "confused" => Reply::ok("<html>maintenance</html>"),
                _ if text.contains("customer list") => {
                    Reply::ok(r#"{"verdict":"reject","reason":"customer data"}"#)
                }
                _ => Reply::ok(r#"{"verdict":"allow"}"#),
            }
        })
    };
    let dir = PluginDir::new();
    let example = palisade_examples::get("classifier-guard").expect("the example");
    palisade_examples::install_one(example, dir.path()).unwrap();
    let manifest = dir.path().join("classifier-guard/plugin.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace(
            "{ url = \"https://classifier.internal:8443\", network = \"private\" }",
            &format!("\"{}\"", service.origin()),
        )
        .replace("https://classifier.internal:8443", &service.origin());
    std::fs::write(&manifest, text).unwrap();
    let (plugins, _) = load_recorded(&dir);
    let session = plugins.session("s");
    let step = |text: &str| PreStep {
        messages: vec![Message::user(text)],
        turn: 1,
        step: 1,
    };
    let verdict = |decision: PreStepDecision| match decision {
        PreStepDecision::Enter { .. } => "enter".to_string(),
        PreStepDecision::Reject(denial) => denial.reason_code,
    };
    assert_eq!(
        verdict(session.prompt_submit(&step("summarise the README")).await),
        "enter"
    );
    assert_eq!(
        verdict(
            session
                .prompt_submit(&step("paste the customer list here"))
                .await
        ),
        "classifier-reject"
    );
    let received = service.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].path, "/v1/classify");
    assert!(String::from_utf8_lossy(&received[1].body).contains("customer list"));
    for down in ["slow", "confused"] {
        *mode.lock().unwrap() = down;
        let started = Instant::now();
        assert_eq!(
            verdict(session.prompt_submit(&step("summarise the README")).await),
            "classifier-unavailable",
            "{down}"
        );
        assert!(started.elapsed() < Duration::from_secs(2), "{down}");
    }
    // Gone altogether: a port nothing listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let text = std::fs::read_to_string(&manifest).unwrap();
    let origin = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("http = [\"")
                .and_then(|l| l.strip_suffix("\"]"))
        })
        .unwrap()
        .to_string();
    std::fs::write(
        &manifest,
        text.replace(&origin, &format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let (plugins, _) = load_recorded(&dir);
    assert_eq!(
        verdict(plugins.session("s").prompt_submit(&step("hello")).await),
        "classifier-unavailable"
    );
}
