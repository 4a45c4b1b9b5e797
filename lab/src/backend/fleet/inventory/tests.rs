//! The readers on captured inventories, issue 31's hostile ones among them, and (where
//! ansible-inventory is installed) the lab's own readers against Ansible's.

use super::*;

fn host(name: &str, address: &str, user: Option<&str>, port: Option<u16>) -> InventoryHost {
    InventoryHost {
        name: name.into(),
        address: address.into(),
        user: user.map(Into::into),
        port,
        bin_dir: None,
    }
}

fn bad(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

const YAML: &str = "\
---
# the lab's sites
all:
  vars:
    ansible_user: ops
  hosts:
    fra:
      ansible_host: 192.0.2.10   # Frankfurt
      ansible_port: 2222
      oscil_bin: /opt/oscil/bin
    sin: {ansible_host: 192.0.2.20, ansible_user: root}
  children:
    us:
      vars: {ansible_user: 'usr'}
      hosts:
        nyc:
          ansible_ssh_host: \"192.0.2.30\"
        sfo:
        web[1:2]:
          ansible_ssh_port: 2200
";

#[test]
fn yaml_hosts_groups_vars_ranges_and_the_ssh_spellings() {
    let hosts = parse(YAML).unwrap();
    let mut fra = host("fra", "192.0.2.10", Some("ops"), Some(2222));
    fra.bin_dir = Some("/opt/oscil/bin".into());
    assert_eq!(
        hosts,
        vec![
            fra,
            host("nyc", "192.0.2.30", Some("usr"), None),
            host("sfo", "sfo", Some("usr"), None),
            host("sin", "192.0.2.20", Some("root"), None),
            host("web1", "web1", Some("usr"), Some(2200)),
            host("web2", "web2", Some("usr"), Some(2200)),
        ]
    );
    assert_eq!(hosts[0].target(), "ops@192.0.2.10");
}

const INI: &str = "\
; sites
fra ansible_host=192.0.2.10 ansible_port=2222 oscil_bin=/opt/oscil/bin
[asia]
sin ansible_host=192.0.2.20 ansible_user=root  # the hub
[us]
nyc ansible_ssh_host=\"192.0.2.30\"
web[01:02]:2200
[us:vars]
ansible_user=usr
[all:vars]
ansible_user=ops
";

#[test]
fn ini_hosts_sections_group_vars_ranges_and_ports() {
    let hosts = parse(INI).unwrap();
    let mut fra = host("fra", "192.0.2.10", Some("ops"), Some(2222));
    fra.bin_dir = Some("/opt/oscil/bin".into());
    assert_eq!(
        hosts,
        vec![
            fra,
            host("nyc", "192.0.2.30", Some("usr"), None),
            host("sin", "192.0.2.20", Some("root"), None),
            host("web01", "web01", Some("usr"), Some(2200)),
            host("web02", "web02", Some("usr"), Some(2200)),
        ]
    );
}

#[test]
fn json_as_ansible_inventory_prints_it() {
    let text = r#"{"_meta": {"hostvars": {"a": {"ansible_host": "10.0.0.1", "ansible_port": 2200},
        "b": {"ansible_user": "ops", "unrelated": [1, 2]}}},
        "all": {"children": ["ungrouped", "web"]}, "web": {"hosts": ["a", "b"], "vars": {"ansible_user": "web"}},
        "old_style": ["c"]}"#;
    assert_eq!(
        parse(text).unwrap(),
        vec![
            host("a", "10.0.0.1", Some("web"), Some(2200)),
            host("b", "b", Some("ops"), None),
            host("c", "c", None, None),
        ]
    );
}

