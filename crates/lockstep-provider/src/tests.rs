//! The provider driven through its safe API with a recording fake server:
//! the life cycle, ordering gates and abort rules without mariadbd. The
//! same behaviour is proven inside real MariaDB by the integration tests.

use crate::grastate::MemoryStore;
use crate::provider::{InitConfig, Provider};
use crate::server::{AppCtx, Server, ThreadCtx};
use crate::trx::{Handle, LocalTrx};
use lockstep_core::certification::{Key, KeyType};
use lockstep_core::options::Options;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wsrep_abi::{cb_status, flags, status, Gtid, TrxMeta, ViewInfo};

/// What the fake server saw, in order.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
}

fn rec<'a>(ctx: *mut c_void) -> &'a Recorder {
    // SAFETY: tests pass a pointer to a Recorder that outlives the provider.
    unsafe { &*ctx.cast::<Recorder>() }
}

unsafe extern "C" fn connected(ctx: *mut c_void, v: *const ViewInfo) -> i32 {
    // SAFETY: the provider passes a valid view for the call.
    let seqno = unsafe { (*v).state_id.seqno };
    rec(ctx)
        .events
        .lock()
        .unwrap()
        .push(format!("connected {seqno}"));
    cb_status::SUCCESS
}

unsafe extern "C" fn view(
    ctx: *mut c_void,
    _recv: *mut c_void,
    v: *const ViewInfo,
    _s: *const std::ffi::c_char,
    _n: usize,
) -> i32 {
    // SAFETY: as above.
    let (seqno, n) = unsafe { ((*v).state_id.seqno, (*v).memb_num) };
    rec(ctx)
        .events
        .lock()
        .unwrap()
        .push(format!("view {seqno} members {n}"));
    cb_status::SUCCESS
}

/// Only replays reach it here (no remote writesets on one node); the
/// thread context is the test's Recorder.
unsafe extern "C" fn apply(
    recv_ctx: *mut c_void,
    _h: *const wsrep_abi::WsHandle,
    wsflags: u32,
    data: *const wsrep_abi::Buf,
    meta: *const TrxMeta,
    _exit: *mut bool,
) -> i32 {
    // SAFETY: the provider passes valid data and meta for the call.
    let (seqno, len) = unsafe { ((*meta).gtid.seqno, (*data).len) };
    rec(recv_ctx)
        .events
        .lock()
        .unwrap()
        .push(format!("apply {seqno} flags {wsflags:#x} bytes {len}"));
    cb_status::SUCCESS
}

unsafe extern "C" fn synced(ctx: *mut c_void) -> i32 {
    rec(ctx).events.lock().unwrap().push("synced".into());
    cb_status::SUCCESS
}

