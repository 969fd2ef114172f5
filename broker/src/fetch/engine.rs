//! The fetch engine's driver: reads every partition asked, and while the plan says wait,
//! sleeps until one of their replicas changes (an append, a high watermark or role change) or
//! the wait ends, then reads again.

use std::sync::Arc;

use super::plan::{self, Found, Limits, Next, ReadLimit};
use crate::replica::Replica;

/// The partitions of one fetch, as its edge reads them.
pub trait Partitions {
    /// One partition's answer, in the edge's own form.
    type Part: Send;

    /// How many partitions the fetch asks.
    fn count(&self) -> usize;

    /// The most bytes partition `i` may return (Kafka's `partition_max_bytes`).
    fn max_bytes(&self, i: usize) -> usize;

    /// The replica whose changes may answer partition `i`; `None` when there is none here.
    fn replica(&self, i: usize) -> Option<Arc<Replica>>;

    /// Reads partition `i` within `limit`.
    fn read(&self, i: usize, limit: ReadLimit) -> (Self::Part, Found);
}

/// Answers a fetch: reads its partitions within `limits.max_bytes`, and waits up to
/// `limits.max_wait` for `limits.min_bytes` (see [`plan::next`]), reading again after each
/// change of a replica asked.
pub async fn long_poll<P: Partitions + Sync>(parts: &P, limits: &Limits) -> Vec<P::Part> {
    let deadline = tokio::time::Instant::now() + limits.max_wait;
    loop {
        // Subscribe before reading, so that a change in between is not missed.
        let replicas: Vec<_> = (0..parts.count()).filter_map(|i| parts.replica(i)).collect();
        let mut watches: Vec<_> = replicas.iter().map(|r| r.subscribe()).collect();
        let expired = tokio::time::Instant::now() >= deadline;
        let pass = plan::pass(
            (0..parts.count()).map(|i| parts.max_bytes(i)),
            limits.max_bytes,
            |i, limit| parts.read(i, limit),
        );
        // With no replica here, nothing can change what the partitions answer.
        if watches.is_empty() || plan::next(&pass, limits.min_bytes, expired) == Next::Answer {
            return pass.parts;
        }
        drop(pass);
        let changed = futures::future::select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
        // At the deadline, one more pass reads what there is and answers it.
        let _ = tokio::time::timeout_at(deadline, changed).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use proto::clock::Clock;

    use super::*;
    use crate::partition_log::{LogConfig, PartitionLog};

    /// One partition whose readable bytes a test sets; counts the reads.
    struct Fake {
        replica: Arc<Replica>,
        bytes: AtomicUsize,
        reads: AtomicUsize,
    }

    impl Partitions for Fake {
        type Part = usize;
        fn count(&self) -> usize {
            1
        }
        fn max_bytes(&self, _: usize) -> usize {
            1 << 20
        }
        fn replica(&self, _: usize) -> Option<Arc<Replica>> {
            Some(self.replica.clone())
        }
        fn read(&self, _: usize, limit: ReadLimit) -> (usize, Found) {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let n = self.bytes.load(Ordering::SeqCst).min(limit.max_bytes);
            (n, Found::Bytes(n))
        }
    }

    fn fake(dir: &std::path::Path) -> Arc<Fake> {
        let log = PartitionLog::open(&dir.join("t-0"), LogConfig::default()).unwrap();
        Arc::new(Fake {
            replica: Arc::new(Replica::new("t".into(), 0, 1, log, Clock::system())),
            bytes: AtomicUsize::new(0),
            reads: AtomicUsize::new(0),
        })
    }

    fn limits(min_bytes: usize, wait: Duration) -> Limits {
        Limits {
            min_bytes,
            max_bytes: 1 << 20,
            max_wait: wait,
        }
    }

    #[tokio::test]
    async fn a_waiting_fetch_answers_when_its_replica_gets_enough_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let f = fake(tmp.path());
        let poll = tokio::spawn({
            let f = f.clone();
            async move { long_poll(&*f, &limits(100, Duration::from_secs(50))).await }
        });
        tokio::task::yield_now().await;
        // A change that brings too little wakes the fetch, which reads and waits on.
        f.bytes.store(10, Ordering::SeqCst);
        f.replica.notify();
        while f.reads.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        tokio::task::yield_now().await;
        assert!(!poll.is_finished(), "10 bytes are fewer than min_bytes");
        f.bytes.store(150, Ordering::SeqCst);
        f.replica.notify();
        assert_eq!(poll.await.unwrap(), vec![150]);
        assert_eq!(f.reads.load(Ordering::SeqCst), 3, "read again after each change");
    }

    #[tokio::test]
    async fn a_fetch_answers_what_there_is_when_its_wait_ends() {
        let tmp = tempfile::tempdir().unwrap();
        let f = fake(tmp.path());
        f.bytes.store(10, Ordering::SeqCst);
        let got = long_poll(&*f, &limits(100, Duration::from_millis(20))).await;
        assert_eq!(got, vec![10]);
        assert_eq!(f.reads.load(Ordering::SeqCst), 2, "one pass, then one at the deadline");
    }

    #[tokio::test]
    async fn a_fetch_with_enough_bytes_or_no_wait_answers_without_waiting() {
        let tmp = tempfile::tempdir().unwrap();
        let f = fake(tmp.path());
        assert_eq!(long_poll(&*f, &limits(1, Duration::ZERO)).await, vec![0]);
        f.bytes.store(5, Ordering::SeqCst);
        assert_eq!(long_poll(&*f, &limits(1, Duration::from_secs(50))).await, vec![5]);
        assert_eq!(f.reads.load(Ordering::SeqCst), 2, "one pass each");
    }
}
