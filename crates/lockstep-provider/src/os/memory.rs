//! Big buffers the provider fills at once.
//!
//! A 300 MB writeset is joined into one buffer for the server's applier:
//! 75 000 fresh 4 KiB pages, each a page fault (and on a virtual machine
//! often an exit to the host). Asking the kernel for transparent huge
//! pages there (`MADV_HUGEPAGE`; the default `madvise` mode of
//! `/sys/kernel/mm/transparent_hugepage/enabled` grants them only to
//! those who ask) makes that about 150 faults.

use lockstep_core::group::payload::Payload;

/// Below this, a buffer is not worth the advice.
const HUGE_FROM: usize = 8 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// `data` in one buffer: borrowed when it is one chunk already.
pub(crate) fn contiguous(data: &Payload) -> std::borrow::Cow<'_, [u8]> {
    if data.chunk_count() <= 1 || data.len() < HUGE_FROM {
        return data.contiguous();
    }
    let mut v: Vec<u8> = Vec::with_capacity(data.len());
    advise_huge(&v);
    data.append_to(&mut v);
    std::borrow::Cow::Owned(v)
}

/// Advice only: the buffer works the same whatever the kernel answers.
fn advise_huge(v: &Vec<u8>) {
    let start = v.as_ptr() as usize;
    let end = start + v.capacity();
    let from = start.next_multiple_of(HUGE_PAGE);
    if end <= from + HUGE_PAGE {
        return;
    }
    let len = (end - from) / HUGE_PAGE * HUGE_PAGE;
    // SAFETY: `from..from + len` lies inside the allocation `v` owns (its
    // capacity), aligned as madvise requires; MADV_HUGEPAGE changes how
    // the kernel backs those pages, never their contents or validity.
    unsafe {
        libc::madvise(from as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn a_big_payload_is_joined_whole() {
        let parts: Vec<Bytes> = (0..40u8).map(|i| Bytes::from(vec![i; 256 << 10])).collect();
        let p = Payload::from_chunks(parts);
        let joined = contiguous(&p);
        assert_eq!(joined.len(), 40 * (256 << 10));
        assert!(joined
            .chunks(256 << 10)
            .enumerate()
            .all(|(i, c)| c.iter().all(|b| *b == i as u8)));
        let small = Payload::from(vec![1, 2, 3]);
        assert!(matches!(contiguous(&small), std::borrow::Cow::Borrowed(_)));
    }
}
