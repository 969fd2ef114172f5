//! Throwaway certificates for a local secure cluster (`ferry dev --secure`, `ferry certs`): a
//! CA, a server certificate for the given hosts signed by it, and client certificates. Written
//! as PEM files in the layout Kafka's PEM stores take: `ca.pem` (a truststore), `server.pem`
//! (a keystore: the certificate chain, then the private key), `<name>.pem` per client. Not for
//! production: the CA's key is written beside them.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

/// The files written.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The CA certificate: clients' truststore, the listener's truststore for client certs.
    pub ca: PathBuf,
    /// The server's keystore.
    pub server: PathBuf,
    /// Each client's keystore, by name.
    pub clients: Vec<(String, PathBuf)>,
}

fn params(cn: &str, days: i64) -> anyhow::Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name.push(DnType::OrganizationName, "ferry");
    p.distinguished_name.push(DnType::CommonName, cn);
    let now = time_now();
    p.not_before = now - rcgen_days(1);
    p.not_after = now + rcgen_days(days);
    Ok(p)
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn rcgen_days(d: i64) -> time::Duration {
    time::Duration::days(d)
}

/// Makes a CA, a server certificate for `hosts` (names or IP addresses) and a certificate per
/// client name, valid for `days`, and writes them into `dir`.
pub fn write(dir: &Path, hosts: &[String], clients: &[String], days: i64) -> anyhow::Result<CertFiles> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ca_key = KeyPair::generate()?;
    let mut ca = params("ferry throwaway CA", days)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key)?;
    let write = |name: &str, text: String| -> anyhow::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    };
    let ca_path = write("ca.pem", ca.pem())?;
    write("ca-key.pem", ca_key.serialize_pem())?;
    let server_key = KeyPair::generate()?;
    let mut server = params("ferry broker", days)?;
    server.subject_alt_names = hosts
        .iter()
        .map(|h| match h.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(rcgen::SanType::IpAddress(ip)),
            Err(_) => Ok(rcgen::SanType::DnsName(h.clone().try_into()?)),
        })
        .collect::<Result<_, rcgen::Error>>()?;
    // Client auth too: a node shows this certificate to its peers (mutual TLS).
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let server = server.signed_by(&server_key, &ca, &ca_key)?;
    let server_path = write("server.pem", format!("{}{}", server.pem(), server_key.serialize_pem()))?;
    let mut out = Vec::new();
    for name in clients {
        let key = KeyPair::generate()?;
        let mut p = params(name, days)?;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &ca, &ca_key)?;
        let path = write(&format!("{name}.pem"), format!("{}{}", cert.pem(), key.serialize_pem()))?;
        out.push((name.clone(), path));
    }
    Ok(CertFiles {
        ca: ca_path,
        server: server_path,
        clients: out,
    })
}

/// Flags of `ferry certs`.
#[derive(Args)]
pub struct CertsArgs {
    /// Where to write the PEM files.
    #[arg(long)]
    dir: PathBuf,
    /// A host name or IP address the server certificate is for (repeatable).
    #[arg(long = "host", default_value = "127.0.0.1")]
    hosts: Vec<String>,
    /// A client certificate to make, by common name (repeatable).
    #[arg(long = "client")]
    clients: Vec<String>,
    /// Days the certificates are valid.
    #[arg(long, default_value_t = 30)]
    days: i64,
}

/// Runs `ferry certs`.
pub fn run(a: CertsArgs) -> anyhow::Result<()> {
    if a.days < 1 {
        anyhow::bail!("--days: {} is not a positive number of days", a.days);
    }
    let f = write(&a.dir, &a.hosts, &a.clients, a.days)?;
    println!("truststore: {}", f.ca.display());
    println!("keystore: {}", f.server.display());
    for (name, path) in f.clients {
        println!("client {name}: {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_load_as_a_listeners_keystore_and_truststore() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            &["127.0.0.1".into(), "localhost".into()],
            &["alice".into()],
            2,
        )
        .unwrap();
        let files = metastore::tls::TlsFiles {
            keystore: f.server.clone(),
            keystore_access: Default::default(),
            truststore: Some(metastore::truststore::Truststore::pem(f.ca.clone())),
            client_auth: metastore::tls::ClientAuth::Required,
        };
        metastore::tls::load(&files).expect("the server's files load");
        let pem = std::fs::read(&f.clients[0].1).unwrap();
        use rustls_pki_types::pem::PemObject;
        let cert = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(
            metastore::tls::principal_of(&cert).as_deref(),
            Some("User:O=ferry,CN=alice")
        );
    }

    fn der_of(p: CertificateParams) -> rustls_pki_types::CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn a_principal_escapes_its_names_so_that_no_subject_passes_for_another() {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::OrganizationName, "ferry,CN=alice");
        let forged = metastore::tls::principal_of(&der_of(p)).unwrap();
        assert_eq!(forged, "User:O=ferry\\,CN=alice");
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(DnType::CustomDnType(vec![2, 5, 4, 12]), "boss");
        p.distinguished_name.push(DnType::CommonName, "alice");
        let unknown = metastore::tls::principal_of(&der_of(p)).unwrap();
        assert!(unknown.starts_with("User:CN=alice,2.5.4.12=#"), "{unknown}");
    }

    #[test]
    fn a_node_certificate_must_allow_client_auth() {
        let mut server_only = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        server_only.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        assert!(!metastore::tls::allows_client_auth(&der_of(server_only)));
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), &["127.0.0.1".into()], &[], 2).unwrap();
        let pem = std::fs::read(&f.server).unwrap();
        use rustls_pki_types::pem::PemObject;
        let cert = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
            .next()
            .unwrap()
            .unwrap();
        assert!(metastore::tls::allows_client_auth(&cert));
    }
}
