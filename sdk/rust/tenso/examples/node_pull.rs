//! The Rust end of the cross-language node test (tests/interop/nodes.py): a Rust node that
//! only dials pulls each NAME from the node at ADDR (over TLS) and writes what it got into
//! OUTDIR: the body bytes of each dense value as `<name>.bin` (bundle entries as
//! `<name>.<key>.bin`) and one line per value on standard output, `<name> <dtype> <shape>`,
//! which the test compares with the values the Go node pushed.
//!
//! Exit status: 0 when every pull succeeded, 1 on any error, 2 on bad usage.
//!
//! ```sh
//! cargo run --example node_pull -- tls://<fingerprint>@127.0.0.1:<port> out/ u8 bundle
//! ```
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use tenso::{Kind, Node, NodeOptions, ViewRef};

fn write(out: &Path, name: &str, v: &ViewRef) -> tenso::Result<()> {
    let dtype = v.dtype().map_or("none", |d| d.name());
    println!("{name} {dtype} {:?}", v.shape());
    std::fs::write(out.join(format!("{name}.bin")), v.bytes())
        .map_err(|e| tenso::Error::from(std::io::Error::new(e.kind(), format!("{name}: {e}"))))
}

fn run(addr: &str, out: &Path, names: &[String]) -> tenso::Result<()> {
    let node = Node::new(&NodeOptions { no_listen: true, ..Default::default() })?;
    for name in names {
        let view = node.request(addr, name, Some(Duration::from_secs(120)))?;
        if view.kind() == Kind::Bundle {
            for entry in view.entries() {
                let (key, child) = entry?;
                write(out, &format!("{name}.{key}"), child)?;
            }
        } else {
            write(out, name, &view)?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: node_pull ADDR OUTDIR NAME...");
        return ExitCode::from(2);
    }
    match run(&args[0], Path::new(&args[1]), &args[2..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("node_pull: {e}");
            ExitCode::from(1)
        }
    }
}
