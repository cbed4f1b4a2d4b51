//! Hostile and damaged input through the safe API: exact error kinds for each kind of damage,
//! every truncation of every kind of packet, limits, and a deterministic byte-flip sweep that
//! must never panic or crash (and whose successes must stay readable).
mod common;

use tenso::{Bundle, DecodeOptions, ErrorKind, Options, PacketLength, Tensor, Value};

/// A packet of every kind, with and without footers / compression.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let f: Vec<f32> = (0..300).map(|i| (i % 17) as f32).collect();
    let t = Tensor::new(&f, &[3, 100]).unwrap();
    let mut out = vec![
        ("dense".to_string(), tenso::dumps(&t).unwrap()),
        ("dense+integrity".to_string(), Options::new().integrity(true).dumps(&t).unwrap()),
        ("dense+lz4".to_string(), Options::new().compress(true).dumps(&t).unwrap()),
        ("dense+lz4+integrity".to_string(), Options::new().compress(true).integrity(true).dumps(&t).unwrap()),
        ("dense align1".to_string(), Options::new().alignment(1).dumps(&t).unwrap()),
    ];
    let idx = [0i32, 1, 2];
    let ptr = [0i32, 1, 2, 3];
    let csr =
        Value::sparse_csr([3, 3], &Tensor::from_slice(&f[..3]), &Tensor::from_slice(&idx), &Tensor::from_slice(&ptr))
            .unwrap();
    let q = tenso::quantize(&t, tenso::Dtype::Qint4, tenso::Scheme::PerGroup { group_size: 7 }).unwrap();
    let s = Value::strings(["a", "βγ", "", "long string"]).unwrap();
    let b = Bundle::new()
        .with("t", &t)
        .unwrap()
        .with("csr", &csr)
        .unwrap()
        .with("q", &q)
        .unwrap()
        .with("s", &s)
        .unwrap()
        .with("nested", &Bundle::new().with("x", &Tensor::from_slice(&idx)).unwrap())
        .unwrap();
    out.push(("sparse".into(), tenso::dumps(&csr).unwrap()));
    out.push(("quantized+integrity".into(), Options::new().integrity(true).dumps(&q).unwrap()));
    out.push(("strings".into(), tenso::dumps(&s).unwrap()));
    out.push(("bundle".into(), tenso::dumps(&b).unwrap()));
    out.push(("bundle+lz4+integrity".into(), Options::new().compress(true).integrity(true).dumps(&b).unwrap()));
    out.push((
        "ipc".into(),
        tenso::dumps(
            &Value::ipc_ref(&tenso::IpcRef { handle: [7; 64], byte_offset: 0, nbytes: 1, device_uuid: [1; 16] })
                .unwrap(),
        )
        .unwrap(),
    ));
    out
}

/// Reads everything a successfully decoded view offers (must not panic or crash).
fn walk(v: &tenso::ViewRef, depth: usize) {
    let _ = (v.kind(), v.dtype(), v.shape(), v.bytes().len(), v.flags(), v.numel());
    let _ = v.to_vec::<f32>();
    let _ = v.as_slice::<u8>();
    let _ = v.as_tensor();
    let _ = v.quantized().map(|q| q.dequantize());
    let _ = v.strings().map(|s| s.to_strings());
    let _ = v.ipc_ref();
    if let Ok(r) = v.ragged() {
        for i in 0..r.len() {
            let _ = r.row_to_vec::<f32>(i);
        }
    }
    if let Ok(s) = v.sparse() {
        let _ = s.data().to_vec::<f32>();
    }
    if depth < 70 {
        for (_, child) in v.entries().flatten() {
            walk(child, depth + 1);
        }
    }
    if let Ok(dl) = v.to_dlpack() {
        assert_eq!(dl.bytes().len() as u64, v.nbytes());
    }
}

#[test]
fn every_truncation_is_reported_and_framed() {
    for (name, p) in corpus() {
        assert_eq!(tenso::packet_length(&p).unwrap(), PacketLength::Complete(p.len()), "{name}");
        for cut in 0..p.len() {
            let short = &p[..cut];
            let e = tenso::loads(short).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Truncated, "{name} cut at {cut}: {e}");
            match tenso::packet_length(short).unwrap() {
                PacketLength::Incomplete { needed } => {
                    assert!(needed > cut && needed <= p.len(), "{name} cut at {cut}: needed {needed}")
                }
                other => panic!("{name} cut at {cut}: {other:?}"),
            }
            // The same through a Read: a stream ending inside the packet.
            let mut r = short;
            match tenso::read_from(&mut r) {
                Ok(None) => assert_eq!(cut, 0, "{name}"),
                Ok(Some(_)) => panic!("{name} cut at {cut}: decoded"),
                Err(e) => assert_eq!(e.kind(), ErrorKind::Truncated, "{name} cut at {cut}: {e}"),
            }
        }
    }
}

