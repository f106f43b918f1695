//! Memory hints for the mid-end's large, short-lived buffers, and the peak memory of the process.

/// Ask the kernel to back the buffer of `v` (its whole capacity) with transparent huge
/// pages: a buffer of tens of megabytes written once (the merge walk's token streams) then
/// takes a page fault per 2 MiB instead of per 4 KiB. Only a hint: on other systems, with
/// huge pages off, or for a buffer under 4 MiB it does nothing.
pub(crate) fn advise_huge_pages<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = v.capacity() * core::mem::size_of::<T>();
        if bytes < 2 * HUGE {
            return;
        }
        let start = v.as_ptr() as usize;
        let a = start.next_multiple_of(HUGE);
        let b = (start + bytes) & !(HUGE - 1);
        if b > a {
            // SAFETY: `a..b` lies inside the vector's allocation, which stays mapped; the
            // advice changes no contents, only how the kernel backs the pages.
            unsafe {
                libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// A vector with room for `n` elements, its buffer advised as [`advise_huge_pages`] says.
pub(crate) fn huge_vec<T>(n: usize) -> Vec<T> {
    let v = Vec::with_capacity(n);
    advise_huge_pages(&v);
    v
}

/// `vec![x; n]`, its buffer advised as [`advise_huge_pages`] says before it is written.
pub(crate) fn huge_vec_of<T: Clone>(n: usize, x: T) -> Vec<T> {
    let mut v = huge_vec(n);
    v.resize(n, x);
    v
}

/// The peak resident memory of this process so far, in KiB (`VmHWM`), where the system
/// tells it (Linux).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line["VmHWM:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
