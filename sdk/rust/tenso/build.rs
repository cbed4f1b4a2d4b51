//! Adds an rpath to the libtenso that tenso-sys found, for this crate's own tests, doctests,
//! examples and benches (cargo never passes a dependency's link args on), so `cargo test`
//! runs without LD_LIBRARY_PATH. Libraries and binaries that depend on `tenso` are not
//! affected.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TENSO_LIBDIR");
    if let Ok(dir) = std::env::var("DEP_TENSO_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
