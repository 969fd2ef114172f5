//! Broker configs at three levels and cordoned log dirs (KIP-1066), driven by Kafka's own
//! `kafka-configs` and `kafka-topics`: a per-broker dynamic value beats the cluster-wide dynamic
//! default, which beats the node's static config, which beats Kafka's default, and
//! DescribeConfigs names each value's source and synonyms as Kafka does. A broker cordoned with
//! `*` gets no new replica, a cordoned dir (named relative to the broker's working dir) gets none
//! while its broker has another, and when no broker can take a replica the request is refused.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use proto::ferry::BrokerRegistration;
use tests::data::partition_states;

const RATE: &str = "leader.replication.throttled.rate";
const MAX: &str = "9223372036854775807";

fn tool(name: &str, args: &[&str]) -> (bool, String) {
    tests::kafka::tool(name, args, "")
}

/// `kafka-configs --bootstrap-server B --entity-type brokers <entity> <rest>`.
fn configs(b: &str, entity: &[&str], rest: &[&str]) -> (bool, String) {
    let mut args = vec!["--bootstrap-server", b, "--entity-type", "brokers"];
    args.extend_from_slice(entity);
    args.extend_from_slice(rest);
    tool("kafka-configs", &args)
}

/// `to` as a path relative to `from` (both absolute).
fn relative(from: &Path, to: &Path) -> String {
    let (f, t): (Vec<Component>, Vec<Component>) = (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..f.len() {
        rel.push("..");
    }
    for c in &t[common..] {
        rel.push(c);
    }
    rel.display().to_string()
}

async fn registration(c: &broker::ClusterClient, id: i32) -> Option<BrokerRegistration> {
    c.brokers().await.ok()?.into_iter().find(|b| b.id == id)
}

/// Waits until broker `id` has published exactly `want` as its cordoned dirs.
async fn wait_cordoned(c: &broker::ClusterClient, id: i32, want: &[String]) {
    let want = want.to_vec();
    tests::wait_until(
        Duration::from_secs(60),
        &format!("broker {id} cordons {want:?}"),
        || {
            let (c, want) = (c.clone(), want.clone());
            async move { registration(&c, id).await.is_some_and(|r| r.cordoned_log_dirs == want) }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_configs_set_levels_and_cordons_keep_new_replicas_off() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (d1, d2) = (root.join("n4").join("d1"), root.join("n4").join("d2"));
    let four_dirs = format!("{},{}", d1.display(), d2.display());
    let (_four, k) = tests::kafka::start(&root, |id| match id {
        2 => vec!["--broker-config".into(), format!("{RATE}=300")],
        4 => vec!["--log-dirs".into(), four_dirs.clone()],
        _ => Vec::new(),
    })
    .await;
    let c = _four.client.clone();
    let b = k.bootstrap();
    let b = b.as_str();
    let default = ["--entity-default"];
    let broker = |id: &'static str| ["--entity-name", id];

    // The default for every broker, and broker 1's own value above it.
    let (ok, out) = configs(b, &default, &["--alter", "--add-config", &format!("{RATE}=200")]);
    assert!(ok, "{out}");
    let (ok, out) = configs(b, &broker("1"), &["--alter", "--add-config", &format!("{RATE}=100")]);
    assert!(ok, "{out}");

    let (ok, out) = configs(b, &default, &["--describe"]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "{RATE}=200 sensitive=false synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:{RATE}=200"
        )),
        "{out}"
    );
    // Without --all, a broker lists only what is set on it.
    let (ok, out) = configs(b, &broker("1"), &["--describe"]);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("{RATE}=100 sensitive=false")), "{out}");
    assert!(!out.contains("cordoned.log.dirs="), "{out}");
    let (ok, out) = configs(b, &broker("1"), &["--describe", "--all"]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "{RATE}=100 sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{RATE}=100, \
             DYNAMIC_DEFAULT_BROKER_CONFIG:{RATE}=200, DEFAULT_CONFIG:{RATE}={MAX}}}"
        )),
        "{out}"
    );
    // Broker 2 has no value of its own: the default wins over its static config.
    let (ok, out) = configs(b, &broker("2"), &["--describe", "--all"]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "{RATE}=200 sensitive=false synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:{RATE}=200, \
             STATIC_BROKER_CONFIG:{RATE}=300, DEFAULT_CONFIG:{RATE}={MAX}}}"
        )),
        "{out}"
    );
    // Without the default, the static config shows through.
    let (ok, out) = configs(b, &default, &["--alter", "--delete-config", RATE]);
    assert!(ok, "{out}");
    let (ok, out) = configs(b, &broker("2"), &["--describe", "--all"]);
    assert!(
        ok && out.contains(&format!(
            "{RATE}=300 sensitive=false synonyms={{STATIC_BROKER_CONFIG:{RATE}=300, DEFAULT_CONFIG:{RATE}={MAX}}}"
        )),
        "{out}"
    );

    // Configs Ferry does not act on, and dirs no broker has, are refused by name.
    let (ok, out) = configs(b, &broker("1"), &["--alter", "--add-config", "log.dirs=/x"]);
    assert!(
        !ok && out.contains("Cannot update these configs dynamically: log.dirs"),
        "{out}"
    );
    let (ok, out) = configs(
        b,
        &broker("4"),
        &["--alter", "--add-config", "cordoned.log.dirs=/nowhere/d9"],
    );
    assert!(
        !ok && out.contains("\"/nowhere/d9\" is not a log dir of broker 4"),
        "{out}"
    );

    // Broker 3 is cordoned whole; broker 4's d1 by a name relative to its working dir.
    let (ok, out) = configs(b, &broker("3"), &["--alter", "--add-config", "cordoned.log.dirs=*"]);
    assert!(ok, "{out}");
    let reg4 = registration(&c, 4).await.unwrap();
    let d1_relative = relative(Path::new(&reg4.work_dir), &d1);
    assert!(!d1_relative.starts_with('/'), "{d1_relative}");
    let (ok, out) = configs(
        b,
        &broker("4"),
        &["--alter", "--add-config", &format!("cordoned.log.dirs={d1_relative}")],
    );
    assert!(ok, "{out}");
    let reg3 = registration(&c, 3).await.unwrap();
    wait_cordoned(&c, 3, &reg3.log_dirs).await;
    wait_cordoned(&c, 4, &[d1.display().to_string()]).await;
    let (ok, out) = configs(b, &broker("3"), &["--describe", "--all"]);
    assert!(
        ok && out.contains(
            "cordoned.log.dirs=* sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:cordoned.log.dirs=*, \
             DEFAULT_CONFIG:cordoned.log.dirs=}"
        ),
        "{out}"
    );

    // Topic creation and partition growth leave broker 3 out; broker 4's new replicas go to d2.
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            b,
            "--create",
            "--topic",
            "spread",
            "--partitions",
            "24",
            "--replication-factor",
            "2",
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            b,
            "--alter",
            "--topic",
            "spread",
            "--partitions",
            "30",
        ],
    );
    assert!(ok, "{out}");
    // An explicit assignment naming broker 3 is refused, naming the partition and the broker.
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            b,
            "--create",
            "--topic",
            "manual",
            "--replica-assignment",
            "1:2,2:3",
        ],
    );
    assert!(
        !ok && out.contains("manual-1: broker 3 has every log dir cordoned"),
        "{out}"
    );
    let states = partition_states(&c, "spread").await.unwrap();
    assert_eq!(states.len(), 30);
    assert!(states.iter().all(|(_, s)| !s.replicas.contains(&3)), "{states:?}");
    let on_4: Vec<u32> = states
        .iter()
        .filter(|(_, s)| s.replicas.contains(&4))
        .map(|(p, _)| *p)
        .collect();
    assert!(on_4.len() >= 10, "broker 4 takes its share: {on_4:?}");
    tests::wait_until(Duration::from_secs(60), "broker 4's replicas created", || {
        let (on_4, d1, d2) = (on_4.clone(), d1.clone(), d2.clone());
        async move {
            on_4.iter()
                .all(|p| d2.join(format!("spread-{p}")).exists() || d1.join(format!("spread-{p}")).exists())
        }
    })
    .await;
    for p in &on_4 {
        assert!(
            !d1.join(format!("spread-{p}")).exists(),
            "spread-{p} in the cordoned dir"
        );
        assert!(d2.join(format!("spread-{p}")).exists(), "spread-{p} in the open dir");
    }
    // Nor can a replica be moved into the cordoned dir by hand: INVALID_REPLICA_ASSIGNMENT, as
    // Kafka answers, and the replica stays where it is.
    let moved = format!("spread-{}", on_4[0]);
    let (code, out, err) = tests::run_ferry(&[
        "log-dirs",
        "--move",
        "--broker",
        "4",
        "--partitions",
        &moved,
        "--log-dir",
        d1.to_str().unwrap(),
        "--bootstrap-server",
        &_four.nodes[&1].addr,
    ]);
    assert!(
        code != 0 && format!("{out}{err}").contains("is cordoned (cordoned.log.dirs)"),
        "{code} {out}{err}"
    );
    assert!(d2.join(&moved).exists() && !d1.join(&moved).exists());

    // The default cordons brokers 1 and 2 too; broker 4's own value wins over it, so only
    // broker 4 can take a replica, and a topic of two replicas is refused naming its partition.
    let (ok, out) = configs(b, &default, &["--alter", "--add-config", "cordoned.log.dirs=*"]);
    assert!(ok, "{out}");
    for id in [1, 2] {
        let r = registration(&c, id).await.unwrap();
        wait_cordoned(&c, id, &r.log_dirs).await;
    }
    wait_cordoned(&c, 4, &[d1.display().to_string()]).await;
    let (ok, out) = tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            b,
            "--create",
            "--topic",
            "nowhere",
            "--partitions",
            "3",
            "--replication-factor",
            "2",
        ],
    );
    assert!(
        !ok && out.contains("InvalidReplicationFactorException")
            && out.contains("Replication factor: 2 larger than available brokers: 1.")
            && out.contains("Cannot place nowhere-0: brokers [1, 2, 3] have every log dir cordoned."),
        "{out}"
    );
}
