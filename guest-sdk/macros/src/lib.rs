//! The `export!` macro of `palisade-sdk`. Use it through `palisade_sdk::export!`.
//!
//! A component must export exactly the extension points its plugin implements: the host reads
//! the exports to know what a plugin can do, and refuses a manifest that subscribes to a point
//! the component lacks. `wit-bindgen` exports every interface of the world it binds, so this
//! macro writes a world that exports just the named points and binds it in the plugin's crate,
//! reusing the SDK's types (so `ToolCall`, `PreToolDecision`, ... are the SDK's own).

use proc_macro::{Delimiter, TokenStream, TokenTree};

/// One SDK trait: its name, the WIT interface it exports, and the adapter impl's body.
struct Point {
    sdk_trait: &'static str,
    interface: &'static str,
    module: &'static str,
    method: &'static str,
    params: &'static str,
    args: &'static str,
    ret: &'static str,
}

// One row per extension point, from the package's table.
macro_rules! points {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        const POINTS: &[Point] = &[$(Point {
            sdk_trait: stringify!($variant),
            interface: $wit,
            module: stringify!($snake),
            method: stringify!($method),
            params: concat!($(stringify!($arg), ": ", stringify!($ty), ", "),*),
            args: concat!($(stringify!($arg), ", "),*),
            ret: concat!($(" -> ", stringify!($ret))?),
        }),*];
    };
}
palisade_wit::foreach_interface!(points);

/// `export!(MyPlugin: PreTool + ToolResult)`: exports the named extension points, each
/// implemented by `MyPlugin`'s impl of the SDK trait of the same name. `+ Prepare` also
/// exports `prepare`, implemented by its impl of `palisade_sdk::Prepare`.
#[proc_macro]
pub fn export(input: TokenStream) -> TokenStream {
    match expand(input) {
        Ok(tokens) => tokens,
        Err(message) => format!("::core::compile_error!({message:?});")
            .parse()
            .expect("a compile_error! invocation parses"),
    }
}

fn expand(input: TokenStream) -> Result<TokenStream, String> {
    const USAGE: &str = "usage: palisade_sdk::export!(MyPlugin: PreTool + ToolResult) — a type, a colon, \
         then the SDK traits it implements, joined by `+` (at least one extension point; \
         `+ Prepare` to have each instance prepared before its first call)";
    let mut tokens = input.into_iter().peekable();
    // The plugin type: a path such as `MyPlugin` or `crate::MyPlugin`.
    let mut ty = String::new();
    loop {
        match tokens.next() {
            Some(TokenTree::Punct(p)) if p.as_char() == ':' && ty.ends_with(':') => ty.push(':'),
            Some(TokenTree::Punct(p)) if p.as_char() == ':' => {
                if tokens
                    .peek()
                    .is_some_and(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ':'))
                {
                    ty.push(':');
                } else {
                    break;
                }
            }
            Some(TokenTree::Ident(i)) => ty.push_str(&i.to_string()),
            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::None => {
                ty.push_str(&g.stream().to_string())
            }
            _ => return Err(USAGE.to_string()),
        }
    }
    if ty.is_empty() {
        return Err(USAGE.to_string());
    }
    let mut points: Vec<&Point> = Vec::new();
    let mut prepare = false;
    let mut expect_trait = true;
    for token in tokens {
        match token {
            TokenTree::Ident(i) if expect_trait && i.to_string() == "Prepare" => {
                if prepare {
                    return Err("`Prepare` is named twice".to_string());
                }
                prepare = true;
                expect_trait = false;
            }
            TokenTree::Ident(i) if expect_trait => {
                let name = i.to_string();
                let point = POINTS.iter().find(|p| p.sdk_trait == name).ok_or_else(|| {
                    let known: Vec<_> = POINTS.iter().map(|p| p.sdk_trait).collect();
                    format!(
                        "`{name}` is not an extension-point trait of palisade_sdk; expected one of: {}, or Prepare",
                        known.join(", ")
                    )
                })?;
                if points.iter().any(|p| p.sdk_trait == name) {
                    return Err(format!("`{name}` is named twice"));
                }
                points.push(point);
                expect_trait = false;
            }
            TokenTree::Punct(p) if p.as_char() == '+' && !expect_trait => expect_trait = true,
            TokenTree::Punct(p) if p.as_char() == ',' && !expect_trait => {}
            _ => return Err(USAGE.to_string()),
        }
    }
    if points.is_empty() || expect_trait {
        return Err(USAGE.to_string());
    }
    Ok(render(&ty, &points, prepare)
        .parse()
        .expect("generated code parses"))
}