struct Node {
    p: Arc<Provider>,
    store: MemoryStore,
    recorder: Box<Recorder>,
    applier: Option<std::thread::JoinHandle<i32>>,
    /// The data directory (writeset cache, saved view).
    _dir: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let recorder = Box::<Recorder>::default();
        let store = MemoryStore::default();
        let dir = tempfile::tempdir().expect("a temporary data directory");
        let cfg = InitConfig {
            node_name: "n1".into(),
            node_address: "127.0.0.1:0".into(),
            node_incoming: "127.0.0.1:3306".into(),
            data_dir: dir.path().into(),
            options: String::new(),
            proto_ver: 4,
            state_id: None,
            server: Server {
                app_ctx: AppCtx::new((&*recorder as *const Recorder).cast_mut().cast()),
                connected_cb: Some(connected),
                view_cb: Some(view),
                apply_cb: Some(apply),
                synced_cb: Some(synced),
                sst_request_cb: None,
                sst_donate_cb: None,
                discard: false,
            },
            arbitrator: false,
        };
        // Port 0: each test node listens on an ephemeral group port.
        let options = Options::new("127.0.0.1:0", &dir.path().to_string_lossy());
        let p = Arc::new(Provider::with_store(cfg, options, Box::new(store.clone())).unwrap());
        assert_eq!(p.connect("test", "gcomm://", "", true), status::OK);
        let pa = p.clone();
        // The applier's context is the recorder too: this node's own
        // streaming rollbacks come back through `apply_cb`.
        let recv_ctx = &*recorder as *const Recorder as usize;
        let applier = std::thread::spawn(move || pa.recv(ThreadCtx(recv_ctx as *mut c_void)));
        let node = Node {
            p,
            store,
            recorder,
            applier: Some(applier),
            _dir: dir,
        };
        node.wait_for(|n| n.p.lock().local.state().comment() == "Synced");
        node
    }

    fn wait_for(&self, mut cond: impl FnMut(&Node) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond(self) {
            assert!(Instant::now() < deadline, "timed out");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn events(&self) -> Vec<String> {
        self.recorder.events.lock().unwrap().clone()
    }

    fn stop(&mut self) -> i32 {
        assert_eq!(self.p.disconnect(), status::OK);
        self.applier.take().unwrap().join().unwrap()
    }
}

/// A local transaction with one row key in `table`.
fn trx(table: &str, row: &str) -> Handle {
    let mut t = LocalTrx::default();
    t.keys.push(Key::new(
        [&b"db"[..], table.as_bytes(), row.as_bytes()],
        KeyType::Exclusive,
    ));
    t.data = b"binlog events".to_vec();
    Handle::Local(t)
}

/// Runs a transaction to the point after certify; returns its meta.
fn certify(p: &Provider, id: u64, h: &mut Handle) -> (i32, TrxMeta) {
    p.begin_trx(id);
    let Handle::Local(t) = h else {
        unreachable!("a local transaction")
    };
    let mut meta = TrxMeta::undefined();
    let rc = p.certify(id, Some(t), 1, flags::TRX_START | flags::TRX_END, &mut meta);
    (rc, meta)
}

fn commit(p: &Provider, id: u64, h: &Handle, meta: &TrxMeta) {
    assert_eq!(p.commit_order_enter(id, h, meta), status::OK);
    assert_eq!(p.commit_order_leave(id, h, meta, &[]), status::OK);
    assert_eq!(p.release(id), (status::OK, false));
}

#[test]
fn bootstrap_delivers_connected_view_synced_then_a_final_view_and_saves_the_position() {
    let mut n = Node::start();
    assert_eq!(n.events(), ["connected 1", "view 1 members 1", "synced"]);
    assert_eq!(n.p.last_committed_id().seqno, 1);
    for id in 10..13 {
        let mut h = trx("t", &id.to_string());
        let (rc, meta) = certify(&n.p, id, &mut h);
        assert_eq!(rc, status::OK);
        assert_eq!(
            meta.gtid.seqno,
            id as i64 - 8,
            "gap-free seqnos after the view"
        );
        commit(&n.p, id, &h, &meta);
    }
    assert_eq!(n.p.last_committed_id().seqno, 4);
    let store = n.store.clone();
    let history = n.p.last_committed_id().uuid;
    assert_eq!(n.stop(), status::OK);
    let saved = store.0.lock().unwrap().state;
    assert_eq!(
        (saved.uuid, saved.seqno, saved.safe_to_bootstrap),
        (history, 4, true)
    );
}

#[test]
fn commit_order_holds_a_later_seqno_until_the_earlier_one_leaves() {
    let mut n = Node::start();
    let mut a = trx("t", "a");
    let mut b = trx("t", "b");
    let (_, ma) = certify(&n.p, 1, &mut a);
    let (_, mb) = certify(&n.p, 2, &mut b);
    assert!(mb.gtid.seqno > ma.gtid.seqno);
    let p = n.p.clone();
    let entered = Arc::new(Mutex::new(None));
    let e2 = entered.clone();
    let t = std::thread::spawn(move || {
        let rc = p.commit_order_enter(2, &b, &mb);
        *e2.lock().unwrap() = Some(Instant::now());
        rc
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        entered.lock().unwrap().is_none(),
        "b entered commit order before a left"
    );
    let left = Instant::now();
    assert_eq!(n.p.commit_order_enter(1, &a, &ma), status::OK);
    assert_eq!(n.p.commit_order_leave(1, &a, &ma, &[]), status::OK);
    assert_eq!(t.join().unwrap(), status::OK);
    let entered = entered.lock().unwrap().unwrap();
    assert!(entered >= left);
    // Woken by a's leaving (its turn's slot), not by the re-check timer.
    assert!(
        entered - left < crate::shared::TURN_RECHECK / 4,
        "b entered {:?} after a left",
        entered - left
    );
    n.stop();
}

#[test]
fn last_committed_waits_for_release_not_commit_order() {
    let mut n = Node::start();
    let mut a = trx("t", "a");
    let (_, m) = certify(&n.p, 1, &mut a);
    n.p.commit_order_enter(1, &a, &m);
    n.p.commit_order_leave(1, &a, &m, &[]);
    assert_eq!(n.p.last_committed_id().seqno, m.gtid.seqno - 1);
    n.p.release(1);
    assert_eq!(n.p.last_committed_id().seqno, m.gtid.seqno);
    n.stop();
}

/// The storage engine commits an event only once it is in the writeset
/// cache file (ADR 0026, 0032): with the cache's writer held back,
/// `commit_order_enter` waits for it, and goes on once it is written. So
/// the client's OK, which comes after, is too.
#[test]
fn commit_order_waits_until_the_writeset_is_in_the_cache_file() {
    let mut n = Node::start();
    let history = n.p.lock().history;
    let in_cache = |n: &Node, seqno: i64| {
        n.p.lock()
            .cache
            .with_cache(|c| c.covers(history, seqno - 1, seqno))
            .expect("the test node keeps a writeset cache")
    };
    n.p.lock().cache.pause_writer(true);
    let mut a = trx("t", "a");
    let (rc, m) = certify(&n.p, 1, &mut a);
    assert_eq!(rc, status::OK);
    let p = n.p.clone();
    let (h, meta) = (a, m);
    let enter = std::thread::spawn(move || {
        let rc = p.commit_order_enter(1, &h, &meta);
        (rc, h, meta)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !enter.is_finished(),
        "commit order was entered before the writeset was written"
    );
    n.p.lock().cache.pause_writer(false);
    let (rc, a, m) = enter.join().unwrap();
    assert_eq!(rc, status::OK);
    assert!(in_cache(&n, m.gtid.seqno));
    assert_eq!(n.p.commit_order_leave(1, &a, &m, &[]), status::OK);
    assert_eq!(n.p.release(1), (status::OK, false));
    n.stop();
}

/// A past view without its members (an old cache record, IST from a
/// converted Galera cache) passes the gates on the applier without a
/// callback, and lets go of the state lock first: holding it there would
/// deadlock the applier on its next lock.
#[test]
fn a_past_view_without_members_passes_the_gates() {
    let mut n = Node::start();
    let next = n.p.lock().last_committed() + 1;
    {
        let mut g = n.p.lock();
        g.enqueue(crate::event::Event::PastView(next, 0, None));
    }
    n.p.notify();
    n.wait_for(|n| n.p.lock().last_committed() >= next);
    n.stop();
}

/// MariaDB calls `disconnect` before it closes client connections: a
/// transaction may be past the engine commit (its client about to get its
/// OK), or certified and about to commit, while the node leaves. The saved
/// position must include both, or a restart re-applies those seqnos.
#[test]
fn a_clean_stop_saves_the_local_transactions_still_committing() {
    let mut n = Node::start();
    let mut a = trx("t", "a");
    let mut b = trx("t", "b");
    let (_, ma) = certify(&n.p, 1, &mut a);
    let (_, mb) = certify(&n.p, 2, &mut b);
    assert_eq!(n.p.commit_order_enter(1, &a, &ma), status::OK);
    assert_eq!(n.p.commit_order_leave(1, &a, &ma, &[]), status::OK);
    let p = n.p.clone();
    let clients = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(p.release(1), (status::OK, false));
        commit(&p, 2, &b, &mb);
    });
    let store = n.store.clone();
    assert_eq!(n.stop(), status::OK);
    clients.join().unwrap();
    let saved = store.0.lock().unwrap().state;
    assert_eq!(
        saved.seqno, mb.gtid.seqno,
        "a and b committed before the stop"
    );
}

#[test]
fn a_ddl_runs_in_total_order_isolation_with_depends_on_the_previous_seqno() {
    let mut n = Node::start();
    let last_seen = n.p.last_committed_id().seqno;
    // The DDL is ordered and finished while the transaction executes...
    let mut toi_meta = TrxMeta::undefined();
    let table_key = Key::new(vec![b"db".to_vec(), b"t".to_vec()], KeyType::Exclusive);
    let rc = n.p.to_execute_start(
        7,
        vec![table_key],
        b"ALTER".to_vec(),
        flags::TRX_START | flags::TRX_END,
        &mut toi_meta,
    );
    assert_eq!(rc, status::OK);
    assert_eq!(toi_meta.depends_on, toi_meta.gtid.seqno - 1);
    assert_eq!(n.p.to_execute_end(7, &[]), status::OK);
    assert!(last_seen < toi_meta.gtid.seqno);
    // A write that did not see it fails certification: that rule is the
    // sequencer's (lockstep-core certification and simulation tests); on
    // one node it cannot happen, since writesets of the same origin never
    // conflict. The failing path is in the three-node integration tests.
    n.stop();
}

#[test]
fn bf_abort_rules_follow_the_contract_table() {
    let mut n = Node::start();
    let mut seqno = 99;
    // Unknown victim: OK with -1 (contract P9).
    assert_eq!(n.p.abort_certification(10, 12345, &mut seqno), status::OK);
    assert_eq!(seqno, -1);
    // Executing victim: marked, and it then never replicates.
    n.p.begin_trx(1);
    assert_eq!(n.p.abort_certification(10, 1, &mut seqno), status::OK);
    let Handle::Local(mut t) = trx("t", "x") else {
        unreachable!("a local transaction")
    };
    let mut meta = TrxMeta::undefined();
    assert_eq!(
        n.p.certify(
            1,
            Some(&mut t),
            1,
            flags::TRX_START | flags::TRX_END,
            &mut meta
        ),
        status::CONN_FAIL
    );
    assert!(meta.gtid.is_undefined());
    n.p.release(1);
    // Certified victim behind the aborter: must replay.
    let mut h = trx("t", "y");
    let (_, m) = certify(&n.p, 2, &mut h);
    assert_eq!(
        n.p.abort_certification(m.gtid.seqno - 1, 2, &mut seqno),
        status::OK
    );
    assert_eq!(seqno, m.gtid.seqno);
    assert_eq!(n.p.commit_order_enter(2, &h, &m), status::BF_ABORT);
    // The replay applies its own writeset at its own seqno, then commits
    // in order like any local transaction; counted once as a replay.
    let Handle::Local(t2) = &h else {
        unreachable!("a local transaction")
    };
    let ws = wsrep_abi::WsHandle {
        trx_id: 2,
        opaque: std::ptr::null_mut(),
    };
    let recorder = (&*n.recorder as *const Recorder).cast_mut().cast();
    assert_eq!(n.p.replay_trx(&ws, t2, ThreadCtx(recorder)), status::OK);
    let replayed = format!(
        "apply {} flags {:#x} bytes {}",
        m.gtid.seqno,
        flags::TRX_START | flags::TRX_END,
        t2.replicated_data().len()
    );
    assert_eq!(n.events().last(), Some(&replayed));
    commit(&n.p, 2, &h, &m);
    let counters = n.p.lock().counters.clone();
    assert_eq!(
        (counters.local_replays, counters.local_cert_failures),
        (1, 0)
    );
    // A second replay request for the same transaction is refused.
    assert_eq!(
        n.p.replay_trx(&ws, t2, ThreadCtx(recorder)),
        status::TRX_FAIL
    );
    // Certified victim ahead of the aborter: refused.
    let mut h3 = trx("t", "z");
    let (_, m3) = certify(&n.p, 3, &mut h3);
    assert_eq!(
        n.p.abort_certification(m3.gtid.seqno + 5, 3, &mut seqno),
        status::NOT_ALLOWED
    );
    n.stop();
}

#[test]
fn sync_wait_times_out_on_a_future_gtid_and_rejects_another_history() {
    let mut n = Node::start();
    let now = n.p.last_committed_id();
    let (rc, _) = n.p.sync_wait(
        Some(Gtid {
            uuid: now.uuid,
            seqno: now.seqno + 1,
        }),
        1,
    );
    assert_eq!(rc, status::TRX_FAIL);
    let (rc, at) = n.p.sync_wait(Some(now), 1);
    assert_eq!((rc, at), (status::OK, now));
    let other = Gtid {
        uuid: wsrep_abi::Uuid::from_bytes([7; 16]),
        seqno: 1,
    };
    assert_eq!(n.p.sync_wait(Some(other), 1).0, status::TRX_MISSING);
    let (rc, at) = n.p.sync_wait(None, -1);
    assert_eq!((rc, at), (status::OK, now));
    n.stop();
}

#[test]
fn pause_drains_and_saves_the_real_seqno_and_resume_clears_it() {
    let mut n = Node::start();
    let at = n.p.pause();
    assert_eq!(at, n.p.last_committed_id().seqno);
    assert_eq!(n.store.0.lock().unwrap().state.seqno, at);
    assert_eq!(n.p.resume(), status::OK);
    assert_eq!(n.store.0.lock().unwrap().state.seqno, -1);
    n.stop();
}

/// A view takes a seqno: while the provider is paused below it (a donor's
/// SST copying the storage), the server does not see it, as it does not
/// see a writeset's commit (MariaDB's galera_3nodes.GCF-376: the view was
/// stored in the copy without its position, and the joiner refused it).
#[test]
fn a_view_after_the_pause_point_waits_for_resume() {
    let mut n = Node::start();
    let at = n.p.pause();
    let mut next = n.p.lock().view.clone().expect("a primary view");
    next.state_id.seqno = at + 1;
    let want = format!("view {} members 1", at + 1);
    let p = n.p.clone();
    let ctx = &*n.recorder as *const Recorder as usize;
    let viewer =
        std::thread::spawn(move || p.deliver_primary_view(ThreadCtx(ctx as *mut c_void), next));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !n.events().contains(&want),
        "the server saw a view while the provider was paused before it"
    );
    assert_eq!(n.p.resume(), status::OK);
    n.wait_for(|n| n.events().contains(&want));
    assert!(viewer.join().unwrap().is_none(), "the view was taken");
    n.stop();
}

