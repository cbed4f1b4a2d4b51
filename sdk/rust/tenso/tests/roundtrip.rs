//! Encode -> decode round trips through the safe API: every dense dtype under every option,
//! zero copy, the encoders against each other, bundles (limits, ownership of child values),
//! the composite kinds, errors and threads.
mod common;

use tenso::{
    Bf16, Bundle, Complex, DecodeOptions, Dtype, Element, ErrorKind, IpcRef, Kind, Options, Quantized, Scheme, Tensor,
    Value, F16,
};

fn sample<T: Element>(n: usize, f: impl Fn(usize) -> T) -> Vec<T> {
    (0..n).map(f).collect()
}

/// Round-trips `data` (shape [2, n/2]) under every option combination.
fn roundtrip<T: Element + PartialEq + std::fmt::Debug>(data: &[T]) {
    let shape = [2, data.len() / 2];
    let t = Tensor::new(data, &shape).unwrap();
    for integrity in [false, true] {
        for compress in [false, true] {
            for alignment in [0u32, 1, 8, 64, 256, 4096] {
                let opts = Options::new().integrity(integrity).compress(compress).alignment(alignment);
                let at = format!("{} integrity={integrity} compress={compress} align={alignment}", T::DTYPE);
                let buf = opts.dumps_buffer(&t).unwrap();
                let v = tenso::loads(&buf).unwrap();
                assert_eq!(v.kind(), Kind::Dense, "{at}");
                assert_eq!(v.dtype(), Some(T::DTYPE), "{at}");
                assert_eq!(v.shape(), &shape, "{at}");
                assert_eq!(v.alignment(), if alignment == 0 { 64 } else { alignment }, "{at}");
                assert_eq!(v.flags() & tenso::flags::INTEGRITY != 0, integrity, "{at}");
                assert_eq!(v.flags() & tenso::flags::COMPRESSION != 0, compress, "{at}");
                assert_eq!(v.packet_size(), buf.len() as u64, "{at}");
                // A Buffer is 64-byte aligned, so a top-level body padded to at least the
                // element's alignment can be borrowed; alignment 1 may leave it misaligned,
                // which as_slice reports instead of creating an unaligned reference.
                let addr_ok = v.as_ref().bytes().as_ptr() as usize % std::mem::align_of::<T>() == 0;
                if alignment == 0 || alignment as usize >= std::mem::align_of::<T>() || compress {
                    assert!(addr_ok, "{at}");
                }
                // bool is never borrowed (shared memory could change a checked byte).
                let is_bool = T::DTYPE == Dtype::Bool;
                match v.as_ref().as_slice::<T>() {
                    Ok(s) => assert!(addr_ok && !is_bool && s == data, "{at}"),
                    Err(e) if is_bool => assert_eq!(e.kind(), ErrorKind::UnsupportedKind, "{at}: {e}"),
                    Err(e) => assert!(!addr_ok && e.kind() == ErrorKind::Misaligned, "{at}: {e}"),
                }
                // Borrowing for the input's lifetime: a decompressed body is not in the input.
                match v.as_slice::<T>() {
                    Ok(s) => assert!(addr_ok && !compress && !is_bool && s == data, "{at}"),
                    Err(e) if compress || is_bool => assert_eq!(e.kind(), ErrorKind::UnsupportedKind, "{at}: {e}"),
                    Err(e) => assert!(!addr_ok && e.kind() == ErrorKind::Misaligned, "{at}: {e}"),
                }
                let cow = v.values::<T>().unwrap();
                assert_eq!(&*cow, data, "{at}");
                assert_eq!(
                    matches!(cow, std::borrow::Cow::Borrowed(_)),
                    addr_ok && !compress && !is_bool,
                    "{at}: borrowed iff possible"
                );
                assert_eq!(v.to_vec::<T>().unwrap(), data, "{at}");
                assert_eq!(v.owns_data(), compress, "{at}: only decompressed bodies are owned");
                if !compress && addr_ok && !is_bool {
                    // Zero copy: the slice points into the packet.
                    let s = v.as_slice::<T>().unwrap();
                    assert!(buf.as_ptr_range().contains(&s.as_ptr().cast::<u8>()), "{at}: not zero copy");
                    assert_eq!(opts.bound(&t).unwrap(), buf.len(), "{at}: bound is exact uncompressed");
                } else {
                    assert!(opts.bound(&t).unwrap() >= buf.len(), "{at}: bound is an upper bound");
                }
                // The three encoders agree.
                assert_eq!(opts.dumps(&t).unwrap(), &buf[..], "{at}: dumps vs dumps_buffer");
            }
        }
    }
}

