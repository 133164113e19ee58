//! Pins the size, alignment and every field offset of the v26 ABI types to
//! the values in the provider contract (§1.5, x86_64 LP64).

use core::ffi::{c_char, c_void};
use core::mem::{align_of, offset_of, size_of};

use wsrep_abi::*;

#[test]
fn scalars() {
    assert_eq!(size_of::<bool>(), 1);
    assert_eq!(size_of::<Status>(), 4);
    assert_eq!(size_of::<CbStatus>(), 4);
    assert_eq!(size_of::<EncIv>(), 32);
    assert_eq!(size_of::<*const c_void>(), 8);
    assert_eq!(size_of::<usize>(), 8);
    // NULL function pointers are representable and pointer-sized.
    assert_eq!(size_of::<Option<InitFn>>(), 8);
    assert_eq!(size_of::<Option<LoggerCb>>(), 8);
    assert_eq!(size_of::<StaticCStr>(), 8);
}

#[test]
fn uuid() {
    assert_eq!(size_of::<Uuid>(), 16);
    assert_eq!(align_of::<Uuid>(), 8);
    assert_eq!(offset_of!(Uuid, data), 0);
}

#[test]
fn gtid() {
    assert_eq!(size_of::<Gtid>(), 24);
    assert_eq!(align_of::<Gtid>(), 8);
    assert_eq!(offset_of!(Gtid, uuid), 0);
    assert_eq!(offset_of!(Gtid, seqno), 16);
}

#[test]
fn stid() {
    assert_eq!(size_of::<Stid>(), 32);
    assert_eq!(align_of::<Stid>(), 8);
    assert_eq!(offset_of!(Stid, node), 0);
    assert_eq!(offset_of!(Stid, trx), 16);
    assert_eq!(offset_of!(Stid, conn), 24);
}

#[test]
fn trx_meta() {
    assert_eq!(size_of::<TrxMeta>(), 64);
    assert_eq!(align_of::<TrxMeta>(), 8);
    assert_eq!(offset_of!(TrxMeta, gtid), 0);
    assert_eq!(offset_of!(TrxMeta, stid), 24);
    assert_eq!(offset_of!(TrxMeta, depends_on), 56);
}

#[test]
fn buf_handle_key() {
    assert_eq!(size_of::<Buf>(), 16);
    assert_eq!(offset_of!(Buf, ptr), 0);
    assert_eq!(offset_of!(Buf, len), 8);
    assert_eq!(size_of::<EncKey>(), 16);

    assert_eq!(size_of::<WsHandle>(), 16);
    assert_eq!(offset_of!(WsHandle, trx_id), 0);
    assert_eq!(offset_of!(WsHandle, opaque), 8);

    assert_eq!(size_of::<Key>(), 16);
    assert_eq!(offset_of!(Key, key_parts), 0);
    assert_eq!(offset_of!(Key, key_parts_num), 8);
}

#[test]
fn member_info() {
    assert_eq!(size_of::<MemberInfo>(), 304);
    assert_eq!(align_of::<MemberInfo>(), 8);
    assert_eq!(offset_of!(MemberInfo, id), 0);
    assert_eq!(offset_of!(MemberInfo, name), 16);
    assert_eq!(offset_of!(MemberInfo, incoming), 48);
    assert_eq!(MEMBER_NAME_LEN, 32);
    assert_eq!(INCOMING_LEN, 256);
}

#[test]
fn view_info() {
    assert_eq!(size_of::<ViewInfo>(), 360);
    assert_eq!(align_of::<ViewInfo>(), 8);
    assert_eq!(offset_of!(ViewInfo, state_id), 0);
    assert_eq!(offset_of!(ViewInfo, view), 24);
    assert_eq!(offset_of!(ViewInfo, status), 32);
    assert_eq!(offset_of!(ViewInfo, capabilities), 36);
    assert_eq!(offset_of!(ViewInfo, my_idx), 40);
    assert_eq!(offset_of!(ViewInfo, memb_num), 44);
    assert_eq!(offset_of!(ViewInfo, proto_ver), 48);
    assert_eq!(offset_of!(ViewInfo, members), 56);
    assert_eq!(VIEW_INFO_FIXED_SIZE, 56);
    assert_eq!(view_info_alloc_size(0), 56 + 304);
    assert_eq!(view_info_alloc_size(4), 56 + 4 * 304);
}

