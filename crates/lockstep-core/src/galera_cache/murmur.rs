//! The two hashes Galera checks its on-disk buffers with: MurmurHash3
//! x86_32 (RecordSet header CRC, seed 0x811C9DC5) and MurmurHash3 x64_128
//! started from two different 64-bit seeds (writeset header and payload
//! checksums). The algorithms are the public-domain reference ones; only
//! the seeds are Galera's, which is why no crate fits (they take one u32).

/// Galera's seed for the 32-bit hash (the FNV offset basis).
pub const SEED32: u32 = 0x811C_9DC5;
/// Galera's two seeds of the 128-bit hash.
pub const SEED128: (u64, u64) = (0x6C62_272E_07BB_0142, 0x62B8_2175_6295_C58D);

fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// MurmurHash3 x86_32 of `data` with `seed`.
pub fn mmh32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for b in &mut blocks {
        let mut k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &byte) in tail.iter().enumerate() {
            k |= u32::from(byte) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    fmix32(h ^ data.len() as u32)
}

/// MurmurHash3 x64_128 of the concatenation of `parts`, started from the
/// two seeds; the 16 bytes as Galera stores them (h1 then h2, little
/// endian).
pub fn mmh128(parts: &[&[u8]], seeds: (u64, u64)) -> [u8; 16] {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let (mut h1, mut h2) = seeds;
    let mut len = 0usize;
    let mut block = [0u8; 16];
    let mut filled = 0usize;
    let mix = |b: &[u8; 16], h1: &mut u64, h2: &mut u64| {
        let k1 = u64::from_le_bytes(b[0..8].try_into().expect("8 bytes"));
        let k2 = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        *h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        *h1 = h1
            .rotate_left(27)
            .wrapping_add(*h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        *h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        *h2 = h2
            .rotate_left(31)
            .wrapping_add(*h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    };
    for part in parts {
        len += part.len();
        for &byte in *part {
            block[filled] = byte;
            filled += 1;
            if filled == 16 {
                mix(&block, &mut h1, &mut h2);
                filled = 0;
            }
        }
    }
    let tail = &block[..filled];
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, &byte) in tail.iter().enumerate() {
        if i < 8 {
            k1 |= u64::from(byte) << (8 * i);
        } else {
            k2 |= u64::from(byte) << (8 * (i - 8));
        }
    }
    if filled > 8 {
        h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    }
    if filled > 0 {
        h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    }
    h1 ^= len as u64;
    h2 ^= len as u64;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&h1.to_le_bytes());
    out[8..].copy_from_slice(&h2.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INPUT: &[u8] = b"0123456789ABCDEF0123456789abcde";

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Galera's own test vectors (galerautils' MurmurHash3 tests).
    #[test]
    fn galera_s_test_vectors() {
        assert_eq!(hex(&mmh32(b"", SEED32).to_le_bytes()), "0b7c3eab");
        assert_eq!(hex(&mmh32(&INPUT[..4], SEED32).to_le_bytes()), "353b57ca");
        assert_eq!(hex(&mmh32(&INPUT[..7], SEED32).to_le_bytes()), "e1be2dce");
        for (n, want) in [
            (0, "a9ce5a560c0bf7d6634f6f810e0bf20a"),
            (9, "36f0a3c8dc5e462012cfad3fdad5957a"),
            (16, "63ffe555383dd65da4adcbf60ac3d912"),
            (31, "69530dc34dd433e9001b2706277f48f7"),
        ] {
            assert_eq!(hex(&mmh128(&[&INPUT[..n]], SEED128)), want, "{n} bytes");
        }
    }

    #[test]
    fn parts_hash_as_their_concatenation() {
        let whole = mmh128(&[INPUT], SEED128);
        for cut in 0..INPUT.len() {
            let (a, b) = INPUT.split_at(cut);
            assert_eq!(mmh128(&[a, b], SEED128), whole, "cut at {cut}");
        }
    }
}
