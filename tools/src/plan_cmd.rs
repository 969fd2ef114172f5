//! `ferry plan`: plans that the controller writes and runs (drain a broker or a dir, balance the
//! brokers or the dirs of one broker), their dry runs, and showing, pausing, resuming and
//! cancelling them, over the `Admin` service.

use anyhow::bail;
use broker::ClusterClient;
use clap::{Args, Subcommand};
use proto::errors::{ErrorCode, Refusal};
use proto::ferry::{
    alter_plan_request::Action, create_plan_request::Kind, AlterPlanRequest, BalanceDirsPlan, BalancePlan,
    CreatePlanRequest, DrainBrokerPlan, DrainDirPlan, ListPlansRequest, PlanCaps, PlanInfo, UndrainRequest,
};

use crate::plan_text::{dry_run_lines, plan_lines, show_lines};
use crate::{Bootstrap, ExitCode};

/// Flags of `ferry plan`.
#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    command: PlanCommand,
}

/// The concurrency caps of a new plan; each left out takes the controller's default.
#[derive(Args, Clone, Copy, Default)]
pub struct CapsArgs {
    /// Moves copying into one broker at once.
    #[arg(long)]
    max_moves_into_broker: Option<i64>,
    /// Moves taking a replica out of one broker at once.
    #[arg(long)]
    max_moves_out_of_broker: Option<i64>,
    /// Moves between the log dirs of one broker at once.
    #[arg(long)]
    max_dir_moves_per_broker: Option<i64>,
    /// Moves in the whole cluster at once.
    #[arg(long)]
    max_moves_in_cluster: Option<i64>,
}

/// What every new plan takes besides its kind: caps, throttle, dry run.
#[derive(Args, Clone, Copy, Default)]
pub struct NewPlanArgs {
    #[command(flatten)]
    caps: CapsArgs,
    /// Replication throttle in bytes/s that the plan's moves carry; removed when the plan ends.
    #[arg(long)]
    throttle: Option<i64>,
    /// Print the moves, the bytes and the expected time at the throttle; store nothing.
    #[arg(long)]
    dry_run: bool,
}

/// `ferry plan`'s commands.
#[derive(Subcommand)]
enum PlanCommand {
    /// Cordon a broker (or one of its log dirs) and move every replica off it.
    Drain {
        /// The broker to drain.
        #[arg(long)]
        broker: i32,
        /// Drain only this log dir of the broker, onto its other dirs.
        #[arg(long)]
        dir: Option<String>,
        #[command(flatten)]
        new: NewPlanArgs,
    },
    /// Balance the brokers by replica count and bytes, rack-aware, moving as few bytes as it can.
    Balance {
        /// Allowed distance from the mean, in percent.
        #[arg(long)]
        tolerance_pct: Option<u32>,
        #[command(flatten)]
        new: NewPlanArgs,
    },
    /// Balance the log dirs of one broker by bytes.
    BalanceDirs {
        /// The broker whose dirs to balance.
        #[arg(long)]
        broker: i32,
        /// Allowed distance from the mean, in percent.
        #[arg(long)]
        tolerance_pct: Option<u32>,
        #[command(flatten)]
        new: NewPlanArgs,
    },
    /// Uncordon a broker (or one of its dirs) and stop its drain: queued moves are dropped.
    Undrain {
        /// The broker to uncordon.
        #[arg(long)]
        broker: i32,
        /// Only this log dir.
        #[arg(long)]
        dir: Option<String>,
    },
    /// Show the plans (or one) with their progress per broker.
    Show {
        /// Only this plan.
        id: Option<u64>,
        /// Each move with its state and the reason it waits, was skipped or failed.
        #[arg(long)]
        moves: bool,
        /// Live bars per plan and per broker until every plan shown has ended.
        #[arg(long)]
        watch: bool,
    },
    /// Pause a plan: moves in flight finish, no new one starts.
    Pause {
        /// The plan.
        id: u64,
    },
    /// Resume a paused plan.
    Resume {
        /// The plan.
        id: u64,
    },
    /// Cancel a plan: moves in flight roll back, queued ones are dropped.
    Cancel {
        /// The plan.
        id: u64,
    },
}

/// A flag's value checked to be above zero, as the server checks it again.
fn positive(flag: &str, v: Option<i64>) -> anyhow::Result<Option<i64>> {
    match v {
        Some(n) if n <= 0 => bail!("--{flag} must be above zero, got {n}"),
        _ => Ok(v),
    }
}

