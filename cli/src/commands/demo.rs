//! `palisade demo`: the example plugins, embedded in this binary, replay a bundled session.

use crate::commands::replay::{Approve, Format, replay_text};

/// Replay a bundled session through the bundled example plugins.
#[derive(clap::Args)]
pub struct DemoCommand {}

impl DemoCommand {
    /// Installs the examples into a temporary folder and replays the session.
    pub async fn execute(self) -> anyhow::Result<std::process::ExitCode> {
        demo().await
    }
}

/// The bundled session: a short, realistic run of a coding agent.
const SESSION: &str = include_str!("demo-session.jsonl");

async fn demo() -> anyhow::Result<std::process::ExitCode> {
    let dir = std::env::temp_dir().join(format!("palisade-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    palisade_examples::install(&dir)?;
    let names: Vec<_> = palisade_examples::EXAMPLES
        .iter()
        .filter(|e| e.installed)
        .map(|e| e.name)
        .collect();
    println!(
        "Palisade demo: the example plugins ({}) replay a bundled agent session.\n",
        names.join(", ")
    );
    let result = replay_text(
        &dir,
        SESSION,
        "the bundled session",
        Format::Text,
        Approve::Never,
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "\nThe plugins are in example-plugins/. Try `palisade check DIR`, `palisade run DIR --point \
         pre-tool --input CALL.json` and `palisade replay DIR SESSION.jsonl` on your own."
    );
    result
}
