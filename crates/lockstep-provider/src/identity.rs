//! Who this provider says it is: name, version and capabilities, as the
//! server reads them at load time and in every view.

use wsrep_abi::caps;

pub const PROVIDER_NAME: &str = "Lockstep";
/// mtr's version gate parses `major.minor.release` at the start of
/// `wsrep_provider_version` (contract §7.3); we implement the 26.4 semantics.
pub const PROVIDER_VERSION: &str = concat!("26.4.23(lockstep ", env!("CARGO_PKG_VERSION"), ")");
pub const PROVIDER_VENDOR: &str = "Lockstep";

/// What this implementation offers (contract §2.3), streaming replication
/// included (§5.5, ADR 0010).
pub const CAPABILITIES: u32 = caps::MULTI_MASTER
    | caps::CERTIFICATION
    | caps::PARALLEL_APPLYING
    | caps::TRX_REPLAY
    | caps::ISOLATION
    | caps::PAUSE
    | caps::CAUSAL_READS
    | caps::STREAMING;
