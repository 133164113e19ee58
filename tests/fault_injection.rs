//! A provider bug inside a real node (issue 13): the group thread of one
//! member of three panics. The node must not go on looking Synced while
//! nothing orders for it: it leaves the cluster as an inconsistent node
//! does (final view, `wsrep_ready=OFF`, writes refused) while `mariadbd`
//! stays up for the operator, the other two keep committing, and after a
//! restart the node is a member again with the same data as the others.
//!
//! The panic comes from a test-only build of the library (cargo feature
//! `fault-injection`, built here into `target/fault-injection/`): the
//! library users load has no way to trigger it.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lockstep_testkit::{AckedLoad, Cluster, Provider};
use multi_node::{check, log_count, status, OrLogs};

const WAIT: Duration = Duration::from_secs(120);

/// liblockstep.so with the `fault-injection` feature, in a target directory
/// of its own so it never replaces the library the other tests load.
fn fault_injection_library() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("fault-injection");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "lockstep-provider"])
        .args(["--features", "fault-injection", "--target-dir"])
        .arg(&target)
        .current_dir(&workspace)
        .status()
        .expect("running cargo to build the fault-injection library");
    assert!(
        status.success(),
        "building the fault-injection library failed"
    );
    let lib = target.join("release").join(lockstep_testkit::LOCKSTEP_LIB);
    assert!(lib.is_file(), "{} missing after cargo build", lib.display());
    lib
}

#[test]
fn a_panic_in_the_group_thread_takes_the_node_out_and_the_others_go_on() {
    let provider = Provider::Lockstep(fault_injection_library());
    let mut cluster = Cluster::builder(3)
        .provider(provider)
        .cluster_name("group_panic")
        .provider_options("evs.suspect_timeout=PT3S")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 nodes: {e}"));
    cluster
        .node(0)
        .sql("CREATE DATABASE c; CREATE TABLE c.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create database");
    let load = AckedLoad::start(&cluster, "c.acked").or_logs(&cluster, "start the load");
    load.wait_for_progress(100, WAIT)
        .or_logs(&cluster, "load before the fault");

    // The bug: node3's group thread panics.
    cluster
        .node(2)
        .sql("SET GLOBAL wsrep_provider_options='lockstep.inject=group_panic'")
        .or_logs(&cluster, "inject the panic");
    // It leaves with the final view, as a node that finds itself
    // inconsistent does: the applier returns NODE_FAIL, the server stays
    // up but disconnected (wsrep_ready=OFF) and refuses writes, so no
    // client is told a commit that did not replicate.
    let node3 = cluster.node(2);
    node3
        .wait_until("node3 leaves", WAIT, |n| {
            let ready = n.status("wsrep_ready")?.unwrap_or_default();
            Ok((ready == "OFF", format!("wsrep_ready={ready}")))
        })
        .or_logs(&cluster, "node3 stops serving");
    for line in [
        "the group thread failed: injected by a test",
        "Applier thread exiting ret: 7",
    ] {
        check(&cluster, log_count(node3, line) == 1, || {
            format!("node3's log does not say once: {line}")
        });
    }
    check(&cluster, node3.is_running(), || {
        "mariadbd on node3 died with its group thread".into()
    });
    let st = status(node3, "wsrep_local_state_comment").or_logs(&cluster, "state");
    check(&cluster, st != "Synced", || {
        format!("node3 still says {st} without a group thread")
    });
    // The other two see it go and keep committing.
    refuses_writes_while_the_others_commit(&cluster, &load, "without a group thread");

    // Restarted, node3 is a member again and has every acknowledged row.
    let r = cluster.node_mut(2).restart();
    r.or_logs(&cluster, "restart node3");
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "three members again");
    }
    multi_node::verify_acked_rows(&cluster, &load.stop(), 200, "the restart");
}

/// node3, out of the cluster, refuses a write; the other two see it go
/// and keep committing.
fn refuses_writes_while_the_others_commit(cluster: &Cluster, load: &AckedLoad, how: &str) {
    let write = cluster.node(2).sql("INSERT INTO c.t VALUES (1)");
    check(cluster, write.is_err(), || {
        format!("node3 took a write {how}")
    });
    for i in 0..2 {
        cluster
            .node(i)
            .wait_for_status("wsrep_cluster_size", "2", WAIT)
            .or_logs(cluster, "two members left");
    }
    load.wait_for_progress(100, WAIT)
        .or_logs(cluster, &format!("commits on the other two, node3 {how}"));
}

