//! The conflict and dependency table (contract §5.2) and the conditions that
//! make a conflict cell a real conflict (§6.2).

use super::key::KeyType;
use super::Seqno;

/// What an earlier reference means for a writeset being certified.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Relation {
    /// No effect.
    None,
    /// Ordering only: `depends_on >= earlier seqno`.
    Dependency,
    /// A conflict if the §6.2 conditions hold, a dependency otherwise.
    Conflict,
}

use Relation::{Conflict as C, Dependency as D, None as N};

/// `TABLE[earlier.index()][new.index()]`: rows are the type already in the
/// index, columns the type of the writeset being certified.
pub const TABLE: [[Relation; 4]; 4] = [
    //            SHARED REFERENCE UPDATE EXCLUSIVE   (new)
    /* SHARED    */ [N, N, D, D],
    /* REFERENCE */ [N, N, D, C],
    /* UPDATE    */ [D, D, C, C],
    /* EXCLUSIVE */ [C, C, C, C],
];

/// The table cell for an earlier reference of type `earlier` and a new key of
/// type `new`.
#[inline]
pub fn relation(earlier: KeyType, new: KeyType) -> Relation {
    TABLE[earlier.index()][new.index()]
}

/// Whether a conflict cell is a real conflict (§6.2): the earlier writeset
/// is inside the certification interval (`seqno > last_seen`) and it is a
/// TOI or came from another node. (The third condition, "not already
/// certified", is handled by [`super::Certifier::preload`].)
#[inline]
pub fn is_real_conflict(
    earlier_seqno: Seqno,
    earlier_is_toi: bool,
    same_node: bool,
    last_seen: Seqno,
) -> bool {
    earlier_seqno > last_seen && (earlier_is_toi || !same_node)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table against the contract document itself
    /// (`shared/docs/wsrep-provider-contract.md` beside the repository, the
    /// project's specification, which cites Galera's `check_against`): its
    /// markdown table is parsed, so neither side is a copy of the other.
    #[test]
    fn table_matches_the_contract_document() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/docs/wsrep-provider-contract.md");
        let doc = match std::fs::read_to_string(&path) {
            Ok(d) => d,
            Err(e) if std::env::var("LOCKSTEP_ALLOW_SKIP").is_ok_and(|v| v == "1") => {
                eprintln!("SKIPPED: {}: {e}", path.display());
                return;
            }
            Err(e) => panic!(
                "{}: {e}: the contract lives in shared/ beside the repository \
                 (LOCKSTEP_ALLOW_SKIP=1 skips this check knowingly)",
                path.display()
            ),
        };
        let mut lines = doc
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("| Earlier \\ new |"));
        let header = lines.next().expect("the contract's conflict table");
        let columns: Vec<String> = cells(header)[1..].to_vec();
        let names = ["SHARED", "REFERENCE", "UPDATE", "EXCLUSIVE"];
        assert_eq!(columns, names, "column order in the contract");
        let rows: Vec<Vec<String>> = lines.skip(1).take(4).map(cells).collect();
        let mut checked = 0;
        for (e, row) in KeyType::ALL.into_iter().zip(&rows) {
            assert_eq!(row[0], names[e.index()], "row order in the contract");
            for (n, cell) in KeyType::ALL.into_iter().zip(&row[1..]) {
                let want = match cell.trim_matches('*') {
                    "none" => N,
                    "dependency" => D,
                    "conflict" => C,
                    other => panic!("unknown cell {other:?} in the contract"),
                };
                assert_eq!(relation(e, n), want, "earlier {e} vs new {n}");
                checked += 1;
            }
        }
        assert_eq!(checked, 16);
    }

    fn cells(line: &str) -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    }

    /// A stronger new type never has a weaker relation to any earlier type;
    /// this is what makes merging duplicate keys "keep the stronger type".
    #[test]
    fn table_is_monotone_in_new_type() {
        let rank = |r: Relation| match r {
            N => 0,
            D => 1,
            C => 2,
        };
        for e in KeyType::ALL {
            for w in KeyType::ALL.windows(2) {
                assert!(rank(relation(e, w[0])) <= rank(relation(e, w[1])));
            }
        }
    }

    #[test]
    fn real_conflict_conditions() {
        // inside the interval, other node
        assert!(is_real_conflict(5, false, false, 4));
        // outside the interval
        assert!(!is_real_conflict(4, false, false, 4));
        assert!(!is_real_conflict(4, true, false, 4));
        // same node, not TOI
        assert!(!is_real_conflict(5, false, true, 4));
        // same node, TOI
        assert!(is_real_conflict(5, true, true, 4));
    }
}
