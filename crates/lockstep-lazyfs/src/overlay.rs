//! What one file holds in memory that its backing file does not: the
//! pages written since the last sync and a size change. Pure logic: the
//! backing file is reached through a `base` reader, so the tests drive
//! it against a plain vector.

use std::collections::BTreeMap;
use std::io;
use std::time::Instant;

/// The page of the model: a cut keeps or drops whole pages, and a torn
/// write keeps a prefix of one.
pub const PAGE: usize = 4096;

/// Reads the backing file's bytes at an offset into the buffer, zeros
/// past its end.
pub type Base<'a> = dyn FnMut(u64, &mut [u8]) -> io::Result<()> + 'a;

/// `[offset, offset + len)` page by page: (page index, offset within
/// the page, bytes before this piece, the piece's length).
fn spans(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let at = offset + done as u64;
        let within = (at % PAGE as u64) as usize;
        let n = (PAGE - within).min(len - done);
        let piece = (at / PAGE as u64, within, done, n);
        done += n;
        Some(piece)
    })
}

#[derive(Debug)]
pub struct Overlay {
    pages: BTreeMap<u64, Box<[u8; PAGE]>>,
    /// The size the file has for its readers.
    size: u64,
    /// A shrink not yet written back: the backing file's bytes from here
    /// on are gone for readers (zeros if the file grows again).
    truncated_to: Option<u64>,
    /// When the oldest unsynced change was made: writeback takes files
    /// whose changes are older than its age, as the kernel's does.
    pub dirtied_at: Instant,
    /// The page written last, for a torn write at a cut.
    last_page: Option<u64>,
}