#[test]
fn what_is_not_understood_is_one_line_naming_the_place() {
    assert_eq!(
        bad("all:\n  hosts:\n    a:\n      ansible_port: http\n"),
        "host \"a\": ansible_port \"http\" is not a port (1-65535)"
    );
    assert!(bad("all:\n  hosts:\n    - a\n").starts_with("group \"all\": "));
    assert!(
        bad("all:\n  hosts:\n    a: [1\n").contains("line 3"),
        "{}",
        bad("all:\n  hosts:\n    a: [1\n")
    );
    assert_eq!(
        bad("[web\na ansible_host=x\n"),
        "line 1: \"[web\": a section is [group]"
    );
    assert_eq!(
        bad("a ansible_host\n"),
        "line 1: \"ansible_host\" is not key=value"
    );
    assert_eq!(bad("[g:hosts]\nweb[3:1]\n"), "line 2: \"web[3:1]\": a range runs from a number to a larger one, or a letter to a later one");
    assert_eq!(
        bad("a ansible_connection=local\n"),
        "host \"a\": ansible_connection \"local\": the lab reaches hosts over ssh only"
    );
    assert_eq!(
        bad("all:\n  hosts:\n    a: {ansible_port: [22]}\n"),
        "host \"a\": ansible_port is not a plain value"
    );
    assert!(bad("a/b ansible_host=x\n").starts_with("host \"a/b\": a host name"));
    assert_eq!(bad("# nothing\n"), "no hosts in the inventory");
    assert_eq!(bad("all:\n  hosts:\n"), "no hosts in the inventory");
    assert!(bad("{\"all\": ").contains("EOF"), "{}", bad("{\"all\": "));
}

/// Issue 31: names and users that a later ssh configuration could turn into a command.
#[test]
fn hosts_and_users_are_dns_names_ip_literals_and_posix_names() {
    for (text, why) in [
        ("a ansible_host='h;id'\n", "host \"h;id\" is not a DNS name"),
        ("a ansible_host='$(touch /tmp/x)'\n", "not a DNS name"),
        ("a ansible_host=-oProxyCommand=id\n", "not a DNS name"),
        ("a ansible_host=ssh://-oProxyCommand=id\n", "not a DNS name"),
        (
            "a ansible_user=-oProxyCommand=id\n",
            "user \"-oProxyCommand=id\" is not a POSIX user name",
        ),
        ("a ansible_user='r t'\n", "not a POSIX user name"),
    ] {
        let error = bad(text);
        assert!(
            error.starts_with("host \"a\": ") && error.contains(why),
            "{text}: {error}"
        );
    }
    let hosts =
        parse("a ansible_host=2001:db8::1 ansible_user=svc.oscil_1\nb ansible_host=fe80::1\n")
            .unwrap();
    assert_eq!(hosts[0].target(), "svc.oscil_1@2001:db8::1");
    assert_eq!(hosts[1].address, "fe80::1");
}

/// Issue 31: 14,000 levels of nesting was a stack overflow (exit 134); each format now
/// stops at a bound with one line. Each text is under 300 KB and is refused in milliseconds
/// (YAML before the YAML crate sees it: libyaml took 16 s on this one).
#[test]
fn deep_nesting_is_one_line_in_every_format() {
    let levels = 14_000;
    let mut yaml = String::from("all: ");
    for i in 0..levels {
        yaml += &format!("{{children: {{g{i}: ");
    }
    yaml += "{hosts: {h: }}";
    yaml += &"}}".repeat(levels);
    assert_eq!(
        bad(&yaml),
        "line 1: nested more than 128 deep: the lab does not read this"
    );
    // Block style within the lab's bound on indentation: the YAML crate's own limit answers.
    let mut yaml = String::from("all:\n");
    for i in 0..70 {
        let indent = " ".repeat(4 * i);
        yaml += &format!("{indent}  children:\n{indent}    g{i}:\n");
    }
    assert!(
        bad(&yaml).contains("recursion limit exceeded"),
        "{}",
        bad(&yaml)
    );
    let mut ini = String::from("[g0]\nh\n");
    for i in 0..levels {
        ini += &format!("[g{}:children]\ng{i}\n", i + 1);
    }
    assert!(
        matches!(parse(&ini), Err(InventoryError::TooDeep(_))),
        "{}",
        bad(&ini)
    );
    let json = format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels));
    assert!(
        bad(&json).contains("recursion limit exceeded"),
        "{}",
        bad(&json)
    );
}