#[test]
fn wsrep_t() {
    assert_eq!(size_of::<Wsrep>(), 360);
    assert_eq!(align_of::<Wsrep>(), 8);
    let rows: [(usize, &str, usize, usize); 45] = [
        (0, "version", offset_of!(Wsrep, version), 0),
        (1, "init", offset_of!(Wsrep, init), 8),
        (2, "capabilities", offset_of!(Wsrep, capabilities), 16),
        (3, "options_set", offset_of!(Wsrep, options_set), 24),
        (4, "options_get", offset_of!(Wsrep, options_get), 32),
        (5, "enc_set_key", offset_of!(Wsrep, enc_set_key), 40),
        (6, "connect", offset_of!(Wsrep, connect), 48),
        (7, "disconnect", offset_of!(Wsrep, disconnect), 56),
        (8, "recv", offset_of!(Wsrep, recv), 64),
        (
            9,
            "assign_read_view",
            offset_of!(Wsrep, assign_read_view),
            72,
        ),
        (10, "certify", offset_of!(Wsrep, certify), 80),
        (
            11,
            "commit_order_enter",
            offset_of!(Wsrep, commit_order_enter),
            88,
        ),
        (
            12,
            "commit_order_leave",
            offset_of!(Wsrep, commit_order_leave),
            96,
        ),
        (13, "release", offset_of!(Wsrep, release), 104),
        (14, "replay_trx", offset_of!(Wsrep, replay_trx), 112),
        (
            15,
            "abort_certification",
            offset_of!(Wsrep, abort_certification),
            120,
        ),
        (16, "rollback", offset_of!(Wsrep, rollback), 128),
        (17, "append_key", offset_of!(Wsrep, append_key), 136),
        (18, "append_data", offset_of!(Wsrep, append_data), 144),
        (19, "sync_wait", offset_of!(Wsrep, sync_wait), 152),
        (
            20,
            "last_committed_id",
            offset_of!(Wsrep, last_committed_id),
            160,
        ),
        (
            21,
            "free_connection",
            offset_of!(Wsrep, free_connection),
            168,
        ),
        (
            22,
            "to_execute_start",
            offset_of!(Wsrep, to_execute_start),
            176,
        ),
        (23, "to_execute_end", offset_of!(Wsrep, to_execute_end), 184),
        (
            24,
            "preordered_collect",
            offset_of!(Wsrep, preordered_collect),
            192,
        ),
        (
            25,
            "preordered_commit",
            offset_of!(Wsrep, preordered_commit),
            200,
        ),
        (26, "sst_sent", offset_of!(Wsrep, sst_sent), 208),
        (27, "sst_received", offset_of!(Wsrep, sst_received), 216),
        (28, "snapshot", offset_of!(Wsrep, snapshot), 224),
        (29, "stats_get", offset_of!(Wsrep, stats_get), 232),
        (30, "stats_free", offset_of!(Wsrep, stats_free), 240),
        (31, "stats_reset", offset_of!(Wsrep, stats_reset), 248),
        (32, "pause", offset_of!(Wsrep, pause), 256),
        (33, "resume", offset_of!(Wsrep, resume), 264),
        (34, "desync", offset_of!(Wsrep, desync), 272),
        (35, "resync", offset_of!(Wsrep, resync), 280),
        (36, "lock", offset_of!(Wsrep, lock), 288),
        (37, "unlock", offset_of!(Wsrep, unlock), 296),
        (38, "is_locked", offset_of!(Wsrep, is_locked), 304),
        (39, "provider_name", offset_of!(Wsrep, provider_name), 312),
        (
            40,
            "provider_version",
            offset_of!(Wsrep, provider_version),
            320,
        ),
        (
            41,
            "provider_vendor",
            offset_of!(Wsrep, provider_vendor),
            328,
        ),
        (42, "free", offset_of!(Wsrep, free), 336),
        (43, "dlh", offset_of!(Wsrep, dlh), 344),
        (44, "ctx", offset_of!(Wsrep, ctx), 352),
    ];
    for (i, name, actual, expected) in rows {
        assert_eq!(actual, expected, "field #{i} {name}");
    }
}

