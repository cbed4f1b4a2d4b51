//! Builds or finds libtenso.
//!
//! **`bundled` (the default feature)**: compiles the libtenso sources this crate carries
//! (`libtenso/`, put there by `make dist`, tests/dist/make-dist.sh) with the `cc` crate into a
//! static library, linked into the program: no installed libtenso, no run path, nothing for
//! the program's own build script to do (zstd-sys and libgit2-sys's `vendored` do the same).
//! `libtenso/sources.txt` lists the files and flags, written by libtenso's CMake build (one
//! source list, CMakeLists.txt's). Header-only dependencies (standalone Asio, nlohmann/json,
//! xxHash) are carried in `libtenso/vendor/`; LZ4 comes from the `lz4-sys` crate (built from
//! source, static) and OpenSSL from `openssl-sys` (the system's libssl, as every Rust TLS
//! user links it). A checkout of the repository has no `libtenso/`: build it with
//! `--no-default-features` there (run-tests.sh does), or package it first.
//!
//! **Without `bundled`**: finds the installed libtenso with pkg-config and links it
//! dynamically.
//! - The version must be >= 1.5 and < 2: the declarations in src/lib.rs are those of libtenso
//!   1.5, soname libtenso.so.1 (every 1.x keeps them, see the C README's ABI promise).
//! - Found at run time: the directory holding libtenso is embedded as an rpath
//!   (`-Wl,-rpath,DIR`) in this crate's own test binaries, and offered to dependents as
//!   `DEP_TENSO_RPATH`. Cargo never passes a dependency's link arguments on to the binaries
//!   of other crates, so a program linking a libtenso outside the linker's default paths
//!   embeds it with a two-line build script of its own (see the README); the `tenso` crate
//!   does so for its tests, examples and benches. Set `TENSO_SYS_NO_RPATH=1` to embed nothing
//!   (system installs, packagers who set the run path themselves).
//! - Set `TENSO_NO_PKG_CONFIG=1` together with `TENSO_LIB_DIR` to link without pkg-config.
//!
//! Either way `cargo:include` / `cargo:libdir` reach dependents' build scripts as
//! `DEP_TENSO_INCLUDE` / `DEP_TENSO_LIBDIR` (the `links` metadata); systest compiles C against
//! the same headers.
use std::env;

fn main() {
    if cfg!(feature = "bundled") {
        #[cfg(feature = "bundled")]
        bundled::build();
        return;
    }
    system();
}

