//! The composite kinds as read back: quantized parts, sparse components, strings, ragged
//! rows, GPU IPC references.
use std::fmt;

use tenso_sys as sys;

use crate::dtype::{Dtype, Element};
use crate::error::{check, Error, ErrorKind, Result};
use crate::view::ViewRef;

/// How a quantized tensor's scales and zero points apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// One scale and zero point for the whole tensor.
    PerTensor,
    /// One per index along `axis` (negative counts from the end when quantizing).
    PerChannel {
        /// The channel axis.
        axis: i32,
    },
    /// One per `group_size` consecutive elements in C order.
    PerGroup {
        /// Elements per group, > 0.
        group_size: u32,
    },
}

impl Scheme {
    /// (TENSO_QUANT_*, axis, group_size)
    pub(crate) fn raw(self) -> (i32, i32, u32) {
        match self {
            Scheme::PerTensor => (sys::TENSO_QUANT_PER_TENSOR, 0, 0),
            Scheme::PerChannel { axis } => (sys::TENSO_QUANT_PER_CHANNEL, axis, 0),
            Scheme::PerGroup { group_size } => (sys::TENSO_QUANT_PER_GROUP, 0, group_size),
        }
    }
}

/// A quantized tensor in parts: element i dequantizes to `(q_i - zero_points[k]) *
/// scales[k]`, with k given by the [`Scheme`].
///
/// Build one from your own buffers to encode with [`Value::quantized`](crate::Value::quantized),
/// or read one from [`ViewRef::quantized`] / [`Value::quantized_parts`](crate::Value::quantized_parts)
/// (borrowing from the view or value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantized<'a> {
    /// `Qint8`, `Quint8`, `Qint4` or `Quint4`.
    pub dtype: Dtype,
    /// Which elements share a scale and zero point.
    pub scheme: Scheme,
    /// The dequantized tensor's shape.
    pub shape: &'a [usize],
    /// Packed codes: one byte per element, or two per byte for 4-bit dtypes (element 2k in the
    /// low nibble, 2k+1 in the high one).
    pub data: &'a [u8],
    /// One per tensor, channel or group, as the scheme says.
    pub scales: &'a [f32],
    /// As many as `scales`; floats, neither rounded nor clamped.
    pub zero_points: &'a [f32],
}

/// A slice from a C pointer and count; empty for NULL.
///
/// SAFETY: when non-NULL, `p` must point at `n` initialised, aligned `T`s that live for 'x.
pub(crate) unsafe fn slice_from<'x, T>(p: *const T, n: usize) -> &'x [T] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, n)
    }
}

impl<'a> Quantized<'a> {
    /// SAFETY: `q` must come from libtenso, its pointers alive for 'a.
    pub(crate) unsafe fn from_raw(q: &sys::tenso_quantized) -> Result<Quantized<'a>> {
        let dtype = Dtype::from_code(q.dtype)
            .ok_or_else(|| Error::new(ErrorKind::BadDtype, format!("quantized dtype code {}", q.dtype)))?;
        let scheme = match q.scheme {
            sys::TENSO_QUANT_PER_TENSOR => Scheme::PerTensor,
            sys::TENSO_QUANT_PER_CHANNEL => Scheme::PerChannel { axis: q.axis },
            sys::TENSO_QUANT_PER_GROUP => Scheme::PerGroup { group_size: q.group_size },
            s => return Err(Error::new(ErrorKind::Malformed, format!("quantization scheme {s}"))),
        };
        Ok(Quantized {
            dtype,
            scheme,
            shape: crate::tensor::dims(slice_from(q.shape, q.ndim as usize)),
            data: slice_from(q.data.cast::<u8>(), q.nbytes as usize),
            scales: slice_from(q.scales, q.num_scales as usize),
            zero_points: slice_from(q.zero_points, q.num_scales as usize),
        })
    }

    pub(crate) fn raw(&self) -> Result<sys::tenso_quantized> {
        if self.scales.len() != self.zero_points.len() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{} scales but {} zero points", self.scales.len(), self.zero_points.len()),
            ));
        }
        let num_scales =
            u32::try_from(self.scales.len()).map_err(|_| Error::new(ErrorKind::InvalidArgument, "too many scales"))?;
        if self.shape.len() > crate::tensor::MAX_NDIM {
            return Err(Error::new(ErrorKind::TooManyDims, format!("{} dimensions", self.shape.len())));
        }
        let (scheme, axis, group_size) = self.scheme.raw();
        Ok(sys::tenso_quantized {
            data: self.data.as_ptr().cast(),
            nbytes: self.data.len() as u64,
            shape: crate::tensor::wire_dims(self.shape).as_ptr(),
            scales: self.scales.as_ptr(),
            zero_points: self.zero_points.as_ptr(),
            ndim: self.shape.len() as u32,
            dtype: self.dtype.code(),
            scheme,
            axis,
            group_size,
            num_scales,
        })
    }

    /// Number of elements (the product of the shape); [`ErrorKind::TooManyElements`] when the
    /// product overflows a `u64` (the fields are public, so the shape is unchecked).
    pub fn numel(&self) -> Result<u64> {
        self.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d as u64)).ok_or_else(|| {
            Error::new(ErrorKind::TooManyElements, format!("shape {:?} overflows the element count", self.shape))
        })
    }

    /// Dequantizes into `dst`, whose length must be [`numel`](Quantized::numel); bit-exact
    /// with upstream `QuantizedTensor.dequantize` (float32 arithmetic).
    pub fn dequantize_into(&self, dst: &mut [f32]) -> Result<()> {
        let raw = self.raw()?;
        // SAFETY: `raw` points into live slices; dst is dst.len() writable floats.
        check(unsafe { sys::tenso_dequantize(dst.as_mut_ptr(), dst.len() as u64, &raw) })
    }

    /// Dequantizes into a new vector.
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        let n = usize::try_from(self.numel()?)
            .map_err(|_| Error::new(ErrorKind::TooManyElements, "element count exceeds usize"))?;
        if n as u64 > sys::TENSO_MAX_ELEMENTS {
            return Err(Error::new(ErrorKind::TooManyElements, format!("{n} elements")));
        }
        let mut out = vec![0f32; n];
        self.dequantize_into(&mut out)?;
        Ok(out)
    }
}

