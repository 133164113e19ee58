//! `wsrep_member_info_t`, `wsrep_view_info_t` and an owned, correctly
//! sized and aligned view buffer to pass to `connected_cb` / `view_cb`.

use core::ffi::c_char;
use core::fmt;
use core::mem::{offset_of, size_of};
use core::ptr;

use crate::consts::{INCOMING_LEN, MEMBER_NAME_LEN};
use crate::uuid::{Gtid, Uuid};

/// `wsrep_member_info_t`: one member of a view.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MemberInfo {
    /// Member id (the `stid.node` of its writesets).
    pub id: Uuid,
    /// Node name, NUL-terminated if shorter than 32 bytes.
    pub name: [c_char; MEMBER_NAME_LEN],
    /// Client-facing address, NUL-terminated if shorter than 256 bytes.
    pub incoming: [c_char; INCOMING_LEN],
}

/// Copies the longest prefix of `src` that ends before any NUL, fits in
/// `dst.len() - 1` bytes and ends on a UTF-8 character boundary. The rest of
/// `dst` is zeroed, so the result is always NUL-terminated.
fn fill_c_field(dst: &mut [c_char], src: &str) {
    let src = src.split('\0').next().unwrap_or("");
    let mut n = src.len().min(dst.len() - 1);
    while !src.is_char_boundary(n) {
        n -= 1;
    }
    dst.fill(0);
    for (d, &s) in dst.iter_mut().zip(&src.as_bytes()[..n]) {
        *d = s as c_char;
    }
}

/// The bytes of a fixed C field up to its first NUL (or the whole field),
/// like `strnlen`.
fn c_field_bytes(field: &[c_char]) -> &[u8] {
    let len = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    // SAFETY: `c_char` is `i8` or `u8`, both with the size and alignment of
    // `u8` and no invalid bit patterns; `len <= field.len()`.
    unsafe { core::slice::from_raw_parts(field.as_ptr().cast::<u8>(), len) }
}

impl MemberInfo {
    /// A member with every byte zero (nil id, empty strings).
    pub const ZEROED: MemberInfo = MemberInfo {
        id: Uuid::NIL,
        name: [0; MEMBER_NAME_LEN],
        incoming: [0; INCOMING_LEN],
    };

    /// Builds a member. `name` is cut to at most 31 bytes and `incoming` to
    /// at most 255 bytes (at a UTF-8 character boundary, and at the first
    /// NUL if any); both fields are always NUL-terminated.
    pub fn new(id: Uuid, name: &str, incoming: &str) -> MemberInfo {
        let mut m = MemberInfo::ZEROED;
        m.id = id;
        fill_c_field(&mut m.name, name);
        fill_c_field(&mut m.incoming, incoming);
        m
    }

    /// The name bytes up to the first NUL (at most 32).
    pub fn name_bytes(&self) -> &[u8] {
        c_field_bytes(&self.name)
    }

    /// The incoming-address bytes up to the first NUL (at most 256).
    pub fn incoming_bytes(&self) -> &[u8] {
        c_field_bytes(&self.incoming)
    }

    /// The name as text (invalid UTF-8 replaced).
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(self.name_bytes()).into_owned()
    }

    /// The incoming address as text (invalid UTF-8 replaced).
    pub fn incoming_lossy(&self) -> String {
        String::from_utf8_lossy(self.incoming_bytes()).into_owned()
    }
}

impl Default for MemberInfo {
    fn default() -> MemberInfo {
        MemberInfo::ZEROED
    }
}

impl fmt::Debug for MemberInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemberInfo")
            .field("id", &self.id)
            .field("name", &self.name_lossy())
            .field("incoming", &self.incoming_lossy())
            .finish()
    }
}

/// `wsrep_view_info_t`: a group view. The C type ends in a flexible array
/// declared as `members[1]`; real views carry `memb_num` members and must be
/// allocated with [`view_info_alloc_size`] bytes (see [`ViewBuffer`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ViewInfo {
    /// History UUID and the seqno of this view.
    pub state_id: Gtid,
    /// View (configuration) number; `-1` for non-primary views.
    pub view: i64,
    /// One of [`crate::view_status`].
    pub status: i32,
    /// Capabilities agreed by the group ([`crate::caps`]).
    pub capabilities: u32,
    /// Index of this node in `members`, `-1` if absent.
    pub my_idx: i32,
    /// Number of members.
    pub memb_num: i32,
    /// Application protocol version agreed in the view.
    pub proto_ver: i32,
    /// First element of the flexible member array.
    pub members: [MemberInfo; 1],
}

