//! The plugin's memory allocator (feature `fast-alloc`, on by default): small blocks come
//! from a free list per size class, everything else from the system allocator.
//!
//! A hook call is short and allocates little: the call's strings (the canonical ABI asks the
//! plugin to allocate each one it is handed), a parsed argument or two, an answer. With
//! wasm32's `dlmalloc` each of those costs hundreds of metered instructions to allocate and
//! to free: about a tenth of a minimal guard's whole call went to its three strings'. Here a
//! block of up to [`MAX_SMALL`] bytes is one of nine power-of-two classes: allocating pops
//! the class's free list (or cuts a block from the current chunk), freeing pushes onto it —
//! no header, no search, no coalescing, as Rust hands `dealloc` the block's layout. Freed
//! small blocks are kept for their class, so a long-lived (`per-session`) instance holds at
//! most its peak of each class; larger blocks go back to the system allocator.
//!
//! A plugin with an allocator of its own turns the feature off:
//! `palisade-sdk = { version = "…", default-features = false }`.
#![allow(
    unsafe_code,
    reason = "an allocator: each block's safety argument is beside it"
)]

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// The smallest class: a freed block holds the free list's link, and 16 bytes keep every
/// block aligned for any type of wasm32's (and for `u128`).
const MIN_BLOCK: usize = 16;
/// The largest block the classes serve.
const MAX_SMALL: usize = 4096;
/// How many classes: 16, 32, ... [`MAX_SMALL`] bytes.
const CLASSES: usize = (MAX_SMALL / MIN_BLOCK).trailing_zeros() as usize + 1;
/// What the classes first take from the system allocator: an instance that allocates little
/// takes little. Each later chunk is twice the one before, up to [`MAX_CHUNK`], and at least
/// a block.
const FIRST_CHUNK: usize = 512;
/// The largest chunk taken at a time.
const MAX_CHUNK: usize = 16 << 10;

/// Size classes over `backing` (the system allocator in a plugin; anything in a test).
pub(crate) struct SizeClasses<B> {
    backing: B,
    state: UnsafeCell<State>,
}

struct State {
    /// Each class's freed blocks, linked through their first word.
    free: [*mut u8; CLASSES],
    /// The current chunk's unused part: `next..end`.
    next: *mut u8,
    end: *mut u8,
    /// The size of the next chunk (0 before the first).
    chunk: usize,
}

/// The class of `layout`'s blocks, if the classes serve it.
fn class(layout: Layout) -> Option<usize> {
    if layout.size() > MAX_SMALL || layout.align() > MIN_BLOCK {
        return None;
    }
    let block = layout.size().max(MIN_BLOCK).next_power_of_two();
    Some((block / MIN_BLOCK).trailing_zeros() as usize)
}

impl<B> SizeClasses<B> {
    pub(crate) const fn new(backing: B) -> Self {
        SizeClasses {
            backing,
            state: UnsafeCell::new(State {
                free: [ptr::null_mut(); CLASSES],
                next: ptr::null_mut(),
                end: ptr::null_mut(),
                chunk: 0,
            }),
        }
    }
}

// SAFETY: a plugin is single-threaded (wasm32 without the `atomics` feature has no threads),
// so the state is never touched by two threads at once.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl<B: Sync> Sync for SizeClasses<B> {}

// SAFETY (for the whole impl): blocks of one class are `MIN_BLOCK << class` bytes, cut one
// after another from chunks aligned to `MIN_BLOCK`, and every block and chunk size is a
// multiple of `MIN_BLOCK`: so every block is aligned to `MIN_BLOCK` (the largest alignment
// the classes serve) and holds its layout's size. A block
// is on at most one free list, and only once it was freed; `dealloc` and `realloc` receive
// the layout the block was allocated with (GlobalAlloc's contract), so `class` sends a block
// back where it came from: a class's block to its class, the backing's to the backing.
unsafe impl<B: GlobalAlloc> GlobalAlloc for SizeClasses<B> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class(layout) else {
            return unsafe { self.backing.alloc(layout) };
        };
        // SAFETY: single-threaded (see `Sync`), and no reference to the state outlives
        // this call.
        let state = unsafe { &mut *self.state.get() };
        let head = state.free[class];
        if !head.is_null() {
            // SAFETY: a freed block of this class, whose first word links the next one.
            state.free[class] = unsafe { head.cast::<*mut u8>().read() };
            return head;
        }
        let block = MIN_BLOCK << class;
        if (state.end as usize) - (state.next as usize) < block {
            // The rest of the chunk (smaller than this block) is left unused.
            let size = state.chunk.max(FIRST_CHUNK).max(block);
            // SAFETY: a non-zero size (at most `MAX_CHUNK`) and a valid alignment.
            let chunk = unsafe {
                self.backing
                    .alloc(Layout::from_size_align_unchecked(size, MIN_BLOCK))
            };
            if chunk.is_null() {
                return ptr::null_mut();
            }
            state.next = chunk;
            // SAFETY: the end of the chunk just allocated.
            state.end = unsafe { chunk.add(size) };
            state.chunk = (size * 2).min(MAX_CHUNK);
        }
        let taken = state.next;
        // SAFETY: `block` bytes remain in the chunk (checked above).
        state.next = unsafe { taken.add(block) };
        taken
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(class) = class(layout) else {
            return unsafe { self.backing.dealloc(block, layout) };
        };
        // SAFETY: single-threaded (see `Sync`).
        let state = unsafe { &mut *self.state.get() };
        // SAFETY: a block of this class, no longer in use: its first word becomes the link.
        unsafe { block.cast::<*mut u8>().write(state.free[class]) };
        state.free[class] = block;
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller passes a valid alignment and a non-zero size that, rounded up
        // to the alignment, does not overflow (GlobalAlloc's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new_layout)) {
            // The block already fits: a string or vector grown or shrunk within its class.
            (Some(old), Some(new)) if old == new => block,
            (None, None) => unsafe { self.backing.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: as for `alloc`; both blocks hold `min(old, new)` bytes.
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    unsafe {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                }
                moved
            }
        }
    }
}

