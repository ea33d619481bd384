//! Settings declared once: `settings!` turns a struct whose fields carry a doc comment and a
//! default (`/// meaning` `pub name: Type = default,`) into the struct, its `Default`, a table of
//! names and meanings (`SETTINGS`), and a by-name text interface (`set`, `value_text`) through
//! which the JVM bridge passes settings and docs/configuration.md shows defaults. A field added to
//! the struct is therefore documented, defaulted and reachable from Java in the same line.
use std::net::SocketAddr;
use std::time::Duration;

use crate::config::{HandlerMode, Transport};

/// One setting as declared: its field name and its doc comment (lines joined by spaces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    /// The doc comment's lines, each starting with the space `///` leaves.
    pub doc_lines: &'static [&'static str],
}

impl Setting {
    /// The meaning on one line (the doc comment's lines joined).
    pub fn meaning(&self) -> String {
        self.doc_lines.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" ")
    }
}

/// A setting's value as text: what `Config::set` parses and `Config::value_text` shows.
pub trait SettingValue: Sized {
    fn parse_text(text: &str) -> std::result::Result<Self, String>;
    fn to_text(&self) -> String;
}

/// Integers: decimal, optionally with a binary suffix `k`, `m` or `g` (as Hadoop and Spark sizes).
fn parse_u64(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 10),
        Some((i, 'm' | 'M')) => (&text[..i], 20),
        Some((i, 'g' | 'G')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let value: u64 = digits.parse().map_err(|_| format!("not a non-negative integer: {text:?}"))?;
    value.checked_mul(1u64 << shift).ok_or_else(|| format!("too large: {text:?}"))
}

impl SettingValue for u64 {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        parse_u64(text)
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for usize {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        usize::try_from(parse_u64(text)?).map_err(|_| format!("too large: {text:?}"))
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for bool {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        match text.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(format!("expected true or false: {other:?}")),
        }
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

impl SettingValue for String {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        Ok(text.trim().to_string())
    }
    fn to_text(&self) -> String {
        self.clone()
    }
}

/// Durations: an integer with a unit, `us`, `ms`, `s` or `min`.
impl SettingValue for Duration {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| format!("a duration needs a unit (us, ms, s, min): {text:?}"))?;
        let value: u64 = text[..split].parse().map_err(|_| format!("not a duration: {text:?}"))?;
        match &text[split..] {
            "us" => Ok(Duration::from_micros(value)),
            "ms" => Ok(Duration::from_millis(value)),
            "s" => Ok(Duration::from_secs(value)),
            "min" => value.checked_mul(60).map(Duration::from_secs).ok_or_else(|| format!("too large: {text:?}")),
            unit => Err(format!("unknown duration unit {unit:?} (us, ms, s, min)")),
        }
    }
    /// The largest unit that shows the value exactly.
    fn to_text(&self) -> String {
        let us = self.as_micros();
        if us.is_multiple_of(60_000_000) && us > 0 {
            format!("{}min", us / 60_000_000)
        } else if us.is_multiple_of(1_000_000) {
            format!("{}s", us / 1_000_000)
        } else if us.is_multiple_of(1000) {
            format!("{}ms", us / 1000)
        } else {
            format!("{us}us")
        }
    }
}

/// An address, or empty for none.
impl SettingValue for Option<SocketAddr> {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| format!("not an ip:port address: {text:?}"))
    }
    fn to_text(&self) -> String {
        self.map(|a| a.to_string()).unwrap_or_default()
    }
}

impl SettingValue for Transport {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        match text.trim() {
            "auto" => Ok(Transport::Auto),
            "tcp" => Ok(Transport::Tcp),
            other => Err(format!("expected auto or tcp: {other:?}")),
        }
    }
    fn to_text(&self) -> String {
        match self {
            Transport::Auto => "auto".into(),
            Transport::Tcp => "tcp".into(),
        }
    }
}

