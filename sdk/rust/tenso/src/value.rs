//! [`Value`] (a libtenso value handle: composite kinds, pre-encoded packets) and [`Bundle`].
use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use tenso_sys as sys;

use crate::composite::{IpcRef, Quantized, Scheme};
use crate::dtype::{Dtype, Element};
use crate::encode::{private::Source, Encode};
use crate::error::{check, Error, ErrorKind, Result};
use crate::tensor::Tensor;

/// Memory a value's borrowed pointers refer to when the value owns it (string payloads built
/// by [`Value::strings`], rows gathered by [`Value::ragged_from_rows`]). Shared with every
/// bundle the value is inserted into, since libtenso copies only the description.
pub(crate) type Keep = Arc<dyn Any + Send + Sync>;

/// Something to encode that libtenso holds as a value: a sparse matrix, a quantized tensor,
/// strings, a ragged array, a GPU IPC reference, a pre-encoded packet, or a bundle (see
/// [`Bundle`]). Encode it with [`dumps`](crate::dumps) or any [`Options`](crate::Options)
/// method, alone or inside bundles.
///
/// `'a` is the lifetime of the memory the value borrows (tensor elements, packet bytes); values
/// that own everything they refer to are `Value<'static>`. A value may be moved to another
/// thread (`Send`) but not shared (`!Sync`), as libtenso requires.
pub struct Value<'a> {
    raw: NonNull<sys::tenso_value>,
    pub(crate) keep: Vec<Keep>,
    _borrows: PhantomData<&'a [u8]>,
}

// SAFETY: a value handle is plain heap state that libtenso allows any single thread to use;
// what it borrows is Sync data (`&'a [u8]`) and `keep` is Send + Sync.
unsafe impl Send for Value<'_> {}

impl Drop for Value<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the handle.
        unsafe { sys::tenso_value_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Value").field("bundle_entries", &self.bundle_len()).finish_non_exhaustive()
    }
}

/// Runs a libtenso constructor `f(&mut out)` and wraps the handle.
fn construct<'a>(f: impl FnOnce(*mut *mut sys::tenso_value) -> i32) -> Result<Value<'a>> {
    let mut out = ptr::null_mut();
    check(f(&mut out))?;
    let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL value"))?;
    Ok(Value { raw, keep: Vec::new(), _borrows: PhantomData })
}

#[cfg(feature = "tokio")]
impl<'a> Value<'a> {
    /// A value handle describing a plain tensor whose memory `raw` borrows for `'a`.
    pub(crate) fn from_tensor_raw(raw: sys::tenso_tensor) -> Result<Value<'a>> {
        // SAFETY: `raw` describes memory borrowed for 'a, which the value records.
        construct(|out| unsafe { sys::tenso_value_new_tensor(out, &raw) })
    }
}

/// Runs `f` with a libtenso value handle for `value`: its own handle, or a temporary one
/// describing a plain [`Tensor`] (the calls that store values take handles only).
pub(crate) fn with_value<'a, E: Encode<'a> + ?Sized, R>(
    value: &E,
    f: impl FnOnce(*const sys::tenso_value) -> R,
) -> Result<R> {
    match value.source()? {
        Source::Tensor(tensor, _) => {
            let raw = tensor.raw();
            // SAFETY: `raw` describes memory borrowed by `value`, alive for this call; the
            // temporary value is freed before returning.
            let tmp = construct(|out| unsafe { sys::tenso_value_new_tensor(out, &raw) })?;
            Ok(f(tmp.as_ptr()))
        }
        Source::Value(v) => Ok(f(v.as_ptr())),
        Source::Owned(v) => Ok(f(v.as_ptr())),
    }
}

fn count_of(offsets: &[u64]) -> Result<u64> {
    match offsets.len() {
        0 => Err(Error::new(ErrorKind::InvalidArgument, "offsets need count + 1 entries (at least one, 0)")),
        n => Ok(n as u64 - 1),
    }
}

impl<'a> Value<'a> {
    pub(crate) fn as_ptr(&self) -> *const sys::tenso_value {
        self.raw.as_ptr()
    }