#[test]
fn init_args() {
    assert_eq!(size_of::<InitArgs>(), 144);
    assert_eq!(align_of::<InitArgs>(), 8);
    assert_eq!(offset_of!(InitArgs, app_ctx), 0);
    assert_eq!(offset_of!(InitArgs, node_name), 8);
    assert_eq!(offset_of!(InitArgs, node_address), 16);
    assert_eq!(offset_of!(InitArgs, node_incoming), 24);
    assert_eq!(offset_of!(InitArgs, data_dir), 32);
    assert_eq!(offset_of!(InitArgs, options), 40);
    assert_eq!(offset_of!(InitArgs, proto_ver), 48);
    assert_eq!(offset_of!(InitArgs, state_id), 56);
    assert_eq!(offset_of!(InitArgs, state), 64);
    assert_eq!(offset_of!(InitArgs, logger_cb), 72);
    assert_eq!(offset_of!(InitArgs, connected_cb), 80);
    assert_eq!(offset_of!(InitArgs, view_cb), 88);
    assert_eq!(offset_of!(InitArgs, sst_request_cb), 96);
    assert_eq!(offset_of!(InitArgs, encrypt_cb), 104);
    assert_eq!(offset_of!(InitArgs, apply_cb), 112);
    assert_eq!(offset_of!(InitArgs, unordered_cb), 120);
    assert_eq!(offset_of!(InitArgs, sst_donate_cb), 128);
    assert_eq!(offset_of!(InitArgs, synced_cb), 136);
}

#[test]
fn stats_var() {
    assert_eq!(size_of::<StatsVar>(), 24);
    assert_eq!(align_of::<StatsVar>(), 8);
    assert_eq!(offset_of!(StatsVar, name), 0);
    assert_eq!(offset_of!(StatsVar, type_), 8);
    assert_eq!(offset_of!(StatsVar, value), 16);
    assert_eq!(size_of::<StatsValue>(), 8);
}

#[test]
fn other_structs() {
    assert_eq!(size_of::<PoHandle>(), 8);
    assert_eq!(offset_of!(PoHandle, opaque), 0);

    assert_eq!(size_of::<EncCtx>(), 24);
    assert_eq!(offset_of!(EncCtx, key), 0);
    assert_eq!(offset_of!(EncCtx, iv), 8);
    assert_eq!(offset_of!(EncCtx, ctx), 16);

    assert_eq!(size_of::<SeqCb>(), 16);
    assert_eq!(offset_of!(SeqCb, ctx), 0);
    assert_eq!(offset_of!(SeqCb, func), 8);

    assert_eq!(size_of::<AllowlistService>(), 16);
    assert_eq!(offset_of!(AllowlistService, allowlist_cb), 0);
    assert_eq!(offset_of!(AllowlistService, context), 8);
}

