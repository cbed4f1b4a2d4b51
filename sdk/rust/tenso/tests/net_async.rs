//! AsyncNode (feature `tokio`) under tokio's multi-threaded runtime: send, post, flush, request
//! and receive as futures over real sockets (TLS and plain TCP), many calls in flight from many
//! tasks, order of posts, cancellation by dropping a future (receive is cancel-safe), deadlines
//! and shutdown with calls in flight.
#![cfg(feature = "tokio")]

use std::sync::Arc;
use std::time::Duration;

use tenso::{AsyncNode, ErrorKind, NodeOptions, Tensor};

fn plain(listen: bool) -> NodeOptions {
    NodeOptions {
        listen: vec!["tcp://127.0.0.1:0".into()],
        allow_plaintext: true,
        no_listen: !listen,
        ..Default::default()
    }
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_receive_request_over_tls() -> tenso::Result<()> {
    let rx = AsyncNode::new(&NodeOptions::default())?;
    let tx = AsyncNode::new(&NodeOptions { no_listen: true, ..Default::default() })?;
    let addr = rx.node().addr()?;
    let data: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
    assert_send(tx.send(&addr, "w", &Tensor::from_slice(&data), None)).await?;
    let m = rx.receive(None).await?.expect("a message");
    assert_eq!(m.name, "w");
    assert_eq!(m.sender, tx.node().id()?);
    assert_eq!(m.value.as_slice::<f32>()?, &data[..]);
    rx.node().publish("p", &Tensor::from_slice(&[5u8, 6, 7]))?;
    assert_eq!(tx.request(&addr, "p", None).await?.as_slice::<u8>()?, &[5, 6, 7]);
    let e = tx.request(&addr, "missing", None).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(rx.receive(Some(Duration::ZERO)).await?.is_none());
    Ok(())
}

// 64 tasks on the runtime's threads, each with several calls, on one node's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_many_calls_in_flight() -> tenso::Result<()> {
    let rx = Arc::new(AsyncNode::new(&NodeOptions { max_connections: 8, max_pool_per_peer: 8, ..plain(true) })?);
    let tx = Arc::new(AsyncNode::new(&NodeOptions { max_connections: 8, max_pool_per_peer: 8, ..plain(false) })?);
    let addr = rx.node().addr()?;
    rx.node().publish("p", &Tensor::from_slice(&[1i32, 2, 3]))?;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..64u32 {
        let (tx, addr) = (Arc::clone(&tx), addr.clone());
        tasks.spawn(async move {
            for i in 0..5u32 {
                let v = [t, i];
                tx.send(&addr, &format!("s{t}-{i}"), &Tensor::from_slice(&v), None).await?;
                assert_eq!(tx.request(&addr, "p", None).await?.as_slice::<i32>()?, &[1, 2, 3]);
            }
            Ok::<(), tenso::Error>(())
        });
    }
    let drain = {
        let rx = Arc::clone(&rx);
        tokio::spawn(async move {
            let mut names = Vec::new();
            for _ in 0..320 {
                names.push(rx.receive(Some(Duration::from_secs(60))).await?.expect("a message").name);
            }
            Ok::<_, tenso::Error>(names)
        })
    };
    while let Some(r) = tasks.join_next().await {
        r.expect("task")?;
    }
    let mut names = drain.await.expect("drain")?;
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 320);
    assert!(tx.node().stats()?.connections_opened <= 8);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_keep_order_with_blocking_posts_and_flush() -> tenso::Result<()> {
    let rx = AsyncNode::new(&plain(true))?;
    let tx = AsyncNode::new(&plain(false))?;
    let addr = rx.node().addr()?;
    let big = vec![7u8; 3 << 20];
    let mut k = 0u64;
    for round in 0..3 {
        for i in 0..50u64 {
            let v = [k];
            if i == 10 {
                tx.post(&addr, &format!("n{k}"), &Tensor::from_slice(&big), None).await?;
            } else {
                tx.post(&addr, &format!("n{k}"), &Tensor::from_slice(&v), None).await?;
            }
            k += 1;
        }
        if round == 1 {
            tx.node().post(&addr, &format!("n{k}"), &Tensor::from_slice(&[k]), None)?;
            k += 1;
        }
    }
    tx.flush(&addr, None).await?;
    for i in 0..k {
        assert_eq!(rx.receive(None).await?.expect("a message").name, format!("n{i}"));
    }
    Ok(())
}

