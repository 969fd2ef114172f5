//! The classic rebalance protocol over one group, as Kafka's coordinator runs it: JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, and the timers (session, join phase, sync phase, a new
//! group's initial delay). Each function changes the group and adds to an `Out` the records
//! to append and the answers to send; nothing here does I/O or reads a clock.

use proto::errors::ErrorCode;

use super::group::{Group, GroupConfig, GroupState, JoinAnswer, Member, Out, Reply, ReplyTo, SyncAnswer};

/// A JoinGroup, validated by the shard.
#[derive(Debug, Clone, Default)]
pub struct JoinRequest {
    /// The member id ("" for a new member).
    pub member_id: String,
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
    /// Session timeout (ms).
    pub session_timeout_ms: i32,
    /// Rebalance timeout (ms).
    pub rebalance_timeout_ms: i32,
    /// The protocol type.
    pub protocol_type: String,
    /// The protocols with their metadata.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// From JoinGroup v4: a new member first gets its id with MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

/// Handles a JoinGroup; `new_id` is the id a new member gets.
pub fn join(cfg: &GroupConfig, g: &mut Group, now: i64, req: JoinRequest, to: ReplyTo, new_id: String, out: &mut Out) {
    let answer_err = |out: &mut Out, code| out.reply(to, Reply::Join(JoinAnswer::error(code, &req.member_id)));
    if !g.supports(&req.protocol_type, &req.protocols) {
        return answer_err(out, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    if req.member_id.is_empty() {
        if let Some(instance) = req.instance_id.clone() {
            if let Some(old) = g.static_member(&instance).map(|m| m.id.clone()) {
                return replace_static(g, now, &old, req, to, new_id, out);
            }
        } else if req.require_known_member_id {
            if g.members.len() + g.pending.len() >= cfg.max_size {
                return answer_err(out, ErrorCode::GROUP_MAX_SIZE_REACHED);
            }
            g.pending.insert(new_id.clone());
            out.reply(
                to,
                Reply::Join(JoinAnswer::error(ErrorCode::MEMBER_ID_REQUIRED, &new_id)),
            );
            return;
        }
        if g.members.len() >= cfg.max_size {
            return answer_err(out, ErrorCode::GROUP_MAX_SIZE_REACHED);
        }
        return add_member(g, now, req, to, new_id, cfg.initial_rebalance_delay_ms, out);
    }
    if g.pending.remove(&req.member_id) {
        if g.members.len() >= cfg.max_size {
            return answer_err(out, ErrorCode::GROUP_MAX_SIZE_REACHED);
        }
        let id = req.member_id.clone();
        return add_member(g, now, req, to, id, cfg.initial_rebalance_delay_ms, out);
    }
    let Some(m) = g.members.get(&req.member_id) else {
        return answer_err(out, ErrorCode::UNKNOWN_MEMBER_ID);
    };
    if req.instance_id.is_some() && m.instance_id != req.instance_id {
        return answer_err(out, ErrorCode::FENCED_INSTANCE_ID);
    }
    let changed = m.protocols != req.protocols;
    let is_leader = g.leader.as_deref() == Some(req.member_id.as_str());
    match g.state {
        GroupState::PreparingRebalance => {
            update_member(g, &req, to);
            try_complete_join(g, now, out);
        }
        GroupState::CompletingRebalance | GroupState::Stable
            if !(changed || is_leader && g.state == GroupState::Stable) =>
        {
            // The member lost its join answer: give it again; nothing changes.
            let answer = join_answer(g, &req.member_id);
            out.reply(to, Reply::Join(answer));
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            update_member(g, &req, to);
            prepare_rebalance(g, now, out);
        }
        GroupState::Empty => answer_err(out, ErrorCode::UNKNOWN_MEMBER_ID),
    }
    g.check();
}

fn update_member(g: &mut Group, req: &JoinRequest, to: ReplyTo) {
    if let Some(m) = g.members.get_mut(&req.member_id) {
        m.protocols = req.protocols.clone();
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.join_waiter = Some(to);
    }
}

fn add_member(g: &mut Group, now: i64, req: JoinRequest, to: ReplyTo, id: String, delay: i64, out: &mut Out) {
    let seq = g.next_seq;
    g.next_seq += 1;
    if g.members.is_empty() {
        g.protocol_type = Some(req.protocol_type.clone());
    }
    g.members.insert(
        id.clone(),
        Member {
            id: id.clone(),
            instance_id: req.instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols,
            assignment: Vec::new(),
            join_waiter: Some(to),
            sync_waiter: None,
            session_deadline: now + i64::from(req.session_timeout_ms),
            joined_seq: seq,
        },
    );
    if g.leader.is_none() {
        g.leader = Some(id);
    }
    match g.state {
        GroupState::PreparingRebalance => {
            // A new group's initial delay grows while members keep coming, up to its bound.
            if let Some(until) = g.initial_delay_until {
                g.deadline = Some((now + delay).min(until));
            }
            try_complete_join(g, now, out);
        }
        GroupState::Empty => {
            prepare_rebalance(g, now, out);
            start_initial_delay(g, now, delay);
            try_complete_join(g, now, out);
        }
        _ => prepare_rebalance(g, now, out),
    }
    g.check();
}

/// A static member that rejoins with no id replaces its old id: the old one is fenced.
fn replace_static(g: &mut Group, now: i64, old: &str, req: JoinRequest, to: ReplyTo, new_id: String, out: &mut Out) {
    let Some(mut m) = g.members.remove(old) else {
        return;
    };
    if let Some(w) = m.join_waiter.take() {
        out.reply(w, Reply::Join(JoinAnswer::error(ErrorCode::FENCED_INSTANCE_ID, old)));
    }
    if let Some(w) = m.sync_waiter.take() {
        out.reply(w, Reply::Sync(sync_error(ErrorCode::FENCED_INSTANCE_ID)));
    }
    let unchanged = m.protocols == req.protocols;
    m.id = new_id.clone();
    m.session_deadline = now + i64::from(req.session_timeout_ms);
    m.session_timeout_ms = req.session_timeout_ms;
    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    if g.leader.as_deref() == Some(old) {
        g.leader = Some(new_id.clone());
    }
    if g.state == GroupState::Stable && unchanged {
        // Kafka keeps the assignment of a static member that comes back unchanged: no
        // rebalance, and the new id is stored.
        g.members.insert(new_id.clone(), m);
        out.group_record(g);
        let answer = join_answer(g, &new_id);
        out.reply(to, Reply::Join(answer));
        return;
    }
    m.protocols = req.protocols;
    m.join_waiter = Some(to);
    g.members.insert(new_id, m);
    if g.state == GroupState::PreparingRebalance {
        try_complete_join(g, now, out);
    } else {
        prepare_rebalance(g, now, out);
    }
    g.check();
}

/// Moves the group into a rebalance: SyncGroups in flight are told so, and the join phase gets
/// its deadline (a new group waits its initial delay instead).
pub fn prepare_rebalance(g: &mut Group, now: i64, out: &mut Out) {
    for m in g.members.values_mut() {
        if let Some(w) = m.sync_waiter.take() {
            out.reply(w, Reply::Sync(sync_error(ErrorCode::REBALANCE_IN_PROGRESS)));
        }
        m.assignment.clear();
    }
    let timeout = g
        .members
        .values()
        .map(|m| i64::from(m.rebalance_timeout_ms))
        .max()
        .unwrap_or(0);
    g.initial_delay_until = None;
    g.deadline = Some(now + timeout);
    g.state = GroupState::PreparingRebalance;
    g.state_timestamp = now;
}

/// An empty group's rebalance waits `delay` for more members, up to the rebalance timeout, as
/// Kafka's initial delayed join does. On purpose it ends `delay` after the last member came,
/// where Kafka waits whole periods of `delay` until one passes with no new member (so it ends
/// between `delay` and twice `delay` after the last): a group starting together is stable
/// sooner, and members that keep coming still extend the wait.
pub fn start_initial_delay(g: &mut Group, now: i64, delay: i64) {
    if g.state == GroupState::PreparingRebalance && delay > 0 {
        let bound = g.deadline.unwrap_or(now);
        g.initial_delay_until = Some(bound.max(now));
        g.deadline = Some((now + delay).min(bound.max(now)));
    }
}

/// Ends the join phase when every member has rejoined (never during a new group's delay).
pub fn try_complete_join(g: &mut Group, now: i64, out: &mut Out) {
    if g.state != GroupState::PreparingRebalance || g.initial_delay_until.is_some() {
        return;
    }
    if g.pending.is_empty() && g.members.values().all(|m| m.join_waiter.is_some()) {
        complete_join(g, now, out);
    }
}

/// Ends the join phase: members that did not rejoin are dropped, the generation moves on, and
/// each waiting member is answered (the leader with every member's metadata).
fn complete_join(g: &mut Group, now: i64, out: &mut Out) {
    let gone: Vec<String> = g
        .members
        .values()
        .filter(|m| m.join_waiter.is_none())
        .map(|m| m.id.clone())
        .collect();
    for id in gone {
        g.members.remove(&id);
    }
    g.pending.clear();
    g.initial_delay_until = None;
    g.generation += 1;
    g.state_timestamp = now;
    if g.members.is_empty() {
        g.state = GroupState::Empty;
        g.protocol = None;
        g.leader = None;
        g.deadline = None;
        out.group_record(g);
        g.check();
        return;
    }
    g.protocol = g.select_protocol();
    if !g.leader.as_ref().is_some_and(|l| g.members.contains_key(l)) {
        g.leader = g.members.values().min_by_key(|m| m.joined_seq).map(|m| m.id.clone());
    }
    g.state = GroupState::CompletingRebalance;
    let sync_timeout = g
        .members
        .values()
        .map(|m| i64::from(m.rebalance_timeout_ms))
        .max()
        .unwrap_or(0);
    g.deadline = Some(now + sync_timeout);
    let ids: Vec<String> = g.members.keys().cloned().collect();
    for id in ids {
        let answer = join_answer(g, &id);
        if let Some(m) = g.members.get_mut(&id) {
            m.session_deadline = now + i64::from(m.session_timeout_ms);
            if let Some(w) = m.join_waiter.take() {
                out.reply(w, Reply::Join(answer));
            }
        }
    }
    g.check();
}

/// The join answer of this generation for `member`.
fn join_answer(g: &Group, member: &str) -> JoinAnswer {
    let protocol = g.protocol.clone().unwrap_or_default();
    let is_leader = g.leader.as_deref() == Some(member);
    let mut members: Vec<&Member> = g.members.values().collect();
    members.sort_by_key(|m| m.joined_seq);
    JoinAnswer {
        error: ErrorCode::NONE,
        generation: g.generation,
        protocol_type: g.protocol_type.clone(),
        protocol: g.protocol.clone(),
        leader: g.leader.clone().unwrap_or_default(),
        member_id: member.to_string(),
        members: if is_leader {
            members
                .into_iter()
                .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata(&protocol)))
                .collect()
        } else {
            Vec::new()
        },
    }
}

fn sync_error(code: ErrorCode) -> SyncAnswer {
    SyncAnswer {
        error: code,
        ..Default::default()
    }
}

/// Checks that `member` of `generation` may act in `g`: known, not fenced, of this generation.
pub fn validate_member(g: &Group, member: &str, instance: Option<&str>, generation: i32) -> Result<(), ErrorCode> {
    let m = match g.members.get(member) {
        Some(m) => m,
        None if instance.is_some_and(|i| g.static_member(i).is_some()) => return Err(ErrorCode::FENCED_INSTANCE_ID),
        None => return Err(ErrorCode::UNKNOWN_MEMBER_ID),
    };
    if instance.is_some() && m.instance_id.as_deref() != instance {
        return Err(ErrorCode::FENCED_INSTANCE_ID);
    }
    if generation != g.generation {
        return Err(ErrorCode::ILLEGAL_GENERATION);
    }
    Ok(())
}

/// A SyncGroup's content.
#[derive(Debug, Clone, Default)]
pub struct SyncRequest {
    /// The member.
    pub member_id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its generation.
    pub generation: i32,
    /// From v5: the protocol type the member expects.
    pub protocol_type: Option<String>,
    /// From v5: the protocol the member expects.
    pub protocol: Option<String>,
    /// The leader's assignment per member.
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// Handles a SyncGroup. The leader's assignment is stored with the group's record, and every
/// waiting member is answered once that record is committed.
pub fn sync(g: &mut Group, now: i64, req: SyncRequest, to: ReplyTo, max_record: usize, out: &mut Out) {
    if let Err(code) = validate_member(g, &req.member_id, req.instance_id.as_deref(), req.generation) {
        return out.reply(to, Reply::Sync(sync_error(code)));
    }
    let mismatch = |want: &Option<String>, have: &Option<String>| want.is_some() && want != have;
    if mismatch(&req.protocol_type, &g.protocol_type) || mismatch(&req.protocol, &g.protocol) {
        return out.reply(to, Reply::Sync(sync_error(ErrorCode::INCONSISTENT_GROUP_PROTOCOL)));
    }
    match g.state {
        GroupState::Empty => out.reply(to, Reply::Sync(sync_error(ErrorCode::UNKNOWN_MEMBER_ID))),
        GroupState::PreparingRebalance => out.reply(to, Reply::Sync(sync_error(ErrorCode::REBALANCE_IN_PROGRESS))),
        GroupState::Stable => {
            let answer = sync_answer(g, &req.member_id);
            out.reply(to, Reply::Sync(answer));
        }
        GroupState::CompletingRebalance => {
            let is_leader = g.leader.as_deref() == Some(req.member_id.as_str());
            if is_leader {
                let size: usize = req.assignments.iter().map(|(m, a)| m.len() + a.len()).sum();
                if size > max_record {
                    // Refused before anything changes: the sync phase's timer rebalances.
                    return out.reply(to, Reply::Sync(sync_error(ErrorCode::MESSAGE_TOO_LARGE)));
                }
            }
            if let Some(m) = g.members.get_mut(&req.member_id) {
                if let Some(old) = m.sync_waiter.replace(to) {
                    out.reply(old, Reply::Sync(sync_error(ErrorCode::REBALANCE_IN_PROGRESS)));
                }
                m.session_deadline = now + i64::from(m.session_timeout_ms);
            }
            if is_leader {
                for m in g.members.values_mut() {
                    m.assignment = req
                        .assignments
                        .iter()
                        .find(|(id, _)| *id == m.id)
                        .map(|(_, a)| a.clone())
                        .unwrap_or_default();
                }
                g.state = GroupState::Stable;
                g.state_timestamp = now;
                g.deadline = None;
                out.group_record(g);
                let ids: Vec<String> = g.members.keys().cloned().collect();
                for id in ids {
                    let answer = sync_answer(g, &id);
                    if let Some(w) = g.members.get_mut(&id).and_then(|m| m.sync_waiter.take()) {
                        out.reply(w, Reply::Sync(answer));
                    }
                }
            }
        }
    }
    g.check();
}

fn sync_answer(g: &Group, member: &str) -> SyncAnswer {
    SyncAnswer {
        error: ErrorCode::NONE,
        protocol_type: g.protocol_type.clone(),
        protocol: g.protocol.clone(),
        assignment: g.members.get(member).map(|m| m.assignment.clone()).unwrap_or_default(),
    }
}

/// Handles a Heartbeat: keeps the member's session, and tells it of a rebalance.
pub fn heartbeat(g: &mut Group, now: i64, member: &str, instance: Option<&str>, generation: i32) -> ErrorCode {
    if g.state == GroupState::Empty {
        return ErrorCode::UNKNOWN_MEMBER_ID;
    }
    if let Err(code) = validate_member(g, member, instance, generation) {
        return code;
    }
    if let Some(m) = g.members.get_mut(member) {
        m.session_deadline = now + i64::from(m.session_timeout_ms);
    }
    match g.state {
        GroupState::PreparingRebalance => ErrorCode::REBALANCE_IN_PROGRESS,
        _ => ErrorCode::NONE,
    }
}

/// Removes a member (it left, or its session ended): its requests in flight are answered, and
/// the group rebalances or, when a join phase waited only for it, completes it.
pub fn remove_member(g: &mut Group, now: i64, member: &str, out: &mut Out) {
    let Some(mut m) = g.members.remove(member) else {
        g.pending.remove(member);
        return;
    };
    if let Some(w) = m.join_waiter.take() {
        out.reply(w, Reply::Join(JoinAnswer::error(ErrorCode::UNKNOWN_MEMBER_ID, member)));
    }
    if let Some(w) = m.sync_waiter.take() {
        out.reply(w, Reply::Sync(sync_error(ErrorCode::UNKNOWN_MEMBER_ID)));
    }
    if g.leader.as_deref() == Some(member) {
        g.leader = g.members.values().min_by_key(|m| m.joined_seq).map(|m| m.id.clone());
    }
    match g.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            prepare_rebalance(g, now, out);
            try_complete_join(g, now, out);
        }
        GroupState::PreparingRebalance => {
            if g.members.is_empty() {
                g.initial_delay_until = None;
            }
            try_complete_join(g, now, out);
        }
        GroupState::Empty => {}
    }
    g.check();
}

