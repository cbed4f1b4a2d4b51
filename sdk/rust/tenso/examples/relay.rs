//! The Rust link of the cross-language chain (Python -> Go -> Rust -> C and back, see
//! tests/interop/): reads Tenso packets from standard input, decodes each one, builds it again
//! with the safe API (tensors, bundles, sparse, quantized, string, ragged and GPU reference
//! values taken from the view) and writes it to standard output with the options it was
//! written with, until the input ends between two packets.
//!
//! "The options it was written with" are read off each view: integrity and compression from
//! its flags, the alignment from its header. A bundle is encoded with its own options; an entry
//! written with other ones is encoded alone with those and inserted as a pre-encoded packet
//! (the bytes it would have inline), as the Go relay does. No packet is forwarded as it came:
//! a kind the crate has no writer for (a direct ragged packet, an unknown kind) is an error.
//!
//! Exit status: 0 at a clean end of stream, 1 on any error (reported on standard error with the
//! index of the packet), 2 on bad usage.
//!
//! ```sh
//! cargo run --example relay < in.tenso > out.tenso
//! ```
use std::io;
use std::process::ExitCode;

use tenso::{flags, Bundle, Kind, Options, Packets, Sparse, Value, ViewRef};

fn main() -> ExitCode {
    if std::env::args_os().len() > 1 {
        eprintln!("usage: relay < packets > packets");
        return ExitCode::from(2);
    }
    let output = io::stdout();
    // Packets runs on libtenso's stream decoder: nothing past a packet is read, and the
    // iterator ends at a clean end of stream.
    for (index, packet) in Packets::new(io::stdin().lock()).enumerate() {
        if let Err(e) = packet.map_err(io::Error::from).and_then(|p| relay_one(&p, &output)) {
            eprintln!("relay (rust): packet {index}: {e}");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

fn relay_one(view: &ViewRef, output: &io::Stdout) -> io::Result<()> {
    let root = written_with(view);
    // Pass 1 makes what the value borrows and the view cannot lend (entries encoded alone with
    // their own options, aligned copies of ragged offsets), in tree order; pass 2 builds the
    // value borrowing them (they must outlive it, hence two passes).
    let mut side = Side::default();
    prepare(view, &root, &mut side)?;
    let value = build(view, &root, &side, &mut (0, 0))?;
    // The AsFd path: header from a small buffer, bodies straight from the view, vectored.
    root.write_fd(output, &value)?;
    Ok(())
}

#[derive(Default)]
struct Side {
    packets: Vec<Vec<u8>>,
    offsets: Vec<Vec<u64>>,
}

fn is_bundle(v: &ViewRef) -> bool {
    v.kind() == Kind::Bundle
}

/// The options a view was written with.
fn written_with(v: &ViewRef) -> Options {
    let a = v.alignment();
    Options::new()
        .integrity(v.flags() & flags::INTEGRITY != 0)
        .compress(v.flags() & flags::COMPRESSION != 0)
        .alignment(if a == 0 { 64 } else { a })
}

fn same(a: &Options, b: &Options) -> bool {
    let norm = |x: u32| if x == 0 { 64 } else { x };
    a.has_integrity() == b.has_integrity()
        && a.has_compression() == b.has_compression()
        && norm(a.get_alignment()) == norm(b.get_alignment())
}

/// The options a part carries, when they differ from those the tree is encoded with: dense,
/// quantized and string bodies carry their own, a ragged array those of its components (its
/// bundle header has none); sparse components and GPU references ignore options. At the top
/// they are the tree's, except for a ragged array.
fn own_options(v: &ViewRef, root: &Options) -> Option<Options> {
    let own = match v.ragged() {
        Ok(r) => written_with(r.flat()),
        Err(_) if matches!(v.kind(), Kind::Dense | Kind::Quantized | Kind::String) => written_with(v),
        Err(_) => return None,
    };
    (!same(&own, root)).then_some(own)
}

/// The row offsets of a ragged view, copied (a bundle entry's body can sit at any address);
/// empty for other views.
fn offsets_of(v: &ViewRef) -> io::Result<Vec<u64>> {
    let Ok(r) = v.ragged() else { return Ok(Vec::new()) };
    let offsets = (0..=r.len()).map(|i| r.offset(i)).collect::<Option<Vec<u64>>>();
    offsets.ok_or_else(|| io::Error::other("ragged offsets out of range"))
}

/// A value for a part that is not a plain bundle (`offsets`: a ragged view's, copied).
fn part<'a>(v: &'a ViewRef, offsets: &'a [u64]) -> io::Result<Value<'a>> {
    match v.ragged() {
        Ok(r) => Ok(Value::ragged(&r.flat().as_tensor()?, offsets)?),
        Err(_) => leaf(v),
    }
}

fn prepare(v: &ViewRef, root: &Options, side: &mut Side) -> io::Result<()> {
    if let Some(own) = own_options(v, root) {
        let offsets = offsets_of(v)?;
        side.packets.push(own.dumps(&part(v, &offsets)?)?);
    } else if v.ragged().is_ok() {
        side.offsets.push(offsets_of(v)?);
    } else if is_bundle(v) {
        for e in v.entries() {
            prepare(e?.1, root, side)?;
        }
    }
    Ok(())
}

/// `next`: the next unused packet and offsets of `side`.
fn build<'a>(v: &'a ViewRef, root: &Options, side: &'a Side, next: &mut (usize, usize)) -> io::Result<Value<'a>> {
    if own_options(v, root).is_some() {
        let packet = &side.packets[next.0];
        next.0 += 1;
        return Ok(Value::packet(packet)?);
    }
    if v.ragged().is_ok() {
        let offsets = &side.offsets[next.1];
        next.1 += 1;
        return part(v, offsets);
    }
    if !is_bundle(v) {
        return leaf(v);
    }
    let mut bundle = Bundle::new();
    for e in v.entries() {
        let (key, child) = e?;
        bundle.insert(key, &build(child, root, side, next)?)?;
    }
    Ok(bundle.into_value())
}

/// A value for one non-bundle view, made from its decoded parts (bodies borrowed, not copied).
fn leaf(v: &ViewRef) -> io::Result<Value<'_>> {
    Ok(match v.kind() {
        Kind::Dense => Value::tensor(&v.as_tensor()?)?,
        Kind::Quantized => Value::quantized(&v.quantized()?)?,
        Kind::String => {
            let s = v.strings()?;
            Value::strings_raw(s.offsets(), s.payload())?
        }
        Kind::SparseCoo | Kind::SparseCsr | Kind::SparseCsc => match v.sparse()? {
            Sparse::Coo { shape, data, row, col } => {
                Value::sparse_coo(shape, &data.as_tensor()?, &row.as_tensor()?, &col.as_tensor()?)?
            }
            Sparse::Csr { shape, data, indices, indptr } => {
                Value::sparse_csr(shape, &data.as_tensor()?, &indices.as_tensor()?, &indptr.as_tensor()?)?
            }
            Sparse::Csc { shape, data, indices, indptr } => {
                Value::sparse_csc(shape, &data.as_tensor()?, &indices.as_tensor()?, &indptr.as_tensor()?)?
            }
        },
        Kind::GpuIpcRef => Value::ipc_ref(&v.ipc_ref()?)?,
        other => return Err(io::Error::other(format!("no writer for a {other:?} entry"))),
    })
}
