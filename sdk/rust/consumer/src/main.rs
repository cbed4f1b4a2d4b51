//! Encodes, streams over a Unix socket and decodes, as a user's program would; prints
//! "consumer ok <library version>" on success.
use std::os::unix::net::UnixStream;

fn main() -> tenso::Result<()> {
    let x: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let packet = tenso::dumps(&tenso::Tensor::new(&x, &[3, 4])?)?;
    let values: &[f32] = tenso::loads(&packet)?.as_slice()?;
    assert_eq!(values, &x[..]);

    let (a, mut b) = UnixStream::pair()?;
    tenso::write_fd(&a, &tenso::Tensor::new(&x, &[3, 4])?)?;
    drop(a);
    let p = tenso::read_from(&mut b)?.expect("one packet");
    assert_eq!(p.shape(), &[3, 4]);
    assert_eq!(Vec::<f32>::try_from(&p)?, x);
    println!("consumer ok {}", tenso::library_version());
    Ok(())
}
