//! The arbitrator's settings from the three places garbd users keep them:
//! the command line, a `--cfg` file (`key = value` lines with garbd's long
//! option names) and Debian's `/etc/default/garb` (shell assignments:
//! `GALERA_NODES`, `GALERA_GROUP`, `GALERA_OPTIONS`, `LOG_FILE`,
//! `WORK_DIR`). The command line wins over the `--cfg` file, which wins
//! over the defaults file. Pure: parsing only, no I/O.

use std::collections::BTreeMap;

/// garbd's default group name.
pub const DEFAULT_GROUP: &str = "my_test_cluster";
/// garbd's default member name.
pub const DEFAULT_NAME: &str = "garb";
/// Lines longer than this in a settings file are refused (a file of that
/// kind has a few short lines).
const MAX_LINE: usize = 64 << 10;

/// Settings as given, each possibly missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub address: Option<String>,
    pub group: Option<String>,
    pub options: Option<String>,
    pub name: Option<String>,
    pub log: Option<String>,
    pub workdir: Option<String>,
    pub daemon: bool,
    /// garbd's backup request (`--sst`, `--donor`): not supported.
    pub sst: Option<String>,
    pub donor: Option<String>,
}

impl Settings {
    /// `self` with what it lacks taken from `lower`.
    pub fn over(self, lower: Settings) -> Settings {
        Settings {
            address: self.address.or(lower.address),
            group: self.group.or(lower.group),
            options: self.options.or(lower.options),
            name: self.name.or(lower.name),
            log: self.log.or(lower.log),
            workdir: self.workdir.or(lower.workdir),
            daemon: self.daemon || lower.daemon,
            sst: self.sst.or(lower.sst),
            donor: self.donor.or(lower.donor),
        }
    }
}

/// A garbd `--cfg` file: `key = value` (or `key=value`), `#` comments,
/// blank lines; keys are garbd's long option names.
pub fn parse_cfg(text: &str) -> Result<Settings, String> {
    let mut s = Settings::default();
    for (n, line) in lines(text)? {
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {n}: expected `key = value`, got `{line}`"));
        };
        let value = unquote(value.trim()).to_string();
        match key.trim() {
            "address" | "a" => s.address = Some(value),
            "group" | "g" => s.group = Some(value),
            "options" | "o" => s.options = Some(value),
            "name" | "n" => s.name = Some(value),
            "log" | "l" => s.log = Some(value),
            "workdir" | "w" => s.workdir = Some(value),
            "daemon" | "d" => s.daemon = is_true(&value),
            "sst" => s.sst = Some(value),
            "donor" => s.donor = Some(value),
            other => return Err(format!("line {n}: unknown setting `{other}`")),
        }
    }
    Ok(s)
}

/// Debian's `/etc/default/garb`: shell assignments, as `garb-systemd`
/// reads them. `GALERA_NODES` is a list of `host[:port]` separated by
/// spaces or commas; other variables are ignored, as the shell would.
pub fn parse_defaults(text: &str) -> Result<Settings, String> {
    let vars: BTreeMap<String, String> = lines(text)?
        .filter_map(|(_, line)| {
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (k, v) = line.split_once('=')?;
            let k = k.trim();
            let ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            ok.then(|| (k.to_string(), unquote(v.trim()).to_string()))
        })
        .collect();
    let get = |k: &str| vars.get(k).filter(|v| !v.is_empty()).cloned();
    let address = get("GALERA_NODES").map(|nodes| {
        let list: Vec<&str> = nodes.split([' ', ',']).filter(|p| !p.is_empty()).collect();
        format!("gcomm://{}", list.join(","))
    });
    Ok(Settings {
        address,
        group: get("GALERA_GROUP"),
        options: get("GALERA_OPTIONS"),
        log: get("LOG_FILE"),
        workdir: get("WORK_DIR"),
        ..Settings::default()
    })
}

