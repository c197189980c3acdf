//! The headers MCP 2026-07-28 mirrors from a request's body, so that load balancers and
//! gateways can route without reading it: `MCP-Protocol-Version` (the `_meta` protocol
//! version), `Mcp-Method` (the method) and `Mcp-Name` (the tool's or prompt's `name`, the
//! resource's `uri`, the task's `taskId`). A server may route or authorise by them, so a header
//! that says something else than the body Palisade judged is refused (400, `-32020`, as the
//! revision has servers do), and every request Palisade sends of its own carries headers that
//! match it. The same holds for `Mcp-Param-*` headers, which mirror the arguments a tool's
//! schema marks `x-mcp-header`: each must say what the judged argument says, and one the
//! argument has must be there ([`params_mismatch`]); one no schema declares passes, as the
//! revision has intermediaries do, and a server reads nothing from it.

use axum::http::{HeaderMap, HeaderName};
use serde_json::Value;

pub(super) use super::super::HEADER_MISMATCH;

const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";
const PARAM_PREFIX: &str = "mcp-param-";

/// Whether the header `name` is one MCP 2026-07-28 mirrors from the body.
pub(super) fn is_mirrored(name: &str) -> bool {
    name == METHOD || name == NAME || name.starts_with(PARAM_PREFIX)
}

/// The client's mirrored headers that `Gateway::forward` passes on, with the others of MCP's
/// transport.
pub(super) fn of(headers: &HeaderMap) -> impl Iterator<Item = (HeaderName, String)> + '_ {
    headers.iter().filter_map(|(name, value)| {
        let value = value.to_str().ok()?;
        is_mirrored(name.as_str()).then(|| (name.clone(), value.to_string()))
    })
}

/// Why the headers of a request with `message` as its body say something else than the body,
/// if they do: the header that differs, and what each says.
pub(super) fn mismatch(headers: &HeaderMap, message: &Value) -> Option<String> {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let params = &message["params"];
    let body_version = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
    let mut checks = vec![(PROTOCOL_VERSION, body_version)];
    if let Some(method) = message["method"].as_str() {
        checks.push((METHOD, Some(method)));
        checks.push((NAME, named(method, params)));
    }
    for (name, body) in checks {
        // Only where both say something: a header the client left out is the server's to
        // require, and a body field left out its to refuse.
        if let (Some(sent), Some(body)) = (header(name), body)
            && sent != encode(body)
        {
            return Some(format!(
                "the {name} header says `{}`, the body `{}`",
                crate::output::printable(sent),
                crate::output::printable(body)
            ));
        }
    }
    None
}

/// What `Mcp-Name` mirrors for `method`: the name, URI or task id it acts on.
fn named<'a>(method: &str, params: &'a Value) -> Option<&'a str> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params[field].as_str()
}

/// A header value as MCP 2026-07-28 writes it: as is when it is visible ASCII without
/// leading or trailing spaces (and does not look like an encoded one), else
/// `=?base64?…?=` of its UTF-8.
fn encode(value: &str) -> std::borrow::Cow<'_, str> {
    use base64::Engine as _;
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.into()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value);
        format!("=?base64?{encoded}?=").into()
    }
}

/// Why the `Mcp-Param-*` headers the client sent (`sent`) say something else than the
/// arguments they mirror (`mirrored`: each header's name, lowercase, and the argument's value,
/// `None` where the call leaves it out), if they do: a header with another value, or not
/// decodable; one missing for an argument the call has, or present for one it leaves out.
pub(super) fn params_mismatch(
    sent: &[(HeaderName, String)],
    mirrored: &[(String, Option<Value>)],
) -> Option<String> {
    for (name, argument) in mirrored {
        let header = sent
            .iter()
            .find(|(sent, _)| sent.as_str() == name)
            .map(|(_, value)| value.as_str());
        let expected = match argument {
            Some(Value::String(text)) => Some(text.clone()),
            Some(value @ (Value::Number(_) | Value::Bool(_))) => Some(value.to_string()),
            // An argument a header cannot mirror (an object, `null`): the server's to refuse.
            Some(_) => continue,
            None => None,
        };
        let agrees = match (header, &expected) {
            (None, None) => true,
            (Some(header), Some(expected)) => decode(header).as_deref() == Some(expected),
            _ => false,
        };
        if !agrees {
            return Some(format!(
                "the {name} header says {}, the argument it mirrors {}",
                header.map_or("nothing".into(), |h| format!(
                    "`{}`",
                    crate::output::printable(h)
                )),
                expected.map_or("nothing".into(), |e| format!(
                    "`{}`",
                    crate::output::printable(&e)
                ))
            ));
        }
    }
    None
}

