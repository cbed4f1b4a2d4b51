//! The golden vectors of tests/vectors (written by the pinned upstream tenso 0.24.0) through
//! the safe API: every case is decoded (from memory, from a mapped file, from a `Read`) and
//! checked against the manifest recursively (kind, dtype, shape, exact body bytes, bundle
//! keys in wire order, sparse components, quantization parts and upstream's dequantized
//! values, strings, ragged rows, IPC references); then the same value is built with the
//! Rust API and encoded with the case's options: byte-identical for every uncompressed v4
//! case, decoding back to the value otherwise. Quantized cases are also re-quantized from
//! upstream's float input (bit-exact).
mod common;

use common::{cases, to_hex, Case, Node, Quant};
use tenso::{Bf16, Complex, Dtype, Kind, PacketLength, Quantized, Tensor, Value, ViewRef, F16};

/// Checks `as_slice`/`to_vec` for the element type of the view against the body bytes.
fn typed<T: tenso::Element + PartialEq + std::fmt::Debug>(v: &ViewRef, body: &[u8], at: &str) {
    let copied = v.to_vec::<T>().unwrap_or_else(|e| panic!("{at}: to_vec: {e}"));
    let size = std::mem::size_of::<T>();
    assert_eq!(copied.len() * size, body.len(), "{at}: to_vec length");
    // SAFETY (test): reading the bytes of plain-data elements.
    let bytes = unsafe { std::slice::from_raw_parts(copied.as_ptr().cast::<u8>(), body.len()) };
    assert_eq!(bytes, body, "{at}: to_vec bytes");
    let aligned = body.is_empty() || v.bytes().as_ptr() as usize % std::mem::align_of::<T>() == 0;
    if T::DTYPE == tenso::Dtype::Bool {
        assert_eq!(
            v.as_slice::<T>().unwrap_err().kind(),
            tenso::ErrorKind::UnsupportedKind,
            "{at}: bool is never borrowed"
        );
        return;
    }
    match v.as_slice::<T>() {
        Ok(s) => {
            assert!(aligned, "{at}: as_slice accepted misaligned data");
            assert_eq!(s, &copied[..], "{at}: as_slice");
        }
        Err(e) => {
            assert!(!aligned, "{at}: as_slice failed on aligned data: {e}");
            assert_eq!(e.kind(), tenso::ErrorKind::Misaligned, "{at}");
        }
    }
}

fn check_typed(v: &ViewRef, dtype: Dtype, body: &[u8], at: &str) {
    match dtype {
        Dtype::Float32 => typed::<f32>(v, body, at),
        Dtype::Float64 => typed::<f64>(v, body, at),
        Dtype::Int8 => typed::<i8>(v, body, at),
        Dtype::Int16 => typed::<i16>(v, body, at),
        Dtype::Int32 => typed::<i32>(v, body, at),
        Dtype::Int64 => typed::<i64>(v, body, at),
        Dtype::Uint8 => typed::<u8>(v, body, at),
        Dtype::Uint16 => typed::<u16>(v, body, at),
        Dtype::Uint32 => typed::<u32>(v, body, at),
        Dtype::Uint64 => typed::<u64>(v, body, at),
        Dtype::Bool => typed::<bool>(v, body, at),
        Dtype::Float16 => typed::<F16>(v, body, at),
        Dtype::Bfloat16 => typed::<Bf16>(v, body, at),
        Dtype::Complex64 => typed::<Complex<f32>>(v, body, at),
        Dtype::Complex128 => typed::<Complex<f64>>(v, body, at),
        d => panic!("{at}: {d} is not dense"),
    }
    // A wrong element type is refused, never reinterpreted.
    let wrong = if dtype == Dtype::Uint8 { v.as_slice::<i8>().map(|_| ()) } else { v.as_slice::<u8>().map(|_| ()) };
    assert_eq!(wrong.unwrap_err().kind(), tenso::ErrorKind::BadDtype, "{at}");
}

fn check_quant_parts(q: &Quantized<'_>, want: &Quant, at: &str) {
    assert_eq!(q.dtype, want.dtype, "{at}: quantized dtype");
    assert_eq!(q.scheme, want.scheme, "{at}: scheme");
    assert_eq!(q.shape, &want.shape[..], "{at}: quantized shape");
    assert_eq!(q.data, &want.body[..], "{at}: packed codes");
    assert_eq!(
        q.scales.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
        want.scales.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
        "{at}: scales"
    );
    assert_eq!(
        q.zero_points.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
        want.zero_points.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
        "{at}: zero points"
    );
    let deq = q.dequantize().unwrap_or_else(|e| panic!("{at}: dequantize: {e}"));
    let bytes: Vec<u8> = deq.iter().flat_map(|f| f.to_le_bytes()).collect();
    assert_eq!(to_hex(&bytes), to_hex(&want.dequant), "{at}: dequantize vs upstream");
}