// A send waiting for room in a full peer queue is cancelled by dropping its future (a timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_send_cancels_it() -> tenso::Result<()> {
    let rx = AsyncNode::new(&NodeOptions { max_queued: 1, ..plain(true) })?;
    let tx = AsyncNode::new(&plain(false))?;
    let addr = rx.node().addr()?;
    tx.send(&addr, "a", &Tensor::from_slice(&[1u8]), None).await?;
    let b = [2u8];
    let b = Tensor::from_slice(&b);
    let blocked = tx.send(&addr, "b", &b, Some(Duration::from_secs(600)));
    assert!(tokio::time::timeout(Duration::from_millis(200), blocked).await.is_err());
    assert_eq!(rx.receive(None).await?.unwrap().name, "a");
    // The dropped send's push had arrived (parked for room): it is delivered now.
    assert_eq!(rx.receive(None).await?.unwrap().name, "b");
    tx.send(&addr, "c", &Tensor::from_slice(&[3u8]), None).await?;
    assert_eq!(rx.receive(None).await?.unwrap().name, "c");
    Ok(())
}

// A receive whose future completed but was dropped before it was polled again: the message goes
// to the next receive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_is_cancel_safe() -> tenso::Result<()> {
    let node = AsyncNode::new(&plain(true))?;
    let addr = node.node().addr()?;
    assert!(tokio::time::timeout(Duration::from_millis(20), node.receive(None)).await.is_err());
    let pending = node.receive(None);
    // Awaiting the send drives the node's queue, which completes the receive as well.
    node.send(&addr, "kept", &Tensor::from_slice(&[9u16]), None).await?;
    for _ in 0..100 {
        if pending.is_finished() {
            break;
        }
        // Another call's await drives the queue too.
        let _ = node.request(&addr, "nothing", None).await;
    }
    assert!(pending.is_finished());
    drop(pending);
    let m = node.receive(Some(Duration::ZERO)).await?.expect("the dropped receive's message");
    assert_eq!(m.name, "kept");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_and_shutdown_with_calls_in_flight() -> tenso::Result<()> {
    let rx = AsyncNode::new(&NodeOptions { max_queued: 1, ..plain(true) })?;
    let tx = Arc::new(AsyncNode::new(&plain(false))?);
    let addr = rx.node().addr()?;
    tx.send(&addr, "full", &Tensor::from_slice(&[0u8]), None).await?;
    let e = tx.send(&addr, "late", &Tensor::from_slice(&[1u8]), Some(Duration::from_millis(100))).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    let mut waiting = tokio::task::JoinSet::new();
    for i in 0..8u8 {
        let (tx, addr) = (Arc::clone(&tx), addr.clone());
        waiting.spawn(async move { tx.send(&addr, "w", &Tensor::from_slice(&[i]), None).await });
    }
    let receiver = Arc::new(AsyncNode::new(&plain(true))?);
    let r = Arc::clone(&receiver);
    let recv = tokio::spawn(async move { r.receive(None).await.map(|m| m.is_some()) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.node().shutdown();
    receiver.node().shutdown();
    while let Some(r) = waiting.join_next().await {
        assert_eq!(r.expect("task").unwrap_err().kind(), ErrorKind::Shutdown);
    }
    assert_eq!(recv.await.expect("task").unwrap_err().kind(), ErrorKind::Shutdown);
    assert_eq!(tx.flush(&addr, None).await.unwrap_err().kind(), ErrorKind::Shutdown);
    Ok(())
}

// Calls ended on another thread (here the node's shutdown) complete without a reap; the one task
// the reactor wakes for the queue must still reap it for the others, or they wait forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_ended_elsewhere_wake_every_task() -> tenso::Result<()> {
    for _ in 0..10 {
        let rx = AsyncNode::new(&NodeOptions { max_queued: 1, ..plain(true) })?;
        let addr = rx.node().addr()?;
        let tx = Arc::new(AsyncNode::new(&plain(false))?);
        tx.send(&addr, "full", &Tensor::from_slice(&[0u8]), None).await?;
        let mut waiting = tokio::task::JoinSet::new();
        for i in 0..8u8 {
            let (tx, addr) = (Arc::clone(&tx), addr.clone());
            waiting.spawn(async move { tx.send(&addr, "w", &Tensor::from_slice(&[i]), None).await });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.node().shutdown();
        let all = async {
            while let Some(r) = waiting.join_next().await {
                assert_eq!(r.expect("task").unwrap_err().kind(), ErrorKind::Shutdown);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), all).await.expect("a task was never woken");
    }
    Ok(())
}