    /// A dense tensor as a value (the elements stay borrowed).
    pub fn tensor(t: &Tensor<'a>) -> Result<Value<'a>> {
        let raw = t.raw();
        // SAFETY: `raw` points into `t` for the call; the value copies the shape.
        construct(|out| unsafe { sys::tenso_value_new_tensor(out, &raw) })
    }

    /// A dense tensor as a value that owns its elements (`bytes`, C order).
    #[cfg_attr(not(feature = "ndarray"), allow(dead_code))]
    pub(crate) fn owned_tensor(dtype: Dtype, shape: &[usize], bytes: Vec<u8>) -> Result<Value<'static>> {
        let keep: Arc<Vec<u8>> = Arc::new(bytes);
        // SAFETY: only `keep`'s heap memory is borrowed, and the value keeps it.
        let t = Tensor::from_bytes(dtype, unsafe { detach(&keep) }, shape)?;
        let mut v = Value::tensor(&t)?;
        v.keep.push(keep);
        Ok(v)
    }

    /// An encoded packet inserted verbatim (its own options apply). `bytes` must be exactly
    /// one packet: [`ErrorKind::Truncated`] when shorter, [`ErrorKind::InvalidArgument`] when
    /// longer.
    ///
    /// ```
    /// let inner = tenso::dumps(&tenso::Tensor::from_slice(&[1u16, 2]))?;
    /// let mut b = tenso::Bundle::new();
    /// b.insert("pre-encoded", &tenso::Value::packet(&inner)?)?;
    /// let packet = tenso::dumps(&b)?;
    /// let view = tenso::loads(&packet)?;
    /// assert_eq!(view.get("pre-encoded").unwrap().to_vec::<u16>()?, vec![1, 2]);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn packet(bytes: &'a [u8]) -> Result<Value<'a>> {
        // SAFETY: the bytes outlive the value ('a).
        construct(|out| unsafe { sys::tenso_value_new_packet(out, bytes.as_ptr().cast(), bytes.len()) })
    }

    fn sparse(kind: i32, shape: [usize; 2], a: &Tensor<'a>, b: &Tensor<'a>, c: &Tensor<'a>) -> Result<Value<'a>> {
        let (ra, rb, rc) = (a.raw(), b.raw(), c.raw());
        // SAFETY: descriptions valid for the call; the elements outlive the value ('a).
        construct(|out| unsafe {
            sys::tenso_value_new_sparse(out, kind, 2, crate::tensor::wire_dims(&shape).as_ptr(), &ra, &rb, &rc)
        })
    }

    /// A COO sparse matrix: `data`, `row` and `col` are 1-D and nnz long; indices int32 or
    /// int64. The structure is checked ([`ErrorKind::InvalidArgument`]).
    ///
    /// ```
    /// let (data, row, col) = ([1.0f32, 2.0], [0i64, 2], [1i64, 0]);
    /// let m = tenso::Value::sparse_coo(
    ///     [3, 3],
    ///     &tenso::Tensor::from_slice(&data),
    ///     &tenso::Tensor::from_slice(&row),
    ///     &tenso::Tensor::from_slice(&col),
    /// )?;
    /// let packet = tenso::dumps(&m)?;
    /// let view = tenso::loads(&packet)?;
    /// match view.sparse()? {
    ///     tenso::Sparse::Coo { shape, data, row, .. } => {
    ///         assert_eq!(shape, [3, 3]);
    ///         assert_eq!(data.to_vec::<f32>()?, vec![1.0, 2.0]);
    ///         assert_eq!(row.to_vec::<i64>()?, vec![0, 2]);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn sparse_coo(shape: [usize; 2], data: &Tensor<'a>, row: &Tensor<'a>, col: &Tensor<'a>) -> Result<Value<'a>> {
        Value::sparse(sys::TENSO_KIND_SPARSE_COO, shape, data, row, col)
    }

    /// A CSR sparse matrix: `data` and column `indices` nnz long, `indptr` `shape[0] + 1`
    /// long, starting at 0, never decreasing, ending at nnz.
    pub fn sparse_csr(
        shape: [usize; 2],
        data: &Tensor<'a>,
        indices: &Tensor<'a>,
        indptr: &Tensor<'a>,
    ) -> Result<Value<'a>> {
        Value::sparse(sys::TENSO_KIND_SPARSE_CSR, shape, data, indices, indptr)
    }

    /// A CSC sparse matrix: `data` and row `indices` nnz long, `indptr` `shape[1] + 1` long.
    pub fn sparse_csc(
        shape: [usize; 2],
        data: &Tensor<'a>,
        indices: &Tensor<'a>,
        indptr: &Tensor<'a>,
    ) -> Result<Value<'a>> {
        Value::sparse(sys::TENSO_KIND_SPARSE_CSC, shape, data, indices, indptr)
    }

    /// A quantized tensor from its parts (borrowed; checked for consistency).
    pub fn quantized(q: &Quantized<'a>) -> Result<Value<'a>> {
        let raw = q.raw()?;
        // SAFETY: `raw` points into `q`'s slices, which outlive the value ('a).
        construct(|out| unsafe { sys::tenso_value_new_quantized(out, &raw) })
    }

    /// A string tensor over `count + 1` offsets into one UTF-8 payload (both borrowed):
    /// string i is `payload[offsets[i]..offsets[i + 1]]`. Checked: offsets start at 0, never
    /// decrease, end at `payload.len()`; the payload is UTF-8.
    pub fn strings_raw(offsets: &'a [u64], payload: &'a [u8]) -> Result<Value<'a>> {
        let count = count_of(offsets)?;
        // SAFETY: count + 1 offsets and payload.len() payload bytes (libtenso checks that the
        // offsets end there), outliving the value.
        construct(|out| unsafe {
            sys::tenso_value_new_strings(out, count, offsets.as_ptr(), payload.as_ptr().cast(), payload.len() as u64)
        })
    }

    /// A ragged array in upstream's form (a bundle of `__ragged_offsets__`,
    /// `__ragged_flat__`, `__ragged_count__`): row i is
    /// `flat[row_offsets[i]..row_offsets[i + 1]]`. Both are borrowed.
    pub fn ragged(flat: &Tensor<'a>, row_offsets: &'a [u64]) -> Result<Value<'a>> {
        let count = count_of(row_offsets)?;
        let raw = flat.raw();
        // SAFETY: descriptions valid for the call; the memory outlives the value.
        construct(|out| unsafe { sys::tenso_value_new_ragged(out, &raw, count, row_offsets.as_ptr()) })
    }

    /// The parts of a quantized value (from [`quantize`] or [`Value::quantized`]);
    /// [`ErrorKind::UnsupportedKind`] for other values.
    pub fn quantized_parts(&self) -> Result<Quantized<'_>> {
        let mut q = std::mem::MaybeUninit::<sys::tenso_quantized>::uninit();
        // SAFETY: valid out pointer and live handle.
        check(unsafe { sys::tenso_value_quantized(q.as_mut_ptr(), self.as_ptr()) })?;
        // SAFETY: filled on success; its pointers borrow from self.
        unsafe { Quantized::from_raw(&q.assume_init()) }
    }

    /// Number of entries when the value is a bundle (ragged arrays are bundles of 3); 0
    /// otherwise.
    pub fn bundle_len(&self) -> usize {
        // SAFETY: live handle.
        unsafe { sys::tenso_bundle_count(self.as_ptr()) as usize }
    }
}

