//! The C allocator's live heap, read at scrape time for the
//! `ferrolb_heap_live_bytes` gauge ([`crate::metrics`]), and the trim that
//! gives its free pages back to the kernel ([`trim`]).
//!
//! `VmRSS` alone cannot tell a leak from malloc settling (pages it keeps,
//! free space at the top of an arena); the bytes the allocator has handed
//! out and not had back can. It is a libc call, so it lives in the OS glue
//! with the other FFI (this module is why `unsafe` is allowed here, as in
//! the socket modules).

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::metrics::HeapTrims;

/// Bytes in use in glibc's malloc: `uordblks` (allocated from the arenas)
/// plus `hblkhd` (chunks mapped on their own), per `mallinfo2(3)`, summed
/// over every arena. `None` where the allocator is not glibc's.
#[cfg(target_env = "gnu")]
pub(crate) fn live_bytes() -> Option<u64> {
    // SAFETY: mallinfo2 takes no argument and returns a plain struct by
    // value; it only reads the arenas' statistics, under their locks
    // (glibc >= 2.33; the images and the build hosts are 2.36).
    let m = unsafe { libc::mallinfo2() };
    u64::try_from(m.uordblks.saturating_add(m.hblkhd)).ok()
}

/// Not glibc: no reading.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn live_bytes() -> Option<u64> {
    None
}

/// The size from which an allocation is a mapping of its own
/// (`M_MMAP_THRESHOLD`), given back to the kernel when it is freed: glibc's
/// starting value, 128 KiB.
pub(crate) const MAP_FROM: usize = 128 << 10;

/// Keeps large allocations in mappings of their own (`MAP_FROM`, 128 KiB), which
/// free returns to the kernel at once. By default glibc raises the
/// threshold to the size of each mapped chunk freed (up to 32 MiB), so the
/// next ones of that size come from the heap, whose pages stay resident
/// after the free until a trim: at 50,000 Services each `/metrics` scrape
/// (a 5.5 MB text) left about 7 MiB resident on an idle speaker, which
/// trims only after a change (BENCHMARKS.md, "A scrape's text, mapped").
/// Setting the threshold turns that adjustment off. Called once, before
/// the runtime starts; `false` if the allocator refused (or is not
/// glibc's, where nothing is done).
pub fn map_large_allocations() -> bool {
    map_from(MAP_FROM)
}

#[cfg(target_env = "gnu")]
fn map_from(bytes: usize) -> bool {
    let Ok(bytes) = libc::c_int::try_from(bytes) else {
        return false;
    };
    // SAFETY: mallopt sets one of the allocator's parameters under its
    // lock; M_MMAP_THRESHOLD takes a size up to 32 MiB.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
}

#[cfg(not(target_env = "gnu"))]
fn map_from(_: usize) -> bool {
    false
}

static TRIMS: AtomicU64 = AtomicU64::new(0);
static RELEASED: AtomicU64 = AtomicU64::new(0);
static MICROS: AtomicU64 = AtomicU64::new(0);

/// Gives the allocator's free pages back to the kernel: glibc's
/// `malloc_trim(0)`, which shrinks the top of each arena and also
/// releases the whole free pages inside it (`madvise(MADV_DONTNEED)`), so
/// that the resident set follows the live heap after a burst instead of
/// keeping every page the burst touched. Counted in [`trims`]. Nothing
/// where the allocator is not glibc's (musl's returns freed memory by
/// itself).
pub(crate) fn trim() {
    let start = Instant::now();
    let released = trim_now();
    let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    TRIMS.fetch_add(1, Ordering::Relaxed);
    RELEASED.fetch_add(u64::from(released), Ordering::Relaxed);
    MICROS.fetch_add(micros, Ordering::Relaxed);
    if let Some(anon) = anon_resident() {
        ANON_AFTER_TRIM.store(anon, Ordering::Relaxed);
    }
}

/// The anonymous resident memory right after the last trim (see
/// [`anon_resident`]).
static ANON_AFTER_TRIM: AtomicU64 = AtomicU64::new(0);

