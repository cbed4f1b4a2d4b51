//! Streams: the fd fast path (tenso_write_fd / tenso_read_fd) over UnixStream pairs, the
//! generic Read/Write path with packet_length framing, and the two mixed; chunked and
//! interrupted readers, truncation, limits, hostile headers, writer errors.
mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use tenso::{Bundle, DecodeOptions, ErrorKind, Options, Packets, Tensor, Value};

/// A few packets of different kinds, as (encoder, check) pairs driven by index.
fn payload(i: usize) -> Vec<f32> {
    (0..(i * 997 % 5000)).map(|k| (k * (i + 1)) as f32).collect()
}

fn write_many_fd(s: UnixStream, n: usize) {
    for i in 0..n {
        let data = payload(i);
        let t = Tensor::from_slice(&data);
        match i % 4 {
            0 => tenso::write_fd(&s, &t).unwrap(),
            1 => Options::new().integrity(true).write_fd(&s, &t).unwrap(),
            2 => Options::new().compress(true).write_fd(&s, &t).unwrap(),
            _ => {
                let b = Bundle::new()
                    .with("data", &t)
                    .unwrap()
                    .with("name", &Value::strings([format!("packet {i}")]).unwrap())
                    .unwrap();
                Options::new().compress(true).integrity(true).write_fd(&s, &b).unwrap()
            }
        };
    }
}

fn check_packet(i: usize, p: &tenso::ViewRef) {
    if i % 4 == 3 {
        assert_eq!(p.get("data").unwrap().to_vec::<f32>().unwrap(), payload(i), "packet {i}");
        assert_eq!(p.get("name").unwrap().strings().unwrap().to_strings().unwrap(), [format!("packet {i}")]);
    } else {
        assert_eq!(p.as_slice::<f32>().unwrap(), &payload(i)[..], "packet {i}: top-level bodies are aligned");
    }
}

#[test]
fn fd_writer_to_fd_reader() {
    let (a, b) = UnixStream::pair().unwrap();
    let writer = std::thread::spawn(move || write_many_fd(a, 40));
    for i in 0..40 {
        let p = tenso::read_fd(&b).unwrap().unwrap_or_else(|| panic!("stream ended before packet {i}"));
        assert!(p.owns_data());
        check_packet(i, &p);
    }
    writer.join().unwrap();
    assert!(tenso::read_fd(&b).unwrap().is_none(), "clean end of stream");
    assert!(tenso::read_fd(&b).unwrap().is_none(), "and again");
}

#[test]
fn fd_writer_to_generic_reader() {
    let (a, b) = UnixStream::pair().unwrap();
    let writer = std::thread::spawn(move || write_many_fd(a, 40));
    let got: Vec<_> = Packets::new(&b).map(|p| p.unwrap()).collect();
    writer.join().unwrap();
    assert_eq!(got.len(), 40);
    for (i, p) in got.iter().enumerate() {
        check_packet(i, p);
    }
}

#[test]
fn generic_writer_to_fd_reader() {
    let (a, b) = UnixStream::pair().unwrap();
    let writer = std::thread::spawn(move || {
        let mut w = std::io::BufWriter::new(&a);
        for i in 0..20 {
            let data = payload(i);
            let n = Options::new().compress(i % 2 == 1).write_to(&mut w, &Tensor::from_slice(&data)).unwrap();
            assert!(n > 0);
        }
        w.flush().unwrap();
    });
    for i in 0..20 {
        let p = tenso::read_fd(&b).unwrap().unwrap();
        assert_eq!(p.as_slice::<f32>().unwrap(), &payload(i)[..], "packet {i}");
    }
    writer.join().unwrap();
    assert!(tenso::read_fd(&b).unwrap().is_none());
}

/// Returns at most `max` bytes per call and an `Interrupted` error every few calls.
struct Dribble<'a> {
    data: &'a [u8],
    max: usize,
    calls: usize,
}

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.calls += 1;
        if self.calls % 5 == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "signal"));
        }
        let n = buf.len().min(self.max).min(self.data.len()).min(1 + self.calls % self.max);
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn chunked_interrupted_reader_frames_every_kind() {
    let f: Vec<f64> = (0..3000).map(|i| (i % 10) as f64).collect();
    let t = Tensor::new(&f, &[30, 100]).unwrap();
    let f32s: Vec<f32> = f.iter().map(|&x| x as f32).collect();
    let packets = [
        tenso::dumps(&t).unwrap(),
        Options::new().compress(true).dumps(&t).unwrap(),
        Options::new().compress(true).integrity(true).alignment(4096).dumps(&t).unwrap(),
        tenso::dumps(&Bundle::new().with("t", &t).unwrap().with("s", &Value::strings(["x"]).unwrap()).unwrap())
            .unwrap(),
        tenso::dumps(
            &tenso::quantize(&Tensor::from_slice(&f32s), tenso::Dtype::Quint4, tenso::Scheme::PerTensor).unwrap(),
        )
        .unwrap(),
        tenso::dumps(&Value::strings(["a", "bb", "ccc"]).unwrap()).unwrap(),
    ];
    let stream = packets.concat();
    for max in [1, 3, 7, 64, 100_000] {
        let r = Dribble { data: &stream, max, calls: 0 };
        let got: Vec<_> = Packets::new(r).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), packets.len(), "max {max}");
        for (p, want) in got.iter().zip(&packets) {
            assert_eq!(p.packet_size(), want.len() as u64);
            assert_eq!(p.kind(), tenso::loads(want).unwrap().kind());
        }
        assert_eq!(got[1].as_slice::<f64>().unwrap(), &f[..]);
        assert_eq!(got[2].alignment(), 4096);
        assert_eq!(got[2].as_slice::<f64>().unwrap(), &f[..]);
    }
}

