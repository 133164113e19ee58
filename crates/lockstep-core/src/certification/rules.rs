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
    use KeyType::*;

    #[test]
    fn table_matches_contract() {
        let expect = [
            (Shared, Shared, N),
            (Shared, Reference, N),
            (Shared, Update, D),
            (Shared, Exclusive, D),
            (Reference, Shared, N),
            (Reference, Reference, N),
            (Reference, Update, D),
            (Reference, Exclusive, C),
            (Update, Shared, D),
            (Update, Reference, D),
            (Update, Update, C),
            (Update, Exclusive, C),
            (Exclusive, Shared, C),
            (Exclusive, Reference, C),
            (Exclusive, Update, C),
            (Exclusive, Exclusive, C),
        ];
        for (e, n, r) in expect {
            assert_eq!(relation(e, n), r, "{e} vs {n}");
        }
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
