//! CreatePlan: checks the request, plans the moves over the cluster as read (the view, the
//! brokers' log dir reports, the cordons, the other plans' partitions), and stores the plan with
//! the cordon a drain sets in ONE transaction guarded by the plan key's absence and the config
//! record's revision. Everything is checked before anything is written; a dry run writes nothing.

use std::collections::HashSet;

use metastore::Client;
use proto::cluster_view::ClusterView;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::create_plan_request::Kind;
use proto::ferry::{CreatePlanRequest, CreatePlanResponse, PlanInfo};
use proto::{cordon, keys};

use crate::plan::error::tolerance;
use crate::plan::{
    balance, balance_dirs, drain_broker, drain_dir, CapsRequest, ClusterModel, PlanError, Planned, Summary,
};
use crate::plan_store::{config_put, cordon_change, Loaded};
use crate::plan_view::{cluster_model, open_partitions, DirReports};
use crate::store::{at_revision, load_view};
use crate::throttles::BrokerConfigs;
use crate::write_runner::{Outcome, Plan as Writes, Runner};

/// The tolerance of a balance when the request gives none, in percent.
pub const DEFAULT_TOLERANCE_PCT: u32 = 10;

/// A request's kind, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// Drain a broker.
    DrainBroker(i32),
    /// Drain a dir of a broker (as the request spells it).
    DrainDir(i32, String),
    /// Balance brokers.
    Balance(u32),
    /// Balance a broker's dirs.
    BalanceDirs(i32, u32),
}

/// A request checked: its kind, caps and throttle.
#[derive(Debug, Clone)]
pub struct Checked {
    /// What to plan.
    pub asked: Asked,
    /// The caps, defaults filled in.
    pub caps: crate::plan::Caps,
    /// Bytes/s, 0 for none.
    pub throttle: u64,
}

/// Checks what a request gives before anything is read: a kind, caps of 1 or more, a throttle
/// above 0, a tolerance of 0 to 100. The refusal names the field.
pub fn check(req: &CreatePlanRequest) -> Result<Checked, Refusal> {
    let c = req.caps.unwrap_or_default();
    let caps = CapsRequest {
        into_broker: c.max_moves_into_broker,
        out_of_broker: c.max_moves_out_of_broker,
        dir_moves_per_broker: c.max_dir_moves_per_broker,
        cluster: c.max_moves_in_cluster,
    }
    .resolve()
    .map_err(|e| e.refusal())?;
    let throttle = match req.throttle_rate {
        Some(t) if t <= 0 => {
            return Err(Refusal::new(
                ErrorCode::INVALID_THROTTLE,
                format!("throttle_rate: {t} bytes/s; a throttle must be greater than 0"),
            ))
        }
        Some(t) => t as u64,
        None => 0,
    };
    let tol = |t: Option<u32>| tolerance(i64::from(t.unwrap_or(DEFAULT_TOLERANCE_PCT))).map_err(|e| e.refusal());
    let asked = match &req.kind {
        None => {
            return Err(Refusal::new(
                ErrorCode::INVALID_REQUEST,
                "kind: give one of drain_broker, drain_dir, balance, balance_dirs",
            ))
        }
        Some(Kind::DrainBroker(d)) => Asked::DrainBroker(d.broker),
        Some(Kind::DrainDir(d)) if d.dir.trim().is_empty() => {
            return Err(Refusal::new(ErrorCode::INVALID_REQUEST, "dir: empty"))
        }
        Some(Kind::DrainDir(d)) => Asked::DrainDir(d.broker, d.dir.clone()),
        Some(Kind::Balance(b)) => Asked::Balance(tol(b.tolerance_pct)?),
        Some(Kind::BalanceDirs(b)) => Asked::BalanceDirs(b.broker, tol(b.tolerance_pct)?),
    };
    Ok(Checked { asked, caps, throttle })
}

