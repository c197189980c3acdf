//! The keys of a tool's arguments, judged against the tool's own input schema.
//!
//! A guard reads an argument by its exact key (`destination`); a server whose JSON reader
//! matches keys case-insensitively (Go's `encoding/json`, say) reads `Destination` as that
//! argument too. So an argument key that is not in the tool's schema but equals one of its
//! property names under case folding is refused before any hook runs: the hooks would judge
//! a call without the argument the server then uses. Protocol keys in another case are refused
//! earlier, for every tool ([`crate::jsonrpc::strict`]); this covers the keys only the
//! server's schema names.
//!
//! The schemas come from the server's `tools/list`, asked by the proxy under an id of its own
//! the first time a session calls a tool it has not seen listed (every page, at most
//! [`MAX_PAGES`], within [`LIST_WITHIN`]), and again once the server says its list changed.
//! A tool the server does not list is judged without a schema (the protocol keys only).

use super::call::Upstream;
use crate::jsonrpc::strict::fold;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The most pages of `tools/list` read at once.
const MAX_PAGES: usize = 64;
/// How long reading the whole list may take before the call is refused.
const LIST_WITHIN: Duration = Duration::from_secs(10);
/// How soon a tool missing from the list asks for the list again.
const RELIST_AFTER: Duration = Duration::from_secs(5);

/// One session's tool schemas: each tool's property names, read from the server's list.
#[derive(Default)]
pub(super) struct ToolSchemas {
    /// One reading of the list at a time; the others wait for it and use what it read.
    listed: tokio::sync::Mutex<Listed>,
    /// Set when the server says its list changed.
    changed: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Listed {
    /// Each tool's input schema, as the checks read it.
    tools: HashMap<String, Schema>,
    /// When the list was last read; `None` until it is, or once it changed.
    at: Option<Instant>,
}

/// What the checks read of one tool's input schema.
struct Schema {
    /// Every property name, at any depth.
    names: HashSet<String>,
    /// The arguments MCP 2026-07-28 mirrors into headers (`x-mcp-header: NAME` on a property
    /// reached through `properties` alone): each header's name, lowercase, and the argument's
    /// path.
    mirrored: Vec<(String, Vec<String>)>,
}

impl ToolSchemas {
    /// The server said its list changed: the next call reads it again.
    pub(super) fn changed(&self) {
        self.changed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Why `arguments` of `tool` may not be passed on, if they may not: a key that is one of
    /// the schema's property names in another case. `Err` when the list cannot be read in
    /// time (the call is refused: its keys cannot be judged).
    pub(super) async fn misspelled(
        &self,
        upstream: &dyn Upstream,
        tool: &str,
        arguments: &Value,
        envelope: &Option<Value>,
    ) -> Result<Option<String>, String> {
        let mut listed = self.listed.lock().await;
        let changed = self
            .changed
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        let stale = changed
            || match listed.at {
                None => true,
                Some(at) => !listed.tools.contains_key(tool) && at.elapsed() > RELIST_AFTER,
            };
        if stale {
            let tools = tokio::time::timeout(LIST_WITHIN, list(upstream, envelope))
                .await
                .map_err(|_| {
                    format!(
                        "the MCP server did not list its tools within {} s",
                        LIST_WITHIN.as_secs()
                    )
                })??;
            *listed = Listed {
                tools,
                at: Some(Instant::now()),
            };
        }
        let Some(schema) = listed.tools.get(tool) else {
            return Ok(None);
        };
        Ok(misspelled_in(&schema.names, arguments))
    }

    /// The arguments of `tool` its schema has mirrored into headers (as [`misspelled`] last
    /// read the list): each header's name, lowercase, and the argument's value in `arguments`
    /// (`None` where the call leaves it out). Empty for a tool the server does not list.
    ///
    /// [`misspelled`]: ToolSchemas::misspelled
    pub(super) async fn mirrored(
        &self,
        tool: &str,
        arguments: &Value,
    ) -> Vec<(String, Option<Value>)> {
        let listed = self.listed.lock().await;
        let Some(schema) = listed.tools.get(tool) else {
            return Vec::new();
        };
        schema
            .mirrored
            .iter()
            .map(|(header, path)| {
                let value = path.iter().try_fold(arguments, |v, key| v.get(key));
                (header.clone(), value.cloned())
            })
            .collect()
    }
}

/// The server's tools, each with the property names of its input schema. A server that
/// answers `tools/list` with an error lists none. Asked with the `envelope` of the call that
/// needs the list (a 2026-07-28 server takes no request without one).
async fn list(
    upstream: &dyn Upstream,
    envelope: &Option<Value>,
) -> Result<HashMap<String, Schema>, String> {
    let mut tools = HashMap::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut params = serde_json::Map::new();
        if let Some(envelope) = envelope {
            params.insert("_meta".into(), envelope.clone());
        }
        if let Some(cursor) = cursor.take() {
            params.insert("cursor".into(), Value::String(cursor));
        }
        let answer = upstream
            .request("tools/list", Value::Object(params))
            .await?;
        let result = &answer["result"];
        for tool in result["tools"].as_array().into_iter().flatten() {
            if let Some(name) = tool["name"].as_str() {
                let mut names = HashSet::new();
                property_names(&tool["inputSchema"], &mut names);
                let mut mirrored = Vec::new();
                mirrored_arguments(&tool["inputSchema"], &mut Vec::new(), &mut mirrored);
                tools.insert(name.to_string(), Schema { names, mirrored });
            }
        }
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => break,
        }
    }
    Ok(tools)
}