/// Unmounts a test's file system even when an assertion fails.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Issue 52 item 2: a full disk under the writeset cache (a real `ENOSPC`:
/// node3's `gcache.dir` on a 1 MiB tmpfs) must not leave the node
/// acknowledging commits without its cache, which flush-0 recovery relies
/// on (ADR 0026). The first event it cannot cache fails: the node stops
/// acknowledging and leaves the cluster with the reason in its log and in
/// `wsrep_lockstep_cache_failure`; `mariadbd` stays up for the operator;
/// the other two keep committing. With the disk fixed and node3 restarted,
/// every acknowledged insert, node3's own included, is on every node.
#[test]
fn a_full_cache_disk_takes_the_node_out_before_it_acknowledges_without_the_cache() {
    full_cache_disk(false);
}

/// The same with `lockstep.cache_sync=yes`, where the cache writes zeros
/// ahead of its records (`AppendFile::reserve`): the `ENOSPC` comes from
/// the reservation, on a 2 MiB disk, and takes the node out the same way.
#[test]
fn with_cache_sync_a_full_cache_disk_takes_the_node_out_the_same_way() {
    full_cache_disk(true);
}

fn full_cache_disk(sync: bool) {
    let (options, size) = if sync {
        (
            "evs.suspect_timeout=PT3S; lockstep.cache_sync=yes",
            "size=2m",
        )
    } else {
        ("evs.suspect_timeout=PT3S", "size=1m")
    };
    let mut cluster = Cluster::builder(3)
        .cluster_name("cache_enospc")
        .provider_options(options)
        .start()
        .unwrap_or_else(|e| panic!("starting 3 nodes: {e}"));
    cluster
        .node(0)
        .sql("CREATE DATABASE c; CREATE TABLE c.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create database");

    // node3's cache moves onto a small file system.
    let small = cluster.base_dir().join("node3-small-disk");
    std::fs::create_dir_all(&small).expect("a mount point");
    cluster.node_mut(2).stop().or_logs(&cluster, "stop node3");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("{size},mode=0777"), "tmpfs"])
        .arg(&small)
        .status()
        .is_ok_and(|s| s.success());
    check(&cluster, mounted, || {
        format!(
            "mounting a {size} tmpfs on {} failed: this test needs root (make test runs as root)",
            small.display()
        )
    });
    let _mount = Mounted(small.clone());
    let dir = small.display().to_string();
    multi_node::edit_cnf(cluster.node(2), |text| {
        text.replace(
            "wsrep_provider_options=\"",
            &format!("wsrep_provider_options=\"gcache.dir={dir}; "),
        )
    });
    cluster
        .node_mut(2)
        .start()
        .or_logs(&cluster, "node3 on the small disk");
    for n in cluster.nodes() {
        n.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "three members");
    }

    let load = AckedLoad::start(&cluster, "c.acked").or_logs(&cluster, "start the load");
    let node3 = cluster.node(2);
    node3
        .wait_until("node3 to leave on the full disk", WAIT, |n| {
            let ready = n.status("wsrep_ready")?.unwrap_or_default();
            Ok((ready == "OFF", format!("wsrep_ready={ready}")))
        })
        .or_logs(&cluster, "node3 stops serving");
    let why = status(node3, "wsrep_lockstep_cache_failure").or_logs(&cluster, "the status");
    check(&cluster, why.contains("No space left on device"), || {
        format!("wsrep_lockstep_cache_failure = {why:?}")
    });
    check(
        &cluster,
        log_count(
            node3,
            "this node leaves the cluster (every commit it acknowledged is in the cache)",
        ) == 1,
        || "node3's log does not say once why it left".into(),
    );
    check(&cluster, node3.is_running(), || {
        "mariadbd on node3 died with its cache".into()
    });
    refuses_writes_while_the_others_commit(&cluster, &load, "without its cache");

    // The disk fixed (the cache back in the datadir), node3 comes back.
    cluster.node_mut(2).stop().or_logs(&cluster, "stop node3");
    multi_node::edit_cnf(cluster.node(2), |text| {
        text.replace(&format!("gcache.dir={dir}; "), "")
    });
    cluster
        .node_mut(2)
        .start()
        .or_logs(&cluster, "restart node3");
    for n in cluster.nodes() {
        n.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "three members again");
    }
    multi_node::verify_acked_rows(&cluster, &load.stop(), 100, "the full disk");
}
