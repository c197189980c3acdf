//! The plugin's memory allocator (feature `fast-alloc`, on by default): small blocks come
//! from a free list per size class, everything else from the system allocator.
//!
//! A hook call is short and allocates little: the call's strings (the canonical ABI asks the
//! plugin to allocate each one it is handed), a parsed argument or two, an answer. With
//! wasm32's `dlmalloc` each of those costs hundreds of metered instructions to allocate and
//! to free: about a tenth of a minimal guard's whole call went to its three strings'. Here a
//! block of up to [`MAX_SMALL`] bytes is one of nine power-of-two classes: allocating pops
//! the class's free list (or cuts a block from its region), freeing pushes onto it —
//! no header, no search, no coalescing, as Rust hands `dealloc` the block's layout. Freed
//! small blocks are kept for their class, so a long-lived (`per-session`) instance holds at
//! most its peak of each class; larger blocks go back to the system allocator.
//!
//! Not every block a plugin frees was allocated here, nor every block it hands on freed here:
//! wasi-libc (which Rust's standard library calls for the environment, among others) frees
//! with `free()` what the canonical ABI allocated for an import's result, and Rust code frees
//! through this allocator what an import returned it. So the canonical ABI allocates for
//! imports from the system allocator (the module's `cabi_import_realloc`, which the component
//! linker uses for every import's results), and this allocator cuts its classes' blocks from
//! at most [`REGIONS`] regions it took from the system allocator: a block outside them, or a
//! block too large for the classes, is the system allocator's, and goes back to it. (With the
//! classes handing out import results, wasi-libc freed one of their blocks and corrupted its
//! heap: `std::env::var` trapped with an out-of-bounds access on rustc 1.97.)
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
/// takes little (a larger first region grows a fresh instance's memory: 64 KiB made a fresh
/// minimal guard 9.5 → 15 µs). Each later region is twice the one before, up to
/// [`MAX_REGION`], and at least a block.
const FIRST_REGION: usize = 512;
/// The largest region taken at a time.
const MAX_REGION: usize = 16 << 10;
/// How many regions the classes take (~190 KiB in all); past them, small blocks come from the
/// system allocator too. Few, as freeing a block looks for it among them.
const REGIONS: usize = 16;

/// Size classes over `backing` (the system allocator in a plugin; anything in a test).
pub(crate) struct SizeClasses<B> {
    backing: B,
    state: UnsafeCell<State>,
}

struct State {
    /// Each class's freed blocks, linked through their first word.
    free: [*mut u8; CLASSES],
    /// The current region's part not cut yet: `next..end`.
    next: *mut u8,
    end: *mut u8,
    /// The regions taken (`start..end`), the first `taken` of them.
    regions: [(usize, usize); REGIONS],
    taken: usize,
}

impl State {
    /// Whether `block` was cut from one of the regions (the newest first: most blocks are).
    fn owns(&self, block: *mut u8) -> bool {
        let at = block as usize;
        self.regions[..self.taken]
            .iter()
            .rev()
            .any(|&(start, end)| (start..end).contains(&at))
    }
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
                regions: [(0, 0); REGIONS],
                taken: 0,
            }),
        }
    }
}

// SAFETY: a plugin is single-threaded (wasm32 without the `atomics` feature has no threads),
// so the state is never touched by two threads at once.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl<B: Sync> Sync for SizeClasses<B> {}