/// A header value as MCP 2026-07-28 writes it, decoded: `=?base64?…?=` is the UTF-8 of its
/// standard, padded base64 (`None` when it is not); anything else is itself.
fn decode(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_string()),
    }
}

/// The mirrored headers of a request Palisade sends of its own (`method`, with `params`), in
/// the client's name: in place of the client's, which mirror another request.
pub(super) fn for_own(
    client: &[(HeaderName, String)],
    method: &str,
    params: &Value,
) -> Vec<(HeaderName, String)> {
    let mut headers: Vec<(HeaderName, String)> = client
        .iter()
        .filter(|(name, _)| !is_mirrored(name.as_str()))
        .cloned()
        .collect();
    // A 2026-07-28 client's requests carry the version header: so do Palisade's own.
    if client
        .iter()
        .any(|(name, _)| name.as_str() == PROTOCOL_VERSION)
        && params["_meta"]
            .get("io.modelcontextprotocol/protocolVersion")
            .is_some()
    {
        headers.push((HeaderName::from_static(METHOD), method.to_string()));
        if let Some(name) = named(method, params) {
            headers.push((HeaderName::from_static(NAME), encode(name).into_owned()));
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_header_that_names_another_tool_than_the_body_is_a_mismatch() {
        let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28" },
            "name": "read_file", "arguments": {} } });
        let agreeing = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "read_file"),
        ]);
        assert_eq!(mismatch(&agreeing, &call), None);
        assert_eq!(mismatch(&HeaderMap::new(), &call), None);
        for (name, value) in [
            ("mcp-name", "list_files"),
            ("mcp-method", "tools/list"),
            ("mcp-protocol-version", "2025-11-25"),
        ] {
            let why = mismatch(&headers(&[(name, value)]), &call);
            assert!(why.is_some_and(|w| w.contains(name)), "{name}: {value}");
        }
    }

    #[test]
    fn a_name_outside_visible_ascii_is_compared_encoded() {
        let call = json!({ "method": "resources/read", "params": { "uri": "file:///café" } });
        let encoded = format!("=?base64?{}?=", "ZmlsZTovLy9jYWbDqQ==");
        assert_eq!(mismatch(&headers(&[("mcp-name", &encoded)]), &call), None);
        assert!(mismatch(&headers(&[("mcp-name", "file:///caf")]), &call).is_some());
    }

    #[test]
    fn a_param_header_must_say_what_its_argument_says() {
        let sent = |pairs: &[(&'static str, &str)]| -> Vec<(HeaderName, String)> {
            pairs
                .iter()
                .map(|(n, v)| (HeaderName::from_static(n), v.to_string()))
                .collect()
        };
        let region = |value: Option<Value>| vec![("mcp-param-region".to_string(), value)];
        let eu = region(Some(json!("eu-west")));
        assert_eq!(
            params_mismatch(&sent(&[("mcp-param-region", "eu-west")]), &eu),
            None
        );
        let encoded = format!("=?base64?{}?=", "ZXUtd2VzdA==");
        assert_eq!(
            params_mismatch(&sent(&[("mcp-param-region", &encoded)]), &eu),
            None
        );
        for wrong in ["us-east", "=?base64?ZXUtd2VzdA?=", "=?base64?!!!?="] {
            assert!(params_mismatch(&sent(&[("mcp-param-region", wrong)]), &eu).is_some());
        }
        // Left out where the call has the argument; there where it has none.
        assert!(params_mismatch(&[], &eu).is_some());
        assert!(params_mismatch(&sent(&[("mcp-param-region", "x")]), &region(None)).is_some());
        assert_eq!(params_mismatch(&[], &region(None)), None);
        let tier = vec![("mcp-param-tier".to_string(), Some(json!(3)))];
        assert_eq!(
            params_mismatch(&sent(&[("mcp-param-tier", "3")]), &tier),
            None
        );
    }

    #[test]
    fn palisades_own_request_mirrors_itself_not_the_clients_call() {
        let client = vec![
            (
                HeaderName::from_static("mcp-protocol-version"),
                "2026-07-28".into(),
            ),
            (HeaderName::from_static("mcp-method"), "tools/call".into()),
            (HeaderName::from_static("mcp-name"), "read_file".into()),
            (HeaderName::from_static("mcp-param-path"), "/etc".into()),
        ];
        let params =
            json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } });
        let own = for_own(&client, "tools/list", &params);
        let names: Vec<(&str, &str)> = own.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        assert_eq!(
            names,
            [
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list")
            ]
        );
    }
}
