//! Shared memory through the safe API: segments (Shm) and the cache (Cache), with the exact
//! error kinds of shm.h. Names carry the process id and the test's name, so parallel tests
//! and concurrent runs never share a segment.
use std::sync::Arc;
use std::time::Duration;

use tenso::{Cache, CacheOptions, ErrorKind, IfExists, Options, Shm, ShmOpenOptions, Tensor};

/// A unique segment name, unlinked (if still there) on drop.
struct Name(String, bool);

impl Name {
    fn shm(tag: &str) -> Name {
        Name(format!("/tenso-rs-{tag}-{}", std::process::id()), false)
    }
    fn cache(tag: &str) -> Name {
        Name(format!("/tenso-rs-{tag}-{}", std::process::id()), true)
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        let _ = if self.1 { Cache::unlink(&self.0) } else { Shm::unlink(&self.0) };
    }
}

fn floats(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 + seed).collect()
}

// ---- segments

// Another uid's objects are refused unless opted in (checked in the C tests, which run as two
// uids); here the options reach libtenso and an own segment or pool opens either way.
#[test]
fn any_owner_opens_own_objects() {
    let name = Name::shm("shm-anyowner");
    let _w = Shm::create(&name, 4096).unwrap();
    for any in [false, true] {
        let mut s = ShmOpenOptions::new().writable(true).any_owner(any).open(&name).unwrap();
        assert!(s.is_writable());
        s.put(&Tensor::from_slice(&[1u8, 2, 3])).unwrap();
        assert_eq!(s.get().unwrap().as_slice::<u8>().unwrap(), &[1, 2, 3]);
        assert!(!ShmOpenOptions::new().any_owner(any).open(&name).unwrap().is_writable());
    }
    let pool = Name::cache("cache-anyowner");
    let _c = CacheOptions::new().size(1 << 20).if_exists(IfExists::Replace).any_owner(true).create(&pool).unwrap();
    for any in [false, true] {
        let c = CacheOptions::new().any_owner(any).if_exists(IfExists::Fail).open(&pool).unwrap();
        c.put("k", &Tensor::from_slice(&[4u8]), None).unwrap();
    }
}

