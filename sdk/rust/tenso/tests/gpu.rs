//! tenso::gpu on libtenso's host backend (an emulated device in host memory running the same
//! transfer code as CUDA): packets to the device from memory, fds and files, byte-exact back
//! out, bundles, DLPack both ways, IPC references, device dequantize, the pinned pool, exact
//! error kinds; and the CUDA backend answering GpuUnavailable on a machine without a GPU (a
//! child process of this test binary).
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use tenso::gpu::{self, Backend, DeviceTensor, GpuOptions, TransferPath};
use tenso::{Bundle, Dtype, ErrorKind, Options, Scheme, Tensor};

fn host() {
    gpu::select_backend(Backend::Host).unwrap();
}

fn floats(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.75 - 3.0).collect()
}

fn opts() -> GpuOptions {
    GpuOptions::new()
}

#[test]
fn host_backend_discovery() {
    host();
    gpu::available().unwrap();
    assert_eq!(gpu::backend(), Some(Backend::Host));
    assert_eq!(Backend::Host.name(), "host");
    assert!(gpu::device_count().unwrap() >= 1);
    let info = gpu::device_info(0).unwrap();
    assert_eq!(info.device, 0);
    assert_eq!(info.backend, Some(Backend::Host));
    assert!(info.total_memory > 0);
    assert!(!info.gds);
    // A different backend after first use is refused; the same one is accepted.
    assert_eq!(gpu::select_backend(Backend::Cuda).unwrap_err().kind(), ErrorKind::InvalidArgument);
    gpu::select_backend(Backend::Host).unwrap();
}

#[test]
fn dense_packet_roundtrip_is_byte_exact() {
    host();
    let x = floats(40 * 33);
    for enc in [Options::new(), Options::new().integrity(true), Options::new().compress(true)] {
        let packet = enc.dumps(&Tensor::new(&x, &[40, 33]).unwrap()).unwrap();
        let v = gpu::loads(&packet, &opts()).unwrap();
        assert_eq!(v.path(), Some(TransferPath::Staged));
        assert!(v.is_empty());
        let t = v.into_tensor().unwrap();
        assert_eq!(
            (t.dtype(), t.shape(), t.nbytes(), t.device()),
            (Dtype::Float32, &[40usize, 33][..], 40 * 33 * 4, 0)
        );
        assert_eq!(t.download::<f32>().unwrap(), x);
        assert_eq!(t.download::<i32>().unwrap_err().kind(), ErrorKind::BadDtype);
        let back = gpu::dumps(&t, &enc, &opts()).unwrap();
        assert_eq!(&back[..], &packet[..]);
    }
}

#[test]
fn small_chunks_and_deep_staging() {
    host();
    let x: Vec<f64> = (0..50_000).map(|i| i as f64 / 7.0).collect();
    let packet = tenso::dumps(&Tensor::from_slice(&x)).unwrap();
    let o = opts().chunk_bytes(4096).staging_buffers(3);
    let t = gpu::loads(&packet, &o).unwrap().into_tensor().unwrap();
    assert_eq!(t.download::<f64>().unwrap(), x);
}

#[test]
fn bundles_go_member_by_member() {
    host();
    let w = floats(6);
    let b = [1i16, -2, 3];
    let bundle = Bundle::new()
        .with("w", &Tensor::new(&w, &[2, 3]).unwrap())
        .unwrap()
        .with("b", &Tensor::from_slice(&b))
        .unwrap();
    let packet = tenso::dumps(&bundle).unwrap();
    let v = gpu::loads(&packet, &opts()).unwrap();
    assert!(v.tensor().is_none());
    assert_eq!(v.len(), 2);
    let keys: Vec<&[u8]> = v.entries().map(|(k, _)| k).collect();
    assert_eq!(keys, [&b"w"[..], &b"b"[..]]);
    assert_eq!(v.get("w").unwrap().tensor().unwrap().download::<f32>().unwrap(), w);
    assert_eq!(v.get("b").unwrap().tensor().unwrap().download::<i16>().unwrap(), b);
    assert!(v.get("nope").is_none());
    assert_eq!(v.into_tensor().unwrap_err().kind(), ErrorKind::UnsupportedKind);
}

