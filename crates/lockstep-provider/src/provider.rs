//! The provider instance: one per loaded library, reached through
//! `wsrep->ctx`. The FFI layer converts arguments and calls the safe methods
//! defined here and in the sibling modules (session, replication, control,
//! stats).

use crate::grastate::{GrastateFile, StateStore};
use crate::group_input::Input;
use crate::identity::PROVIDER_VERSION;
use crate::log::{error, info, warn};
use crate::server::Server;
use crate::settings::{log_commit_bypass, Applied, Settings, Tunables};
use crate::shared::{Shared, StateGuard, Wake, TURN_RECHECK};
use crate::state::{Conn, Inner};
use lockstep_core::flow_control::Limits;
use lockstep_core::options::table::Effect;
use lockstep_core::options::{self, Options, OptionsError};
use lockstep_core::saved_state::SavedState;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wsrep_abi::{status, Gtid, Status};

/// `init_args` in Rust terms, copied out of the server's memory.
pub struct InitConfig {
    pub node_name: String,
    pub node_address: String,
    pub node_incoming: String,
    pub data_dir: PathBuf,
    pub options: String,
    pub proto_ver: i32,
    pub state_id: Option<Gtid>,
    pub server: Server,
    /// Run as an arbitrator (`lockstep arbitrator`): join without a state
    /// transfer, keep no writeset cache, never lead nor donate.
    pub arbitrator: bool,
}

pub struct Provider {
    pub node_name: String,
    pub node_incoming: String,
    pub data_dir: PathBuf,
    pub proto_ver: i32,
    pub server: Server,
    /// The options and their typed values; never locked together with
    /// the state (`settings`).
    pub settings: Settings,
    /// grastate.dat. Like `channel` and `joined_via`, a leaf lock:
    /// private, taken only inside the accessors below, which call nothing
    /// that locks, so no lock order can involve it.
    store: Mutex<Box<dyn StateStore>>,
    pub shared: Arc<Shared>,
    /// The group channel while connected to a multi-node cluster.
    channel: Mutex<Option<crate::group_driver::GroupChannel>>,
    /// What `connect` was given (cluster name, peers to dial), for an
    /// automatic rejoin after this node was removed.
    joined_via: Mutex<Option<(String, Vec<String>)>>,
    /// TLS or plain for every peer connection (group channel, IST).
    pub security: Arc<lockstep_net::secure::PeerSecurity>,
    /// [`InitConfig::arbitrator`].
    pub arbitrator: bool,
    /// `gvwstate.dat` (`pc.recovery`), kept in step with the group's
    /// certificate bindings.
    pub views: Arc<crate::viewstate::ViewKeeper>,
}

#[derive(Debug)]
pub enum InitError {
    MissingDataDir(PathBuf),
    Options(OptionsError),
    State(crate::grastate::StoreError),
    /// The `socket.ssl*` options name files that do not make a TLS setup.
    Tls(String),
}

impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InitError::MissingDataDir(p) => write!(
                f,
                "data directory '{}' does not exist or is not a directory; \
                 check wsrep_data_home_dir / datadir",
                p.display()
            ),
            InitError::Options(e) => write!(f, "bad wsrep_provider_options: {e}"),
            InitError::State(e) => write!(f, "cannot use the saved state: {e}"),
            InitError::Tls(e) => write!(f, "cannot set up TLS for peer connections: {e}"),
        }
    }
}

/// How long a wait on the provider's state may last (issue 34 item 8):
/// every wait names a deadline, or why what it waits for always comes.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// Give up at this instant.
    Deadline(Instant),
    /// No deadline, for the reason given. Every such wait also ends when
    /// the session closes (`Conn::Closed`, which disconnect and shutdown
    /// always reach, and which wakes every waiter). One still open after
    /// [`STALL_NOTE`] logs a note with its reason, once.
    Progress(&'static str),
    /// An applier waiting for work: forever is normal; an event or the
    /// session's close wakes it.
    Idle,
}

/// How long a runtime `pc.weight` change waits to be in force.
pub const WEIGHT_WAIT: Duration = Duration::from_secs(5);

/// When a wait without a deadline says it is still waiting.
pub const STALL_NOTE: Duration = Duration::from_secs(60);

/// Why a wait for an earlier seqno ends: the appliers run every ordered
/// event in order (applied, or skipped when its certification failed),
/// and an applier that cannot go on fails the session loudly.
pub const IN_ORDER: &str = "every earlier ordered event finishes in order";

