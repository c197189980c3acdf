//! What one instance may hold and do, counted per call or per instance: the sandbox's caps,
//! and the resource limiter that enforces those on memories, tables and instances.

/// Most log lines one invocation may write; the rest are dropped.
pub const MAX_LOG_LINES_PER_CALL: u32 = 64;
/// Longest log line kept, in bytes; longer ones are cut.
pub const MAX_LOG_LINE_BYTES: usize = 4 * 1024;
/// Most bytes of a guest's stdout (and, separately, stderr) kept per call; the rest is dropped.
pub const MAX_OUTPUT_BYTES_PER_CALL: usize = 4 * 1024;
/// Most table elements an instance may have, across all its tables.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Most linear memories an instance may create (a component is several core instances; each
/// may have memories). Their total size is what `memory_mb` caps.
pub const MAX_MEMORIES: usize = 16;
/// Most tables an instance may create.
pub const MAX_TABLES: usize = 128;
/// Most core instances a component may create (an interpreter built into a Python or
/// JavaScript component is a few dozen).
pub const MAX_CORE_INSTANCES: usize = 128;
/// Most WASI resources (streams, pollables, ...) an instance may hold at once: each lives in
/// host memory, outside the memory cap. Past it, the WASI call that would add one traps.
pub const MAX_WASI_RESOURCES: usize = 4096;
/// Most state calls one invocation may make; further calls are refused (`too-many-calls`).
pub const MAX_STATE_CALLS_PER_CALL: u32 = 256;
/// The epoch ticks a direct call may see before its plugin's calls go on a fiber: the first
/// may come at once after the call starts, the second a tick later, so it ran at least one
/// tick ([`crate::EPOCH_TICK`], 1 ms).
pub const DIRECT_TICKS: u32 = 2;
/// Most `next()` calls one `tool-execute` invocation may make; further calls return an
/// error outcome without running the tool.
pub const MAX_NEXT_CALLS: u32 = 16;

/// Caps what an instance may hold, across everything it creates: the total size of its
/// linear memories (`memory_mb`), the total elements of its tables, and how many memories,
/// tables and core instances it has. Remembers whether a cap was hit, so that the trap a
/// guest raises after a failed allocation is classified as a memory-limit failure.
#[derive(Debug, Default)]
pub(crate) struct Limiter {
    /// The cap on the total of all memories, in bytes.
    pub memory_bytes: usize,
    /// The total of all memories now, in bytes.
    memory_total: usize,
    /// The total elements of all tables now.
    table_total: usize,
    pub hit: bool,
}

impl Limiter {
    /// Admits growing one memory (or table) from `current` to `desired` when the new total
    /// stays within `cap`.
    fn admit(total: &mut usize, current: usize, desired: usize, cap: usize) -> bool {
        let grown = desired.saturating_sub(current);
        match total.checked_add(grown) {
            Some(new) if new <= cap => {
                *total = new;
                true
            }
            _ => false,
        }
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Called for a memory's creation too (`current` 0), so the total counts every memory.
        let ok = Limiter::admit(&mut self.memory_total, current, desired, self.memory_bytes);
        self.hit |= !ok;
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = Limiter::admit(&mut self.table_total, current, desired, MAX_TABLE_ELEMENTS);
        self.hit |= !ok;
        Ok(ok)
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn the_memory_cap_is_the_total_of_every_memory() {
        let mut limiter = Limiter {
            memory_bytes: 8 * MIB,
            ..Limiter::default()
        };
        // Two memories created at 5 MiB each: the second takes the total past 8 MiB.
        assert!(limiter.memory_growing(0, 5 * MIB, None).unwrap());
        assert!(!limiter.memory_growing(0, 5 * MIB, None).unwrap());
        assert!(limiter.hit);
        // Growing the first within the cap still works; past it does not.
        assert!(limiter.memory_growing(5 * MIB, 8 * MIB, None).unwrap());
        assert!(!limiter.memory_growing(8 * MIB, 9 * MIB, None).unwrap());
    }

    #[test]
    fn table_elements_count_across_tables_and_counts_are_bounded() {
        let mut limiter = Limiter::default();
        assert!(limiter.table_growing(0, MAX_TABLE_ELEMENTS, None).unwrap());
        assert!(!limiter.table_growing(0, 1, None).unwrap());
        assert_eq!(limiter.memories(), MAX_MEMORIES);
        assert_eq!(limiter.tables(), MAX_TABLES);
        assert_eq!(limiter.instances(), MAX_CORE_INSTANCES);
        // Below wasmtime's defaults (10,000 each), which bound nothing a plugin would notice.
        const { assert!(MAX_MEMORIES < 10_000 && MAX_TABLES < 10_000 && MAX_CORE_INSTANCES < 10_000) };
    }
}
