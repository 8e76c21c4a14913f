//! A replica cut off from the database (a partition, through a TCP proxy
//! this test can cut) loses its lease when it lapses; another takes over;
//! when the first comes back, everything it tries to write is refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use roder_api::thread::ThreadStore;
use time::OffsetDateTime;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::test_fixtures::*;
use crate::{PostgresStoreOptions, PostgresThreadStore};

/// Forwards 127.0.0.1 connections to the cluster until cut.
struct Proxy {
    port: u16,
    open: Arc<AtomicBool>,
    /// Bumped on a cut: every forwarded connection closes.
    cuts: watch::Sender<u64>,
}

impl Proxy {
    async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let (cuts, _) = watch::channel(0u64);
        let accepting = (open.clone(), cuts.clone());
        tokio::spawn(async move {
            let (open, cuts) = accepting;
            while let Ok((client, _)) = listener.accept().await {
                if !open.load(Ordering::SeqCst) {
                    continue; // dropped: connection refused, in effect
                }
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self { port, open, cuts }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|cuts| *cuts += 1);
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_replica_cut_off_past_its_lease_never_writes_after_the_takeover() {
    let Some((cluster, other)) = setup().await else {
        return;
    };
    other
        .create_thread(metadata("t1", OffsetDateTime::UNIX_EPOCH))
        .await
        .unwrap();
    let proxy = Proxy::start(cluster.port()).await;
    let options = PostgresStoreOptions {
        acquire_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let cut_off = PostgresThreadStore::connect_with(
        &format!("postgres://roder@127.0.0.1:{}/postgres", proxy.port),
        options,
    )
    .await
    .unwrap();
    let lease = acquired(
        cut_off
            .acquire_writer_lease("t1", request("cut-off", Duration::from_secs(1)))
            .await
            .unwrap(),
    );
    cut_off
        .append_events_leased(lease.as_ref(), "t1", &events("t1", 1..=1))
        .await
        .unwrap();

    proxy.cut();
    assert!(
        lease.renew().await.is_err(),
        "no renewal without the database"
    );
    assert!(
        cut_off
            .append_events_leased(lease.as_ref(), "t1", &events("t1", 2..=2))
            .await
            .is_err()
    );

    crate::test_support::wait_for_lease_expiry(&other, "t1")
        .await
        .unwrap();
    let taken = acquired(
        other
            .acquire_writer_lease("t1", request("other", Duration::from_secs(60)))
            .await
            .unwrap(),
    );
    assert_eq!(taken.last_seq_at_grant(), Some(1));
    other
        .append_events_leased(taken.as_ref(), "t1", &events("t1", 2..=2))
        .await
        .unwrap();

    // The partition heals: the old holder's writes and renewals are refused.
    proxy.restore();
    for seq in [2, 3] {
        let error = cut_off
            .append_events_leased(lease.as_ref(), "t1", &events("t1", seq..=seq))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("is stale"), "{error:#}");
    }
    let error = lease.renew().await.unwrap_err();
    assert!(error.to_string().contains("was lost"), "{error:#}");
    let log = other.load_events("t1", 0).await.unwrap();
    assert_eq!(seqs(&log), [1, 2]);
    let holder = other
        .writer_lease_status("t1")
        .await
        .unwrap()
        .unwrap()
        .holder;
    assert_eq!(
        holder.map(|holder| holder.owner_id),
        Some("other".to_string())
    );
}
