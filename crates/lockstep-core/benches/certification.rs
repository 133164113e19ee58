//! Certification throughput: keys per second for writesets of 1, 10 and
//! 10 000 row keys, in a steady state (index purged every 128 writesets,
//! rows drawn from a larger key space so lookups mix hits and inserts).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lockstep_core::certification::{CertRequest, Certifier, Key, KeyType, Seqno};

/// A small deterministic generator, so runs are comparable.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn pool(keys_per_ws: usize, writesets: usize) -> Vec<Vec<Key>> {
    let mut rng = Lcg(42);
    (0..writesets)
        .map(|_| {
            let table = format!("t{}", rng.next() % 8);
            (0..keys_per_ws)
                .map(|_| {
                    let id = (rng.next() % 1_000_000).to_be_bytes();
                    Key::new(
                        [b"sbtest".to_vec(), table.as_bytes().to_vec(), id.to_vec()],
                        KeyType::Exclusive,
                    )
                })
                .collect()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("certify");
    for (keys_per_ws, pool_len) in [(1usize, 4096usize), (10, 4096), (10_000, 16)] {
        let writesets = pool(keys_per_ws, pool_len);
        group.throughput(Throughput::Elements(keys_per_ws as u64));
        group.bench_function(BenchmarkId::new("keys_per_writeset", keys_per_ws), |b| {
            let mut cert = Certifier::new(0);
            let mut s: Seqno = 0;
            b.iter(|| {
                s += 1;
                let keys = &writesets[s as usize % writesets.len()];
                let mut source = [0u8; 16];
                source[0] = (s % 3) as u8;
                let out = cert.certify(&CertRequest {
                    seqno: s,
                    last_seen: s - 1,
                    source,
                    is_toi: false,
                    pa_unsafe: false,
                    implicit_deps: false,
                    keys,
                });
                if s % 128 == 0 {
                    cert.purge_upto(s - 128);
                }
                black_box(out)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
