//! `cargo bench -p tenso`: encode/decode throughput of a 64 MiB float32 tensor against a
//! plain `copy_from_slice` of the same bytes, and the per-call cost of decoding a 1 KiB
//! packet. A std::time harness: each case runs a few rounds and reports the best and the
//! median. `TENSO_BENCH_QUICK=1` shortens it.
use std::hint::black_box;
use std::time::{Duration, Instant};

use tenso::{DecodeOptions, Options, Tensor};

struct Timing {
    best: Duration,
    median: Duration,
}

/// Times `iters` calls of `f` per round, over `rounds` rounds.
fn time(rounds: usize, iters: usize, mut f: impl FnMut()) -> Timing {
    f(); // warm up (page faults, caches, lazy binding)
    let mut per_call: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters as u32
        })
        .collect();
    per_call.sort();
    Timing { best: per_call[0], median: per_call[rounds / 2] }
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn report_bytes(name: &str, bytes: usize, t: &Timing) {
    println!(
        "{name:<48} best {:>9.3} ms ({:>6.2} GB/s)   median {:>9.3} ms ({:>6.2} GB/s)",
        t.best.as_secs_f64() * 1e3,
        gbps(bytes, t.best),
        t.median.as_secs_f64() * 1e3,
        gbps(bytes, t.median)
    );
}

