//! `daemon/oscil-daemon.service` starts the daemon it names: its command line, run with a
//! credentials directory holding a key, serves; `systemd-analyze verify` accepts the unit
//! where systemd is installed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const UNIT: &str = include_str!("../oscil-daemon.service");

fn exec_start() -> Vec<String> {
    let line = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_units_command_line_serves_with_the_credential() {
    let credentials = tempfile::tempdir().unwrap();
    let key = oscil_protocol::key::generate_key().unwrap();
    std::fs::write(credentials.path().join("oscil.key"), key).unwrap();
    let args: Vec<String> = exec_start()[1..]
        .iter()
        .map(|a| {
            // The port is the unit's own; the test listens on loopback, on any free port.
            let a = a.replace(
                "${CREDENTIALS_DIRECTORY}",
                credentials.path().to_str().unwrap(),
            );
            if a == "[::]:5250" {
                "127.0.0.1:0".into()
            } else {
                a
            }
        })
        .collect();
    assert!(args.iter().any(|a| a.ends_with("/oscil.key")), "{args:?}");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_oscil-daemon"))
        .args(&args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(daemon.stderr.take().unwrap());
    let listening = stderr
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("listening on") || l.contains("refusing"));
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let line = listening.expect("the daemon said something");
    assert!(
        line.starts_with("oscil-daemon: listening on 127.0.0.1:"),
        "{line}"
    );
}

#[test]
fn systemd_accepts_the_unit() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no systemd-analyze here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("oscil-daemon.service");
    // verify checks that the binary exists: point it at the one just built.
    let text = UNIT.replace(
        "/usr/local/bin/oscil-daemon",
        env!("CARGO_BIN_EXE_oscil-daemon"),
    );
    std::fs::write(&unit, text).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
    for directive in [
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "LoadCredential=",
    ] {
        assert!(
            UNIT.lines().any(|l| l.starts_with(directive)),
            "{directive} missing"
        );
    }
}
