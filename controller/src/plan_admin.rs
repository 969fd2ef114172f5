//! The plan operations of the `Admin` service: create (or dry-run, [`crate::plan_create`]),
//! list with progress, pause, resume, cancel, and undrain. Writes are guarded by the revisions
//! read; the active controller's driver ([`crate::plan_driver`]) does the moves and rollbacks.

use metastore::Client;
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::alter_plan_request::Action;
use proto::ferry::{
    AlterPlanRequest, AlterPlanResponse, CreatePlanRequest, CreatePlanResponse, ListPlansRequest, ListPlansResponse,
    OngoingReassignment, UndrainRequest, UndrainResponse,
};
use proto::{cordon, keys};

use crate::plan::{drain, schedule, MoveState, PlanError};
use crate::plan_info::{info, mark_stuck, Progress};
use crate::plan_store::{config_put, config_record, cordon_change, load_plan, load_plans, StoredPlan};
use crate::reassign_progress::{leaders, replica_sizes, ProgressSamples};
use crate::store::{at_revision, load_view};
use crate::write_runner::{Outcome, Plan as Writes, Runner};

/// CreatePlan: see [`crate::plan_create::create`].
pub async fn create(
    client: &Client,
    channels: &metastore::peers::Peers,
    req: CreatePlanRequest,
) -> Result<CreatePlanResponse, metastore::ClientError> {
    crate::plan_create::create(client, channels, req).await
}

/// The reassignments of the plans' running moves, as ListPartitionReassignments lists them.
fn running_entries(view: &proto::cluster_view::ClusterView, plans: &[StoredPlan]) -> Vec<OngoingReassignment> {
    let mut out = Vec::new();
    for s in plans.iter().filter(|s| !s.plan.state.is_terminal()) {
        for m in s
            .plan
            .moves
            .iter()
            .filter(|m| matches!(m.state, MoveState::Running { .. }))
        {
            let (topic, p) = (s.plan.names.topic(m.partition), m.partition.partition);
            let Some(e) = view.partition(topic, p) else { continue };
            let Some(r) = &e.state.reassignment else { continue };
            out.push(OngoingReassignment {
                topic: topic.to_string(),
                partition: p,
                replicas: e.state.replicas.clone(),
                adding: e.state.adding.clone(),
                removing: e.state.removing.clone(),
                original_replicas: r.original.clone(),
                target: r.target.clone(),
                throttle_rate: r.throttle_rate,
                progress: vec![],
                target_log_dirs: r.target_log_dirs.clone(),
                dir_pending: e.state.dir_pending.clone(),
            });
        }
    }
    out
}

/// ListPlans: the stored plans (or one) with counts, bytes, per-broker loads and, when asked,
/// their moves; the running moves' bytes left are measured as reassignment progress is.
pub async fn list(
    client: &Client,
    channels: &metastore::peers::Peers,
    samples: &ProgressSamples,
    req: ListPlansRequest,
) -> Result<ListPlansResponse, metastore::ClientError> {
    let plans: Vec<StoredPlan> = match req.id {
        Some(id) => match load_plan(client, id).await? {
            Some(Ok(p)) => vec![p],
            Some(Err(e)) => return Ok(list_refused(e.refusal())),
            None => {
                return Ok(list_refused(Refusal::new(
                    ErrorCode::INVALID_REQUEST,
                    format!("id: no plan {id}"),
                )))
            }
        },
        None => load_plans(client).await?.plans,
    };
    let mut progress = Progress::new();
    let mut live = None;
    let running = plans.iter().any(|s| {
        !s.plan.state.is_terminal()
            && s.plan
                .moves
                .iter()
                .any(|m| matches!(m.state, MoveState::Running { .. }))
    });
    if running {
        let view = load_view(client).await?;
        live = Some(view.live_brokers());
        let mut entries = running_entries(&view, &plans);
        if !entries.is_empty() {
            let sizes = replica_sizes(&view, channels, &entries).await;
            let leaders = leaders(&view, &entries);
            samples.fill(&mut entries, &leaders, &sizes);
            progress = entries
                .into_iter()
                .map(|e| ((e.topic, e.partition), e.progress))
                .collect();
        }
    }
    // A plan not ended says which of its brokers are down even with no move running.
    if live.is_none() && plans.iter().any(|s| !s.plan.state.is_terminal()) {
        live = Some(crate::store::load_brokers_view(client).await?.live_brokers());
    }
    let with_moves = req.with_moves;
    let plans = crate::off_runtime(move || {
        let mut out: Vec<_> = plans.iter().map(|s| info(&s.plan, &progress, with_moves)).collect();
        // A running move waiting on a dead broker is named, as a queued one is.
        if let Some(live) = &live {
            out.iter_mut().for_each(|p| mark_stuck(p, live));
        }
        out
    })
    .await;
    Ok(ListPlansResponse {
        plans,
        ..Default::default()
    })
}

fn list_refused(e: Refusal) -> ListPlansResponse {
    ListPlansResponse {
        error_code: e.code.0,
        error_message: e.message,
        plans: vec![],
    }
}

fn alter_refused(e: Refusal) -> AlterPlanResponse {
    AlterPlanResponse {
        error_code: e.code.0,
        error_message: e.message,
        plan: None,
    }
}

/// The plan's next state for an AlterPlan action, or the refusal naming the plan and its state.
pub fn apply_action(plan: &mut crate::plan::Plan, action: Action) -> Result<(), PlanError> {
    match action {
        Action::Pause => schedule::pause(plan),
        Action::Resume => schedule::resume(plan),
        Action::Cancel => schedule::cancel(plan),
    }
}