fn report_call(name: &str, t: &Timing) {
    println!(
        "{name:<48} best {:>9.1} ns/call                median {:>9.1} ns/call",
        t.best.as_nanos() as f64,
        t.median.as_nanos() as f64
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is ignored (one small suite).
    let quick = std::env::var_os("TENSO_BENCH_QUICK").is_some();
    let rounds = if quick { 3 } else { 9 };
    println!("tenso {} (libtenso {}), {} rounds per case", env!("CARGO_PKG_VERSION"), tenso::library_version(), rounds);

    const N: usize = 16 << 20; // 16 Mi float32 = 64 MiB
    let data: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5).collect();
    let t = Tensor::new(&data, &[4096, 4096]).unwrap();
    let body = t.bytes();
    let size = body.len();
    println!("\n64 MiB float32 [4096, 4096]");

    // Baselines: the one copy any encoder must make.
    let mut dst = vec![0u8; size + 4096];
    let base = time(rounds, 1, || {
        dst[..size].copy_from_slice(black_box(body));
        black_box(&dst);
    });
    report_bytes("copy_from_slice into a warm buffer (baseline)", size, &base);
    let base_alloc = time(rounds, 1, || {
        black_box(black_box(body).to_vec());
    });
    report_bytes("to_vec (fresh allocation + copy, baseline)", size, &base_alloc);

    // Encoding.
    let into = time(rounds, 1, || {
        let n = tenso::dumps_into(black_box(&t), &mut dst).unwrap();
        black_box(n);
    });
    report_bytes("dumps_into a warm buffer", size, &into);
    let fresh = time(rounds, 1, || {
        black_box(tenso::dumps(black_box(&t)).unwrap());
    });
    report_bytes("dumps -> Vec<u8> (fresh allocation)", size, &fresh);
    let buffer = time(rounds, 1, || {
        black_box(Options::new().dumps_buffer(black_box(&t)).unwrap());
    });
    report_bytes("dumps_buffer (libtenso allocation)", size, &buffer);
    let integrity = Options::new().integrity(true);
    let hashed = time(rounds, 1, || {
        black_box(integrity.dumps_into(black_box(&t), &mut dst).unwrap());
    });
    report_bytes("dumps_into + XXH3 footer", size, &hashed);

    // Decoding: O(1) without footer, one hash pass with it.
    let packet = tenso::dumps(&t).unwrap();
    let dec = time(rounds, 1000, || {
        let v = tenso::loads(black_box(&packet)).unwrap();
        black_box(v.as_slice::<f32>().unwrap().len());
    });
    report_bytes("loads + as_slice (zero copy)", size, &dec);
    let hpacket = integrity.dumps(&t).unwrap();
    let hdec = time(rounds, 1, || {
        black_box(tenso::loads(black_box(&hpacket)).unwrap().nbytes());
    });
    report_bytes("loads with footer verification", size, &hdec);
    let copy_out = time(rounds, 1, || {
        black_box(tenso::loads(black_box(&packet)).unwrap().to_vec::<f32>().unwrap());
    });
    report_bytes("loads + to_vec (one copy out)", size, &copy_out);
    let stream = time(rounds, 1, || {
        let mut r = black_box(&packet[..]);
        black_box(tenso::read_from(&mut r).unwrap().unwrap().nbytes());
    });
    report_bytes("read_from(&[u8]) (decoder + aligned copy)", size, &stream);

    // Receiving over a socket: 64 packets of 1 MiB float32 through a UnixStream pair, a writer
    // thread per round. Baseline: read_exact of the same bytes into a fresh Vec per packet.
    let mib: Vec<f32> = (0..1 << 18).map(|i| i as f32).collect();
    let one = tenso::dumps(&Tensor::from_slice(&mib)).unwrap();
    const PACKETS: usize = 64;
    let pump = |one: &[u8]| {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let bytes = one.to_vec();
        let w = std::thread::spawn(move || {
            for _ in 0..PACKETS {
                std::io::Write::write_all(&mut &a, &bytes).unwrap();
            }
        });
        (b, w)
    };
    let raw_recv = time(rounds, 1, || {
        let (b, w) = pump(&one);
        for _ in 0..PACKETS {
            let mut v = vec![0u8; one.len()];
            std::io::Read::read_exact(&mut &b, &mut v).unwrap();
            black_box(v);
        }
        w.join().unwrap();
    });
    report_bytes("socket: read_exact into a fresh Vec (baseline)", one.len() * PACKETS, &raw_recv);
    let read_from = time(rounds, 1, || {
        let (b, w) = pump(&one);
        for _ in 0..PACKETS {
            black_box(tenso::read_from(&mut &b).unwrap().unwrap());
        }
        w.join().unwrap();
    });
    report_bytes("socket: read_from (decoder, Rust buffer)", one.len() * PACKETS, &read_from);
    let packets = time(rounds, 1, || {
        let (b, w) = pump(&one);
        for p in tenso::Packets::new(&b).take(PACKETS) {
            black_box(p.unwrap());
        }
        w.join().unwrap();
    });
    report_bytes("socket: Packets (one decoder)", one.len() * PACKETS, &packets);
    let fd = time(rounds, 1, || {
        let (b, w) = pump(&one);
        for _ in 0..PACKETS {
            black_box(tenso::read_fd(&b).unwrap().unwrap());
        }
        w.join().unwrap();
    });
    report_bytes("socket: read_fd (libtenso's loop)", one.len() * PACKETS, &fd);
    println!(
        "socket ratios to the baseline (medians): read_from {:.2}x, Packets {:.2}x, read_fd {:.2}x",
        read_from.median.as_secs_f64() / raw_recv.median.as_secs_f64(),
        packets.median.as_secs_f64() / raw_recv.median.as_secs_f64(),
        fd.median.as_secs_f64() / raw_recv.median.as_secs_f64()
    );

    println!(
        "\nratios: dumps_into / copy_from_slice = {:.2}x, dumps / to_vec = {:.2}x (medians)",
        into.median.as_secs_f64() / base.median.as_secs_f64(),
        fresh.median.as_secs_f64() / base_alloc.median.as_secs_f64()
    );

    // Per-call overhead on a 1 KiB packet. The variants run interleaved, round after round,
    // so that load from other processes hits them alike; the best round is the cleanest.
    println!("\n1 KiB packet (256 float32) per call, variants interleaved");
    let small: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let st = Tensor::from_slice(&small);
    let sp = tenso::dumps(&st).unwrap();
    let iters = if quick { 20_000 } else { 200_000 };
    let opts = DecodeOptions::new().max_elements(1 << 20);
    type Variant<'a> = (&'static str, Box<dyn FnMut() + 'a>);
    let mut variants: Vec<Variant<'_>> = vec![
        (
            "C tenso_loads + tenso_view_free (floor)",
            Box::new(|| unsafe {
                let mut v = std::ptr::null_mut();
                let s = tenso::sys::tenso_loads(&mut v, black_box(sp.as_ptr()).cast(), sp.len(), std::ptr::null());
                assert_eq!(s, 0);
                black_box(tenso::sys::tenso_view_data(v));
                tenso::sys::tenso_view_free(v);
            }),
        ),
        (
            "tenso::loads + drop",
            Box::new(|| {
                black_box(tenso::loads(black_box(&sp)).unwrap());
            }),
        ),
        (
            "tenso::loads + as_slice + drop",
            Box::new(|| {
                let v = tenso::loads(black_box(&sp)).unwrap();
                black_box(v.as_slice::<f32>().unwrap().as_ptr());
            }),
        ),
        (
            "DecodeOptions::loads (limits) + drop",
            Box::new(|| {
                black_box(opts.loads(black_box(&sp)).unwrap());
            }),
        ),
    ];
    let call_rounds = if quick { 5 } else { 31 };
    let mut samples = vec![Vec::new(); variants.len()];
    for _ in 0..call_rounds {
        for (i, (_, f)) in variants.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            samples[i].push(t.elapsed() / iters as u32);
        }
    }
    let timings: Vec<Timing> = samples
        .into_iter()
        .map(|mut s| {
            s.sort();
            Timing { best: s[0], median: s[s.len() / 2] }
        })
        .collect();
    for ((name, _), t) in variants.iter().zip(&timings) {
        report_call(name, t);
    }
    let (raw, bare, safe) = (&timings[0], &timings[1], &timings[2]);
    let mut sdst = vec![0u8; 2048];
    let enc = time(rounds, iters, || {
        black_box(tenso::dumps_into(black_box(&st), &mut sdst).unwrap());
    });
    report_call("dumps_into (1 KiB)", &enc);
    let encv = time(rounds, iters, || {
        black_box(tenso::dumps(black_box(&st)).unwrap());
    });
    report_call("dumps -> Vec<u8> (1 KiB)", &encv);
    println!(
        "\nRust overhead over the C calls (best of rounds): loads+drop {:+.1} ns, loads+as_slice+drop {:+.1} ns",
        bare.best.as_nanos() as f64 - raw.best.as_nanos() as f64,
        safe.best.as_nanos() as f64 - raw.best.as_nanos() as f64,
    );
    println!(
        "1 KiB loads target (< 200 ns per call): {} ({} ns best, of which libtenso {} ns)",
        if safe.best < Duration::from_nanos(200) { "met" } else { "NOT met" },
        safe.best.as_nanos(),
        raw.best.as_nanos()
    );
}