/// Trims ([`trim`]) when the anonymous resident memory has grown since
/// the last trim by more than [`trim_due`] allows; `true` if it trimmed. A
/// change schedules its own trim (`--heap-trim-ms`), but a burst of work
/// with no change behind it (the status writer's pass over every Service
/// after a start, a watch's re-list) frees memory whose pages would
/// otherwise stay resident until the next change (BENCHMARKS.md, "The
/// heap's slack"). The check reads `/proc/self/statm` alone: the
/// allocator's statistics (`mallinfo2`) walk every free chunk, which at
/// 50,000 Services cost more than the trim. Growth that is in use is
/// trimmed for nothing, once: a trim of a 60 MiB heap takes under a
/// millisecond.
pub(crate) fn trim_if_grown() -> bool {
    let Some(anon) = anon_resident() else {
        return false;
    };
    if !cfg!(target_env = "gnu") || !trim_due(anon, ANON_AFTER_TRIM.load(Ordering::Relaxed)) {
        return false;
    }
    trim();
    true
}

/// Whether `anon` bytes of anonymous resident memory call for a trim when
/// the last trim left `after_trim`: when it grew by more than a sixteenth
/// of that, and by more than 2 MiB.
pub(crate) fn trim_due(anon: u64, after_trim: u64) -> bool {
    const AT_LEAST: u64 = 2 << 20;
    anon.saturating_sub(after_trim) > (after_trim / 16).max(AT_LEAST)
}

/// The process's anonymous resident memory (`/proc/self/statm`: resident
/// pages less the file-backed and shared ones), in bytes.
fn anon_resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut fields = statm.split_whitespace().skip(1);
    let resident: u64 = fields.next()?.parse().ok()?;
    let shared: u64 = fields.next()?.parse().ok()?;
    resident.saturating_sub(shared).checked_mul(page_size()?)
}

/// The page size, in bytes.
fn page_size() -> Option<u64> {
    // SAFETY: sysconf reads a constant of the system.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()
}

/// The counts of [`trim`] so far; `None` where the allocator is not
/// glibc's (no trim happens).
pub(crate) fn trims() -> Option<HeapTrims> {
    cfg!(target_env = "gnu").then(|| HeapTrims {
        count: TRIMS.load(Ordering::Relaxed),
        released: RELEASED.load(Ordering::Relaxed),
        micros: MICROS.load(Ordering::Relaxed),
    })
}