/// AlterPlan: pause, resume or cancel a plan, guarded by its revision. A cancel drops the
/// queued moves here; the driver rolls back those in flight.
pub async fn alter(client: &Client, req: AlterPlanRequest) -> Result<AlterPlanResponse, metastore::ClientError> {
    let Ok(action) = Action::try_from(req.action) else {
        return Ok(alter_refused(Refusal::new(
            ErrorCode::INVALID_REQUEST,
            format!("action: unknown action {} (PAUSE 0, RESUME 1, CANCEL 2)", req.action),
        )));
    };
    let id = req.id;
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        format!("plan {id} kept changing; retry"),
    );
    let outcome: Outcome<proto::ferry::PlanInfo> = Runner::new(client, "alter plan", kept_changing)
        .run_off_runtime(
            || load_plan(client, id),
            move |stored: Option<Result<StoredPlan, PlanError>>| {
                let mut s = match stored {
                    None => return Err(Refusal::new(ErrorCode::INVALID_REQUEST, format!("id: no plan {id}"))),
                    Some(Err(e)) => return Err(e.refusal()),
                    Some(Ok(s)) => s,
                };
                apply_action(&mut s.plan, action).map_err(|e| e.refusal())?;
                let answer = info(&s.plan, &Progress::new(), false);
                Ok(Writes::write(
                    vec![at_revision(keys::plan(id), s.revision)],
                    vec![crate::plan_step::plan_put(&s.plan)],
                    answer,
                ))
            },
        )
        .await?;
    Ok(match outcome {
        Ok(plan) => AlterPlanResponse {
            plan: Some(plan),
            ..Default::default()
        },
        Err(e) => alter_refused(e),
    })
}

/// What an undrain reads: the broker's registration, its config record and the plans.
struct UndrainRead {
    reg: Option<proto::ferry::BrokerRegistration>,
    config: (proto::ferry::BrokerConfigRecord, u64),
    plans: Vec<StoredPlan>,
}

async fn undrain_read(client: &Client, broker: i32) -> Result<UndrainRead, metastore::ClientError> {
    let (reg_key, config_key) = (keys::broker(broker), keys::broker_config(broker));
    let (reg, config, plans) = tokio::try_join!(client.get(&reg_key), client.get(&config_key), load_plans(client))?;
    let reg = reg.and_then(|kv| prost::Message::decode(kv.value.as_ref()).ok());
    Ok(UndrainRead {
        reg,
        config: config_record(config.as_ref()),
        plans: plans.plans,
    })
}

/// An undrain's writes: the uncordon, and each running drain of that broker (or dir) with its
/// queued moves dropped. The answer names the plans stopped.
fn undrain_writes(broker: i32, dir: Option<&str>, r: UndrainRead) -> Result<Writes<Vec<u64>>, Refusal> {
    let dir = match (dir, &r.reg) {
        (None, _) => None,
        (Some(d), Some(reg)) => {
            let abs = cordon::absolute(if reg.work_dir.is_empty() { "/" } else { &reg.work_dir }, d);
            match reg.log_dirs.iter().find(|x| cordon::absolute("/", x) == abs) {
                Some(x) => Some(x.clone()),
                None => {
                    return Err(PlanError::UnknownDir {
                        broker,
                        dir: d.to_string(),
                    }
                    .refusal())
                }
            }
        }
        // Not registered: its dirs are unknown; an absolute name is taken as given.
        (Some(d), None) => Some(cordon::absolute("/", d)),
    };
    let (mut guards, mut ops, mut stopped) = (vec![], vec![], vec![]);
    if let Some(next) = cordon_change(&r.config.0, r.reg.as_ref(), dir.as_deref(), false) {
        guards.push(at_revision(keys::broker_config(broker), r.config.1));
        ops.push(config_put(broker, &next));
    }
    for mut s in r.plans.into_iter().filter(|s| !s.plan.state.is_terminal()) {
        let dir_id = match &dir {
            None => None,
            Some(d) => match s.plan.names.dirs.iter().position(|x| x == d) {
                Some(i) => Some(crate::plan::DirId(i as u32)),
                None => continue,
            },
        };
        if drain::undrain(&mut s.plan, broker, dir_id).is_err() {
            continue;
        }
        guards.push(at_revision(keys::plan(s.plan.id), s.revision));
        ops.push(crate::plan_step::plan_put(&s.plan));
        stopped.push(s.plan.id);
    }
    Ok(Writes::write(guards, ops, stopped))
}

/// Undrain: uncordon a broker or dir and stop its drain: queued moves are dropped, moves in
/// flight finish, and the driver ends the plan once they have.
pub async fn undrain(client: &Client, req: UndrainRequest) -> Result<UndrainResponse, metastore::ClientError> {
    let broker = req.broker;
    let dir = req.dir.clone();
    let kept_changing = Refusal::new(
        ErrorCode::INVALID_UPDATE_VERSION,
        "the plans or configs kept changing; retry",
    );
    let outcome = Runner::new(client, "undrain", kept_changing)
        .run_off_runtime(
            || undrain_read(client, broker),
            move |r| undrain_writes(broker, dir.as_deref(), r),
        )
        .await?;
    Ok(match outcome {
        Ok(stopped) => UndrainResponse {
            stopped,
            ..Default::default()
        },
        Err(e) => UndrainResponse {
            error_code: e.code.0,
            error_message: e.message,
            stopped: vec![],
        },
    })
}