/// `v` against `node`; `version` is the wire version expected, `dense_flags` the integrity and
/// compression bits expected on dense bodies.
fn check(v: &ViewRef, node: &Node, version: u32, dense_flags: u32, at: &str) {
    assert_eq!(v.version(), version, "{at}: version");
    match node {
        Node::Dense { dtype, shape, body } => {
            assert_eq!(v.kind(), Kind::Dense, "{at}: kind");
            assert_eq!(v.dtype(), Some(*dtype), "{at}: dtype");
            assert_eq!(v.shape(), &shape[..], "{at}: shape");
            assert_eq!(v.nbytes(), body.len() as u64, "{at}: nbytes");
            assert_eq!(to_hex(v.bytes()), to_hex(body), "{at}: body");
            let mask = tenso::flags::INTEGRITY | tenso::flags::COMPRESSION;
            assert_eq!(v.flags() & mask, dense_flags, "{at}: integrity/compression flags");
            if dense_flags & tenso::flags::COMPRESSION != 0 {
                assert!(v.owns_data(), "{at}: a decompressed body is owned by the view");
            }
            check_typed(v, *dtype, body, at);
            // Re-encoding the view itself gives a packet of the same value.
            let again = tenso::dumps(&v.as_tensor().unwrap()).unwrap();
            assert_eq!(tenso::loads(&again).unwrap().bytes().unwrap(), &body[..], "{at}: as_tensor round trip");
        }
        Node::Bundle(entries) => {
            assert_eq!(v.kind(), Kind::Bundle, "{at}: kind");
            assert_eq!(v.dtype(), None, "{at}: a bundle has no dtype");
            assert_eq!(v.bundle_len(), entries.len(), "{at}: entry count");
            assert_eq!(v.entries().len(), entries.len());
            for (i, (entry, (want_key, want))) in v.entries().zip(entries).enumerate() {
                let (key, child) = entry.unwrap();
                let here = format!("{at}[{want_key:?}]");
                assert_eq!(key, want_key, "{here}: key of entry {i}");
                let first = entries.iter().position(|(k, _)| k == key).unwrap();
                let found = v.get(key).unwrap_or_else(|| panic!("{here}: get"));
                assert!(std::ptr::eq(found, v.entry(first).unwrap().unwrap().1), "{here}: get returns the first entry");
                check(child, want, version, dense_flags, &here);
            }
            assert!(v.entry(entries.len()).is_none());
            // Reverse iteration sees the same entries.
            let rev: Vec<&str> = v.entries().rev().map(|e| e.unwrap().0).collect();
            assert!(rev.iter().rev().eq(entries.iter().map(|(k, _)| k)), "{at}: entries().rev()");
        }
        Node::Sparse { kind, shape, comps } => {
            assert_eq!(v.kind(), *kind, "{at}: kind");
            let s = v.sparse().unwrap();
            assert_eq!(s.shape(), *shape, "{at}: matrix shape");
            let parts = match s {
                tenso::Sparse::Coo { data, row, col, .. } => [data, row, col],
                tenso::Sparse::Csr { data, indices, indptr, .. } | tenso::Sparse::Csc { data, indices, indptr, .. } => {
                    [data, indices, indptr]
                }
            };
            assert!(std::ptr::eq(s.data(), parts[0]));
            for (i, (p, want)) in parts.iter().zip(comps).enumerate() {
                assert!(std::ptr::eq(*p, v.component(i as u32).unwrap()));
                // Components are always written plain (alignment 64, no footer/compression).
                check(p, want, version, 0, &format!("{at}.component{i}"));
            }
            assert_eq!(v.component(3).unwrap_err().kind(), tenso::ErrorKind::InvalidArgument);
        }
        Node::Quantized(q) => {
            assert_eq!(v.kind(), Kind::Quantized, "{at}: kind");
            assert_eq!(v.dtype(), Some(q.dtype), "{at}: dtype");
            assert_eq!(v.shape(), &q.shape[..], "{at}: shape");
            check_quant_parts(&v.quantized().unwrap(), q, at);
            assert_eq!(v.as_slice::<u8>().unwrap_err().kind(), tenso::ErrorKind::UnsupportedKind);
        }
        Node::Strings(strings) => {
            assert_eq!(v.kind(), Kind::String, "{at}: kind");
            assert_eq!(v.dtype(), Some(Dtype::String));
            assert_eq!(v.shape(), &[strings.len()], "{at}: shape");
            let s = v.strings().unwrap();
            assert_eq!(s.len(), strings.len());
            assert_eq!(&s.to_strings().unwrap(), strings, "{at}: strings");
            for (i, want) in strings.iter().enumerate() {
                assert_eq!(s.get(i).unwrap().unwrap(), want);
                assert_eq!(s.get_bytes(i).unwrap(), want.as_bytes());
            }
            assert!(s.get(strings.len()).is_none());
        }
        Node::Ragged { dtype, rows, lengths, bundle, .. } => {
            check(v, bundle, version, dense_flags, at);
            let r = v.ragged().unwrap();
            assert_eq!(r.flat().dtype(), Some(*dtype));
            assert_eq!(r.len(), rows.len(), "{at}: rows");
            let item = dtype.itemsize();
            for (i, (row, len)) in rows.iter().zip(lengths).enumerate() {
                let range = r.row_range(i).unwrap();
                assert_eq!(range.len() as u64, *len, "{at}: row {i} length");
                assert_eq!(&r.flat().bytes()[range.start * item..range.end * item], &row[..], "{at}: row {i}");
            }
            assert!(r.row_range(rows.len()).is_none());
        }
        Node::Ipc(want) => {
            assert_eq!(v.kind(), Kind::GpuIpcRef, "{at}: kind");
            assert_eq!(&v.ipc_ref().unwrap(), want, "{at}: reference");
        }
    }
}

