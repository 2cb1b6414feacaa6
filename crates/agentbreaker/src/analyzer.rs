//! The response analyzer (contract §5, seed 002): deterministic rules that score how done a response
//! says the work is, 0..100. The exact rules are in `docs/decisions.md` ("Analyzer").

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// Points for a `STATUS: COMPLETE` line.
pub const STATUS_COMPLETE_POINTS: i32 = 50;
/// Points for a (non-negated) completion phrase, once.
pub const COMPLETION_PHRASE_POINTS: i32 = 40;
/// Points for a (non-negated) no-work phrase, once.
pub const NO_WORK_PHRASE_POINTS: i32 = 30;
/// Points for passing tests with no failures.
pub const TESTS_PASSED_POINTS: i32 = 20;
/// Points (negative) for failing tests, once.
pub const TESTS_FAILED_POINTS: i32 = -30;
/// Points (negative) for a pending-work phrase, once.
pub const PENDING_WORK_POINTS: i32 = -20;

/// Completion phrases, longest first so overlapping matches take the longest.
pub const COMPLETION_PHRASES: [&str; 6] = [
    "all tasks complete",
    "ready for review",
    "completed",
    "complete",
    "finished",
    "done",
];
/// No-work phrases.
pub const NO_WORK_PHRASES: [&str; 5] = [
    "nothing left to do",
    "nothing to do",
    "no changes needed",
    "already implemented",
    "up to date",
];
/// Pending-work phrases (`still need` also matches `still needs`).
pub const PENDING_WORK_PHRASES: [&str; 5] = [
    "next steps",
    "todo",
    "remaining",
    "still need",
    "in progress",
];

/// Words that negate a phrase when they occur within the three words before it.
const NEGATORS: [&str; 5] = ["not", "isn't", "aren't", "wasn't", "never"];
/// Word pairs that negate.
const NEGATOR_PAIRS: [(&str, &str); 2] = [("no", "longer"), ("not", "yet")];

/// Whether the text signals completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionSignal {
    /// True when any completion rule fired (and no `EXIT_SIGNAL: false` vetoed it).
    pub detected: bool,
    /// 0..100.
    pub confidence: u32,
    /// The distinct non-negated completion and no-work phrases, in order of first occurrence.
    pub phrases: Vec<String>,
}

/// The result of [`analyze`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Analysis {
    /// The completion signal.
    pub completion_signal: CompletionSignal,
    /// Equals `completion_signal.confidence`.
    pub confidence: u32,
    /// `EXIT_SIGNAL:` line value, `None` when absent.
    pub exit_signal: Option<bool>,
    /// The number of the last `N passed`.
    pub tests_passing: Option<u64>,
    /// The number of the last `N failed`.
    pub tests_failing: Option<u64>,
}

impl Analysis {
    /// Reads an analysis (the shape [`analyze`] returns), for callers that analyze elsewhere or
    /// replay recorded analyses into a strategy; a wrong shape is `INVALID_ARGUMENT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let a = Analysis::deserialize(value)
            .map_err(|e| Error::argument(format_args!("not an analysis: {e}")))?;
        if a.completion_signal.confidence > 100 || a.confidence > 100 {
            return Err(Error::argument("an analysis's confidence is 0..100"));
        }
        Ok(a)
    }
}

fn re(pattern: &str) -> Regex {
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("valid built-in pattern")
}

/// `word word` → `\bword[\s-]+word\b`.
fn phrase_pattern(phrases: &[&str]) -> String {
    let alternatives: Vec<String> = phrases
        .iter()
        .map(|p| {
            p.split(' ')
                .map(regex::escape)
                .collect::<Vec<_>>()
                .join(r"[\s-]+")
        })
        .collect();
    // Matched against ASCII-lower-cased text, case-sensitively, with ASCII word boundaries: the
    // phrases are ASCII, and case-insensitive or Unicode-boundary matching is several times slower.
    format!(r"(?-u:\b)(?:{})(?-u:\b)", alternatives.join("|"))
}