#[test]
fn desync_counts_and_the_last_resync_calls_synced_again() {
    let mut n = Node::start();
    assert_eq!(n.p.desync(), status::OK);
    assert_eq!(n.p.desync(), status::OK);
    assert_eq!(n.p.lock().local.state().wsrep_value(), 2);
    assert_eq!(n.p.resync(), status::OK);
    assert_eq!(n.p.resync(), status::OK);
    n.wait_for(|n| n.events().iter().filter(|e| *e == "synced").count() == 2);
    // One more resync is accepted and changes nothing (Galera accepts it:
    // after a rejoin the server's wsrep_desync=0 has no desync to undo).
    assert_eq!(n.p.resync(), status::OK);
    assert_eq!(n.p.lock().local.desync_count(), 0);
    assert_eq!(n.p.lock().local.state().wsrep_value(), 4);
    n.stop();
}

/// Every line logged through the server's logger while tests run (all
/// tests share the process-wide logger; callers filter by content).
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "C" fn capture_log(_level: i32, msg: *const std::ffi::c_char) {
    // SAFETY: `crate::log::log` passes a valid NUL-terminated string that
    // lives for the duration of this call.
    let text = unsafe { std::ffi::CStr::from_ptr(msg) };
    LOGGED
        .lock()
        .unwrap()
        .push(text.to_string_lossy().into_owned());
}

