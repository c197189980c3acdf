//! Reading a plugin directory: its folders, each one's manifest read and checked, the
//! plugins an event wants picked out. Nothing is loaded here.

use super::files::{broken_link, read_manifest};
use crate::error::{Error, Problem};
use crate::manifest::{self, MANIFEST_FILE, Manifest, RuntimeSpec};
use crate::plugin::Skipped;
use crate::point::Point;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Which plugins an event needs: those with a hook on one of `points` that would run, its
/// matcher taking the event's `tool` where the point has one.
#[derive(Clone, Copy)]
pub(super) struct Wanted<'a> {
    pub(super) points: &'a [Point],
    pub(super) tool: Option<&'a str>,
}

impl Wanted<'_> {
    pub(super) fn wants(&self, manifest: &Manifest) -> bool {
        manifest.hooks.iter().any(|hook| {
            self.points.contains(&hook.point)
                && (!hook.point.has_tool() || self.tool.is_none_or(|t| hook.matches_tool(t)))
        })
    }
}

/// A plugin folder to load: its name in the directory, and where it leads if it is a symlink.
pub(super) struct Folder {
    pub(super) name: String,
    pub(super) link: Option<PathBuf>,
}

/// A plugin whose manifest is read, waiting for its component.
pub(super) struct Pending {
    pub(super) plugin_dir: Dir,
    pub(super) folder: PathBuf,
    pub(super) link: Option<PathBuf>,
    pub(super) manifest_path: PathBuf,
    pub(super) manifest: Manifest,
}

impl Pending {
    /// The size of the plugin's component file, for the order of loading (0: no component,
    /// or none that can be read, which its load then reports).
    pub(super) fn component_size(&self) -> u64 {
        match &self.manifest.runtime {
            RuntimeSpec::Wasm(wasm) => self.plugin_dir.metadata(wasm).map_or(0, |m| m.len()),
            _ => 0,
        }
    }
}

/// The manifests of `dir`, read and checked (every problem found kept for the load).
pub(super) fn read_dir(dir: &Path) -> Result<Read, Error> {
    let directory_error = |source| Error::Directory {
        path: dir.to_path_buf(),
        source,
    };
    // A plugin's own folder (it has a `plugin.toml`) loads as a directory of that one
    // plugin: `palisade check .` in a plugin being written.
    if dir.join(MANIFEST_FILE).is_file() {
        let dir = dir.canonicalize().map_err(directory_error)?;
        if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
            let root =
                Dir::open_ambient_dir(parent, ambient_authority()).map_err(directory_error)?;
            let folders = vec![Folder {
                name: name.to_string_lossy().into_owned(),
                link: None,
            }];
            let found = (Vec::new(), Vec::new());
            return Ok(read_folders(parent, &root, folders, found));
        }
    }
    let root = Dir::open_ambient_dir(dir, ambient_authority()).map_err(directory_error)?;
    let mut folders: Vec<Folder> = Vec::new();
    let mut skipped = Vec::new();
    let mut problems = Vec::new();
    for entry in root.entries().map_err(directory_error)? {
        let entry = entry.map_err(directory_error)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Hidden entries (`.git`, editor files) are never plugins.
        if name.starts_with('.') {
            continue;
        }
        let path = dir.join(&name);
        let skip = |reason: &str| Skipped {
            path: path.clone(),
            reason: reason.to_string(),
        };
        match entry.file_type() {
            Ok(t) if t.is_dir() => folders.push(Folder { name, link: None }),
            // A symlinked plugin folder (`ln -s ~/guards/shell-guard plugins/`) is the
            // operator's way to install a plugin: followed, and reported as such.
            Ok(t) if t.is_symlink() => match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => match path.canonicalize() {
                    Ok(target) => folders.push(Folder {
                        name,
                        link: Some(target),
                    }),
                    Err(err) => problems.push(broken_link(&path, &err)),
                },
                Ok(_) => skipped.push(skip("a symlink to a file, not to a plugin folder")),
                Err(err) => problems.push(broken_link(&path, &err)),
            },
            Ok(t) if t.is_file() => skipped.push(skip("a file, not a plugin folder")),
            Ok(_) => skipped.push(skip("not a file or a folder (a FIFO, socket or device)")),
            Err(err) => problems.push(Problem::new(&path, format!("cannot read its type: {err}"))),
        }
    }
    folders.sort_by(|a, b| a.name.cmp(&b.name));
    skipped.sort_by(|a: &Skipped, b| a.path.cmp(&b.path));
    Ok(read_folders(dir, &root, folders, (problems, skipped)))
}

/// Reads and checks the manifests of the plugin folders of `dir` (opened as `root`), in name
/// order, adding to the problems and skipped entries already `found`.
pub(super) fn read_folders(
    dir: &Path,
    root: &Dir,
    folders: Vec<Folder>,
    found: (Vec<Problem>, Vec<Skipped>),
) -> Read {
    let (mut problems, mut skipped) = found;
    let mut pending = Vec::new();
    for Folder { name, link } in folders {
        let folder = dir.join(&name);
        let opened = match &link {
            // Opened where it leads; inside it, the plugin's files are confined as usual.
            Some(target) => Dir::open_ambient_dir(target, ambient_authority()),
            None => root.open_dir(&name),
        };
        let plugin_dir = match opened {
            Ok(d) => d,
            Err(err) => {
                problems.push(Problem::new(&folder, format!("cannot open: {err}")));
                continue;
            }
        };
        let manifest_path = folder.join(MANIFEST_FILE);
        let text = match read_manifest(&plugin_dir) {
            Ok(text) => text,
            Err(err) if err.kind() == ErrorKind::NotFound => {
                skipped.push(Skipped {
                    path: folder,
                    reason: "no plugin.toml".into(),
                });
                continue;
            }
            Err(err) => {
                problems.push(
                    Problem::new(&manifest_path, format!("cannot read: {err}"))
                        .fix("make plugin.toml a regular file of the plugin's folder"),
                );
                continue;
            }
        };
        let Some(manifest) = manifest::parse::parse(&manifest_path, &text, &mut problems) else {
            continue;
        };
        pending.push(Pending {
            plugin_dir,
            folder,
            link,
            manifest_path,
            manifest,
        });
    }
    Read {
        pending,
        problems,
        skipped,
    }
}

/// A plugin directory's manifests, read: the plugins to load, and what was found on the way.
pub(super) struct Read {
    pub(super) pending: Vec<Pending>,
    pub(super) problems: Vec<Problem>,
    pub(super) skipped: Vec<Skipped>,
}
