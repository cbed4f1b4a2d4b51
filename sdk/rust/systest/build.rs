//! Generates the two sides of the tenso-sys ABI test from the installed headers (git2-rs
//! `systest` / `ctest` in spirit, without their dependencies):
//!
//! - `layout.c`, compiled with the system C compiler against the installed headers: a table
//!   of (name, value) for every struct's size, alignment, field offsets and field sizes,
//!   every typedef's size, and every numeric macro and enumerator (value and size); plus the
//!   bytes of each `*_INIT` initialiser and the string macros.
//! - `generated.rs`: the same table computed from the Rust declarations of tenso-sys, and a
//!   function that assigns every `tenso_*` function of the headers to a function pointer of
//!   the signature translated from C. A constant, struct field or function missing from
//!   tenso-sys, or a signature that differs, fails to compile; a value that differs fails
//!   the test.
//!
//! The parser handles the subset of C the tenso headers use (and fails loudly otherwise).
use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

const HEADERS: [&str; 9] =
    ["common.h", "errors.h", "version.h", "dlpack.h", "tenso.h", "shm.h", "archive.h", "gpu.h", "net.h"];
// Macros that are not values: linkage/visibility helpers.
const NOT_VALUES: [&str; 3] = ["TENSO_API", "TENSO_BEGIN_DECL", "TENSO_END_DECL"];

fn include_dir() -> PathBuf {
    // tenso-sys forwards pkg-config's include path (absent when it is a system directory).
    if let Ok(dir) = env::var("DEP_TENSO_INCLUDE") {
        return PathBuf::from(dir);
    }
    for dir in ["/usr/local/include", "/usr/include"] {
        if Path::new(dir).join("tenso/tenso.h").exists() {
            return PathBuf::from(dir);
        }
    }
    panic!("systest: cannot find tenso/tenso.h (tenso-sys reported no include directory)");
}

fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            let end = src[i + 2..].find("*/").expect("unterminated comment") + i + 4;
            out.push(' ');
            i = end;
        } else if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'"' {
            // Keep string literals intact (a "//" or "/*" inside one is not a comment).
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str(&src[start..i]);
        } else {
            let ch = src[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out.replace("\\\n", " ")
}

#[derive(Default)]
struct Api {
    /// numeric macros and enumerators, in header order
    consts: Vec<String>,
    /// string macros
    strings: Vec<String>,
    /// (macro, struct type) of brace initialisers
    inits: Vec<(String, String)>,
    /// struct name -> field names
    structs: BTreeMap<String, Vec<String>>,
    /// typedef names of scalar types (including enums)
    scalars: Vec<String>,
    /// (name, return type, parameter types) in Rust syntax
    functions: Vec<(String, String, Vec<String>)>,
    /// function-pointer typedefs: (name, return type, parameter types) in Rust syntax
    fn_types: Vec<(String, String, Vec<String>)>,
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.chars().next().unwrap().is_ascii_digit()
}

fn parse_macros(src: &str, api: &mut Api) {
    for line in src.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('#') else { continue };
        let Some(rest) = rest.trim_start().strip_prefix("define") else { continue };
        let rest = rest.trim_start();
        let name_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let (name, value) = rest.split_at(name_len);
        if value.starts_with('(') {
            continue; // function-like macro
        }
        let value = value.trim();
        if value.is_empty() || NOT_VALUES.contains(&name) {
            continue; // include guards, linkage helpers
        }
        if value.starts_with('{') {
            let ty = name.strip_suffix("_INIT").expect("brace macro not named *_INIT").to_lowercase();
            api.inits.push((name.to_string(), ty));
        } else if value.starts_with('"') || value.contains("STRINGIFY") {
            api.strings.push(name.to_string());
        } else {
            api.consts.push(name.to_string());
        }
    }
}

