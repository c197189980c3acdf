//! A plugin's component: its file opened within the plugin's folder and checked, its digest
//! (and `sha256` pin) verified, then compiled, or mapped from the compiled-component cache,
//! and its exports type-checked against the manifest's hooks.

use super::checks::{check_header, open_component, starts_within_limits, subscriptions_exported};
use super::files::{read_all, read_head};
use crate::digest::sha256_hex;
use crate::error::Problem;
use crate::host::{CompileProgress, Host};
use crate::manifest::Manifest;
use crate::runtime::Wasm;
use cap_std::fs::Dir;
use std::path::Path;
use std::sync::Arc;
use wasmtime::component::Component;

impl Host {
    /// The component file's sha256, its bytes (`None` when the cache remembers the file as
    /// provably unchanged: then nothing is read) and its metadata.
    fn scan(
        &self,
        file: &std::fs::File,
        max: u64,
    ) -> std::io::Result<(String, Option<Vec<u8>>, std::fs::Metadata)> {
        let meta = file.metadata()?;
        if let Some(sha256) = self.inner.cache.as_ref().and_then(|c| c.recall(&meta)) {
            return Ok((sha256, None, meta));
        }
        let bytes = read_all(file, max)?;
        let sha256 = sha256_hex(&bytes);
        if let Some(cache) = &self.inner.cache {
            cache.remember(&meta, &file.metadata()?, &sha256);
        }
        Ok((sha256, Some(bytes), meta))
    }

    pub(super) fn load_wasm(
        &self,
        plugin_dir: &Dir,
        folder: &Path,
        manifest_path: &Path,
        manifest: &Manifest,
        wasm: &str,
        problems: &mut Vec<Problem>,
    ) -> Option<Wasm> {
        let wasm_path = folder.join(wasm);
        let max = self.inner.limits.max_component_bytes;
        let file = open_component(plugin_dir, manifest_path, wasm, &wasm_path, max, problems)?;
        let (sha256, bytes, meta) = match self.scan(&file, max) {
            Ok(scanned) => scanned,
            Err(err) => {
                problems.push(Problem::new(&wasm_path, format!("cannot read: {err}")));
                return None;
            }
        };
        let size = usize::try_from(meta.len()).unwrap_or(usize::MAX);
        if let Some(pinned) = &manifest.sha256
            && *pinned != sha256
        {
            problems.push(
                Problem::new(
                    manifest_path,
                    format!("the component's sha256 is {sha256}, the manifest pins {pinned}"),
                )
                .field("sha256")
                .fix("rebuild from the pinned source, or update the pin if the change is yours"),
            );
            return None;
        }
        let head = match &bytes {
            Some(bytes) => Ok(bytes[..bytes.len().min(8)].to_vec()),
            None => read_head(&file),
        };
        let header = head.map(|head| check_header(&head, &wasm_path));
        match header {
            Ok(None) => {}
            Ok(Some(problem)) => {
                problems.push(problem);
                return None;
            }
            Err(err) => {
                problems.push(Problem::new(&wasm_path, format!("cannot read: {err}")));
                return None;
            }
        }
        let compiled = self.compile(
            &self.inner.engines.engine,
            &manifest.name,
            size,
            &sha256,
            bytes,
            &file,
        );
        // A component the pool's slots do not admit loads into the on-demand engine (the
        // error, if that fails too, is its: the pool's is no fault of the component's).
        let compiled = match compiled {
            Ok(component) => match self.inner.engines.linker.get() {
                Ok(linker) => Ok((component, linker)),
                Err(err) => {
                    problems.push(Problem::new(&wasm_path, err));
                    return None;
                }
            },
            Err(_) if self.inner.engines.pooled => self
                .inner
                .engines
                .on_demand()
                .map_err(wasmtime::Error::msg)
                .and_then(|(engine, linker)| {
                    self.compile(engine, &manifest.name, size, &sha256, None, &file)
                        .map(|c| (c, linker))
                }),
            Err(err) => Err(err),
        };
        let (component, linker) = match compiled {
            Ok(c) => c,
            Err(err) => {
                problems.push(
                    Problem::new(&wasm_path, format!("not a valid component: {err:#}"))
                        .fix("rebuild it; a truncated or corrupted file cannot load"),
                );
                return None;
            }
        };
        if let Some(problem) = starts_within_limits(&component, manifest, manifest_path, wasm) {
            problems.push(problem);
            return None;
        }
        let engine = component.engine();
        let (pre, direct) = match linker.link(&component) {
            Ok(linked) => linked,
            Err(err) => {
                problems.push(
                    Problem::new(&wasm_path, format!("cannot be linked: {err:#}"))
                        .fix("a plugin may import only palisade:hooks and WASI 0.2; remove other imports"),
                );
                return None;
            }
        };
        let loaded = Arc::new(crate::runtime::component::Loaded::new(pre, direct));
        if !subscriptions_exported(
            engine,
            &component,
            &loaded.exports,
            manifest,
            manifest_path,
            &wasm_path,
            wasm,
            problems,
        ) {
            return None;
        }
        Some(Wasm {
            size,
            path: wasm_path,
            sha256,
            spares: crate::runtime::wasm::Spares::new(loaded.clone()),
            code: crate::runtime::component::Code::new(component, loaded),
        })
    }

