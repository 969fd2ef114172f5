//! The one way the controller writes metadata. A writer reads the state, decides with a pure
//! function, and gets back a [`Plan`]: the guards and ops to write and the answer to give, together
//! (Kafka's `ControllerResult`: records plus a response). A [`Runner`] owns everything around the
//! plan: one guarded transaction, reading and planning again when a guard failed (up to a bound),
//! the refusal once the state kept changing, and the active controller's Raft-term fence.
//!
//! A leaf: it uses only [`crate::store`], `proto` and `metastore`, so every module can use it
//! without an import cycle.

use std::future::{ready, Future};
use std::time::Instant;

use metastore::{Client, ClientError};
use proto::errors::Refusal;
use proto::metastore as pb;

use crate::store;

/// How many times a request is read, planned and written before it gives up: each failed guard
/// means someone changed the metadata first.
pub const ATTEMPTS: usize = 5;

/// What a request decided: the writes it makes and the answer it gives once they landed.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan<R> {
    /// What must still hold for the ops to apply (revisions read, markers absent).
    pub guards: Vec<pb::Guard>,
    /// The puts and deletes, applied all or nothing.
    pub ops: Vec<pb::Op>,
    /// The answer, given when the ops are written (or at once when there are none).
    pub answer: R,
}

impl<R> Plan<R> {
    /// A plan that writes nothing and answers `answer` (a refusal, a validate-only request, a
    /// change already made).
    pub fn answer(answer: R) -> Self {
        Self {
            guards: Vec::new(),
            ops: Vec::new(),
            answer,
        }
    }

    /// A plan that writes `ops` guarded by `guards`, then answers `answer`.
    pub fn write(guards: Vec<pb::Guard>, ops: Vec<pb::Op>, answer: R) -> Self {
        Self { guards, ops, answer }
    }
}

/// A request's end: its answer, or a refusal (the plan's own, or the runner's when the state
/// kept changing).
pub type Outcome<R> = Result<R, Refusal>;

/// What the runner does after one attempt's write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The write landed: answer.
    Done,
    /// A guard failed and attempts are left: read and plan again.
    Retry,
    /// A guard failed on the last attempt: refuse with "kept changing".
    GiveUp,
}

/// The decision after attempt `attempt` (counted from 0) of `attempts`, whose write landed when
/// `written`.
pub fn next(attempt: usize, attempts: usize, written: bool) -> Next {
    if written {
        Next::Done
    } else if attempt + 1 < attempts {
        Next::Retry
    } else {
        Next::GiveUp
    }
}

/// The Raft-term fence: holds only in a log entry made by the leader of `term`, so a deposed
/// controller's write fails.
pub fn term_guard(term: u64) -> pb::Guard {
    pb::Guard {
        key: String::new(),
        check: Some(pb::guard::Check::RaftTerm(term)),
    }
}

/// How a runner writes: the bound, the fence and the refusal, apart from the client (so the
/// loop can be driven without a network).
#[derive(Debug, Clone)]
struct Policy {
    /// The request's name, for the debug line of each attempt.
    what: &'static str,
    attempts: usize,
    fence: Option<pb::Guard>,
    kept_changing: Refusal,
}