#[test]
fn a_failing_grastate_write_is_logged_not_fatal() {
    crate::log::install(Some(capture_log));
    let mut n = Node::start();
    n.store.0.lock().unwrap().fail_writes = true;
    // The clean close writes the final position: that write fails, the
    // failure is logged, and the close still succeeds.
    assert_eq!(n.stop(), status::OK);
    let failed = n.store.0.lock().unwrap().failed_writes;
    assert!(failed >= 1, "the close never tried to write grastate.dat");
    let logged = LOGGED
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("failed to write grastate.dat") && l.contains("injected failure"))
        .count();
    assert_eq!(logged, failed, "one error line per failed write");
}

#[test]
fn bad_inputs_fail_cleanly() {
    let mut n = Node::start();
    assert_eq!(n.p.options_set("no.such.option=1"), status::NODE_FAIL);
    assert_eq!(n.p.options_set("repl.max_ws_size=100"), status::OK);
    let mut h = trx("t", "big");
    let Handle::Local(t) = &mut h else {
        unreachable!("a local transaction")
    };
    // Appending beyond repl.max_ws_size keeps nothing more, and the
    // transaction fails at certification (never a truncated writeset).
    assert_eq!(
        n.p.append_data(t, 200, [&[0u8; 200][..]].into_iter()),
        status::OK
    );
    assert!(t.data.len() <= 100);
    let replicated = n.p.lock().counters.replicated;
    assert_eq!(certify(&n.p, 77, &mut h).0, status::SIZE_EXCEEDED);
    assert_eq!(n.p.lock().counters.replicated, replicated);
    assert_eq!(n.p.release(77), (status::OK, false));
    n.stop();
}