/// The components of a sparse matrix view, each a 1-D dense [`ViewRef`] owned by the
/// matrix view. libtenso has already checked the structure (lengths, monotone indptr,
/// indices inside the shape).
#[derive(Debug, Clone, Copy)]
pub enum Sparse<'v> {
    /// Coordinate format: `data[i]` sits at (`row[i]`, `col[i]`).
    Coo {
        /// Rows and columns.
        shape: [usize; 2],
        /// The values, nnz of them.
        data: &'v ViewRef,
        /// Their row indices.
        row: &'v ViewRef,
        /// Their column indices.
        col: &'v ViewRef,
    },
    /// Compressed rows: row r is `indices`/`data` at `indptr[r]..indptr[r + 1]`.
    Csr {
        /// Rows and columns.
        shape: [usize; 2],
        /// The values, nnz of them.
        data: &'v ViewRef,
        /// Their column indices.
        indices: &'v ViewRef,
        /// Row starts, rows + 1 of them.
        indptr: &'v ViewRef,
    },
    /// Compressed columns: column c is `indices`/`data` at `indptr[c]..indptr[c + 1]`.
    Csc {
        /// Rows and columns.
        shape: [usize; 2],
        /// The values, nnz of them.
        data: &'v ViewRef,
        /// Their row indices.
        indices: &'v ViewRef,
        /// Column starts, columns + 1 of them.
        indptr: &'v ViewRef,
    },
}

impl<'v> Sparse<'v> {
    /// The matrix shape.
    pub fn shape(&self) -> [usize; 2] {
        match *self {
            Sparse::Coo { shape, .. } | Sparse::Csr { shape, .. } | Sparse::Csc { shape, .. } => shape,
        }
    }
    /// The non-zero values.
    pub fn data(&self) -> &'v ViewRef {
        match *self {
            Sparse::Coo { data, .. } | Sparse::Csr { data, .. } | Sparse::Csc { data, .. } => data,
        }
    }
}

/// The strings of a string view (or the rows of a direct ragged packet): string i is
/// `payload[offsets[i]..offsets[i + 1]]`. The offsets were checked when decoding; the
/// payload is UTF-8-checked only with
/// [`DecodeOptions::validate_utf8`](crate::DecodeOptions::validate_utf8), so reading as `&str`
/// checks each string.
#[derive(Clone, Copy)]
pub struct Strings<'v> {
    offsets: &'v [u64],
    payload: &'v [u8],
}

impl fmt::Debug for Strings<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}

