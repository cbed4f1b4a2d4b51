//! Archives through the safe API: tenso archives, safetensors and bintensors written by
//! ArchiveWriter and read back by Archive, hostile headers with their exact error kinds,
//! verification (progress, abort, panics) and the atomic-write promise.
mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::TempDir;
use tenso::{
    Archive, ArchiveOptions, ArchiveWriteOptions, ArchiveWriter, Dtype, ErrorKind, Format, Kind, Options, Tensor,
};

fn floats(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.25 + seed).collect()
}

/// Writes three tensors and two metadata pairs with `opts`; returns the data written.
fn write_three(path: &std::path::Path, opts: &ArchiveWriteOptions) -> (Vec<f32>, Vec<i64>, Vec<u8>) {
    let (a, b, c) = (floats(300, 1.0), vec![-5i64, 6, 7, 8], vec![9u8; 17]);
    let mut w = opts.create(path).unwrap();
    w.add("layer.0.weight", &Tensor::new(&a, &[3, 100]).unwrap()).unwrap();
    w.add("layer.0.bias", &Tensor::new(&b, &[2, 2]).unwrap()).unwrap();
    w.add("ünïcode", &Tensor::from_slice(&c)).unwrap();
    w.set_metadata("format", "pt").unwrap();
    w.set_metadata("note", "first").unwrap();
    w.set_metadata("note", "last wins").unwrap();
    w.finish().unwrap();
    (a, b, c)
}