#[test]
fn reconnecting_after_disconnect_continues_the_history() {
    let mut n = Node::start();
    let before = n.p.last_committed_id();
    let p = n.p.clone();
    n.stop();
    assert_eq!(p.connect("test", "gcomm://", "", true), status::OK);
    let pa = p.clone();
    let applier = std::thread::spawn(move || pa.recv(ThreadCtx(std::ptr::null_mut())));
    n.wait_for(|n| n.p.last_committed_id().seqno == before.seqno + 1);
    assert_eq!(p.last_committed_id().uuid, before.uuid);
    assert_eq!(p.disconnect(), status::OK);
    assert_eq!(applier.join().unwrap(), status::OK);
    let second = format!("view {} members 1", before.seqno + 1);
    assert!(n.events().contains(&second), "{:?}", n.events());
    assert_eq!(
        n.events().last().map(String::as_str),
        Some("view -1 members 0")
    );
}

#[test]
fn joining_without_peers_is_refused_with_a_clear_error_and_bad_addresses_too() {
    let mut n = Node::start();
    let p = n.p.clone();
    n.stop();
    // The only listed address is this node's own.
    assert_eq!(
        p.connect("test", "gcomm://127.0.0.1:0", "", false),
        status::NODE_FAIL
    );
    assert_eq!(
        p.connect("test", "gcomm://host:notaport", "", true),
        status::NODE_FAIL
    );
    assert_eq!(p.connect("test", "tcp://x", "", true), status::NODE_FAIL);
}