/// The request of a new plan of `kind`, its caps and throttle checked.
pub fn create_request(kind: Kind, new: &NewPlanArgs) -> anyhow::Result<CreatePlanRequest> {
    let c = &new.caps;
    Ok(CreatePlanRequest {
        kind: Some(kind),
        caps: Some(PlanCaps {
            max_moves_into_broker: positive("max-moves-into-broker", c.max_moves_into_broker)?,
            max_moves_out_of_broker: positive("max-moves-out-of-broker", c.max_moves_out_of_broker)?,
            max_dir_moves_per_broker: positive("max-dir-moves-per-broker", c.max_dir_moves_per_broker)?,
            max_moves_in_cluster: positive("max-moves-in-cluster", c.max_moves_in_cluster)?,
        }),
        throttle_rate: positive("throttle", new.throttle)?,
        dry_run: new.dry_run,
    })
}

/// A refusal of the server, printed as Kafka's code name and the message; exit code 1.
fn refused(code: i32, message: &str) -> anyhow::Error {
    eprintln!("error: {}", Refusal::new(ErrorCode(code), message));
    ExitCode(1).into()
}

async fn create(c: &ClusterClient, req: CreatePlanRequest) -> anyhow::Result<()> {
    let r = c
        .admin_call(|mut x| {
            let req = req.clone();
            async move { x.create_plan(req).await }
        })
        .await?;
    if r.error_code != 0 {
        return Err(refused(r.error_code, &r.error_message));
    }
    let Some(p) = r.plan else {
        bail!("the server answered no plan");
    };
    if req.dry_run {
        for line in dry_run_lines(&p) {
            println!("{line}");
        }
        return Ok(());
    }
    println!(
        "Started plan {}; follow it with `ferry plan show {} --watch`.",
        p.id, p.id
    );
    for line in plan_lines(&p) {
        println!("{line}");
    }
    Ok(())
}

/// The plans `ListPlans` answers (one with `id`), refused answers turned into an error.
async fn list(c: ClusterClient, id: Option<u64>, with_moves: bool) -> anyhow::Result<Vec<PlanInfo>> {
    let req = ListPlansRequest { id, with_moves };
    let r = c.admin_call(|mut x| async move { x.list_plans(req).await }).await?;
    if r.error_code != 0 {
        return Err(refused(r.error_code, &r.error_message));
    }
    Ok(r.plans)
}

async fn alter(c: &ClusterClient, id: u64, action: Action) -> anyhow::Result<()> {
    let req = AlterPlanRequest {
        id,
        action: action as i32,
    };
    let r = c.admin_call(|mut x| async move { x.alter_plan(req).await }).await?;
    if r.error_code != 0 {
        return Err(refused(r.error_code, &r.error_message));
    }
    let verb = match action {
        Action::Pause => "Paused",
        Action::Resume => "Resumed",
        Action::Cancel => "Cancelling",
    };
    println!("{verb} plan {id}.");
    if let Some(p) = r.plan {
        for line in plan_lines(&p) {
            println!("{line}");
        }
    }
    Ok(())
}

async fn undrain(c: &ClusterClient, broker: i32, dir: Option<String>) -> anyhow::Result<()> {
    let what = match &dir {
        Some(d) => format!("log dir {d} of broker {broker}"),
        None => format!("broker {broker}"),
    };
    let req = UndrainRequest { broker, dir };
    let r = c
        .admin_call(|mut x| {
            let req = req.clone();
            async move { x.undrain(req).await }
        })
        .await?;
    if r.error_code != 0 {
        return Err(refused(r.error_code, &r.error_message));
    }
    println!("{}", undrain_line(&what, &r.stopped));
    Ok(())
}

/// What an undrain did: uncordoned `what`, and which drains it stopped.
pub fn undrain_line(what: &str, stopped: &[u64]) -> String {
    match stopped {
        [] => format!("Uncordoned {what}; no drain of it was running."),
        [id] => format!("Uncordoned {what}; stopped drain plan {id}."),
        ids => {
            let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
            format!("Uncordoned {what}; stopped drain plans {}.", ids.join(", "))
        }
    }
}

