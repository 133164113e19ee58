//! `lockstep arbitrator` (Galera's `garbd`): its settings, garbd-style
//! (`config`), and the status file through which `lockstep status` and
//! `lockstep check` see it (`status_file`). The member itself is the
//! provider's (`lockstep::arbitrator`).

pub mod config;
pub mod status_file;