/// [`IN_ORDER`], for a wait that also holds while the provider is paused:
/// `resume()` follows every `pause()` (FTWRL, a donation's copy).
pub const IN_ORDER_UNPAUSED: &str =
    "every earlier ordered event finishes in order, and resume() follows every pause()";

impl Provider {
    pub fn init(cfg: InitConfig) -> Result<Provider, InitError> {
        let options = parse_options(&cfg)?;
        let store = GrastateFile::open(&cfg.data_dir).map_err(InitError::State)?;
        Self::with_store(cfg, options, Box::new(store))
    }

    /// `init` with the saved state kept in `store` (tests inject faults).
    pub fn with_store(
        cfg: InitConfig,
        options: Options,
        mut store: Box<dyn StateStore>,
    ) -> Result<Provider, InitError> {
        let saved = store.load().map_err(InitError::State)?;
        let diverged = crate::diverged::present(&cfg.data_dir);
        let mut position = startup_position(&saved, cfg.state_id, &cfg.data_dir);
        if diverged {
            info!(
                "this node left the cluster inconsistent before it stopped: it starts without a \
                 position and takes a full state transfer"
            );
            position = -1;
        } else if position < 0
            && !saved.uuid.is_nil()
            && !crate::bypass::marker_present(&cfg.data_dir)
        {
            if !saved.safe_to_bootstrap && crate::os::server_bootstraps() == Some(true) {
                // The connect refuses this bootstrap (Galera's rule): no
                // storage engine recovery for a start that ends there.
                info!(
                    "not running `mariadbd --wsrep-recover`: this start bootstraps a cluster, \
                     which grastate.dat (safe_to_bootstrap: 0) does not allow"
                );
            } else if let Some(p) = recover_own_position(saved.uuid, &cfg.data_dir) {
                position = p;
            }
        }
        info!(
            "Lockstep {} loaded: node '{}' at {}, data dir {}, position {}",
            PROVIDER_VERSION,
            cfg.node_name,
            cfg.node_address,
            cfg.data_dir.display(),
            Gtid {
                uuid: saved.uuid,
                seqno: position
            }
        );
        let security = crate::peer_security::from_options(&options).map_err(InitError::Tls)?;
        if security.is_tls() {
            info!("peer connections: {}", security.describe());
        } else {
            // A note, not a warning: MariaDB's mtr suites run without TLS
            // and fail on any warning they do not expect.
            info!(
                "SECURITY: peer connections are plain TCP: replication traffic is \
                 unencrypted and any host that reaches the group port can join; set \
                 socket.ssl_cert, socket.ssl_key and socket.ssl_ca (`lockstep cert` makes them)"
            );
        }
        let server_binlog = crate::os::server_writes_binlog();
        let limits = Limits::from_options(&options);
        let settings = Settings::new(options, server_binlog);
        let tunables = settings.tunables();
        log_commit_bypass(&settings.options(), server_binlog, tunables.commit_bypass);
        let mut inner = Inner::new(saved.uuid, position);
        inner.bypass.set_marker_dir(cfg.data_dir.clone());
        inner.diverged = crate::diverged::Diverged::at_start(&cfg.data_dir, diverged);
        inner.take_settings(tunables, limits);
        let views = Arc::new(crate::viewstate::ViewKeeper::new(&cfg.data_dir));
        Ok(Provider {
            node_name: cfg.node_name,
            node_incoming: cfg.node_incoming,
            data_dir: cfg.data_dir,
            proto_ver: cfg.proto_ver,
            server: cfg.server,
            settings,
            store: Mutex::new(store),
            shared: Arc::new(Shared::new(inner)),
            channel: Mutex::new(None),
            joined_via: Mutex::new(None),
            security: Arc::new(security),
            arbitrator: cfg.arbitrator,
            views,
        })
    }

