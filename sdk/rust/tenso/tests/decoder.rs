//! The hostile-stream suite of issue 14 through the Rust readers, which are byte movers over
//! libtenso's stream decoder: truncation at every byte of the golden packets, huge claimed
//! lengths, a sender delivering one byte at a time, a quiet peer and read timeouts.
mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use tenso::{DecodeOptions, Decoder, ErrorKind, Packets, Tensor};

/// The golden packets (every kind, option and wire version of tests/vectors).
fn golden() -> Vec<(String, Vec<u8>)> {
    common::cases().into_iter().map(|c| (c.name, std::fs::read(&c.file).unwrap())).collect()
}

/// A reader that hands out at most one byte per read.
struct OneByte<'a>(&'a [u8]);
impl Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.0.len()).min(1);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn golden_packets_truncated_at_every_byte() {
    let cases = golden();
    assert!(cases.len() >= 20, "{} golden packets", cases.len());
    for (name, p) in &cases {
        let whole = tenso::loads(p).unwrap();
        // Every byte of every packet up to 5 kB (95 of the 97); in the two larger ones (a
        // 70 kB dense body, a 255-entry bundle) the first and last 1 kB and every 97th byte
        // between, which keeps this debug-build test to seconds.
        let n = p.len();
        let cuts = (0..n).filter(|&c| n <= 5000 || c < 1024 || c + 1024 >= n || c % 97 == 0);
        for cut in cuts {
            let mut r = &p[..cut];
            match tenso::read_from(&mut r) {
                Ok(None) => assert_eq!(cut, 0, "{name}: clean end only before the first byte"),
                Ok(Some(_)) => panic!("{name}: a packet from {cut} of {} bytes", p.len()),
                Err(e) => assert_eq!(e.kind(), ErrorKind::Truncated, "{name} cut {cut}: {e}"),
            }
            let mut d = Decoder::new(&DecodeOptions::new()).unwrap();
            let (used, packet) = d.feed(&p[..cut]).unwrap();
            assert!(used == cut && packet.is_none(), "{name} cut {cut}");
            assert_eq!(d.is_idle(), cut == 0, "{name} cut {cut}");
            if cut > 0 {
                assert!(d.needed() > 0);
                assert_eq!(d.finish().unwrap_err().kind(), ErrorKind::Truncated, "{name} cut {cut}");
                assert_eq!(
                    tenso::Packet::from_bytes(&p[..cut], &DecodeOptions::new()).unwrap_err().kind(),
                    ErrorKind::Truncated
                );
            }
        }
        // Whole, one byte per read and one byte per feed: the same packet, nothing consumed
        // past it.
        let mut stream = p.clone();
        stream.extend_from_slice(b"NEXT");
        let mut r = OneByte(&stream);
        let got = tenso::read_from(&mut r).unwrap().unwrap();
        assert_eq!(r.0, b"NEXT", "{name}: read past the packet");
        assert_eq!(
            (got.kind(), got.shape(), got.packet_size()),
            (whole.kind(), whole.shape(), p.len() as u64),
            "{name}"
        );
        assert_eq!(got.bytes(), whole.as_ref().bytes(), "{name}: body");
        let mut d = Decoder::new(&DecodeOptions::new()).unwrap();
        let mut packets = Vec::new();
        for (i, b) in stream.iter().enumerate().take(p.len()) {
            let (used, packet) = d.feed(std::slice::from_ref(b)).unwrap();
            assert_eq!(used, 1);
            assert_eq!(packet.is_some(), i + 1 == p.len(), "{name}: packet at byte {i}");
            packets.extend(packet);
        }
        assert!(d.is_idle());
        d.finish().unwrap();
        assert_eq!(packets[0].bytes(), whole.as_ref().bytes(), "{name}");
        // Two packets in one feed: the decoder stops at the first one's end.
        let two = [p.as_slice(), p.as_slice()].concat();
        let mut d = Decoder::new(&DecodeOptions::new()).unwrap();
        let (used, first) = d.feed(&two).unwrap();
        assert!(used == p.len() && first.is_some(), "{name}");
        let (used, second) = d.feed(&two[used..]).unwrap();
        assert!(used == p.len() && second.is_some(), "{name}");
    }
}

#[test]
fn huge_claimed_lengths_are_refused_before_allocating() {
    // A float32 header claiming 30000 x 30000 (3.6 GB), nothing after it.
    let mut h = b"TNSO\x04\x01\x00\x01\x02\x00".to_vec();
    for d in [30000u32, 30000] {
        h.extend_from_slice(&d.to_le_bytes());
    }
    for limited in [DecodeOptions::new().max_packet_bytes(1 << 20), DecodeOptions::new().max_decoded_bytes(1 << 20)] {
        assert_eq!(limited.read_from(&mut &h[..]).unwrap_err().kind(), ErrorKind::Limit);
        let mut d = Decoder::new(&limited).unwrap();
        assert_eq!(d.feed(&h).unwrap_err().kind(), ErrorKind::Limit);
        d.reset();
        assert!(d.is_idle());
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&h).unwrap();
        assert_eq!(limited.read_fd(&b).unwrap_err().kind(), ErrorKind::Limit);
    }
    assert_eq!(
        DecodeOptions::new().max_elements(1000).read_from(&mut &h[..]).unwrap_err().kind(),
        ErrorKind::TooManyElements
    );
    // More elements than the protocol allows (10^9): refused with the default options.
    let mut h = b"TNSO\x04\x01\x00\x01\x02\x00".to_vec();
    for d in [u32::MAX, u32::MAX] {
        h.extend_from_slice(&d.to_le_bytes());
    }
    assert_eq!(tenso::read_from(&mut &h[..]).unwrap_err().kind(), ErrorKind::TooManyElements);
}

