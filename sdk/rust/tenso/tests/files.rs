//! Files: atomic saves (old file intact on failure, no temporaries left), loads by mmap and
//! by read, owning packets that outlive everything else, file errors.
mod common;

use common::TempDir;
use tenso::{Bundle, DecodeOptions, ErrorKind, LoadMode, Options, Tensor, Value};

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    v.sort();
    v
}

#[test]
fn save_then_load_by_mmap_and_by_read() {
    let dir = TempDir::new("files-basic");
    let path = dir.path("t.tenso");
    let data: Vec<i16> = (0..10_000).map(|i| (i % 300) as i16 - 150).collect();
    let t = Tensor::new(&data, &[100, 100]).unwrap();
    tenso::save(&path, &t).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), tenso::dumps(&t).unwrap(), "the file is the packet");
    for mode in [LoadMode::Mmap, LoadMode::Read] {
        let p = tenso::load_with(&path, mode, &DecodeOptions::new()).unwrap();
        assert_eq!(p.shape(), &[100, 100], "{mode:?}");
        assert!(p.owns_data(), "{mode:?}: the packet owns its mapping or buffer");
        // Mappings and read buffers are aligned: the body can be borrowed.
        assert_eq!(p.as_slice::<i16>().unwrap(), &data[..], "{mode:?}");
    }
    // The default is mmap; the packet outlives the file's name and moves across threads.
    let p = tenso::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let sum =
        std::thread::spawn(move || p.as_slice::<i16>().unwrap().iter().map(|&x| x as i64).sum::<i64>()).join().unwrap();
    assert_eq!(sum, data.iter().map(|&x| x as i64).sum::<i64>());
}

#[test]
fn saves_are_atomic() {
    let dir = TempDir::new("files-atomic");
    let path = dir.path("model.tenso");
    let old = [1u8, 2, 3];
    tenso::save(&path, &Tensor::from_slice(&old)).unwrap();
    let before = std::fs::read(&path).unwrap();

    // A save that fails (alignment 3 is not a power of two) leaves the old file and no
    // temporary behind.
    let e = Options::new().alignment(3).save(&path, &Tensor::from_slice(&[9u8; 100])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(entries(&dir.0), ["model.tenso"]);

    // A successful save replaces it whole.
    let b = Bundle::new()
        .with("w", &Tensor::from_slice(&[0.5f32; 8]))
        .unwrap()
        .with("names", &Value::strings(["x", "y"]).unwrap())
        .unwrap();
    Options::new().integrity(true).save(&path, &b).unwrap();
    assert_eq!(entries(&dir.0), ["model.tenso"]);
    let p = tenso::load(&path).unwrap();
    assert_eq!(p.get("w").unwrap().to_vec::<f32>().unwrap(), [0.5; 8]);
    assert_eq!(p.get("names").unwrap().strings().unwrap().to_strings().unwrap(), ["x", "y"]);
    assert_eq!(p.packet_size(), std::fs::metadata(&path).unwrap().len());
}

#[test]
fn file_errors() {
    let dir = TempDir::new("files-errors");
    let t = Tensor::from_slice(&[1u32]);
    let e = tenso::save(dir.path("no/such/dir/x.tenso"), &t).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(!e.message().is_empty());
    let e = tenso::load(dir.path("missing.tenso")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert_eq!(tenso::save("bad\0name", &t).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(tenso::load("bad\0name").unwrap_err().kind(), ErrorKind::InvalidArgument);

    // A truncated file, a file of garbage, an empty file.
    let good = tenso::dumps(&Tensor::from_slice(&[7u64; 50])).unwrap();
    let cut = dir.path("cut.tenso");
    std::fs::write(&cut, &good[..good.len() - 1]).unwrap();
    let garbage = dir.path("garbage.tenso");
    std::fs::write(&garbage, b"definitely not a tensor packet").unwrap();
    let empty = dir.path("empty.tenso");
    std::fs::write(&empty, b"").unwrap();
    for mode in [LoadMode::Mmap, LoadMode::Read] {
        let o = DecodeOptions::new();
        assert_eq!(tenso::load_with(&cut, mode, &o).unwrap_err().kind(), ErrorKind::Truncated, "{mode:?}");
        assert_eq!(tenso::load_with(&garbage, mode, &o).unwrap_err().kind(), ErrorKind::BadMagic, "{mode:?}");
        let e = tenso::load_with(&empty, mode, &o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::EndOfStream, "{mode:?}: {e:?}");
        // Limits apply to files too.
        let limited = DecodeOptions::new().max_elements(10);
        std::fs::write(dir.path("ok.tenso"), &good).unwrap();
        assert_eq!(
            tenso::load_with(dir.path("ok.tenso"), mode, &limited).unwrap_err().kind(),
            ErrorKind::TooManyElements,
            "{mode:?}"
        );
    }
    // A directory is not a packet.
    assert_eq!(tenso::load(&dir.0).unwrap_err().kind(), ErrorKind::Io);
}

#[test]
fn trailing_bytes_after_the_packet_are_ignored() {
    let dir = TempDir::new("files-trailing");
    let path = dir.path("t.tenso");
    let mut bytes = tenso::dumps(&Tensor::from_slice(&[3.0f64, 4.0])).unwrap();
    bytes.extend_from_slice(&[0xee; 1000]);
    std::fs::write(&path, &bytes).unwrap();
    let p = tenso::load(&path).unwrap();
    assert_eq!(p.as_slice::<f64>().unwrap(), &[3.0, 4.0]);
    assert_eq!(p.packet_size(), bytes.len() as u64 - 1000);
}
