//! The C allocator's live heap, read at scrape time for the
//! `ferrolb_heap_live_bytes` gauge ([`crate::metrics`]).
//!
//! `VmRSS` alone cannot tell a leak from malloc settling (pages it keeps,
//! free space at the top of an arena); the bytes the allocator has handed
//! out and not had back can. It is a libc call, so it lives in the OS glue
//! with the other FFI (this module is why `unsafe` is allowed here, as in
//! the socket modules).

#![allow(unsafe_code)]

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

#[cfg(all(test, target_env = "gnu"))]
mod tests {
    use super::live_bytes;

    /// An allocation the size of many pages shows in the reading, and its
    /// release too. The unit tests share the process (and its allocator)
    /// with other tests on other threads, so the check allows them half
    /// of the block either way.
    #[test]
    fn live_bytes_follow_an_allocation() {
        const SIZE: usize = 64 << 20;
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
}
