//! `/proc/net/softnet_stat`: what each CPU's receive path dropped or left undone. One line
//! per CPU of hexadecimal columns: packets processed, dropped (the backlog queue full,
//! `netdev_max_backlog`), and time squeezes (the receive softirq stopped with work left,
//! out of `netdev_budget` or `netdev_budget_usecs`), then others oscil does not read.

use crate::host::proc::{ParseError, ProcFile, ReadError};

const FILE: &str = "/proc/net/softnet_stat";

/// The drops and time squeezes of every CPU, summed; cumulative since boot (each CPU's
/// counter is 32 bits and may wrap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Softnet {
    pub dropped: u64,
    pub time_squeeze: u64,
}

/// Parses the text of `/proc/net/softnet_stat`.
pub fn parse(text: &str) -> Result<Softnet, ParseError> {
    let mut sum = Softnet::default();
    for (cpu, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let mut column = |name: &str| -> Result<u64, ParseError> {
            let word = words.next().ok_or_else(|| {
                ParseError::new(FILE, format!("line {} has no \"{name}\" column", cpu + 1))
            })?;
            u64::from_str_radix(word, 16).map_err(|_| {
                ParseError::new(
                    FILE,
                    format!(
                        "line {} {name}: expected hexadecimal, found {word:?}",
                        cpu + 1
                    ),
                )
            })
        };
        column("processed")?;
        sum.dropped += column("dropped")?;
        sum.time_squeeze += column("time_squeeze")?;
    }
    Ok(sum)
}

/// Opens the file to read it again and again.
pub fn open() -> Result<ProcFile<Softnet>, ReadError> {
    ProcFile::open(FILE, parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_second_and_third_hex_columns_of_every_cpu() {
        // Two CPUs as 6.x writes them (13 columns); the second dropped 0x1f = 31 and was
        // squeezed 0x100 = 256 times, the first dropped 2 and was squeezed 0xa = 10 times.
        let text = "\
0001e240 00000002 0000000a 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
000f4240 0000001f 00000100 00000000 00000000 00000000 00000000 00000000 00000000 00000005 00000000 00000000 00000001
";
        assert_eq!(
            parse(text).unwrap(),
            Softnet {
                dropped: 33,
                time_squeeze: 266
            }
        );
        // An old kernel's shorter lines read the same.
        assert_eq!(parse("ff 1 2 0 0\n").unwrap().dropped, 1);
        assert_eq!(parse("").unwrap(), Softnet::default());
    }

    #[test]
    fn a_short_line_or_a_word_not_hex_says_where() {
        let e = parse("0001e240 00000002\n").unwrap_err();
        assert!(
            e.reason.contains("line 1") && e.reason.contains("time_squeeze"),
            "{e}"
        );
        let e = parse("1 2 3\n1 zz 3\n").unwrap_err();
        assert!(
            e.reason.contains("line 2") && e.reason.contains("\"zz\""),
            "{e}"
        );
    }

    #[test]
    fn reads_this_host() {
        open().unwrap().read().unwrap();
    }
}
