//! Embeds the run path tenso-sys offers (`DEP_TENSO_RPATH`: the directory of the libtenso it
//! linked, unless `TENSO_SYS_NO_RPATH` is set) in this crate's own tests, doctests, examples
//! and benches, so `cargo test` runs without LD_LIBRARY_PATH. Cargo never passes link
//! arguments on to other crates' binaries: programs that use `tenso` add the same two lines
//! to a build script of their own (README, "Found at run time").
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TENSO_RPATH");
    if let Ok(dir) = std::env::var("DEP_TENSO_RPATH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
