//! The tenso-sys ABI test: the declarations of tenso-sys against the installed C headers.
//! `build.rs` parses the headers and generates both sides; see there. Run with `cargo test -p
//! systest`.
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/generated.rs"));

/// Size of the field a raw-pointer projection points at (the closure is never called).
pub fn field_size<T, F>(_projection: impl Fn(*const T) -> *const F) -> usize {
    core::mem::size_of::<F>()
}

/// The bytes of a value of a struct type without padding.
pub fn struct_bytes<T>(v: &T) -> Vec<u8> {
    // SAFETY: reads size_of::<T>() initialised bytes of `v`; only used for padding-free structs.
    unsafe { core::slice::from_raw_parts(v as *const T as *const u8, core::mem::size_of::<T>()) }.to_vec()
}

#[repr(C)]
struct Entry {
    name: *const core::ffi::c_char,
    value: i64,
}

#[repr(C)]
struct Bytes {
    name: *const core::ffi::c_char,
    data: *const core::ffi::c_void,
    len: usize,
}

extern "C" {
    static systest_table: [Entry; 0];
    static systest_table_len: usize;
    static systest_bytes: [Bytes; 0];
    static systest_bytes_len: usize;
}

fn c_str(p: *const core::ffi::c_char) -> String {
    unsafe { core::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// (name, value) as the C compiler computed them from the installed headers.
pub fn c_table() -> Vec<(String, i128)> {
    unsafe {
        let p = core::ptr::addr_of!(systest_table) as *const Entry;
        (0..systest_table_len).map(|i| (c_str((*p.add(i)).name), (*p.add(i)).value as i128)).collect()
    }
}

/// Initialiser and string bytes from the installed headers.
pub fn c_bytes() -> Vec<(String, Vec<u8>)> {
    unsafe {
        let p = core::ptr::addr_of!(systest_bytes) as *const Bytes;
        (0..systest_bytes_len)
            .map(|i| {
                let e = &*p.add(i);
                (c_str(e.name), core::slice::from_raw_parts(e.data as *const u8, e.len).to_vec())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_and_constants_match_the_headers() {
        let c = c_table();
        let r = rust_table();
        assert_eq!(c.len(), r.len());
        let mut bad = Vec::new();
        for ((cn, cv), (rn, rv)) in c.iter().zip(&r) {
            assert_eq!(cn, rn, "tables out of step");
            if cv != rv {
                bad.push(format!("{cn}: C {cv}, Rust {rv}"));
            }
        }
        assert!(bad.is_empty(), "tenso-sys disagrees with the headers:\n{}", bad.join("\n"));
        // Sanity: the parse saw every public struct.
        for s in [
            "tenso_buffer",
            "tenso_encode_options",
            "tenso_decode_options",
            "tenso_tensor",
            "tenso_tensor_view",
            "tenso_packet_info",
            "tenso_quantized",
            "tenso_ipc_ref",
            "DLPackVersion",
            "DLDevice",
            "DLDataType",
            "DLTensor",
            "DLManagedTensor",
            "DLManagedTensorVersioned",
            "tenso_cache_options",
            "tenso_cache_entry_info",
            "tenso_cache_stats",
            "tenso_archive_options",
            "tenso_archive_entry",
            "tenso_archive_write_options",
        ] {
            assert!(c.iter().any(|(n, _)| n == &format!("sizeof {s}")), "{s} not checked");
        }
        eprintln!("{} layout/constant facts checked", c.len());
    }

    #[test]
    fn initialisers_and_strings_match_the_headers() {
        let c = c_bytes();
        let r = rust_bytes();
        assert_eq!(c.len(), r.len());
        assert!(c.len() >= 4, "expected the three *_INIT macros and TENSO_VERSION_STRING");
        for ((cn, cv), (rn, rv)) in c.iter().zip(&r) {
            assert_eq!(cn, rn);
            assert_eq!(cv, rv, "{cn} differs");
        }
    }

    #[test]
    fn every_function_is_declared_with_the_header_signature() {
        // Compiling functions() already proved the signatures; this proves they link and are
        // all there.
        let f = functions();
        assert_eq!(f.len(), HEADER_FUNCTIONS);
        assert!(f.iter().all(|(_, addr)| *addr != 0));
        let mut names: Vec<_> = f.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), HEADER_FUNCTIONS, "duplicate prototypes");
    }

    #[test]
    fn callback_types_have_the_header_signatures() {
        // Compiling callback_types() proved the signatures; the parse must have seen them all.
        let names = callback_types();
        assert_eq!(
            names,
            [
                "tenso_write_fn",
                "tenso_alloc_fn",
                "tenso_release_fn",
                "tenso_cache_key_fn",
                "tenso_progress_fn",
                "tenso_gpu_release_fn",
                "tenso_node_release_fn",
                "tenso_node_access_fn",
                "tenso_node_op_fn"
            ]
        );
    }

    #[test]
    fn library_version_matches_the_declarations() {
        let v = unsafe { tenso_sys::tenso_version_number() };
        assert_eq!(v / 10000, tenso_sys::TENSO_VERSION_MAJOR, "libtenso major differs from tenso-sys");
        assert!(v >= tenso_sys::TENSO_VERSION_NUMBER, "libtenso older than the declarations");
        assert_eq!(unsafe { tenso_sys::tenso_protocol_version() }, tenso_sys::TENSO_PROTOCOL_VERSION);
    }
}