    /// Compiles the component of `plugin` (`size` bytes, digest `sha256`), or loads its
    /// compiled code from the cache, reporting progress when it compiles. `bytes` are its
    /// contents when already read; otherwise they are read from `file` only if it compiles,
    /// and must still have that digest.
    fn compile(
        &self,
        engine: &wasmtime::Engine,
        plugin: &str,
        size: usize,
        sha256: &str,
        mut bytes: Option<Vec<u8>>,
        file: &std::fs::File,
    ) -> wasmtime::Result<Component> {
        let max = self.inner.limits.max_component_bytes;
        // The bytes are read only to compile (a cache hit maps the compiled code instead):
        // that is when compiling starts.
        let started = std::cell::Cell::new(None);
        let mut read = || {
            started.set(Some(std::time::Instant::now()));
            if let Some(observer) = &self.inner.on_compile {
                observer(&CompileProgress::Started {
                    plugin: plugin.to_string(),
                    bytes: size as u64,
                });
            }
            match bytes.take() {
                Some(bytes) => Ok(bytes),
                // The digest was remembered, the compiled code was not in the cache: read the
                // same open file now, and compile it only if it still has that digest.
                None => {
                    let bytes = read_all(file, max)?;
                    if sha256_hex(&bytes) != *sha256 {
                        return Err(std::io::Error::other(
                            "the component changed while it was being loaded; load again",
                        ));
                    }
                    Ok(bytes)
                }
            }
        };
        // Mapped ahead ([`Host::load_ahead`]): for this host's first engine only.
        if wasmtime::Engine::same(engine, &self.inner.engines.engine)
            && let Some(component) = self.inner.ahead.take(sha256)
        {
            return Ok(component);
        }
        let compiled = match &self.inner.cache {
            Some(cache) => cache.load(engine, sha256, read, || {
                if let Some(observer) = &self.inner.on_compile {
                    observer(&CompileProgress::Waiting {
                        plugin: plugin.to_string(),
                    });
                }
            }),
            None => read()
                .map_err(wasmtime::Error::from)
                .and_then(|bytes| Component::from_binary(engine, &bytes)),
        };
        if let (Some(observer), Some(at)) = (&self.inner.on_compile, started.get()) {
            observer(&CompileProgress::Finished {
                plugin: plugin.to_string(),
                bytes: size as u64,
                took: at.elapsed(),
                ok: compiled.is_ok(),
            });
        }
        compiled
    }
}