#[cfg(target_env = "gnu")]
fn trim_now() -> bool {
    // SAFETY: malloc_trim takes a size and touches only the allocator's
    // own arenas, under their locks; 1 means memory was released.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(target_env = "gnu"))]
fn trim_now() -> bool {
    false
}

#[cfg(all(test, target_env = "gnu"))]
mod tests {
    use super::{live_bytes, trim, trim_due, trim_if_grown, trims};

    /// An allocation the size of many pages shows in the reading, and its
    /// release too. The unit tests share the process (and its allocator)
    /// with other tests on other threads, so the check allows them half
    /// of the block either way.
    #[test]
    fn live_bytes_follow_an_allocation() {
        const SIZE: usize = 64 << 20;
        let _alone = ALONE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = live_bytes().expect("glibc's malloc");
        let block = vec![1u8; SIZE];
        let during = live_bytes().expect("glibc's malloc");
        assert!(
            during >= before + (SIZE / 2) as u64,
            "{before} -> {during} with {SIZE} bytes more"
        );
        assert_eq!(std::hint::black_box(&block)[SIZE - 1], 1);
        drop(block);
        let after = live_bytes().expect("glibc's malloc");
        assert!(
            after + (SIZE / 2) as u64 <= during,
            "{during} -> {after} with {SIZE} bytes freed"
        );
    }

    /// With the threshold set, a large block freed and allocated again is
    /// a mapping each time (`hblkhd`, in the reading), not heap pages that
    /// stay resident; glibc's dynamic threshold would have taken the
    /// second one from the heap. Other tests' blocks come and go beside
    /// it, so the check allows them half of the block.
    #[test]
    fn large_blocks_stay_mappings_after_a_free() {
        const SIZE: usize = 16 << 20;
        let _alone = ALONE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert!(super::map_large_allocations(), "mallopt refused");
        let mapped = || {
            // SAFETY: as in `live_bytes`.
            u64::try_from(unsafe { libc::mallinfo2() }.hblkhd).unwrap()
        };
        for round in 0..2 {
            let before = mapped();
            let block = vec![1u8; SIZE];
            let during = mapped();
            assert_eq!(std::hint::black_box(&block)[SIZE - 1], 1);
            drop(block);
            assert!(
                during >= before + (SIZE / 2) as u64,
                "round {round}: mapped {before} -> {during} with a block of {SIZE}"
            );
        }
    }

    /// The unit tests share the process: the two tests that read its
    /// memory take turns.
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Freed chunks below a live one stay resident (free only shrinks an
    /// arena's top); a trim gives their whole pages back, and is counted.
    #[test]
    fn trim_gives_back_free_pages_inside_the_heap() {
        const BLOCK: usize = 16 << 10; // under the mmap threshold: an arena's
        const BLOCKS: usize = 2048; // 32 MiB
        let _alone = ALONE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: sysconf reads a constant of the system.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        // Resident pages of this process (`/proc/self/statm`, second field).
        let resident_pages = || -> u64 {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
            statm.split_whitespace().nth(1).unwrap().parse().unwrap()
        };
        let blocks: Vec<Box<[u8]>> = (0..BLOCKS)
            .map(|_| vec![1u8; BLOCK].into_boxed_slice())
            .collect();
        let guard = vec![2u8; BLOCK].into_boxed_slice(); // from the top, above them
        drop(blocks);
        let before = trims().expect("glibc's malloc");
        let resident = resident_pages();
        trim();
        let after = trims().expect("glibc's malloc");
        let freed = resident.saturating_sub(resident_pages()) * page;
        assert!(
            freed >= (BLOCK * BLOCKS / 2) as u64,
            "the trim gave back {freed} bytes of {} freed",
            BLOCK * BLOCKS
        );
        assert_eq!(after.count, before.count + 1, "{before:?} -> {after:?}");
        assert_eq!(
            after.released,
            before.released + 1,
            "{before:?} -> {after:?}"
        );
        assert!(after.micros >= before.micros, "{before:?} -> {after:?}");
        assert_eq!(std::hint::black_box(&guard)[0], 2);
    }

    /// The growth that calls for a trim: against a sixteenth of what the
    /// last trim left, and 2 MiB.
    #[test]
    fn trim_due_when_resident_memory_grew() {
        const MIB: u64 = 1 << 20;
        for (anon, after_trim, due) in [
            (0, 0, false),
            (2 * MIB, 0, false),    // 2 MiB is not more than 2 MiB
            (2 * MIB + 1, 0, true), // a small process: the 2 MiB floor
            (10 * MIB, 8 * MIB, false),
            (10 * MIB + 1, 8 * MIB, true),
            (67 * MIB, 64 * MIB, false), // 64 MiB: a sixteenth, 4 MiB
            (68 * MIB + 1, 64 * MIB, true),
            (MIB, 64 * MIB, false), // shrank since the trim
            (u64::MAX, 0, true),
        ] {
            assert_eq!(
                trim_due(anon, after_trim),
                due,
                "{anon} bytes resident, {after_trim} after the last trim"
            );
        }
    }

    /// Pages touched and freed inside the heap since the last trim: the
    /// check trims them, and right after that it does not trim again.
    #[test]
    fn grown_resident_memory_is_trimmed_once() {
        const BLOCK: usize = 16 << 10;
        const BLOCKS: usize = 2048; // 32 MiB, above a sixteenth of this process's heap
        let _alone = ALONE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        trim();
        let blocks: Vec<Box<[u8]>> = (0..BLOCKS)
            .map(|_| vec![1u8; BLOCK].into_boxed_slice())
            .collect();
        let guard = vec![2u8; BLOCK].into_boxed_slice();
        drop(blocks);
        let before = trims().expect("glibc's malloc").count;
        assert!(
            trim_if_grown(),
            "32 MiB touched and freed since the last trim"
        );
        assert!(!trim_if_grown(), "trimmed again with no growth since");
        assert_eq!(trims().expect("glibc's malloc").count, before + 1);
        assert_eq!(std::hint::black_box(&guard)[0], 2);
    }
}
