//! Found at run time: embed the directory of the libtenso that tenso-sys linked as a run path
//! (cargo never passes a dependency's link arguments on to a program's binary).
fn main() {
    if let Ok(dir) = std::env::var("DEP_TENSO_RPATH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
