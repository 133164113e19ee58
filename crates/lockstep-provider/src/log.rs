//! Logging through the server's logger (`init_args.logger_cb`).
//!
//! MariaDB prefixes each line with `WSREP: ` and writes it to its error log,
//! where mtr fails a test on unexpected warnings: routine events go out at
//! INFO, and only real problems at WARN or ERROR (contract §3.8, P17).
//! Before `init` (and after `free`) there is no logger: lines go to stderr,
//! which mariadbd also sends to its error log.

use std::ffi::CString;
use std::sync::RwLock;
use wsrep_abi::{log_level, LoggerCb};

static LOGGER: RwLock<Option<LoggerCb>> = RwLock::new(None);
/// Where lines go in a program that is not a server (the arbitrator): set
/// by that program, used when no server logger is installed.
static SINK: RwLock<Option<Sink>> = RwLock::new(None);

/// A program's own line writer.
pub type Sink = fn(Level, &str);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
}

pub fn install(cb: Option<LoggerCb>) {
    *LOGGER.write().unwrap_or_else(|p| p.into_inner()) = cb;
    if cb.is_some() {
        // Once per process; a second provider load finds it in place.
        if log::set_logger(&FORWARD).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
    }
}

/// The `log` facade's lines from our own crates (`lockstep_net` logs
/// that way) go where the provider's do. Other crates' lines (rustls) are
/// not ours to put in the server's error log.
struct Forward;

static FORWARD: Forward = Forward;

impl log::Log for Forward {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Info && m.target().starts_with("lockstep")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => Level::Error,
            log::Level::Warn => Level::Warn,
            _ => Level::Info,
        };
        log(level, &record.args().to_string());
    }

    fn flush(&self) {}
}

/// Lines of a program without a server logger (`lockstep arbitrator`) go
/// to `sink`, and the `log` facade's lines of our crates with them.
pub fn install_sink(sink: Sink) {
    *SINK.write().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    if log::set_logger(&FORWARD).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// After `free` no provider code may call into the server.
pub fn uninstall() {
    install(None);
}

pub fn log(level: Level, msg: &str) {
    // A NUL inside a message would truncate it on the C side; replace it.
    let text = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    let guard = LOGGER.read().unwrap_or_else(|p| p.into_inner());
    match *guard {
        Some(cb) => {
            let lvl = match level {
                Level::Error => log_level::ERROR,
                Level::Warn => log_level::WARN,
                Level::Info => log_level::INFO,
            };
            // SAFETY: `cb` is the server's logger, valid from init until
            // free (when it is uninstalled); `text` is a valid C string that
            // outlives the call, and the server copies it.
            unsafe { cb(lvl, text.as_ptr()) }
        }
        None => match *SINK.read().unwrap_or_else(|p| p.into_inner()) {
            Some(sink) => sink(level, msg),
            None => eprintln!("WSREP: [lockstep] {msg}"),
        },
    }
}

pub use lockstep_core::panic_message;

macro_rules! info { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Info, &format!($($t)*)) } }
macro_rules! log_warn { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Warn, &format!($($t)*)) } }
macro_rules! error { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Error, &format!($($t)*)) } }
pub(crate) use {error, info, log_warn as warn};
