//! Finds the installed libtenso with pkg-config and links it.
//!
//! - The version must be >= 1.2 and < 2: the declarations in src/lib.rs are those of soname
//!   libtenso.so.1 (every 1.x keeps them, see the C README's ABI promise). The stream decoder
//!   (`tenso_decoder_*`) is new in this round's library, whose version.h the lead bumps to
//!   1.3 when merging; the range moves to 1.3 with it.
//! - `cargo:libdir` / `cargo:include` are passed on to dependents' build scripts as
//!   `DEP_TENSO_LIBDIR` / `DEP_TENSO_INCLUDE` (the `links` metadata), so the safe crate can
//!   add an rpath for its own tests and the systest crate can compile C against the same
//!   headers.
//! - Found at run time: the directory holding libtenso is embedded as an rpath
//!   (`-Wl,-rpath,DIR`) in this crate's own test binaries, and offered to dependents as
//!   `DEP_TENSO_RPATH`. Cargo never passes a dependency's link arguments on to the binaries
//!   of other crates, so a program embeds it with a two-line build script of its own (see
//!   the README, "Found at run time"); the `tenso` crate does so for its tests, examples
//!   and benches. Set `TENSO_SYS_NO_RPATH=1` to embed nothing (system installs, packagers
//!   who set the run path themselves): `DEP_TENSO_RPATH` is then not set.
//!
//! Set `TENSO_NO_PKG_CONFIG=1` together with `TENSO_LIB_DIR` to link without pkg-config.
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=TENSO_NO_PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=TENSO_LIB_DIR");
    println!("cargo:rerun-if-env-changed=TENSO_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=TENSO_SYS_NO_RPATH");

    if env::var_os("TENSO_NO_PKG_CONFIG").is_some() {
        let lib_dir = env::var("TENSO_LIB_DIR")
            .expect("TENSO_NO_PKG_CONFIG is set: TENSO_LIB_DIR must name the libtenso directory");
        println!("cargo:rustc-link-search=native={lib_dir}");
        println!("cargo:rustc-link-lib=dylib=tenso");
        println!("cargo:libdir={lib_dir}");
        if let Ok(inc) = env::var("TENSO_INCLUDE_DIR") {
            println!("cargo:include={inc}");
        }
        rpath(&lib_dir);
        return;
    }

    let lib = match pkg_config::Config::new().range_version("1.3".."2.0").cargo_metadata(true).probe("tenso") {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "tenso-sys: libtenso >= 1.2, < 2 was not found by pkg-config.\n\
                 Install it (`make install PREFIX=...` in the tenso repository) and point \
                 PKG_CONFIG_PATH at <prefix>/lib/pkgconfig.\n\n{e}"
            );
            std::process::exit(1);
        }
    };
    // Only the directories that hold libtenso itself: pkg-config also lists those of
    // dependencies (liblz4's system directories with PKG_CONFIG_ALLOW_SYSTEM_*).
    if let Some(dir) = lib.link_paths.iter().find(|d| d.join("libtenso.so").exists()) {
        println!("cargo:libdir={}", dir.display());
        rpath(&dir.display().to_string());
    }
    if let Some(dir) = lib.include_paths.iter().find(|d| d.join("tenso/tenso.h").exists()) {
        println!("cargo:include={}", dir.display());
    }
    println!("cargo:version={}", lib.version);
}

/// Embeds `dir` as a run path of this crate's binaries and offers it to dependents, unless
/// TENSO_SYS_NO_RPATH is set (to anything but "0" or "").
fn rpath(dir: &str) {
    let off = env::var("TENSO_SYS_NO_RPATH").map(|v| !v.is_empty() && v != "0").unwrap_or(false);
    if !off {
        // pkg-config may report a relocatable `${pcfiledir}/../../lib`: embed the real path.
        let dir = std::fs::canonicalize(dir).map_or_else(|_| dir.to_owned(), |p| p.display().to_string());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        println!("cargo:rpath={dir}");
    }
}
