//! Type-checks a component's hook exports at load, against the contract the host calls.
//!
//! Looking an export up by name is not enough: a component could export
//! `palisade:hooks/pre-tool@0.1.0` with `on-pre-tool: func(call: u32) -> u32`, and every call
//! of it would then fail. Every interface a plugin subscribes to is checked here with the same
//! type check wasmtime applies when the host calls it, and a mismatch is a load problem that
//! shows the expected and the actual signature.

use crate::point::Interface;
use crate::runtime::sandbox::wit;
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::{self, ComponentFunc, ComponentItem, Type};

/// What one exported function must look like.
struct Expected {
    function: &'static str,
    /// As the WIT writes it.
    signature: &'static str,
    check: fn(&ComponentFunc, &types::Component) -> wasmtime::Result<()>,
}

macro_rules! expected {
    ($function:literal, $signature:literal, ($($param:ty),*) -> ($($result:ty),*)) => {
        Expected {
            function: $function,
            signature: $signature,
            check: |func, component| {
                // The check wasmtime runs before the host's typed call of the export.
                func.typecheck::<($($param,)*), ($($result,)*)>(&component.instance_type())
            },
        }
    };
}

fn expected(interface: Interface) -> Expected {
    match interface {
        Interface::SessionStart => expected!(
            "on-session-start",
            "func(source: session-source) -> list<string>",
            (wit::SessionSource) -> (Vec<String>)
        ),
        Interface::PromptSubmit => expected!(
            "on-prompt-submit",
            "func(step: pre-step) -> pre-step-decision",
            (wit::PreStep) -> (wit::PreStepDecision)
        ),
        Interface::PreTool => expected!(
            "on-pre-tool",
            "func(call: tool-call) -> pre-tool-decision",
            (wit::ToolCall) -> (wit::PreToolDecision)
        ),
        Interface::ToolGuard => expected!(
            "on-tool-guard",
            "func(call: tool-call) -> guard-decision",
            (wit::ToolCall) -> (wit::GuardDecision)
        ),
        Interface::ToolExecute => expected!(
            "on-tool-execute",
            "func(call: tool-call) -> tool-outcome",
            (wit::ToolCall) -> (wit::ToolOutcome)
        ),
        Interface::PostTool => expected!(
            "on-post-tool",
            "func(call: tool-call, outcome: tool-outcome) -> post-tool-decision",
            (wit::ToolCall, wit::ToolOutcome) -> (wit::PostToolDecision)
        ),
        Interface::ToolResult => expected!(
            "on-tool-result",
            "func(call: tool-call, outcome: tool-outcome)",
            (wit::ToolCall, wit::ToolOutcome) -> ()
        ),
        Interface::TurnStopping => expected!(
            "on-turn-stopping",
            "func(event: stop-event) -> option<string>",
            (wit::StopEvent) -> (Option<String>)
        ),
        Interface::Committed => expected!(
            "on-committed",
            "func(observation: observation)",
            (wit::Observation) -> ()
        ),
    }
}

/// Checks that `component` exports `interface` with the function the host calls, typed as the
/// contract says. `Err` says what differs, with the expected and the actual signature.
pub(crate) fn check(
    engine: &Engine,
    component: &Component,
    interface: Interface,
) -> Result<(), String> {
    let expected = expected(interface);
    let ty = component.component_type();
    let name = interface.wit_name();
    let Some(export) = ty.get_export(engine, name) else {
        return Err(format!("does not export `{name}`"));
    };
    let ComponentItem::ComponentInstance(instance) = &export.ty else {
        return Err(format!(
            "exports `{name}`, but not as an interface instance"
        ));
    };
    let Some(function) = instance.get_export(engine, expected.function) else {
        return Err(format!(
            "exports `{name}` without its function `{}` (expected `{}: {}`)",
            expected.function, expected.function, expected.signature
        ));
    };
    let ComponentItem::ComponentFunc(func) = &function.ty else {
        return Err(format!(
            "exports `{name}` with `{}` that is not a function (expected `{}: {}`)",
            expected.function, expected.function, expected.signature
        ));
    };
    (expected.check)(func, &ty).map_err(|e| {
        format!(
            "exports `{name}` with the wrong type for `{}`: expected `{}`, found `{}` ({e:#})",
            expected.function,
            expected.signature,
            clip(&render_func(func), 400)
        )
    })
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// A function type in WIT's syntax, with its types written out structurally (a component's
/// types carry no names of their own).
fn render_func(func: &ComponentFunc) -> String {
    let params: Vec<String> = func
        .params()
        .map(|(name, ty)| format!("{name}: {}", render(&ty, 0)))
        .collect();
    let results: Vec<String> = func.results().map(|ty| render(&ty, 0)).collect();
    match results.as_slice() {
        [] => format!("func({})", params.join(", ")),
        [one] => format!("func({}) -> {one}", params.join(", ")),
        many => format!("func({}) -> ({})", params.join(", "), many.join(", ")),
    }
}

fn render(ty: &Type, depth: usize) -> String {
    if depth > 4 {
        return "…".into();
    }
    let inner = |t: &Type| render(t, depth + 1);
    match ty {
        Type::Bool => "bool".into(),
        Type::S8 => "s8".into(),
        Type::U8 => "u8".into(),
        Type::S16 => "s16".into(),
        Type::U16 => "u16".into(),
        Type::S32 => "s32".into(),
        Type::U32 => "u32".into(),
        Type::S64 => "s64".into(),
        Type::U64 => "u64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(list) => format!("list<{}>", inner(&list.ty())),
        Type::Option(option) => format!("option<{}>", inner(&option.ty())),
        Type::Result(result) => format!(
            "result<{}, {}>",
            result.ok().map_or("_".into(), |t| inner(&t)),
            result.err().map_or("_".into(), |t| inner(&t))
        ),
        Type::Tuple(tuple) => {
            let types: Vec<String> = tuple.types().map(|t| inner(&t)).collect();
            format!("tuple<{}>", types.join(", "))
        }
        Type::Record(record) => {
            let fields: Vec<String> = record
                .fields()
                .map(|f| format!("{}: {}", f.name, inner(&f.ty)))
                .collect();
            format!("record {{ {} }}", fields.join(", "))
        }
        Type::Variant(variant) => {
            let cases: Vec<String> = variant
                .cases()
                .map(|c| match &c.ty {
                    Some(t) => format!("{}({})", c.name, inner(t)),
                    None => c.name.to_string(),
                })
                .collect();
            format!("variant {{ {} }}", cases.join(", "))
        }
        Type::Enum(e) => format!("enum {{ {} }}", e.names().collect::<Vec<_>>().join(", ")),
        Type::Flags(f) => format!("flags {{ {} }}", f.names().collect::<Vec<_>>().join(", ")),
        other => format!("{other:?}"),
    }
}
