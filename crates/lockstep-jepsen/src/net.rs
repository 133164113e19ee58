//! Real network partitions: each node in its own network namespace, the
//! namespaces joined by a bridge, and cuts made with blackhole routes in
//! both namespaces of a pair (packets between them are dropped, as
//! Jepsen's iptables rules drop them; TCP connections stay open and time
//! out on their own). Needs root; nothing outside the namespaces and the
//! bridge this creates is touched, and `Drop` removes them.

use std::collections::BTreeSet;
use std::process::Command;

use lockstep_testkit::Place;

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

    fn ns(&self, i: usize) -> String {
        format!("{}n{}", self.tag, i + 1)
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
        for i in 0..self.nodes {
            let ns = self.ns(i);
            let outer = format!("{}v{}", self.tag, i + 1);
            let inner = format!("{}p{}", self.tag, i + 1);
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
