//! `ferry dev --secure`: the local cluster with security on. A throwaway CA and certificates,
//! SASL_SSL with SCRAM-SHA-512 on the Kafka listeners, TLS on the gRPC ports (mutual between
//! the nodes), the authorizer, and a super user `admin` whose password is made at the first
//! start; a Kafka `client.properties` for that user, which Kafka's tools take as
//! `--command-config`, and so does the `ferry` CLI. A second start reuses all of it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use broker::auth::ListenerSecurity;
use broker::sasl::Mechanism;
use metastore::tls::{ClientAuth, TlsFiles};
use metastore::truststore::Truststore;

/// The super user of a secure dev cluster.
pub const ADMIN: &str = "admin";

/// What a secure dev cluster runs with.
pub struct Secure {
    certs: crate::certs::CertFiles,
    password: String,
    /// The Kafka client config for `admin`.
    pub client_config: PathBuf,
}

/// Makes (or finds, on a second start) the certificates and the admin's password in `dir`.
pub fn prepare(dir: &Path) -> anyhow::Result<Secure> {
    // Absolute: the client config names the CA file, and a client may run from anywhere.
    let dir = std::path::absolute(dir.join("secure")).context("the data dir's path")?;
    let password_file = dir.join("admin-password");
    let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
    let kept = crate::certs::CertFiles {
        ca: dir.join("ca.pem"),
        server: dir.join("server.pem"),
        clients: Vec::new(),
    };
    let certs = if password_file.exists() {
        // Certificates made before the nodes showed theirs to each other lack client auth.
        if metastore::grpc_tls::node_client(&Secure::node_files(&kept)).is_ok() {
            kept
        } else {
            crate::certs::write(&dir, &hosts, &[], 365)?
        }
    } else {
        let certs = crate::certs::write(&dir, &hosts, &[], 365)?;
        let password: String = {
            use rand::distr::{Alphanumeric, SampleString};
            Alphanumeric.sample_string(&mut rand::rng(), 24)
        };
        std::fs::write(&password_file, &password).with_context(|| format!("writing {}", password_file.display()))?;
        certs
    };
    let password = std::fs::read_to_string(&password_file)
        .with_context(|| format!("reading {}", password_file.display()))?
        .trim()
        .to_string();
    let client_config = dir.join("client.properties");
    std::fs::write(&client_config, client_properties(&password, &certs.ca))
        .with_context(|| format!("writing {}", client_config.display()))?;
    Ok(Secure {
        certs,
        password,
        client_config,
    })
}

/// A Kafka client config for `admin` over SASL_SSL with SCRAM-SHA-512, trusting the CA.
fn client_properties(password: &str, ca: &Path) -> String {
    format!(
        "security.protocol=SASL_SSL\n\
         sasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{ADMIN}\" password=\"{password}\";\n\
         ssl.truststore.type=PEM\n\
         ssl.truststore.location={}\n",
        ca.display()
    )
}

impl Secure {
    /// The Kafka listeners' security.
    pub fn listener(&self) -> ListenerSecurity {
        ListenerSecurity {
            mechanisms: vec![Mechanism::ScramSha512, Mechanism::ScramSha256, Mechanism::Plain],
            authorizer: true,
            super_users: [format!("User:{ADMIN}")].into(),
            tls: Some(TlsFiles {
                keystore: self.certs.server.clone(),
                keystore_access: Default::default(),
                truststore: Some(Truststore::pem(self.certs.ca.clone())),
                client_auth: ClientAuth::None,
            }),
            ..Default::default()
        }
    }

    /// The gRPC ports' TLS: the nodes show their certificate to each other (mutual TLS); a client
    /// may show one, or log in with a password.
    pub fn grpc_tls(&self) -> TlsFiles {
        Self::node_files(&self.certs)
    }

    fn node_files(certs: &crate::certs::CertFiles) -> TlsFiles {
        TlsFiles {
            keystore: certs.server.clone(),
            keystore_access: Default::default(),
            truststore: Some(Truststore::pem(certs.ca.clone())),
            client_auth: ClientAuth::Requested,
        }
    }

    /// Sets the admin's SCRAM-SHA-512 credential through the node at `addr`, with the cluster
    /// credential in `credential_file`.
    pub async fn create_admin(&self, addr: &str, credential_file: &Path) -> anyhow::Result<()> {
        let meta = metastore::Client::new(&[addr.to_string()])?;
        meta.set_credential_file(credential_file)?;
        let mut client = crate::users_cmd::security_client(addr, &meta)?;
        crate::users_cmd::set_scram(&mut client, ADMIN, &self.password, "SCRAM-SHA-512", 4096).await
    }
}