#[test]
fn the_certification_index_is_purged_below_the_commit_cut() {
    let mut n = Node::start();
    for id in 1..=300u64 {
        let mut h = trx("t", &format!("row{id}"));
        let (rc, meta) = certify(&n.p, id, &mut h);
        assert_eq!(rc, status::OK);
        commit(&n.p, id, &h, &meta);
    }
    // Members report their commit position to the group periodically;
    // the index is purged when that report is ordered.
    n.wait_for(|n| {
        let g = n.p.lock();
        g.status.cert_stats.certified >= 300 && g.status.cert_index_size < 200
    });
    n.stop();
}

/// The option table's "honoured" marks match what this crate's code reads:
/// an option marked honoured is named in the provider's source (outside
/// the tests), and one accepted with no effect is not. Marking an option
/// honoured without code behind it, or reading one without marking it,
/// fails here (and so the README, generated from the marks, stays true).
#[test]
fn honoured_options_are_the_options_the_provider_reads() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut code = String::new();
    let mut dirs = vec![src];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                // Unit tests inside a module do not count as reading.
                let text = text.split("#[cfg(test)]").next().unwrap_or("");
                code.push_str(text);
            }
        }
    }
    // The core parses a few for the provider (`Limits::from_options`).
    let core = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../lockstep-core/src");
    let text = std::fs::read_to_string(core.join("flow_control.rs")).unwrap();
    code.push_str(text.split("#[cfg(test)]").next().unwrap_or(""));
    let mut wrong = Vec::new();
    for spec in lockstep_core::options::table::TABLE {
        let read = code.contains(&format!("\"{}\"", spec.name));
        let honoured = lockstep_core::options::is_honoured(spec.name);
        if read != honoured {
            wrong.push(format!(
                "{}: marked {}, but the provider {} it",
                spec.name,
                if honoured { "honoured" } else { "no-effect" },
                if read { "reads" } else { "never reads" }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One fragment of streaming transaction `id` with a row key, certified
/// with `wsflags`.
fn fragment(p: &Provider, id: u64, h: &mut Handle, row: &str, wsflags: u32) -> (i32, TrxMeta) {
    let Handle::Local(t) = h else {
        unreachable!("a local transaction")
    };
    t.keys.push(Key::new(
        vec![b"db".to_vec(), b"t".to_vec(), row.as_bytes().to_vec()],
        KeyType::Exclusive,
    ));
    t.data = format!("fragment {row}").into_bytes();
    let mut meta = TrxMeta::undefined();
    let rc = p.certify(id, Some(t), 1, wsflags, &mut meta);
    (rc, meta)
}

/// A fragment's storage transaction passes commit order; `release` says
/// whether the object lives on.
fn store_fragment(p: &Provider, id: u64, h: &mut Handle, meta: &TrxMeta) -> (i32, bool) {
    assert_eq!(p.commit_order_enter(id, h, meta), status::OK);
    assert_eq!(p.commit_order_leave(id, h, meta, &[]), status::OK);
    let released = p.release(id);
    if released.1 {
        let Handle::Local(t) = h else {
            unreachable!("a local transaction")
        };
        t.start_next_fragment();
    }
    released
}

#[test]
fn a_streaming_transaction_keeps_its_object_from_fragment_to_fragment() {
    let mut n = Node::start();
    let mut h = Handle::Local(LocalTrx::default());
    n.p.begin_trx(5);
    let (rc, m1) = fragment(&n.p, 5, &mut h, "a", flags::TRX_START);
    assert_eq!(rc, status::OK);
    assert_eq!(store_fragment(&n.p, 5, &mut h, &m1), (status::OK, true));
    let Handle::Local(t) = &h else {
        unreachable!("a local transaction")
    };
    assert!(
        t.data.is_empty() && t.keys.is_empty(),
        "the next fragment starts empty"
    );
    // Between fragments the transaction executes again: a BF abort would
    // mark it (checked in the next test), and the next fragment certifies.
    let (rc, m2) = fragment(&n.p, 5, &mut h, "b", 0);
    assert_eq!(rc, status::OK);
    assert!(m2.gtid.seqno > m1.gtid.seqno);
    assert_eq!(store_fragment(&n.p, 5, &mut h, &m2), (status::OK, true));
    let (rc, m3) = fragment(&n.p, 5, &mut h, "c", flags::TRX_END | flags::PA_UNSAFE);
    assert_eq!(rc, status::OK);
    assert_eq!(store_fragment(&n.p, 5, &mut h, &m3), (status::OK, false));
    assert_eq!(n.p.last_committed_id().seqno, m3.gtid.seqno);
    assert!(!n.p.lock().trxs.contains(5), "the final release drops it");
    assert_eq!(n.p.lock().counters.local_commits, 1, "one transaction");
    n.stop();
}

#[test]
fn a_bf_aborted_open_fragment_fails_instead_of_replaying() {
    let mut n = Node::start();
    let mut seqno = 0;
    // Certified, waiting for commit order: aborted even by an earlier
    // seqno (an open fragment commits nothing), then TRX_FAIL; its seqno
    // still passes the gates at release.
    let mut h = Handle::Local(LocalTrx::default());
    n.p.begin_trx(6);
    let (_, m) = fragment(&n.p, 6, &mut h, "a", flags::TRX_START);
    assert_eq!(
        n.p.abort_certification(m.gtid.seqno - 1, 6, &mut seqno),
        status::OK
    );
    assert_eq!(n.p.commit_order_enter(6, &h, &m), status::TRX_FAIL);
    assert_eq!(n.p.release(6), (status::OK, false));
    assert_eq!(n.p.last_committed_id().seqno, m.gtid.seqno);
    // Inside commit order: the abort is deferred to release (BF_ABORT).
    let mut h = Handle::Local(LocalTrx::default());
    n.p.begin_trx(7);
    let (_, m) = fragment(&n.p, 7, &mut h, "b", flags::TRX_START);
    assert_eq!(n.p.commit_order_enter(7, &h, &m), status::OK);
    assert_eq!(
        n.p.abort_certification(m.gtid.seqno + 1, 7, &mut seqno),
        status::OK
    );
    assert_eq!(n.p.commit_order_leave(7, &h, &m, &[]), status::OK);
    assert_eq!(n.p.release(7), (status::BF_ABORT, false));
    assert_eq!(n.p.last_committed_id().seqno, m.gtid.seqno);
    // A final writeset in the same place is refused, as before.
    let mut f = trx("t", "c");
    let (_, m) = certify(&n.p, 8, &mut f);
    assert_eq!(n.p.commit_order_enter(8, &f, &m), status::OK);
    assert_eq!(
        n.p.abort_certification(m.gtid.seqno + 1, 8, &mut seqno),
        status::NOT_ALLOWED
    );
    assert_eq!(n.p.commit_order_leave(8, &f, &m, &[]), status::OK);
    assert_eq!(n.p.release(8), (status::OK, false));
    n.stop();
}

#[test]
fn rollback_sends_a_rollback_writeset_that_comes_back_to_this_node() {
    let mut n = Node::start();
    let mut h = Handle::Local(LocalTrx::default());
    n.p.begin_trx(9);
    let (_, m) = fragment(&n.p, 9, &mut h, "a", flags::TRX_START);
    assert_eq!(store_fragment(&n.p, 9, &mut h, &m), (status::OK, true));
    // The server rolls the transaction back: rollback() returns at once,
    // the local object is marked, and the ROLLBACK writeset is ordered and
    // applied here like a remote one, with no data.
    assert_eq!(n.p.rollback(9), status::OK);
    let Handle::Local(t) = &mut h else {
        unreachable!("a local transaction")
    };
    let mut meta = TrxMeta::undefined();
    assert_eq!(
        n.p.certify(9, Some(t), 1, 0, &mut meta),
        status::CONN_FAIL,
        "a rolled-back streaming transaction replicates nothing more"
    );
    assert_eq!(n.p.release(9), (status::OK, false));
    let want = format!(
        "apply {} flags {:#x} bytes 0",
        m.gtid.seqno + 1,
        flags::ROLLBACK | flags::PA_UNSAFE
    );
    n.wait_for(|n| n.events().contains(&want));
    n.wait_for(|n| n.p.last_committed_id().seqno == m.gtid.seqno + 1);
    assert!(!n.p.lock().proposals.any_detached());
    n.stop();
}

/// A bug that kills the group thread must not leave a node that looks
/// Synced while nothing orders for it: it leaves as an inconsistent node
/// does, with the final view, and refuses writes.
#[test]
fn a_panic_in_the_group_thread_makes_the_node_leave_with_the_final_view() {
    let mut n = Node::start();
    let tx = n.p.lock().group.as_ref().expect("connected").tx.clone();
    tx.send(crate::group_input::Input::Panic).unwrap();
    // The applier delivers the final view and returns.
    let applier = n.applier.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !applier.is_finished() {
        assert!(Instant::now() < deadline, "the applier still runs");
        std::thread::sleep(Duration::from_millis(5));
    }
    applier.join().unwrap();
    let events = n.events();
    assert_eq!(
        events.last().map(String::as_str),
        Some("view -1 members 0"),
        "{events:?}"
    );
    assert_ne!(n.p.lock().local.state().comment(), "Synced");
    let mut h = trx("t", "after");
    let (rc, _) = certify(&n.p, 99, &mut h);
    assert_ne!(rc, status::OK, "a node without a group thread took a write");
}

#[test]
fn member_ids_sort_in_start_order() {
    use crate::session::time_ordered_uuid;
    let t = std::time::UNIX_EPOCH + Duration::from_millis(1_764_000_000_000);
    let ids: Vec<_> = (0..50)
        .map(|i| time_ordered_uuid(t + Duration::from_millis(i)))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let (a, b) = (time_ordered_uuid(t), time_ordered_uuid(t));
    assert_ne!(a, b, "random below the millisecond");
    assert_eq!(
        (a.data[6] >> 4, a.data[8] >> 6),
        (7, 0b10),
        "version 7, RFC 4122 variant"
    );
}
