//! `lockstep check-config`: reads a server's option files as `mariadbd`
//! does (`option_files`) and reports what a Lockstep node lacks, what has
//! no effect, and what is less safe than a DBA probably expects (`rules`).

pub mod option_files;
pub mod rules;

#[cfg(test)]
mod tests;
