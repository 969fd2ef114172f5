//! Drain planners: every replica off a broker (onto other brokers) or off a dir (onto the
//! broker's other dirs), and undrain, which drops a drain's moves not started yet.
//!
//! A broker drain keeps each partition's replication factor and racks, places nothing on a
//! cordoned, offline or down broker or dir, and picks for each replica the eligible broker
//! holding the fewest bytes, largest partitions first, so the brokers stay balanced. Moves of
//! partitions the drained broker leads come first, so leadership leaves it early.

use super::cluster::{ClusterModel, PartitionInfo};
use super::error::PlanError;
use super::loads::{keeps_racks, move_to, Loads};
use super::model::{DirId, Move, MoveState, Plan, PlanKind, Reason, Replica};
use super::summary::Planned;

/// The affected partitions (largest first) and how many were left out because they move.
fn affected(model: &ClusterModel, on: impl Fn(&Replica) -> bool) -> (Vec<&PartitionInfo>, u64) {
    let mut left_out = 0;
    let mut out: Vec<&PartitionInfo> = Vec::new();
    for p in model.partitions.iter().filter(|p| p.replicas.iter().any(&on)) {
        if p.moving {
            left_out += 1;
        } else {
            out.push(p);
        }
    }
    out.sort_by_key(|p| (std::cmp::Reverse(p.bytes), p.partition));
    (out, left_out)
}

/// Orders moves of partitions `broker` leads first, keeping the order within each group.
fn leaders_first(chosen: Vec<(bool, Move)>) -> Vec<Move> {
    let (mut lead, rest): (Vec<_>, Vec<_>) = chosen.into_iter().partition(|(leads, _)| *leads);
    lead.extend(rest);
    lead.into_iter().map(|(_, m)| m).collect()
}

/// Plans moving every replica off `broker` (which should be cordoned first). An error names
/// the broker and why: unknown, or a partition with no broker left to take its replica.
pub fn drain_broker(model: &ClusterModel, broker: i32) -> Result<Planned, PlanError> {
    if !model.brokers.contains_key(&broker) {
        return Err(PlanError::UnknownBroker {
            field: "broker",
            broker,
        });
    }
    let cannot = |reason: String| PlanError::CannotDrain {
        what: format!("broker {broker}"),
        reason,
    };
    let eligible: Vec<i32> = model
        .brokers
        .keys()
        .copied()
        .filter(|b| *b != broker && model.open_dirs(*b).is_some())
        .collect();
    let racks = model.racks_exist();
    let mut loads = Loads::of(model);
    let (partitions, left_out) = affected(model, |r| r.broker == broker);
    let mut chosen = Vec::with_capacity(partitions.len());
    for p in partitions {
        let name = || model.names.partition_name(p.partition);
        let at = p.replicas.iter().position(|r| r.broker == broker).unwrap_or(0);
        let candidates = eligible
            .iter()
            .copied()
            .filter(|c| !p.replicas.iter().any(|r| r.broker == *c));
        // Rack diversity first, then the fewest bytes, then the fewest replicas.
        let Some(pick) = candidates.min_by_key(|c| {
            let loses_racks = !keeps_racks(model, racks, &p.replicas, broker, *c);
            (loses_racks, loads.broker_bytes(*c), loads.broker_count(*c), *c)
        }) else {
            return Err(cannot(format!(
                "partition {} has {} replicas and no other broker can take one ({} brokers are \
                 registered, not cordoned and not already holding it: {:?})",
                name(),
                p.replicas.len(),
                eligible
                    .iter()
                    .filter(|c| !p.replicas.iter().any(|r| r.broker == **c))
                    .count(),
                eligible,
            )));
        };
        let mut to = p.replicas.clone();
        if racks && to.len() >= 2 {
            let others = to.iter().map(|r| r.broker).filter(|b| *b != broker);
            if model.distinct_racks(others.chain([pick])) == 1 {
                return Err(cannot(format!(
                    "partition {} would have every replica in rack {}",
                    name(),
                    model.rack(pick).unwrap_or("?")
                )));
            }
        }
        // open_dirs was Some for every eligible broker, so pick_dir is too.
        let dir = loads.pick_dir(model, pick, None).unwrap_or(DirId::ANY);
        loads.remove(to[at], p.bytes);
        to[at] = Replica::new(pick, dir);
        loads.add(to[at], p.bytes);
        chosen.push((p.leader == broker, move_to(p, to)));
    }
    Planned::new(PlanKind::DrainBroker { broker }, leaders_first(chosen), left_out)
}

/// Plans moving every replica in `dir` of `broker` to the broker's other open dirs, each to
/// the one holding the fewest bytes. An error names the broker or dir: unknown, or no other
/// dir open.
pub fn drain_dir(model: &ClusterModel, broker: i32, dir: &str) -> Result<Planned, PlanError> {
    if !model.brokers.contains_key(&broker) {
        return Err(PlanError::UnknownBroker {
            field: "broker",
            broker,
        });
    }
    let Some(d) = model.dir_id(broker, dir) else {
        return Err(PlanError::UnknownDir {
            broker,
            dir: dir.to_string(),
        });
    };
    let open: Vec<DirId> = model.open_dirs(broker).unwrap_or_default();
    if !open.iter().any(|o| *o != d) {
        return Err(PlanError::CannotDrain {
            what: format!("dir {dir} of broker {broker}"),
            reason: format!(
                "broker {broker} has no other log dir that is online and not cordoned, or it is down or cordoned whole"
            ),
        });
    }
    let mut loads = Loads::of(model);
    let (partitions, left_out) = affected(model, |r| r.broker == broker && r.dir == d);
    let mut chosen = Vec::with_capacity(partitions.len());
    for p in partitions {
        // An open dir other than `d` exists (checked above), so pick_dir finds one.
        let Some(target) = loads.pick_dir(model, broker, Some(d)) else {
            continue;
        };
        let mut to = p.replicas.clone();
        for r in to.iter_mut().filter(|r| r.broker == broker) {
            loads.remove(*r, p.bytes);
            r.dir = target;
            loads.add(*r, p.bytes);
        }
        chosen.push((p.leader == broker, move_to(p, to)));
    }
    Planned::new(PlanKind::DrainDir { broker, dir: d }, leaders_first(chosen), left_out)
}

/// Undrain: drops the moves of a drain of `broker` (or of its `dir`) not started yet, and
/// returns their indexes; moves in flight finish (a cancel rolls them back instead). The
/// driver uncordons. An error when the plan is not a drain of that broker or dir.
pub fn undrain(plan: &mut Plan, broker: i32, dir: Option<DirId>) -> Result<Vec<u32>, PlanError> {
    let matches = match (plan.kind, dir) {
        (PlanKind::DrainBroker { broker: b }, None) => b == broker,
        (PlanKind::DrainDir { broker: b, dir: d }, Some(want)) => b == broker && d == want,
        _ => false,
    };
    if !matches {
        return Err(PlanError::NotADrainOf {
            id: plan.id,
            what: match dir {
                None => format!("broker {broker}"),
                Some(d) => format!("dir {} of broker {broker}", plan.names.dir(d)),
            },
        });
    }
    let mut dropped = Vec::new();
    for (i, m) in plan.moves.iter_mut().enumerate() {
        if m.state.is_pending() {
            m.state = MoveState::Skipped(Reason::Undrained);
            dropped.push(i as u32);
        }
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests;
