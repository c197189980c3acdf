//! What a plugin is granted beyond compute: its state domain, its environment variables and
//! the files it may read, each checked against the manifest. May touch: the plugin folders it is
//! given (read only).

use crate::error::Problem;
use crate::manifest::Manifest;
use crate::manifest::StateGrant;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

/// The state domain of a plugin granted `[state]` whose folder is `folder` (where it leads,
/// if it is a symlink): the one its manifest shares, else the folder's own. A folder whose
/// path cannot be resolved is a problem of its load: its values are no one else's to use.
pub(super) fn state_domain(
    grant: &StateGrant,
    folder: &Path,
    manifest: &Path,
) -> Result<Arc<str>, Problem> {
    match &grant.shared {
        Some(domain) => Ok(domain.as_str().into()),
        None => crate::state::folder_domain(folder)
            .map(Into::into)
            .map_err(|e| {
                Problem::new(
                    manifest,
                    format!("cannot resolve the plugin's folder for its state: {e}"),
                )
                .field("state")
            }),
    }
}

/// What a component's manifest grants it of the host, resolved at load: the `env` values
/// (a variable that is not set is a problem: the component would otherwise run without what
/// it was meant to be given) and the `files` folders (each must be a folder; relative paths
/// are the plugin folder's; a symlink is followed here, once, and its target granted).
#[allow(clippy::type_complexity)]
pub(super) fn granted(
    manifest: &Manifest,
    folder: &Path,
    manifest_path: &Path,
    problems: &mut Vec<Problem>,
) -> Option<(Vec<(String, String)>, Vec<(PathBuf, String)>)> {
    let before = problems.len();
    let mut vars = Vec::new();
    for name in &manifest.env {
        match std::env::var(name) {
            Ok(value) => vars.push((name.clone(), value)),
            Err(_) => problems.push(
                Problem::new(
                    manifest_path,
                    format!("the environment variable `{name}` is not set (or not UTF-8)"),
                )
                .field("env")
                .fix("set it in the environment the host starts in, or remove it from `env`"),
            ),
        }
    }
    let mut folders = Vec::new();
    for (i, grant) in manifest.files.iter().enumerate() {
        let path = folder.join(&grant.path);
        match std::fs::canonicalize(&path) {
            Ok(real) if real.is_dir() => folders.push((real, grant.guest.clone())),
            Ok(_) => problems.push(
                Problem::new(manifest_path, format!("{} is not a folder", path.display()))
                    .field(format!("files[{i}].path"))
                    .fix("grant a folder; a single file goes in a folder of its own"),
            ),
            Err(err) => problems.push(
                Problem::new(
                    manifest_path,
                    format!("cannot open {}: {err}", path.display()),
                )
                .field(format!("files[{i}].path"))
                .fix("a folder that exists, relative to the plugin folder or absolute"),
            ),
        }
    }
    (problems.len() == before).then_some((vars, folders))
}