fn render(ty: &str, points: &[&Point], prepare: bool) -> String {
    // A world of its own package that exports just the named points of `palisade:hooks`, which
    // the bindings generator reads from `palisade-wit`'s folder (and only from there: a `wit/`
    // folder in the plugin's crate is not read).
    let version = palisade_wit::VERSION;
    let mut wit = format!(
        "package palisade:plugin;\nworld palisade-plugin {{\n    \
         import palisade:hooks/host@{version};\n    \
         import palisade:hooks/tool-dispatch@{version};\n    \
         import palisade:hooks/state@{version};\n"
    );
    for p in points {
        wit.push_str(&format!(
            "    export palisade:hooks/{}@{version};\n",
            p.interface
        ));
    }
    if prepare {
        wit.push_str(&format!("    export palisade:hooks/prepare@{version};\n"));
    }
    wit.push_str("}\n");
    let dir = palisade_wit::DIR;

    let mut uses = format!("let _ = <{ty} as ::palisade_sdk::Plugin>::new;");
    for p in points {
        uses.push_str(&format!(
            "let _ = <{ty} as ::palisade_sdk::{}>::{};",
            p.sdk_trait, p.method
        ));
    }
    let mut impls = String::new();
    if prepare {
        uses.push_str(&format!(
            "let _ = <{ty} as ::palisade_sdk::Prepare>::prepare;"
        ));
        // The plugin's value is made here, ahead of the first call, then prepared.
        impls.push_str(&format!(
            "impl self::exports::palisade::hooks::prepare::Guest for __PalisadeAdapter {{
                fn prepare() -> ::core::result::Result<(), ::std::string::String> {{
                    __with_plugin(<super::{ty} as ::palisade_sdk::Prepare>::prepare)
                }}
            }}\n"
        ));
    }
    for p in points {
        impls.push_str(&format!(
            "impl self::exports::palisade::hooks::{module}::Guest for __PalisadeAdapter {{
                fn {method}({params}){ret} {{
                    __with_plugin(|plugin| {{
                        <super::{ty} as ::palisade_sdk::{sdk_trait}>::{method}(plugin, {args})
                    }})
                }}
            }}\n",
            module = p.module,
            method = p.method,
            params = p.params,
            ret = p.ret,
            sdk_trait = p.sdk_trait,
            args = p.args,
        ));
    }
    format!(
        "#[doc(hidden)]
        #[allow(missing_docs, unsafe_code, clippy::all)]
        // Exports exist only in the component: a native build of a plugin crate (its unit
        // tests, `cargo test --workspace`) must not export symbols named after WIT paths.
        #[cfg(target_arch = \"wasm32\")]
        mod __palisade_export {{
            ::palisade_sdk::__private::wit_bindgen::generate!({{
                path: {dir:?},
                inline: {wit:?},
                world: \"palisade-plugin\",
                runtime_path: \"::palisade_sdk::__private::wit_bindgen::rt\",
                with: {{
                    \"palisade:hooks/types@0.1.0\": ::palisade_sdk::wit::types,
                    \"palisade:hooks/host@0.1.0\": ::palisade_sdk::wit::host,
                    \"palisade:hooks/tool-dispatch@0.1.0\": ::palisade_sdk::wit::tool_dispatch,
                    \"palisade:hooks/state@0.1.0\": ::palisade_sdk::wit::state,
                }},
            }});
            // The table's types, by their names.
            #[allow(unused_imports)]
            use ::palisade_sdk::types::*;
            struct __PalisadeAdapter;
            ::std::thread_local! {{
                /// The plugin's value: made by the instance's `prepare` or first call, kept while
                /// the instance lives.
                static __PLUGIN: ::core::cell::RefCell<::core::option::Option<super::{ty}>> =
                    const {{ ::core::cell::RefCell::new(::core::option::Option::None) }};
            }}
            // A component instance is never re-entered (the host cannot call into it while it
            // runs, `next()` included), so the value is never borrowed twice.
            fn __with_plugin<R>(call: impl ::core::ops::FnOnce(&mut super::{ty}) -> R) -> R {{
                __PLUGIN.with(|cell| {{
                    let mut slot = cell.borrow_mut();
                    let plugin = slot.get_or_insert_with(|| {{
                        <super::{ty} as ::palisade_sdk::Plugin>::new(&::palisade_sdk::Config::default())
                    }});
                    call(plugin)
                }})
            }}
            {impls}
            export!(__PalisadeAdapter);
        }}
        // In a native build the exports are absent; refer to the implementations so that
        // what only they use is not reported as dead code.
        #[cfg(not(target_arch = \"wasm32\"))]
        const _: () = {{ {uses} }};"
    )
}