fn check_three(a_file: &Archive, data: &(Vec<f32>, Vec<i64>, Vec<u8>)) {
    let (a, b, c) = data;
    assert_eq!(a_file.len(), 3);
    let mut names: Vec<&str> = a_file.entries().map(|e| e.name()).collect();
    if a_file.format() == Format::Archive {
        assert_eq!(names, ["layer.0.weight", "layer.0.bias", "ünïcode"], "archives keep the order of add");
    }
    names.sort_unstable();
    assert_eq!(names, ["layer.0.bias", "layer.0.weight", "ünïcode"]);
    let bias = a_file.find("layer.0.bias").unwrap();
    let e = a_file.entry(bias).unwrap();
    assert_eq!((e.kind(), e.dtype(), e.shape()), (Kind::Dense, Some(Dtype::Int64), &[2usize, 2][..]));
    assert_eq!(e.name(), "layer.0.bias");
    assert_eq!(e.nbytes(), 32);
    assert!(a_file.entry(3).is_none());
    assert_eq!(a_file.entry(a_file.find("ünïcode").unwrap()).unwrap().name(), "ünïcode");
    assert_eq!(a_file.find("nope"), None);
    assert_eq!(a_file.get("layer.0.weight").unwrap().to_vec::<f32>().unwrap(), *a);
    assert_eq!(a_file.get(bias).unwrap().to_vec::<i64>().unwrap(), *b);
    assert_eq!(a_file.get(&"ünïcode".to_string()).unwrap().to_vec::<u8>().unwrap(), *c);
    assert_eq!(a_file.get("nope").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(a_file.get(3).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // pread slices of a raw body.
    let mut mid = [0u8; 8];
    a_file.read("layer.0.bias", 8, &mut mid).unwrap();
    assert_eq!(i64::from_le_bytes(mid), 6);
    let mut past = [0u8; 8];
    assert_eq!(a_file.read(bias, 28, &mut past).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn tenso_archive_round_trip_metadata_and_zero_copy() {
    let dir = TempDir::new("archive-rt");
    let path = dir.path("m.tenso");
    let data = write_three(&path, &ArchiveWriteOptions::new());
    let a = Archive::open(&path).unwrap();
    assert_eq!(a.format(), Format::Archive);
    assert_eq!(Format::Archive.name(), "tenso");
    check_three(&a, &data);
    let meta: Vec<(&str, &str)> = a.metadata().collect();
    assert_eq!(meta.len(), 2);
    assert!(meta.contains(&("format", "pt")));
    assert_eq!(a.metadata_get("note"), Some("last wins"));
    assert_eq!(a.metadata_get("missing"), None);
    for e in a.entries() {
        assert!(e.xxh3().is_some(), "hashes are stored by default");
        assert_eq!(e.offset() % 64, 0);
        let d = e.data_offset().expect("uncompressed dense bodies are stored raw");
        assert_eq!(d % 64, 0);
    }
    // Zero copy: the packet's body is inside the mapping, and the packet outlives the handle.
    let p = a.get(0).unwrap();
    assert!(p.owns_data());
    drop(a);
    assert_eq!(p.as_slice::<f32>().unwrap(), &data.0[..]);
    Archive::open(&path).unwrap().verify().unwrap();
}

#[test]
fn alignment_4096_for_direct_io() {
    let dir = TempDir::new("archive-4k");
    let path = dir.path("aligned.tenso");
    let data = write_three(&path, &ArchiveWriteOptions::new().alignment(4096));
    let a = Archive::open(&path).unwrap();
    assert_eq!(a.alignment(), 4096);
    check_three(&a, &data);
    for e in a.entries() {
        assert_eq!(e.offset() % 4096, 0, "{} at {}", e.name(), e.offset());
        assert_eq!(e.data_offset().unwrap() % 4096, 0, "{}", e.name());
    }
    let err = ArchiveWriteOptions::new().alignment(100).create(dir.path("bad.tenso")).and_then(|mut w| {
        w.add("x", &Tensor::from_slice(&[1u8]))?;
        w.finish()
    });
    assert_eq!(err.unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn compressed_and_unhashed_archives() {
    let dir = TempDir::new("archive-lz4");
    let path = dir.path("z.tenso");
    let opts = ArchiveWriteOptions::new().hash(false).encode(Options::new().compress(true).integrity(true));
    let data = write_three(&path, &opts);
    let a = Archive::open(&path).unwrap();
    assert!(a.entries().all(|e| e.xxh3().is_none()));
    assert!(a.entries().all(|e| e.data_offset().is_none()), "LZ4 bodies are not stored raw");
    assert_eq!(a.get(0).unwrap().to_vec::<f32>().unwrap(), data.0);
    assert_eq!(a.get(1).unwrap().to_vec::<i64>().unwrap(), data.1);
    assert_eq!(a.get(2).unwrap().to_vec::<u8>().unwrap(), data.2);
    let mut dst = [0u8; 4];
    assert_eq!(a.read(0, 0, &mut dst).unwrap_err().kind(), ErrorKind::UnsupportedKind);
    a.verify().unwrap();
}

#[test]
fn safetensors_and_bintensors_round_trip() {
    let dir = TempDir::new("archive-st");
    for (file, format) in [("m.safetensors", Format::Safetensors), ("m.bt", Format::Bintensors)] {
        let path = dir.path(file);
        let data = write_three(&path, &ArchiveWriteOptions::new()); // format from the extension
        let a = Archive::open(&path).unwrap();
        assert_eq!(a.format(), format, "{file}");
        check_three(&a, &data);
        assert_eq!(a.metadata_get("format"), Some("pt"), "{file}");
        // Forcing the format on open reads the same file; the other one refuses it.
        let forced = ArchiveOptions::new().format(format).open(&path).unwrap();
        assert_eq!(forced.len(), 3);
        let other = if format == Format::Safetensors { Format::Bintensors } else { Format::Safetensors };
        let e = ArchiveOptions::new().format(other).open(&path).unwrap_err();
        // A bintensors header is no UTF-8 JSON; a safetensors header ('{') no bincode tag.
        let want = if other == Format::Safetensors { ErrorKind::BadUtf8 } else { ErrorKind::Corrupt };
        assert_eq!(e.kind(), want, "{file} read as {other:?}: {e}");
    }
    // The safetensors bytes are the real format: u64 header length, then JSON.
    let bytes = std::fs::read(dir.path("m.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    assert_eq!(header["layer.0.bias"]["dtype"], "I64");
    assert_eq!(header["layer.0.bias"]["shape"], serde_json::json!([2, 2]));
    assert_eq!(header["__metadata__"]["note"], "last wins");

    // Dense tensors only, of dtypes the format has.
    let mut w = ArchiveWriter::create(dir.path("bad.safetensors")).unwrap();
    let strings = tenso::Value::strings(["a"]).unwrap();
    assert_eq!(w.add("s", &strings).unwrap_err().kind(), ErrorKind::UnsupportedKind);
    let mut w = ArchiveWriter::create(dir.path("bad.bt")).unwrap();
    let z = [tenso::Complex { re: 1.0f32, im: 2.0 }];
    assert_eq!(w.add("z", &Tensor::from_slice(&z)).unwrap_err().kind(), ErrorKind::BadDtype);
}

#[test]
fn writer_errors_and_atomicity() {
    let dir = TempDir::new("archive-atomic");
    let path = dir.path("keep.tenso");
    let data = write_three(&path, &ArchiveWriteOptions::new());
    let before = std::fs::read(&path).unwrap();

    let mut w = ArchiveWriter::create(&path).unwrap();
    w.add("x", &Tensor::from_slice(&[1u8])).unwrap();
    assert_eq!(w.add("x", &Tensor::from_slice(&[2u8])).unwrap_err().kind(), ErrorKind::DuplicateKey);
    drop(w); // unfinished: discarded
    assert_eq!(std::fs::read(&path).unwrap(), before, "an abandoned write leaves the old file");
    let leftovers: Vec<_> = std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind: {leftovers:?}");
    check_three(&Archive::open(&path).unwrap(), &data);

    assert_eq!(ArchiveWriter::create(dir.path("no/such/dir/x.tenso")).map(|_| ()).unwrap_err().kind(), ErrorKind::Io);
    assert_eq!(Archive::open(dir.path("missing.tenso")).unwrap_err().kind(), ErrorKind::NotFound);
}

/// A safetensors file from a JSON header and data bytes (header padded to 8 with spaces).
fn safetensors(header: &[u8], data: &[u8]) -> Vec<u8> {
    let mut h = header.to_vec();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

#[test]
fn hostile_safetensors_headers_have_exact_kinds() {
    let dir = TempDir::new("archive-hostile");
    let st = ArchiveOptions::new().format(Format::Safetensors);
    let open = |name: &str, bytes: &[u8]| {
        let p = dir.path(name);
        std::fs::write(&p, bytes).unwrap();
        st.open(&p).map(|a| a.len())
    };
    let ok = safetensors(br#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#, &[1, 2]);
    assert_eq!(open("ok.safetensors", &ok).unwrap(), 1);

    let mut short = 1000u64.to_le_bytes().to_vec();
    short.extend_from_slice(b"{}      ");
    assert_eq!(open("short.safetensors", &short).unwrap_err().kind(), ErrorKind::Truncated);
    let garbage = safetensors(b"{not json", &[]);
    assert_eq!(open("garbage.safetensors", &garbage).unwrap_err().kind(), ErrorKind::Corrupt);
    let overlap = safetensors(
        br#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}"#,
        &[1, 2, 3],
    );
    assert_eq!(open("overlap.safetensors", &overlap).unwrap_err().kind(), ErrorKind::BadOffset);
    let outside = safetensors(br#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#, &[1, 2]);
    assert_eq!(open("outside.safetensors", &outside).unwrap_err().kind(), ErrorKind::BadOffset);
    let dup = safetensors(
        br#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
        &[1, 2],
    );
    assert_eq!(open("dup.safetensors", &dup).unwrap_err().kind(), ErrorKind::DuplicateKey);
    let bad_utf8 = safetensors(b"{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", &[1]);
    assert_eq!(open("utf8.safetensors", &bad_utf8).unwrap_err().kind(), ErrorKind::BadUtf8);
    let f8 = safetensors(br#"{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}"#, &[1]);
    assert_eq!(open("f8.safetensors", &f8).unwrap_err().kind(), ErrorKind::BadDtype);
    let many = ArchiveOptions::new().format(Format::Safetensors).max_tensors(1);
    let two = safetensors(
        br#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
        &[1, 2],
    );
    let p = dir.path("two.safetensors");
    std::fs::write(&p, &two).unwrap();
    assert_eq!(many.open(&p).unwrap_err().kind(), ErrorKind::Limit);
}

#[test]
fn verify_reports_the_bad_tensor_and_honours_progress() {
    let dir = TempDir::new("archive-verify");
    let path = dir.path("v.tenso");
    write_three(&path, &ArchiveWriteOptions::new());
    // Progress runs and can abort; a panic inside it comes back out as a panic.
    let a = Archive::open(&path).unwrap();
    let mut calls = Vec::new();
    a.verify_with_progress(|done, total| {
        calls.push((done, total));
        true
    })
    .unwrap();
    assert!(!calls.is_empty());
    let (done, total) = *calls.last().unwrap();
    assert_eq!(done, total);
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(a.verify_with_progress(|_, _| false).unwrap_err().kind(), ErrorKind::User);
    let caught = catch_unwind(AssertUnwindSafe(|| a.verify_with_progress(|_, _| panic!("from the closure"))));
    let payload = caught.expect_err("the panic is resumed");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"from the closure"));
    a.verify().unwrap(); // the handle is fine after all that
    drop(a);

    // Flip one body byte of tensor 1: its get and verify fail, the others still read.
    let bad_at = {
        let a = Archive::open(&path).unwrap();
        a.entry(1).unwrap().data_offset().unwrap()
    };
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[bad_at as usize] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let a = Archive::open(&path).unwrap();
    assert!(a.get(0).is_ok());
    assert_eq!(a.get(1).unwrap_err().kind(), ErrorKind::Checksum);
    let err = a.verify().unwrap_err();
    assert_eq!((err.kind(), err.index()), (ErrorKind::Checksum, Some(1)), "{err}");
    assert_eq!(ArchiveOptions::new().verify_all(true).open(&path).unwrap_err().kind(), ErrorKind::Checksum);
    let lax = ArchiveOptions::new().no_verify(true).open(&path).unwrap();
    assert_eq!(lax.get(1).unwrap().to_vec::<i64>().unwrap()[0], -5 ^ 0x40);
}

#[test]
fn archive_handles_are_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Archive>();
    fn assert_send<T: Send>() {}
    assert_send::<ArchiveWriter>();
    let dir = TempDir::new("archive-threads");
    let path = dir.path("t.tenso");
    let data = write_three(&path, &ArchiveWriteOptions::new());
    let a = Archive::open(&path).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    assert_eq!(a.get(0).unwrap().to_vec::<f32>().unwrap(), data.0);
                }
            });
        }
    });
}

/// Files written by the real safetensors and bintensors packages (tests/vectors/archive, see
/// make_archive_vectors.py) read back tensor for tensor, byte for byte, metadata included.
#[test]
fn peer_golden_files() {
    let dir = common::vectors_dir().join("archive");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_object().unwrap();
    assert!(files.len() >= 3, "manifest lists {} files", files.len());
    let dtype = |name: &str| match name {
        "BOOL" => Dtype::Bool,
        "U8" => Dtype::Uint8,
        "I8" => Dtype::Int8,
        "I16" => Dtype::Int16,
        "U16" => Dtype::Uint16,
        "F16" => Dtype::Float16,
        "BF16" => Dtype::Bfloat16,
        "I32" => Dtype::Int32,
        "U32" => Dtype::Uint32,
        "F32" => Dtype::Float32,
        "C64" => Dtype::Complex64,
        "F64" => Dtype::Float64,
        "I64" => Dtype::Int64,
        "U64" => Dtype::Uint64,
        other => panic!("dtype {other} is not in the test's table"),
    };
    for (file, want) in files {
        let a = Archive::open(dir.join(file)).unwrap();
        assert_eq!(a.alignment(), 0, "{file}: the format promises no alignment");
        let tensors = want["tensors"].as_object().unwrap();
        assert_eq!(a.len(), tensors.len(), "{file}");
        let meta: std::collections::BTreeMap<&str, &str> = a.metadata().collect();
        let want_meta: std::collections::BTreeMap<&str, &str> =
            want["metadata"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
        assert_eq!(meta, want_meta, "{file}");
        for (name, w) in tensors {
            let t = a.get(name.as_str()).unwrap();
            let shape: Vec<usize> =
                w["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            assert_eq!(t.dtype(), Some(dtype(w["dtype"].as_str().unwrap())), "{file}/{name}");
            assert_eq!(t.shape(), shape.as_slice(), "{file}/{name}");
            assert_eq!(t.bytes(), common::hex(w["hex"].as_str().unwrap()).as_slice(), "{file}/{name}");
        }
    }
}