impl SettingValue for HandlerMode {
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        match text.trim() {
            "inline" => Ok(HandlerMode::Inline),
            "pull" => Ok(HandlerMode::Pull),
            other => match other.strip_prefix("staged:") {
                Some(n) => n.parse().map(|threads| HandlerMode::Staged { threads }).map_err(|_| format!("staged:N needs a thread count: {other:?}")),
                None => Err(format!("expected inline, staged:N or pull: {other:?}")),
            },
        }
    }
    fn to_text(&self) -> String {
        match self {
            HandlerMode::Inline => "inline".into(),
            HandlerMode::Staged { threads } => format!("staged:{threads}"),
            HandlerMode::Pull => "pull".into(),
        }
    }
}

/// See the module comment. Every field needs a doc comment: the macro refuses a field without one
/// (the `$(#[doc = ...])+` repetition), so a setting cannot be added undocumented.
macro_rules! settings {
    (
        $(#[$struct_meta:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])+ pub $field:ident : $ty:ty = $default:expr, )*
        }
    ) => {
        $(#[$struct_meta])*
        pub struct $name {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $name {
            /// Every setting, in declaration order, with its meaning.
            pub const SETTINGS: &'static [$crate::setting::Setting] = &[
                $( $crate::setting::Setting { name: stringify!($field), doc_lines: &[$($doc),+] }, )*
            ];

            /// Sets one setting from text (`1m`, `30s`, `true`, `tcp`, `staged:2`, ...); an unknown
            /// name or a value that does not parse is `Error::Config` naming both.
            pub fn set(&mut self, name: &str, value: &str) -> $crate::error::Result<()> {
                use $crate::setting::SettingValue;
                match name {
                    $( stringify!($field) => {
                        self.$field = SettingValue::parse_text(value)
                            .map_err(|why| $crate::error::Error::Config(format!("{name}={value}: {why}")))?;
                        Ok(())
                    } )*
                    _ => Err($crate::error::Error::Config(format!("unknown setting {name:?}"))),
                }
            }

            /// One setting's value as text (what `set` parses), or `None` for an unknown name.
            pub fn value_text(&self, name: &str) -> Option<String> {
                use $crate::setting::SettingValue;
                match name {
                    $( stringify!($field) => Some(self.$field.to_text()), )*
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use settings;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn every_setting_round_trips_through_text() {
        let defaults = Config::default();
        let mut copy = Config { max_message_bytes: 1, transport: Transport::Tcp, ..Config::default() };
        for setting in Config::SETTINGS {
            let text = defaults.value_text(setting.name).unwrap();
            copy.set(setting.name, &text).unwrap();
            assert_eq!(copy.value_text(setting.name).unwrap(), text, "{}", setting.name);
            assert!(!setting.meaning().is_empty(), "{} has no meaning", setting.name);
        }
        assert_eq!(format!("{copy:?}"), format!("{defaults:?}"));
    }

    #[test]
    fn values_parse_with_units_and_refuse_nonsense() {
        let mut c = Config::default();
        c.set("pool_cap_bytes", "64m").unwrap();
        assert_eq!(c.pool_cap_bytes, 64 << 20);
        c.set("request_timeout", "1500ms").unwrap();
        assert_eq!(c.request_timeout, Duration::from_millis(1500));
        assert_eq!(c.value_text("request_timeout").unwrap(), "1500ms");
        c.set("handler_mode", "staged:3").unwrap();
        assert_eq!(c.handler_mode, HandlerMode::Staged { threads: 3 });
        c.set("listen", "127.0.0.1:0").unwrap();
        assert_eq!(c.listen, Some("127.0.0.1:0".parse().unwrap()));
        c.set("listen", "").unwrap();
        assert_eq!(c.listen, None);
        for (name, value) in [
            ("pool_cap_bytes", "-1"),
            ("pool_cap_bytes", "99999999999g"),
            ("request_timeout", "30"),
            ("request_timeout", "30h"),
            ("shm_with_peer_errors", "yes"),
            ("transport", "verbs"),
            ("handler_mode", "staged:x"),
            ("listen", "localhost"),
            ("no_such_setting", "1"),
        ] {
            let e = c.set(name, value).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
    }

    #[test]
    fn durations_show_in_the_largest_exact_unit() {
        assert_eq!(Duration::from_secs(120).to_text(), "2min");
        assert_eq!(Duration::from_secs(30).to_text(), "30s");
        assert_eq!(Duration::from_micros(50).to_text(), "50us");
        assert_eq!(Duration::ZERO.to_text(), "0s");
    }
}
