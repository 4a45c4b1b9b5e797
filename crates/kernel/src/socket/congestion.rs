//! Which congestion controls this kernel can give a socket: the loaded ones, and the ones
//! it would load as a module on first use (as root), so a plan can refuse a name no run
//! could use before any run starts.

use std::path::Path;

/// The loaded congestion controls.
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// What this kernel offers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CongestionControls {
    /// Loaded or built in (`net.ipv4.tcp_available_congestion_control`).
    pub loaded: Vec<String>,
    /// Modules (`tcp_NAME.ko*`) the kernel loads when a socket asks for NAME.
    pub loadable: Vec<String>,
}

impl CongestionControls {
    /// This host's, from /proc and /lib/modules; unreadable modules leave `loadable` empty.
    pub fn of_this_host() -> std::io::Result<Self> {
        let loaded = std::fs::read_to_string(AVAILABLE)?;
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let dir = Path::new("/lib/modules")
            .join(release.trim())
            .join("kernel/net/ipv4");
        let modules = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self::from_lists(&loaded, modules))
    }

    /// From the sysctl's text and the file names in the kernel's net/ipv4 module folder.
    pub fn from_lists(loaded: &str, module_files: Vec<String>) -> Self {
        let loaded: Vec<String> = loaded.split_whitespace().map(str::to_owned).collect();
        let mut loadable: Vec<String> = module_files
            .iter()
            .filter_map(|file| file.strip_prefix("tcp_")?.split(".ko").next())
            // tcp_diag.ko is the socket monitor, not a congestion control.
            .filter(|name| *name != "diag" && !loaded.iter().any(|l| l == name))
            .map(str::to_owned)
            .collect();
        loadable.sort();
        loadable.dedup();
        CongestionControls { loaded, loadable }
    }

    pub fn has(&self, name: &str) -> bool {
        self.loaded.iter().chain(&self.loadable).any(|n| n == name)
    }

    /// `reno bbr cubic` or `reno cubic; as modules: bbr htcp`, for an error message.
    pub fn describe(&self) -> String {
        match self.loadable.is_empty() {
            true => self.loaded.join(" "),
            false => format!(
                "{}; as modules: {}",
                self.loaded.join(" "),
                self.loadable.join(" ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_count_unless_loaded_or_not_congestion_controls() {
        let files = [
            "tcp_bbr.ko.zst",
            "tcp_diag.ko",
            "tcp_htcp.ko",
            "tcp_cubic.ko.xz",
            "udp_diag.ko",
        ];
        let cc = CongestionControls::from_lists("reno cubic\n", files.map(String::from).to_vec());
        assert_eq!(cc.loaded, ["reno", "cubic"]);
        assert_eq!(cc.loadable, ["bbr", "htcp"]);
        assert!(cc.has("bbr") && cc.has("reno") && !cc.has("diag") && !cc.has("foo"));
        assert_eq!(cc.describe(), "reno cubic; as modules: bbr htcp");
    }

    #[test]
    fn this_host_has_reno() {
        // Reno is built into every Linux kernel.
        let cc = CongestionControls::of_this_host().unwrap();
        assert!(cc.has("reno"), "{cc:?}");
    }
}
