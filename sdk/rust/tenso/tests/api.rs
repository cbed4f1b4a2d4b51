//! The native-Rust API of 0.4: borrowing for the input's lifetime, Cow values, owning packets,
//! conversions, usize shapes and users' own tensor types.
use std::borrow::Cow;

use tenso::{Bundle, DecodeOptions, Dtype, Encode, ErrorKind, Options, Packet, Tensor};

fn first_f32(packet: &[u8]) -> tenso::Result<&[f32]> {
    tenso::loads(packet)?.as_slice()
}

#[test]
fn slices_borrow_the_input_and_outlive_the_view() {
    let x = [1.5f32, -2.0, 3.25];
    let p = tenso::dumps(&Tensor::from_slice(&x)).unwrap();
    let s = first_f32(&p).unwrap();
    assert_eq!(s, &x);
    assert_eq!(s.as_ptr() as usize, p.as_ptr() as usize + 64, "points into the input");
    // A compressed body lives in the view: refused for 'a, copied by values().
    let z = Options::new().compress(true).dumps(&Tensor::from_slice(&[0f32; 256])).unwrap();
    assert_eq!(first_f32(&z).unwrap_err().kind(), ErrorKind::UnsupportedKind);
    let v = tenso::loads(&z).unwrap();
    assert!(matches!(v.values::<f32>().unwrap(), Cow::Owned(ref o) if o == &[0f32; 256]));
    assert_eq!(v.as_ref().as_slice::<f32>().unwrap(), &[0f32; 256], "borrowed from the view");
}

#[test]
fn values_borrow_aligned_data_and_copy_the_rest() {
    let x: Vec<u32> = (0..10).collect();
    let b = Bundle::new().with("pad", &Tensor::from_slice(&[1u8])).unwrap().with("x", &Tensor::from_slice(&x)).unwrap();
    let p = tenso::dumps(&b).unwrap();
    let view = tenso::loads(&p).unwrap();
    let entry = view.get("x").unwrap();
    let aligned = entry.bytes().as_ptr() as usize % 4 == 0;
    assert!(!aligned, "the entry follows a 65-byte one");
    assert_eq!(entry.as_slice::<u32>().unwrap_err().kind(), ErrorKind::Misaligned);
    assert!(matches!(entry.values::<u32>().unwrap(), Cow::Owned(ref o) if o == &x));
    assert_eq!(entry.values::<i32>().unwrap_err().kind(), ErrorKind::BadDtype);
    // The top-level body of a heap Vec is aligned: borrowed.
    let p = tenso::dumps(&Tensor::from_slice(&x)).unwrap();
    let view = tenso::loads(&p).unwrap();
    assert!(matches!(view.values::<u32>().unwrap(), Cow::Borrowed(s) if s == &x[..]));
    assert_eq!(Vec::<u32>::try_from(&view).unwrap(), x);
    assert_eq!(Vec::<u32>::try_from(&*view).unwrap(), x);
    assert_eq!(Vec::<f32>::try_from(&view).unwrap_err().kind(), ErrorKind::BadDtype);
}

#[test]
fn packets_own_a_vec_without_copying_and_move_between_threads() {
    struct Model {
        weights: Packet,
    }
    let w: Vec<f64> = (0..64).map(|i| i as f64).collect();
    let mut bytes = tenso::dumps(&Tensor::new(&w, &[8, 8]).unwrap()).unwrap();
    bytes.extend_from_slice(b"trailing bytes are kept but ignored");
    let body = bytes.as_ptr() as usize + 64;
    let model = Model { weights: Packet::from_vec(bytes, &DecodeOptions::new()).unwrap() };
    let got = std::thread::spawn(move || {
        assert_eq!(model.weights.as_slice::<f64>().unwrap().as_ptr() as usize, body, "zero copy");
        Vec::<f64>::try_from(&model.weights).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(got, w);
    assert_eq!(Packet::from_vec(b"TNSO".to_vec(), &DecodeOptions::new()).unwrap_err().kind(), ErrorKind::Truncated);
}

#[test]
fn shapes_are_usize_with_the_wire_limits_checked() {
    let d = [0u8; 6];
    let t = Tensor::new(&d, &[2, 3]).unwrap();
    let shape: &[usize] = t.shape();
    assert_eq!(shape, &[2, 3]);
    assert_eq!(Tensor::new(&d, &[usize::MAX, 2]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Tensor::new(&d, &[1; 33]).unwrap_err().kind(), ErrorKind::TooManyDims);
    let p = tenso::dumps(&t).unwrap();
    assert_eq!(tenso::loads(&p).unwrap().shape(), &[2usize, 3]);
    assert_eq!(tenso::inspect(&p).unwrap().shape(), &[2usize, 3]);
}

#[test]
fn users_tensor_types_encode_and_bundles_keep_a_copy() {
    struct Image {
        h: usize,
        w: usize,
        pixels: Vec<u8>,
    }
    impl Encode<'_> for Image {
        fn tensor(&self) -> tenso::Result<Tensor<'_>> {
            Tensor::new(&self.pixels, &[self.h, self.w])
        }
    }
    let img = Image { h: 2, w: 3, pixels: vec![1, 2, 3, 4, 5, 6] };
    assert_eq!(tenso::dumps(&img).unwrap(), tenso::dumps(&Tensor::new(&img.pixels, &[2, 3]).unwrap()).unwrap());
    let mut b = Bundle::new();
    b.insert("img", &img).unwrap();
    drop(img); // the bundle holds its own copy of a user type's elements
    let p = tenso::dumps(&b).unwrap();
    let v = tenso::loads(&p).unwrap();
    assert_eq!(v.get("img").unwrap().to_vec::<u8>().unwrap(), [1, 2, 3, 4, 5, 6]);
    // A wrong description is reported by the encode call.
    struct Broken;
    impl Encode<'_> for Broken {
        fn tensor(&self) -> tenso::Result<Tensor<'_>> {
            Tensor::new(&[1u8, 2], &[3])
        }
    }
    assert_eq!(tenso::dumps(&Broken).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(tenso::Value::strings(["a"]).unwrap().tensor().unwrap_err().kind(), ErrorKind::UnsupportedKind);
}

