//! When this node last heard from a leader it follows or a candidate it voted for. The Raft
//! service (`network.rs`) records it; the election watch, the pre-vote answer and the leader
//! view read it. A leaf: it knows nothing of who reads it.

use std::sync::Arc;
use std::time::Instant;

/// What the Raft service learns for the watch and for pre-votes: when this node last heard from
/// a leader it follows or a candidate it voted for. (A node whose log is shorter than a peer's
/// is kept from campaigning by the pre-vote, which compares logs.)
#[derive(Clone, Debug)]
pub struct Heard(Arc<parking_lot::Mutex<HeardState>>);

#[derive(Debug)]
struct HeardState {
    at: Instant,
    /// Leader requests (entries, snapshot chunks) received and not yet answered.
    receiving: usize,
}

impl Default for Heard {
    fn default() -> Self {
        Self(Arc::new(parking_lot::Mutex::new(HeardState {
            at: Instant::now(),
            receiving: 0,
        })))
    }
}

/// A leader's request being taken; see [`Heard::receiving`].
#[must_use = "the request counts as heard only while this lives"]
pub struct Receiving(Heard);

impl Drop for Receiving {
    fn drop(&mut self) {
        let mut s = self.0 .0.lock();
        s.receiving -= 1;
    }
}

impl Heard {
    /// Records contact now: a leader's entries or snapshot taken, or a vote granted.
    pub fn touch(&self) {
        self.0.lock().at = Instant::now();
    }

    /// A leader's request has arrived: until the returned guard drops, the node counts as
    /// hearing from a leader. A follower writing a large append can take longer than the
    /// election watch's silence, and its leader's heartbeats queue behind that append; counted
    /// only once answered, it would ask for a pre-vote, which its peer, as stuck, would grant.
    pub fn receiving(&self) -> Receiving {
        self.0.lock().receiving += 1;
        Receiving(self.clone())
    }

    /// The last contact: now while a leader's request is being taken.
    pub fn at(&self) -> Instant {
        let s = self.0.lock();
        if s.receiving > 0 {
            Instant::now()
        } else {
            s.at
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn contact_moves_the_heard_time_forward() {
        let heard = Heard::default();
        let before = heard.at();
        heard.touch();
        assert!(heard.at() >= before);
        let touched = heard.at();
        heard.touch();
        assert!(heard.at() >= touched);
    }

    #[test]
    fn a_request_being_taken_counts_as_heard_until_it_is_answered() {
        let heard = Heard::default();
        heard.0.lock().at = Instant::now() - Duration::from_secs(5);
        let taking = heard.receiving();
        std::thread::sleep(Duration::from_millis(5));
        assert!(heard.at().elapsed() < Duration::from_secs(1));
        drop(taking);
        assert!(heard.at().elapsed() >= Duration::from_secs(5));
    }
}