/// Size of the fixed part of `wsrep_view_info_t` (the offset of `members`).
pub const VIEW_INFO_FIXED_SIZE: usize = offset_of!(ViewInfo, members);

/// Bytes needed for a `wsrep_view_info_t` with `memb_num` members:
/// `56 + max(memb_num, 1) * 304`.
pub const fn view_info_alloc_size(memb_num: usize) -> usize {
    let n = if memb_num == 0 { 1 } else { memb_num };
    VIEW_INFO_FIXED_SIZE + n * size_of::<MemberInfo>()
}

impl ViewInfo {
    /// The members of a view reached through a raw pointer, using its
    /// `memb_num` (negative counts give an empty slice).
    ///
    /// # Safety
    ///
    /// `view` must be non-NULL, aligned, and point at an initialised view of
    /// at least [`view_info_alloc_size`]`(memb_num)` bytes that stays valid
    /// and unmodified for `'a`. The pointer must be valid for that whole
    /// range (derive it from the allocation, not from a `&ViewInfo`).
    pub unsafe fn members_from_ptr<'a>(view: *const ViewInfo) -> &'a [MemberInfo] {
        // SAFETY: the caller guarantees `view` points at a valid view.
        let n = unsafe { (*view).memb_num };
        let n = usize::try_from(n).unwrap_or(0);
        // SAFETY: `members` lies inside the allocation; the caller
        // guarantees it holds `n` initialised members and lives for `'a`.
        unsafe {
            let first = ptr::addr_of!((*view).members).cast::<MemberInfo>();
            core::slice::from_raw_parts(first, n)
        }
    }
}

/// The fixed fields of a view, used to build a [`ViewBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewHeader {
    /// History UUID and the seqno of this view.
    pub state_id: Gtid,
    /// View number; `-1` for non-primary views.
    pub view: i64,
    /// One of [`crate::view_status`].
    pub status: i32,
    /// Capabilities agreed by the group.
    pub capabilities: u32,
    /// Index of this node in the members, `-1` if absent.
    pub my_idx: i32,
    /// Application protocol version.
    pub proto_ver: i32,
}

/// An owned `wsrep_view_info_t` with any number of members, in one
/// heap block of [`view_info_alloc_size`] bytes, 8-byte aligned, with all
/// padding zeroed. Pass [`ViewBuffer::as_ptr`] to `connected_cb`/`view_cb`;
/// the buffer must outlive the call.
pub struct ViewBuffer {
    /// Backing store; `u64` words give the 8-byte alignment `ViewInfo`
    /// needs.
    words: Vec<u64>,
}

const _: () = assert!(core::mem::align_of::<ViewInfo>() <= core::mem::align_of::<u64>());
const _: () = assert!(VIEW_INFO_FIXED_SIZE == 56 && core::mem::align_of::<MemberInfo>() == 8);

impl ViewBuffer {
    /// Builds a view with `header` and `members` (`memb_num` is
    /// `members.len()`).
    ///
    /// # Panics
    ///
    /// If `members.len()` does not fit in an `i32`.
    pub fn new(header: &ViewHeader, members: &[MemberInfo]) -> ViewBuffer {
        let memb_num = i32::try_from(members.len()).expect("too many view members");
        let bytes = view_info_alloc_size(members.len());
        let mut words = vec![0u64; bytes.div_ceil(size_of::<u64>())];
        let base = words.as_mut_ptr().cast::<u8>();
        let view = base.cast::<ViewInfo>();
        let first = base.wrapping_add(VIEW_INFO_FIXED_SIZE).cast::<MemberInfo>();
        debug_assert!(words.len() * size_of::<u64>() >= size_of::<ViewInfo>());
        // SAFETY: the block holds at least `view_info_alloc_size(n)` bytes,
        // which is >= `size_of::<ViewInfo>()` (360) and >= 56 + n * 304, so
        // every fixed field and member `i < n` lies inside it. It is aligned
        // for `ViewInfo`/`MemberInfo` (u64 storage, const-asserted above).
        // `base` is derived from the whole Vec buffer, so writes past
        // `members[0]` keep the allocation's provenance. Fields are written
        // one by one (never a whole struct) so the zeroed padding bytes at
        // 52..56 stay initialised zeros; the written types have no padding.
        unsafe {
            ptr::addr_of_mut!((*view).state_id).write(header.state_id);
            ptr::addr_of_mut!((*view).view).write(header.view);
            ptr::addr_of_mut!((*view).status).write(header.status);
            ptr::addr_of_mut!((*view).capabilities).write(header.capabilities);
            ptr::addr_of_mut!((*view).my_idx).write(header.my_idx);
            ptr::addr_of_mut!((*view).memb_num).write(memb_num);
            ptr::addr_of_mut!((*view).proto_ver).write(header.proto_ver);
            for (i, m) in members.iter().enumerate() {
                first.add(i).write(*m);
            }
        }
        ViewBuffer { words }
    }

