//! Type-checks a component's hook exports at load, against the contract the host calls.
//!
//! Looking an export up by name is not enough: a component could export
//! `palisade:hooks/pre-tool@0.1.0` with `on-pre-tool: func(call: u32) -> u32`, and every call
//! of it would then fail. Every interface a plugin subscribes to is checked here with the same
//! type check wasmtime applies when the host calls it, and a mismatch is a load problem that
//! shows the expected and the actual signature.

use crate::point::Interface;
use crate::runtime::bindings::wit::{
    GuardDecision, Observation, PostToolDecision, PreStep, PreStepDecision, PreToolDecision,
    SessionSource, StopEvent, ToolCall, ToolOutcome,
};
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::{self, ComponentFunc, ComponentItem, Type};

/// What one exported function must look like.
struct Expected {
    function: String,
    /// As the WIT writes it.
    signature: String,
    check: fn(&ComponentFunc, &types::Component) -> wasmtime::Result<()>,
}

macro_rules! expectations {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        /// The function each interface exports, from the table of extension points.
        fn expected(interface: Interface) -> Expected {
            match interface {
                $(Interface::$variant => Expected {
                    function: stringify!($method).replace('_', "-"),
                    signature: signature(
                        &[$((stringify!($arg), stringify!($ty))),*],
                        [$(stringify!($ret))?].first().copied(),
                    ),
                    check: |func, component| {
                        // The check wasmtime runs before the host's typed call of the export.
                        func.typecheck::<($($ty,)*), ($($ret,)?)>(&component.instance_type())
                    },
                },)*
            }
        }
    };
}
palisade_wit::foreach_interface!(expectations);

/// `func(a: t, …) -> r` in WIT's syntax, from the table's Rust names.
fn signature(params: &[(&str, &str)], result: Option<&str>) -> String {
    let params: Vec<String> = params
        .iter()
        .map(|(name, ty)| format!("{name}: {}", wit_type(ty)))
        .collect();
    match result {
        Some(result) => format!("func({}) -> {}", params.join(", "), wit_type(result)),
        None => format!("func({})", params.join(", ")),
    }
}

/// A type of the table in WIT's syntax: `Vec<String>` is `list<string>`, `ToolCall` is
/// `tool-call`.
fn wit_type(rust: &str) -> String {
    let rust: String = rust.chars().filter(|c| !c.is_whitespace()).collect();
    if let Some(inner) = rust.strip_prefix("Vec<").and_then(|r| r.strip_suffix('>')) {
        return format!("list<{}>", wit_type(inner));
    }
    if let Some(inner) = rust
        .strip_prefix("Option<")
        .and_then(|r| r.strip_suffix('>'))
    {
        return format!("option<{}>", wit_type(inner));
    }
    let mut kebab = String::new();
    for (i, c) in rust.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                kebab.push('-');
            }
            kebab.push(c.to_ascii_lowercase());
        } else {
            kebab.push(c);
        }
    }
    kebab
}

/// Checks that `component` exports `interface` with the function the host calls, typed as the
/// contract says. `Err` says what differs, with the expected and the actual signature.
pub(crate) fn check(
    engine: &Engine,
    component: &Component,
    interface: Interface,
) -> Result<(), String> {
    check_export(
        engine,
        component,
        interface.wit_name(),
        &expected(interface),
    )
}

/// Checks `prepare`, which a component may export or not: `None` when it does not, else as
/// [`check`].
pub(crate) fn check_prepare(engine: &Engine, component: &Component) -> Option<Result<(), String>> {
    let name = format!("palisade:hooks/prepare@{}", palisade_wit::VERSION);
    component.component_type().get_export(engine, &name)?;
    let expected = Expected {
        function: "prepare".into(),
        signature: "func() -> result<_, string>".into(),
        check: |func, component| {
            func.typecheck::<(), (Result<(), String>,)>(&component.instance_type())
        },
    };
    Some(check_export(engine, component, &name, &expected))
}

/// Checks that `component` exports the interface `name` with the function `expected`.
fn check_export(
    engine: &Engine,
    component: &Component,
    name: &str,
    expected: &Expected,
) -> Result<(), String> {
    let ty = component.component_type();
    let Some(export) = ty.get_export(engine, name) else {
        return Err(format!("does not export `{name}`"));
    };
    let ComponentItem::ComponentInstance(instance) = &export.ty else {
        return Err(format!(
            "exports `{name}`, but not as an interface instance"
        ));
    };
    let Some(function) = instance.get_export(engine, &expected.function) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of extension points says what the `.wit` files say: each interface's
    /// function, written out from the table, is a line of the package.
    #[test]
    fn the_table_matches_the_wit_files() {
        let wit: Vec<&str> = palisade_wit::FILES
            .iter()
            .flat_map(|(_, text)| text.lines())
            .map(str::trim)
            .collect();
        for interface in Interface::ALL {
            let expected = expected(*interface);
            let line = format!("{}: {};", expected.function, expected.signature);
            assert!(wit.contains(&line.as_str()), "no `{line}` in the WIT files");
        }
    }
}
