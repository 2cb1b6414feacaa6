//! Small text helpers: bounded copies of untrusted strings and number formatting for messages.

/// The most bytes of an error text the library keeps (contract §6).
pub const MAX_ERROR_BYTES: usize = 4096;

/// `text` cut to at most `max` bytes, at a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `char::is_whitespace` for a byte below 0x80 (tab, line feed, vertical tab, form feed, carriage
/// return, space): the ASCII fast paths of the tokenizers use it.
#[inline(always)]
pub(crate) fn is_ascii_space(b: u8) -> bool {
    b == b' ' || (b'\t'..=b'\r').contains(&b)
}

/// An error text as the library stores it: cut to [`MAX_ERROR_BYTES`].
pub fn cap_error(text: &str) -> &str {
    truncate(text, MAX_ERROR_BYTES)
}

/// `value` with at most `decimals` decimals, trailing zeros and a trailing dot removed
/// (`1801`, `1800.5`, `5001.2`).
pub fn format_decimal(value: f64, decimals: usize) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let s = format!("{value:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".to_string() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
        let big = "é".repeat(10_000);
        assert!(cap_error(&big).len() <= MAX_ERROR_BYTES);
    }

    #[test]
    fn decimals_are_trimmed() {
        assert_eq!(format_decimal(1801.0, 3), "1801");
        assert_eq!(format_decimal(1800.5, 3), "1800.5");
        assert_eq!(format_decimal(1800.001, 3), "1800.001");
        assert_eq!(format_decimal(5001.2, 4), "5001.2");
        assert_eq!(format_decimal(0.1 + 0.2, 4), "0.3");
        assert_eq!(format_decimal(-0.00001, 2), "0");
    }
}