/// Runs the group's timers at `now`: ended sessions, an ended join phase (or initial delay),
/// an ended sync phase.
pub fn tick(g: &mut Group, now: i64, out: &mut Out) {
    let expired: Vec<String> = g
        .members
        .values()
        .filter(|m| m.join_waiter.is_none() && m.sync_waiter.is_none() && m.session_deadline <= now)
        .map(|m| m.id.clone())
        .collect();
    for id in expired {
        remove_member(g, now, &id, out);
    }
    let Some(deadline) = g.deadline.filter(|d| *d <= now) else {
        return;
    };
    match g.state {
        GroupState::PreparingRebalance => {
            debug_assert!(deadline <= now);
            g.initial_delay_until = None;
            complete_join(g, now, out);
        }
        GroupState::CompletingRebalance => {
            // The leader never sent its assignment: members that did not sync go.
            let gone: Vec<String> = g
                .members
                .values()
                .filter(|m| m.sync_waiter.is_none())
                .map(|m| m.id.clone())
                .collect();
            for m in g.members.values_mut() {
                if let Some(w) = m.sync_waiter.take() {
                    out.reply(w, Reply::Sync(sync_error(ErrorCode::REBALANCE_IN_PROGRESS)));
                }
            }
            for id in gone {
                g.members.remove(&id);
            }
            if g.leader.as_ref().is_some_and(|l| !g.members.contains_key(l)) {
                g.leader = g.members.values().min_by_key(|m| m.joined_seq).map(|m| m.id.clone());
            }
            prepare_rebalance(g, now, out);
            try_complete_join(g, now, out);
        }
        _ => g.deadline = None,
    }
    g.check();
}
