//! The writeset cache on disk (Galera's gcache, `gcache.*` options): every
//! event this node ordered, so that a joiner whose gap the group log no
//! longer covers (after a whole-cluster restart, or a long absence) can
//! catch up by IST from this node instead of taking a full SST.
//!
//! Two files in `gcache.dir`: `<gcache.name>` is appended to, and when it
//! passes half of `gcache.size` it becomes `<gcache.name>.1` (replacing the
//! older one) and a new file starts. So the cache holds between half of
//! `gcache.size` and all of it (plus one record), newest events kept.
//! Format: `lockstep_core::writeset_cache`, `docs/formats.md`.
//!
//! Invariant: the records form one gap-free run of seqnos on one history,
//! and every one of them is in this node's committed state or was ordered
//! by the group this node is a member of (final either way). An event
//! that does not extend the run (another history, a jump after an SST)
//! starts the cache over. At start, `gcache.recover=yes` keeps the run of
//! the node's history, past the node's own position too: an event the
//! group ordered is committed by definition, even if the storage engine
//! lost it in the crash (`innodb_flush_log_at_trx_commit=0`), and a node
//! that re-forms the cluster replays those events into its server first
//! (`replay`, ADR 0026); `no` starts empty.
//!
//! Writes are buffered and flushed (write(2)) by the cache's own thread
//! (`cache_writer`), once per run of batches the rounds queued; the
//! storage engine commits an event only once it is written (ADR 0032),
//! so a process crash keeps every acknowledged writeset and the cache
//! reaches the engine's position. By default they are not fsynced (as
//! Galera): after a power loss the cache may end early. With
//! `lockstep.cache_sync` each flush is fsynced before its commits are
//! acknowledged, and records overwrite zeros reserved ahead of them
//! (`RESERVE_AHEAD`), so that the fsync commits no new file size. A write
//! error disables the cache, and the commits waiting on it fail: the node
//! leaves the cluster (`cache_writer`).
//!
//! Every file operation goes through the storage seam (`storage::Fs`), so
//! the tests cut the real code at every step of appends, flushes,
//! rotations and recovery and check what a power loss leaves
//! (`a_power_loss_at_any_step_keeps_a_gap_free_run_and_every_synced_event`).

use crate::log::{info, warn};
use crate::storage::{AppendFile, Disk, Fs};
use lockstep_core::writeset_cache::{
    decode_file_header, decode_record, encode_file_header, event_digest, record_pieces,
    CachedEvent, CachedKind, Decoded, FILE_HEADER_LEN, RECORD_HEADER_LEN,
};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wsrep_abi::{Gtid, Uuid};

/// Buffer in front of the current file: one write(2) per batch of small
/// writesets.
const WRITE_BUFFER: usize = 1 << 20;

/// With `lockstep.cache_sync`, zeros written ahead of the records, so
/// that appends overwrite them and a batch's fdatasync writes its data
/// without a journal commit for a new file size (one per reservation
/// instead: 150 µs a sync became 93 here, as InnoDB's preallocated redo
/// log has it). Small, because the next fdatasync writes the zeros out
/// too; a record bigger than this extends the file itself.
const RESERVE_AHEAD: u64 = 1 << 20;

/// The newest event and the newest writeset taken, as (seqno,
/// `event_digest`): the fork check points.
#[derive(Debug, Clone, Copy, Default)]
struct Newest {
    event: Option<(i64, u32)>,
    writeset: Option<(i64, u32)>,
}

impl Newest {
    fn take(&mut self, ev: &CachedEvent) {
        let digest = event_digest(ev);
        self.event = Some((ev.seqno, digest));
        if let CachedKind::Writeset { .. } = ev.kind {
            self.writeset = Some((ev.seqno, digest));
        }
    }
}

/// Seqnos held by one file (first, last), on `history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    history: [u8; 16],
    first: i64,
    last: i64,
}

impl Run {
    /// Ends `run` at `seqno`, or starts it there on `history`. The caller
    /// has checked that `seqno` extends it.
    fn extend(run: &mut Option<Run>, history: [u8; 16], seqno: i64) {
        match run {
            Some(run) => run.last = seqno,
            None => {
                *run = Some(Run {
                    history,
                    first: seqno,
                    last: seqno,
                })
            }
        }
    }
}

/// The current file and its write buffer (a `BufWriter` over the seam):
/// records gather in `buf` until `flush`, one write(2) per batch; a record
/// bigger than the buffer goes to the file directly, uncopied.
struct Writer {
    file: Box<dyn AppendFile>,
    /// Bounded by [`WRITE_BUFFER`].
    buf: Vec<u8>,
}

impl Writer {
    fn new(file: Box<dyn AppendFile>) -> Writer {
        Writer {
            file,
            buf: Vec::new(),
        }
    }