impl Overlay {
    pub fn new(backing_size: u64, now: Instant) -> Overlay {
        Overlay {
            pages: BTreeMap::new(),
            size: backing_size,
            truncated_to: None,
            dirtied_at: now,
            last_page: None,
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Memory held, for the bound on unsynced data.
    pub fn bytes(&self) -> usize {
        self.pages.len() * PAGE
    }

    /// The backing bytes as a reader sees them: zeros from a pending
    /// truncation on.
    fn base_page(&self, index: u64, base: &mut Base<'_>) -> io::Result<Box<[u8; PAGE]>> {
        let mut page = Box::new([0u8; PAGE]);
        let start = index * PAGE as u64;
        base(start, &mut page[..])?;
        if let Some(t) = self.truncated_to {
            if t < start + PAGE as u64 {
                let from = t.saturating_sub(start) as usize;
                page[from..].fill(0);
            }
        }
        Ok(page)
    }

    pub fn write(&mut self, offset: u64, data: &[u8], base: &mut Base<'_>) -> io::Result<()> {
        for (index, within, done, n) in spans(offset, data.len()) {
            if !self.pages.contains_key(&index) {
                let page = self.base_page(index, base)?;
                self.pages.insert(index, page);
            }
            let page = self.pages.get_mut(&index).expect("inserted above");
            page[within..within + n].copy_from_slice(&data[done..done + n]);
            self.last_page = Some(index);
        }
        self.size = self.size.max(offset + data.len() as u64);
        Ok(())
    }

    /// Sets the size: a shrink drops the pages past it and zeros the tail
    /// of the page it ends in.
    pub fn truncate(&mut self, size: u64) {
        if size < self.size {
            let keep = size.div_ceil(PAGE as u64);
            self.pages.retain(|&i, _| i < keep);
            if let Some(page) = self.pages.get_mut(&(size / PAGE as u64)) {
                page[(size % PAGE as u64) as usize..].fill(0);
            }
            self.truncated_to = Some(self.truncated_to.map_or(size, |t| t.min(size)));
            if self.last_page.is_some_and(|i| i >= keep) {
                self.last_page = None;
            }
        }
        self.size = size;
    }

    /// `len` bytes at `offset`, fewer at the end of the file.
    pub fn read(&self, offset: u64, len: usize, base: &mut Base<'_>) -> io::Result<Vec<u8>> {
        let end = self.size.min(offset.saturating_add(len as u64));
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut out = vec![0u8; (end - offset) as usize];
        let len = out.len();
        for (index, within, done, n) in spans(offset, len) {
            match self.pages.get(&index) {
                Some(page) => out[done..done + n].copy_from_slice(&page[within..within + n]),
                None => {
                    let page = self.base_page(index, base)?;
                    out[done..done + n].copy_from_slice(&page[within..within + n]);
                }
            }
        }
        Ok(out)
    }

    /// Puts the changes in the backing file, through `write_at` and
    /// `set_len`; the caller syncs it when the writeback is an fsync.
    pub fn write_back(
        &self,
        write_at: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>,
        set_len: &mut dyn FnMut(u64) -> io::Result<()>,
    ) -> io::Result<()> {
        if let Some(t) = self.truncated_to {
            set_len(t)?;
        }
        for (&index, page) in &self.pages {
            let start = index * PAGE as u64;
            let n = (self.size.saturating_sub(start)).min(PAGE as u64) as usize;
            if n > 0 {
                write_at(start, &page[..n])?;
            }
        }
        set_len(self.size)
    }

    /// The page written last and where it starts, for a torn write.
    pub fn last_page(&self) -> Option<(u64, &[u8])> {
        let index = self.last_page?;
        let page = self.pages.get(&index)?;
        let start = index * PAGE as u64;
        let n = (self.size.saturating_sub(start)).min(PAGE as u64) as usize;
        Some((start, &page[..n]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Write(u64, Vec<u8>),
        Truncate(u64),
        WriteBack,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..20_000, proptest::collection::vec(any::<u8>(), 1..6000))
                .prop_map(|(o, d)| Op::Write(o, d)),
            1 => (0u64..24_000).prop_map(Op::Truncate),
            1 => Just(Op::WriteBack),
        ]
    }

    fn read_vec(v: &[u8], off: u64, buf: &mut [u8]) {
        buf.fill(0);
        let off = off as usize;
        if off < v.len() {
            let n = (v.len() - off).min(buf.len());
            buf[..n].copy_from_slice(&v[off..off + n]);
        }
    }

    fn model_write(m: &mut Vec<u8>, off: u64, data: &[u8]) {
        let end = off as usize + data.len();
        if m.len() < end {
            m.resize(end, 0);
        }
        m[off as usize..end].copy_from_slice(data);
    }

    proptest! {
        /// Readers see exactly what a plain file would hold, before and
        /// after writeback; the backing file changes only at writeback,
        /// and then holds the same.
        #[test]
        fn reads_as_a_plain_file_and_writes_back_the_same(
            initial in proptest::collection::vec(any::<u8>(), 0..9000),
            ops in proptest::collection::vec(op(), 1..25),
        ) {
            let mut backing = initial.clone();
            let mut model = initial.clone();
            let mut ov = Overlay::new(backing.len() as u64, Instant::now());
            for op in ops {
                match op {
                    Op::Write(o, d) => {
                        let b = backing.clone();
                        ov.write(o, &d, &mut |off, buf| { read_vec(&b, off, buf); Ok(()) }).unwrap();
                        model_write(&mut model, o, &d);
                    }
                    Op::Truncate(s) => {
                        ov.truncate(s);
                        model.resize(s as usize, 0);
                    }
                    Op::WriteBack => {
                        let mut out = backing.clone();
                        let mut len = out.len();
                        {
                            let out_cell = std::cell::RefCell::new(&mut out);
                            ov.write_back(
                                &mut |off, data| { let mut o = out_cell.borrow_mut(); model_write(&mut o, off, data); Ok(()) },
                                &mut |n| { out_cell.borrow_mut().resize(n as usize, 0); len = n as usize; Ok(()) },
                            ).unwrap();
                        }
                        prop_assert_eq!(len, model.len());
                        prop_assert_eq!(&out, &model);
                        backing = out;
                        ov = Overlay::new(backing.len() as u64, Instant::now());
                    }
                }
                prop_assert_eq!(ov.size(), model.len() as u64);
                let b = backing.clone();
                let got = ov.read(0, model.len() + 100, &mut |off, buf| { read_vec(&b, off, buf); Ok(()) }).unwrap();
                prop_assert_eq!(&got, &model);
            }
        }
    }

    #[test]
    fn the_last_page_is_the_one_written_last() {
        let mut ov = Overlay::new(0, Instant::now());
        let mut zero = |_: u64, b: &mut [u8]| {
            b.fill(0);
            Ok(())
        };
        ov.write(10_000, b"abc", &mut zero).unwrap();
        ov.write(5, b"xy", &mut zero).unwrap();
        let (start, bytes) = ov.last_page().unwrap();
        assert_eq!(start, 0);
        assert_eq!(&bytes[5..7], b"xy");
        assert_eq!(bytes.len(), PAGE);
        ov.truncate(3);
        assert_eq!(ov.last_page().unwrap().1.len(), 3);
    }
}
