//! `ndarray` interop (feature `ndarray`): decoded tensors as `ArrayView`s, arrays encoded.
use std::borrow::Cow;

use ndarray::{ArrayBase, ArrayViewD, CowArray, Data, Dimension, IxDyn};

use crate::dtype::{as_bytes, Element};
use crate::encode::{private::Source, Encode};
use crate::error::{Error, ErrorKind, Result};
use crate::tensor::Tensor;
use crate::value::Value;
use crate::view::{View, ViewRef};

fn array_over<'x, T: Element>(shape: &[usize], values: &'x [T]) -> Result<ArrayViewD<'x, T>> {
    ArrayViewD::from_shape(IxDyn(shape), values)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("shape {shape:?} over {} elements: {e}", values.len())))
}

impl ViewRef {
    /// The elements of a dense view as an `ndarray` view of its shape, without copying
    /// (feature `ndarray`). Errors as [`as_slice`](ViewRef::as_slice), including
    /// [`ErrorKind::Misaligned`]: [`cow_array`](ViewRef::cow_array) copies instead.
    ///
    /// ```
    /// let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let packet = tenso::dumps(&tenso::Tensor::new(&x, &[2, 3])?)?;
    /// let view = tenso::loads(&packet)?;
    /// let a = view.as_ref().array_view::<f32>()?;
    /// assert_eq!(a.shape(), &[2, 3]);
    /// assert_eq!(a[[1, 2]], 6.0);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn array_view<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        array_over(self.shape(), self.as_slice()?)
    }

    /// The elements as an array of the view's shape: borrowed when aligned for `T` in
    /// memory, copied otherwise (bundle entries usually); see [`values`](ViewRef::values).
    pub fn cow_array<T: Element>(&self) -> Result<CowArray<'_, T, IxDyn>> {
        cow_array(self.shape(), self.values()?)
    }
}

fn cow_array<'x, T: Element>(shape: &[usize], values: Cow<'x, [T]>) -> Result<CowArray<'x, T, IxDyn>> {
    match values {
        Cow::Borrowed(s) => Ok(CowArray::from(array_over(shape, s)?)),
        Cow::Owned(v) => ndarray::ArrayD::from_shape_vec(IxDyn(shape), v)
            .map(CowArray::from)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("shape {shape:?}: {e}"))),
    }
}

impl<'a> View<'a> {
    /// [`ViewRef::array_view`] borrowing the input for `'a` (errors as
    /// [`View::as_slice`]), so the array may outlive the `View`.
    ///
    /// ```
    /// fn matrix(packet: &[u8]) -> tenso::Result<ndarray::ArrayViewD<'_, i32>> {
    ///     tenso::loads(packet)?.array_view()
    /// }
    /// let packet = tenso::dumps(&tenso::Tensor::new(&[1i32, 2, 3, 4], &[2, 2])?)?;
    /// assert_eq!(matrix(&packet)?[[1, 0]], 3);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn array_view<T: Element>(&self) -> Result<ArrayViewD<'a, T>> {
        let view: &ViewRef = self;
        array_over(view.shape(), self.as_slice()?)
    }

    /// [`ViewRef::cow_array`] borrowing the input for `'a` when it can.
    pub fn cow_array<T: Element>(&self) -> Result<CowArray<'a, T, IxDyn>> {
        let view: &ViewRef = self;
        cow_array(view.shape(), self.values()?)
    }
}

/// Any `ndarray` array of an [`Element`] type encodes as a dense tensor of its shape
/// (feature `ndarray`): in place when it is in standard (C-contiguous) layout, copied once in
/// logical order otherwise (a transposed or sliced view).
///
/// ```
/// use ndarray::{array, s};
/// let a = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let packet = tenso::dumps(&a)?;
/// assert_eq!(tenso::loads(&packet)?.array_view::<f64>()?, a.view().into_dyn());
/// // Not contiguous: copied in logical order.
/// let t = a.t();
/// let packet = tenso::dumps(&t)?;
/// let view = tenso::loads(&packet)?;
/// assert_eq!(view.shape(), &[3, 2]);
/// assert_eq!(view.as_slice::<f64>()?, &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// assert_eq!(tenso::dumps(&a.slice(s![.., 1]))?, tenso::dumps(&tenso::Tensor::from_slice(&[2.0f64, 5.0]))?);
/// # Ok::<(), tenso::Error>(())
/// ```
impl<'a, T, S, D> Encode<'a> for ArrayBase<S, D>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    /// The array in place; [`ErrorKind::InvalidArgument`] when it is not in standard layout
    /// (encoding calls copy it instead).
    fn tensor(&self) -> Result<Tensor<'_>> {
        match self.as_slice() {
            Some(s) => Tensor::new(s, self.shape()),
            None => Err(Error::new(ErrorKind::InvalidArgument, "the array is not in standard (C-contiguous) layout")),
        }
    }

    fn source(&self) -> Result<Source<'_>> {
        match self.as_slice() {
            Some(s) => Ok(Source::Tensor(std::borrow::Cow::Owned(Tensor::new(s, self.shape())?), false)),
            None => {
                let mut bytes = Vec::with_capacity(self.len() * std::mem::size_of::<T>());
                for x in self.iter() {
                    bytes.extend_from_slice(as_bytes(std::slice::from_ref(x)));
                }
                Ok(Source::Owned(Value::owned_tensor(T::DTYPE, self.shape(), bytes)?))
            }
        }
    }
}