fn dense_packet() -> Vec<u8> {
    tenso::dumps(&Tensor::new(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap()).unwrap()
}

#[test]
fn header_damage_gives_exact_kinds() {
    let good = dense_packet();
    let with = |at: usize, b: u8| {
        let mut p = good.clone();
        p[at] = b;
        tenso::loads(&p).map(|_| ()).unwrap_err().kind()
    };
    assert_eq!(with(0, b'X'), ErrorKind::BadMagic);
    assert_eq!(with(4, 0), ErrorKind::UnsupportedVersion);
    assert_eq!(with(4, 5), ErrorKind::UnsupportedVersion);
    assert_eq!(with(7, 0), ErrorKind::BadDtype, "dtype 0 for a dense packet");
    assert_eq!(with(7, 99), ErrorKind::BadDtype);
    assert_eq!(with(8, 33), ErrorKind::TooManyDims);
    // Dimensions whose product exceeds 10^9 elements.
    let mut p = good.clone();
    p[10..14].copy_from_slice(&100_000u32.to_le_bytes());
    p[14..18].copy_from_slice(&100_000u32.to_le_bytes());
    assert_eq!(tenso::loads(&p).unwrap_err().kind(), ErrorKind::TooManyElements);
    assert_eq!(tenso::inspect(&p).unwrap_err().kind(), ErrorKind::TooManyElements);
    assert_eq!(tenso::packet_length(&p).unwrap_err().kind(), ErrorKind::TooManyElements);
    // A dimension that makes the body longer than the bytes given.
    let mut p = good.clone();
    p[10..14].copy_from_slice(&3u32.to_le_bytes());
    assert_eq!(tenso::loads(&p).unwrap_err().kind(), ErrorKind::Truncated);
    assert_eq!(tenso::loads(b"").unwrap_err().kind(), ErrorKind::Truncated);
    assert_eq!(tenso::inspect(b"TNSO").unwrap_err().kind(), ErrorKind::Truncated);
}

#[test]
fn footer_and_compression_damage() {
    let t = Tensor::from_slice(&[0.5f64; 64]);
    let mut p = Options::new().integrity(true).dumps(&t).unwrap();
    let n = p.len();
    p[n - 20] ^= 0x01; // byte 4 of element 62 (body 512 bytes, then the 8-byte footer)
    assert_eq!(tenso::loads(&p).unwrap_err().kind(), ErrorKind::Checksum);
    let skip = DecodeOptions::new().skip_checksum(true);
    assert_eq!(skip.loads(&p).unwrap().to_vec::<f64>().unwrap()[62], f64::from_bits(0.5f64.to_bits() ^ (1 << 32)));
    p[n - 20] ^= 0x01;
    p[n - 1] ^= 0x80; // the footer itself
    assert_eq!(tenso::loads(&p).unwrap_err().kind(), ErrorKind::Checksum);

    let mut z = Options::new().compress(true).dumps(&t).unwrap();
    let info = tenso::inspect(&z).unwrap();
    let body = info.body_offset() as usize;
    z[body] ^= 0xff; // LZ4 frame magic
    assert_eq!(tenso::loads(&z).unwrap_err().kind(), ErrorKind::Compression);
}

#[test]
fn bundle_key_damage_and_nesting_limits() {
    let b = Bundle::new().with("ab", &Tensor::from_slice(&[1u8])).unwrap();
    let mut p = tenso::dumps(&b).unwrap();
    // Header (10) + key_len (4), then the key.
    assert_eq!(&p[14..16], b"ab");
    p[14] = 0xff;
    assert_eq!(tenso::loads(&p).unwrap_err().kind(), ErrorKind::BadBundle);
    // An entry length that disagrees with the entry's own packet: refused by loads. Framing
    // (libtenso 1.3's stream decoder) may instead take the claim and wait for the bytes; a
    // stream reader then ends with an error, never a packet, and with a limit set it refuses
    // the claim before allocating for it.
    let mut p = tenso::dumps(&b).unwrap();
    p[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(tenso::loads(&p).unwrap_err().kind(), ErrorKind::BadBundle);
    match tenso::packet_length(&p) {
        Err(e) => assert_eq!(e.kind(), ErrorKind::BadBundle),
        Ok(tenso::PacketLength::Incomplete { needed }) => assert!(needed as u64 > u32::MAX as u64),
        Ok(other) => panic!("{other:?}"),
    }
    let e = tenso::read_from(&mut &p[..]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BadBundle | ErrorKind::Truncated), "{e}");
    let e = DecodeOptions::new().max_packet_bytes(1 << 20).read_from(&mut &p[..]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BadBundle | ErrorKind::Limit), "{e}");

    let mut v = Bundle::new().with("x", &Tensor::from_slice(&[1u8])).unwrap().into_value();
    for _ in 0..10 {
        v = Bundle::new().with("x", &v).unwrap().into_value();
    }
    let deep = tenso::dumps(&v).unwrap();
    assert!(DecodeOptions::new().max_depth(11).loads(&deep).is_ok());
    assert_eq!(DecodeOptions::new().max_depth(10).loads(&deep).unwrap_err().kind(), ErrorKind::Limit);
}