/// The properties of `schema` marked `x-mcp-header: NAME`, reached from `path` through
/// `properties` objects alone: each header's name, lowercase, and the property's path.
fn mirrored_arguments(
    schema: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<(String, Vec<String>)>,
) {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return;
    };
    for (key, property) in properties {
        path.push(key.clone());
        if let Some(header) = property.get("x-mcp-header").and_then(Value::as_str) {
            found.push((
                format!("mcp-param-{}", header.to_ascii_lowercase()),
                path.clone(),
            ));
        }
        mirrored_arguments(property, path, found);
        path.pop();
    }
}

/// Every key of every `properties` object in `schema`, at any depth.
fn property_names(schema: &Value, names: &mut HashSet<String>) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = object.get("properties") {
                names.extend(properties.keys().cloned());
            }
            for value in object.values() {
                property_names(value, names);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| property_names(item, names)),
        _ => {}
    }
}

/// Why `arguments` may not be passed on, given the schema's property `names`: a key at any
/// depth that is not one of them but equals one under case folding.
fn misspelled_in(names: &HashSet<String>, arguments: &Value) -> Option<String> {
    match arguments {
        Value::Object(object) => {
            for (key, value) in object {
                if !names.contains(key) {
                    let folded = fold(key);
                    if let Some(name) = names.iter().find(|name| fold(name) == folded) {
                        return Some(format!(
                            "the argument `{}` is the tool's `{}` in another case: a server \
                             that reads keys case-insensitively would take it for `{}`, which \
                             the hooks did not see",
                            crate::output::printable(&crate::jsonrpc::truncate(key)),
                            crate::output::printable(name),
                            crate::output::printable(name)
                        ));
                    }
                }
                if let Some(why) = misspelled_in(names, value) {
                    return Some(why);
                }
            }
            None
        }
        Value::Array(items) => items.iter().find_map(|item| misspelled_in(names, item)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_property_in_another_case_is_refused_at_any_depth() {
        let mut names = HashSet::new();
        property_names(
            &json!({ "type": "object", "properties": {
                "destination": { "type": "string" },
                "options": { "type": "object", "properties": { "overWrite": {} } } } }),
            &mut names,
        );
        let ok = json!({ "destination": "/tmp/a", "options": { "overWrite": true } });
        assert_eq!(misspelled_in(&names, &ok), None);
        for bad in [
            json!({ "Destination": "/etc/passwd" }),
            json!({ "destination": "/tmp/a", "options": { "overwrite": true } }),
            json!({ "list": [{ "DESTINATION": "x" }] }),
        ] {
            assert!(misspelled_in(&names, &bad).is_some(), "{bad}");
        }
        // Keys the schema does not name, in any case, are the server's to refuse.
        assert_eq!(misspelled_in(&names, &json!({ "Other": 1 })), None);
    }

    #[test]
    fn a_mirrored_argument_is_found_through_properties_alone() {
        let schema = json!({ "type": "object", "properties": {
            "region": { "type": "string", "x-mcp-header": "Region" },
            "options": { "type": "object", "properties": {
                "tier": { "type": "integer", "x-mcp-header": "Tier" } } },
            "list": { "type": "array", "items": { "properties": {
                "hidden": { "x-mcp-header": "Hidden" } } } } } });
        let mut found = Vec::new();
        mirrored_arguments(&schema, &mut Vec::new(), &mut found);
        assert_eq!(
            found,
            [
                ("mcp-param-region".to_string(), vec!["region".to_string()]),
                (
                    "mcp-param-tier".to_string(),
                    vec!["options".to_string(), "tier".to_string()]
                ),
            ]
        );
    }
}
