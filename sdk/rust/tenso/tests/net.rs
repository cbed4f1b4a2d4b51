//! Nodes through the safe API over real sockets (127.0.0.1 and Unix sockets): push, pull,
//! threads sharing one Node, timeouts, cancellation, shutdown, and the exact error kinds of
//! net.h.
use std::sync::Arc;
use std::time::Duration;

use tenso::{AccessOp, Bundle, CancelToken, ErrorKind, Node, NodeOptions, Tensor};

fn dialer(plain: bool) -> Node {
    Node::new(&NodeOptions { no_listen: true, allow_plaintext: plain, ..Default::default() }).unwrap()
}

const LONG: Option<Duration> = Some(Duration::from_secs(60));

#[test]
fn push_and_pull_over_tls() {
    let rx = Node::new(&NodeOptions::default()).unwrap();
    let tx = dialer(false);
    let addr = rx.addr().unwrap();
    let id = rx.id().unwrap();
    assert_eq!(id.len(), 64);
    assert!(addr.starts_with(&format!("tls://{id}@127.0.0.1:")), "{addr}");

    let data: Vec<f32> = (0..4096).map(|i| i as f32 * 0.25).collect();
    tx.send(&addr, "w", &Tensor::new(&data, &[64, 64]).unwrap(), None).unwrap();
    let msg = rx.receive(LONG).unwrap().expect("a message");
    assert_eq!(msg.name, "w");
    assert_eq!(msg.sender, tx.id().unwrap());
    assert_eq!(msg.value.shape(), &[64, 64]);
    assert_eq!(msg.value.as_slice::<f32>().unwrap(), &data[..]);
    assert_eq!(msg.value.bytes().as_ptr() as usize % 64, 0);

    let b = Bundle::new().with("i", &Tensor::from_slice(&[1i16, -2])).unwrap();
    rx.publish("b", &b).unwrap();
    let got = tx.request(&addr, "b", None).unwrap();
    assert_eq!(got.get("i").unwrap().to_vec::<i16>().unwrap(), [1, -2]); // entries follow their sub-packets: maybe unaligned
    rx.unpublish("b").unwrap();
    assert_eq!(tx.request(&addr, "b", None).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(rx.unpublish("b").unwrap_err().kind(), ErrorKind::NotFound);

    let st = tx.stats().unwrap();
    assert_eq!((st.pool_size, st.connections_opened, st.connections_reused), (1, 1, 2));
}

#[test]
fn threads_share_one_node() {
    let rx = Arc::new(Node::new(&NodeOptions::default()).unwrap());
    let tx = Arc::new(dialer(false));
    let addr = rx.addr().unwrap();
    let handles: Vec<_> = (0..8u32)
        .map(|i| {
            let (tx, addr) = (Arc::clone(&tx), addr.clone());
            std::thread::spawn(move || tx.send(&addr, &i.to_string(), &Tensor::from_slice(&[i; 16]), None).unwrap())
        })
        .collect();
    let mut seen = Vec::new();
    for _ in 0..8 {
        let m = rx.receive(LONG).unwrap().unwrap();
        let v = m.value.as_slice::<u32>().unwrap();
        assert_eq!(v, &[m.name.parse::<u32>().unwrap(); 16]);
        seen.push(m.name);
    }
    for h in handles {
        h.join().unwrap();
    }
    seen.sort();
    assert_eq!(seen, (0..8).map(|i: u32| i.to_string()).collect::<Vec<_>>());
}

#[test]
fn timeouts_cancellation_shutdown() {
    let rx = Arc::new(Node::new(&NodeOptions::default()).unwrap());
    assert!(rx.receive(Some(Duration::ZERO)).unwrap().is_none());
    assert!(rx.receive(Some(Duration::from_millis(20))).unwrap().is_none());

    let tok = CancelToken::new().unwrap();
    tok.cancel();
    assert!(tok.is_cancelled());
    assert_eq!(rx.receive_with(None, Some(&tok)).unwrap_err().kind(), ErrorKind::Cancelled);

    let waiter = {
        let rx = Arc::clone(&rx);
        std::thread::spawn(move || rx.receive(None))
    };
    std::thread::sleep(Duration::from_millis(50));
    rx.shutdown();
    assert_eq!(waiter.join().unwrap().unwrap_err().kind(), ErrorKind::Shutdown);
    assert_eq!(rx.publish("x", &Tensor::from_slice(&[1u8])).unwrap_err().kind(), ErrorKind::Shutdown);
    rx.shutdown(); // idempotent
}

/// Every blocked call ends promptly with Shutdown: a receive, and a send the peer holds
/// un-acknowledged (its queue full), when their own node shuts down.
#[test]
fn shutdown_ends_every_blocked_call() {
    let rx = Node::new(&NodeOptions { max_queued: 1, ..Default::default() }).unwrap();
    let addr = rx.addr().unwrap();
    let tx = Arc::new(dialer(false));
    let one = Tensor::from_slice(&[1u8]);
    tx.send(&addr, "fills", &one, None).unwrap();
    let waiter = Arc::new(Node::new(&NodeOptions { no_listen: true, ..Default::default() }).unwrap());
    let (t1, t2) = (Arc::clone(&tx), Arc::clone(&waiter));
    let (a1, a2) = (addr.clone(), addr.clone());
    let blocked_send = std::thread::spawn(move || t1.send(&a1, "held", &Tensor::from_slice(&[2u8]), LONG));
    let blocked_receive = std::thread::spawn(move || t2.receive(None));
    std::thread::sleep(Duration::from_millis(100));
    let t0 = std::time::Instant::now();
    tx.shutdown();
    waiter.shutdown();
    assert_eq!(blocked_send.join().unwrap().unwrap_err().kind(), ErrorKind::Shutdown);
    assert_eq!(blocked_receive.join().unwrap().unwrap_err().kind(), ErrorKind::Shutdown);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let _ = a2;
}

/// The access hook: a refused get or push is ErrorKind::Auth; None restores the default.
#[test]
fn access_hook() {
    let rx = Node::new(&NodeOptions::default()).unwrap();
    let addr = rx.addr().unwrap();
    let (a, b) = (dialer(false), dialer(false));
    let trusted = b.id().unwrap();
    rx.set_access(Some(move |op: AccessOp, peer: &str, name: &str| match op {
        AccessOp::Get => name != "secret" || peer == trusted,
        AccessOp::Push => name != "forbidden",
    }))
    .unwrap();
    rx.publish("secret", &Tensor::from_slice(&[7u8])).unwrap();
    assert_eq!(a.request(&addr, "secret", None).unwrap_err().kind(), ErrorKind::Auth);
    assert_eq!(b.request(&addr, "secret", None).unwrap().to_vec::<u8>().unwrap(), [7]);
    assert_eq!(a.send(&addr, "forbidden", &Tensor::from_slice(&[1u8]), None).unwrap_err().kind(), ErrorKind::Auth);
    a.send(&addr, "fine", &Tensor::from_slice(&[1u8]), None).unwrap();
    assert_eq!(rx.receive(LONG).unwrap().unwrap().name, "fine");
    rx.set_access(None::<fn(AccessOp, &str, &str) -> bool>).unwrap();
    a.send(&addr, "forbidden", &Tensor::from_slice(&[1u8]), None).unwrap();
}

#[test]
fn bad_addresses_and_plaintext() {
    let tx = dialer(true);
    for a in ["", "nonsense", "ftp://x:1", "tls://zz@127.0.0.1:1"] {
        let e = tx.send(a, "x", &Tensor::from_slice(&[1u8]), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadAddress, "{a}: {e}");
    }
    let e = Node::new(&NodeOptions { listen: vec!["tcp://127.0.0.1:0".into()], ..Default::default() }).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);

    let dir = std::env::temp_dir().join(format!("tenso-rs-net-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rx.sock");
    let rx = Node::new(&NodeOptions {
        listen: vec![format!("unix://{}", path.display())],
        allow_plaintext: true,
        ..Default::default()
    })
    .unwrap();
    let big: Vec<u8> = (0..(4u32 << 20)).map(|i| (i * 13) as u8).collect();
    tx.send(&rx.addr().unwrap(), "big", &Tensor::from_slice(&big), LONG).unwrap();
    let m = rx.receive(LONG).unwrap().unwrap();
    assert_eq!(m.sender, "unix:");
    assert_eq!(m.value.as_slice::<u8>().unwrap(), &big[..]);
    drop(rx);
    let _ = std::fs::remove_dir_all(&dir);
}

fn _node_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Node>();
    check::<CancelToken>();
}

