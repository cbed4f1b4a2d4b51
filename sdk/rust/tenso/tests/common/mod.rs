//! Helpers shared by the integration tests: the golden manifest as typed values, hex, paths.
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value as Json;
use tenso::{Dtype, IpcRef, Scheme};

/// tests/vectors of the repository (TENSO_VECTORS_DIR overrides).
pub fn vectors_dir() -> PathBuf {
    match std::env::var_os("TENSO_VECTORS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/vectors"),
    }
}

pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A scratch directory unique to this process and `tag`, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("tenso-rs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a packet holds, parsed from a manifest VALUE (all bytes owned, so values built for
/// encoding can borrow from it).
#[derive(Debug)]
pub enum Node {
    Dense { dtype: Dtype, shape: Vec<usize>, body: Vec<u8> },
    Bundle(Vec<(String, Node)>),
    Sparse { kind: tenso::Kind, shape: [usize; 2], comps: Vec<Node> },
    Quantized(Quant),
    Strings(Vec<String>),
    Ragged { dtype: Dtype, rows: Vec<Vec<u8>>, lengths: Vec<u64>, flat: Vec<u8>, offsets: Vec<u64>, bundle: Box<Node> },
    Ipc(IpcRef),
}

#[derive(Debug)]
pub struct Quant {
    pub dtype: Dtype,
    pub scheme: Scheme,
    pub shape: Vec<usize>,
    pub body: Vec<u8>,
    pub scales: Vec<f32>,
    pub zero_points: Vec<f32>,
    pub input_dtype: Dtype,
    pub input: Vec<u8>,
    pub dequant: Vec<u8>,
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn shape_of(v: &Json) -> Vec<usize> {
    v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

fn dtype_of(v: &Json, key: &str) -> Dtype {
    v[key].as_str().unwrap().parse().unwrap()
}

pub fn parse(v: &Json) -> Node {
    match v["kind"].as_str().unwrap() {
        "dense" => {
            Node::Dense { dtype: dtype_of(v, "dtype"), shape: shape_of(v), body: hex(v["body_hex"].as_str().unwrap()) }
        }
        "bundle" => Node::Bundle(
            v["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (e["key"].as_str().unwrap().to_owned(), parse(&e["value"])))
                .collect(),
        ),
        k @ ("sparse_coo" | "sparse_csr" | "sparse_csc") => {
            let s = shape_of(v);
            Node::Sparse {
                kind: match k {
                    "sparse_coo" => tenso::Kind::SparseCoo,
                    "sparse_csr" => tenso::Kind::SparseCsr,
                    _ => tenso::Kind::SparseCsc,
                },
                shape: [s[0], s[1]],
                comps: v["components"].as_array().unwrap().iter().map(parse).collect(),
            }
        }
        "quantized" => {
            let scheme = match v["scheme"].as_str().unwrap() {
                "per_tensor" => Scheme::PerTensor,
                "per_channel" => Scheme::PerChannel { axis: v["axis"].as_i64().unwrap() as i32 },
                "per_group" => Scheme::PerGroup { group_size: v["group_size"].as_u64().unwrap() as u32 },
                s => panic!("scheme {s}"),
            };
            Node::Quantized(Quant {
                dtype: dtype_of(v, "dtype"),
                scheme,
                shape: shape_of(v),
                body: hex(v["body_hex"].as_str().unwrap()),
                scales: f32s(&hex(v["scales_hex"].as_str().unwrap())),
                zero_points: f32s(&hex(v["zero_points_hex"].as_str().unwrap())),
                input_dtype: dtype_of(v, "input_dtype"),
                input: hex(v["input_hex"].as_str().unwrap()),
                dequant: hex(v["dequant_hex"].as_str().unwrap()),
            })
        }
        "string" => {
            Node::Strings(v["strings"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        }
        "ragged" => {
            let rows: Vec<Vec<u8>> =
                v["rows_hex"].as_array().unwrap().iter().map(|r| hex(r.as_str().unwrap())).collect();
            let lengths: Vec<u64> = v["row_lengths"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
            let mut offsets = vec![0u64];
            for l in &lengths {
                offsets.push(offsets.last().unwrap() + l);
            }
            Node::Ragged {
                dtype: dtype_of(v, "dtype"),
                flat: rows.concat(),
                rows,
                lengths,
                offsets,
                bundle: Box::new(parse(&v["bundle"])),
            }
        }
        "gpu_ipc_ref" => Node::Ipc(IpcRef {
            handle: hex(v["handle_hex"].as_str().unwrap()).try_into().unwrap(),
            byte_offset: v["byte_offset"].as_u64().unwrap(),
            nbytes: v["nbytes"].as_u64().unwrap(),
            device_uuid: hex(v["uuid_hex"].as_str().unwrap()).try_into().unwrap(),
        }),
        k => panic!("unknown VALUE kind {k}"),
    }
}

/// One manifest case.
pub struct Case {
    pub name: String,
    pub file: PathBuf,
    pub size: u64,
    pub version: u32,
    pub compressed: bool,
    pub alignment: u32,
    pub integrity: bool,
    pub compress: bool,
    pub node: Node,
}

impl Case {
    pub fn options(&self) -> tenso::Options {
        tenso::Options::new().alignment(self.alignment).integrity(self.integrity).compress(self.compress)
    }
}

pub fn cases() -> Vec<Case> {
    let dir = vectors_dir();
    let text = std::fs::read_to_string(dir.join("manifest.json"))
        .unwrap_or_else(|e| panic!("cannot read {}/manifest.json: {e}", dir.display()));
    let m: Json = serde_json::from_str(&text).unwrap();
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_owned(),
            file: dir.join(c["file"].as_str().unwrap()),
            size: c["size"].as_u64().unwrap(),
            version: c["version"].as_u64().unwrap() as u32,
            compressed: c["compressed"].as_bool().unwrap(),
            alignment: c["options"]["alignment"].as_u64().unwrap() as u32,
            integrity: c["options"]["check_integrity"].as_bool().unwrap(),
            compress: c["options"]["compress"].as_bool().unwrap(),
            node: parse(&c["value"]),
        })
        .collect()
}