// SAFETY (for the whole impl): blocks of one class are `MIN_BLOCK << class` bytes, cut one
// after another from the regions, aligned to `MIN_BLOCK`, and every block size and the
// regions' are multiples of `MIN_BLOCK`: so every block is aligned to `MIN_BLOCK` (the largest
// alignment the classes serve) and holds its layout's size. A block is on at most one free
// list, and only once it was freed; `dealloc` and `realloc` receive the layout the block was
// allocated with (GlobalAlloc's contract), and a block lies in a region exactly when it was
// cut from it: so a block goes back where it came from, a class's block to its class (by
// `class`), any other to the backing.
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
            // The rest of the region (smaller than this block) is left unused.
            if state.taken == REGIONS {
                // Out of regions: the system allocator's block, which `dealloc` sends back
                // to it as it lies outside them.
                return unsafe { self.backing.alloc(layout) };
            }
            let size = (FIRST_REGION << state.taken).min(MAX_REGION).max(block);
            // SAFETY: a non-zero size (at most `MAX_REGION`) and a valid alignment.
            let region = unsafe {
                self.backing
                    .alloc(Layout::from_size_align_unchecked(size, MIN_BLOCK))
            };
            if region.is_null() {
                return ptr::null_mut();
            }
            state.next = region;
            // SAFETY: the end of the region just allocated.
            state.end = unsafe { region.add(size) };
            state.regions[state.taken] = (region as usize, state.end as usize);
            state.taken += 1;
        }
        let taken = state.next;
        // SAFETY: `block` bytes remain in the region (checked above).
        state.next = unsafe { taken.add(block) };
        taken
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(class) = class(layout) else {
            return unsafe { self.backing.dealloc(block, layout) };
        };
        // SAFETY: single-threaded (see `Sync`).
        let state = unsafe { &mut *self.state.get() };
        if !state.owns(block) {
            return unsafe { self.backing.dealloc(block, layout) };
        }
        // SAFETY: a block of this class, no longer in use: its first word becomes the link.
        unsafe { block.cast::<*mut u8>().write(state.free[class]) };
        state.free[class] = block;
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller passes a valid alignment and a non-zero size that, rounded up
        // to the alignment, does not overflow (GlobalAlloc's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: single-threaded (see `Sync`); the reference ends here.
        let owned = unsafe { &*self.state.get() }.owns(block);
        match (class(layout), class(new_layout)) {
            // The block already fits: a string or vector grown or shrunk within its class.
            (Some(old), Some(new)) if old == new && owned => block,
            // The system allocator's block stays its own, whatever its new size.
            _ if !owned => unsafe { self.backing.realloc(block, layout, new_size) },
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

/// The canonical ABI's allocator for what imports return (the component linker uses a
/// module's `cabi_import_realloc` for every import, `cabi_realloc` for the exports'
/// arguments): the system allocator's blocks, as wasi-libc frees its imports' results with
/// `free()`. Rust code that frees one goes through [`SizeClasses`], which hands it back to the
/// system allocator (it lies outside the region).
///
/// # Safety
///
/// The canonical ABI's contract: `old` is null with `old_size` 0, or a block this function
/// returned with that size and `align`; `align` is a power of two.
#[cfg(all(target_arch = "wasm32", feature = "fast-alloc"))]
#[unsafe(export_name = "cabi_import_realloc")]
unsafe extern "C" fn cabi_import_realloc(
    old: *mut u8,
    old_size: usize,
    align: usize,
    new_size: usize,
) -> *mut u8 {
    use std::alloc::System;
    if new_size == 0 {
        // Nothing to hold: any aligned non-null address will do (the canonical ABI never
        // frees through this function).
        return align as *mut u8;
    }
    // SAFETY: the caller's contract (above); sizes are non-zero.
    let block = unsafe {
        if old_size == 0 {
            System.alloc(Layout::from_size_align_unchecked(new_size, align))
        } else {
            System.realloc(
                old,
                Layout::from_size_align_unchecked(old_size, align),
                new_size,
            )
        }
    };
    if block.is_null() {
        std::process::abort();
    }
    block
}

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

    /// The system allocator, counting the blocks it holds.
    struct Counting(std::cell::Cell<isize>);

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.0.set(self.0.get() + 1);
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            self.0.set(self.0.get() - 1);
            unsafe { System.dealloc(block, layout) }
        }
    }

    /// A small block the classes did not cut (as an import's result, allocated by
    /// `cabi_import_realloc`) goes back to the system allocator when freed or grown, never
    /// onto a free list; past the region, small blocks are the system allocator's too.
    #[test]
    fn blocks_from_outside_the_region_go_back_to_the_system_allocator() {
        let heap = SizeClasses::new(Counting(std::cell::Cell::new(0)));
        let small = Layout::from_size_align(24, 1).unwrap();
        let ours = unsafe { heap.alloc(small) };
        assert_eq!(heap.backing.0.get(), 1, "the first region");
        let foreign = unsafe { heap.backing.alloc(small) };
        assert_eq!(heap.backing.0.get(), 2);
        // Grown within its class: the system allocator's still.
        let foreign = unsafe { heap.realloc(foreign, small, 30) };
        unsafe { heap.dealloc(foreign, Layout::from_size_align(30, 1).unwrap()) };
        assert_eq!(heap.backing.0.get(), 1, "freed to the system allocator");
        unsafe { heap.dealloc(ours, small) };
        assert_eq!(
            heap.backing.0.get(),
            1,
            "a class's block stays with its class"
        );
        // The largest class until every region is taken, then one more: the system
        // allocator's block.
        let big = Layout::from_size_align(MAX_SMALL, 8).unwrap();
        let mut blocks = Vec::new();
        while heap.backing.0.get() < REGIONS as isize {
            blocks.push(unsafe { heap.alloc(big) });
        }
        let state = unsafe { &*heap.state.get() };
        let left = (state.end as usize - state.next as usize) / MAX_SMALL;
        blocks.extend((0..left).map(|_| unsafe { heap.alloc(big) }));
        assert_eq!(heap.backing.0.get(), REGIONS as isize, "the regions");
        blocks.push(unsafe { heap.alloc(big) });
        assert_eq!(
            heap.backing.0.get(),
            REGIONS as isize + 1,
            "past the regions"
        );
        for block in blocks {
            unsafe { heap.dealloc(block, big) };
        }
        assert_eq!(
            heap.backing.0.get(),
            REGIONS as isize,
            "only the regions are left"
        );
    }
}