/// `host:port` the group channel listens on and peers dial, from
/// `gmcast.listen_addr` in the options (`tcp://host:port`); the default
/// is Galera's, every address on port 4567.
pub fn listen_address(options: &str) -> String {
    options
        .split(';')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == "gmcast.listen_addr")
        .map(|(_, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix("tcp://")
                .or_else(|| v.strip_prefix("ssl://"))
                .unwrap_or(v);
            if v.rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            {
                v.to_string()
            } else {
                format!("{v}:4567")
            }
        })
        .unwrap_or_else(|| "0.0.0.0:4567".to_string())
}

/// Non-empty, non-comment lines, trimmed, with their numbers.
fn lines(text: &str) -> Result<impl Iterator<Item = (usize, &str)>, String> {
    if let Some((n, _)) = text.lines().enumerate().find(|(_, l)| l.len() > MAX_LINE) {
        return Err(format!("line {}: longer than {MAX_LINE} bytes", n + 1));
    }
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#')))
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

fn is_true(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "1" | "yes" | "true" | "on" | ""
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_garbd_cfg_file_reads_with_its_long_names() {
        let s = parse_cfg(
            "# garbd\naddress = gcomm://10.0.0.1:4567,10.0.0.2:4567\n\
             group=\"prod\"\noptions = gmcast.listen_addr=tcp://0.0.0.0:4444; pc.weight=2\n\
             log = /var/log/garbd.log\ndaemon = 1\n",
        )
        .unwrap();
        assert_eq!(
            s.address.as_deref(),
            Some("gcomm://10.0.0.1:4567,10.0.0.2:4567")
        );
        assert_eq!(s.group.as_deref(), Some("prod"));
        assert_eq!(
            s.options.as_deref(),
            Some("gmcast.listen_addr=tcp://0.0.0.0:4444; pc.weight=2")
        );
        assert_eq!(s.log.as_deref(), Some("/var/log/garbd.log"));
        assert!(s.daemon);
        assert!(parse_cfg("adress = x")
            .unwrap_err()
            .contains("unknown setting"));
        assert!(parse_cfg("just words").unwrap_err().contains("line 1"));
    }

    #[test]
    fn debian_defaults_make_a_gcomm_address_from_the_node_list() {
        let s = parse_defaults(
            "# Copyright\nGALERA_NODES=\"10.0.0.1:4567 10.0.0.2:4567\"\n\
             GALERA_GROUP='prod'\nGALERA_OPTIONS=\"pc.weight=1\"\nLOG_FILE=\"\"\n\
             WORK_DIR=/var/lib/garb\nUNRELATED=1\n",
        )
        .unwrap();
        assert_eq!(
            s.address.as_deref(),
            Some("gcomm://10.0.0.1:4567,10.0.0.2:4567")
        );
        assert_eq!(s.group.as_deref(), Some("prod"));
        assert_eq!(s.options.as_deref(), Some("pc.weight=1"));
        assert_eq!(s.log, None, "an empty LOG_FILE means none");
        assert_eq!(s.workdir.as_deref(), Some("/var/lib/garb"));
        let commas = parse_defaults("GALERA_NODES=a:1,b:2").unwrap();
        assert_eq!(commas.address.as_deref(), Some("gcomm://a:1,b:2"));
    }

    #[test]
    fn the_command_line_wins_over_the_cfg_file_over_the_defaults() {
        let cli = Settings {
            group: Some("cli".into()),
            ..Settings::default()
        };
        let cfg = parse_cfg("group = cfg\nname = arb1").unwrap();
        let defaults = parse_defaults("GALERA_GROUP=def\nGALERA_NODES=h:1").unwrap();
        let s = cli.over(cfg.over(defaults));
        assert_eq!(s.group.as_deref(), Some("cli"));
        assert_eq!(s.name.as_deref(), Some("arb1"));
        assert_eq!(s.address.as_deref(), Some("gcomm://h:1"));
    }

    #[test]
    fn the_listen_address_comes_from_gmcast_listen_addr() {
        assert_eq!(listen_address(""), "0.0.0.0:4567");
        assert_eq!(
            listen_address("pc.weight=1; gmcast.listen_addr=tcp://127.0.0.1:5000"),
            "127.0.0.1:5000"
        );
        assert_eq!(
            listen_address("gmcast.listen_addr=tcp://10.1.1.1"),
            "10.1.1.1:4567"
        );
    }
}
