//! CPU time of a cluster's `mariadbd` processes (every thread, user and
//! system, from `/proc/<pid>/stat`), sampled around a measured run: the
//! report's CPU per 1000 committed transactions (issue 35's goal of CPU
//! per replicated transaction).

use lockstep_testkit::Cluster;

/// Clock ticks per second of `/proc/<pid>/stat`'s times: Linux's
/// `USER_HZ`, 100 on every architecture's user ABI.
const TICKS_PER_SEC: f64 = 100.0;

/// User plus system time of one process so far, in ticks; `None` when it
/// cannot be read.
fn ticks(pid: u32) -> Option<u64> {
    parse_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields 14 and 15 (`utime`, `stime`) of a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may hold spaces, so the
/// count starts after its closing one.
fn parse_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The CPU time of every node so far; `None` if any node's is unknown
/// (a node down, no `/proc`): a sum over fewer nodes would mislead.
pub fn sample(cluster: &Cluster) -> Option<u64> {
    cluster
        .nodes()
        .iter()
        .map(|n| n.pid().and_then(ticks))
        .sum()
}

/// Milliseconds of CPU per 1000 transactions between two samples.
pub fn ms_per_1000(before: Option<u64>, after: Option<u64>, transactions: u64) -> Option<f64> {
    let used = after?.checked_sub(before?)?;
    (transactions > 0).then(|| used as f64 / TICKS_PER_SEC * 1000.0 * 1000.0 / transactions as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_system_time_are_read_after_the_command_name() {
        let line = "4242 (my d (x)) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    1234 567 0 0 20 0 33 0 100 2000000 5000 18446744073709551615";
        assert_eq!(parse_ticks(line), Some(1234 + 567));
        assert_eq!(parse_ticks("garbage"), None);
        assert_eq!(parse_ticks("1 (x) S 1 2"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(ticks(std::process::id()).is_some());
    }

    #[test]
    fn per_1000_transactions() {
        // 2 s of CPU over 4000 transactions: 500 ms per 1000.
        assert_eq!(ms_per_1000(Some(100), Some(300), 4000), Some(500.0));
        assert_eq!(ms_per_1000(Some(100), Some(300), 0), None);
        assert_eq!(ms_per_1000(None, Some(300), 10), None);
        assert_eq!(ms_per_1000(Some(300), Some(100), 10), None);
    }
}