#[test]
fn read_fd_and_write_fd_over_sockets_and_files() {
    host();
    let x = floats(1000);
    let packet = tenso::dumps(&Tensor::from_slice(&x)).unwrap();
    let (mut a, b) = UnixStream::pair().unwrap();
    let p2 = packet.clone();
    let writer = std::thread::spawn(move || {
        a.write_all(&p2).unwrap();
        a.write_all(&p2[..100]).unwrap(); // then a truncated packet
    });
    let t = gpu::read_fd(&b, &opts()).unwrap().unwrap().into_tensor().unwrap();
    writer.join().unwrap();
    assert_eq!(t.download::<f32>().unwrap(), x);
    let err = gpu::read_fd(&b, &opts()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Truncated | ErrorKind::EndOfStream), "{err}");

    let dir = std::env::temp_dir().join(format!("tenso-rs-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.tenso");
    let f = std::fs::File::create(&path).unwrap();
    let n = gpu::write_fd(&f, &t, &Options::new().integrity(true), &opts()).unwrap();
    drop(f);
    let written = std::fs::read(&path).unwrap();
    assert_eq!(n as usize, written.len());
    assert_eq!(written, Options::new().integrity(true).dumps(&Tensor::from_slice(&x)).unwrap());
    let v = gpu::load_file(&path, &opts()).unwrap();
    assert_eq!(v.path(), Some(TransferPath::Staged));
    assert_eq!(v.tensor().unwrap().download::<f32>().unwrap(), x);
    let f = std::fs::File::open(&path).unwrap();
    assert!(gpu::read_fd(&f, &opts()).unwrap().is_some());
    assert!(gpu::read_fd(&f, &opts()).unwrap().is_none()); // clean end
    assert_eq!(gpu::load_file(dir.join("missing"), &opts()).unwrap_err().kind(), ErrorKind::NotFound);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hostile_packets_fail_with_exact_kinds() {
    host();
    let packet = Options::new().integrity(true).dumps(&Tensor::from_slice(&floats(64))).unwrap();
    let mut bad = packet.clone();
    let n = bad.len();
    bad[n - 12] ^= 0x40;
    assert_eq!(gpu::loads(&bad, &opts()).unwrap_err().kind(), ErrorKind::Checksum);
    assert_eq!(gpu::loads(&packet[..packet.len() - 1], &opts()).unwrap_err().kind(), ErrorKind::Truncated);
    assert_eq!(gpu::loads(b"NOPE0000", &opts()).unwrap_err().kind(), ErrorKind::BadMagic);
    let limited = opts().decode(tenso::DecodeOptions::new().max_packet_bytes(64));
    assert_eq!(gpu::loads(&packet, &limited).unwrap_err().kind(), ErrorKind::Limit);
}

#[test]
fn loads_into_the_callers_memory() {
    host();
    let x = [5u32, 6, 7, 8];
    let packet = tenso::dumps(&Tensor::from_slice(&x)).unwrap();
    let dst = DeviceTensor::new(0, Dtype::Uint32, &[4]).unwrap();
    // SAFETY: 16 bytes of device memory we own and nothing else uses.
    let n = unsafe { gpu::loads_into(dst.data_ptr(), 16, &packet, &opts()) }.unwrap();
    assert_eq!(n, 16);
    assert_eq!(dst.download::<u32>().unwrap(), x);
    // SAFETY: as above; too small, nothing written.
    let err = unsafe { gpu::loads_into(dst.data_ptr(), 8, &packet, &opts()) }.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BufferTooSmall);
}

