//! The compiled-function cache: Cranelift's incremental compilation, kept on disk beside the
//! compiled-component cache.
//!
//! The component cache keys a component by its digest, so a component that differs by one
//! byte is compiled anew, whole. Yet components built by one toolchain share most of their
//! code: two JavaScript plugins carry the same StarlingMonkey engine, two Python plugins the
//! same CPython, and a plugin rebuilt after a change to its policy differs only in its data
//! (a componentize-js or componentize-py build snapshots the interpreter's heap, which is
//! never the same twice). With this store, Cranelift looks each function up by a hash of its
//! body, modulo the names it calls, and compiles only the functions it has not seen. Some
//! functions still miss, since wasmtime's translation of some of them varies from one compile
//! to the next (what it saves: docs/performance.md, "Choices measured").
//!
//! The functions a compile adds are written, when it ends, as one pack,
//! `functions/<hash>.pack`, sealed like every entry of the cache: a keyed BLAKE3 MAC under the
//! cache's private key, since the packs hold machine code. A pack whose seal does not verify
//! is deleted unread. Packs are read at a compile's first lookup and dropped from memory once
//! no compile is in flight, so a host that compiles nothing holds none of them, and a bridged
//! hook event (whose components come from the component cache) never reads them. The folder
//! is bounded: beyond [`MAX_BYTES`], the oldest packs go.
//!
//! Every failure here only costs time: an unreadable pack is a miss, a pack that cannot be
//! written is functions compiled again next time.

use super::private::{private_dir, seal, write_private};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The most bytes of packs kept, and read: about ten interpreters' worth of compiled code.
pub(crate) const MAX_BYTES: u64 = 512 << 20;

/// What a pack starts with: its format.
const MAGIC: &[u8] = b"palisade functions 1\n";

/// The longest function key kept (Cranelift's are 32-byte hashes).
const MAX_KEY_LEN: usize = 64;

/// The length of a pack's seal, at its end.
const SEAL_LEN: usize = blake3::OUT_LEN;

/// A store of compiled functions, for [`wasmtime::Config::enable_incremental_compilation`].
/// It has no folder, and stores nothing, until the component cache opens and places it.
#[derive(Default)]
pub(crate) struct Functions {
    place: OnceLock<Place>,
    state: Mutex<State>,
}

struct Place {
    dir: PathBuf,
    key: [u8; 32],
}

#[derive(Default)]
struct State {
    /// Compiles in flight (see [`Functions::compiling`]).
    compiling: usize,
    /// The packs verified, and where each function's code is in them: read at the first
    /// lookup, dropped when the last compile in flight ends.
    known: Option<Known>,
    /// Functions compiled since the last pack was written.
    fresh: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The packs verified (open), and where each function is: pack, offset, length.
#[derive(Default)]
struct Known {
    packs: Vec<std::fs::File>,
    functions: HashMap<Vec<u8>, (usize, u64, usize)>,
}

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Functions")
            .field("dir", &self.place.get().map(|p| &p.dir))
            .finish_non_exhaustive()
    }
}

impl Functions {
    /// Keeps the packs in `dir`, sealed with `key`. Only the first call places the store.
    /// Nothing is touched on disk until a pack is written (then `dir` is created, private):
    /// a process that compiles nothing, such as a bridged hook event, pays nothing for it.
    pub fn place(&self, dir: PathBuf, key: [u8; 32]) {
        let _ = self.place.set(Place { dir, key });
    }

    /// Marks a compile in flight until the guard drops, when the functions it compiled are
    /// written as a pack (and, if no other compile is in flight, the packs read leave
    /// memory).
    pub fn compiling(&self) -> Compiling<'_> {
        if let Ok(mut state) = self.state.lock() {
            state.compiling += 1;
        }
        Compiling { functions: self }
    }

    fn end_compile(&self) {
        let fresh = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            state.compiling = state.compiling.saturating_sub(1);
            if state.compiling == 0 {
                state.known = None;
            }
            std::mem::take(&mut state.fresh)
        };
        if let (false, Some(place)) = (fresh.is_empty(), self.place.get()) {
            // A pack that cannot be written costs the next compile time only.
            let _ = place.write_pack(&fresh);
        }
    }
}

/// A compile in flight; see [`Functions::compiling`].
pub(crate) struct Compiling<'a> {
    functions: &'a Functions,
}

impl Drop for Compiling<'_> {
    fn drop(&mut self) {
        self.functions.end_compile();
    }
}