    fn write(&mut self, piece: &[u8]) -> io::Result<()> {
        if self.buf.len() + piece.len() > WRITE_BUFFER {
            self.flush()?;
        }
        if piece.len() >= WRITE_BUFFER {
            return self.file.append(piece);
        }
        self.buf.extend_from_slice(piece);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.file.append(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

pub struct WritesetCache {
    fs: Arc<dyn Fs>,
    current_path: PathBuf,
    previous_path: PathBuf,
    /// Rotations that set the older file aside, as `<name>.1.old.<n>`
    /// (`aside_path`): a new name each time, so that no rename replaces
    /// one whose deletion is still under way.
    set_aside: u64,
    /// The one set aside and not yet handed out.
    doomed: Option<PathBuf>,
    /// Rotate the current file past this many bytes (half of gcache.size).
    rotate_at: u64,

    /// Largest record payload read back (`repl.max_ws_size` and slack).
    max_payload: usize,
    writer: Option<Writer>,
    current_bytes: u64,
    current: Option<Run>,
    previous: Option<Run>,
    /// The newest event and writeset held.
    newest: Newest,
    /// `lockstep.cache_sync`: fsync what each batch wrote before its
    /// commits are acknowledged (power loss keeps them too).
    sync: bool,
    /// Written since the last fsync.
    unsynced: bool,
    /// The current file's length as written: its records, then the zeros
    /// reserved after them (`RESERVE_AHEAD`).
    reserved: u64,
}

/// What reading one file found.
struct Scan {
    run: Option<Run>,
    /// At or below the position (`scan`).
    newest: Newest,
    /// Bytes to keep: the header and the good records up to the cut.
    keep: u64,
    /// Why the scan stopped early, if it did.
    stopped: Option<String>,
}

impl Scan {
    /// Nothing found: keep `keep` bytes.
    fn empty(keep: u64, stopped: Option<String>) -> Scan {
        Scan {
            run: None,
            newest: Newest::default(),
            keep,
            stopped,
        }
    }
}

/// Reads one record from `r` into `buf`: `None` at a clean end of input
/// (its end, or the zeros reserved after a synced cache's records).
pub fn read_record(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
    max_payload: usize,
) -> Result<Option<CachedEvent>, String> {
    buf.clear();
    buf.resize(RECORD_HEADER_LEN, 0);
    match r.read(&mut buf[..1]) {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(e.to_string()),
    }
    r.read_exact(&mut buf[1..])
        .map_err(|e| format!("record header: {e}"))?;
    loop {
        match decode_record(buf, max_payload).map_err(|e| e.to_string())? {
            Decoded::Record(ev, _) => return Ok(Some(ev)),
            // Zeros a synced cache reserved: its records end here.
            Decoded::Unwritten => return Ok(None),
            Decoded::NeedMore(total) => {
                // Grows with the bytes that actually arrive: a length
                // claimed by a damaged file or a hostile peer costs no
                // memory until the data is there.
                let need = total - buf.len();
                let got = r
                    .take(need as u64)
                    .read_to_end(buf)
                    .map_err(|e| format!("record of {total} bytes: {e}"))?;
                if got < need {
                    return Err(format!("record of {total} bytes truncated"));
                }
            }
        }
    }
}

/// Reads the run of `position`'s history in `path`. The check points
/// (`Scan::newest`) stay at or below the position, where
/// this node's state can vouch for them; the run goes on past it.
fn scan(fs: &dyn Fs, path: &Path, position: Gtid, max_payload: usize) -> io::Result<Scan> {
    let mut r = BufReader::new(fs.open_read(path, 0)?);
    let mut header = [0u8; FILE_HEADER_LEN];
    if let Err(e) = r.read_exact(&mut header) {
        return Ok(Scan::empty(0, Some(format!("no header ({e})"))));
    }
    if let Err(e) = decode_file_header(&header) {
        return Ok(Scan::empty(0, Some(e.to_string())));
    }
    let history = *position.uuid.as_bytes();
    let mut scan = Scan::empty(FILE_HEADER_LEN as u64, None);
    let mut buf = Vec::new();
    loop {
        let ev = match read_record(&mut r, &mut buf, max_payload) {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(e) => {
                scan.stopped = Some(format!("damaged record ({e}): the rest is dropped"));
                break;
            }
        };
        let next = scan.run.map_or(ev.seqno, |run| run.last + 1);
        if ev.history != history || ev.seqno != next {
            break;
        }
        scan.keep += buf.len() as u64;
        if ev.seqno <= position.seqno {
            scan.newest.take(&ev);
        }
        Run::extend(&mut scan.run, history, ev.seqno);
    }
    Ok(scan)
}

impl WritesetCache {
    /// Opens the cache in `dir` for a node at `position`. `size` is
    /// `gcache.size`; `recover` is `gcache.recover`.
    pub fn open(
        dir: &Path,
        name: &str,
        size: u64,
        max_payload: usize,
        recover: bool,
        position: Gtid,
    ) -> io::Result<WritesetCache> {
        let fs: Arc<dyn Fs> = Arc::new(Disk);
        WritesetCache::open_on(fs, dir, name, size, max_payload, recover, position)
    }

    /// [`WritesetCache::open`] on the file system `fs` (the tests' `SimFs`).
    /// A Galera cache to convert is looked for on the real disk only.
    pub fn open_on(
        fs: Arc<dyn Fs>,
        dir: &Path,
        name: &str,
        size: u64,
        max_payload: usize,
        recover: bool,
        position: Gtid,
    ) -> io::Result<WritesetCache> {
        let current_path = dir.join(name);
        let previous_path = dir.join(format!("{name}.1"));
        // Left by a crash between a rotation and its deletion.
        let aside_stem = format!("{name}.1.old.");
        for file in fs.list(dir).unwrap_or_default() {
            if file.to_string_lossy().starts_with(&aside_stem) {
                let _ = fs.remove(&dir.join(file));
            }
        }
        let mut cache = WritesetCache {
            fs,
            current_path,
            previous_path,
            set_aside: 0,
            doomed: None,
            rotate_at: (size / 2).max(1 << 16),

            max_payload,
            writer: None,
            current_bytes: 0,
            current: None,
            previous: None,
            newest: Newest::default(),
            sync: false,
            unsynced: false,
            reserved: 0,
        };
        let known = !position.uuid.is_nil() && position.seqno >= 0;
        if recover && known && crate::galera_import::is_galera_cache(&cache.current_path) {
            // The first start after a switch from Galera: its cache is
            // converted into this format (or, if unusable, replaced below).
            if let Err(e) = crate::galera_import::import(&cache.current_path, position, max_payload)
            {
                warn!(
                    "{}: converting Galera's writeset cache failed ({e}); the cache starts empty",
                    cache.current_path.display()
                );
            }
        }
        if recover && known {
            cache.recover(position)?;
        } else {
            cache.start_over()?;
        }
        Ok(cache)
    }

    fn recover(&mut self, position: Gtid) -> io::Result<()> {
        let mut scans = Vec::new();
        for path in [&self.previous_path, &self.current_path] {
            let s = if self.fs.len(path)?.is_some() {
                scan(&*self.fs, path, position, self.max_payload)?
            } else {
                Scan::empty(0, None)
            };
            if let Some(why) = &s.stopped {
                info!("writeset cache {}: {why}", path.display());
            }
            scans.push(s);
        }
        let (p, c) = (&scans[0], &scans[1]);
        let fs = self.fs.clone();
        let truncate = |path: &Path, keep: u64| fs.set_len(path, keep);
        match (p.run, c.run) {
            (Some(pr), Some(cr)) if pr.last + 1 == cr.first => {
                truncate(&self.previous_path, p.keep)?;
                truncate(&self.current_path, c.keep)?;
                self.previous = Some(pr);
                self.current = Some(cr);
                self.newest = Newest {
                    event: c.newest.event,
                    writeset: c.newest.writeset.or(p.newest.writeset),
                };
            }
            (_, Some(cr)) => {
                let _ = self.fs.remove(&self.previous_path);
                truncate(&self.current_path, c.keep)?;
                self.current = Some(cr);
                self.newest = c.newest;
            }
            (Some(pr), None) => {
                // Only the older file reaches the position: it becomes the
                // current one and is appended to.
                truncate(&self.previous_path, p.keep)?;
                self.fs.rename(&self.previous_path, &self.current_path)?;
                self.current = Some(pr);
                self.newest = p.newest;
            }
            (None, None) => return self.start_over(),
        }
        self.open_current_for_append()?;
        info!(
            "writeset cache recovered: {} (gcache.recover=yes, position {position})",
            self.describe()
        );
        Ok(())
    }

    fn start_over(&mut self) -> io::Result<()> {
        self.writer = None;
        let _ = self.fs.remove(&self.previous_path);
        self.previous = None;
        self.current = None;
        self.newest = Newest::default();
        self.create_current()
    }

    fn create_current(&mut self) -> io::Result<()> {
        let mut f = self.fs.open_append(&self.current_path, true)?;
        f.append(&encode_file_header())?;
        if self.sync {
            // The new name must survive a power loss with its records.
            f.sync()?;
            crate::storage::sync_parent_on(&*self.fs, &self.current_path)?;
        }
        self.current_bytes = FILE_HEADER_LEN as u64;
        self.reserved = self.current_bytes;
        self.writer = Some(Writer::new(f));
        Ok(())
    }

    /// Appends to the current file (recovered, so it has a header).
    fn open_current_for_append(&mut self) -> io::Result<()> {
        self.current_bytes = self.fs.len(&self.current_path)?.unwrap_or(0);
        self.reserved = self.current_bytes;
        let f = self.fs.open_append(&self.current_path, false)?;
        self.writer = Some(Writer::new(f));
        Ok(())
    }

    /// Check points at or before `seqno` of `history`: the newest event
    /// and the newest writeset held, as (seqno, `event_digest`), when they
    /// are not past `seqno` (a running node's cache may hold events it has
    /// not committed yet).
    pub fn check_points(&self, history: Uuid, seqno: i64) -> Vec<(i64, u32)> {
        let mut points = Vec::new();
        if self
            .current
            .is_some_and(|r| r.history == *history.as_bytes())
        {
            for (at, digest) in [self.newest.event, self.newest.writeset]
                .into_iter()
                .flatten()
            {
                if at <= seqno && !points.iter().any(|(s, _)| *s == at) {
                    points.push((at, digest));
                }
            }
        }
        points
    }

    /// The seqno of the newest writeset held at or before `seqno` of
    /// `history` (the writeset among `check_points`).
    pub fn last_writeset_at(&self, history: Uuid, seqno: i64) -> Option<i64> {
        let run = self.current?;
        if run.history != *history.as_bytes() {
            return None;
        }
        self.newest
            .writeset
            .map(|(at, _)| at)
            .filter(|at| *at <= seqno)
    }

    /// The file appended to.
    pub fn current_path(&self) -> &Path {
        &self.current_path
    }

    /// The older file, after a rotation.
    pub fn previous_path(&self) -> &Path {
        &self.previous_path
    }

    /// The lowest seqno held (`wsrep_local_cached_downto`), if any.
    pub fn first(&self) -> Option<i64> {
        self.previous.or(self.current).map(|r| r.first)
    }

    /// Whether every event `after + 1 ..= last` of `history` is here.
    pub fn covers(&self, history: Uuid, after: i64, last: i64) -> bool {
        let (Some(first), Some(run)) = (self.first(), self.current) else {
            return false;
        };
        run.history == *history.as_bytes() && first <= after + 1 && run.last >= last
    }

    /// The newest seqno held when the run covers every event of `history`
    /// after `position` up to it and goes past `position`: events the
    /// group ordered that this node's storage does not hold.
    pub fn held_past(&self, history: Uuid, position: i64) -> Option<i64> {
        let last = self.current?.last;
        (last > position && self.covers(history, position, last)).then_some(last)
    }

    /// Whether `seqno` of `history` is the next event of the run.
    pub fn extends(&self, history: [u8; 16], seqno: i64) -> bool {
        self.current
            .is_some_and(|r| r.history == history && r.last + 1 == seqno)
    }

    /// The largest record kept: half of `gcache.size` (one file).
    pub fn max_record(&self) -> u64 {
        self.rotate_at
    }

    /// An event too big to keep was ordered at `seqno`: the run cannot
    /// continue across it, so the cache starts over after it. (Writing a
    /// record of hundreds of megabytes in a round would stall the group;
    /// Galera keeps such writesets in page files instead.)
    pub fn skip_oversized(&mut self) -> io::Result<()> {
        self.start_over()?;
        self.current = None;
        Ok(())
    }

    /// Appends an ordered event; one that does not extend the run starts
    /// the cache over.
    pub fn append(&mut self, ev: &CachedEvent) -> io::Result<()> {
        if !self.extends(ev.history, ev.seqno) && self.current.is_some() {
            self.start_over()?;
        }
        // A writeset's data goes from its shared chunks to the file (a
        // write past the buffer's size bypasses it): no copy of a big one.
        let record = record_pieces(ev);
        let Some(w) = self.writer.as_mut() else {
            return Err(io::Error::other("the cache file is not open"));
        };
        let len = record.len() as u64;
        let end = self.current_bytes + len;
        // A small cache reserves less than its files hold.
        let ahead = RESERVE_AHEAD.min(self.rotate_at);
        if self.sync && end > self.reserved && len <= ahead {
            let to = end + ahead;
            w.file.reserve(to)?;
            self.reserved = to;
        }
        for piece in record.pieces() {
            w.write(piece)?;
        }
        self.unsynced = true;
        self.current_bytes = end;
        self.reserved = self.reserved.max(end);
        self.newest.take(ev);
        Run::extend(&mut self.current, ev.history, ev.seqno);
        if self.current_bytes >= self.rotate_at {
            self.rotate()?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.flush()?;
        self.writer = None;
        // Renaming the current file over the older one made the file
        // system free the older one's blocks and write the renamed one out
        // inside rename(2): 50-65 ms in a round, under the state
        // lock, on every node at once (the worst latency of 8-thread
        // write-only load). So the older file first moves aside, where no
        // file is, and the caller deletes it elsewhere (`take_doomed`); no
        // rename here replaces a file.
        if self.fs.len(&self.previous_path)?.is_some() {
            if let Some(untaken) = self.doomed.take() {
                // The last one was not handed out: delete it here, so at
                // most one waits (half of gcache.size on disk).
                let _ = self.fs.remove(&untaken);
            }
            self.set_aside += 1;
            let aside = self.aside_path(self.set_aside);
            self.fs.rename(&self.previous_path, &aside)?;
            self.doomed = Some(aside);
        }
        self.fs.rename(&self.current_path, &self.previous_path)?;
        self.previous = self.current.take();
        self.create_current()
    }

    /// `<name>.1.old.<n>`, beside the older file.
    fn aside_path(&self, n: u64) -> PathBuf {
        let mut name = self.previous_path.clone().into_os_string();
        name.push(format!(".old.{n}"));
        PathBuf::from(name)
    }

    /// The older file a rotation set aside, for the caller to delete
    /// outside the cache's lock (`cache_writer`).
    pub fn take_doomed(&mut self) -> Option<Doomed> {
        let path = self.doomed.take()?;
        Some(Doomed {
            fs: self.fs.clone(),
            path,
        })
    }

    /// Hands buffered records to the OS (once per round's batch), and
    /// with `lockstep.cache_sync` to the disk: one fsync per batch, so
    /// the writesets of every commit the batch acknowledges share it.
    pub fn flush(&mut self) -> io::Result<()> {
        let Some(w) = &mut self.writer else {
            return Ok(());
        };
        w.flush()?;
        if self.sync && std::mem::take(&mut self.unsynced) {
            w.file.sync()?;
        }
        Ok(())
    }

    /// Turns `lockstep.cache_sync` on or off. On, the current file and
    /// its name are made durable first: `open` created it before the
    /// setting was known, and an fsync of its data alone would not keep
    /// its name through a power loss (found by the power-loss test below:
    /// a synced batch came back missing with its whole file).
    pub fn set_sync(&mut self, on: bool) -> io::Result<()> {
        self.sync = on;
        if !on {
            return Ok(());
        }
        if let Some(w) = self.writer.as_mut() {
            w.flush()?;
            w.file.sync()?;
        }
        crate::storage::sync_parent_on(&*self.fs, &self.current_path)
    }

    /// The events `after + 1 ..= last` of `history`, read from files opened
    /// now (a rotation after this call does not disturb the reader).
    pub fn reader(&mut self, history: Uuid, after: i64, last: i64) -> Result<CacheReader, String> {
        if !self.covers(history, after, last) {
            return Err(format!(
                "the writeset cache holds {}, not every event after {after} up to {last}",
                self.describe()
            ));
        }
        self.flush()
            .map_err(|e| format!("flushing the cache: {e}"))?;
        let mut files = Vec::new();
        let previous_needed = self.previous.is_some_and(|p| p.last > after);
        let current_needed = self.current.is_some_and(|c| c.first <= last);
        for (needed, path) in [
            (previous_needed, &self.previous_path),
            (current_needed, &self.current_path),
        ] {
            if !needed {
                continue;
            }
            let f = self
                .fs
                .open_read(path, FILE_HEADER_LEN as u64)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            files.push(BufReader::new(f));
        }
        Ok(CacheReader {
            files,
            history: *history.as_bytes(),
            next: after + 1,
            last,
            max_payload: self.max_payload,
            buf: Vec::new(),
        })
    }

    /// For log lines: the range held.
    pub fn describe(&self) -> String {
        match (self.first(), self.current) {
            (Some(first), Some(run)) => format!(
                "seqnos {first}..={} of {}",
                run.last,
                Uuid::from_bytes(run.history)
            ),
            _ => "no events".into(),
        }
    }
}

/// A file a rotation set aside, deleted by whoever takes it
/// (`WritesetCache::take_doomed`).
pub struct Doomed {
    fs: Arc<dyn Fs>,
    pub path: PathBuf,
}

impl Doomed {
    pub fn delete(self) -> io::Result<()> {
        self.fs.remove(&self.path)
    }
}

/// Events read back in order, checked for history and continuity.
pub struct CacheReader {
    files: Vec<BufReader<Box<dyn Read + Send>>>,
    history: [u8; 16],
    next: i64,
    last: i64,
    max_payload: usize,
    buf: Vec<u8>,
}

impl Iterator for CacheReader {
    type Item = Result<CachedEvent, String>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.next <= self.last {
            let file = self.files.first_mut()?;
            let ev = match read_record(file, &mut self.buf, self.max_payload) {
                Ok(Some(ev)) => ev,
                Ok(None) => {
                    self.files.remove(0);
                    continue;
                }
                Err(e) => return Some(Err(e)),
            };
            if ev.seqno < self.next {
                continue;
            }
            if ev.history != self.history || ev.seqno != self.next {
                return Some(Err(format!(
                    "the cache has seqno {} of {} where {} of {} was expected",
                    ev.seqno,
                    Uuid::from_bytes(ev.history),
                    self.next,
                    Uuid::from_bytes(self.history)
                )));
            }
            self.next += 1;
            return Some(Ok(ev));
        }
        None
    }
}

/// Logs and drops a cache that cannot be written (disk full, permissions).
pub fn disable(cache: &mut Option<WritesetCache>, e: &io::Error) {
    if cache.take().is_some() {
        warn!(
            "writeset cache disabled after a write error ({e}); the next event this node \
             would commit fails, and it leaves the cluster"
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::storage::power_loss::SimFs;
    use lockstep_core::writeset_cache::CachedKind;
    use std::fs::{self, OpenOptions};

    const H: [u8; 16] = [4; 16];
    const MAX: usize = 1 << 20;

    fn ev(seqno: i64, data: usize) -> CachedEvent {
        CachedEvent {
            history: H,
            seqno,
            kind: if seqno % 10 == 0 {
                CachedKind::View {
                    members: 0,
                    who: None,
                }
            } else {
                crate::ist_replay::tests::ws_kind(seqno, data)
            },
        }
    }

    fn at(seqno: i64) -> Gtid {
        Gtid {
            uuid: Uuid::from_bytes(H),
            seqno,
        }
    }

    /// A cache in `dir` for a node at `position` (also used by the
    /// writer's and the feed's tests).
    pub(crate) fn open(dir: &Path, size: u64, recover: bool, position: Gtid) -> WritesetCache {
        WritesetCache::open(dir, "galera.cache", size, MAX, recover, position).expect("open")
    }

    fn read(c: &mut WritesetCache, after: i64, last: i64) -> Vec<i64> {
        c.reader(Uuid::from_bytes(H), after, last)
            .expect("covered")
            .map(|e| e.expect("readable").seqno)
            .collect()
    }

    /// A cache of 128 KiB (64 KiB files) on `fs`, recovered at seqno 0.
    fn open_sim(fs: &SimFs) -> io::Result<WritesetCache> {
        let dir = Path::new("/cache");
        WritesetCache::open_on(
            Arc::new(fs.clone()),
            dir,
            "galera.cache",
            128 << 10,
            MAX,
            true,
            at(0),
        )
    }

    /// One run of the power-loss test below: a cache on `fs` takes
    /// batches of events as the cache writer gives them (appends, a
    /// flush, the set-aside file deleted), rotating 64 KiB files, until an
    /// operation fails (the planned cut). Returns the newest seqno of a
    /// batch whose flush returned, and whether every operation ran.
    fn feed(fs: &SimFs, sync: bool) -> (i64, bool) {
        let Ok(mut c) = open_sim(fs) else {
            return (0, false);
        };
        if c.set_sync(sync).is_err() {
            return (0, false);
        }
        let mut flushed = 0;
        for batch in 0..15 {
            for k in 1..=4 {
                if c.append(&ev(batch * 4 + k, 3000)).is_err() {
                    return (flushed, false);
                }
            }
            if c.flush().is_err() {
                return (flushed, false);
            }
            flushed = batch * 4 + 4;
            if let Some(d) = c.take_doomed() {
                if d.delete().is_err() {
                    return (flushed, false);
                }
            }
        }
        (flushed, true)
    }

    /// Issue 52 item 3: the cache behind the storage seam, cut at every
    /// step of its appends, flushes, rotations (and the deletion of the
    /// file set aside), then reopened with `gcache.recover=yes` after the
    /// power loss (`SimFs`: only what was synced survives, a file changed
    /// since is torn). What it recovers is always one gap-free run of the
    /// events appended, each exactly as appended: never a torn record,
    /// never a gap. With `lockstep.cache_sync`, every event of a batch
    /// whose flush returned is there: the commits it acknowledged survive
    /// a power loss of every node (the durability table's promise).
    #[test]
    fn a_power_loss_at_any_step_keeps_a_gap_free_run_and_every_synced_event() {
        for sync in [false, true] {
            let mut kept_all = 0;
            for cut in 0.. {
                let fs = SimFs::new();
                fs.cut_after(cut);
                let (flushed, done) = feed(&fs, sync);
                fs.power_loss();
                let mut c = open_sim(&fs)
                    .unwrap_or_else(|e| panic!("sync {sync}, cut {cut}: reopening: {e}"));
                let run = c.first().zip(c.current.map(|r| r.last));
                let events: Vec<CachedEvent> = match run {
                    Some((first, last)) => c
                        .reader(Uuid::from_bytes(H), first - 1, last)
                        .unwrap_or_else(|e| panic!("sync {sync}, cut {cut}: {e}"))
                        .map(|e| e.unwrap_or_else(|e| panic!("sync {sync}, cut {cut}: {e}")))
                        .collect(),
                    None => Vec::new(),
                };
                for (i, e) in events.iter().enumerate() {
                    let want = ev(events[0].seqno + i as i64, 3000);
                    assert_eq!(e, &want, "sync {sync}, cut {cut}: event {i} of the run");
                }
                let last = events.last().map_or(0, |e| e.seqno);
                if sync {
                    assert!(
                        last >= flushed,
                        "sync {sync}, cut {cut}: seqno {flushed} was flushed and synced, the \
                         cache recovered up to {last}"
                    );
                }
                if last >= flushed {
                    kept_all += 1;
                }
                if done {
                    eprintln!("sync {sync}: {cut} cuts, every flushed event kept after {kept_all}");
                    assert!(cut > 20, "the feed took only {cut} operations");
                    break;
                }
            }
        }
    }

    /// With `lockstep.cache_sync`, records overwrite zeros reserved ahead
    /// of them (so that a batch's fdatasync writes data, not a new file
    /// size). The zeros read as the end of the records, in the current
    /// file and in the older one; recovery cuts them off; a record bigger
    /// than the reservation extends the file itself.
    #[test]
    fn a_synced_cache_writes_into_reserved_zeros_and_recovery_cuts_them_off() {
        let dir = tempfile::tempdir().unwrap();
        let len = |p: &Path| fs::metadata(p).unwrap().len();
        // 2 MiB files, 1 MiB reserved ahead.
        let mut c = open(dir.path(), 4 << 20, true, at(0));
        c.set_sync(true).unwrap();
        for s in 1..=10 {
            c.append(&ev(s, 2048)).unwrap();
        }
        c.flush().unwrap();
        assert!(
            len(c.current_path()) > c.current_bytes + RESERVE_AHEAD / 2,
            "zeros reserved after {} bytes of records: the file has {}",
            c.current_bytes,
            len(c.current_path())
        );
        assert_eq!(read(&mut c, 0, 10), (1..=10).collect::<Vec<_>>());
        // Past a rotation: the older file ends in zeros too.
        for s in 11..=1500 {
            c.append(&ev(s, 2048)).unwrap();
        }
        c.flush().unwrap();
        assert!(c.previous.is_some(), "rotated");
        assert!(
            len(c.previous_path()) > (2 << 20),
            "the older file keeps its reserve"
        );
        assert_eq!(read(&mut c, 0, 1500), (1..=1500).collect::<Vec<_>>());
        drop(c);
        let mut c = open(dir.path(), 4 << 20, true, at(1500));
        assert_eq!(
            (c.first(), c.current.map(|r| r.last)),
            (Some(1), Some(1500))
        );
        assert_eq!(len(c.current_path()), c.current_bytes, "the reserve is cut");
        c.set_sync(true).unwrap();
        c.append(&ev(1501, 2048)).unwrap();
        c.flush().unwrap();
        assert_eq!(read(&mut c, 0, 1501), (1..=1501).collect::<Vec<_>>());
        drop(c);

        // A record of 2 MiB passes the 1 MiB reserved.
        let dir = tempfile::tempdir().unwrap();
        let mut c =
            WritesetCache::open(dir.path(), "galera.cache", 8 << 20, 4 << 20, true, at(0)).unwrap();
        c.set_sync(true).unwrap();
        c.append(&ev(1, 100)).unwrap();
        c.append(&ev(2, 2 << 20)).unwrap();
        c.flush().unwrap();
        assert!(c.previous.is_none(), "no rotation");
        assert_eq!(
            len(c.current_path()),
            c.current_bytes,
            "no zeros past the big record"
        );
        assert_eq!(read(&mut c, 0, 2), [1, 2]);
    }

    #[test]
    fn events_read_back_in_order_across_a_rotation_and_old_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        // 64 KiB files: ~30 records of 2 KiB each.
        let mut c = open(dir.path(), 128 << 10, true, at(0));
        for s in 1..=40 {
            c.append(&ev(s, 2048)).unwrap();
        }
        assert_eq!(c.first(), Some(1), "one rotation keeps everything");
        assert_eq!(read(&mut c, 5, 40), (6..=40).collect::<Vec<_>>());
        for s in 41..=200 {
            c.append(&ev(s, 2048)).unwrap();
        }
        let first = c.first().unwrap();
        assert!(
            first > 100 && first < 200,
            "the oldest events went: {first}"
        );
        assert!(!c.covers(Uuid::from_bytes(H), first - 2, 200));
        assert!(c.reader(Uuid::from_bytes(H), first - 2, 200).is_err());
        assert_eq!(read(&mut c, first - 1, 200).len() as i64, 200 - first + 1);
        // The file the last rotation set aside, deleted by the caller
        // (the round hands it to another thread).
        let doomed = c
            .take_doomed()
            .expect("a rotation set the older file aside");
        assert!(doomed.path.exists());
        assert!(c.take_doomed().is_none(), "handed out once");
        fs::remove_file(&doomed.path).unwrap();
        let on_disk: u64 = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(
            on_disk <= (128 << 10) + 4096,
            "bounded by gcache.size: {on_disk}"
        );
    }

    #[test]
    fn a_rotation_replaces_no_file_and_deletes_an_untaken_older_one_itself() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), 128 << 10, true, at(0));
        let names = |d: &Path| {
            let mut n: Vec<String> = fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        let mut s = 0;
        let mut rotate = |c: &mut WritesetCache| {
            let before = c.first();
            while c.first() == before || c.previous.is_none() {
                s += 1;
                c.append(&ev(s, 2048)).unwrap();
            }
        };
        rotate(&mut c);
        assert_eq!(names(dir.path()), ["galera.cache", "galera.cache.1"]);
        assert!(c.take_doomed().is_none(), "nothing older to set aside yet");
        rotate(&mut c);
        assert_eq!(
            names(dir.path()),
            ["galera.cache", "galera.cache.1", "galera.cache.1.old.1"]
        );
        // Not taken: the next rotation deletes it before it sets the next
        // older file aside.
        rotate(&mut c);
        assert_eq!(
            names(dir.path()),
            ["galera.cache", "galera.cache.1", "galera.cache.1.old.2"]
        );
        // Handed out and not deleted yet (its thread has not run): the
        // next rotation sets the next older file aside under a new name.
        assert!(c.take_doomed().is_some());
        rotate(&mut c);
        assert_eq!(names(dir.path()).len(), 4);
        // A crash left one: opening the cache deletes it.
        drop(c);
        let _c = open(dir.path(), 128 << 10, true, at(s));
        assert!(!names(dir.path()).iter().any(|n| n.contains(".old")));
    }

    /// A crash (kill -9, power loss) at each step of a rotation leaves
    /// files that `open` recovers from: the newest events up to the
    /// position are served, nothing set aside is left, and appending goes
    /// on. The steps are replayed with the same file operations `rotate`
    /// makes, in its order.
    #[test]
    fn a_crash_at_any_step_of_a_rotation_recovers_the_newest_events() {
        let template = tempfile::tempdir().unwrap();
        let mut c = open(template.path(), 128 << 10, true, at(0));
        let mut s = 0;
        // Two rotations, so that the next one has an older file to set
        // aside; then a few events in the new current file.
        while c.set_aside < 1 {
            s += 1;
            c.append(&ev(s, 2048)).unwrap();
        }
        if let Some(doomed) = c.take_doomed() {
            fs::remove_file(&doomed.path).unwrap();
        }
        for _ in 0..5 {
            s += 1;
            c.append(&ev(s, 2048)).unwrap();
        }
        c.flush().unwrap();
        drop(c);
        let current = "galera.cache";
        let older = "galera.cache.1";
        let aside = "galera.cache.1.old.2";
        // What `rotate` does, step by step.
        let steps: [&dyn Fn(&Path); 3] = [
            &|d| fs::rename(d.join(older), d.join(aside)).unwrap(),
            &|d| fs::rename(d.join(current), d.join(older)).unwrap(),
            &|d| fs::write(d.join(current), encode_file_header()).unwrap(),
        ];
        for done in 0..=steps.len() {
            let dir = tempfile::tempdir().unwrap();
            for e in fs::read_dir(template.path()).unwrap() {
                let e = e.unwrap();
                fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
            }
            for step in &steps[..done] {
                step(dir.path());
            }
            let mut c = open(dir.path(), 128 << 10, true, at(s));
            let left: Vec<_> = fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".old"))
                .collect();
            assert!(left.is_empty(), "crash after step {done}: {left:?} left");
            assert_eq!(
                read(&mut c, s - 5, s),
                ((s - 4)..=s).collect::<Vec<_>>(),
                "crash after step {done}"
            );
            c.append(&ev(s + 1, 2048)).unwrap();
            assert_eq!(read(&mut c, s - 1, s + 1), vec![s, s + 1]);
        }
    }