    /// Pointer to pass to C. Valid while `self` lives and is not moved out
    /// of (moving the `ViewBuffer` itself does not move the heap block).
    pub fn as_ptr(&self) -> *const ViewInfo {
        self.words.as_ptr().cast()
    }

    /// Total size of the block in bytes (>= [`view_info_alloc_size`]).
    pub fn byte_len(&self) -> usize {
        self.words.len() * size_of::<u64>()
    }

    /// The fixed part of the view (and the first member slot).
    pub fn info(&self) -> &ViewInfo {
        // SAFETY: the block starts with a fully initialised, aligned
        // `ViewInfo` written in `new` and is at least that large.
        unsafe { &*self.as_ptr() }
    }

    /// All `memb_num` members.
    pub fn members(&self) -> &[MemberInfo] {
        // SAFETY: `as_ptr` is derived from the whole Vec buffer, which was
        // sized by `view_info_alloc_size(memb_num)` and holds `memb_num`
        // initialised members; it lives as long as `&self`.
        unsafe { ViewInfo::members_from_ptr(self.as_ptr()) }
    }
}

impl fmt::Debug for ViewBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.info();
        f.debug_struct("ViewBuffer")
            .field("state_id", &v.state_id)
            .field("view", &v.view)
            .field("status", &v.status)
            .field("capabilities", &v.capabilities)
            .field("my_idx", &v.my_idx)
            .field("memb_num", &v.memb_num)
            .field("proto_ver", &v.proto_ver)
            .field("members", &self.members())
            .finish()
    }
}