/// Splits `a, b, c` at top-level commas (no nesting in these headers beyond parentheses).
fn split_top(s: &str, sep: char) -> Vec<String> {
    let (mut depth, mut cur, mut out) = (0i32, String::new(), Vec::new());
    for c in s.chars() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            _ => {}
        }
        if c == sep && depth == 0 {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Drops preprocessor lines so the C declarations can be read as one token stream.
fn declarations(src: &str) -> String {
    src.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n")
}

fn parse_typedefs(decl: &str, api: &mut Api) {
    let mut rest = decl;
    while let Some(pos) = rest.find("typedef") {
        let after = &rest[pos + "typedef".len()..];
        let end_semicolon = |s: &str| -> usize {
            // end of this typedef: the `;` after the closing brace, if there is a body
            let mut depth = 0;
            for (i, c) in s.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ';' if depth == 0 => return i,
                    _ => {}
                }
            }
            panic!("unterminated typedef");
        };
        let end = end_semicolon(after);
        let body = after[..end].trim();
        rest = &after[end + 1..];
        if let (Some(open), Some(close)) = (body.find('{'), body.rfind('}')) {
            let head = body[..open].trim();
            let alias = body[close + 1..].trim().to_string();
            let inner = &body[open + 1..close];
            if head.starts_with("struct") {
                let mut fields = Vec::new();
                // `uint64_t hits, misses;` declares several fields of one type.
                let decls = split_top(inner, ';').into_iter().flat_map(|f| {
                    if f.contains('(') {
                        return vec![f];
                    }
                    let parts = split_top(&f, ',');
                    let ty_end = parts[0].rfind(|c: char| c.is_whitespace() || c == '*').map_or(0, |i| i + 1);
                    let ty = parts[0][..ty_end].to_string();
                    let mut out = vec![parts[0].clone()];
                    out.extend(parts[1..].iter().map(|p| format!("{ty} {p}")));
                    out
                });
                for f in decls {
                    let name = if let Some(p) = f.find("(*") {
                        let s = &f[p + 2..];
                        s[..s.find(')').unwrap()].trim().to_string()
                    } else {
                        let f = f.split('[').next().unwrap();
                        f.split(|c: char| c.is_whitespace() || c == '*').rfind(|t| !t.is_empty()).unwrap().to_string()
                    };
                    assert!(is_ident(&name), "cannot read field '{f}' of {alias}");
                    fields.push(name);
                }
                api.structs.insert(alias, fields);
            } else if head.starts_with("enum") {
                for e in split_top(inner, ',') {
                    let name = e.split('=').next().unwrap().trim().to_string();
                    assert!(is_ident(&name), "cannot read enumerator '{e}'");
                    api.consts.push(name);
                }
                api.scalars.push(alias);
            } else {
                panic!("unexpected typedef body: {body}");
            }
        } else if let Some(p) = body.find("(*") {
            // typedef RET (*name)(PARAMS);  a callback type
            let name_end = body[p..].find(')').unwrap() + p;
            let name = body[p + 2..name_end].trim().to_string();
            let ret = rust_type(&tokens(&body[..p]));
            let params_src = body[name_end + 1..].trim().trim_start_matches('(').trim_end_matches(')');
            let params = split_top(params_src, ',')
                .iter()
                .map(|q| {
                    let toks = tokens(q);
                    rust_type(&toks[..toks.len() - 1])
                })
                .collect();
            api.scalars.push(name.clone());
            api.fn_types.push((name, ret, params));
        } else {
            // typedef struct X X; (opaque) or typedef int32_t name;
            let toks: Vec<&str> = body.split_whitespace().collect();
            if toks[0] != "struct" {
                api.scalars.push(toks.last().unwrap().to_string());
            }
        }
    }
}

/// Translates one C type (tokens without the declarator name) into Rust syntax.
fn rust_type(toks: &[&str]) -> String {
    let mut base_const = false;
    let mut base = None;
    let mut stars = Vec::new(); // for each '*': is the pointer itself const
    for &t in toks {
        match t {
            // `const T *` / `T const *` qualify the base; `T *const` the pointer before it.
            "const" if stars.is_empty() => base_const = true,
            "const" => *stars.last_mut().unwrap() = true,
            "struct" => {}
            "*" => stars.push(false),
            other => {
                assert!(base.is_none(), "two base types in {toks:?}");
                base = Some(other);
            }
        }
    }
    let base = base.expect("no base type");
    let mapped = match base {
        "void" => "core::ffi::c_void".to_string(),
        "char" => "core::ffi::c_char".to_string(),
        "int" => "core::ffi::c_int".to_string(),
        "float" => "f32".to_string(),
        "double" => "f64".to_string(),
        "size_t" => "usize".to_string(),
        "uint8_t" => "u8".to_string(),
        "uint16_t" => "u16".to_string(),
        "uint32_t" => "u32".to_string(),
        "uint64_t" => "u64".to_string(),
        "int8_t" => "i8".to_string(),
        "int16_t" => "i16".to_string(),
        "int32_t" => "i32".to_string(),
        "int64_t" => "i64".to_string(),
        other => format!("tenso_sys::{other}"),
    };
    if stars.is_empty() {
        return if base == "void" { "()".to_string() } else { mapped };
    }
    // The first '*' points at the base (const-ness from before the base); each further '*'
    // points at the previous pointer (const-ness from the `const` after the previous '*').
    let mut ty = format!("*{} {mapped}", if base_const { "const" } else { "mut" });
    for i in 1..stars.len() {
        ty = format!("*{} {ty}", if stars[i - 1] { "const" } else { "mut" });
    }
    ty
}

