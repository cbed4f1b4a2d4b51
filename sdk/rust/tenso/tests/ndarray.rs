//! The `ndarray` feature: zero-copy array views where memory allows, copies where it does not.
#![cfg(feature = "ndarray")]
use ndarray::{array, Array3, Axis};
use tenso::{Bundle, ErrorKind, Tensor};

#[test]
fn array_views_borrow_top_level_bodies_and_copy_misaligned_entries() {
    let a = Array3::<f32>::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as f32);
    let packet = tenso::dumps(&a).unwrap();
    assert_eq!(packet, tenso::dumps(&Tensor::new(a.as_slice().unwrap(), &[2, 3, 4]).unwrap()).unwrap());
    let view = tenso::loads(&packet).unwrap();
    let v = view.array_view::<f32>().unwrap();
    assert_eq!(v, a.view().into_dyn());
    assert_eq!(v.as_ptr() as usize, packet.as_ptr() as usize + 64, "zero copy");
    assert_eq!(view.array_view::<f64>().unwrap_err().kind(), ErrorKind::BadDtype);

    // A bundle entry one byte past an 8-byte boundary cannot be borrowed as f64.
    let x = array![[1.5f64, 2.5], [3.5, 4.5]];
    let b = Bundle::new().with("pad", &Tensor::from_slice(&[7u8])).unwrap().with("x", &x).unwrap();
    let packet = tenso::dumps(&b).unwrap();
    let view = tenso::loads(&packet).unwrap();
    let entry = view.get("x").unwrap();
    let aligned = entry.bytes().as_ptr() as usize % 8 == 0;
    assert!(!aligned, "the layout this test relies on: the entry follows a 65-byte one");
    match entry.array_view::<f64>() {
        Ok(a) => assert!(aligned && a == x.view().into_dyn()),
        Err(e) => assert!(!aligned && e.kind() == ErrorKind::Misaligned, "{e}"),
    }
    let cow = entry.cow_array::<f64>().unwrap();
    assert_eq!(cow, x.view().into_dyn());
    assert_eq!(cow.is_view(), aligned, "borrowed exactly when aligned");
}

#[test]
fn non_contiguous_arrays_are_copied_in_logical_order() {
    let a = Array3::<i16>::from_shape_fn((3, 4, 5), |(i, j, k)| (i * 100 + j * 10 + k) as i16);
    let mut sliced = a.view();
    sliced.invert_axis(Axis(1));
    let sliced = sliced.permuted_axes([2, 0, 1]);
    let logical: Vec<i16> = sliced.iter().copied().collect();
    let packet = tenso::dumps(&sliced).unwrap();
    let view = tenso::loads(&packet).unwrap();
    assert_eq!(view.shape(), &[5, 3, 4]);
    assert_eq!(view.as_slice::<i16>().unwrap(), logical.as_slice());
    // In a bundle too (the copy lives as long as the bundle).
    let b = Bundle::new().with("s", &sliced).unwrap();
    let packet = tenso::dumps(&b).unwrap();
    assert_eq!(tenso::loads(&packet).unwrap().get("s").unwrap().to_vec::<i16>().unwrap(), logical);
    // tensor() describes arrays in place only.
    use tenso::Encode;
    assert_eq!(sliced.tensor().unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(a.tensor().unwrap().shape(), &[3, 4, 5]);
}