/// What a plan is made over.
pub struct Read {
    /// Brokers, topics and partitions.
    pub view: ClusterView,
    /// The broker config records.
    pub configs: BrokerConfigs,
    /// The stored plans and the next id.
    pub plans: Loaded,
    /// The brokers' log dir reports.
    pub reports: DirReports,
}

/// Reads what a plan is made over: the view, the config records, the plans, and every
/// broker's log dirs (a broker that does not answer is left out of the sizes).
pub async fn read(client: &Client, channels: &metastore::peers::Peers) -> Result<Read, metastore::ClientError> {
    let (view, configs, plans) = tokio::try_join!(
        load_view(client),
        crate::throttles::load_broker_configs(client),
        crate::plan_store::load_plans(client)
    )?;
    let answers = crate::log_dirs::describe_log_dirs(&view, channels, &[], &[]).await;
    Ok(Read {
        view,
        configs,
        plans,
        reports: DirReports::of(&answers),
    })
}

/// The absolute path of `dir` as `broker` resolves it (relative against its working dir).
fn resolve_dir(view: &ClusterView, broker: i32, dir: &str) -> String {
    let work = view.brokers.get(&broker).map_or("/", |r| r.work_dir.as_str());
    let abs = cordon::absolute(if work.is_empty() { "/" } else { work }, dir);
    // As registered: the broker's own spelling of that dir.
    view.brokers
        .get(&broker)
        .and_then(|r| r.log_dirs.iter().find(|d| cordon::absolute("/", d) == abs).cloned())
        .unwrap_or(abs)
}

/// The moves of the asked plan over `model` (with the drain's own cordon in it), and notes.
fn plan_moves(
    asked: &Asked,
    model: &mut ClusterModel,
    view: &ClusterView,
) -> Result<(Planned, Vec<String>), PlanError> {
    let mut notes = Vec::new();
    let planned = match asked {
        Asked::DrainBroker(b) => {
            model.cordons.brokers.insert(*b);
            drain_broker(model, *b)?
        }
        Asked::DrainDir(b, dir) => {
            let dir = resolve_dir(view, *b, dir);
            if let Some(d) = model.dir_id(*b, &dir) {
                model.cordons.dirs.insert((*b, d));
            }
            drain_dir(model, *b, &dir)?
        }
        Asked::Balance(t) => {
            let b = balance(model, i64::from(*t))?;
            if !b.within_tolerance {
                notes.push(format!("the plan cannot bring every broker within {t}% of the mean"));
            }
            b.planned
        }
        Asked::BalanceDirs(broker, t) => {
            let b = balance_dirs(model, *broker, i64::from(*t))?;
            if !b.within_tolerance {
                notes.push(format!(
                    "the plan cannot bring every dir of broker {broker} within {t}% of the mean"
                ));
            }
            b.planned
        }
    };
    Ok((planned, notes))
}

/// The plan a request makes over `r`, its summary and notes.
pub fn decide(c: &Checked, r: &Read) -> Result<(crate::plan::Plan, Summary, Vec<String>), Refusal> {
    let busy: HashSet<(String, u32)> = r
        .plans
        .plans
        .iter()
        .filter(|s| !s.plan.state.is_terminal())
        .flat_map(|s| open_partitions(&s.plan))
        .collect();
    let mut model = cluster_model(&r.view, &r.reports, &r.configs, &busy);
    let (planned, mut notes) = plan_moves(&c.asked, &mut model, &r.view).map_err(|e| e.refusal())?;
    let summary = planned.summary;
    notes.extend(crate::plan_info::left_out_note(&summary));
    let plan = planned
        .into_plan(r.plans.next_id, c.caps, c.throttle, model.names)
        .map_err(|e| e.refusal())?;
    Ok((plan, summary, notes))
}