fn system() {
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

    let lib = match pkg_config::Config::new().range_version("1.5".."2.0").cargo_metadata(true).probe("tenso") {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "libtenso-sys: libtenso >= 1.5, < 2 was not found by pkg-config (the `bundled` \
                 feature is off, so the installed library is linked).\n\
                 Install it (the libtenso-dev package, or `make install PREFIX=...` in the tenso \
                 repository) and point PKG_CONFIG_PATH at <prefix>/lib/pkgconfig, or enable the \
                 `bundled` feature.\n\n{e}"
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

#[cfg(feature = "bundled")]
mod bundled {
    use std::env;
    use std::fs;
    use std::path::{Path, PathBuf};

    /// One line of libtenso/sources.txt: `source <path> [flag ...]`, `source@<arch> ...` (only
    /// for that target architecture: x86_64, aarch64, or `other`), `define <NAME[=VALUE]>`,
    /// `include <dir>` (paths relative to libtenso/).
    enum Line {
        Source(String, Vec<String>),
        Define(String),
        Include(String),
        Skip,
    }

    fn manifest(path: &Path, arch: &str) -> Vec<Line> {
        let text = fs::read_to_string(path).unwrap_or_else(|e| {
            panic!(
                "libtenso-sys (feature `bundled`): cannot read {}: {e}.\n\
                 The bundled sources are added when the crate is packaged (`make dist` in the \
                 tenso repository). In a checkout, build with `--no-default-features` against \
                 an installed libtenso.",
                path.display()
            )
        });
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let mut words = l.split_whitespace().map(str::to_owned);
                let kind = words.next().unwrap_or_default();
                let arg = words.next().unwrap_or_else(|| panic!("sources.txt: '{l}' lacks an argument"));
                match kind.split_once('@') {
                    Some(("source", only)) if only == arch => Line::Source(arg, words.collect()),
                    Some(("source", "other")) if arch != "x86_64" && arch != "aarch64" => {
                        Line::Source(arg, words.collect())
                    }
                    Some(("source", _)) => Line::Skip,
                    _ => match kind.as_str() {
                        "source" => Line::Source(arg, words.collect()),
                        "define" => Line::Define(arg),
                        "include" => Line::Include(arg),
                        _ => panic!("sources.txt: unknown line '{l}'"),
                    },
                }
            })
            .collect()
    }

    pub fn build() {
        let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("libtenso");
        let list = root.join("sources.txt");
        println!("cargo:rerun-if-changed={}", list.display());
        let lines = manifest(&list, &env::var("CARGO_CFG_TARGET_ARCH").unwrap());

        // Vendored headers first: lz4-sys's include directory has LZ4's own, older xxhash.h.
        let mut includes: Vec<PathBuf> = vec![root.join("vendor")];
        let mut defines = Vec::new();
        for line in &lines {
            match line {
                Line::Include(dir) => includes.push(root.join(dir)),
                Line::Define(d) => defines.push(d.clone()),
                Line::Source(..) | Line::Skip => {}
            }
        }
        for dep in ["DEP_LZ4_INCLUDE", "DEP_OPENSSL_INCLUDE"] {
            if let Some(dir) = env::var_os(dep) {
                includes.push(dir.into());
            }
        }

        // One cc::Build per set of per-file flags (CMake's COMPILE_OPTIONS source property),
        // compiled to objects; one archive of them all.
        let base = |cpp: bool| {
            let mut b = cc::Build::new();
            b.cpp(cpp)
                .std(if cpp { "c++17" } else { "c11" })
                // The engine is always optimised: a debug build of a program must not make
                // encoding 20 times slower.
                .opt_level(2)
                .debug(false)
                .pic(true)
                .warnings(false)
                .cargo_warnings(false)
                .flag_if_supported("-fvisibility=hidden")
                .define("NDEBUG", None);
            if cpp {
                b.flag_if_supported("-fvisibility-inlines-hidden");
            }
            for dir in &includes {
                b.include(dir);
            }
            for d in &defines {
                match d.split_once('=') {
                    Some((k, v)) => b.define(k, Some(v)),
                    None => b.define(d, None),
                };
            }
            b
        };
        let mut objects = Vec::new();
        let mut groups: Vec<(bool, Vec<String>, Vec<PathBuf>)> = Vec::new();
        for line in &lines {
            if let Line::Source(path, flags) = line {
                let file = root.join(path);
                println!("cargo:rerun-if-changed={}", file.display());
                let cpp = !path.ends_with(".c");
                match groups.iter_mut().find(|(c, f, _)| *c == cpp && f == flags) {
                    Some(g) => g.2.push(file),
                    None => groups.push((cpp, flags.clone(), vec![file])),
                }
            }
        }
        for (cpp, flags, files) in &groups {
            let mut b = base(*cpp);
            for f in flags {
                b.flag(f);
            }
            b.files(files);
            objects.extend(b.compile_intermediates());
        }
        let mut lib = base(true);
        lib.objects(&objects);
        lib.compile("tenso_bundled");

        // libtenso loads its CUDA plugin with dlopen (older glibc keeps it in libdl).
        println!("cargo:rustc-link-lib=dl");
        println!("cargo:include={}", root.join("capi/include").display());
        println!("cargo:root={}", root.display());
        println!("cargo:version={}", env::var("CARGO_PKG_VERSION").unwrap());
    }
}
