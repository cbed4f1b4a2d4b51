//! Dtypes, packet kinds and the element types that typed slices can have.
use std::ffi::{CStr, CString};
use std::fmt;
use std::str::FromStr;

use tenso_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};

/// Declares [`Dtype`] and its code lookup from one list, the variant = `TENSO_DTYPE_*`
/// constant pairs of tenso-sys: names, itemsizes and name lookup come from the ABI
/// (`tenso_dtype_name`, `tenso_dtype_itemsize`, `tenso_dtype_from_name`), so a new dtype is one
/// line here.
macro_rules! dtypes {
    ($($(#[$doc:meta])* $variant:ident = $code:ident,)*) => {
        /// A dtype code of the wire format. Codes 1 to 15 are dense element types; 16 to 19
        /// appear only in quantized packets, 20 and 21 only in string packets.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        #[non_exhaustive]
        pub enum Dtype {
            $($(#[$doc])* $variant = sys::$code,)*
        }

        impl Dtype {
            /// The dtype of a wire code; `None` for codes this crate does not know (and for 0).
            pub fn from_code(code: i32) -> Option<Dtype> {
                match code {
                    $(sys::$code => Some(Dtype::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

dtypes! {
    /// IEEE binary32.
    Float32 = TENSO_DTYPE_FLOAT32,
    /// Signed 32-bit integers.
    Int32 = TENSO_DTYPE_INT32,
    /// IEEE binary64.
    Float64 = TENSO_DTYPE_FLOAT64,
    /// Signed 64-bit integers.
    Int64 = TENSO_DTYPE_INT64,
    /// Unsigned bytes.
    Uint8 = TENSO_DTYPE_UINT8,
    /// Unsigned 16-bit integers.
    Uint16 = TENSO_DTYPE_UINT16,
    /// One byte per element, 0 or 1.
    Bool = TENSO_DTYPE_BOOL,
    /// IEEE binary16.
    Float16 = TENSO_DTYPE_FLOAT16,
    /// Signed bytes.
    Int8 = TENSO_DTYPE_INT8,
    /// Signed 16-bit integers.
    Int16 = TENSO_DTYPE_INT16,
    /// Unsigned 32-bit integers.
    Uint32 = TENSO_DTYPE_UINT32,
    /// Unsigned 64-bit integers.
    Uint64 = TENSO_DTYPE_UINT64,
    /// Interleaved (re, im) float32.
    Complex64 = TENSO_DTYPE_COMPLEX64,
    /// Interleaved (re, im) float64.
    Complex128 = TENSO_DTYPE_COMPLEX128,
    /// The upper 16 bits of a float32.
    Bfloat16 = TENSO_DTYPE_BFLOAT16,
    /// Signed 8-bit quantized codes.
    Qint8 = TENSO_DTYPE_QINT8,
    /// Unsigned 8-bit quantized codes.
    Quint8 = TENSO_DTYPE_QUINT8,
    /// Signed 4-bit quantized codes, two a byte.
    Qint4 = TENSO_DTYPE_QINT4,
    /// Unsigned 4-bit quantized codes, two a byte.
    Quint4 = TENSO_DTYPE_QUINT4,
    /// UTF-8 strings (string packets).
    String = TENSO_DTYPE_STRING,
    /// Byte strings (defined by the protocol, written by no encoder).
    Bytes = TENSO_DTYPE_BYTES,
}

impl Dtype {
    /// The wire code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Bytes per element of a dense dtype; 0 for the quantized and string codes.
    pub fn itemsize(self) -> usize {
        // SAFETY: a pure function of its argument.
        unsafe { sys::tenso_dtype_itemsize(self.code()) }
    }

    /// Whether tensors of this dtype can be encoded densely (codes 1 to 15).
    pub fn is_dense(self) -> bool {
        self.itemsize() != 0
    }

    /// The numpy name: `"float32"`, `"bfloat16"`, `"qint4"`, `"string"`...
    ///
    /// ```
    /// assert_eq!(tenso::Dtype::Bfloat16.name(), "bfloat16");
    /// assert_eq!("complex64".parse::<tenso::Dtype>().unwrap(), tenso::Dtype::Complex64);
    /// ```
    pub fn name(self) -> &'static str {
        // SAFETY: static NUL-terminated ASCII storage.
        unsafe { CStr::from_ptr(sys::tenso_dtype_name(self.code())) }.to_str().unwrap_or("unknown")
    }

    /// The dtype for a numpy name (the inverse of [`name`](Dtype::name)).
    pub fn from_name(name: &str) -> Result<Dtype> {
        let c = CString::new(name).map_err(|_| Error::new(ErrorKind::BadDtype, "dtype name contains NUL"))?;
        let mut code = 0;
        // SAFETY: valid out pointer and NUL-terminated name.
        check(unsafe { sys::tenso_dtype_from_name(&mut code, c.as_ptr()) })?;
        Dtype::from_code(code).ok_or_else(|| Error::new(ErrorKind::BadDtype, format!("dtype code {code}")))
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = Error;
    fn from_str(s: &str) -> Result<Dtype> {
        Dtype::from_name(s)
    }
}

/// Declares [`Kind`] and both directions of its code mapping from one list.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident = $code:ident,)*) => {
        /// What a packet holds.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Kind {
            $($(#[$doc])* $variant,)*
            /// A kind code this version of the crate does not know.
            Unknown(i32),
        }

        impl Kind {
            /// The kind of a `TENSO_KIND_*` code.
            pub fn from_code(code: i32) -> Kind {
                match code {
                    $(sys::$code => Kind::$variant,)*
                    other => Kind::Unknown(other),
                }
            }

            /// The `TENSO_KIND_*` code.
            pub fn code(self) -> i32 {
                match self {
                    $(Kind::$variant => sys::$code,)*
                    Kind::Unknown(c) => c,
                }
            }
        }
    };
}

kinds! {
    /// One C-contiguous tensor.
    Dense = TENSO_KIND_DENSE,
    /// String key to packet, nested.
    Bundle = TENSO_KIND_BUNDLE,
    /// A sparse matrix in coordinate form.
    SparseCoo = TENSO_KIND_SPARSE_COO,
    /// A sparse matrix, compressed rows.
    SparseCsr = TENSO_KIND_SPARSE_CSR,
    /// A sparse matrix, compressed columns.
    SparseCsc = TENSO_KIND_SPARSE_CSC,
    /// 8- or 4-bit codes with scales and zero points.
    Quantized = TENSO_KIND_QUANTIZED,
    /// An array of strings.
    String = TENSO_KIND_STRING,
    /// A direct ragged packet (flag `RAGGED`); upstream's ragged arrays are bundles.
    Ragged = TENSO_KIND_RAGGED,
    /// A reference to device memory of another process.
    GpuIpcRef = TENSO_KIND_GPU_IPC_REF,
}

/// An IEEE 754 binary16 value, stored as its bits (dtype `float16`).
///
/// A plain `#[repr(transparent)]` `u16`, so `&[F16]` has the layout of `&[half::f16]`; convert
/// with [`to_f32`](F16::to_f32) / [`from_f32`](F16::from_f32) (round to nearest even).
///
/// ```
/// use tenso::F16;
/// assert_eq!(F16::from_f32(1.0).to_bits(), 0x3c00);
/// assert_eq!(F16::from_bits(0xc000).to_f32(), -2.0);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct F16(pub u16);

impl F16 {
    /// From the raw bits.
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }
    /// The raw bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// The nearest binary16 (ties to even; overflow gives infinity; NaN stays NaN).
    pub fn from_f32(value: f32) -> F16 {
        let x = value.to_bits();
        let sign = (x >> 16) & 0x8000;
        let exp = (x >> 23) & 0xff;
        let man = x & 0x007f_ffff;
        if exp == 0xff {
            // Inf or NaN (keep a quiet bit so a NaN never becomes Inf).
            let nan = if man != 0 { 0x0200 | (man >> 13) } else { 0 };
            return F16((sign | 0x7c00 | nan) as u16);
        }
        let e = exp as i32 - 127 + 15;
        if e >= 0x1f {
            return F16((sign | 0x7c00) as u16);
        }
        if e <= 0 {
            // Subnormal or zero in binary16.
            if e < -10 {
                return F16(sign as u16);
            }
            let m = man | 0x0080_0000;
            let shift = (14 - e) as u32;
            let mut half = m >> shift;
            let rem = m & ((1 << shift) - 1);
            let halfway = 1 << (shift - 1);
            if rem > halfway || (rem == halfway && half & 1 == 1) {
                half += 1;
            }
            return F16((sign | half) as u16);
        }
        let mut half = ((e as u32) << 10) | (man >> 13);
        let rem = man & 0x1fff;
        if rem > 0x1000 || (rem == 0x1000 && half & 1 == 1) {
            half += 1; // may carry into the exponent, up to Inf: still correct
        }
        F16((sign | half) as u16)
    }

    /// The exact float32 value.
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x03ff;
        let bits = match (exp, man) {
            (0, 0) => sign,
            (0, m) => {
                // Subnormal: normalise.
                let shift = m.leading_zeros() - 21; // bring the top bit to position 10
                let m = (m << shift) & 0x03ff;
                sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
            }
            (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
            (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
        };
        f32::from_bits(bits)
    }
}

impl fmt::Debug for F16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_f32())
    }
}

impl From<F16> for f32 {
    fn from(v: F16) -> f32 {
        v.to_f32()
    }
}

/// A bfloat16 value, stored as its bits: the upper 16 bits of a float32 (dtype `bfloat16`).
///
/// ```
/// use tenso::Bf16;
/// assert_eq!(Bf16::from_f32(1.0).to_bits(), 0x3f80);
/// assert_eq!(Bf16::from_bits(0x4049).to_f32(), 3.140625);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// From the raw bits.
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }
    /// The raw bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }
    /// The nearest bfloat16 (ties to even; NaN stays NaN).
    pub fn from_f32(value: f32) -> Bf16 {
        let x = value.to_bits();
        if value.is_nan() {
            return Bf16(((x >> 16) | 0x0040) as u16);
        }
        let round = 0x7fff + ((x >> 16) & 1);
        Bf16((x.wrapping_add(round) >> 16) as u16)
    }
    /// The exact float32 value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl fmt::Debug for Bf16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_f32())
    }
}

impl From<Bf16> for f32 {
    fn from(v: Bf16) -> f32 {
        v.to_f32()
    }
}

/// A complex number as stored on the wire: interleaved `re`, `im` (the layout of
/// `num_complex::Complex<T>`). `Complex<f32>` is dtype `complex64`, `Complex<f64>` is
/// `complex128`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C)]
pub struct Complex<T> {
    /// The real part.
    pub re: T,
    /// The imaginary part.
    pub im: T,
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type with exactly the layout of one dense dtype, so packet bodies can be borrowed as
/// `&[T]` ([`ViewRef::as_slice`](crate::ViewRef::as_slice)) and slices encoded without copies
/// ([`Tensor::new`](crate::Tensor::new)).
///
/// Implemented (sealed) for the 15 dense dtypes: `f32`, `f64`, `i8`, `i16`, `i32`, `i64`,
/// `u8`, `u16`, `u32`, `u64`, `bool`, [`F16`], [`Bf16`], [`Complex<f32>`](Complex) and
/// [`Complex<f64>`](Complex).
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The dtype whose elements this type holds.
    const DTYPE: Dtype;
    /// Whether these bytes (a whole number of elements) are valid values of the type: always,
    /// except for `bool`, whose bytes must be 0 or 1.
    #[doc(hidden)]
    fn valid_bytes(_bytes: &[u8]) -> bool {
        true
    }
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$d;
        }
    )*};
}

element! {
    f32 => Float32, i32 => Int32, f64 => Float64, i64 => Int64, u8 => Uint8, u16 => Uint16,
    F16 => Float16, i8 => Int8, i16 => Int16, u32 => Uint32, u64 => Uint64,
    Complex<f32> => Complex64, Complex<f64> => Complex128, Bf16 => Bfloat16,
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: Dtype = Dtype::Bool;
    fn valid_bytes(bytes: &[u8]) -> bool {
        // A byte other than 0 or 1 is not a valid Rust bool: refuse to borrow it as one.
        bytes.iter().all(|&b| b <= 1)
    }
}

/// The bytes of a slice of elements (all element types are padding-free plain data).
pub(crate) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: T is one of the sealed plain-data types above: no padding, every byte
    // initialised; the length in bytes cannot overflow since the slice exists.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_names_and_itemsizes() {
        for code in 1..=21 {
            let d = Dtype::from_code(code).unwrap();
            assert_eq!(d.code(), code);
            assert_eq!(Dtype::from_name(d.name()).unwrap(), d);
            assert_eq!(d.is_dense(), code <= 15);
        }
        assert_eq!(Dtype::from_code(0), None);
        assert_eq!(Dtype::from_code(22), None);
        assert_eq!(Dtype::Complex128.itemsize(), 16);
        assert_eq!(Dtype::Bfloat16.itemsize(), 2);
        assert_eq!(Dtype::from_name("float128").unwrap_err().kind(), ErrorKind::BadDtype);
        assert_eq!(Dtype::from_name("float\0").unwrap_err().kind(), ErrorKind::BadDtype);
    }

    #[test]
    fn element_sizes_match_the_library() {
        fn size<T: Element>() {
            assert_eq!(std::mem::size_of::<T>(), T::DTYPE.itemsize(), "{}", T::DTYPE);
        }
        size::<f32>();
        size::<f64>();
        size::<i8>();
        size::<i16>();
        size::<i32>();
        size::<i64>();
        size::<u8>();
        size::<u16>();
        size::<u32>();
        size::<u64>();
        size::<bool>();
        size::<F16>();
        size::<Bf16>();
        size::<Complex<f32>>();
        size::<Complex<f64>>();
    }

    #[test]
    fn f16_conversions_are_exact_and_round_to_even() {
        let cases: [(f32, u16); 12] = [
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00), // rounds up to Inf
            (f32::INFINITY, 0x7c00),
            (5.960_464_5e-8, 0x0001), // smallest subnormal, 2^-24
            (6.097_555e-5, 0x03ff),   // largest subnormal
            (6.103_515_6e-5, 0x0400), // smallest normal
            (1.000_488_3, 0x3c00),    // 1 + 2^-11: tie, to even (down)
            (1.001_464_8, 0x3c02),    // 1 + 3*2^-11: tie, to even (up)
        ];
        for (f, bits) in cases {
            assert_eq!(F16::from_f32(f).to_bits(), bits, "{f}");
        }
        for bits in 0..=0xffffu16 {
            let h = F16(bits);
            let f = h.to_f32();
            if f.is_nan() {
                assert!(F16::from_f32(f).to_f32().is_nan());
            } else {
                assert_eq!(F16::from_f32(f).to_bits(), bits, "round trip of {bits:#06x}");
            }
        }
        assert_eq!(F16::from_f32(2.980_232_2e-8).to_bits(), 0, "2^-25 is a tie: to even (zero)");
    }

    #[test]
    fn bf16_conversions() {
        assert_eq!(Bf16::from_f32(1.0).to_bits(), 0x3f80);
        assert_eq!(Bf16::from_f32(-0.0).to_bits(), 0x8000);
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8000)).to_bits(), 0x3f80); // tie, even
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f81_8000)).to_bits(), 0x3f82); // tie, even
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8001)).to_bits(), 0x3f81);
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        for bits in 0..=0xffffu16 {
            let f = Bf16(bits).to_f32();
            if !f.is_nan() {
                assert_eq!(Bf16::from_f32(f).to_bits(), bits);
            }
        }
    }
}
