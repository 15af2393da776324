//! The host config's common shape read without the TOML parser
//! (docs/design.md#flat-config): every start reads the host config, and
//! almost every file is the installed example (comments only) or a few
//! `key = value` lines. For such a file [`read`] gives the keys and their
//! values as a JSON object, which `RawHostConfig` is deserialised from; for
//! anything else it gives `None` and the caller parses the text as TOML.
//!
//! What is read here is a strict subset of TOML, taken line by line, and is
//! read as TOML reads it:
//! - a blank line, or one holding a comment (`#` to the end of the line);
//! - `key = value`, then an optional comment, where the key is a bare key
//!   (ASCII letters, digits, `_`, `-`) not seen before, and the value is
//!   `true`, `false`, a decimal integer that fits `i64` (no leading zero,
//!   no `_`), a basic string without escapes (`"..."`, no `\`), or an array
//!   of such strings on the one line.
//!
//! Anything else (tables, dotted or quoted keys, escapes, literal or
//! multi-line strings, floats, dates, a `\r`, a control character other
//! than a tab) gives `None`, and so does a duplicate key: the TOML parser
//! then accepts it or says what is wrong, with its line and column.

use serde_json::{Map, Value};

/// The keys and values of `text` when all of it is in the subset above.
pub(super) fn read(text: &str) -> Option<Map<String, Value>> {
    if text.chars().any(|c| c.is_control() && c != '\t' && c != '\n') {
        return None;
    }
    let mut keys = Map::new();
    for line in text.split('\n') {
        let line = skip_ws(line);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key_len =
            line.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-').count();
        if key_len == 0 {
            return None;
        }
        let (key, rest) = line.split_at(key_len);
        let rest = skip_ws(rest).strip_prefix('=')?;
        let (value, rest) = value(skip_ws(rest))?;
        let rest = skip_ws(rest);
        if !(rest.is_empty() || rest.starts_with('#')) || keys.contains_key(key) {
            return None;
        }
        keys.insert(key.to_string(), value);
    }
    Some(keys)
}

/// `s` after its leading TOML whitespace (spaces and tabs).
fn skip_ws(s: &str) -> &str {
    s.trim_start_matches([' ', '\t'])
}

/// The value at the start of `s`, and what follows it.
fn value(s: &str) -> Option<(Value, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let mut items = Vec::new();
        let mut rest = skip_ws(rest);
        loop {
            if let Some(after) = rest.strip_prefix(']') {
                return Some((Value::Array(items), after));
            }
            let (item, after) = string(rest)?;
            items.push(Value::String(item.to_string()));
            rest = skip_ws(after);
            match rest.strip_prefix(',') {
                Some(after) => rest = skip_ws(after),
                None if rest.starts_with(']') => {}
                None => return None,
            }
        }
    }
    if s.starts_with('"') {
        let (text, rest) = string(s)?;
        return Some((Value::String(text.to_string()), rest));
    }
    let word_len = s.bytes().take_while(|b| !matches!(b, b' ' | b'\t' | b'#')).count();
    let (word, rest) = s.split_at(word_len);
    let value = match word {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::from(integer(word)?),
    };
    Some((value, rest))
}

/// A basic string without escapes at the start of `s` (its text), and what
/// follows it. (A multi-line string, `"""`, reads as `""` followed by a `"`,
/// which no line of the subset has after a value.)
fn string(s: &str) -> Option<(&str, &str)> {
    let body = s.strip_prefix('"')?;
    let end = body.find(['"', '\\'])?;
    let (text, rest) = body.split_at(end);
    Some((text, rest.strip_prefix('"')?))
}