impl wasmtime::CacheStore for Functions {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let place = self.place.get()?;
        let mut state = self.state.lock().ok()?;
        let known = state.known.get_or_insert_with(|| place.read_packs());
        let &(pack, offset, len) = known.functions.get(key)?;
        let mut code = vec![0; len];
        read_at(&known.packs[pack], offset, &mut code).ok()?;
        Some(Cow::Owned(code))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        if self.place.get().is_none() || key.len() > MAX_KEY_LEN {
            return false;
        }
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        state.fresh.push((key.to_vec(), value));
        true
    }
}

impl Place {
    /// Every pack whose seal verifies, newest first, up to [`MAX_BYTES`]: kept open, with
    /// where each function is in them. A pack is read through once, to verify its seal and
    /// index it; a function's code is read again, from the same open file, when Cranelift
    /// asks for it. (Whoever could change a pack in between can write to this user's
    /// private cache, and so replace the compiled components too.)
    fn read_packs(&self) -> Known {
        let mut known = Known::default();
        let mut budget = MAX_BYTES;
        for (path, len, _) in packs(&self.dir).into_iter().rev() {
            if len > budget {
                break;
            }
            let Ok(file) = std::fs::File::open(&path) else {
                continue;
            };
            let Some(index) = self.index(&file) else {
                // Forged, corrupt or of another key: never to be read again.
                let _ = std::fs::remove_file(&path);
                continue;
            };
            budget -= len;
            let pack = known.packs.len();
            known.packs.push(file);
            for (key, offset, len) in index {
                known.functions.entry(key).or_insert((pack, offset, len));
            }
        }
        known
    }

    /// The functions in the pack `file` (key, offset and length of the code), if its seal
    /// verifies. Streams the file through the MAC once.
    fn index(&self, file: &std::fs::File) -> Option<Vec<(Vec<u8>, u64, usize)>> {
        use std::io::Read;
        let body_len = file.metadata().ok()?.len().checked_sub(SEAL_LEN as u64)?;
        let mut reader = PackReader {
            from: std::io::BufReader::with_capacity(1 << 16, file),
            mac: blake3::Hasher::new_keyed(&self.key),
            at: 0,
            end: body_len,
        };
        let mut magic = vec![0; MAGIC.len()];
        reader.read(&mut magic)?;
        if magic != MAGIC {
            return None;
        }
        let mut index = Vec::new();
        while reader.at < body_len {
            // A key is a hash: a longer one is not a pack of ours (and is not allocated).
            let mut key = vec![0; reader.len().filter(|&len| len <= MAX_KEY_LEN)?];
            reader.read(&mut key)?;
            let len = reader.len()?;
            index.push((key, reader.at, len));
            reader.skip(len)?;
        }
        let mut sealed = [0; SEAL_LEN];
        reader.from.read_exact(&mut sealed).ok()?;
        // Compared as MACs, in constant time (`blake3::Hash`).
        (reader.mac.finalize() == blake3::Hash::from_bytes(sealed)).then_some(index)
    }

    /// Writes `fresh` as a pack, first deleting the oldest packs that would leave the folder
    /// over [`MAX_BYTES`].
    fn write_pack(&self, fresh: &[(Vec<u8>, Vec<u8>)]) -> std::io::Result<()> {
        let mut body = MAGIC.to_vec();
        for (key, value) in fresh {
            for part in [key, value] {
                let len = u32::try_from(part.len()).map_err(std::io::Error::other)?;
                body.extend_from_slice(&len.to_le_bytes());
                body.extend_from_slice(part);
            }
        }
        let len = (body.len() + SEAL_LEN) as u64;
        if len > MAX_BYTES {
            return Ok(());
        }
        let existing = packs(&self.dir);
        let mut total: u64 = existing.iter().map(|(_, len, _)| len).sum();
        for (path, old, _) in &existing {
            if total + len <= MAX_BYTES {
                break;
            }
            if std::fs::remove_file(path).is_ok() {
                total -= old;
            }
        }
        private_dir(&self.dir)?;
        let name = blake3::hash(&body).to_hex();
        let mac = seal(&self.key, &body);
        body.extend_from_slice(mac.as_bytes());
        write_private(&self.dir.join(format!("{}.pack", &name[..32])), &body)
    }
}

/// Reads a pack's body, through its MAC, never past its end.
struct PackReader<'a> {
    from: std::io::BufReader<&'a std::fs::File>,
    mac: blake3::Hasher,
    at: u64,
    end: u64,
}