fn tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if c.is_ascii_alphanumeric() || c == '_' {
            start.get_or_insert(i);
        } else {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
            if c == '*' {
                out.push("*");
            } else {
                assert!(c.is_whitespace(), "unexpected character '{c}' in a declaration: {s}");
            }
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

fn parse_functions(decl: &str, api: &mut Api) {
    let mut rest = decl;
    while let Some(pos) = rest.find("TENSO_API") {
        let after = &rest[pos + "TENSO_API".len()..];
        let end = after.find(';').expect("unterminated prototype");
        let proto = after[..end].trim().to_string();
        rest = &after[end + 1..];
        let open = proto.find('(').unwrap();
        let close = proto.rfind(')').unwrap();
        let head = tokens(&proto[..open]);
        let (name, ret) = head.split_last().unwrap();
        assert!(name.starts_with("tenso_"), "unexpected function {name}");
        let params_src = proto[open + 1..close].trim();
        let mut params = Vec::new();
        if params_src != "void" {
            for p in split_top(params_src, ',') {
                assert!(!p.contains('('), "function-pointer parameters are not handled: {p}");
                // An array parameter (`char buf[65]`) is the pointer it decays to.
                let (decl, array) = match p.find('[') {
                    Some(i) => (&p[..i], true),
                    None => (&p[..], false),
                };
                let toks = tokens(decl);
                let (_, ty) = toks.split_last().unwrap(); // drop the parameter name
                let mut ty = ty.to_vec();
                if array {
                    ty.push("*");
                }
                params.push(rust_type(&ty));
            }
        }
        api.functions.push((name.to_string(), rust_type(ret), params));
    }
}

fn main() {
    // cargo does not pass tenso-sys's link args on: add the rpath for this crate's tests.
    if let Ok(dir) = env::var("DEP_TENSO_RPATH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    let inc = include_dir();
    let mut api = Api::default();
    for h in HEADERS {
        let path = inc.join("tenso").join(h);
        println!("cargo:rerun-if-changed={}", path.display());
        let src = strip_comments(&fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
        parse_macros(&src, &mut api);
        let decl = declarations(&src);
        parse_typedefs(&decl, &mut api);
        parse_functions(&decl, &mut api);
    }
    assert!(api.functions.len() > 50 && api.structs.len() >= 10, "header parse found too little");

    let mut c = String::from(
        "#include <stddef.h>\n#include <string.h>\n#include \"tenso/tenso.h\"\n\
         struct systest_entry { const char *name; long long value; };\n\
         struct systest_bytes { const char *name; const void *data; size_t len; };\n",
    );
    let mut rs = String::from("// @generated by systest/build.rs from the installed headers.\n");
    let mut c_rows = Vec::new();
    let mut r_rows = Vec::new();
    let mut row = |key: String, c_expr: String, r_expr: String| {
        c_rows.push(format!("    {{\"{key}\", (long long)({c_expr})}},"));
        r_rows.push(format!("        (\"{key}\", ({r_expr}) as i128),"));
    };
    for (s, fields) in &api.structs {
        row(format!("sizeof {s}"), format!("sizeof({s})"), format!("core::mem::size_of::<tenso_sys::{s}>()"));
        row(format!("alignof {s}"), format!("_Alignof({s})"), format!("core::mem::align_of::<tenso_sys::{s}>()"));
        for f in fields {
            row(
                format!("offsetof {s}.{f}"),
                format!("offsetof({s}, {f})"),
                format!("core::mem::offset_of!(tenso_sys::{s}, {f})"),
            );
            row(
                format!("sizeof {s}.{f}"),
                format!("sizeof(((const {s} *)0)->{f})"),
                format!("crate::field_size(|p: *const tenso_sys::{s}| unsafe {{ core::ptr::addr_of!((*p).{f}) }})"),
            );
        }
    }
    for t in &api.scalars {
        row(format!("sizeof {t}"), format!("sizeof({t})"), format!("core::mem::size_of::<tenso_sys::{t}>()"));
    }
    for k in &api.consts {
        row(format!("value {k}"), k.clone(), format!("tenso_sys::{k}"));
        row(format!("sizeof {k}"), format!("sizeof({k})"), format!("core::mem::size_of_val(&tenso_sys::{k})"));
    }
    c.push_str("const struct systest_entry systest_table[] = {\n");
    c.push_str(&c_rows.join("\n"));
    c.push_str("\n};\nconst size_t systest_table_len = sizeof(systest_table) / sizeof(systest_table[0]);\n");

    // Initialisers and strings: compared as bytes.
    let mut bytes_c = Vec::new();
    let mut bytes_r = Vec::new();
    for (m, ty) in &api.inits {
        c.push_str(&format!("static const {ty} init_{m} = {m};\n"));
        bytes_c.push(format!("    {{\"{m}\", &init_{m}, sizeof(init_{m})}},"));
        bytes_r.push(format!("        (\"{m}\", crate::struct_bytes(&tenso_sys::{m})),"));
    }
    for m in &api.strings {
        bytes_c.push(format!("    {{\"{m}\", {m}, sizeof({m})}},"));
        bytes_r.push(format!("        (\"{m}\", tenso_sys::{m}.to_vec()),"));
    }
    c.push_str("const struct systest_bytes systest_bytes[] = {\n");
    c.push_str(&bytes_c.join("\n"));
    c.push_str("\n};\nconst size_t systest_bytes_len = sizeof(systest_bytes) / sizeof(systest_bytes[0]);\n");

    writeln!(rs, "/// (name, value) computed from the Rust declarations, in the order of the C table.").unwrap();
    writeln!(rs, "pub fn rust_table() -> Vec<(&'static str, i128)> {{\n    vec![").unwrap();
    rs.push_str(&r_rows.join("\n"));
    rs.push_str("\n    ]\n}\n\n");
    writeln!(rs, "/// Initialiser and string bytes from the Rust declarations.").unwrap();
    writeln!(rs, "pub fn rust_bytes() -> Vec<(&'static str, Vec<u8>)> {{\n    vec![").unwrap();
    rs.push_str(&bytes_r.join("\n"));
    rs.push_str("\n    ]\n}\n\n");
    writeln!(rs, "/// Every function of the headers with the signature translated from C.").unwrap();
    writeln!(rs, "/// Returns their addresses (so none is optimised away) and names.").unwrap();
    writeln!(rs, "#[allow(unused_parens, clippy::type_complexity)]").unwrap();
    writeln!(rs, "pub fn functions() -> Vec<(&'static str, usize)> {{\n    vec![").unwrap();
    for (name, ret, params) in &api.functions {
        writeln!(
            rs,
            "        (\"{name}\", {{ let f: unsafe extern \"C\" fn({}) -> {ret} = tenso_sys::{name}; f as usize }}),",
            params.join(", ")
        )
        .unwrap();
    }
    rs.push_str("    ]\n}\n");
    writeln!(rs, "/// Callback typedefs: each is `Option<unsafe extern \"C\" fn(..)>` of the header's signature")
        .unwrap();
    writeln!(rs, "/// (a mismatch does not compile). Returns their names.").unwrap();
    writeln!(rs, "#[allow(unused_parens, clippy::type_complexity)]").unwrap();
    writeln!(rs, "pub fn callback_types() -> Vec<&'static str> {{\n    vec![").unwrap();
    for (name, ret, params) in &api.fn_types {
        writeln!(
            rs,
            "        {{ let _f: tenso_sys::{name} = None::<unsafe extern \"C\" fn({}) -> {ret}>; \"{name}\" }},",
            params.join(", ")
        )
        .unwrap();
    }
    rs.push_str("    ]\n}\n");
    writeln!(rs, "/// Number of functions declared by the headers.").unwrap();
    writeln!(rs, "pub const HEADER_FUNCTIONS: usize = {};", api.functions.len()).unwrap();

    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    fs::write(out.join("layout.c"), c).unwrap();
    fs::write(out.join("generated.rs"), rs).unwrap();
    cc::Build::new()
        .file(out.join("layout.c"))
        .include(&inc)
        .flag_if_supported("-std=c11")
        .warnings(true)
        .compile("systest_layout");
}