#[test]
fn io_errors_convert_both_ways() {
    fn read(path: &str) -> tenso::Result<Vec<u8>> {
        Ok(std::fs::read(path)?)
    }
    let e = read("/nonexistent/tenso").unwrap_err();
    assert_eq!((e.kind(), e.status_name()), (ErrorKind::Io, "TENSO_E_IO"));
    assert_eq!(std::io::Error::from(e).kind(), std::io::ErrorKind::NotFound);
    for k in [std::io::ErrorKind::TimedOut, std::io::ErrorKind::WouldBlock] {
        let e = tenso::Error::from(std::io::Error::from(k));
        assert_eq!((e.kind(), e.status_name()), (ErrorKind::Timeout, "TENSO_E_TIMEOUT"));
        assert_eq!(std::io::Error::from(e).kind(), std::io::ErrorKind::TimedOut);
    }
}

#[test]
fn float64_input_quantizes_as_float32() {
    let x: Vec<f64> = (0..12).map(|i| i as f64 / 7.0 - 0.8).collect();
    let narrowed: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let scheme = tenso::Scheme::PerGroup { group_size: 4 };
    let from64 = tenso::quantize(&Tensor::new(&x, &[3, 4]).unwrap(), Dtype::Qint4, scheme).unwrap();
    let from32 = tenso::quantize(&Tensor::new(&narrowed, &[3, 4]).unwrap(), Dtype::Qint4, scheme).unwrap();
    assert_eq!(tenso::dumps(&from64).unwrap(), tenso::dumps(&from32).unwrap(), "bit-exact with float32 input");
    let bad = tenso::quantize(&Tensor::from_slice(&[1i32]), Dtype::Qint8, tenso::Scheme::PerTensor).unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::BadDtype);
}

/// Threads 1 and 0 (every core) write the same LZ4 frames, for a tensor and a bundle with
/// footers (three 4 MiB blocks, the middle one pseudo-random and stored raw); both decode.
#[test]
fn threads_do_not_change_the_bytes() {
    let mut x = 11u64;
    let data: Vec<u8> = (0..(9usize << 20) + 4)
        .map(|i| {
            if i >> 22 == 1 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 56) as u8
            } else {
                ((i * 7 % 251) ^ (i >> 12)) as u8
            }
        })
        .collect();
    let t = Tensor::from_slice(&data);
    let b = Bundle::new().with("a", &t).unwrap().with("b", &Tensor::from_slice(&[1f32, 2.0])).unwrap();
    let opts = Options::new().compress(true).integrity(true);
    for (one, all) in [
        (opts.threads(1).dumps(&t).unwrap(), opts.threads(0).dumps(&t).unwrap()),
        (opts.threads(1).dumps(&b).unwrap(), opts.threads(0).dumps(&b).unwrap()),
    ] {
        assert!(one == all, "threads 1 and 0 wrote different packets");
        for threads in [1, 0] {
            let view = DecodeOptions::new().threads(threads).loads(&all).unwrap();
            let got = view.get("a").unwrap_or(view.as_ref()).as_slice::<u8>().unwrap();
            assert!(got == &data[..], "threads {threads}: decoded bytes differ");
        }
    }
}