#[test]
fn a_sender_delivering_one_byte_at_a_time() {
    let data: Vec<f64> = (0..300).map(|i| i as f64 * 0.25).collect();
    let packet = tenso::dumps(&Tensor::new(&data, &[20, 15]).unwrap()).unwrap();
    let bundle = tenso::dumps(
        &tenso::Bundle::new()
            .with("a", &Tensor::from_slice(&[1u8, 2, 3]))
            .unwrap()
            .with("s", &tenso::Value::strings(["x", "yz"]).unwrap())
            .unwrap(),
    )
    .unwrap();
    let stream = [packet.as_slice(), bundle.as_slice(), packet.as_slice()].concat();
    let (a, b) = UnixStream::pair().unwrap();
    let sender = std::thread::spawn(move || {
        for byte in &stream {
            (&a).write_all(std::slice::from_ref(byte)).unwrap();
        }
    });
    let got: Vec<tenso::Packet> = Packets::new(&b).collect::<tenso::Result<_>>().unwrap();
    sender.join().unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].as_slice::<f64>().unwrap(), &data[..]);
    assert_eq!(got[1].get("a").unwrap().to_vec::<u8>().unwrap(), [1, 2, 3]);
    assert_eq!(got[2].shape(), &[20, 15]);
    // The same through the fd reader.
    let (a, b) = UnixStream::pair().unwrap();
    let bytes = packet.clone();
    let sender = std::thread::spawn(move || {
        for byte in &bytes {
            (&a).write_all(std::slice::from_ref(byte)).unwrap();
        }
    });
    let p = tenso::read_fd(&b).unwrap().unwrap();
    sender.join().unwrap();
    assert_eq!(p.as_slice::<f64>().unwrap(), &data[..]);
    assert!(tenso::read_fd(&b).unwrap().is_none(), "clean end after the sender hung up");
}

#[test]
fn a_quiet_peer_times_out_and_the_stream_goes_on() {
    let data = [7u16; 40];
    let packet = tenso::dumps(&Tensor::from_slice(&data)).unwrap();
    // A Read with a timeout (SO_RCVTIMEO): Timeout, io::ErrorKind::TimedOut when converted.
    let (a, b) = UnixStream::pair().unwrap();
    b.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    (&a).write_all(&packet[..4]).unwrap();
    let e = tenso::read_from(&mut &b).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert_eq!(e.status_name(), "TENSO_E_TIMEOUT");
    assert_eq!(std::io::Error::from(e).kind(), std::io::ErrorKind::TimedOut);

    // Packets keeps the partial packet across a timeout: the rest completes it.
    let (a, b) = UnixStream::pair().unwrap();
    b.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    (&a).write_all(&packet[..4]).unwrap();
    let mut it = Packets::new(&b);
    assert_eq!(it.next().unwrap().unwrap_err().kind(), ErrorKind::Timeout);
    (&a).write_all(&packet[4..]).unwrap();
    assert_eq!(it.next().unwrap().unwrap().as_slice::<u16>().unwrap(), &data);
    drop(a);
    assert!(it.next().is_none());

    // The fd readers: the socket's SO_RCVTIMEO, or the options' deadline on any fd.
    let (a, b) = UnixStream::pair().unwrap();
    (&a).write_all(&packet[..4]).unwrap();
    let deadline = DecodeOptions::new().timeout(Some(Duration::from_millis(30)));
    assert_eq!(deadline.read_fd(&b).unwrap_err().kind(), ErrorKind::Timeout);
    let (a, b) = UnixStream::pair().unwrap();
    b.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    (&a).write_all(&packet[..4]).unwrap();
    assert_eq!(tenso::read_fd(&b).unwrap_err().kind(), ErrorKind::Timeout);
    // A decoder keeps the partial packet across a timeout of its fd reader too.
    let (a, b) = UnixStream::pair().unwrap();
    (&a).write_all(&packet[..4]).unwrap();
    let mut d = Decoder::new(&deadline).unwrap();
    assert_eq!(d.read_fd(&b).unwrap_err().kind(), ErrorKind::Timeout);
    (&a).write_all(&packet[4..]).unwrap();
    assert_eq!(d.read_fd(&b).unwrap().unwrap().as_slice::<u16>().unwrap(), &data);
}

#[test]
fn decoded_packets_outlive_their_decoder_in_aligned_rust_memory() {
    let x: Vec<u64> = (0..1000).collect();
    let bytes = tenso::Options::new().alignment(4096).dumps(&Tensor::from_slice(&x)).unwrap();
    let packets: Vec<tenso::Packet> = {
        let mut d = Decoder::new(&DecodeOptions::new()).unwrap();
        (0..3).map(|_| d.feed(&bytes).unwrap().1.unwrap()).collect()
    };
    for p in &packets {
        assert!(p.owns_data());
        assert_eq!(p.bytes().as_ptr() as usize % 4096, 0, "the body's own alignment, in memory");
        assert_eq!(p.as_slice::<u64>().unwrap(), &x[..]);
    }
    // A decode error needs a reset; the decoder then goes on.
    let mut d = Decoder::new(&DecodeOptions::new()).unwrap();
    assert_eq!(d.feed(b"JUNKJUNKJUNK").unwrap_err().kind(), ErrorKind::BadMagic);
    d.reset();
    assert_eq!(d.feed(&bytes).unwrap().1.unwrap().as_slice::<u64>().unwrap(), &x[..]);
}