/// The writes of a created plan: its key (guarded absent) and, for a drain, the cordon.
pub fn writes(c: &Checked, r: &Read, plan: &crate::plan::Plan) -> Writes<()> {
    let mut guards = vec![at_revision(keys::plan(plan.id), 0)];
    let mut ops = vec![crate::plan_step::plan_put(plan)];
    let cordon = match &c.asked {
        Asked::DrainBroker(b) => Some((*b, None)),
        Asked::DrainDir(b, dir) => Some((*b, Some(resolve_dir(&r.view, *b, dir)))),
        _ => None,
    };
    if let Some((b, dir)) = cordon {
        let (rec, rev) = r.configs.get(&b).cloned().unwrap_or_default();
        if let Some(next) = cordon_change(&rec, r.view.brokers.get(&b), dir.as_deref(), true) {
            guards.push(at_revision(keys::broker_config(b), rev));
            ops.push(config_put(b, &next));
        }
    }
    Writes::write(guards, ops, ())
}

fn refused(e: Refusal) -> CreatePlanResponse {
    CreatePlanResponse {
        error_code: e.code.0,
        error_message: e.message,
        plan: None,
    }
}

/// The answer's plan: its numbers, its moves for a dry run, and the notes.
fn answer(plan: &crate::plan::Plan, summary: &Summary, notes: Vec<String>, dry_run: bool) -> PlanInfo {
    let mut info = if dry_run {
        crate::plan_info::dry_run(plan, summary)
    } else {
        crate::plan_info::info(plan, &Default::default(), false)
    };
    info.notes.extend(notes);
    info
}

/// CreatePlan: plans the moves of a drain or a balance and stores the plan with its cordon (or
/// only answers it, for a dry run).
pub async fn create(
    client: &Client,
    channels: &metastore::peers::Peers,
    req: CreatePlanRequest,
) -> Result<CreatePlanResponse, metastore::ClientError> {
    let checked = match check(&req) {
        Ok(c) => c,
        Err(e) => return Ok(refused(e)),
    };
    let dry_run = req.dry_run;
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        "the cluster kept changing while the plan was made; retry",
    );
    let outcome: Outcome<PlanInfo> = Runner::new(client, "create plan", kept_changing)
        .run_off_runtime(
            || read(client, channels),
            move |r: Read| {
                let (plan, summary, notes) = decide(&checked, &r)?;
                let info = answer(&plan, &summary, notes, dry_run);
                if dry_run {
                    return Ok(Writes::answer(info));
                }
                let w = writes(&checked, &r, &plan);
                Ok(Writes::write(w.guards, w.ops, info))
            },
        )
        .await?;
    Ok(match outcome {
        Ok(info) => {
            if !dry_run {
                tracing::info!(
                    plan = info.id,
                    kind = info.kind,
                    target = info.target,
                    moves = info.moves_total,
                    "plan stored"
                );
            }
            CreatePlanResponse {
                plan: Some(info),
                ..Default::default()
            }
        }
        Err(e) => refused(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::ferry::{DrainBrokerPlan, DrainDirPlan, PlanCaps};

    #[test]
    fn the_request_is_checked_field_by_field_before_anything_is_read() {
        let mut req = CreatePlanRequest::default();
        assert!(check(&req).unwrap_err().message.starts_with("kind:"));
        req.kind = Some(Kind::DrainBroker(DrainBrokerPlan { broker: 1 }));
        req.caps = Some(PlanCaps {
            max_moves_out_of_broker: Some(0),
            ..Default::default()
        });
        let e = check(&req).unwrap_err();
        assert!(e.message.contains("max_moves_out_of_broker"), "{}", e.message);
        req.caps = None;
        req.throttle_rate = Some(-1);
        assert!(check(&req).unwrap_err().message.starts_with("throttle_rate"));
        req.throttle_rate = Some(100);
        let c = check(&req).unwrap();
        assert_eq!(
            (c.asked, c.throttle, c.caps.out_of_broker),
            (Asked::DrainBroker(1), 100, 5)
        );
        req.kind = Some(Kind::DrainDir(DrainDirPlan {
            broker: 1,
            dir: " ".into(),
        }));
        assert!(check(&req).unwrap_err().message.starts_with("dir:"));
    }
}
