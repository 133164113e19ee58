//! A writeset from another member at its place in the total order, as
//! the appliers, the receive spool and IST hand it on.

use lockstep_core::certification::CertOutcome;
use lockstep_core::group::Writeset;
use lockstep_core::writeset_cache::CachedKind;
use std::sync::Arc;

/// Writesets at least this big are logged when replicated, ordered and
/// applied, with how long each step took: what an operator needs to see
/// where a big transaction spends its time.
pub const LARGE_WRITESET: usize = 64 << 20;

/// A remote writeset at its place in the total order.
pub struct RemoteWs {
    pub seqno: i64,
    pub ws: Arc<Writeset>,
    pub outcome: CertOutcome,
    /// `ws.size()`, counted once: it walks every key, a million of them
    /// in a big writeset, and the queue asks for it often.
    pub size: usize,
}

impl RemoteWs {
    /// This writeset as a writeset cache (or spool) record's kind: the
    /// same `Arc`, no copy of its data.
    pub fn cached_kind(&self) -> CachedKind {
        CachedKind::Writeset {
            ws: self.ws.clone(),
            outcome: self.outcome.clone(),
        }
    }

    pub fn new(seqno: i64, ws: Arc<Writeset>, outcome: CertOutcome) -> RemoteWs {
        let size = ws.size();
        RemoteWs {
            seqno,
            ws,
            outcome,
            size,
        }
    }
}