#[test]
fn a_stream_ending_inside_a_packet_is_truncated() {
    let p = tenso::dumps(&Tensor::from_slice(&[1u64; 100])).unwrap();
    for cut in [1, 9, 10, 63, 64, p.len() - 1] {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&p[..cut]).unwrap();
        drop(a);
        let e = tenso::read_fd(&b).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Truncated, "cut {cut}: {e}");

        let mut r = &p[..cut];
        assert_eq!(tenso::read_from(&mut r).unwrap_err().kind(), ErrorKind::Truncated, "cut {cut}");
    }
    // Garbage instead of a packet.
    let (a, b) = UnixStream::pair().unwrap();
    (&a).write_all(b"GET / HTTP/1.1\r\n").unwrap();
    assert_eq!(tenso::read_fd(&b).unwrap_err().kind(), ErrorKind::BadMagic);
    let mut r = &b"GET / HTTP/1.1\r\n"[..];
    assert_eq!(tenso::read_from(&mut r).unwrap_err().kind(), ErrorKind::BadMagic);
}

/// A v4 f32 header claiming `dims`, with nothing after it.
fn hostile_header(dims: &[u32]) -> Vec<u8> {
    let mut h = b"TNSO\x04\x01\x00\x01".to_vec();
    h.push(dims.len() as u8);
    h.push(0);
    for d in dims {
        h.extend_from_slice(&d.to_le_bytes());
    }
    h
}

#[test]
fn hostile_headers_do_not_make_readers_buffer_gigabytes() {
    // 30000 x 30000 float32 = 3.6 GB claimed, 18 bytes sent.
    let h = hostile_header(&[30000, 30000]);
    match tenso::packet_length(&h).unwrap() {
        tenso::PacketLength::Incomplete { needed } => assert!(needed > 3_000_000_000),
        other => panic!("{other:?}"),
    }
    // The decoder asks for the packet's buffer once the header fixed its length; the Rust
    // allocator hands it out zeroed, i.e. as untouched pages: memory is committed only as
    // data arrives, so the claimed 3.6 GB never become resident (peak RSS, VmHWM, stays far
    // below it; other tests of this binary use tens of MB at most).
    fn peak_rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
    let before = peak_rss_kib();
    let mut r = &h[..];
    assert_eq!(tenso::read_from(&mut r).unwrap_err().kind(), ErrorKind::Truncated);
    // Saturating: the kernel's RSS counters are per-CPU estimates, so VmHWM read twice can
    // go down by a few pages when nothing grew.
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < (1 << 20), "peak RSS grew by {grown} KiB");
    // With a limit, both readers refuse before reading the body.
    let limited = DecodeOptions::new().max_packet_bytes(1 << 20);
    let mut r = &h[..];
    assert_eq!(limited.read_from(&mut r).unwrap_err().kind(), ErrorKind::Limit);
    let (a, b) = UnixStream::pair().unwrap();
    (&a).write_all(&h).unwrap();
    assert_eq!(limited.read_fd(&b).unwrap_err().kind(), ErrorKind::Limit);
    // Element limits apply to the header before any allocation, too.
    let (a, b) = UnixStream::pair().unwrap();
    (&a).write_all(&h).unwrap();
    drop(a);
    let e = DecodeOptions::new().max_elements(1000).read_fd(&b).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooManyElements);
}

#[test]
fn writer_errors_are_io_errors() {
    let (a, b) = UnixStream::pair().unwrap();
    drop(b);
    let big = vec![0u8; 1 << 20];
    let e = tenso::write_fd(&a, &Tensor::from_slice(&big)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert_eq!(e.status_name(), "TENSO_E_IO");

    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "gone"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let e = tenso::write_to(&mut Broken, &Tensor::from_slice(&[1u8])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    let src = std::error::Error::source(&e).unwrap().downcast_ref::<std::io::Error>().unwrap();
    assert_eq!(src.kind(), std::io::ErrorKind::BrokenPipe);
    let back: std::io::Error = e.into();
    assert_eq!(back.kind(), std::io::ErrorKind::BrokenPipe);

    struct Failing;
    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset"))
        }
    }
    assert_eq!(tenso::read_from(&mut Failing).unwrap_err().kind(), ErrorKind::Io);
    let mut it = Packets::new(Failing);
    assert_eq!(it.next().unwrap().unwrap_err().kind(), ErrorKind::Io);
    assert!(it.next().is_none(), "the iterator stops after an error");
}

#[test]
fn large_tensor_over_a_socket() {
    let data: Vec<u32> = (0..4_000_000).collect(); // 16 MB
    let (a, b) = UnixStream::pair().unwrap();
    let writer = std::thread::spawn(move || {
        let n = tenso::write_fd(&a, &Tensor::new(&data, &[2000, 2000]).unwrap()).unwrap();
        (n, data)
    });
    let p = tenso::read_fd(&b).unwrap().unwrap();
    let (n, data) = writer.join().unwrap();
    assert_eq!(n, p.packet_size());
    assert_eq!(p.as_slice::<u32>().unwrap(), &data[..]);
    // A Packet is 'static and Send: hand it to another thread.
    let sum =
        std::thread::spawn(move || p.as_slice::<u32>().unwrap().iter().map(|&x| x as u64).sum::<u64>()).join().unwrap();
    assert_eq!(sum, (0..4_000_000u64).sum::<u64>());
}