#[test]
fn shm_round_trip_zero_copy_and_exact_errors() {
    let name = Name::shm("shm-rt");
    let w = floats(1000, 1.0);
    let t = Tensor::new(&w, &[10, 100]).unwrap();
    let shm = Shm::create_for(&name, &t, &Options::new().integrity(true), IfExists::Fail).unwrap();
    assert!(shm.is_writable());
    let expected = Options::new().integrity(true).dumps(&t).unwrap();
    assert_eq!(shm.packet_len(), Some(expected.len() as u64));
    assert_eq!(&shm.bytes()[..expected.len()], &expected[..], "create_for writes the packet at byte 0");

    let reader = Shm::open(&name).unwrap();
    assert!(!reader.is_writable());
    assert_eq!(reader.name(), &*name);
    assert!(reader.len() >= expected.len() as u64);
    let v = reader.get().unwrap();
    assert_eq!(v.shape(), &[10, 100]);
    let s = v.as_slice::<f32>().unwrap();
    assert_eq!(s, &w[..]);
    let mapped = reader.bytes().as_ptr_range();
    assert!(mapped.contains(&(s.as_ptr() as *const u8)), "the view points into the mapping");

    assert_eq!(Shm::create(&name, 64).unwrap_err().kind(), ErrorKind::Exists);
    assert_eq!(Shm::create_for(&name, &t, &Options::new(), IfExists::Fail).unwrap_err().kind(), ErrorKind::Exists);
    let mut ro = Shm::open(&name).unwrap();
    assert_eq!(ro.put(&t).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(ro.write_at(0, &[1]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // SAFETY: refused before any slice exists.
    assert_eq!(unsafe { ro.bytes_mut() }.unwrap_err().kind(), ErrorKind::InvalidArgument);
    Shm::unlink(&name).unwrap();
    assert_eq!(Shm::open(&name).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(Shm::unlink(&name).unwrap_err().kind(), ErrorKind::NotFound);
    // Unlinked: the mapping and the view are still valid.
    assert_eq!(v.as_slice::<f32>().unwrap()[999], w[999]);
}

#[test]
fn shm_put_in_place_too_small_and_replace() {
    let name = Name::shm("shm-put");
    let mut shm = Shm::create(&name, 4096).unwrap();
    assert_eq!(shm.len(), 4096);
    assert!(shm.bytes().iter().all(|&b| b == 0), "created zero-filled");
    assert_eq!(shm.get().unwrap_err().kind(), ErrorKind::BadMagic, "zeros are not a packet");

    let big = floats(2000, 0.0); // 8000 bytes: does not fit
    let err = shm.put(&Tensor::from_slice(&big)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BufferTooSmall);
    let needed = tenso::dumps(&Tensor::from_slice(&big)).unwrap().len() as u64;
    assert_eq!(err.needed(), Some(needed));
    assert!(shm.bytes().iter().all(|&b| b == 0), "a failed put leaves the segment unchanged");

    // A large packet, then a smaller compressed one over it: the reader frames the new packet
    // exactly, whatever stale bytes follow.
    let a = vec![7u8; 3000];
    let n = shm.put(&Tensor::from_slice(&a)).unwrap();
    assert_eq!(shm.packet_len(), Some(n));
    let b = vec![1u16; 1000];
    let n2 = shm.put_with(&Tensor::from_slice(&b), &Options::new().compress(true)).unwrap();
    assert!(n2 < n);
    let other = Shm::open(&name).unwrap();
    let v = other.get().unwrap();
    assert_eq!(v.to_vec::<u16>().unwrap(), b);
    assert!(v.owns_data(), "LZ4 bodies are decompressed into memory the view owns");

    // Write through the mapping directly: another handle sees the bytes.
    let mut w = Shm::open_writable(&name).unwrap();
    let p = tenso::dumps(&Tensor::from_slice(&[42i32])).unwrap();
    w.write_at(0, &p).unwrap();
    assert_eq!(other.get().unwrap().to_vec::<i32>().unwrap(), [42]);

    let fresh = Shm::create_with(&name, 128, IfExists::Replace).unwrap();
    assert_eq!(fresh.len(), 128);
    assert!(fresh.bytes().iter().all(|&b| b == 0));
}

#[test]
fn shm_names_and_sizes_are_checked() {
    assert_eq!(Shm::create("/a/b", 64).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Shm::create("bad\0name", 64).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(Shm::create(&"x".repeat(300), 64).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let name = Name::shm("shm-zero");
    assert_eq!(Shm::create(&name, 0).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

// ---- the cache

fn small_cache(name: &str, size: u64) -> Cache {
    CacheOptions::new().size(size).if_exists(IfExists::Replace).create(name).unwrap()
}

#[test]
fn cache_round_trip_and_bookkeeping() {
    let name = Name::cache("cache-rt");
    let cache = small_cache(&name, 8 << 20);
    assert_eq!(cache.name(), &*name);
    let w = floats(4096, 2.0);
    let n = cache.put("w", &Tensor::new(&w, &[64, 64]).unwrap(), None).unwrap();
    assert_eq!(n, tenso::dumps(&Tensor::new(&w, &[64, 64]).unwrap()).unwrap().len() as u64);
    cache.put("s", &tenso::Value::strings(["a", "bc"]).unwrap(), Some(Duration::from_secs(3600))).unwrap();

    assert!(cache.get("missing").unwrap().is_none());
    assert!(!cache.delete("missing").unwrap());
    assert!(cache.info("missing").unwrap().is_none());
    assert!(!cache.contains("missing").unwrap());

    let v = cache.get("w").unwrap().unwrap();
    assert_eq!(v.as_slice::<f32>().unwrap(), &w[..]);
    assert_eq!(v.as_slice::<f32>().unwrap().as_ptr() as usize % 64, 0, "bodies sit 64-aligned in the pool");
    let info = cache.info("w").unwrap().unwrap();
    assert_eq!(info.pins, 1);
    assert_eq!(info.ttl, None);
    assert_eq!(info.packet.shape(), &[64, 64]);
    assert!(info.alloc_bytes >= n);
    let sinfo = cache.info("s").unwrap().unwrap();
    assert_eq!(sinfo.ttl, Some(Duration::from_secs(3600)));
    assert_eq!(sinfo.packet.kind(), tenso::Kind::String);
    drop(v);
    assert_eq!(cache.info("w").unwrap().unwrap().pins, 0);

    // "w" was used last: most recently used first.
    assert_eq!(cache.keys().unwrap(), ["w", "s"]);
    assert!(cache.contains("s").unwrap());
    let s = cache.stats().unwrap();
    assert_eq!((s.entries, s.hits, s.misses), (2, 1, 1));
    assert!((s.hit_rate() - 0.5).abs() < 1e-12);
    assert_eq!(s.clients, 1);

    // Replacing a key, then deleting and clearing.
    cache.put("w", &Tensor::from_slice(&[1u8, 2, 3]), None).unwrap();
    assert_eq!(cache.get("w").unwrap().unwrap().to_vec::<u8>().unwrap(), [1, 2, 3]);
    assert!(cache.delete("w").unwrap());
    assert!(!cache.contains("w").unwrap());
    cache.clear().unwrap();
    assert!(cache.keys().unwrap().is_empty());
    cache.check().unwrap();
}

#[test]
fn cache_exact_error_kinds() {
    let name = Name::cache("cache-err");
    let cache = small_cache(&name, 1 << 20);
    assert_eq!(CacheOptions::new().create(&name).unwrap_err().kind(), ErrorKind::Exists);
    let missing = Name::cache("cache-missing");
    assert_eq!(Cache::open(&missing).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(Cache::unlink(&missing).unwrap_err().kind(), ErrorKind::NotFound);

    let t = Tensor::from_slice(&[1u8]);
    assert_eq!(cache.put("", &t, None).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(cache.put(&"k".repeat(129), &t, None).unwrap_err().kind(), ErrorKind::InvalidArgument);
    cache.put(&"k".repeat(128), &t, None).unwrap();
    assert_eq!(cache.put("k", &t, Some(Duration::ZERO)).unwrap_err().kind(), ErrorKind::InvalidArgument);

    // A packet larger than the whole pool can never fit.
    let big = vec![0u8; 2 << 20];
    let err = cache.put("big", &Tensor::from_slice(&big), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Full, "{err}");
    assert!(!err.message().is_empty());

    // Pinned entries are never evicted: with every entry pinned, the next put is Full.
    let chunk = vec![1u8; 200 << 10];
    let mut pins = Vec::new();
    let mut full = None;
    for i in 0..16 {
        match cache.put(&format!("p{i}"), &Tensor::from_slice(&chunk), None) {
            Ok(_) => pins.push(cache.get(&format!("p{i}")).unwrap().unwrap()),
            Err(e) => {
                full = Some(e);
                break;
            }
        }
    }
    let e = full.expect("a 1 MiB pool cannot pin 16 x 200 KiB");
    assert_eq!(e.kind(), ErrorKind::Full);
    assert!(pins.len() >= 2);
    for p in &pins {
        assert_eq!(p.bytes(), &chunk[..], "pinned entries are intact");
    }
    drop(pins);
    // Unpinned now: eviction makes room.
    cache.put("after", &Tensor::from_slice(&chunk), None).unwrap();
    assert!(cache.stats().unwrap().evictions >= 1);
    cache.check().unwrap();

    // A segment that is not a cache.
    let plain = Name::shm("cache-foreign");
    let _seg = Shm::create(&plain, 1 << 16).unwrap();
    assert_eq!(Cache::open(&plain).unwrap_err().kind(), ErrorKind::Corrupt);
}

#[test]
fn pinned_views_survive_delete_clear_replace_and_close() {
    let name = Name::cache("cache-pin");
    let cache = small_cache(&name, 4 << 20);
    let a = floats(10_000, 3.0);
    cache.put("a", &Tensor::from_slice(&a), None).unwrap();
    let v1 = cache.get("a").unwrap().unwrap();
    assert!(cache.delete("a").unwrap());
    assert!(cache.get("a").unwrap().is_none(), "deleted keys are hidden at once");
    cache.put("a", &Tensor::from_slice(&[9u8; 10]), None).unwrap();
    let v2 = cache.get("a").unwrap().unwrap();
    cache.clear().unwrap();
    assert_eq!(cache.stats().unwrap().pinned_entries, 2);
    // Fill the pool with other data: the pinned bytes are never reused.
    let filler = vec![5u8; 100 << 10];
    for i in 0..60 {
        cache.put(&format!("f{i}"), &Tensor::from_slice(&filler), None).unwrap();
    }
    drop(cache); // detaching keeps the views valid and pinned
    assert_eq!(v1.as_slice::<f32>().unwrap(), &a[..]);
    assert_eq!(v2.to_vec::<u8>().unwrap(), [9u8; 10]);
    let other = Cache::open(&name).unwrap();
    other.check().unwrap();
    drop((v1, v2));
    let s = other.stats().unwrap();
    assert_eq!(s.pinned_entries, 0);
    other.check().unwrap();
}

/// No assertion races the clock: "present" only for an hour-long TTL, "expired" only after
/// sleeping four times a short one (the expiration count shows the short entry was stored).
#[test]
fn ttl_expires_entries() {
    let name = Name::cache("cache-ttl");
    let cache = small_cache(&name, 1 << 20);
    cache.put("short", &Tensor::from_slice(&[1u8]), Some(Duration::from_millis(50))).unwrap();
    cache.put("long", &Tensor::from_slice(&[2u8]), Some(Duration::from_secs(3600))).unwrap();
    assert!(cache.contains("long").unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert!(!cache.contains("short").unwrap());
    assert!(cache.get("short").unwrap().is_none());
    assert!(!cache.delete("short").unwrap(), "an expired key is absent");
    assert_eq!(cache.keys().unwrap(), ["long"]);
    assert_eq!(cache.stats().unwrap().expirations, 1);
    let info = cache.info("long").unwrap().unwrap();
    assert_eq!(info.ttl, Some(Duration::from_secs(3600)));
    assert!(info.age >= Duration::from_millis(200), "{:?}", info.age);
}

#[test]
fn many_threads_share_one_pool() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Cache>();
    assert_send_sync::<tenso::CacheView>();

    let name = Name::cache("cache-threads");
    let shared = Arc::new(small_cache(&name, 16 << 20));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let shared = Arc::clone(&shared);
            let name = name.0.clone();
            std::thread::spawn(move || {
                // Half the threads use the shared handle, half attach their own.
                let own = if t % 2 == 0 { None } else { Some(Cache::open(&name).unwrap()) };
                let cache: &Cache = own.as_ref().unwrap_or(&shared);
                let mut held = Vec::new();
                for i in 0..200u32 {
                    let data: Vec<u32> = (0..64).map(|j| t * 1_000_000 + i * 100 + j).collect();
                    let key = format!("t{t}/k{}", i % 20);
                    cache.put(&key, &Tensor::from_slice(&data), None).unwrap();
                    let v = cache.get(&key).unwrap().expect("just put, nobody else writes this key");
                    assert_eq!(v.to_vec::<u32>().unwrap(), data);
                    // A key every thread writes: whatever is read is one whole packet.
                    cache.put("shared", &Tensor::from_slice(&data), None).unwrap();
                    if let Some(s) = cache.get("shared").unwrap() {
                        let got = s.to_vec::<u32>().unwrap();
                        assert_eq!(got.len(), 64);
                        assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "torn read");
                        if i % 50 == 0 {
                            held.push(s); // a few pins held across other threads' puts
                        }
                    }
                }
                for s in &held {
                    let got = s.to_vec::<u32>().unwrap();
                    assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "a pinned entry changed");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    shared.check().unwrap();
    let s = shared.stats().unwrap();
    assert_eq!(s.entries, 4 * 20 + 1);
    assert_eq!(s.pinned_entries, 0);
    assert_eq!(s.clients, 1, "the threads' own handles detached");
}

/// A bool body in shared memory is never borrowed as `&[bool]`: another handle (here a second
/// mapping in this process, as another process would) can rewrite a checked byte into 7. The
/// copies are validated after copying.
#[test]
fn bool_views_of_shared_memory_are_copied_and_checked() {
    let name = Name::shm("bool");
    let flags = [true, false, true];
    let mut writer = Shm::create_for(&name, &Tensor::from_slice(&flags), &Options::new(), IfExists::Fail).unwrap();
    let reader = Shm::open(&name).unwrap();
    let view = reader.get().unwrap();
    assert_eq!(view.as_slice::<bool>().unwrap_err().kind(), ErrorKind::UnsupportedKind);
    assert_eq!(view.as_ref().as_slice::<bool>().unwrap_err().kind(), ErrorKind::UnsupportedKind);
    assert_eq!(view.to_vec::<bool>().unwrap(), flags);
    assert!(matches!(view.values::<bool>().unwrap(), std::borrow::Cow::Owned(v) if v == flags));

    let at = tenso::inspect(writer.bytes()).unwrap().body_offset() as usize;
    writer.write_at(at + 1, &[7]).unwrap();
    assert_eq!(view.bytes().unwrap()[1], 7, "the view sees the other handle's write");
    assert_eq!(view.to_vec::<bool>().unwrap_err().kind(), ErrorKind::Malformed);
    assert_eq!(view.values::<bool>().unwrap_err().kind(), ErrorKind::Malformed);
    assert_eq!(view.as_slice::<bool>().unwrap_err().kind(), ErrorKind::UnsupportedKind);
    assert_eq!(writer.write_at(writer.len() as usize, &[1]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(writer.write_at(usize::MAX, &[1]).unwrap_err().kind(), ErrorKind::InvalidArgument);
}