impl<'v> Strings<'v> {
    pub(crate) fn new(offsets: &'v [u64], payload: &'v [u8]) -> Result<Strings<'v>> {
        // libtenso checked these at decode time; re-checking the ends keeps the slicing below
        // panic-free even if it did not.
        let ok = !offsets.is_empty()
            && offsets[0] == 0
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets[offsets.len() - 1] as usize == payload.len();
        if !ok {
            return Err(Error::new(ErrorKind::Malformed, "string offsets do not frame the payload"));
        }
        Ok(Strings { offsets, payload })
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `count + 1` offsets.
    pub fn offsets(&self) -> &'v [u64] {
        self.offsets
    }

    /// All strings' bytes, concatenated.
    pub fn payload(&self) -> &'v [u8] {
        self.payload
    }

    /// The bytes of string `i`.
    pub fn get_bytes(&self, i: usize) -> Option<&'v [u8]> {
        if i >= self.len() {
            return None;
        }
        Some(&self.payload[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }

    /// String `i` as `&str` ([`ErrorKind::Malformed`] if it is not UTF-8).
    pub fn get(&self, i: usize) -> Option<Result<&'v str>> {
        self.get_bytes(i)
            .map(|b| std::str::from_utf8(b).map_err(|e| Error::new(ErrorKind::Malformed, format!("string {i}: {e}"))))
    }

    /// Iterates over the strings' bytes.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'v [u8]> + '_ {
        (0..self.len()).map(move |i| self.get_bytes(i).unwrap_or_default())
    }

    /// Copies every string out ([`ErrorKind::Malformed`] if one is not UTF-8).
    pub fn to_strings(&self) -> Result<Vec<String>> {
        (0..self.len()).map(|i| self.get(i).unwrap_or(Ok("")).map(str::to_owned)).collect()
    }
}

/// A ragged array view (upstream's bundle form): row i is `flat[offsets[i]..offsets[i + 1]]`.
/// The form (keys, dtypes, monotone offsets ending at the flat length) was checked by
/// libtenso.
#[derive(Debug, Clone, Copy)]
pub struct Ragged<'v> {
    flat: &'v ViewRef,
    offsets: &'v ViewRef,
}

impl<'v> Ragged<'v> {
    pub(crate) fn new(flat: &'v ViewRef, offsets: &'v ViewRef) -> Ragged<'v> {
        Ragged { flat, offsets }
    }

    /// All rows concatenated: a 1-D dense view.
    pub fn flat(&self) -> &'v ViewRef {
        self.flat
    }

    /// The offsets: a 1-D uint64 view of `len() + 1` entries.
    pub fn offsets_view(&self) -> &'v ViewRef {
        self.offsets
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        (self.offsets.nbytes() / 8).saturating_sub(1) as usize
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offset `i` (0 ..= len()), read without assuming alignment (bundle entries can sit at
    /// any address).
    pub fn offset(&self, i: usize) -> Option<u64> {
        let b = self.offsets.bytes().get(8 * i..8 * i + 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// The element range of row `i` within the flat values.
    pub fn row_range(&self, i: usize) -> Option<std::ops::Range<usize>> {
        if i >= self.len() {
            return None;
        }
        Some(self.offset(i)? as usize..self.offset(i + 1)? as usize)
    }

    /// Row `i` borrowed as `&[T]` (errors as [`ViewRef::as_slice`]; out of range:
    /// [`ErrorKind::InvalidArgument`]).
    pub fn row<T: Element>(&self, i: usize) -> Result<&'v [T]> {
        let r = self.range_or_err(i)?;
        let all = self.flat.as_slice::<T>()?;
        all.get(r).ok_or_else(|| Error::new(ErrorKind::Malformed, "ragged row outside the flat values"))
    }

    /// Row `i` copied out (works at any alignment).
    pub fn row_to_vec<T: Element>(&self, i: usize) -> Result<Vec<T>> {
        let r = self.range_or_err(i)?;
        let size = std::mem::size_of::<T>();
        let bytes = self
            .flat
            .bytes()
            .get(r.start * size..r.end * size)
            .ok_or_else(|| Error::new(ErrorKind::Malformed, "ragged row outside the flat values"))?;
        crate::view::copy_elements::<T>(self.flat, bytes)
    }

    fn range_or_err(&self, i: usize) -> Result<std::ops::Range<usize>> {
        self.row_range(i).ok_or_else(|| Error::new(ErrorKind::InvalidArgument, format!("row {i} of {}", self.len())))
    }
}

/// A GPU IPC reference: where another process finds device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcRef {
    /// Opaque, e.g. a `cudaIpcMemHandle_t`.
    pub handle: [u8; 64],
    /// Where the tensor starts inside the shared allocation.
    pub byte_offset: u64,
    /// The tensor's bytes.
    pub nbytes: u64,
    /// The device holding the allocation.
    pub device_uuid: [u8; 16],
}

impl IpcRef {
    pub(crate) fn to_raw(self) -> sys::tenso_ipc_ref {
        sys::tenso_ipc_ref {
            handle: self.handle,
            byte_offset: self.byte_offset,
            nbytes: self.nbytes,
            device_uuid: self.device_uuid,
        }
    }
    pub(crate) fn from_raw(r: &sys::tenso_ipc_ref) -> IpcRef {
        IpcRef { handle: r.handle, byte_offset: r.byte_offset, nbytes: r.nbytes, device_uuid: r.device_uuid }
    }
}