fn expected_dense_flags(c: &Case) -> u32 {
    let mut f = 0;
    if c.integrity {
        f |= tenso::flags::INTEGRITY;
    }
    if c.compress {
        f |= tenso::flags::COMPRESSION;
    }
    f
}

#[allow(clippy::large_enum_variant)] // a test helper, built once per case
enum Built<'t> {
    T(Tensor<'t>),
    V(Value<'t>),
}

fn tensor(n: &Node) -> Tensor<'_> {
    match n {
        Node::Dense { dtype, shape, body } => Tensor::from_bytes(*dtype, body, shape).unwrap(),
        other => panic!("expected a dense node, got {other:?}"),
    }
}

fn quant_parts(q: &Quant) -> Quantized<'_> {
    Quantized {
        dtype: q.dtype,
        scheme: q.scheme,
        shape: &q.shape,
        data: &q.body,
        scales: &q.scales,
        zero_points: &q.zero_points,
    }
}

/// The value of `node` built with the Rust API, borrowing from the node.
fn build(n: &Node) -> Built<'_> {
    match n {
        Node::Dense { .. } => Built::T(tensor(n)),
        Node::Bundle(entries) => {
            let mut b = tenso::Bundle::new();
            for (k, child) in entries {
                match build(child) {
                    Built::T(t) => b.insert(k, &t).unwrap(),
                    Built::V(v) => b.insert(k, &v).unwrap(),
                }
            }
            assert_eq!(b.len(), entries.len());
            Built::V(b.into_value())
        }
        Node::Sparse { kind, shape, comps } => {
            let (a, b, c) = (tensor(&comps[0]), tensor(&comps[1]), tensor(&comps[2]));
            Built::V(
                match kind {
                    Kind::SparseCoo => Value::sparse_coo(*shape, &a, &b, &c),
                    Kind::SparseCsr => Value::sparse_csr(*shape, &a, &b, &c),
                    _ => Value::sparse_csc(*shape, &a, &b, &c),
                }
                .unwrap(),
            )
        }
        Node::Quantized(q) => Built::V(Value::quantized(&quant_parts(q)).unwrap()),
        Node::Strings(s) => Built::V(Value::strings(s).unwrap()),
        Node::Ragged { dtype, flat, offsets, .. } => {
            let n = offsets.last().copied().unwrap_or(0);
            let t = Tensor::from_bytes(*dtype, flat, &[n as usize]).unwrap();
            Built::V(Value::ragged(&t, offsets).unwrap())
        }
        Node::Ipc(r) => Built::V(Value::ipc_ref(r).unwrap()),
    }
}

