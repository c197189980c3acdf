//! The bearer token of `palisade serve`: a random secret in a file only its owner can read.
//!
//! The server reads it, and the hook commands that talk to the server (`palisade forward
//! --token-file FILE`) read it: it is never in an environment variable, which every process
//! the agent starts (its shell tool included) would inherit and could print.

use anyhow::{Context, bail};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The longest token file read (a token is 64 characters; this leaves room for a newline).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The shortest token accepted: a guessable token is no token.
const MIN_TOKEN_CHARS: usize = 32;

/// The token file used when none is named: `$XDG_CONFIG_HOME/palisade/serve-token`, else
/// `~/.config/palisade/serve-token`.
pub fn default_path() -> anyhow::Result<PathBuf> {
    let config = match (
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    ) {
        (Some(config), _) if !config.is_empty() => PathBuf::from(config),
        (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".config"),
        _ => {
            bail!("neither XDG_CONFIG_HOME nor HOME is set: name the token file with --token-file")
        }
    };
    Ok(config.join("palisade/serve-token"))
}

/// `file`, or the default path; absolute, since a hook command runs in the agent's directory.
pub fn path_or_default(file: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match file {
        Some(file) => file.to_path_buf(),
        None => default_path()?,
    };
    Ok(std::path::absolute(&path)?)
}

/// The token in `path`, creating the file with a new random token when there is none.
/// Returns the token and whether it was created.
pub fn ensure(path: &Path) -> anyhow::Result<(String, bool)> {
    match create(path) {
        Ok(token) => Ok((token, true)),
        Err(err)
            if err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::AlreadyExists) =>
        {
            Ok((read(path)?, false))
        }
        Err(err) => Err(err.context(format!("cannot create the token file {}", path.display()))),
    }
}

/// Creates `path` (never replacing a file) with 32 random bytes, hex-encoded; readable by its
/// owner only. Its folder is created owner-only too when missing.
fn create(path: &Path) -> anyhow::Result<String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no random bytes: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(format!("{token}\n").as_bytes())?;
    file.sync_all()?;
    Ok(token)
}

/// The token in `path`: refused (naming the file and the fix) unless it is a regular file of
/// this user that no one else can read or write, holding a long enough token.
pub fn read(path: &Path) -> anyhow::Result<String> {
    let shown = path.display();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        // Never block on a FIFO someone put there.
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| {
            format!(
                "cannot read the token file {shown} (it is created by `palisade serve` or \
                 `palisade install claude-code --serve`)"
            )
        })?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read the token file {shown}"))?;
    if !meta.is_file() {
        bail!("the token file {shown} is not a regular file");
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        bail!(
            "the token file {shown} belongs to user {} and not to you ({me}): anyone who owns it \
             can read the token; create your own (remove it, and `palisade serve` makes a new one)",
            meta.uid()
        );
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "the token file {shown} can be read or written by others (mode {:o}): anyone who can \
             read it can steer your agent. Fix: chmod 600 {shown}",
            meta.mode() & 0o777
        );
    }
    if meta.len() > MAX_TOKEN_FILE_BYTES {
        bail!("the token file {shown} is over {MAX_TOKEN_FILE_BYTES} bytes: it is not a token");
    }
    let mut text = String::new();
    Read::by_ref(&mut file)
        .take(MAX_TOKEN_FILE_BYTES)
        .read_to_string(&mut text)
        .with_context(|| format!("the token file {shown} is not UTF-8 text"))?;
    let token = text.trim();
    if token.len() < MIN_TOKEN_CHARS || !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "the token in {shown} is not a token: it must be at least {MIN_TOKEN_CHARS} printable \
             characters without spaces (remove the file, and `palisade serve` makes a new one)"
        );
    }
    Ok(token.to_string())
}
