//! `cargo bench -p tenso --bench vs_upstream`: this crate (libtenso through the C ABI) against
//! upstream's pure-Rust engine, crates.io `tenso` 0.24.0 (renamed `upstream` here), side by
//! side in one run: encode a float32 tensor into a caller's buffer and decode it back, with and
//! without the integrity footer, at 1 KiB to 64 MiB. Both produce and read the same bytes
//! (checked once per size, outside the timing).
//!
//! Method: the two crates' calls are timed in interleaved rounds (A, B, A, B, ...), so drift on
//! a shared machine hits both alike; each round times enough calls for ~2 ms, and the median of
//! the rounds is reported, with the ratio ours / upstream (below 1.0: we are faster).
//! `TENSO_BENCH_QUICK=1` shortens it (fewer rounds, sizes up to 1 MiB). On a shared machine,
//! count instructions instead: `TENSO_BENCH_COUNT=plain` (or `integrity`) makes 10,000 untimed calls of each at
//! 1 KiB, and `valgrind --tool=callgrind --toggle-collect='*ours_dumps_into*'` (or
//! `upstream_dumps_into`, `ours_loads_tensor`, `ours_loads`, `upstream_decode`) counts one.
use std::hint::black_box;
use std::time::Instant;

use tenso::{DecodeOptions, Options, Tensor};

/// Median nanoseconds per call of `a` and `b`, interleaved.
fn pair(rounds: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    // Calls per round: enough for ~2 ms of the slower one.
    let probe = |f: &mut dyn FnMut()| {
        f();
        let t = Instant::now();
        f();
        t.elapsed().as_nanos().max(1) as f64
    };
    let per = probe(&mut a).max(probe(&mut b));
    let iters = ((2e6 / per) as usize).clamp(1, 1_000_000);
    let mut ta = Vec::with_capacity(rounds);
    let mut tb = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..iters {
            a();
        }
        ta.push(t.elapsed().as_nanos() as f64 / iters as f64);
        let t = Instant::now();
        for _ in 0..iters {
            b();
        }
        tb.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|x, y| x.partial_cmp(y).unwrap());
        v[v.len() / 2]
    };
    (median(&mut ta), median(&mut tb))
}