/// A slice whose lifetime is detached from the borrow it came from.
///
/// SAFETY: the caller keeps the memory alive and unmoved for as long as the result is used
/// (here: heap memory of an `Arc` stored in the value's `keep`).
unsafe fn detach<'x, T>(s: &[T]) -> &'x [T] {
    &*(s as *const [T])
}

impl Value<'static> {
    /// A string tensor built from Rust strings; the value owns a copy of the bytes.
    ///
    /// ```
    /// let v = tenso::Value::strings(["hi", "", "ñ"])?;
    /// let packet = tenso::dumps(&v)?;
    /// let view = tenso::loads(&packet)?;
    /// assert_eq!(view.strings()?.to_strings()?, vec!["hi", "", "ñ"]);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn strings<I, S>(items: I) -> Result<Value<'static>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut offsets = vec![0u64];
        let mut payload = Vec::new();
        for s in items {
            payload.extend_from_slice(s.as_ref().as_bytes());
            offsets.push(payload.len() as u64);
        }
        let keep: Arc<(Vec<u64>, Vec<u8>)> = Arc::new((offsets, payload));
        // SAFETY: the value points only into `keep`'s heap vectors, which never move and
        // which the value holds (and shares with any bundle it joins) for as long as it lives.
        let (offsets, payload) = unsafe { (detach(&keep.0), detach(&keep.1)) };
        let mut v = Value::strings_raw(offsets, payload)?;
        v.keep.push(keep);
        Ok(v)
    }

    /// A ragged array gathered from rows; the value owns the concatenated copy.
    ///
    /// ```
    /// let v = tenso::Value::ragged_from_rows(&[&[1.0f32, 2.0][..], &[], &[3.0]])?;
    /// let packet = tenso::dumps(&v)?;
    /// let view = tenso::loads(&packet)?;
    /// let r = view.ragged()?;
    /// assert_eq!(r.len(), 3);
    /// assert_eq!(r.row_to_vec::<f32>(0)?, vec![1.0, 2.0]);
    /// assert!(r.row_to_vec::<f32>(1)?.is_empty());
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn ragged_from_rows<T: Element>(rows: &[&[T]]) -> Result<Value<'static>> {
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        let mut flat = Vec::new();
        offsets.push(0u64);
        for r in rows {
            flat.extend_from_slice(r);
            offsets.push(flat.len() as u64);
        }
        let keep: Arc<(Vec<T>, Vec<u64>)> = Arc::new((flat, offsets));
        // SAFETY: as in `strings`: only `keep`'s heap memory is borrowed.
        let (flat, offsets) = unsafe { (detach(&keep.0), detach(&keep.1)) };
        let mut v = Value::ragged(&Tensor::from_slice(flat), offsets)?;
        v.keep.push(keep);
        Ok(v)
    }

    /// A GPU IPC reference packet (encode options do not apply to it).
    pub fn ipc_ref(r: &IpcRef) -> Result<Value<'static>> {
        let raw = r.to_raw();
        // SAFETY: the value copies the reference.
        construct(|out| unsafe { sys::tenso_value_new_ipc_ref(out, &raw) })
    }
}