impl PackReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Option<()> {
        use std::io::Read;
        let len = buf.len() as u64;
        (self.at + len <= self.end).then_some(())?;
        self.from.read_exact(buf).ok()?;
        self.mac.update(buf);
        self.at += len;
        Some(())
    }

    /// A length, as written before a key or a function's code.
    fn len(&mut self) -> Option<usize> {
        let mut len = [0; 4];
        self.read(&mut len)?;
        usize::try_from(u32::from_le_bytes(len)).ok()
    }

    /// Hashes `len` bytes without keeping them.
    fn skip(&mut self, len: usize) -> Option<()> {
        use std::io::Read;
        let len = len as u64;
        (self.at + len <= self.end).then_some(())?;
        let copied = std::io::copy(&mut (&mut self.from).take(len), &mut self.mac).ok()?;
        (copied == len).then_some(())?;
        self.at += len;
        Some(())
    }
}

/// Reads `buf.len()` bytes of `file` at `offset`.
fn read_at(file: &std::fs::File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek};
        let mut file = file;
        file.seek(std::io::SeekFrom::Start(offset))?;
        file.read_exact(buf)
    }
}

/// The packs in `dir`, oldest first: path, size and modification time.
fn packs(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut packs: Vec<_> = entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((e.path(), meta.len(), meta.modified().ok()?))
        })
        .collect();
    packs.sort_by_key(|(_, _, modified)| *modified);
    packs
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore;

    fn placed(dir: &Path) -> Functions {
        let functions = Functions::default();
        functions.place(dir.join("functions"), [3; 32]);
        functions
    }

    /// Compiles `entries` through `functions`: the pack written, and its bytes.
    fn compiled(functions: &Functions, entries: &[(&[u8], Vec<u8>)]) -> (PathBuf, Vec<u8>) {
        {
            let _compiling = functions.compiling();
            for (key, code) in entries {
                assert!(functions.insert(key, code.clone()));
            }
        }
        let dir = &functions.place.get().unwrap().dir;
        let (pack, _, _) = packs(dir).pop().unwrap();
        let bytes = std::fs::read(&pack).unwrap();
        (pack, bytes)
    }

    /// Asserts that a new store on `dir` finds no `f` in the pack, and deletes the pack.
    fn refused(dir: &Path, pack: &Path) {
        let other = placed(dir);
        let _compiling = other.compiling();
        assert_eq!(other.get(b"f"), None);
        assert!(!pack.exists());
    }

    #[test]
    fn a_compiled_function_is_found_by_the_next_compile_and_not_before_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let functions = placed(dir.path());
        {
            let _compiling = functions.compiling();
            assert_eq!(functions.get(b"f"), None);
            assert!(functions.insert(b"f", b"code of f".to_vec()));
        }
        // Another process: a store of its own on the same folder.
        let other = placed(dir.path());
        let _compiling = other.compiling();
        assert_eq!(other.get(b"f").as_deref(), Some(&b"code of f"[..]));
        assert_eq!(other.get(b"g"), None);
    }

    #[test]
    fn a_pack_whose_seal_fails_is_deleted_unread() {
        let dir = tempfile::tempdir().unwrap();
        let functions = placed(dir.path());
        let (pack, mut bytes) = compiled(&functions, &[(b"f", b"code of f".to_vec())]);
        let at = bytes.len() - SEAL_LEN - 1;
        bytes[at] ^= 1;
        std::fs::write(&pack, bytes).unwrap();
        refused(dir.path(), &pack);
        // A store under another key cannot read them either.
        compiled(&functions, &[(b"f", b"code of f".to_vec())]);
        let stranger = Functions::default();
        stranger.place(dir.path().join("functions"), [4; 32]);
        let _compiling = stranger.compiling();
        assert_eq!(stranger.get(b"f"), None);
    }

    #[test]
    fn a_truncated_pack_is_deleted_unread() {
        let dir = tempfile::tempdir().unwrap();
        let functions = placed(dir.path());
        let (pack, bytes) = compiled(&functions, &[(b"f", vec![7; 1000]), (b"g", vec![8; 1000])]);
        std::fs::write(&pack, &bytes[..bytes.len() / 2]).unwrap();
        refused(dir.path(), &pack);
    }

    #[test]
    fn an_unplaced_store_keeps_nothing() {
        let functions = Functions::default();
        let _compiling = functions.compiling();
        assert!(!functions.insert(b"f", vec![1]));
        assert_eq!(functions.get(b"f"), None);
    }
}
