//! Real network partitions: each node in its own network namespace, the
//! namespaces joined by a bridge, and cuts made with blackhole routes in
//! both namespaces of a pair (packets between them are dropped, as
//! Jepsen's iptables rules drop them; TCP connections stay open and time
//! out on their own). Needs root; nothing outside the namespaces and the
//! bridge this creates is touched, and `Drop` removes them.
//!
//! The bridge has an address of its own ([`Net::host_addr`]), so that
//! programs in the host's namespace (a load balancer, an application)
//! reach the nodes, and a floating address on any node ([`Net::VIP_HOST`]).

use std::collections::BTreeSet;
use std::process::Command;

use crate::config::Place;

/// Namespaces, a bridge and the cuts in place.
#[derive(Debug)]
pub struct Net {
    tag: String,
    subnet: u8,
    nodes: usize,
    cuts: BTreeSet<(usize, usize)>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e} (install iproute2)", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// `nodes` namespaces on a fresh bridge; an error (with what to do)
    /// when not root.
    pub fn create(nodes: usize) -> Result<Net, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("network partitions need root (network namespaces)".into());
        }
        // A subnet and names of our own: leftovers of a killed run do not clash.
        let subnet = (std::process::id() % 200) as u8 + 20;
        let net = Net {
            tag: format!("lsj{subnet}"),
            subnet,
            nodes,
            cuts: BTreeSet::new(),
        };
        net.remove();
        net.build().inspect_err(|_| net.remove())?;
        Ok(net)
    }

    /// The host part of the address kept free for a virtual IP
    /// (keepalived's): `10.213.<subnet>.100`.
    pub const VIP_HOST: u8 = 100;
    /// The host part of the bridge's address in the host's namespace.
    const HOST: u8 = 254;

    /// Node `i`'s namespace.
    pub fn ns(&self, i: usize) -> String {
        format!("{}n{}", self.tag, i + 1)
    }

    /// Node `i`'s interface inside its namespace.
    pub fn interface(&self, i: usize) -> String {
        format!("{}p{}", self.tag, i + 1)
    }

    /// The bridge's address: where the host's programs come from.
    pub fn host_addr(&self) -> String {
        format!("10.213.{}.{}", self.subnet, Self::HOST)
    }

    /// The address left free for a virtual IP.
    pub fn vip(&self) -> String {
        format!("10.213.{}.{}", self.subnet, Self::VIP_HOST)
    }

    /// `program` to run inside node `i`'s namespace.
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(i)]).arg(program);
        c
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    /// Node `i`'s address.
    pub fn addr(&self, i: usize) -> String {
        format!("10.213.{}.{}", self.subnet, i + 1)
    }

    fn build(&self) -> Result<(), String> {
        let br = self.bridge();
        ip(&["link", "add", &br, "type", "bridge"])?;
        ip(&["link", "set", &br, "up"])?;
        let host = format!("{}/24", self.host_addr());
        ip(&["addr", "add", &host, "dev", &br])?;
        for i in 0..self.nodes {
            let ns = self.ns(i);
            let outer = format!("{}v{}", self.tag, i + 1);
            let inner = self.interface(i);
            let cidr = format!("{}/24", self.addr(i));
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ])?;
            ip(&["link", "set", &inner, "netns", &ns])?;
            ip(&["-n", &ns, "addr", "add", &cidr, "dev", &inner])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["link", "set", &outer, "master", &br])?;
            ip(&["link", "set", &outer, "up"])?;
        }
        Ok(())
    }

    /// Where the testkit puts node `i`.
    pub fn places(&self) -> Vec<Place> {
        (0..self.nodes)
            .map(|i| Place {
                host: self.addr(i),
                netns: Some(self.ns(i)),
                segment: 0,
            })
            .collect()
    }

    /// Drops every packet between `a` and `b`, both ways.
    pub fn cut(&mut self, a: usize, b: usize) -> Result<(), String> {
        for (from, to) in [(a, b), (b, a)] {
            let dst = format!("{}/32", self.addr(to));
            ip(&["-n", &self.ns(from), "route", "add", "blackhole", &dst])?;
        }
        self.cuts.insert((a.min(b), a.max(b)));
        Ok(())
    }

    /// Cuts `i` off from every other node.
    pub fn isolate(&mut self, i: usize) -> Result<(), String> {
        for j in (0..self.nodes).filter(|&j| j != i) {
            self.cut(i, j)?;
        }
        Ok(())
    }

    /// Removes every cut.
    pub fn heal(&mut self) -> Result<(), String> {
        let cuts = std::mem::take(&mut self.cuts);
        let mut first_error = Ok(());
        for (a, b) in cuts {
            for (from, to) in [(a, b), (b, a)] {
                let dst = format!("{}/32", self.addr(to));
                let r = ip(&["-n", &self.ns(from), "route", "del", "blackhole", &dst]);
                if first_error.is_ok() {
                    first_error = r;
                }
            }
        }
        first_error
    }

    fn remove(&self) {
        for i in 0..self.nodes {
            let _ = ip(&["netns", "del", &self.ns(i)]);
            let _ = ip(&["link", "del", &format!("{}v{}", self.tag, i + 1)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.remove();
    }
}