impl Clone for ViewBuffer {
    fn clone(&self) -> ViewBuffer {
        ViewBuffer {
            words: self.words.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view_status;

    fn header() -> ViewHeader {
        ViewHeader {
            state_id: Gtid::new(Uuid::from_bytes([7; 16]), 12),
            view: 3,
            status: view_status::PRIMARY,
            capabilities: 0x2D17F,
            my_idx: 1,
            proto_ver: 4,
        }
    }

    #[test]
    fn member_info_fits_and_terminates() {
        let m = MemberInfo::new(Uuid::from_bytes([1; 16]), "node1", "127.0.0.1:3306");
        assert_eq!(m.name_bytes(), b"node1");
        assert_eq!(m.incoming_bytes(), b"127.0.0.1:3306");
        assert_eq!(m.name_lossy(), "node1");
        assert!(m.name[5..].iter().all(|&c| c == 0));
        assert!(m.incoming[14..].iter().all(|&c| c == 0));
    }

    #[test]
    fn member_info_truncates() {
        let long_name = "n".repeat(100);
        let long_inc = "i".repeat(1000);
        let m = MemberInfo::new(Uuid::NIL, &long_name, &long_inc);
        assert_eq!(m.name_bytes(), &long_name.as_bytes()[..31]);
        assert_eq!(m.name[31], 0);
        assert_eq!(m.incoming_bytes(), &long_inc.as_bytes()[..255]);
        assert_eq!(m.incoming[255], 0);

        // Exactly at the limit.
        let m = MemberInfo::new(Uuid::NIL, &"a".repeat(31), &"b".repeat(255));
        assert_eq!(m.name_bytes().len(), 31);
        assert_eq!(m.incoming_bytes().len(), 255);
        let m = MemberInfo::new(Uuid::NIL, &"a".repeat(32), &"b".repeat(256));
        assert_eq!(m.name_bytes().len(), 31);
        assert_eq!(m.incoming_bytes().len(), 255);
    }

    #[test]
    fn member_info_truncates_on_char_boundary_and_nul() {
        // 30 ASCII bytes then a 2-byte character: byte 31 would split it.
        let name = format!("{}é", "x".repeat(30));
        let m = MemberInfo::new(Uuid::NIL, &name, "a\0b");
        assert_eq!(m.name_bytes(), "x".repeat(30).as_bytes());
        assert_eq!(m.incoming_bytes(), b"a");
        let m = MemberInfo::new(Uuid::NIL, "", "");
        assert_eq!(m, MemberInfo::ZEROED);
    }

    #[test]
    fn unterminated_field_reads_whole_field() {
        let mut m = MemberInfo::ZEROED;
        m.name = [b'z' as c_char; MEMBER_NAME_LEN];
        assert_eq!(m.name_bytes().len(), MEMBER_NAME_LEN);
    }

    #[test]
    fn alloc_size() {
        assert_eq!(view_info_alloc_size(0), 360);
        assert_eq!(view_info_alloc_size(1), 360);
        assert_eq!(view_info_alloc_size(2), 56 + 2 * 304);
        assert_eq!(view_info_alloc_size(3), 56 + 3 * 304);
    }

    #[test]
    fn view_buffer_many_members() {
        let members: Vec<MemberInfo> = (0..5u8)
            .map(|i| {
                MemberInfo::new(
                    Uuid::from_bytes([i + 1; 16]),
                    &format!("node{i}"),
                    &format!("10.0.0.{i}:3306"),
                )
            })
            .collect();
        let vb = ViewBuffer::new(&header(), &members);
        assert!(vb.byte_len() >= view_info_alloc_size(5));
        assert_eq!(vb.as_ptr() as usize % 8, 0);
        let v = vb.info();
        assert_eq!(v.state_id, header().state_id);
        assert_eq!(v.view, 3);
        assert_eq!(v.status, view_status::PRIMARY);
        assert_eq!(v.capabilities, 0x2D17F);
        assert_eq!(v.my_idx, 1);
        assert_eq!(v.memb_num, 5);
        assert_eq!(v.proto_ver, 4);
        assert_eq!(vb.members(), &members[..]);

        // Read the raw bytes the way C would: member i at 56 + i * 304.
        let raw = vb.as_ptr().cast::<u8>();
        for (i, m) in members.iter().enumerate() {
            let off = 56 + i * 304;
            // SAFETY: `off + 304 <= byte_len()`; the buffer is live.
            let id = unsafe { core::slice::from_raw_parts(raw.add(off), 16) };
            assert_eq!(id, &m.id.data);
            // SAFETY: as above; the name field starts 16 bytes in.
            let name = unsafe { core::ffi::CStr::from_ptr(raw.add(off + 16).cast()) };
            assert_eq!(name.to_bytes(), format!("node{i}").as_bytes());
            // SAFETY: as above; the incoming field starts 48 bytes in.
            let inc = unsafe { core::ffi::CStr::from_ptr(raw.add(off + 48).cast()) };
            assert_eq!(inc.to_bytes(), format!("10.0.0.{i}:3306").as_bytes());
        }
        // Padding after proto_ver is zero.
        // SAFETY: bytes 52..56 lie inside the fixed part.
        let pad = unsafe { core::slice::from_raw_parts(raw.add(52), 4) };
        assert_eq!(pad, &[0, 0, 0, 0]);

        let copy = vb.clone();
        assert_eq!(copy.members(), vb.members());
        assert_ne!(copy.as_ptr(), vb.as_ptr());
        let dbg = format!("{vb:?}");
        assert!(dbg.contains("node4"), "{dbg}");
    }

    #[test]
    fn view_buffer_zero_and_one_member() {
        let vb = ViewBuffer::new(
            &ViewHeader {
                view: -1,
                status: view_status::NON_PRIMARY,
                my_idx: -1,
                ..header()
            },
            &[],
        );
        assert!(vb.byte_len() >= 360);
        assert_eq!(vb.info().memb_num, 0);
        assert_eq!(vb.info().view, -1);
        assert!(vb.members().is_empty());
        assert_eq!(vb.info().members[0], MemberInfo::ZEROED);

        let m = MemberInfo::new(Uuid::from_bytes([9; 16]), "solo", "");
        let vb = ViewBuffer::new(&header(), &[m]);
        assert_eq!(vb.byte_len(), 360);
        assert_eq!(vb.members(), &[m]);
        assert_eq!(vb.info().members[0], m);
    }
}
