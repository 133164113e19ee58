//! A power-loss file system for tests, on LazyFS's idea: a FUSE
//! passthrough over a backing directory that keeps every write not yet
//! fsynced in memory. [`Mount::power_cut`] drops that data (tearing the
//! last page where asked) and takes back every name change whose
//! directory was not fsynced: what survives is what a disk holds after
//! the power goes. The same layer injects disk faults ([`Faults`]).
//!
//! What is durable, the model:
//! - file data: once the file is fsynced (fdatasync counts), or written
//!   back by age ([`Options::writeback_age`]) or memory pressure;
//! - a create, unlink, rename, mkdir, rmdir, link or symlink: once its
//!   directory is fsynced (and then every earlier name change with it),
//!   or written back by age; a file's fsync does not make its name
//!   durable;
//! - close() makes nothing durable.
//!
//! The format on the backing side is the plain files themselves, plus
//! the hidden `.lazyfs-stash` directory of hard links to removed or
//! replaced files, emptied at every mount.

pub mod faults;
mod fs;
pub mod journal;
mod mount;
pub mod overlay;
mod state;

pub use faults::Faults;
pub use mount::Mount;
pub use state::{CutReport, Options, Stats, STASH};