#[test]
fn dlpack_both_ways_without_copies() {
    host();
    let t = DeviceTensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], 0).unwrap();
    let dl = t.to_dlpack().unwrap();
    assert_eq!(dl.device().device_type, tenso::sys::kDLCPU); // host backend
    assert_eq!(dl.shape(), &[2, 2]);
    assert_eq!(dl.data_ptr(), t.data_ptr() as *const _);
    let imported = DeviceTensor::from_dlpack(dl).unwrap();
    assert_eq!(imported.data_ptr(), t.data_ptr());
    drop(t);
    assert_eq!(imported.download::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn wrap_borrows_and_releases_once() {
    host();
    let data: Arc<Vec<u64>> = Arc::new((0..12).collect());
    let released = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (keep, count) = (data.clone(), released.clone());
    // SAFETY: host backend: host memory kept alive by the closure until release runs.
    let t = unsafe {
        DeviceTensor::wrap(
            data.as_ptr() as *mut _,
            0,
            Dtype::Uint64,
            &[3, 4],
            Some(Box::new(move |_| {
                drop(keep);
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })),
        )
    }
    .unwrap();
    assert_eq!(t.download::<u64>().unwrap(), *data);
    let packet = gpu::dumps(&t, &Options::new(), &opts()).unwrap();
    assert_eq!(&packet[..], &tenso::dumps(&Tensor::new(&data[..], &[3, 4]).unwrap()).unwrap()[..]);
    assert_eq!(released.load(std::sync::atomic::Ordering::SeqCst), 0);
    drop(t);
    assert_eq!(released.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(Arc::strong_count(&data), 1);
}

#[test]
fn ipc_reference_open_and_read_as_a_packet() {
    host();
    let x = floats(64);
    let t = DeviceTensor::from_slice(&x, &[8, 8], 0).unwrap();
    let r = t.ipc_export().unwrap();
    assert_eq!(r.len(), 106);
    let view = tenso::loads(&r).unwrap();
    let opened = DeviceTensor::ipc_open(&view, Dtype::Float32, &[8, 8]).unwrap();
    assert_eq!(opened.download::<f32>().unwrap(), x);
    assert_eq!(DeviceTensor::ipc_open(&view, Dtype::Float32, &[8, 9]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let v = gpu::loads(&r, &opts()).unwrap();
    assert_eq!(v.path(), Some(TransferPath::Ipc));
    let raw = v.tensor().unwrap();
    assert_eq!(raw.dtype(), Dtype::Uint8);
    let bytes = raw.download::<u8>().unwrap();
    let want: Vec<u8> = x.iter().flat_map(|f| f.to_le_bytes()).collect();
    assert_eq!(bytes, want);
}

#[test]
fn device_dequantize_is_bit_exact() {
    host();
    let x: Vec<f32> = (0..96).map(|i| ((i * 37 % 101) as f32 - 50.0) / 13.0).collect();
    let t = Tensor::new(&x, &[6, 16]).unwrap();
    for qd in [Dtype::Qint8, Dtype::Quint8, Dtype::Qint4, Dtype::Quint4] {
        for scheme in [Scheme::PerTensor, Scheme::PerChannel { axis: 0 }, Scheme::PerGroup { group_size: 8 }] {
            let q = tenso::quantize(&t, qd, scheme).unwrap();
            let packet = tenso::dumps(&q).unwrap();
            let view = tenso::loads(&packet).unwrap();
            let want = view.quantized().unwrap().dequantize().unwrap();
            let got = gpu::dequantize(&view, Dtype::Float32, &opts()).unwrap().download::<f32>().unwrap();
            assert_eq!(
                got.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
            );
            let via = gpu::loads(&packet, &opts().dequantize_to(Dtype::Float32)).unwrap().into_tensor().unwrap();
            assert_eq!(via.download::<f32>().unwrap(), want);
            let half = gpu::dequantize(&view, Dtype::Float16, &opts()).unwrap().download::<tenso::F16>().unwrap();
            let want_half: Vec<tenso::F16> = want.iter().map(|&f| tenso::F16::from_f32(f)).collect();
            assert_eq!(half, want_half);
            assert_eq!(gpu::loads(&packet, &opts()).unwrap_err().kind(), ErrorKind::UnsupportedKind);
        }
    }
}

#[test]
fn pinned_pool_is_reused() {
    host();
    gpu::set_pool_limit(64 << 20).unwrap();
    let packet = tenso::dumps(&Tensor::from_slice(&floats(1 << 16))).unwrap();
    gpu::loads(&packet, &opts()).unwrap();
    let before = gpu::pool_stats().unwrap();
    gpu::loads(&packet, &opts()).unwrap();
    let after = gpu::pool_stats().unwrap();
    assert!(after.hits > before.hits);
    assert_eq!(after.limit_bytes, 64 << 20);
}

#[test]
fn streams_order_the_copies() {
    host();
    let s = gpu::Stream::new(0).unwrap();
    let x = floats(4096);
    let packet = tenso::dumps(&Tensor::from_slice(&x)).unwrap();
    // SAFETY: a live stream of device 0, synchronized before reading.
    let o = unsafe { opts().stream(s.as_ptr()) };
    let t = gpu::loads(&packet, &o).unwrap().into_tensor().unwrap();
    s.synchronize().unwrap();
    assert_eq!(t.download::<f32>().unwrap(), x);
}

#[test]
fn threads_share_tensors() {
    host();
    let t = Arc::new(DeviceTensor::from_slice(&floats(256), &[256], 0).unwrap());
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || gpu::dumps(&t, &Options::new(), &GpuOptions::new()).unwrap().to_vec())
        })
        .collect();
    let want = tenso::dumps(&Tensor::from_slice(&floats(256))).unwrap();
    for h in hs {
        assert_eq!(h.join().unwrap(), want);
    }
}

/// Run by `cuda_backend_reports_unavailable` in a child process with TENSO_GPU_BACKEND=cuda.
#[test]
#[ignore = "run in a child process by cuda_backend_reports_unavailable"]
fn cuda_child() {
    let packet = tenso::dumps(&Tensor::from_slice(&[1.0f32])).unwrap();
    match gpu::loads(&packet, &opts()) {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::GpuUnavailable);
            assert!(!e.message().is_empty());
            assert_eq!(gpu::available().unwrap_err().kind(), ErrorKind::GpuUnavailable);
            assert_eq!(gpu::backend(), Some(Backend::Cuda));
            println!("CUDA-UNAVAILABLE: {}", e.message());
        }
        Ok(_) => println!("CUDA-AVAILABLE"),
    }
}

#[test]
fn cuda_backend_reports_unavailable() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "cuda_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("TENSO_GPU_BACKEND", "cuda")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    if stdout.contains("CUDA-AVAILABLE") {
        return; // a machine with a GPU: nothing to check here
    }
    assert!(stdout.contains("CUDA-UNAVAILABLE: "), "{stdout}");
}