// The calls compared, each in a function of its own, so that an instruction counter can be
// pointed at exactly one of them (valgrind --tool=callgrind --toggle-collect='*ours_dumps_into*').
#[inline(never)]
fn ours_dumps_into(opts: &Options, t: &Tensor, dst: &mut [u8]) -> usize {
    opts.dumps_into(black_box(t), dst).unwrap()
}
#[inline(never)]
fn upstream_dumps_into(spec: &upstream::ArraySpec, dst: &mut [u8], opts: &upstream::EncodeOpts) -> usize {
    upstream::encode_dense_into(black_box(spec), dst, opts).unwrap()
}
#[inline(never)]
fn ours_loads_tensor(dec: &DecodeOptions, p: &[u8]) -> usize {
    dec.loads_tensor(black_box(p)).unwrap().bytes().len()
}
#[inline(never)]
fn ours_loads(dec: &DecodeOptions, p: &[u8]) -> usize {
    dec.loads(black_box(p)).unwrap().nbytes() as usize
}
#[inline(never)]
fn upstream_decode(p: &[u8]) -> usize {
    match upstream::decode(black_box(p)).unwrap() {
        upstream::Decoded::Dense(t) => t.body.len(),
        _ => 0,
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

fn row(size: &str, op: &str, ours: f64, theirs: f64) {
    println!("{size:>8}  {op:<34} {:>11} {:>11}   {:>5.2}x", fmt_ns(ours), fmt_ns(theirs), ours / theirs);
}

fn main() {
    let quick = std::env::var_os("TENSO_BENCH_QUICK").is_some();
    let rounds = if quick { 5 } else { 15 };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "tenso {} (libtenso {}) vs upstream tenso 0.24.0 (pure Rust), median of {rounds} interleaved rounds; load average {}",
        env!("CARGO_PKG_VERSION"),
        tenso::library_version(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("{:>8}  {:<34} {:>11} {:>11}   {:>6}", "size", "operation", "ours", "upstream", "ratio");
    // TENSO_BENCH_COUNT=plain: 10,000 untimed calls of each, 1 KiB only, for
    // valgrind --tool=callgrind --toggle-collect='*ours_dumps_into*' (and the others above).
    // (TENSO_BENCH_COUNT=integrity: the packets with a footer, else without.)
    let counting = std::env::var("TENSO_BENCH_COUNT").ok();
    let sizes: &[usize] = if counting.is_some() {
        &[1 << 10]
    } else if quick {
        &[1 << 10, 64 << 10, 1 << 20]
    } else {
        &[1 << 10, 64 << 10, 1 << 20, 64 << 20]
    };
    for &bytes in sizes {
        let n = bytes / 4;
        let data: Vec<f32> = (0..n).map(|i| ((i * 7919) % 2000) as f32 * 0.001 - 1.0).collect();
        let body: &[u8] = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), bytes) };
        let ours_t = Tensor::new(&data, &[n]).unwrap();
        let shape = [n as u32];
        let spec = upstream::ArraySpec { data: body, dtype: upstream::Dtype::F32, shape: &shape };
        let size = if bytes >= 1 << 20 { format!("{} MiB", bytes >> 20) } else { format!("{} KiB", bytes >> 10) };
        for integrity in [false, true] {
            let opts = if integrity { Options::new().integrity(true) } else { Options::new() };
            let up_opts = upstream::EncodeOpts { check_integrity: integrity, ..Default::default() };
            let cap = bytes + 4096;
            let mut dst_a = vec![0u8; cap];
            let mut dst_b = vec![0u8; cap];
            // Same bytes, checked once.
            let la = opts.dumps_into(&ours_t, &mut dst_a).unwrap();
            let lb = upstream::encode_dense_into(&spec, &mut dst_b, &up_opts).unwrap();
            assert_eq!(&dst_a[..la], &dst_b[..lb], "the two crates wrote different packets");
            let v = tenso::loads_tensor(&dst_a[..la]).unwrap();
            assert_eq!(v.bytes(), body);
            match upstream::decode(&dst_b[..lb]).unwrap() {
                upstream::Decoded::Dense(t) => assert_eq!(t.body, body),
                _ => panic!("upstream decoded another kind"),
            }
            let tag = if integrity { " +integrity" } else { "" };
            let dec = DecodeOptions::new();
            if let Some(which) = &counting {
                if (which == "integrity") != integrity {
                    continue;
                }
                // One fixed number of calls each, untimed: for an instruction counter.
                for _ in 0..10_000 {
                    black_box(ours_dumps_into(&opts, &ours_t, &mut dst_a));
                    black_box(upstream_dumps_into(&spec, &mut dst_b, &up_opts));
                    black_box(ours_loads_tensor(&dec, &dst_a[..la]));
                    black_box(ours_loads(&dec, &dst_a[..la]));
                    black_box(upstream_decode(&dst_b[..lb]));
                }
                continue;
            }
            let (a, b) = pair(
                rounds,
                || {
                    black_box(ours_dumps_into(&opts, &ours_t, &mut dst_a));
                },
                || {
                    black_box(upstream_dumps_into(&spec, &mut dst_b, &up_opts));
                },
            );
            row(&size, &format!("dumps_into{tag}"), a, b);
            let (pa, pb) = (&dst_a[..la], &dst_b[..lb]);
            let (a, b) = pair(
                rounds,
                || {
                    black_box(ours_loads_tensor(&dec, pa));
                },
                || {
                    black_box(upstream_decode(pb));
                },
            );
            row(&size, &format!("loads_tensor{tag}"), a, b);
            let (a, b) = pair(
                rounds,
                || {
                    black_box(ours_loads(&dec, pa));
                },
                || {
                    black_box(upstream_decode(pb));
                },
            );
            row(&size, &format!("loads (allocated view){tag}"), a, b);
        }
    }
}
