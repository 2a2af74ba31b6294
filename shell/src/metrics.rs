//! Pieces of the Prometheus text format both programs write.

/// A label value with `\`, `"` and newlines escaped.
pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
        assert_eq!(escape("bgp 10.0.0.1"), "bgp 10.0.0.1");
    }
}