static STATUS_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*[A-Z][A-Z0-9_]+:"));
static DELIMITER_LINE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*-{2,}\s*[A-Z][A-Z0-9_]*\s*-{2,}\s*$"));
static EXIT_SIGNAL: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*EXIT_SIGNAL:\s*(\S+)\s*$"));
static STATUS: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*STATUS:\s*(.*?)\s*$"));
static SIGNAL_PHRASES: LazyLock<Regex> = LazyLock::new(|| {
    let mut all: Vec<&str> = COMPLETION_PHRASES.to_vec();
    all.extend(NO_WORK_PHRASES);
    // Longest first so that, at one position, the longer phrase wins.
    all.sort_by_key(|p| std::cmp::Reverse(p.len()));
    re(&phrase_pattern(&all))
});
static PENDING: LazyLock<Regex> = LazyLock::new(|| {
    let p = phrase_pattern(&PENDING_WORK_PHRASES);
    re(&p.replace(r"still[\s-]+need", r"still[\s-]+needs?"))
});
static TEST_SUMMARY: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u:\b)([0-9]+)\s+(?:tests?\s+)?(passed|failed)(?-u:\b)"));

/// Whether `line` belongs to a status block (`KEY: value` with an upper-case key, or a
/// `---WORD---` delimiter).
pub fn is_status_line(line: &str) -> bool {
    // Cheap pre-check: both forms start (after spaces) with an upper-case letter or a dash.
    match line.trim_start().as_bytes().first() {
        Some(b'A'..=b'Z') => STATUS_LINE.is_match(line),
        Some(b'-') => DELIMITER_LINE.is_match(line),
        _ => false,
    }
}

/// The canonical (contract) spelling of a matched phrase: lower-case, single spaces.
fn canonical(matched: &str) -> String {
    matched
        .split(|c: char| c.is_whitespace() || c == '-')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `matched` (as found in the text) is the canonical phrase `phrase`, without allocating.
fn same_phrase(phrase: &str, matched: &str) -> bool {
    let mut words = matched
        .split(|c: char| c.is_whitespace() || c == '-')
        .filter(|w| !w.is_empty());
    phrase
        .split(' ')
        .all(|p| words.next().is_some_and(|w| w.eq_ignore_ascii_case(p)))
        && words.next().is_none()
}

/// The whitespace-separated words of one line and its sentence ends, indexed once and only as
/// far as the phrases found so far (they come left to right), so that each phrase's negation
/// check costs a binary search, however long the line or its words are.
struct LineWords<'a> {
    line: &'a str,
    ascii: bool,
    /// The index covers `line[..scanned]` (a char boundary).
    scanned: usize,
    /// The start of the word the scan stopped inside, if any.
    open_word: Option<usize>,
    /// Byte ranges of the words completed before `scanned`, in order.
    words: Vec<(usize, usize)>,
    /// Byte offsets of `.`, `!`, `?` and `;` before `scanned`.
    sentence_ends: Vec<usize>,
}

impl<'a> LineWords<'a> {
    /// An index to start with [`LineWords::index`]; its buffers are reused from line to line.
    fn empty() -> Self {
        LineWords {
            line: "",
            ascii: true,
            scanned: 0,
            open_word: None,
            words: Vec::new(),
            sentence_ends: Vec::new(),
        }
    }

    /// Starts indexing `line`, dropping the previous line's index.
    fn index(&mut self, line: &'a str) {
        self.line = line;
        self.ascii = line.is_ascii();
        self.scanned = 0;
        self.open_word = None;
        self.words.clear();
        self.sentence_ends.clear();
    }