/// Runs `ferry plan`.
pub async fn run(a: PlanArgs) -> anyhow::Result<()> {
    // Flags are checked before anything connects.
    let req = match &a.command {
        PlanCommand::Drain { broker, dir, new } => {
            let kind = match dir {
                Some(d) => Kind::DrainDir(DrainDirPlan {
                    broker: *broker,
                    dir: d.clone(),
                }),
                None => Kind::DrainBroker(DrainBrokerPlan { broker: *broker }),
            };
            Some(create_request(kind, new)?)
        }
        PlanCommand::Balance { tolerance_pct, new } => Some(create_request(
            Kind::Balance(BalancePlan {
                tolerance_pct: *tolerance_pct,
            }),
            new,
        )?),
        PlanCommand::BalanceDirs {
            broker,
            tolerance_pct,
            new,
        } => Some(create_request(
            Kind::BalanceDirs(BalanceDirsPlan {
                broker: *broker,
                tolerance_pct: *tolerance_pct,
            }),
            new,
        )?),
        _ => None,
    };
    let c = a.bootstrap.cluster()?;
    if let Some(req) = req {
        return create(&c, req).await;
    }
    match a.command {
        PlanCommand::Undrain { broker, dir } => undrain(&c, broker, dir).await,
        PlanCommand::Show { id, moves, watch } => {
            if watch {
                return crate::plan_watch::run(&c, |c| list(c, id, moves)).await;
            }
            for line in show_lines(&list(c.clone(), id, moves).await?) {
                println!("{line}");
            }
            Ok(())
        }
        PlanCommand::Pause { id } => alter(&c, id, Action::Pause).await,
        PlanCommand::Resume { id } => alter(&c, id, Action::Resume).await,
        PlanCommand::Cancel { id } => alter(&c, id, Action::Cancel).await,
        // Handled above.
        PlanCommand::Drain { .. } | PlanCommand::Balance { .. } | PlanCommand::BalanceDirs { .. } => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(caps: CapsArgs, throttle: Option<i64>) -> NewPlanArgs {
        NewPlanArgs {
            caps,
            throttle,
            dry_run: true,
        }
    }

    fn drain() -> Kind {
        Kind::DrainBroker(DrainBrokerPlan { broker: 3 })
    }

    #[test]
    fn caps_of_zero_or_below_are_refused_naming_the_flag() {
        let cases = [
            (
                CapsArgs {
                    max_moves_into_broker: Some(0),
                    ..Default::default()
                },
                "--max-moves-into-broker must be above zero, got 0",
            ),
            (
                CapsArgs {
                    max_moves_out_of_broker: Some(-1),
                    ..Default::default()
                },
                "--max-moves-out-of-broker must be above zero, got -1",
            ),
            (
                CapsArgs {
                    max_dir_moves_per_broker: Some(0),
                    ..Default::default()
                },
                "--max-dir-moves-per-broker must be above zero, got 0",
            ),
            (
                CapsArgs {
                    max_moves_in_cluster: Some(-5),
                    ..Default::default()
                },
                "--max-moves-in-cluster must be above zero, got -5",
            ),
        ];
        for (caps, want) in cases {
            let e = create_request(drain(), &new(caps, None)).unwrap_err();
            assert_eq!(e.to_string(), want);
        }
        let e = create_request(drain(), &new(CapsArgs::default(), Some(0))).unwrap_err();
        assert_eq!(e.to_string(), "--throttle must be above zero, got 0");
    }

    #[test]
    fn given_caps_and_throttle_go_into_the_request_and_absent_ones_stay_absent() {
        let caps = CapsArgs {
            max_moves_into_broker: Some(4),
            max_moves_in_cluster: Some(20),
            ..Default::default()
        };
        let r = create_request(drain(), &new(caps, Some(1_000_000))).unwrap();
        assert_eq!(
            r.caps,
            Some(PlanCaps {
                max_moves_into_broker: Some(4),
                max_moves_out_of_broker: None,
                max_dir_moves_per_broker: None,
                max_moves_in_cluster: Some(20),
            })
        );
        assert_eq!(r.throttle_rate, Some(1_000_000));
        assert!(r.dry_run);
        assert_eq!(r.kind, Some(drain()));
    }

    #[test]
    fn an_undrain_says_which_drains_it_stopped() {
        assert_eq!(
            undrain_line("broker 3", &[]),
            "Uncordoned broker 3; no drain of it was running."
        );
        assert_eq!(
            undrain_line("broker 3", &[7]),
            "Uncordoned broker 3; stopped drain plan 7."
        );
        assert_eq!(
            undrain_line("log dir /d1 of broker 3", &[7, 9]),
            "Uncordoned log dir /d1 of broker 3; stopped drain plans 7, 9."
        );
    }

    #[test]
    fn the_subcommands_parse_as_documented() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            plan: PlanArgs,
        }
        let cli = Cli::try_parse_from([
            "plan",
            "drain",
            "--broker",
            "3",
            "--dir",
            "/d1",
            "--max-moves-into-broker",
            "4",
            "--throttle",
            "1000",
            "--dry-run",
        ])
        .unwrap();
        match cli.plan.command {
            PlanCommand::Drain { broker, dir, new } => {
                assert_eq!((broker, dir.as_deref()), (3, Some("/d1")));
                assert_eq!(new.caps.max_moves_into_broker, Some(4));
                assert_eq!(new.throttle, Some(1000));
                assert!(new.dry_run);
            }
            _ => panic!("not a drain"),
        }
        let cli = Cli::try_parse_from(["plan", "show", "7", "--watch"]).unwrap();
        assert!(matches!(
            cli.plan.command,
            PlanCommand::Show {
                id: Some(7),
                moves: false,
                watch: true
            }
        ));
        assert!(Cli::try_parse_from(["plan", "balance-dirs", "--tolerance-pct", "10"]).is_err());
        assert!(Cli::try_parse_from(["plan", "cancel"]).is_err());
    }
}