/// Issue 31: 1 MB of flat hosts took 21 s (a quadratic duplicate check); each host is now
/// checked once against a map. Its cost here: about 1 s in a release build (100,001 hosts
/// read twice).
#[test]
fn many_flat_hosts_are_read_in_one_pass() {
    let text: String = (0..88_000).map(|i| format!("h{i}\n")).collect();
    assert!(text.len() > 500_000);
    assert_eq!(parse(&text).unwrap().len(), 88_000);
    let too_many: String = (0..model::MAX_HOSTS + 1)
        .map(|i| format!("h{i}\n"))
        .collect();
    assert_eq!(
        bad(&too_many),
        format!(
            "line {}: more than {} hosts",
            model::MAX_HOSTS + 1,
            model::MAX_HOSTS
        )
    );
    assert!(bad("h[0:200000]\n").contains("more than 100000 hosts"));
}

/// Issue 31: 16 groups each listing the next 10 times (735 bytes) took 5.3 GB; `x` listing
/// itself three times, 2.7 GB. Children are now kept once each and cycles refused.
#[test]
fn children_are_expanded_once_each_and_cycles_refused() {
    let mut text = String::from("[g16]\nh ansible_user=deep\n");
    for i in 0..16 {
        text += &format!("[g{i}:children]\n{}", format!("g{}\n", i + 1).repeat(10));
    }
    text += "[g0:vars]\nansible_port=2200\n";
    assert!(text.len() < 1000);
    assert_eq!(
        parse(&text).unwrap(),
        vec![host("h", "h", Some("deep"), Some(2200))]
    );
    assert_eq!(
        bad("[x]\nh\n[x:children]\nx\nx\nx\n"),
        "groups in a cycle: x > x"
    );
    assert!(bad("[a:children]\nb\n[b:children]\na\n[a]\nh\n").starts_with("groups in a cycle: "));
}

/// Issue 31: `/dev/zero` as an inventory grew without bound; a FIFO would block. Neither is
/// opened; a file past the cap is refused by its size (a sparse file, no bytes written).
#[test]
fn only_regular_files_under_the_cap_are_read() {
    let refused = |path: &Path| load(path, Plugins::StaticOnly).unwrap_err().to_string();
    assert!(refused(Path::new("/dev/zero")).contains("not a regular file but a character device"));
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    assert!(
        refused(&fifo).contains("not a regular file but a FIFO"),
        "{}",
        refused(&fifo)
    );
    let large = dir.path().join("large.ini");
    std::fs::File::create(&large)
        .unwrap()
        .set_len(MAX_INVENTORY_BYTES + 1)
        .unwrap();
    assert!(
        refused(&large).contains("larger than 16777216 bytes"),
        "{}",
        refused(&large)
    );
}

/// The lab's own readers give what Ansible gives, where Ansible is installed (CI installs
/// ansible-core). About 1.5 s per ansible-inventory run.
#[test]
fn the_built_in_readers_agree_with_ansible_inventory() {
    let Some(program) = ansible::find() else {
        oscil_testkit::skip("ansible-inventory is not installed (apt-get install ansible-core)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("hosts.yml", YAML), ("hosts.ini", INI)] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        assert_eq!(
            ansible::list(&program, &path, Plugins::StaticOnly).unwrap(),
            parse(text).unwrap(),
            "{name}"
        );
    }
    let broken = dir.path().join("broken.ini");
    std::fs::write(&broken, "[web]\na ansible_host\n").unwrap();
    let error = ansible::list(&program, &broken, Plugins::StaticOnly)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("ansible-inventory: ") && error.contains(":2: Expected key=value"),
        "{error}"
    );
    assert!(!error.contains('\n'));
}
