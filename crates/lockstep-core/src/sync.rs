//! Locks whose data a panic cannot leave half changed.

use std::sync::{Mutex, MutexGuard};

/// Takes `m` even when a thread panicked while holding it. Only for
/// locks whose holders leave nothing half done when they panic: a flag,
/// a counter, an `Option` taken whole. Every caller says why its lock is
/// one of those.
pub fn unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