    #[test]
    fn a_gap_or_another_history_starts_the_cache_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), 1 << 20, true, at(0));
        for s in 1..=5 {
            c.append(&ev(s, 10)).unwrap();
        }
        c.append(&ev(9, 10)).unwrap();
        assert_eq!(c.first(), Some(9));
        let mut other = ev(10, 10);
        other.history = [8; 16];
        c.append(&other).unwrap();
        assert!(!c.covers(Uuid::from_bytes(H), 8, 9));
        assert!(c.covers(Uuid::from_bytes([8; 16]), 9, 10));
    }

    #[test]
    fn recovery_keeps_events_past_the_position_and_survives_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), 1 << 20, true, at(0));
        for s in 1..=30 {
            c.append(&ev(s, 100)).unwrap();
        }
        c.flush().unwrap();
        drop(c);
        // Ordered past the committed position 25 before the crash: kept,
        // to be replayed; the check points stay at the position.
        let mut c = open(dir.path(), 1 << 20, true, at(25));
        assert_eq!(
            c.describe(),
            format!("seqnos 1..=30 of {}", Uuid::from_bytes(H))
        );
        assert_eq!(c.held_past(Uuid::from_bytes(H), 25), Some(30));
        assert_eq!(c.held_past(Uuid::from_bytes(H), 30), None);
        assert_eq!(c.held_past(Uuid::from_bytes([8; 16]), 25), None);
        let checks: Vec<i64> = c
            .check_points(Uuid::from_bytes(H), 25)
            .iter()
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(checks, vec![25]);
        assert_eq!(
            read(&mut c, 20, 30),
            vec![21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
        );
        drop(c);
        // Cut to 25 (the length of a cache of 1..=25 written alike), it
        // holds nothing past the position and appends after what it holds.
        let len_of_25 = {
            let other = tempfile::tempdir().unwrap();
            let mut c = open(other.path(), 1 << 20, true, at(0));
            for s in 1..=25 {
                c.append(&ev(s, 100)).unwrap();
            }
            c.flush().unwrap();
            fs::metadata(other.path().join("galera.cache"))
                .unwrap()
                .len()
        };
        let path = dir.path().join("galera.cache");
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len_of_25)
            .unwrap();
        let mut c = open(dir.path(), 1 << 20, true, at(25));
        assert_eq!(c.held_past(Uuid::from_bytes(H), 25), None);
        c.append(&ev(26, 100)).unwrap();
        c.flush().unwrap();
        drop(c);
        // A torn last record (power loss mid-write).
        let len = fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 7)
            .unwrap();
        let mut c = open(dir.path(), 1 << 20, true, at(40));
        assert!(c.covers(Uuid::from_bytes(H), 0, 25));
        assert!(!c.covers(Uuid::from_bytes(H), 0, 26));
        assert_eq!(read(&mut c, 23, 25), vec![24, 25]);
    }

    #[test]
    fn a_corrupt_record_ends_what_is_recovered() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), 1 << 20, true, at(0));
        for s in 1..=10 {
            c.append(&ev(s, 100)).unwrap();
        }
        c.flush().unwrap();
        drop(c);
        let path = dir.path().join("galera.cache");
        let mut bytes = fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        fs::write(&path, bytes).unwrap();
        let c = open(dir.path(), 1 << 20, true, at(10));
        let last = c.current.unwrap().last;
        assert!((1..10).contains(&last), "kept up to the damage: {last}");
        assert_eq!(c.first(), Some(1));
    }

    #[test]
    fn recover_no_or_an_unknown_position_or_a_foreign_file_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), 1 << 20, true, at(0));
        for s in 1..=5 {
            c.append(&ev(s, 10)).unwrap();
        }
        c.flush().unwrap();
        drop(c);
        assert_eq!(open(dir.path(), 1 << 20, false, at(5)).first(), None);
        let unknown = Gtid {
            uuid: Uuid::NIL,
            seqno: -1,
        };
        assert_eq!(open(dir.path(), 1 << 20, true, unknown).first(), None);
        // Galera's own galera.cache (another format) is replaced.
        fs::write(dir.path().join("galera.cache"), b"GALERA-RINGBUFFER").unwrap();
        let mut c = open(dir.path(), 1 << 20, true, at(5));
        assert_eq!(c.first(), None);
        c.append(&ev(6, 10)).unwrap();
        assert_eq!(read(&mut c, 5, 6), vec![6]);
    }
}