#[test]
fn decode_limits() {
    let p = dense_packet();
    assert_eq!(DecodeOptions::new().max_elements(3).loads(&p).unwrap_err().kind(), ErrorKind::TooManyElements);
    assert!(DecodeOptions::new().max_elements(4).loads(&p).is_ok());
    assert_eq!(DecodeOptions::new().max_ndim(1).loads(&p).unwrap_err().kind(), ErrorKind::TooManyDims);
    let limit = DecodeOptions::new().max_packet_bytes(p.len() as u64 - 1);
    assert_eq!(limit.loads(&p).unwrap_err().kind(), ErrorKind::Limit);
    let mut r = &p[..];
    assert_eq!(limit.read_from(&mut r).unwrap_err().kind(), ErrorKind::Limit);
    assert!(DecodeOptions::new().max_packet_bytes(p.len() as u64).loads(&p).is_ok());
    // What a stream reader buffers is memory the decode holds: max_decoded_bytes bounds it too.
    // (1 MiB dense: its decoded tree alone is a few hundred bytes.)
    let big = tenso::dumps(&Tensor::from_slice(&vec![0u8; 1 << 20])).unwrap();
    let decoded = DecodeOptions::new().max_decoded_bytes(64 << 10);
    assert_eq!(decoded.read_from(&mut &big[..]).unwrap_err().kind(), ErrorKind::Limit);
    assert!(DecodeOptions::new().max_decoded_bytes(2 << 20).read_from(&mut &big[..]).unwrap().is_some());
}

#[test]
fn decoded_memory_and_entry_limits() {
    // 1 MiB of zeros compresses to a few KiB: max_packet_bytes bounds what it inflates to,
    // unless max_decoded_bytes takes over.
    let zeros = vec![0f32; 1 << 18];
    let p = Options::new().compress(true).dumps(&Tensor::from_slice(&zeros)).unwrap();
    assert!(p.len() < 1 << 16);
    let kind = |o: DecodeOptions| o.loads(&p).err().map(|e| e.kind());
    assert_eq!(kind(DecodeOptions::new().max_packet_bytes(p.len() as u64)), Some(ErrorKind::Limit));
    assert_eq!(kind(DecodeOptions::new().max_packet_bytes(p.len() as u64).max_decoded_bytes(2 << 20)), None);
    assert_eq!(kind(DecodeOptions::new().max_decoded_bytes(1 << 20)), Some(ErrorKind::Limit));
    // Packets in the tree: the bundle and its three values.
    let t = Tensor::from_slice(&[1u8]);
    let b = tenso::dumps(&Bundle::new().with("a", &t).unwrap().with("b", &t).unwrap().with("c", &t).unwrap()).unwrap();
    assert!(DecodeOptions::new().max_entries(4).loads(&b).is_ok());
    assert_eq!(DecodeOptions::new().max_entries(3).loads(&b).unwrap_err().kind(), ErrorKind::Limit);
}