/// Whether this process may run on one CPU only (sched_getaffinity, as /proc reports it).
fn one_cpu_allowed() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed:")).unwrap();
    let cpus: u32 = mask.trim().chars().filter_map(|c| c.to_digit(16)).map(|d| d.count_ones()).sum();
    cpus == 1
}

#[test]
fn busy_poll_counted_and_off() {
    // A wait for the peer's answer polls first (counted); `no_busy_poll` never does, nor does a
    // listener answering. The peer answers 1 ms late (its access hook sleeps): an answer already
    // there when the sender first reads would need no wait at all.
    let rx = Node::new(&NodeOptions::default()).unwrap();
    rx.set_access(Some(|_: AccessOp, _: &str, _: &str| {
        std::thread::sleep(Duration::from_millis(1));
        true
    }))
    .unwrap();
    let tx = dialer(false);
    let sleeper = Node::new(&NodeOptions { no_listen: true, no_busy_poll: true, ..Default::default() }).unwrap();
    let addr = rx.addr().unwrap();
    for n in [&tx, &sleeper] {
        for _ in 0..3 {
            n.send(&addr, "x", &Tensor::from_slice(&[1.0f32; 4]), None).unwrap();
        }
    }
    let (a, s, r) = (tx.stats().unwrap(), sleeper.stats().unwrap(), rx.stats().unwrap());
    // A process allowed one CPU never polls (its peer needs that CPU to answer).
    let polls_expected = if one_cpu_allowed() { a.busy_polls == 0 } else { a.busy_polls >= 1 };
    assert!(polls_expected && a.busy_poll_hits == 0, "{a:?}");
    assert_eq!((s.busy_polls, s.busy_poll_hits), (0, 0));
    assert_eq!(r.busy_polls, 0);
}
