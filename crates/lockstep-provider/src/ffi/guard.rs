//! No panic may unwind across the C ABI into mariadbd. Every entry point
//! runs its body through [`guard`], which turns a panic into an error log
//! line and a failure return value.

use crate::log::{error, panic_message};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub fn guard<T>(name: &str, on_panic: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            let what = panic_message(&*payload);
            error!("internal error in {name}: {what}; this is a Lockstep bug, please report it");
            on_panic
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_failure_value() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let v = guard("test", 7, || -> i32 { panic!("boom") });
        std::panic::set_hook(prev);
        assert_eq!(v, 7);
        assert_eq!(guard("test", 7, || 0), 0);
    }
}