    pub fn lock(&self) -> StateGuard<'_> {
        self.shared.lock()
    }

    /// Waits until `ready` holds, re-checking after every state change.
    /// Returns the guard and whether the condition was met before `until`'s
    /// deadline.
    pub fn wait_until<'a>(
        &'a self,
        guard: StateGuard<'a>,
        until: Until,
        ready: impl FnMut(&mut Inner) -> bool,
    ) -> (StateGuard<'a>, bool) {
        self.wait_on(Wake::Changed, guard, until, ready)
    }

    /// [`Provider::wait_until`] for one kind of waiter: `ready` may depend
    /// only on what the notifications of that kind announce.
    pub fn wait_on<'a>(
        &'a self,
        wake: Wake,
        guard: StateGuard<'a>,
        until: Until,
        ready: impl FnMut(&mut Inner) -> bool,
    ) -> (StateGuard<'a>, bool) {
        self.wait_picking(|_| wake, guard, until, ready)
    }

    /// [`Provider::wait_on`] with the kind of waiter chosen again, from
    /// the state, before each sleep.
    pub fn wait_picking<'a>(
        &'a self,
        wake: impl Fn(&Inner) -> Wake,
        mut guard: StateGuard<'a>,
        until: Until,
        mut ready: impl FnMut(&mut Inner) -> bool,
    ) -> (StateGuard<'a>, bool) {
        let deadline = match until {
            Until::Deadline(d) => Some(d),
            Until::Progress(_) | Until::Idle => None,
        };
        let started = Instant::now();
        let mut stall = match until {
            Until::Progress(why) => Some((started + STALL_NOTE, why)),
            _ => None,
        };
        loop {
            if ready(&mut guard) {
                return (guard, true);
            }
            let kind = wake(&guard);
            let on = self.shared.condvar(kind);
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return (guard, false);
            }
            if let Some((at, why)) = stall.filter(|(at, _)| now >= *at) {
                info!(
                    "a wait has been open for {} s; it ends once {why}",
                    at.duration_since(started).as_secs()
                );
                stall = None;
            }
            // A turn waiter looks again after TURN_RECHECK in any case.
            let recheck = matches!(kind, Wake::Turn(_)).then_some(now + TURN_RECHECK);
            let until = [deadline, recheck, stall.map(|(at, _)| at)]
                .into_iter()
                .flatten()
                .min();
            guard.sleep(on, until.map(|u| u.saturating_duration_since(now)));
        }
    }

    pub fn notify(&self) {
        self.shared.notify();
    }

    /// Releases the lock, then wakes the waiters on ordering gates and
    /// transaction states, turn waiters only for the levels passed since
    /// the last call ([`Shared::notify_gates`]).
    pub fn notify_gates(&self, mut g: StateGuard<'_>) {
        let passed = g.turns_passed();
        drop(g);
        self.shared.notify_gates(passed);
    }

    /// Writes grastate.dat; a failure is logged, since the caller cannot do
    /// better than carry on (the data's durability is the server's).
    pub fn save_state(&self, state: SavedState) {
        let stored = self
            .store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .store(&state);
        if let Err(e) = stored {
            error!("failed to write grastate.dat: {e}");
        }
    }

    /// Reads grastate.dat.
    pub fn load_state(&self) -> Result<SavedState, crate::grastate::StoreError> {
        self.store.lock().unwrap_or_else(|p| p.into_inner()).load()
    }

    /// The group channel of a new session.
    pub(crate) fn set_channel(&self, chan: crate::group_driver::GroupChannel) {
        *self.channel.lock().unwrap_or_else(|p| p.into_inner()) = Some(chan);
    }

    /// The session's group channel, to stop (outside the lock).
    pub(crate) fn take_channel(&self) -> Option<crate::group_driver::GroupChannel> {
        self.channel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// What `connect` was given, for a rejoin.
    pub(crate) fn remember_join(&self, cluster: &str, seeds: Vec<String>) {
        *self.joined_via.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((cluster.to_string(), seeds));
    }

    pub(crate) fn joined_via(&self) -> Option<(String, Vec<String>)> {
        self.joined_via
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn options_get(&self) -> String {
        self.settings.galera_string()
    }

    pub fn options_set(&self, conf: &str) -> Status {
        #[cfg(feature = "fault-injection")]
        if conf.trim() == "lockstep.inject=group_panic" {
            warn!("fault injection: panicking the next round");
            if let Some(link) = &self.lock().group {
                let _ = link.tx.send(Input::Panic);
            }
            return status::OK;
        }
        let result = self.settings.apply_runtime(conf);
        match result {
            Ok(Applied {
                changed,
                tunables,
                limits,
                generation,
            }) => {
                {
                    let mut g = self.lock();
                    // A later change that got here first wins.
                    if generation > g.settings_taken {
                        g.settings_taken = generation;
                        g.take_settings(tunables, limits);
                    }
                }
                for (k, v) in changed {
                    // Every changed key is in the table: apply_runtime
                    // refused unknown ones.
                    let Some(spec) = options::table::lookup(&k) else {
                        continue;
                    };
                    match spec.effect {
                        Effect::Honoured => {
                            info!("provider option {k} set to {v}");
                            self.react_to_option(&k, &v);
                        }
                        Effect::NoEffect if !options::is_default(spec, &v) => warn_no_effect(&k),
                        Effect::NoEffect => {}
                    }
                }
                status::OK
            }
            Err(e) => {
                // Same wording as Galera: mtr suppressions expect it.
                warn!("{e}");
                status::NODE_FAIL
            }
        }
    }

    /// Passes a runtime change of an option the rounds act on to the group.
    fn react_to_option(&self, key: &str, value: &str) {
        let input = match key {
            "gmcast.isolate" => match options::parse_int(value) {
                Ok(level) => {
                    if level == 2 {
                        warn!("gmcast.isolate=2 (isolate and quit) is handled as 1: isolated");
                    }
                    Input::Isolate(level != 0)
                }
                Err(_) => return,
            },
            "evs.suspect_timeout" | "evs.inactive_timeout" => match self.failure_timeout() {
                Some(d) => Input::SuspectTimeout(d),
                None => return,
            },
            "pc.bootstrap" => match options::parse_bool(value) {
                Ok(true) => Input::Bootstrap {
                    force: self
                        .settings
                        .options()
                        .bool("lockstep.force_bootstrap")
                        .unwrap_or(false),
                },
                _ => return,
            },
            "pc.ignore_sb" | "pc.ignore_quorum" => Input::IgnoreQuorum(self.ignores_quorum()),
            "pc.weight" => Input::Weight(self.pc_weight()),
            "socket.ssl_reload" => {
                match self.security.reload() {
                    Ok(()) => info!("socket.ssl_reload: {}", self.security.describe()),
                    Err(e) => warn!("socket.ssl_reload failed, the old TLS material stays: {e}"),
                }
                return;
            }
            _ => return,
        };
        let weight = match input {
            Input::Weight(w) => Some(w),
            _ => None,
        };
        if let Some(link) = &self.lock().group {
            let _ = link.tx.send(input);
        }
        if let Some(w) = weight {
            self.wait_for_weight(w);
        }
    }

    /// A runtime `pc.weight` change returns once the group has recorded
    /// it and the voters it asks for are in force on every member, as
    /// Galera's returns once its weight message went round: a cut right
    /// after the change is then decided by the new weights (MariaDB's
    /// galera_pc_weight isolates the heavy node at once). Bounded by
    /// [`WEIGHT_WAIT`]; a node outside a primary component does not wait
    /// (its weight is recorded when it is back in one).
    fn wait_for_weight(&self, w: u32) {
        let mut g = self.lock();
        if g.conn != Conn::Open || !g.membership.in_group() || g.membership.non_primary() {
            return;
        }
        // Published only while someone waits: what is there may be stale.
        if g.weight_waiters == 0 {
            g.weight_in_force = None;
        }
        g.weight_waiters += 1;
        let (mut g, ready) =
            self.wait_until(g, Until::Deadline(Instant::now() + WEIGHT_WAIT), |s| {
                s.weight_in_force == Some(w) || s.conn != Conn::Open || s.membership.non_primary()
            });
        g.weight_waiters -= 1;
        drop(g);
        if !ready {
            info!(
                "pc.weight={w} is not in force on every member after {} s; it takes effect when \
                 they have applied it",
                WEIGHT_WAIT.as_secs()
            );
        }
    }

    /// `pc.ignore_quorum` and `pc.ignore_sb`: keep serving without the
    /// majority (split brain is the operator's choice).
    pub fn ignores_quorum(&self) -> crate::group_input::QuorumOverrides {
        let o = self.settings.options();
        crate::group_input::QuorumOverrides {
            ignore_quorum: o.bool("pc.ignore_quorum").unwrap_or(false),
            ignore_sb: o.bool("pc.ignore_sb").unwrap_or(false),
        }
    }

    /// How long a silent member stays a member (and a node without a
    /// leader stays Primary): `evs.suspect_timeout`, or
    /// `evs.inactive_timeout` if shorter. Galera suspects a peer after the
    /// first and declares it dead after the second at the latest; the
    /// leader here removes it at the first, so the second only matters
    /// when it is the shorter one.
    pub fn failure_timeout(&self) -> Option<Duration> {
        let o = self.settings.options();
        let suspect = o.duration("evs.suspect_timeout").ok();
        let inactive = o.duration("evs.inactive_timeout").ok();
        match (suspect, inactive) {
            (Some(s), Some(i)) => Some(s.min(i)),
            (s, i) => s.or(i),
        }
    }

    /// `pc.weight` (0..=255, Galera's range; 1 by default).
    pub fn pc_weight(&self) -> u32 {
        self.small_int("pc.weight", 1)
    }

    /// `gmcast.segment` (0..=255, checked by the option table): the
    /// member's site, for donor choice, relays and the leader's site.
    pub fn segment(&self) -> u8 {
        self.small_int("gmcast.segment", 0)
    }

    /// An integer option in `T`'s range, or `default`.
    fn small_int<T: TryFrom<i64>>(&self, key: &str, default: T) -> T {
        let o = self.settings.options();
        o.int(key)
            .ok()
            .and_then(|v| T::try_from(v).ok())
            .unwrap_or(default)
    }

    /// The option values hot paths read, without parsing text.
    pub fn tunables(&self) -> Tunables {
        self.settings.tunables()
    }
}

/// One note for an option set to a non-default value that Lockstep
/// accepts for compatibility but does not act on (README lists them). A
/// note, not a warning: MariaDB's Galera test suites set several of these
/// in every node's configuration and fail a test on any unexpected
/// warning in the server log, and monitoring does the same.
/// The options `init` is given, checked, with a note for each accepted
/// key that has no effect.
pub(crate) fn parse_options(cfg: &InitConfig) -> Result<Options, InitError> {
    if !cfg.data_dir.is_dir() {
        return Err(InitError::MissingDataDir(cfg.data_dir.clone()));
    }
    let mut options = Options::new(&cfg.node_address, &cfg.data_dir.to_string_lossy());
    if let Err(e) = options.apply_initial(&cfg.options) {
        if let OptionsError::Unknown(_) = &e {
            for line in e.unrecognized_messages() {
                error!("{line}");
            }
        }
        return Err(InitError::Options(e));
    }
    for name in options.ignored_settings() {
        warn_no_effect(name);
    }
    Ok(options)
}

fn warn_no_effect(name: &str) {
    info!(
        "provider option '{name}' is accepted for compatibility with Galera but has no effect \
         in Lockstep (see the option table in README.md)"
    );
}

/// The position to start from: [`initial_position`], unless the node
/// crashed inside a commit bypass (ADR 0011), when the storage engine's
/// recovered seqno cannot be trusted and only a full state transfer helps.
fn startup_position(saved: &SavedState, state_id: Option<Gtid>, data_dir: &Path) -> i64 {
    let position = initial_position(saved, state_id);
    if !crate::bypass::marker_present(data_dir) {
        return position;
    }
    if saved.seqno >= 0 {
        // A clean shutdown saved the contiguous position.
        crate::bypass::remove_marker(data_dir);
        return position;
    }
    warn!(
        "this node stopped without a clean shutdown while local transactions had committed \
         ahead of a large writeset (lockstep.commit_bypass): the position its storage engine \
         recovered may not cover every commit below it; a full state transfer brings the \
         whole state"
    );
    -1
}

/// A member that stopped uncleanly and was started without a position:
/// where the server opens its engines after connecting, the provider runs
/// `mariadbd --wsrep-recover` itself (`position_recovery`) and takes the
/// seqno if it is of this node's history.
fn recover_own_position(history: wsrep_abi::Uuid, data_dir: &Path) -> Option<i64> {
    let method = crate::os::server_sst_method();
    if !crate::position_recovery::engines_opened_later(method.as_deref()) {
        return None;
    }
    info!(
        "this node stopped without a clean shutdown and was started without a position \
         (grastate.dat seqno -1, no --wsrep_start_position): running `mariadbd \
         --wsrep-recover` to learn what its storage engine committed, as the systemd unit does"
    );
    match crate::position_recovery::run_wsrep_recover(data_dir) {
        Ok(g) if g.uuid == history && g.seqno >= 0 => {
            info!("recovered position {g}: starting from it");
            Some(g.seqno)
        }
        Ok(g) => {
            warn!(
                "mariadbd --wsrep-recover recovered {g}, not a position of this node's history \
                 {history}: starting without a position"
            );
            None
        }
        Err(e) => {
            warn!("{e}; starting without a position");
            None
        }
    }
}

/// Contract §2.2: use grastate; take the seqno from `state_id` only when the
/// histories match and grastate's seqno is unknown.
fn initial_position(saved: &SavedState, state_id: Option<Gtid>) -> i64 {
    match state_id {
        Some(g) if saved.seqno < 0 && !saved.uuid.is_nil() && g.uuid == saved.uuid => g.seqno,
        _ => saved.seqno,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_inside_a_commit_bypass_means_a_full_state_transfer() {
        let dir = tempfile::tempdir().unwrap();
        let history = wsrep_abi::Uuid::from_bytes([7; 16]);
        let crashed = SavedState {
            uuid: history,
            seqno: -1,
            ..SavedState::default()
        };
        let recovered = Some(Gtid {
            uuid: history,
            seqno: 40,
        });
        assert_eq!(startup_position(&crashed, recovered, dir.path()), 40);
        std::fs::write(dir.path().join(crate::bypass::MARKER_FILE), "x").unwrap();
        assert_eq!(startup_position(&crashed, recovered, dir.path()), -1);
        assert!(
            crate::bypass::marker_present(dir.path()),
            "kept until a state transfer succeeds"
        );
        // After a clean shutdown grastate holds the contiguous position.
        let clean = SavedState {
            seqno: 35,
            ..crashed
        };
        assert_eq!(startup_position(&clean, recovered, dir.path()), 35);
        assert!(!crate::bypass::marker_present(dir.path()));
    }

    #[test]
    fn galeras_default_hard_limit_means_none() {
        let mut o = Options::new("127.0.0.1:16001", "/data");
        assert_eq!(Tunables::from_options(&o, None).recv_q_hard_limit, None);
        o.apply_initial("gcs.recv_q_hard_limit=1M").unwrap();
        assert_eq!(
            Tunables::from_options(&o, None).recv_q_hard_limit,
            Some(1 << 20)
        );
    }

    #[test]
    fn the_commit_bypass_needs_a_looser_commit_order_and_is_on_by_default_only_without_a_binlog() {
        let mut o = Options::new("127.0.0.1:16001", "/data");
        let bypass = |o: &Options, binlog| Tunables::from_options(o, binlog).commit_bypass;
        assert_eq!(bypass(&o, Some(false)), 0, "repl.commit_order=3: strict");
        let mut strict = Options::new("127.0.0.1:16001", "/data");
        strict.apply_initial("lockstep.commit_bypass=8M").unwrap();
        assert_eq!(bypass(&strict, Some(false)), 0, "strict order wins");
        o.apply_initial("repl.commit_order=2").unwrap();
        assert_eq!(bypass(&o, Some(false)), 64 << 20);
        assert_eq!(bypass(&o, Some(true)), 0, "the binlog follows commit order");
        assert_eq!(bypass(&o, None), 0, "unknown server: the cautious side");
        o.apply_initial("lockstep.commit_bypass=8M").unwrap();
        assert_eq!(
            bypass(&o, Some(true)),
            8 << 20,
            "set explicitly, it is what it says"
        );
        o.apply_runtime("lockstep.commit_bypass=0").unwrap();
        assert_eq!(bypass(&o, Some(false)), 0);
    }

    #[test]
    fn position_comes_from_state_id_only_for_the_same_history() {
        let u = "6c5e3a2e-8d38-11ee-9a4f-0b3d4e5f6a7b".parse().unwrap();
        let other = "7c5e3a2e-8d38-11ee-9a4f-0b3d4e5f6a7b".parse().unwrap();
        let running = SavedState {
            uuid: u,
            seqno: -1,
            safe_to_bootstrap: false,
        };
        assert_eq!(
            initial_position(&running, Some(Gtid { uuid: u, seqno: 9 })),
            9
        );
        assert_eq!(
            initial_position(
                &running,
                Some(Gtid {
                    uuid: other,
                    seqno: 9
                })
            ),
            -1
        );
        let closed = SavedState {
            seqno: 5,
            ..running
        };
        assert_eq!(
            initial_position(&closed, Some(Gtid { uuid: u, seqno: 9 })),
            5
        );
    }
}