fn encode(c: &Case) -> Vec<u8> {
    let opts = c.options();
    match build(&c.node) {
        Built::T(t) => {
            let a = opts.dumps(&t).unwrap();
            // Every encoder gives the same bytes.
            assert_eq!(&opts.dumps_buffer(&t).unwrap()[..], &a[..], "{}: dumps_buffer", c.name);
            let mut dst = vec![0u8; opts.bound(&t).unwrap()];
            let n = opts.dumps_into(&t, &mut dst).unwrap();
            assert_eq!(&dst[..n], &a[..], "{}: dumps_into", c.name);
            a
        }
        Built::V(v) => {
            let a = opts.dumps(&v).unwrap();
            assert_eq!(&opts.dumps_buffer(&v).unwrap()[..], &a[..], "{}: dumps_buffer", c.name);
            a
        }
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    format!("ours {} B, golden {} B, first difference at {at}", a.len(), b.len())
}

#[test]
fn golden_vectors_decode_and_reencode() {
    let all = cases();
    assert!(all.len() >= 97, "manifest has {} cases", all.len());
    let (mut byte_exact, mut by_value) = (0, 0);
    for c in &all {
        let at = c.name.as_str();
        let bytes = std::fs::read(&c.file).unwrap_or_else(|e| panic!("{at}: {e}"));
        assert_eq!(bytes.len() as u64, c.size, "{at}: file size");

        // Framing and header inspection.
        assert_eq!(tenso::packet_length(&bytes).unwrap(), PacketLength::Complete(bytes.len()), "{at}");
        let info = tenso::inspect(&bytes).unwrap();
        assert_eq!(info.version(), c.version, "{at}: inspect version");
        assert_eq!(info.packet_size(), Some(c.size), "{at}: inspect packet_size");

        // Decoding from memory, with slack after the packet (ignored).
        let flags = expected_dense_flags(c);
        let view = tenso::loads(&bytes).unwrap_or_else(|e| panic!("{at}: loads: {e}"));
        assert_eq!(view.packet_size(), c.size);
        assert_eq!(info.kind(), view.kind(), "{at}: inspect kind");
        check(&view, &c.node, c.version, flags, at);
        let mut slack = bytes.clone();
        slack.extend_from_slice(b"trailing garbage");
        check(&tenso::loads(&slack).unwrap(), &c.node, c.version, flags, at);

        // From a mapped file, from a file read into memory, from a Read, copied into a Packet.
        check(&tenso::load(&c.file).unwrap(), &c.node, c.version, flags, &format!("{at} (mmap)"));
        let read = tenso::load_with(&c.file, tenso::LoadMode::Read, &Default::default()).unwrap();
        check(&read, &c.node, c.version, flags, &format!("{at} (load read)"));
        let mut r = &slack[..];
        let streamed = tenso::read_from(&mut r).unwrap().unwrap();
        assert_eq!(r, b"trailing garbage", "{at}: read_from consumed past the packet");
        check(&streamed, &c.node, c.version, flags, &format!("{at} (read_from)"));
        let copied = tenso::Packet::from_bytes(&slack, &Default::default()).unwrap();
        check(&copied, &c.node, c.version, flags, &format!("{at} (Packet::from_bytes)"));

        // Re-encoding with the Rust API.
        let ours = encode(c);
        if !c.compressed && c.version == 4 {
            assert!(ours == bytes, "{at}: re-encoded bytes differ: {}", first_difference(&ours, &bytes));
            byte_exact += 1;
        } else {
            let back = tenso::loads(&ours).unwrap_or_else(|e| panic!("{at}: our packet: {e}"));
            check(&back, &c.node, 4, flags, &format!("{at} (ours)"));
            by_value += 1;
        }

        // Quantized: quantize upstream's float input again, bit for bit.
        if let Node::Quantized(q) = &c.node {
            let input = Tensor::from_bytes(q.input_dtype, &q.input, &q.shape).unwrap();
            let v = tenso::quantize(&input, q.dtype, q.scheme).unwrap();
            check_quant_parts(&v.quantized_parts().unwrap(), q, &format!("{at} (quantize)"));
            assert!(c.options().dumps(&v).unwrap() == bytes, "{at}: quantize + dumps differs from upstream");
        }
    }
    eprintln!("{} golden cases: {byte_exact} re-encoded byte for byte, {by_value} by value", all.len());
    assert!(byte_exact >= 80);
}
