//! Hand-rolled argument parsing: `--flag value`, `--flag=value` and boolean `--flag`.
//! No CLI crate; the grammar is small and the errors say what was expected.

use std::collections::BTreeMap;

/// Largest payload a benchmark point may use (the fabric's default `max_message_bytes` is 128 MiB).
pub const SIZE_BYTES_MAX: usize = 64 << 20;

/// Parsed command line: positional words plus flags, checked against the flags a command knows.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Args {
    pub positional: Vec<String>,
    values: BTreeMap<String, String>,
    switches: Vec<String>,
}

impl Args {
    /// Parses `argv` (without the program name). `value_flags` take a value, `switch_flags` do not;
    /// any other `--word` is an error. A lone `--` ends flag parsing.
    pub fn parse(argv: &[String], value_flags: &[&str], switch_flags: &[&str]) -> Result<Args, String> {
        let mut args = Args::default();
        let mut index = 0;
        let mut flags_done = false;
        while index < argv.len() {
            let word = &argv[index];
            index += 1;
            if flags_done {
                args.positional.push(word.clone());
                continue;
            }
            if word == "--" {
                flags_done = true;
                continue;
            }
            if !word.starts_with("--") {
                if word == "-h" {
                    args.switches.push("help".to_string());
                } else if word.starts_with('-') && word.len() > 1 {
                    return Err(format!("unknown option '{word}' (options are --long-words)"));
                } else {
                    args.positional.push(word.clone());
                }
                continue;
            }
            let body = &word[2..];
            let (name, inline_value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            if value_flags.contains(&name) {
                let value = match inline_value {
                    Some(v) => v,
                    None => {
                        let v = argv.get(index).ok_or_else(|| format!("--{name} needs a value"))?;
                        index += 1;
                        v.clone()
                    }
                };
                if args.values.insert(name.to_string(), value).is_some() {
                    return Err(format!("--{name} given twice"));
                }
            } else if switch_flags.contains(&name) {
                if inline_value.is_some() {
                    return Err(format!("--{name} takes no value"));
                }
                args.switches.push(name.to_string());
            } else {
                return Err(format!("unknown option '--{name}'"));
            }
        }
        Ok(args)
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|s| s.as_str())
    }

    pub fn switch(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }

    /// A numeric flag, with the flag's name in the error.
    pub fn number<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        match self.value(name) {
            None => Ok(None),
            Some(v) => {
                v.replace('_', "").parse::<T>().map(Some).map_err(|_| format!("--{name}: '{v}' is not a valid number"))
            }
        }
    }
}

/// Parses a size: `8`, `4K`, `4KiB`, `64k`, `1M`, `1MiB`, `4MB` (K/M/G are powers of 1024).
/// A comma-separated list of names (`--variants a,b`), each parsed by `parse`; duplicates dropped,
/// an unknown name or an empty list is an error naming `flag`.
pub fn parse_list<T: PartialEq>(text: &str, flag: &str, parse: fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    let mut items = Vec::new();
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let item = parse(word).ok_or_else(|| format!("{flag}: unknown '{word}'"))?;
        if !items.contains(&item) {
            items.push(item);
        }
    }
    if items.is_empty() {
        return Err(format!("{flag} needs at least one entry"));
    }
    Ok(items)
}

pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return Err(format!("size '{text}' must start with a number"));
    }
    let number: usize = t[..digits_end].parse().map_err(|_| format!("size '{text}' is too large"))?;
    let unit = t[digits_end..].trim().to_ascii_lowercase();
    let multiplier: usize = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("size '{text}': unknown unit '{unit}' (use K, M, G)")),
    };
    let size = number.checked_mul(multiplier).ok_or_else(|| format!("size '{text}' overflows"))?;
    if size == 0 || size > SIZE_BYTES_MAX {
        return Err(format!("size '{text}' must be in 1 B ..= {}", format_size(SIZE_BYTES_MAX)));
    }
    Ok(size)
}

/// Parses a comma-separated size list; keeps the given order, rejects duplicates.
pub fn parse_sizes(text: &str) -> Result<Vec<usize>, String> {
    let mut sizes = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let size = parse_size(part)?;
        if sizes.contains(&size) {
            return Err(format!("size {} listed twice", format_size(size)));
        }
        sizes.push(size);
    }
    if sizes.is_empty() {
        return Err("--sizes needs at least one size".to_string());
    }
    Ok(sizes)
}

/// `8 B`, `4 KiB`, `1 MiB`, `1536 B`: exact, for table rows and progress lines.
pub fn format_size(size: usize) -> String {
    if size >= 1 << 20 && size.trailing_zeros() >= 20 {
        format!("{} MiB", size >> 20)
    } else if size >= 1 << 10 && size.trailing_zeros() >= 10 {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_values_and_positionals() {
        let a = Args::parse(
            &argv(&["fabric", "lat", "--sizes", "8,1M", "--quick", "--json=out.json", "--iterations", "1_000"]),
            &["sizes", "json", "iterations"],
            &["quick", "jvm"],
        )
        .unwrap();
        assert_eq!(a.positional, vec!["fabric", "lat"]);
        assert_eq!(a.value("sizes"), Some("8,1M"));
        assert_eq!(a.value("json"), Some("out.json"));
        assert!(a.switch("quick"));
        assert!(!a.switch("jvm"));
        assert_eq!(a.number::<u64>("iterations").unwrap(), Some(1000));
        assert_eq!(a.number::<u64>("warmup").unwrap(), None);
    }

    #[test]
    fn flag_errors() {
        let e = Args::parse(&argv(&["--bogus"]), &["sizes"], &[]).unwrap_err();
        assert!(e.contains("--bogus"), "{e}");
        let e = Args::parse(&argv(&["--sizes"]), &["sizes"], &[]).unwrap_err();
        assert!(e.contains("needs a value"), "{e}");
        let e = Args::parse(&argv(&["--quick=1"]), &[], &["quick"]).unwrap_err();
        assert!(e.contains("takes no value"), "{e}");
        let e = Args::parse(&argv(&["--sizes", "8", "--sizes", "9"]), &["sizes"], &[]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let e = Args::parse(&argv(&["-x"]), &[], &[]).unwrap_err();
        assert!(e.contains("-x"), "{e}");
        let a = Args::parse(&argv(&["--iterations", "x"]), &["iterations"], &[]).unwrap();
        assert!(a.number::<u64>("iterations").is_err());
        assert!(Args::parse(&argv(&["-h"]), &[], &[]).unwrap().switch("help"));
        let a = Args::parse(&argv(&["--", "--not-a-flag"]), &[], &[]).unwrap();
        assert_eq!(a.positional, vec!["--not-a-flag"]);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("4MB").unwrap(), 4 << 20);
        assert!(parse_size("0").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("3X").is_err());
        assert!(parse_size("1G").is_err(), "above SIZE_BYTES_MAX");
        assert_eq!(parse_sizes("8, 4K,1M").unwrap(), vec![8, 4096, 1 << 20]);
        assert!(parse_sizes("8,8").is_err());
        assert!(parse_sizes(",").is_err());
        assert_eq!(format_size(8), "8 B");
        assert_eq!(format_size(4096), "4 KiB");
        assert_eq!(format_size(4 << 20), "4 MiB");
        assert_eq!(format_size(1536), "1536 B");
    }
}