impl Policy {
    /// Read, plan, write, until the write lands, the plan refuses or writes nothing, or
    /// [`next`] gives up.
    async fn drive<S, R, RF, PF, WF>(
        &self,
        mut read: impl FnMut() -> RF,
        mut plan: impl FnMut(S) -> PF,
        mut write: impl FnMut(Vec<pb::Guard>, Vec<pb::Op>) -> WF,
    ) -> Result<Outcome<R>, ClientError>
    where
        RF: Future<Output = Result<S, ClientError>>,
        PF: Future<Output = Outcome<Plan<R>>>,
        WF: Future<Output = Result<bool, ClientError>>,
    {
        let mut attempt = 0;
        loop {
            let start = Instant::now();
            let state = read().await?;
            let read_done = start.elapsed();
            let Plan {
                mut guards,
                ops,
                answer,
            } = match plan(state).await {
                Ok(p) => p,
                Err(refusal) => return Ok(Err(refusal)),
            };
            if ops.is_empty() {
                return Ok(Ok(answer));
            }
            let planned = start.elapsed();
            guards.extend(self.fence.clone());
            let (n_guards, n_ops) = (guards.len(), ops.len());
            let written = write(guards, ops).await?;
            tracing::debug!(
                attempt,
                guards = n_guards,
                ops = n_ops,
                read_ms = read_done.as_millis() as u64,
                plan_ms = planned.saturating_sub(read_done).as_millis() as u64,
                write_ms = start.elapsed().saturating_sub(planned).as_millis() as u64,
                written,
                "{}",
                self.what
            );
            match next(attempt, self.attempts, written) {
                Next::Done => return Ok(Ok(answer)),
                Next::Retry => attempt += 1,
                Next::GiveUp => return Ok(Err(self.kept_changing.clone())),
            }
        }
    }
}

/// Runs plans against the metastore. Built per request: what it is called, what it refuses with
/// when the state keeps changing, how many attempts, and whether it is fenced by a Raft term.
#[derive(Clone)]
pub struct Runner<'a> {
    client: &'a Client,
    policy: Policy,
}

impl<'a> Runner<'a> {
    /// A runner of request `what` with [`ATTEMPTS`] attempts and no fence, refusing with
    /// `kept_changing` when every attempt's guards failed.
    pub fn new(client: &'a Client, what: &'static str, kept_changing: Refusal) -> Self {
        Self {
            client,
            policy: Policy {
                what,
                attempts: ATTEMPTS,
                fence: None,
                kept_changing,
            },
        }
    }

    /// The same runner with a single attempt: a failed guard refuses at once.
    pub fn once(mut self) -> Self {
        self.policy.attempts = 1;
        self
    }

    /// The same runner with every write fenced by the Raft term `term` ([`term_guard`]).
    pub fn fenced(mut self, term: u64) -> Self {
        self.policy.fence = Some(term_guard(term));
        self
    }

    /// Reads with `read`, plans with `plan`, and writes the plan in one guarded transaction; on
    /// a failed guard reads and plans again. A refusal of the plan, or a plan with no ops,
    /// answers without writing.
    pub async fn run<S, R, RF>(
        &self,
        read: impl FnMut() -> RF,
        mut plan: impl FnMut(S) -> Outcome<Plan<R>>,
    ) -> Result<Outcome<R>, ClientError>
    where
        RF: Future<Output = Result<S, ClientError>>,
    {
        let client = self.client;
        self.policy
            .drive(read, |s| ready(plan(s)), |g, o| store::write(client, g, o))
            .await
    }

    /// [`Runner::run`] with the planning on a blocking thread, for requests whose plan takes
    /// seconds of CPU (a million partitions).
    pub async fn run_off_runtime<S, R, RF, P>(
        &self,
        read: impl FnMut() -> RF,
        plan: P,
    ) -> Result<Outcome<R>, ClientError>
    where
        RF: Future<Output = Result<S, ClientError>>,
        S: Send + 'static,
        R: Send + 'static,
        P: Fn(S) -> Outcome<Plan<R>> + Send + Sync + 'static,
    {
        let client = self.client;
        let plan = std::sync::Arc::new(plan);
        let planned = |s| {
            let plan = plan.clone();
            crate::off_runtime(move || plan(s))
        };
        self.policy
            .drive(read, planned, |g, o| store::write(client, g, o))
            .await
    }