#[test]
fn every_dense_dtype_round_trips_under_every_option() {
    roundtrip(&sample(64, |i| i as f32 * 0.25 - 3.0));
    roundtrip(&sample(64, |i| i as f64 * -1e100));
    roundtrip(&sample(64, |i| (i as i8).wrapping_mul(37)));
    roundtrip(&sample(64, |i| (i as i16) * -500));
    roundtrip(&sample(64, |i| i as i32 * 65537 - 7));
    roundtrip(&sample(64, |i| (i as i64) << 40));
    roundtrip(&sample(64, |i| (i * 7) as u8));
    roundtrip(&sample(64, |i| (i * 1021) as u16));
    roundtrip(&sample(64, |i| (i as u32).wrapping_mul(2654435761)));
    roundtrip(&sample(64, |i| (i as u64).wrapping_mul(0x9e3779b97f4a7c15)));
    roundtrip(&sample(64, |i| i % 3 == 0));
    roundtrip(&sample(64, |i| F16::from_f32(i as f32 / 8.0)));
    roundtrip(&sample(64, |i| Bf16::from_f32(i as f32 * 3.5)));
    roundtrip(&sample(64, |i| Complex { re: i as f32, im: -(i as f32) }));
    roundtrip(&sample(64, |i| Complex { re: i as f64 / 3.0, im: 1e-300 }));
}

#[test]
fn scalars_empty_tensors_and_32_dims() {
    let x = 42.5f64;
    let p = tenso::dumps(&Tensor::scalar(&x)).unwrap();
    let v = tenso::loads(&p).unwrap();
    assert_eq!((v.shape(), v.numel()), (&[][..], 1));
    assert_eq!(v.as_slice::<f64>().unwrap(), &[42.5]);

    let p = tenso::dumps(&Tensor::new::<i32>(&[], &[3, 0, 2]).unwrap()).unwrap();
    let v = tenso::loads(&p).unwrap();
    assert_eq!(v.shape(), &[3, 0, 2]);
    assert!(v.bytes().unwrap().is_empty());
    assert_eq!(v.as_slice::<i32>().unwrap(), &[] as &[i32]);

    let p = tenso::dumps(&Tensor::new(&[7u8], &[1; 32]).unwrap()).unwrap();
    assert_eq!(tenso::loads(&p).unwrap().shape().len(), 32);
    assert_eq!(tenso::DecodeOptions::new().max_ndim(31).loads(&p).unwrap_err().kind(), ErrorKind::TooManyDims);
}