/// A TOML decimal integer: an optional sign, then `0` or digits that do not
/// begin with `0`; no `_`; within `i64`.
fn integer(word: &str) -> Option<i64> {
    let digits = word.strip_prefix(['+', '-']).unwrap_or(word);
    let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    if !plain || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    word.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the TOML parser makes of `text`, as JSON.
    fn toml(text: &str) -> Option<Value> {
        let table: toml::Table = toml::from_str(text).ok()?;
        Some(serde_json::to_value(table).expect("a TOML table is JSON"))
    }

    /// Whenever [`read`] reads a text, the TOML parser reads it too, to the
    /// same keys and values.
    fn agrees(text: &str) -> bool {
        match read(text) {
            Some(flat) => {
                assert_eq!(Some(Value::Object(flat)), toml(text), "{text:?}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_common_files_are_read_as_toml_reads_them() {
        for text in [
            "",
            "\n\n",
            "# a comment\n   # indented\n\t\n",
            "runtime_path = \"/usr/bin/crun\"\n",
            "runtime_path=\"/usr/bin/crun\"",
            "mode = \"hook\" # a comment\nnoexec = true\nhome=false\n",
            "nr_inodes = 100000\ntmp_size = 1073741824\nshm_size = \"75%\"\n",
            "n = -5\nm = +7\nz = 0\nw = -0\n",
            "extra_targets = [\"/var/tmp\", \"/run\" , ]\nempty = []\none=[\"a\"]\n",
            "key-with_dash9 = \"\"\n",
            "s = \"tab\there # not a comment\"\n",
            "s = \"ünïcödé 🚀\"\n",
            include_str!("../../hooks/config.toml"),
        ] {
            assert!(agrees(text), "not read: {text:?}");
        }
    }

    #[test]
    fn the_rest_is_left_to_the_toml_parser() {
        for text in [
            "[table]\n",
            "a.b = 1\n",
            "\"quoted\" = 1\n",
            "s = 'literal'\n",
            "s = \"esc\\\"aped\"\n",
            "s = \"\"\"multi\nline\"\"\"\n",
            "s = \"\"\"\"\"\"\n",
            "f = 1.5\n",
            "e = 1e3\n",
            "h = 0x10\n",
            "u = 1_000\n",
            "z = 007\n",
            "d = 1979-05-27\n",
            "big = 9223372036854775808\n",
            "inf = inf\n",
            "a = [1, 2]\n",
            "a = [\"x\",\n\"y\"]\n",
            "a = [\"x\" \"y\"]\n",
            "a = [,]\n",
            "t = { x = 1 }\n",
            "dup = 1\ndup = 2\n",
            "crlf = 1\r\n",
            "nul = \"\0\"\n",
            "# bell \u{7}\n",
            "k = \n",
            "k = true false\n",
            "= 1\n",
            "\u{feff}k = 1\n",
            "k\t=\t\"v\"\tjunk\n",
            "k = truex\n",
            "k = TRUE\n",
        ] {
            assert_eq!(read(text), None, "read: {text:?}");
        }
    }

    /// Lines of a key, a separator, a value and a tail, each drawn from
    /// forms that are read here and forms that are not, like the lists above.
    fn document() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        use proptest::sample::select;
        const KEYS: [&str; 8] = ["k", "key_2", "a-b", "9", "", "a.b", "\"q\"", "k k"];
        const SEPS: [&str; 7] = ["=", " = ", "\t=\t", "", "==", " ", ":"];
        const VALUES: [&str; 23] = [
            "\"s\"",
            "\"\"",
            "\"x y\"",
            "\"# h\"",
            "1",
            "-0",
            "+7",
            "0",
            "true",
            "false",
            "[]",
            "[\"a\", \"b\",]",
            "[ \"a\" ]",
            "[\"\"]",
            "-9223372036854775808",
            "9223372036854775807",
            "\"\\n\"",
            "'l'",
            "\"\"\"m\"\"\"",
            "01",
            "1_0",
            "1.0",
            "[\"a\" \"b\"]",
        ];
        const TAILS: [&str; 7] = ["", " ", "# c", " #c", " x", ",", "\""];
        // The first of each list's forms are read here: half the lines are
        // made of those only, so that documents with several are common.
        let kv = |n: [usize; 4]| {
            (select(&KEYS[..n[0]]), select(&SEPS[..n[1]]), select(&VALUES[..n[2]]), select(&TAILS[..n[3]]))
                .prop_map(|(k, s, v, t)| format!("{k}{s}{v}{t}"))
        };
        let line = prop_oneof![2 => kv([4, 3, 16, 4]), 2 => kv([8, 7, 23, 7]), 1 => select(&["", "  ", "# x", "\t# y", "[t]"][..]).prop_map(String::from)];
        proptest::collection::vec(line, 1..5).prop_map(|lines| lines.join("\n"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// Every such document that is read here is read by the TOML parser
        /// to the same value.
        #[test]
        fn documents_agree_with_toml(text in document()) {
            agrees(&text);
        }

        /// And so is any text at all.
        #[test]
        fn any_text_agrees_with_toml(text in "\\PC{0,60}") {
            agrees(&text);
        }
    }

    #[test]
    fn values_keep_their_type() {
        let flat = read("a = 1\nb = \"1\"\nc = true\nd = [\"x\"]\n").expect("read");
        assert_eq!(Value::Object(flat), json!({"a": 1, "b": "1", "c": true, "d": ["x"]}));
    }
}
