//! DLPack export: dtype codes, shapes, flags, zero copy, the legacy struct, ownership through
//! the deleter (the export keeps what the view owns alive after the view is freed).
use tenso::sys;
use tenso::{Bf16, Bundle, Complex, ErrorKind, Options, Tensor, F16};

fn dl_dtype(t: &Tensor<'_>) -> (u8, u8, u16) {
    let p = tenso::dumps(t).unwrap();
    let v = tenso::loads(&p).unwrap();
    let d = v.to_dlpack().unwrap().dtype();
    (d.code, d.bits, d.lanes)
}

#[test]
fn dtype_codes() {
    let (i, f, u, b, bf, c) = (
        sys::kDLInt as u8,
        sys::kDLFloat as u8,
        sys::kDLUInt as u8,
        sys::kDLBool as u8,
        sys::kDLBfloat as u8,
        sys::kDLComplex as u8,
    );
    assert_eq!(dl_dtype(&Tensor::from_slice(&[1f32])), (f, 32, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[1f64])), (f, 64, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[F16(0)])), (f, 16, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[Bf16(0)])), (bf, 16, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[true])), (b, 8, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[1i8])), (i, 8, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[1i64])), (i, 64, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[1u16])), (u, 16, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[1u64])), (u, 64, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[Complex { re: 1f32, im: 0.0 }])), (c, 64, 1));
    assert_eq!(dl_dtype(&Tensor::from_slice(&[Complex { re: 1f64, im: 0.0 }])), (c, 128, 1));
}

#[test]
fn export_aliases_the_view_and_is_read_only() {
    let data: Vec<i32> = (0..24).collect();
    let p = tenso::dumps(&Tensor::new(&data, &[2, 3, 4]).unwrap()).unwrap();
    let v = tenso::loads(&p).unwrap();
    let dl = v.to_dlpack().unwrap();
    assert_eq!(dl.version(), (1, 1));
    assert_eq!(dl.shape(), &[2, 3, 4]);
    assert_eq!(dl.strides(), Some(&[12i64, 4, 1][..]), "compact row-major strides");
    assert!(dl.is_read_only());
    assert_eq!(dl.device().device_type, sys::kDLCPU);
    assert_eq!(dl.data_ptr().cast::<u8>(), v.bytes().unwrap().as_ptr(), "zero copy");
    assert_eq!(dl.bytes(), v.bytes().unwrap());
    let legacy = v.to_dlpack_legacy().unwrap();
    assert_eq!(legacy.shape(), &[2, 3, 4]);
    assert_eq!(legacy.bytes(), v.bytes().unwrap());
    // Scalars have an empty shape.
    let x = 1.5f32;
    let sp = tenso::dumps(&Tensor::scalar(&x)).unwrap();
    let sv = tenso::loads(&sp).unwrap();
    assert_eq!(sv.to_dlpack().unwrap().shape(), &[] as &[i64]);
    assert_eq!(sv.to_dlpack().unwrap().strides(), None);
    assert!(sv.to_dlpack().unwrap().tensor().shape.is_null(), "NULL shape for a scalar");
    assert_eq!(sv.to_dlpack().unwrap().bytes(), &x.to_le_bytes());
}

#[test]
fn only_dense_views_export() {
    let b = tenso::dumps(&Bundle::new().with("x", &Tensor::from_slice(&[1u8])).unwrap()).unwrap();
    let v = tenso::loads(&b).unwrap();
    assert_eq!(v.to_dlpack().unwrap_err().kind(), ErrorKind::UnsupportedKind);
    assert_eq!(v.to_dlpack_legacy().unwrap_err().kind(), ErrorKind::UnsupportedKind);
    // A bundle entry exports (it may be misaligned; DLPack consumers must check).
    let child = v.get("x").unwrap();
    assert_eq!(child.to_dlpack().unwrap().bytes(), &[1]);
}

#[test]
fn handed_off_exports_keep_owned_data_alive_after_the_view() {
    // A compressed body is decompressed into memory the view owns; the export holds its own
    // reference, so it stays valid after the view (and the packet bytes) are gone.
    let data: Vec<f64> = (0..5000).map(|i| (i % 7) as f64).collect();
    let packet = Options::new().compress(true).dumps(&Tensor::from_slice(&data)).unwrap();
    let view = tenso::loads(&packet).unwrap();
    assert!(view.owns_data());
    let raw = view.to_dlpack().unwrap().into_raw();
    let legacy = view.to_dlpack_legacy().unwrap().into_raw();
    drop(view);
    drop(packet);
    let noise: Vec<Vec<f64>> = (0..32).map(|i| vec![-1.0; 1000 + i]).collect();
    // SAFETY (test): we own the managed tensors and call each deleter exactly once.
    unsafe {
        let t = &(*raw).dl_tensor;
        let got = std::slice::from_raw_parts(t.data.cast::<f64>(), 5000);
        assert_eq!(got, &data[..]);
        ((*raw).deleter.unwrap())(raw);
        let t = &(*legacy).dl_tensor;
        assert_eq!(std::slice::from_raw_parts(t.data.cast::<f64>(), 5000), &data[..]);
        ((*legacy).deleter.unwrap())(legacy);
    }
    drop(noise);
}

fn mapped(path: &std::path::Path) -> bool {
    std::fs::read_to_string("/proc/self/maps").unwrap().contains(path.to_str().unwrap())
}

#[test]
fn dropping_an_export_runs_its_deleter() {
    // An export of a mapped file holds a reference to the mapping; the mapping goes away only
    // when the packet and every export are gone, which /proc/self/maps shows.
    let dir = std::env::temp_dir().join(format!("tenso-rs-dlpack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mapped-for-dlpack.tenso");
    tenso::save(&path, &Tensor::from_slice(&vec![1u8; 1 << 16])).unwrap();

    let p = tenso::load(&path).unwrap();
    assert!(mapped(&path));
    for _ in 0..1000 {
        let dl = p.to_dlpack().unwrap();
        assert_eq!(dl.bytes().len(), 1 << 16);
        let legacy = p.to_dlpack_legacy().unwrap();
        assert_eq!(legacy.bytes().len(), 1 << 16);
    }
    drop(p);
    assert!(!mapped(&path), "dropped exports released their references");

    // Control: an export handed off (not dropped) keeps the mapping until its deleter runs.
    let p = tenso::load(&path).unwrap();
    let raw = p.to_dlpack().unwrap().into_raw();
    drop(p);
    assert!(mapped(&path), "the handed-off export keeps the mapping");
    // SAFETY (test): we own the managed tensor and call its deleter once.
    unsafe { ((*raw).deleter.unwrap())(raw) };
    assert!(!mapped(&path));
    std::fs::remove_dir_all(&dir).unwrap();
}