#[test]
fn constant_values() {
    assert_eq!(INTERFACE_VERSION.to_bytes(), b"26");
    assert_eq!(SEQNO_UNDEFINED, -1);
    assert_eq!(STATE_TRANSFER_TRIVIAL, "trivial");
    assert_eq!(STATE_TRANSFER_NONE, "none");

    assert_eq!(
        [
            status::OK,
            status::WARNING,
            status::TRX_MISSING,
            status::TRX_FAIL,
            status::BF_ABORT,
            status::SIZE_EXCEEDED,
            status::CONN_FAIL,
            status::NODE_FAIL,
            status::FATAL,
            status::NOT_IMPLEMENTED,
            status::NOT_ALLOWED
        ],
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    );
    assert!(status::is_valid(status::NOT_ALLOWED) && !status::is_valid(11));
    assert_eq!((cb_status::SUCCESS, cb_status::FAILURE), (0, 1));
    assert_eq!(
        [
            log_level::FATAL,
            log_level::ERROR,
            log_level::WARN,
            log_level::INFO,
            log_level::DEBUG
        ],
        [0, 1, 2, 3, 4]
    );
    assert_eq!(
        [
            member_status::UNDEFINED,
            member_status::JOINER,
            member_status::DONOR,
            member_status::JOINED,
            member_status::SYNCED,
            member_status::ERROR,
            member_status::MAX
        ],
        [0, 1, 2, 3, 4, 5, 6]
    );
    assert_eq!(
        [
            view_status::PRIMARY,
            view_status::NON_PRIMARY,
            view_status::DISCONNECTED
        ],
        [0, 1, 2]
    );
    assert_eq!(
        [
            key_type::SHARED,
            key_type::REFERENCE,
            key_type::UPDATE,
            key_type::EXCLUSIVE
        ],
        [0, 1, 2, 3]
    );
    assert_eq!(
        [
            data_type::ORDERED,
            data_type::UNORDERED,
            data_type::ANNOTATION
        ],
        [0, 1, 2]
    );
    assert_eq!(
        [var_type::STRING, var_type::INT64, var_type::DOUBLE],
        [0, 1, 2]
    );
    assert_eq!([enc_direction::ENC, enc_direction::DEC], [0, 1]);

    let all_flags = flags::TRX_END
        | flags::ROLLBACK
        | flags::ISOLATION
        | flags::PA_UNSAFE
        | flags::COMMUTATIVE
        | flags::NATIVE
        | flags::TRX_START
        | flags::TRX_PREPARE
        | flags::SNAPSHOT
        | flags::IMPLICIT_DEPS;
    assert_eq!(all_flags, flags::MASK);
    assert_eq!(flags::MASK, 0x3FF);
    assert_eq!((flags::TRX_START, flags::IMPLICIT_DEPS), (64, 512));

    // Galera 26.4 at protocol 11 reports 0x2D17F.
    let galera = caps::MULTI_MASTER
        | caps::CERTIFICATION
        | caps::PARALLEL_APPLYING
        | caps::TRX_REPLAY
        | caps::ISOLATION
        | caps::PAUSE
        | caps::CAUSAL_READS
        | caps::INCREMENTAL_WRITESET
        | caps::UNORDERED
        | caps::PREORDERED
        | caps::STREAMING
        | caps::NBO;
    assert_eq!(galera, 0x2D17F);
    assert_eq!(caps::CAUSAL_TRX, 1 << 7);
    assert_eq!(caps::SESSION_LOCKS, 1 << 9);
    assert_eq!(caps::DISTRIBUTED_LOCKS, 1 << 10);
    assert_eq!(caps::CONSISTENCY_CHECK, 1 << 11);
    assert_eq!(caps::ANNOTATION, 1 << 13);
    assert_eq!(caps::SNAPSHOT, 1 << 16);
    assert_eq!(caps::ALL, 0x3FFFF);
}

#[test]
fn empty_tables() {
    let w = Wsrep::empty();
    // SAFETY: `version` points at the static "26" literal.
    let v = unsafe { core::ffi::CStr::from_ptr(w.version) };
    assert_eq!(v.to_bytes(), b"26");
    assert!(w.init.is_none() && w.free.is_none() && w.ctx.is_null());
    assert_eq!(w.missing_required().len(), 37);

    let args = InitArgs::default();
    assert!(args.options.is_null() && args.apply_cb.is_none());

    let end = StatsVar::END;
    assert!(end.is_end());
    let name = c"local_state";
    let s = StatsVar::int64(name.as_ptr(), 4);
    assert!(!s.is_end());
    // SAFETY: built with `int64`.
    assert_eq!(unsafe { s.value.int64 }, 4);
    let _: *const c_char = StatsVar::string(name.as_ptr(), name.as_ptr()).name;

    static VERSION: StaticCStr = StaticCStr::new(INTERFACE_VERSION);
    assert_eq!(VERSION.as_ptr(), INTERFACE_VERSION.as_ptr());
}