    /// Writes a plan made already (from a state read once for many items), once: a failed guard
    /// refuses with the runner's refusal.
    pub async fn write<R>(&self, plan: Plan<R>) -> Result<Outcome<R>, ClientError> {
        let client = self.client;
        let policy = Policy {
            attempts: 1,
            ..self.policy.clone()
        };
        let mut plan = Some(plan);
        let kept_changing = &self.policy.kept_changing;
        policy
            .drive(
                || ready(Ok(())),
                |()| ready(plan.take().ok_or_else(|| kept_changing.clone())),
                |g, o| store::write(client, g, o),
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::errors::ErrorCode;
    use std::cell::Cell;

    #[test]
    fn a_write_that_lands_is_done_and_a_failed_guard_retries_until_the_last_attempt() {
        assert_eq!(next(0, 5, true), Next::Done);
        assert_eq!(next(4, 5, true), Next::Done);
        assert_eq!(next(0, 5, false), Next::Retry);
        assert_eq!(next(3, 5, false), Next::Retry);
        assert_eq!(next(4, 5, false), Next::GiveUp);
        assert_eq!(next(0, 1, false), Next::GiveUp);
    }

    fn policy(attempts: usize, fence: Option<pb::Guard>) -> Policy {
        Policy {
            what: "test",
            attempts,
            fence,
            kept_changing: Refusal::new(ErrorCode::INVALID_UPDATE_VERSION, "it kept changing; retry"),
        }
    }

    fn put(key: &str) -> pb::Op {
        store::put_op(key.into(), &proto::ferry::ReassignmentRecord::default())
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(f))
            .expect("runtime")
    }

    /// Drives `policy` with a writer whose guards fail `failures` times; returns the outcome,
    /// the reads, and the guards of each write.
    fn drive_failing(policy: &Policy, failures: usize) -> (Outcome<u64>, usize, Vec<Vec<pb::Guard>>) {
        let reads = Cell::new(0);
        let mut writes = Vec::new();
        let out = block_on(policy.drive(
            || {
                reads.set(reads.get() + 1);
                ready(Ok(reads.get() as u64))
            },
            |n| {
                ready(Ok(Plan::write(
                    vec![store::at_revision("/k".into(), n)],
                    vec![put("/k")],
                    n,
                )))
            },
            |g, _| {
                writes.push(g);
                ready(Ok(writes.len() > failures))
            },
        ));
        (out.expect("no client error"), reads.get(), writes)
    }

    #[test]
    fn a_failed_guard_reads_and_plans_again_and_the_last_plan_answers() {
        let (out, reads, writes) = drive_failing(&policy(5, None), 2);
        assert_eq!(out, Ok(3), "the answer of the plan that was written");
        assert_eq!((reads, writes.len()), (3, 3));
        assert_eq!(
            writes[2],
            vec![store::at_revision("/k".into(), 3)],
            "guards of the last read"
        );
    }

    #[test]
    fn guards_failing_every_attempt_refuse_with_kept_changing() {
        let (out, reads, writes) = drive_failing(&policy(5, None), usize::MAX);
        let refusal = out.expect_err("gave up");
        assert_eq!(refusal.code, ErrorCode::INVALID_UPDATE_VERSION);
        assert_eq!(refusal.message, "it kept changing; retry");
        assert_eq!((reads, writes.len()), (5, 5));
    }

    #[test]
    fn the_fence_is_on_every_write() {
        let (_, _, writes) = drive_failing(&policy(2, Some(term_guard(7))), usize::MAX);
        assert!(writes.iter().all(|g| g.last() == Some(&term_guard(7))), "{writes:?}");
    }

    #[test]
    fn a_refusal_or_a_plan_without_ops_answers_without_writing() {
        let writes = Cell::new(0);
        let count = |_: Vec<pb::Guard>, _: Vec<pb::Op>| {
            writes.set(writes.get() + 1);
            ready(Ok(true))
        };
        let refused: Outcome<Plan<u32>> = Err(Refusal::new(ErrorCode::INVALID_REQUEST, "no"));
        let out = block_on(policy(5, None).drive(|| ready(Ok(())), |()| ready(refused.clone()), count));
        assert_eq!(
            out.expect("no client error").map_err(|r| r.code),
            Err(ErrorCode::INVALID_REQUEST)
        );
        let out = block_on(policy(5, None).drive(|| ready(Ok(())), |()| ready(Ok(Plan::answer(9))), count));
        assert_eq!(out.expect("no client error"), Ok(9));
        assert_eq!(writes.get(), 0);
    }
}