#[test]
fn bad_encode_options_and_tensors_are_refused() {
    let t = Tensor::from_slice(&[1.0f32; 4]);
    let e = Options::new().alignment(3).dumps(&t).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(!e.message().is_empty(), "libtenso's message is carried");
    assert_eq!(Options::new().alignment(1 << 21).dumps(&t).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // A dimension that does not fit the wire's u32.
    let big = Tensor::from_bytes(Dtype::Uint8, &[], &[1 << 32, 0]).unwrap();
    assert_eq!(tenso::dumps(&big).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // More than 10^9 elements (never allocated: an empty dimension would make it 0, so use
    // from_bytes over a tiny slice that cannot match and check our own validation instead).
    assert_eq!(
        Tensor::from_bytes(Dtype::Uint8, &[0; 4], &[1_000_000_001]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn dumps_into_reports_the_size_needed() {
    let data = sample(100, |i| i as u64);
    let t = Tensor::from_slice(&data);
    let need = Options::new().bound(&t).unwrap();
    let mut small = vec![0u8; need - 1];
    let e = tenso::dumps_into(&t, &mut small).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BufferTooSmall);
    assert_eq!(e.needed(), Some(need as u64));
    assert_eq!(e.status_name(), "TENSO_E_BUFFER_TOO_SMALL");
    let mut exact = vec![0u8; need];
    assert_eq!(tenso::dumps_into(&t, &mut exact).unwrap(), need);
    assert_eq!(exact, tenso::dumps(&t).unwrap());
    let mut none: [u8; 0] = [];
    assert_eq!(tenso::dumps_into(&t, &mut none).unwrap_err().needed(), Some(need as u64));
}

#[test]
fn bundles_nest_keep_order_and_allow_duplicate_keys() {
    let a = [1.0f32, 2.0];
    let b = [3i64, 4, 5];
    let mut inner = Bundle::new();
    inner.insert("b", &Tensor::from_slice(&b)).unwrap();
    let outer = Bundle::new()
        .with("a", &Tensor::from_slice(&a))
        .unwrap()
        .with("inner", &inner)
        .unwrap()
        .with("", &Tensor::from_slice(&[1u8]))
        .unwrap()
        .with("ключ", &Tensor::from_slice(&[2u8]))
        .unwrap()
        .with("a", &Tensor::from_slice(&[9.0f32]))
        .unwrap();
    assert_eq!(outer.len(), 5);
    let p = tenso::dumps(&outer).unwrap();
    let v = tenso::loads(&p).unwrap();
    let keys: Vec<&str> = v.entries().map(|e| e.unwrap().0).collect();
    assert_eq!(keys, ["a", "inner", "", "ключ", "a"]);
    assert_eq!(v.get("a").unwrap().to_vec::<f32>().unwrap(), a, "get finds the first duplicate");
    assert_eq!(v.entry(4).unwrap().unwrap().1.to_vec::<f32>().unwrap(), [9.0]);
    assert_eq!(v.get("inner").unwrap().get("b").unwrap().to_vec::<i64>().unwrap(), b);
    assert!(v.get("missing").is_none());
    assert!(v.get("inner").unwrap().get("a").is_none());
    // Not a bundle: no entries, no lookups.
    let d = v.get("a").unwrap();
    assert_eq!((d.bundle_len(), d.entries().count()), (0, 0));
    assert!(d.get("x").is_none() && d.entry(0).is_none());

    let empty = tenso::dumps(&Bundle::new()).unwrap();
    assert_eq!(empty.len(), 10);
    assert_eq!(tenso::loads(&empty).unwrap().bundle_len(), 0);
}

#[test]
fn bundle_limits() {
    let x = [0u8];
    let t = Tensor::from_slice(&x);
    let mut b = Bundle::new();
    for i in 0..255 {
        b.insert(&format!("k{i}"), &t).unwrap();
    }
    let e = b.insert("one too many", &t).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("255"), "{e}");
    assert_eq!(tenso::loads(&tenso::dumps(&b).unwrap()).unwrap().bundle_len(), 255);

    // Keys up to TENSO_MAX_KEY_BYTES.
    let max = tenso::sys::TENSO_MAX_KEY_BYTES as usize;
    let mut k = Bundle::new();
    k.insert(&"k".repeat(max), &t).unwrap();
    assert_eq!(k.insert(&"k".repeat(max + 1), &t).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let p = tenso::dumps(&k).unwrap();
    assert_eq!(tenso::loads(&p).unwrap().entry(0).unwrap().unwrap().0.len(), max);

    // Nesting: 64 levels below the top are refused at insert time.
    let mut level = Bundle::new().with("leaf", &t).unwrap().into_value();
    let mut depth = 1;
    let err = loop {
        match Bundle::new().with("n", &level) {
            Ok(b) => {
                level = b.into_value();
                depth += 1;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(depth, 64, "bundles nest at most 64 deep");
    let deep = tenso::dumps(&level).unwrap();
    assert!(tenso::loads(&deep).is_ok());
    assert_eq!(DecodeOptions::new().max_depth(8).loads(&deep).unwrap_err().kind(), ErrorKind::Limit);
}

#[test]
fn owned_child_values_outlive_their_handles_inside_bundles() {
    // The bundle copies only the child's description: the strings' bytes must stay alive
    // through the bundle even after the child value is dropped.
    let mut b = Bundle::new();
    {
        let s = Value::strings(["alpha", "βeta", ""]).unwrap();
        let r = Value::ragged_from_rows(&[&[1u16, 2][..], &[3]]).unwrap();
        b.insert("s", &s).unwrap();
        b.insert("r", &r).unwrap();
    }
    // Overwrite freed memory if it were freed.
    let noise: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 32]).collect();
    let p = tenso::dumps(&b).unwrap();
    drop(noise);
    let v = tenso::loads(&p).unwrap();
    assert_eq!(v.get("s").unwrap().strings().unwrap().to_strings().unwrap(), ["alpha", "βeta", ""]);
    let r = v.get("r").unwrap().ragged().unwrap();
    assert_eq!(r.row_to_vec::<u16>(0).unwrap(), [1, 2]);
    assert_eq!(r.row_to_vec::<u16>(1).unwrap(), [3]);
    // A bundle moved to another thread still owns them.
    let p2 = std::thread::spawn(move || tenso::dumps(&b).unwrap()).join().unwrap();
    assert_eq!(p, p2);
}

#[test]
fn pre_encoded_packets_must_be_exactly_one_packet() {
    let p = tenso::dumps(&Tensor::from_slice(&[1u32, 2])).unwrap();
    assert!(Value::packet(&p).is_ok());
    assert_eq!(Value::packet(&p[..p.len() - 1]).unwrap_err().kind(), ErrorKind::Truncated);
    let mut longer = p.clone();
    longer.push(0);
    assert_eq!(Value::packet(&longer).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Value::packet(b"XXXXXXXXXXXX").unwrap_err().kind(), ErrorKind::BadMagic);
    // Inserted verbatim, with its own options (integrity) kept.
    let with_footer = Options::new().integrity(true).dumps(&Tensor::from_slice(&[5i8])).unwrap();
    let b = Bundle::new().with("x", &Value::packet(&with_footer).unwrap()).unwrap();
    let v_bytes = tenso::dumps(&b).unwrap();
    let v = tenso::loads(&v_bytes).unwrap();
    assert_ne!(v.get("x").unwrap().flags() & tenso::flags::INTEGRITY, 0);
    // A single value encodes to the packet itself.
    assert_eq!(tenso::dumps(&Value::packet(&p).unwrap()).unwrap(), p);
    assert_eq!(tenso::dumps(&Value::tensor(&Tensor::from_slice(&[1u32, 2])).unwrap()).unwrap(), p);
}

#[test]
fn sparse_matrices_round_trip_and_bad_structure_is_refused() {
    let data = [1.0f64, 2.0, 3.0];
    let indices = [0i32, 2, 1];
    let indptr = [0i32, 2, 2, 3];
    let (d, i, p) = (Tensor::from_slice(&data), Tensor::from_slice(&indices), Tensor::from_slice(&indptr));
    let csr = Value::sparse_csr([3, 3], &d, &i, &p).unwrap();
    let bytes = tenso::dumps(&csr).unwrap();
    let v = tenso::loads(&bytes).unwrap();
    assert_eq!(v.kind(), Kind::SparseCsr);
    match v.sparse().unwrap() {
        tenso::Sparse::Csr { shape, data: dv, indices: iv, indptr: pv } => {
            assert_eq!(shape, [3, 3]);
            assert_eq!(dv.to_vec::<f64>().unwrap(), data);
            assert_eq!(iv.to_vec::<i32>().unwrap(), indices);
            assert_eq!(pv.to_vec::<i32>().unwrap(), indptr);
        }
        other => panic!("{other:?}"),
    }
    let csc = Value::sparse_csc([3, 3], &d, &i, &p).unwrap();
    assert_eq!(tenso::loads(&tenso::dumps(&csc).unwrap()).unwrap().kind(), Kind::SparseCsc);

    let bad_start = [1i32, 2, 2, 3];
    let bad_index = [0i32, 5, 1];
    let short = [0i32, 3];
    for (idx, ptr) in [(&indices[..], &bad_start[..]), (&bad_index[..], &indptr[..]), (&indices[..], &short[..])] {
        let e = Value::sparse_csr([3, 3], &d, &Tensor::from_slice(idx), &Tensor::from_slice(ptr)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{idx:?} {ptr:?}: {e}");
    }
    let rows = [0i64, 1];
    let e = Value::sparse_coo([2, 2], &d, &Tensor::from_slice(&rows), &Tensor::from_slice(&rows)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "COO lengths differ");
    // Not sparse.
    let dense = tenso::dumps(&d).unwrap();
    assert_eq!(tenso::loads(&dense).unwrap().sparse().unwrap_err().kind(), ErrorKind::UnsupportedKind);
    assert_eq!(tenso::loads(&dense).unwrap().component(0).unwrap_err().kind(), ErrorKind::UnsupportedKind);
}

#[test]
fn quantization_schemes_parts_and_dequantization() {
    let x: Vec<f32> = (0..24).map(|i| ((i * 37) % 23) as f32 / 7.0 - 1.5).collect();
    let t = Tensor::new(&x, &[4, 6]).unwrap();
    for qdtype in [Dtype::Qint8, Dtype::Quint8, Dtype::Qint4, Dtype::Quint4] {
        for scheme in [
            Scheme::PerTensor,
            Scheme::PerChannel { axis: 0 },
            Scheme::PerChannel { axis: 1 },
            Scheme::PerGroup { group_size: 5 },
        ] {
            let at = format!("{qdtype} {scheme:?}");
            let v = tenso::quantize(&t, qdtype, scheme).unwrap();
            let parts = v.quantized_parts().unwrap();
            assert_eq!((parts.dtype, parts.scheme, parts.shape), (qdtype, scheme, &[4usize, 6][..]), "{at}");
            let expected_scales = match scheme {
                Scheme::PerTensor => 1,
                Scheme::PerChannel { axis } => [4, 6][axis as usize],
                Scheme::PerGroup { group_size } => 24usize.div_ceil(group_size as usize),
            };
            assert_eq!(parts.scales.len(), expected_scales, "{at}");
            let codes = if matches!(qdtype, Dtype::Qint4 | Dtype::Quint4) { 12 } else { 24 };
            assert_eq!(parts.data.len(), codes, "{at}: packed size");
            let direct = parts.dequantize().unwrap();

            let bytes = tenso::dumps(&v).unwrap();
            let view = tenso::loads(&bytes).unwrap();
            let read = view.quantized().unwrap();
            assert_eq!(read, parts, "{at}: parts survive the wire");
            assert_eq!(read.dequantize().unwrap(), direct, "{at}");
            // 8-bit codes are within one step of the input; 4-bit within one of 15.
            let steps = if codes == 12 { 15.0 } else { 255.0 };
            for (a, b) in direct.iter().zip(&x) {
                assert!((a - b).abs() <= 4.3 / steps + 1e-5, "{at}: {a} vs {b}");
            }
            // Rebuilt from the parts, the packet is the same.
            let again = Value::quantized(&read).unwrap();
            assert_eq!(tenso::dumps(&again).unwrap(), bytes, "{at}: parts -> packet");
        }
    }
    // Negative axis counts from the end.
    let a = tenso::quantize(&t, Dtype::Qint8, Scheme::PerChannel { axis: -1 }).unwrap();
    let b = tenso::quantize(&t, Dtype::Qint8, Scheme::PerChannel { axis: 1 }).unwrap();
    assert_eq!(tenso::dumps(&a).unwrap(), tenso::dumps(&b).unwrap());
    assert_eq!(
        tenso::quantize(&t, Dtype::Qint8, Scheme::PerChannel { axis: 2 }).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(tenso::quantize(&t, Dtype::Float32, Scheme::PerTensor).unwrap_err().kind(), ErrorKind::BadDtype);
    let ints = [1i32, 2];
    assert_eq!(
        tenso::quantize(&Tensor::from_slice(&ints), Dtype::Qint8, Scheme::PerTensor).unwrap_err().kind(),
        ErrorKind::BadDtype
    );
    // Inconsistent parts.
    let q = Quantized {
        dtype: Dtype::Qint8,
        scheme: Scheme::PerTensor,
        shape: &[2],
        data: &[1, 2],
        scales: &[1.0],
        zero_points: &[],
    };
    assert_eq!(Value::quantized(&q).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let q = Quantized { zero_points: &[0.0], data: &[1, 2, 3], ..q };
    assert_eq!(Value::quantized(&q).unwrap_err().kind(), ErrorKind::InvalidArgument, "3 codes for 2 elements");
    let q = Quantized { data: &[1, 2], ..q };
    assert_eq!(q.dequantize().unwrap(), [1.0, 2.0]);
    assert_eq!(q.dequantize_into(&mut [0.0; 3]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(q.numel().unwrap(), 2);
    // A shape whose element count overflows: an error, never an overflow panic (debug builds).
    let huge = [usize::MAX, 3];
    let q = Quantized { shape: &huge, ..q };
    assert_eq!(q.numel().unwrap_err().kind(), ErrorKind::TooManyElements);
    assert_eq!(q.dequantize().unwrap_err().kind(), ErrorKind::TooManyElements);
    assert!(Value::quantized(&q).is_err());
    // Not quantized.
    assert_eq!(Value::strings(["x"]).unwrap().quantized_parts().unwrap_err().kind(), ErrorKind::UnsupportedKind);
}

#[test]
fn strings_and_ragged_arrays() {
    let payload = "héllo, world";
    let offsets = [0u64, 6, 7, 13];
    let v = Value::strings_raw(&offsets, payload.as_bytes()).unwrap();
    let p = tenso::dumps(&v).unwrap();
    let view = tenso::loads(&p).unwrap();
    let s = view.strings().unwrap();
    assert_eq!(s.to_strings().unwrap(), ["héllo", ",", " world"]);
    assert_eq!(s.offsets(), &offsets);
    assert_eq!(s.payload(), payload.as_bytes());
    assert_eq!(s.iter().collect::<Vec<_>>(), [&b"h\xc3\xa9llo"[..], b",", b" world"]);
    assert_eq!(format!("{s:?}"), r#"["héllo", ",", " world"]"#);

    assert_eq!(Value::strings_raw(&[], b"").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Value::strings_raw(&[0, 3], b"ab").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Value::strings_raw(&[0, 2, 1, 2], b"ab").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Value::strings_raw(&[1, 2], b"ab").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Value::strings_raw(&[0, 2], b"\xff\xfe").unwrap_err().kind(), ErrorKind::InvalidArgument);
    let empty = Value::strings(Vec::<String>::new()).unwrap();
    let e = tenso::dumps(&empty).unwrap();
    assert!(tenso::loads(&e).unwrap().strings().unwrap().is_empty());

    let flat = [1i32, 2, 3, 4, 5, 6];
    let rows = [0u64, 2, 2, 6];
    let r = Value::ragged(&Tensor::from_slice(&flat), &rows).unwrap();
    let p = tenso::dumps(&r).unwrap();
    let view = tenso::loads(&p).unwrap();
    assert_eq!(view.kind(), Kind::Bundle, "ragged arrays are bundles (upstream's form)");
    let rv = view.ragged().unwrap();
    assert_eq!(rv.len(), 3);
    assert_eq!((rv.offset(0), rv.offset(3), rv.offset(4)), (Some(0), Some(6), None));
    assert_eq!(rv.row_to_vec::<i32>(2).unwrap(), [3, 4, 5, 6]);
    assert!(rv.row_to_vec::<i32>(1).unwrap().is_empty());
    assert_eq!(rv.row_to_vec::<i32>(3).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(rv.row_to_vec::<f32>(0).unwrap_err().kind(), ErrorKind::BadDtype);
    match rv.row::<i32>(2) {
        Ok(row) => assert_eq!(row, [3, 4, 5, 6]),
        Err(e) => assert_eq!(e.kind(), ErrorKind::Misaligned),
    }
    assert_eq!(Value::ragged(&Tensor::from_slice(&flat), &[0, 2, 7]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Value::ragged(&Tensor::from_slice(&flat), &[]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // A bundle that is not in the ragged form.
    let b = tenso::dumps(&Bundle::new().with("x", &Tensor::from_slice(&flat)).unwrap()).unwrap();
    assert_eq!(tenso::loads(&b).unwrap().ragged().unwrap_err().kind(), ErrorKind::UnsupportedKind);
}

#[test]
fn ipc_references_round_trip() {
    let mut handle = [0u8; 64];
    handle.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8 ^ 0x5a);
    let r = IpcRef { handle, byte_offset: 1 << 40, nbytes: 12345, device_uuid: *b"GPU-0123456789ab" };
    let v = Value::ipc_ref(&r).unwrap();
    // Options do not apply: never a footer.
    let p = Options::new().integrity(true).dumps(&v).unwrap();
    assert_eq!(p.len(), 106);
    let view = tenso::loads(&p).unwrap();
    assert_eq!(view.kind(), Kind::GpuIpcRef);
    assert_eq!(view.ipc_ref().unwrap(), r);
    assert_eq!(view.to_vec::<u8>().unwrap_err().kind(), ErrorKind::UnsupportedKind);
    let dense = tenso::dumps(&Tensor::from_slice(&[1u8])).unwrap();
    assert_eq!(tenso::loads(&dense).unwrap().ipc_ref().unwrap_err().kind(), ErrorKind::UnsupportedKind);
}

#[test]
fn errors_carry_status_and_message_and_leave_no_residue() {
    let e = tenso::loads(b"TNSO\x09\0\0\0\0\0").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedVersion);
    assert_eq!(e.status(), tenso::sys::TENSO_E_UNSUPPORTED_VERSION);
    assert_eq!(e.status_name(), "TENSO_E_UNSUPPORTED_VERSION");
    assert!(!e.message().is_empty());
    assert!(e.to_string().contains("TENSO_E_UNSUPPORTED_VERSION"), "{e}");
    // The thread's message was copied and cleared.
    let last = unsafe { std::ffi::CStr::from_ptr(tenso::sys::tenso_last_error()) };
    assert_eq!(last.to_bytes(), b"");
    // Into std::io::Error.
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
    let trunc: std::io::Error = tenso::loads(b"TN").unwrap_err().into();
    assert_eq!(trunc.kind(), std::io::ErrorKind::UnexpectedEof);
    // Kinds map back to statuses.
    for st in -20..=-1 {
        assert_eq!(ErrorKind::from_status(st).status(), st);
    }
    assert_eq!(ErrorKind::from_status(-99), ErrorKind::Unknown);
    // An error is Send + Sync + 'static, so it works with `?` into Box<dyn Error>.
    fn boxed() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        tenso::loads(b"")?;
        Ok(())
    }
    let e = boxed().unwrap_err();
    assert_eq!(e.downcast_ref::<tenso::Error>().map(tenso::Error::kind), Some(ErrorKind::Truncated));
}

#[test]
fn views_are_shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<tenso::View<'static>>();
    send_sync::<tenso::Packet>();
    send_sync::<tenso::ViewRef>();
    send_sync::<tenso::Buffer>();
    send_sync::<tenso::DlPack<'static>>();
    send_sync::<tenso::Error>();
    send::<Value<'static>>();
    send::<Bundle<'static>>();

    let data: Vec<u32> = (0..10_000).collect();
    let bytes = tenso::dumps(&Bundle::new().with("x", &Tensor::from_slice(&data)).unwrap()).unwrap();
    let view = tenso::loads(&bytes).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let x = view.get("x").unwrap().to_vec::<u32>().unwrap();
                assert_eq!(x, data);
                // Failures on other threads carry their own messages.
                assert_eq!(tenso::loads(b"nope").unwrap_err().kind(), ErrorKind::BadMagic);
            });
        }
    });
}

#[test]
fn library_version_is_1_x() {
    assert_eq!(tenso::library_version_number() / 10000, 1);
    assert_eq!(tenso::library_version(), std::str::from_utf8(&tenso::sys::TENSO_VERSION_STRING[..5]).unwrap());
    assert_eq!(tenso::protocol_version(), 4);
}