    /// Extends the index to `line[..end]` (`end` a char boundary).
    fn scan_to(&mut self, end: usize) {
        if end <= self.scanned {
            return;
        }
        let from = self.scanned;
        let (words, ends) = (&mut self.words, &mut self.sentence_ends);
        let mut open = self.open_word;
        let mut note = |i: usize, sentence_end: bool, space: bool| {
            if sentence_end {
                ends.push(i);
            }
            match (space, open) {
                (true, Some(s)) => {
                    words.push((s, i));
                    open = None;
                }
                (false, None) => open = Some(i),
                _ => {}
            }
        };
        if self.ascii {
            // Byte by byte: the same as the general loop, several times faster.
            for (i, &b) in self.line.as_bytes()[from..end].iter().enumerate() {
                note(
                    from + i,
                    matches!(b, b'.' | b'!' | b'?' | b';'),
                    crate::text::is_ascii_space(b),
                );
            }
        } else {
            for (i, c) in self.line[from..end].char_indices() {
                note(
                    from + i,
                    matches!(c, '.' | '!' | '?' | ';'),
                    c.is_whitespace(),
                );
            }
        }
        self.open_word = open;
        self.scanned = end;
    }

    /// Whether the up-to-three words before byte `start`, in the same sentence, negate a phrase
    /// starting there. The part of a word before `start` counts as a word. `start` never goes
    /// back from one call to the next on a line.
    fn negates(&mut self, start: usize) -> bool {
        self.scan_to(start);
        let sentence_start = self.sentence_ends.last().map_or(0, |&e| e + 1);
        let mut window: [&str; 3] = [""; 3];
        let mut taken = 0;
        // The word `start` is inside of (cut at `start`), then the completed ones, last first.
        let open = self.open_word.map(|s| (s, start));
        for (s, e) in open.into_iter().chain(self.words.iter().rev().copied()) {
            if taken == 3 || e <= sentence_start {
                break;
            }
            let piece = &self.line[s.max(sentence_start)..e.min(start)];
            if piece.is_empty() {
                continue;
            }
            window[2 - taken] = piece;
            taken += 1;
        }
        let mut forms: [Cow<'_, str>; 3] = Default::default();
        for (form, word) in forms.iter_mut().zip(&window[3 - taken..]) {
            *form = negator_form(word);
        }
        let words = &forms[..taken];
        words.iter().any(|w| NEGATORS.contains(&w.as_ref()))
            || words
                .windows(2)
                .any(|p| NEGATOR_PAIRS.contains(&(p[0].as_ref(), p[1].as_ref())))
    }
}

/// A word as compared with the negators: lower-case, surrounding punctuation stripped, `’` as
/// `'`. Words longer than any negator come back empty (they cannot match). An ASCII word that is
/// already lower-case (the analyzer reads an ASCII-lower-cased copy) is not copied.
fn negator_form(word: &str) -> Cow<'_, str> {
    if word.len() > 16 {
        return Cow::Borrowed("");
    }
    if word.is_ascii() {
        let trimmed = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '\'');
        if !trimmed.bytes().any(|b| b.is_ascii_uppercase()) {
            return Cow::Borrowed(trimmed);
        }
    }
    Cow::Owned(
        word.replace('\u{2019}', "'")
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
            .to_lowercase(),
    )
}