#[test]
fn invalid_bool_bytes_and_utf8_are_never_handed_out_as_such() {
    let mut p = tenso::dumps(&Tensor::from_slice(&[true, false, true])).unwrap();
    let at = tenso::inspect(&p).unwrap().body_offset() as usize;
    p[at + 1] = 2;
    let v = tenso::loads(&p).unwrap();
    assert_eq!(v.bytes().unwrap(), &[1, 2, 1]);
    assert_eq!(v.as_slice::<bool>().unwrap_err().kind(), ErrorKind::UnsupportedKind, "bool is never borrowed");
    assert_eq!(v.to_vec::<bool>().unwrap_err().kind(), ErrorKind::Malformed);
    assert_eq!(v.as_tensor().unwrap().bytes(), &[1, 2, 1]);

    // A string payload that is not UTF-8: decodes by default (as upstream), refused as &str,
    // and refused at decode time with validate_utf8.
    let s = Value::strings(["ok", "xy"]).unwrap();
    let mut p = tenso::dumps(&s).unwrap();
    let n = p.len();
    assert_eq!(&p[n - 2..], b"xy");
    p[n - 1] = 0xc0;
    let v = tenso::loads(&p).unwrap();
    let strings = v.strings().unwrap();
    assert_eq!(strings.get(0).unwrap().unwrap(), "ok");
    assert_eq!(strings.get(1).unwrap().unwrap_err().kind(), ErrorKind::Malformed);
    assert_eq!(strings.get_bytes(1).unwrap(), b"x\xc0");
    assert_eq!(strings.to_strings().unwrap_err().kind(), ErrorKind::Malformed);
    let strict = DecodeOptions::new().validate_utf8(true);
    let e = strict.loads(&p).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e:?}");
}

/// xorshift64*: deterministic, so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Damage at a known place gives its kind in every packet of the corpus, whatever its kind.
#[test]
fn damage_in_every_kind_of_packet_gives_exact_kinds() {
    for (name, p) in corpus() {
        let kind = |at: usize, b: u8| {
            let mut q = p.clone();
            q[at] = b;
            tenso::loads(&q).map(|_| ()).unwrap_err().kind()
        };
        assert_eq!(kind(0, b'X'), ErrorKind::BadMagic, "{name}");
        assert_eq!(kind(4, 9), ErrorKind::UnsupportedVersion, "{name}");
        assert_eq!(tenso::loads(&p[..p.len() - 1]).unwrap_err().kind(), ErrorKind::Truncated, "{name}");
        if u16::from_le_bytes([p[5], p[6]]) & tenso::flags::INTEGRITY as u16 != 0 {
            assert_eq!(kind(p.len() - 1, p[p.len() - 1] ^ 1), ErrorKind::Checksum, "{name}");
        }
    }
}

/// What random damage may be reported as: the statuses of a packet refused for its bytes.
const DAMAGE: [ErrorKind; 12] = [
    ErrorKind::Truncated,
    ErrorKind::BadMagic,
    ErrorKind::UnsupportedVersion,
    ErrorKind::BadDtype,
    ErrorKind::TooManyDims,
    ErrorKind::TooManyElements,
    ErrorKind::Checksum,
    ErrorKind::Compression,
    ErrorKind::BadBundle,
    ErrorKind::Malformed,
    ErrorKind::Limit,
    ErrorKind::UnsupportedKind,
];

#[test]
fn byte_flip_sweep_never_panics() {
    let mut rng = Rng(0x7e50_5eed);
    let mut decoded = 0;
    let mut failed = 0;
    for (name, p) in corpus() {
        for _ in 0..400 {
            let mut q = p.clone();
            for _ in 0..1 + rng.next() % 4 {
                let at = (rng.next() as usize) % q.len();
                q[at] ^= 1 << (rng.next() % 8);
            }
            match tenso::loads(&q) {
                Ok(v) => {
                    decoded += 1;
                    walk(&v, 0);
                }
                Err(e) => {
                    failed += 1;
                    assert!(DAMAGE.contains(&e.kind()), "{name}: {e:?}");
                }
            }
            let _ = tenso::packet_length(&q);
            let _ = tenso::inspect(&q);
        }
    }
    eprintln!("byte flips: {decoded} decoded and walked, {failed} refused");
    assert!(decoded > 0 && failed > 0);
}

/// A bundle key checked as UTF-8 when the view was decoded, then rewritten in shared memory
/// by another writer: the entry is refused as Malformed (it used to panic in `expect`).
#[test]
fn bundle_key_rewritten_in_shared_memory_is_malformed() {
    let name = format!("/tenso-rs-rekey-{}", std::process::id());
    let _ = tenso::Shm::unlink(&name);
    let mut writer = tenso::Shm::create(&name, 4096).unwrap();
    let bundle = Bundle::new().with("key", &Tensor::from_slice(&[1.0f32])).unwrap();
    writer.put(&bundle).unwrap();
    let reader = tenso::Shm::open(&name).unwrap();
    let view = reader.get().unwrap();
    assert_eq!(view.entry(0).unwrap().unwrap().0, "key");
    let at = writer.bytes().windows(3).position(|w| w == b"key").unwrap();
    writer.write_at(at, &[0xFF]).unwrap();
    let err = view.entry(0).unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Malformed);
    assert_eq!(view.entries().next().unwrap().unwrap_err().kind(), ErrorKind::Malformed);
    drop(view);
    tenso::Shm::unlink(&name).unwrap();
}
