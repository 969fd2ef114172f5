//! Network namespaces for partition tests. Each node gets a namespace of its own, and so do the
//! clients; all are joined by veth pairs to a bridge that lives in one more namespace, so that the
//! host's own interfaces, routes and firewall take no part and the host cannot reach any of them.
//! Needs root and `ip` (iproute2). Everything is removed on drop.

use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// The subnet inside the namespaces; private to them, so it cannot clash with the host's.
const SUBNET: &str = "10.77.0";

/// A set of namespaces: a switch, `nodes` node namespaces and one client namespace.
pub struct Net {
    prefix: String,
    nodes: usize,
}

/// Runs `ip` with `args`; an error carries its stderr.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running ip")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

impl Net {
    /// Whether namespaces can be made here (root with iproute2), found by making one.
    pub fn available() -> bool {
        let probe = format!("fy{}probe", std::process::id());
        let ok = ip(&["netns", "add", &probe]).is_ok();
        if ok {
            let _ = ip(&["netns", "del", &probe]);
        }
        ok
    }

    /// Makes the namespaces and links for `nodes` nodes and the clients.
    pub fn create(nodes: usize) -> anyhow::Result<Net> {
        let net = Net {
            prefix: format!("fy{}x{}", std::process::id(), rand::random::<u16>()),
            nodes,
        };
        // On an error the namespaces made so far go with `net`'s drop.
        let sw = net.switch_ns();
        ip(&["netns", "add", &sw])?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        for (ns, port, addr) in net.members() {
            ip(&["netns", "add", &ns])?;
            ip(&[
                "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &sw, "link", "set", &port, "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn switch_ns(&self) -> String {
        format!("{}sw", self.prefix)
    }

    /// (namespace, switch port, address) of every node, then of the clients.
    fn members(&self) -> Vec<(String, String, String)> {
        let mut m: Vec<_> = (1..=self.nodes)
            .map(|i| (self.node_ns(i), format!("p{i}"), self.node_ip(i)))
            .collect();
        m.push((self.client_ns(), "pc".into(), format!("{SUBNET}.100")));
        m
    }

    /// The namespace of node `i` (from 1).
    pub fn node_ns(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    /// The clients' namespace.
    pub fn client_ns(&self) -> String {
        format!("{}c", self.prefix)
    }

    /// The address of node `i` (from 1).
    pub fn node_ip(&self, i: usize) -> String {
        format!("{SUBNET}.{}", 10 + i)
    }

    /// A command that runs `program` inside namespace `ns`.
    pub fn command_in(ns: &str, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).arg(program);
        c
    }

    /// Takes node `i`'s switch port down (`on`) or up: it reaches nobody, and nobody it.
    /// Packets vanish silently, as with a pulled cable.
    pub fn isolate(&self, i: usize, on: bool) -> anyhow::Result<()> {
        let state = if on { "down" } else { "up" };
        ip(&["-n", &self.switch_ns(), "link", "set", &format!("p{i}"), state])
    }

    /// Cuts (`on`) or restores the links between node `i` and every other node, with blackhole
    /// routes on both sides; the clients still reach node `i`. New connections fail at once,
    /// packets on open ones vanish.
    pub fn cut_peers(&self, i: usize, on: bool) -> anyhow::Result<()> {
        let verb = if on { "add" } else { "del" };
        for j in (1..=self.nodes).filter(|j| *j != i) {
            for (ns, to) in [(self.node_ns(i), self.node_ip(j)), (self.node_ns(j), self.node_ip(i))] {
                ip(&["-n", &ns, "route", verb, "blackhole", &format!("{to}/32")])?;
            }
        }
        Ok(())
    }

    /// Undoes every partition, ignoring what was not in place.
    pub fn heal(&self) {
        for i in 1..=self.nodes {
            let _ = self.isolate(i, false);
            for j in (1..=self.nodes).filter(|j| *j != i) {
                let _ = ip(&[
                    "-n",
                    &self.node_ns(i),
                    "route",
                    "del",
                    "blackhole",
                    &format!("{}/32", self.node_ip(j)),
                ]);
            }
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and with them their peers.
        for (ns, _, _) in self.members() {
            let _ = ip(&["netns", "del", &ns]);
        }
        let _ = ip(&["netns", "del", &self.switch_ns()]);
    }
}
