//! [`Tensor`]: a dense tensor to encode, borrowing the caller's elements.
use std::fmt;

use tenso_sys as sys;

use crate::dtype::{as_bytes, Dtype, Element};
use crate::error::{Error, ErrorKind, Result};

pub(crate) const MAX_NDIM: usize = sys::TENSO_MAX_NDIM as usize;

// Shapes are `usize` in the API and `uint64_t` on the wire and in libtenso: the crate is for
// 64-bit targets, where the two have one layout and shapes cross the ABI without a copy.
const _: () = assert!(std::mem::size_of::<usize>() == 8, "tenso needs a 64-bit target");

/// A libtenso shape (`uint64_t` dimensions) as `usize` dimensions (the same layout).
pub(crate) fn dims(shape: &[u64]) -> &[usize] {
    // SAFETY: usize and u64 have the same size and alignment (asserted above).
    unsafe { std::slice::from_raw_parts(shape.as_ptr().cast::<usize>(), shape.len()) }
}

/// `usize` dimensions as libtenso's `uint64_t` (the same layout).
pub(crate) fn wire_dims(shape: &[usize]) -> &[u64] {
    // SAFETY: as in `dims`.
    unsafe { std::slice::from_raw_parts(shape.as_ptr().cast::<u64>(), shape.len()) }
}

/// A dense tensor to encode: C-contiguous little-endian elements borrowed from the caller
/// (never copied until an encode call), a shape of up to 32 dimensions and a dtype.
///
/// ```
/// let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let t = tenso::Tensor::new(&data, &[2, 3])?;
/// assert_eq!(t.shape(), &[2, 3]);
/// assert_eq!(t.dtype(), tenso::Dtype::Float32);
/// assert_eq!(t.bytes().len(), 24);
/// # Ok::<(), tenso::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct Tensor<'a> {
    data: &'a [u8],
    dtype: Dtype,
    ndim: u32,
    shape: [u64; MAX_NDIM],
}

fn numel(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
}

impl<'a> Tensor<'a> {
    fn make(data: &'a [u8], dtype: Dtype, shape: &[usize]) -> Result<Tensor<'a>> {
        let shape = wire_dims(shape);
        if shape.len() > MAX_NDIM {
            return Err(Error::new(ErrorKind::TooManyDims, format!("{} dimensions, at most 32", shape.len())));
        }
        let item = dtype.itemsize() as u64;
        if item == 0 {
            return Err(Error::new(ErrorKind::BadDtype, format!("{dtype} is not a dense dtype")));
        }
        let expect = numel(shape).and_then(|n| n.checked_mul(item));
        if expect != Some(data.len() as u64) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("shape {shape:?} of {dtype} needs {expect:?} bytes, the data has {}", data.len()),
            ));
        }
        let mut s = [0u64; MAX_NDIM];
        s[..shape.len()].copy_from_slice(shape);
        Ok(Tensor { data, dtype, ndim: shape.len() as u32, shape: s })
    }

    /// A tensor of `shape` over `data` (C order); `data.len()` must be the product of `shape`
    /// (checked, as are the wire limits: at most 32 dimensions).
    pub fn new<T: Element>(data: &'a [T], shape: &[usize]) -> Result<Tensor<'a>> {
        Tensor::make(as_bytes(data), T::DTYPE, shape)
    }

    /// A 1-D tensor over the whole slice.
    ///
    /// ```
    /// let t = tenso::Tensor::from_slice(&[1u8, 2, 3]);
    /// assert_eq!(t.shape(), &[3]);
    /// ```
    pub fn from_slice<T: Element>(data: &'a [T]) -> Tensor<'a> {
        let mut shape = [0u64; MAX_NDIM];
        shape[0] = data.len() as u64;
        Tensor { data: as_bytes(data), dtype: T::DTYPE, ndim: 1, shape }
    }

    /// A 0-d tensor holding one element.
    pub fn scalar<T: Element>(value: &'a T) -> Tensor<'a> {
        Tensor { data: as_bytes(std::slice::from_ref(value)), dtype: T::DTYPE, ndim: 0, shape: [0; MAX_NDIM] }
    }

    /// A tensor of any dense dtype over raw little-endian bytes, e.g. bytes read from
    /// elsewhere; `bytes.len()` must be the product of `shape` times the itemsize.
    ///
    /// ```
    /// let t = tenso::Tensor::from_bytes(tenso::Dtype::Float16, &[0, 0x3c, 0, 0xc0], &[2])?;
    /// assert_eq!(t.dtype().itemsize(), 2);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn from_bytes(dtype: Dtype, bytes: &'a [u8], shape: &[usize]) -> Result<Tensor<'a>> {
        Tensor::make(bytes, dtype, shape)
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        dims(&self.shape[..self.ndim as usize])
    }

    /// The elements' bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// The C description, pointing into `self` and the borrowed data.
    pub(crate) fn raw(&self) -> sys::tenso_tensor {
        sys::tenso_tensor {
            data: self.data.as_ptr().cast(),
            nbytes: self.data.len() as u64,
            shape: self.shape.as_ptr(),
            ndim: self.ndim,
            dtype: self.dtype.code(),
        }
    }
}

impl fmt::Debug for Tensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .field("nbytes", &self.data.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_must_match_the_data() {
        let d = [0i16; 6];
        assert!(Tensor::new(&d, &[2, 3]).is_ok());
        assert!(Tensor::new(&d, &[6]).is_ok());
        assert_eq!(Tensor::new(&d, &[4]).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(Tensor::new(&d, &[usize::MAX, 2]).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(Tensor::new(&d, &[1; 33]).unwrap_err().kind(), ErrorKind::TooManyDims);
        assert!(Tensor::new::<i16>(&[], &[0, 5]).is_ok());
        let one = 7u64;
        let s = Tensor::scalar(&one);
        assert_eq!((s.shape().len(), s.bytes().len()), (0, 8));
        assert_eq!(Tensor::from_bytes(Dtype::Qint8, &[1], &[1]).unwrap_err().kind(), ErrorKind::BadDtype);
        assert_eq!(Tensor::from_bytes(Dtype::Float64, &[0; 7], &[1]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}