/// Quantizes a float32, float64, float16 or bfloat16 tensor to `qdtype` (qint8, quint8, qint4,
/// quint4), bit-exact with upstream `QuantizedTensor.quantize`. The value owns its packed
/// data and scales.
///
/// ```
/// use tenso::{Dtype, Scheme};
/// let x = [-1.0f32, 0.0, 0.5, 1.0];
/// let q = tenso::quantize(&tenso::Tensor::from_slice(&x), Dtype::Qint8, Scheme::PerTensor)?;
/// let packet = tenso::dumps(&q)?;
/// let view = tenso::loads(&packet)?;
/// let parts = view.quantized()?;
/// assert_eq!(parts.dtype, Dtype::Qint8);
/// let back = parts.dequantize()?;
/// assert!(back.iter().zip(&x).all(|(a, b)| (a - b).abs() < 0.01));
/// # Ok::<(), tenso::Error>(())
/// ```
///
/// Float64 input is accepted too: it is first rounded to float32 (a copy, as numpy's
/// `astype(np.float32)` before quantizing), since quantization works in float32.
///
/// ```
/// use tenso::{Dtype, Scheme};
/// let x = [-2.0f64, 0.0, 1.0, 2.0];
/// let q = tenso::quantize(&tenso::Tensor::new(&x, &[2, 2])?, Dtype::Quint8, Scheme::PerTensor)?;
/// let parts = q.quantized_parts()?;
/// assert_eq!(parts.shape, &[2, 2]);
/// let back = parts.dequantize()?;
/// assert!(back.iter().zip(&x).all(|(a, b)| (*a as f64 - b).abs() < 0.02));
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn quantize(input: &Tensor<'_>, qdtype: Dtype, scheme: Scheme) -> Result<Value<'static>> {
    if input.dtype() == Dtype::Float64 {
        let narrowed: Vec<f32> = input
            .bytes()
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8-byte chunk")) as f32)
            .collect();
        return quantize(&Tensor::new(&narrowed, input.shape())?, qdtype, scheme);
    }
    let raw = input.raw();
    let (code, axis, group) = scheme.raw();
    // SAFETY: the input is read during the call only; the value owns its results.
    construct(|out| unsafe { sys::tenso_quantize(out, &raw, qdtype.code(), code, axis, group) })
}

/// A bundle to encode: string keys to tensors, values and nested bundles, in insertion order
/// (at most 255 entries, nesting at most 64 deep; duplicate keys are kept, as on the wire).
///
/// Children are described, not copied: their elements stay borrowed for `'a`.
///
/// ```
/// let weights = [0.25f32; 6];
/// let bias = [1i64, 2];
/// let mut layer = tenso::Bundle::new();
/// layer.insert("weights", &tenso::Tensor::new(&weights, &[2, 3])?)?;
/// layer.insert("bias", &tenso::Tensor::from_slice(&bias))?;
/// let mut model = tenso::Bundle::new();
/// model.insert("layer0", &layer)?;
/// model.insert("names", &tenso::Value::strings(["a", "b"])?)?;
///
/// let packet = tenso::dumps(&model)?;
/// let view = tenso::loads(&packet)?;
/// let keys = view.entries().map(|e| e.map(|(k, _)| k)).collect::<tenso::Result<Vec<&str>>>()?;
/// assert_eq!(keys, ["layer0", "names"]);
/// let w = view.get("layer0").and_then(|l| l.get("weights")).unwrap();
/// assert_eq!(w.shape(), &[2, 3]);
/// assert_eq!(w.to_vec::<f32>()?, weights);
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct Bundle<'a> {
    value: Value<'a>,
}

