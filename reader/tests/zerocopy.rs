//! Zero-copy runs over loopback: the daemon sends with `sendfile` from its payload file,
//! 128 KiB at a time unless the reader asks for another size, and `run.json` says which.

mod util;

use util::{fresh_run, json_and_meta};

#[test]
fn zerocopy_sends_128_kib_at_a_time_unless_told_and_run_json_says_so() {
    let cases: [(&[&str], u64, bool); 3] = [
        (&["--zerocopy"], 128 * 1024, true),
        (&["--zerocopy", "--write-size", "64k"], 64 * 1024, true),
        (&[], 256 * 1024, false),
    ];
    for (extra, write_size_bytes, zerocopy) in cases {
        let mut args = vec!["--full-speed", "--fast", "500ms", "--slow", "0s"];
        args.extend(["--cycles", "1", "--json"]);
        args.extend(extra);
        let (_dir, out, output) = fresh_run(&args);
        let (summary, meta) = json_and_meta(&out, &output);
        let config = &meta["config"];
        assert_eq!(config["write_size_bytes"], write_size_bytes, "{extra:?}");
        assert_eq!(config["sender_request"]["zerocopy"], zerocopy, "{extra:?}");
        let read = summary["phases"]["fast"]["bytes_read"].as_f64().unwrap();
        // Half a second over loopback moves far more than one write.
        assert!(
            read > 100.0 * write_size_bytes as f64,
            "{extra:?}: {read} bytes"
        );
    }
}