/// Scores a response (contract §5).
pub fn analyze(text: &str) -> Analysis {
    #[cfg(feature = "test-panic")]
    if text == crate::TEST_PANIC_TRIGGER {
        panic!("test-panic: analyze");
    }
    let mut exit_true = false;
    let mut exit_false = false;
    let mut status_complete = false;
    let mut completion_phrase = false;
    let mut no_work_phrase = false;
    let mut phrases: Vec<String> = Vec::new();

    // ASCII lower-casing keeps every byte offset, so matches in `lower` index `text` too.
    let lower = text.to_ascii_lowercase();
    let mut words = LineWords::empty();
    for (line, lower_line) in text.lines().zip(lower.lines()) {
        let status_line = is_status_line(line);
        if status_line && let Some(c) = EXIT_SIGNAL.captures(line) {
            match c[1].to_ascii_lowercase().as_str() {
                "true" => exit_true = true,
                "false" => exit_false = true,
                _ => {}
            }
        }
        if status_line
            && let Some(c) = STATUS.captures(line)
            && c[1].eq_ignore_ascii_case("COMPLETE")
        {
            status_complete = true;
        }
        if status_line {
            continue;
        }
        let mut indexed = false;
        for m in SIGNAL_PHRASES.find_iter(lower_line) {
            // A phrase already counted needs no second look.
            if phrases.iter().any(|p| same_phrase(p, m.as_str())) {
                continue;
            }
            if !indexed {
                words.index(lower_line);
                indexed = true;
            }
            if words.negates(m.start()) {
                continue;
            }
            let phrase = canonical(m.as_str());
            if NO_WORK_PHRASES.contains(&phrase.as_str()) {
                no_work_phrase = true;
            } else {
                completion_phrase = true;
            }
            if !phrases.contains(&phrase) {
                phrases.push(phrase);
            }
        }
    }

    let mut tests_passing = None;
    let mut tests_failing = None;
    let mut any_passed = false;
    let mut any_failed = false;
    for c in TEST_SUMMARY.captures_iter(&lower) {
        let n: u64 = c[1].parse().unwrap_or(u64::MAX);
        if &c[2] == "passed" {
            tests_passing = Some(n);
            any_passed |= n > 0;
        } else {
            tests_failing = Some(n);
            any_failed |= n > 0;
        }
    }
    let pending = PENDING.is_match(&lower);

    let (detected, confidence) = if exit_false {
        (false, 0)
    } else if exit_true {
        (true, 100)
    } else {
        let mut score = 0;
        if status_complete {
            score += STATUS_COMPLETE_POINTS;
        }
        if completion_phrase {
            score += COMPLETION_PHRASE_POINTS;
        }
        if no_work_phrase {
            score += NO_WORK_PHRASE_POINTS;
        }
        if any_passed && !any_failed {
            score += TESTS_PASSED_POINTS;
        }
        if any_failed {
            score += TESTS_FAILED_POINTS;
        }
        if pending {
            score += PENDING_WORK_POINTS;
        }
        (
            status_complete || completion_phrase || no_work_phrase,
            score.clamp(0, 100) as u32,
        )
    };
    Analysis {
        completion_signal: CompletionSignal {
            detected,
            confidence,
            phrases,
        },
        confidence,
        exit_signal: if exit_false {
            Some(false)
        } else if exit_true {
            Some(true)
        } else {
            None
        },
        tests_passing,
        tests_failing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_signal_rules() {
        let a = analyze("work left\nEXIT_SIGNAL: true\n");
        assert!(a.completion_signal.detected);
        assert_eq!(a.confidence, 100);
        assert_eq!(a.exit_signal, Some(true));
        let a = analyze("All done!\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\nEXIT_SIGNAL: false");
        assert!(!a.completion_signal.detected);
        assert_eq!(a.confidence, 0);
        assert_eq!(a.exit_signal, Some(false));
    }

    #[test]
    fn scores_add_and_clamp() {
        assert_eq!(analyze("STATUS: COMPLETE").confidence, 50);
        assert_eq!(analyze("The work is done.").confidence, 40);
        assert_eq!(analyze("done, finished, complete").confidence, 40);
        assert_eq!(analyze("Nothing to do here").confidence, 30);
        assert_eq!(
            analyze("STATUS: COMPLETE\nAll done. Nothing to do. 5 passed").confidence,
            100
        );
        assert_eq!(analyze("10 passed, 2 failed").confidence, 0);
        assert_eq!(analyze("Done. 3 tests passed").confidence, 60);
        assert_eq!(analyze("Done. Next steps: docs").confidence, 20);
        assert!(!analyze("5 passed").completion_signal.detected);
        assert_eq!(analyze("5 passed").confidence, 20);
    }

    #[test]
    fn negation_of_several_phrases_on_one_line() {
        // Phrases come left to right; each one's window is its own.
        let a = analyze("Done with parsing; not finished with the docs");
        assert_eq!(a.completion_signal.phrases, vec!["done".to_string()]);
        let a = analyze("It is not done; the build is complete");
        assert_eq!(a.completion_signal.phrases, vec!["complete".to_string()]);
        let a = analyze("never done, never finished, never complete");
        assert!(a.completion_signal.phrases.is_empty());
        // A phrase inside a longer word: the part before it is the nearest word.
        let a = analyze("I am not redone and not yet\tundone");
        assert!(a.completion_signal.phrases.is_empty(), "{a:?}");
        let a = analyze("Ça n’est pas fini, it isn’t done. Everything is done");
        assert_eq!(a.completion_signal.phrases, vec!["done".to_string()]);
    }

    #[test]
    fn negation_window() {
        assert!(!analyze("It is not done").completion_signal.detected);
        assert!(!analyze("not yet finished").completion_signal.detected);
        assert!(
            !analyze("This is no longer complete")
                .completion_signal
                .detected
        );
        assert!(
            analyze("not at all the point, it is done")
                .completion_signal
                .detected
        );
        assert!(
            analyze("It is not failing. Done.")
                .completion_signal
                .detected
        );
        assert!(!analyze("we aren’t done").completion_signal.detected);
    }

    #[test]
    fn phrases_are_word_bounded_and_canonical() {
        assert!(
            !analyze("undone and completely incomplete")
                .completion_signal
                .detected
        );
        let a = analyze("All Tasks Complete; code is up-to-date. Done");
        assert_eq!(
            a.completion_signal.phrases,
            ["all tasks complete", "up to date", "done"]
        );
        assert_eq!(a.confidence, 70);
    }

    #[test]
    fn status_lines_do_not_count_as_phrases() {
        let a = analyze("RECOMMENDATION: all done\n---RALPH_STATUS---");
        assert!(!a.completion_signal.detected);
        assert!(is_status_line("---RALPH_STATUS---"));
        assert!(is_status_line("WORK_TYPE: testing"));
        assert!(!is_status_line("Note: done"));
    }

    #[test]
    fn test_summaries_use_the_last_numbers() {
        let a = analyze("3 passed, 1 failed\nthen 7 tests passed, 0 failed");
        assert_eq!(a.tests_passing, Some(7));
        assert_eq!(a.tests_failing, Some(0));
        assert_eq!(a.confidence, 0);
        let a = analyze("Tests: 12 passed, 0 failed");
        assert_eq!(a.confidence, 20);
        assert_eq!(analyze("no numbers").tests_passing, None);
    }

    #[test]
    fn pending_work_counts_once() {
        assert_eq!(
            analyze("Done. TODO: a. TODO: b. Still needs tests").confidence,
            20
        );
        assert_eq!(analyze("work in progress").confidence, 0);
    }

    #[test]
    fn analyses_round_trip_through_json() {
        let a = analyze("All tasks complete. 3 passed");
        let back = Analysis::from_json(&serde_json::to_value(&a).unwrap()).unwrap();
        assert_eq!(back, a);
        for bad in [
            serde_json::json!({"confidence": 5}),
            serde_json::json!(3),
            serde_json::json!({"completionSignal": {"detected": true, "confidence": 101, "phrases": []},
                "confidence": 101, "exitSignal": null, "testsPassing": null, "testsFailing": null}),
        ] {
            assert_eq!(
                Analysis::from_json(&bad).unwrap_err().code(),
                "INVALID_ARGUMENT"
            );
        }
    }

    #[test]
    fn huge_input_is_fine() {
        let big = "done ".repeat(2_000_000);
        assert_eq!(analyze(&big).confidence, 40);
    }
}