impl fmt::Debug for Bundle<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bundle").field("len", &self.len()).finish()
    }
}

impl Default for Bundle<'_> {
    fn default() -> Self {
        Bundle::new()
    }
}

impl<'a> Bundle<'a> {
    /// An empty bundle.
    ///
    /// # Panics
    ///
    /// If libtenso cannot allocate the handle (out of memory), like `Vec` does.
    pub fn new() -> Bundle<'a> {
        // SAFETY: valid out pointer.
        match construct(|out| unsafe { sys::tenso_value_new_bundle(out) }) {
            Ok(value) => Bundle { value },
            Err(e) => panic!("tenso: cannot create a bundle: {e}"),
        }
    }

    /// Appends `key` -> `child`. Errors ([`ErrorKind::InvalidArgument`]) past 255 entries
    /// or 64 levels of nesting.
    pub fn insert<E: Encode<'a> + ?Sized>(&mut self, key: &str, child: &E) -> Result<()> {
        let bundle = self.value.raw.as_ptr();
        let (k, klen) = (key.as_ptr().cast(), key.len());
        match child.source()? {
            Source::Tensor(tensor, outlives) => {
                // A user type's elements are borrowed only for this call: the bundle keeps a
                // copy of them (a Tensor's own are borrowed for 'a).
                let copy: Option<Arc<Vec<u8>>> = (!outlives).then(|| Arc::new(tensor.bytes().to_vec()));
                let tensor = match &copy {
                    // SAFETY: the Arc's heap bytes are kept by the bundle (below), unmoved.
                    Some(c) => Tensor::from_bytes(tensor.dtype(), unsafe { detach(c) }, tensor.shape())?,
                    None => *tensor,
                };
                let raw = tensor.raw();
                let tmp: Value<'_> = {
                    // SAFETY: `raw` describes live memory; the shape is copied.
                    construct(|out| unsafe { sys::tenso_value_new_tensor(out, &raw) })?
                };
                // SAFETY: live handles; the bundle copies the child's description, whose
                // elements outlive 'a (the Encode<'a> bound).
                check(unsafe { sys::tenso_bundle_insert(bundle, k, klen, tmp.as_ptr()) })?;
                if let Some(c) = copy {
                    self.value.keep.push(c);
                }
                Ok(())
            }
            Source::Value(v) => self.insert_value(k, klen, v),
            Source::Owned(v) => self.insert_value(k, klen, &v),
        }
    }

    fn insert_value(&mut self, k: *const std::ffi::c_char, klen: usize, v: &Value<'_>) -> Result<()> {
        // SAFETY: live handles; the bundle copies the child's description, whose elements
        // outlive 'a (the Encode<'a> bound) or are kept by `keep`, shared here.
        check(unsafe { sys::tenso_bundle_insert(self.value.raw.as_ptr(), k, klen, v.as_ptr()) })?;
        self.value.keep.extend(v.keep.iter().cloned());
        Ok(())
    }

    /// [`insert`](Bundle::insert) as a builder step.
    pub fn with<E: Encode<'a> + ?Sized>(mut self, key: &str, child: &E) -> Result<Bundle<'a>> {
        self.insert(key, child)?;
        Ok(self)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.value.bundle_len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bundle as a plain [`Value`].
    pub fn into_value(self) -> Value<'a> {
        self.value
    }

    pub(crate) fn as_value(&self) -> &Value<'a> {
        &self.value
    }
}