// The module is also built for its tests: the allocator is the plugin's only with the feature.
#[cfg(all(target_arch = "wasm32", feature = "fast-alloc"))]
#[global_allocator]
static ALLOCATOR: SizeClasses<std::alloc::System> = SizeClasses::new(std::alloc::System);

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    /// A small deterministic generator (xorshift), so a failure replays.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn classes_are_powers_of_two_up_to_max_small_and_aligned_up_to_min_block() {
        let class = |size, align| class(Layout::from_size_align(size, align).unwrap());
        assert_eq!(class(1, 1), Some(0));
        assert_eq!(class(16, 16), Some(0));
        assert_eq!(class(17, 1), Some(1));
        assert_eq!(class(MAX_SMALL, 8), Some(CLASSES - 1));
        assert_eq!(class(MAX_SMALL + 1, 1), None);
        assert_eq!(class(8, 32), None);
    }

    /// Random allocations, reallocations and frees of every size around the classes' bounds,
    /// each block filled with its own byte: no two live blocks overlap, each is aligned, and
    /// each keeps its contents through a reallocation and until it is freed.
    #[test]
    fn blocks_never_overlap_and_keep_their_contents() {
        let heap = SizeClasses::new(System);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        // (block, layout, fill byte)
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        let sizes = [
            1, 3, 15, 16, 17, 31, 33, 100, 255, 1000, 4095, 4096, 4097, 9000,
        ];
        let aligns = [1, 2, 4, 8, 16, 32];
        for step in 0..20_000u32 {
            let fill = (step % 251) as u8 + 1;
            match rng.below(10) {
                0..=4 => {
                    let size = sizes[rng.below(sizes.len() as u64) as usize];
                    let align = aligns[rng.below(aligns.len() as u64) as usize];
                    let layout = Layout::from_size_align(size, align).unwrap();
                    let block = unsafe { heap.alloc(layout) };
                    assert!(!block.is_null());
                    assert_eq!(block as usize % align, 0, "{layout:?} misaligned");
                    unsafe { block.write_bytes(fill, size) };
                    live.push((block, layout, fill));
                }
                5..=6 if !live.is_empty() => {
                    let i = rng.below(live.len() as u64) as usize;
                    let (block, layout, old_fill) = live[i];
                    let new_size = sizes[rng.below(sizes.len() as u64) as usize];
                    let moved = unsafe { heap.realloc(block, layout, new_size) };
                    assert!(!moved.is_null());
                    let kept = layout.size().min(new_size);
                    let bytes = unsafe { std::slice::from_raw_parts(moved, kept) };
                    assert!(
                        bytes.iter().all(|&b| b == old_fill),
                        "realloc lost contents"
                    );
                    let layout = Layout::from_size_align(new_size, layout.align()).unwrap();
                    unsafe { moved.write_bytes(fill, new_size) };
                    live[i] = (moved, layout, fill);
                }
                _ if !live.is_empty() => {
                    let (block, layout, fill) =
                        live.swap_remove(rng.below(live.len() as u64) as usize);
                    let bytes = unsafe { std::slice::from_raw_parts(block, layout.size()) };
                    assert!(bytes.iter().all(|&b| b == fill), "a block was overwritten");
                    unsafe { heap.dealloc(block, layout) };
                }
                _ => {}
            }
            if step % 1000 == 0 {
                let mut spans: Vec<(usize, usize)> = live
                    .iter()
                    .map(|(b, l, _)| (*b as usize, *b as usize + l.size()))
                    .collect();
                spans.sort();
                assert!(
                    spans.windows(2).all(|w| w[0].1 <= w[1].0),
                    "live blocks overlap"
                );
            }
        }
        for (block, layout, fill) in live {
            let bytes = unsafe { std::slice::from_raw_parts(block, layout.size()) };
            assert!(bytes.iter().all(|&b| b == fill), "a block was overwritten");
            unsafe { heap.dealloc(block, layout) };
        }
    }

    #[test]
    fn a_freed_block_is_reused_for_its_class() {
        let heap = SizeClasses::new(System);
        let layout = Layout::from_size_align(24, 8).unwrap();
        let first = unsafe { heap.alloc(layout) };
        unsafe { heap.dealloc(first, layout) };
        // Another size of the same class (17..=32 bytes) takes the freed block.
        let again = unsafe { heap.alloc(Layout::from_size_align(30, 1).unwrap()) };
        assert_eq!(first, again);
        // Growing within the class keeps the block; past it, moves it.
        let same = unsafe { heap.realloc(again, Layout::from_size_align(30, 1).unwrap(), 32) };
        assert_eq!(same, again);
        let moved = unsafe { heap.realloc(same, Layout::from_size_align(32, 1).unwrap(), 33) };
        assert_ne!(moved, same);
        unsafe { heap.dealloc(moved, Layout::from_size_align(33, 1).unwrap()) };
    }
}
