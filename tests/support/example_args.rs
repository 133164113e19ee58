//! Command-line helpers shared by the measuring commands in `examples/`.

/// The number after `name` on the command line, or `default`.
pub fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Prints `<command>: <what>: <e>` and exits with status 1.
pub fn die(command: &str, what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("{command}: {what}: {e}");
    std::process::exit(1)
}
