//! Reaching MariaDB from `check` and `probe`: addresses, option files,
//! connections.

pub mod client;
pub mod endpoint;
pub mod option_file;
pub mod settings;

pub use client::{connect, DbError};
pub use endpoint::{ConnectSpec, Credentials, Endpoint};
pub use option_file::OptionFileError;
