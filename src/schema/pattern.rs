//! Regular expressions as JSON Schema's `pattern` and `patternProperties`
//! mean them (ECMA-262, unanchored search), in the part schemas use.
//!
//! A small backtracking matcher, written here because no regex crate is in
//! the tree and a schema check must not pull one in. It understands
//! literals and escapes, `.`, classes (`[a-z]`, `[^…]`, `\d`, `\w`, `\s` and
//! their negations), anchors (`^`, `$`, `\b`, `\B`), groups (capturing,
//! `(?:…)`, `(?<name>…)`), lookahead, alternation and every quantifier
//! (greedy and lazy). What it does not understand (back references,
//! lookbehind, Unicode property escapes) makes [`Pattern::parse`] fail, and
//! the caller then judges nothing. A match is bounded in steps and in
//! depth: past either, the answer is "don't know", never a hang or a stack
//! overflow on a hostile pattern.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The most patterns one thread keeps parsed.
const CACHED: usize = 128;

/// A parsed pattern.
#[derive(Debug)]
pub(crate) struct Pattern {
    node: Node,
    anchored: bool,
}

#[derive(Debug)]
enum Node {
    Empty,
    Char(char),
    /// `.`: any character but a line terminator.
    Any,
    Class {
        items: Vec<ClassItem>,
        negated: bool,
    },
    Start,
    End,
    /// `\b` (true) or `\B` (false).
    Boundary(bool),
    /// `(?=…)` (true) or `(?!…)` (false).
    Look(Box<Node>, bool),
    Concat(Vec<Node>),
    Alternation(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
}

#[derive(Debug)]
enum ClassItem {
    Range(char, char),
    /// `\d`, `\w` or `\s`, negated for `\D`, `\W`, `\S`.
    Set(Set, bool),
}

#[derive(Debug, Clone, Copy)]
enum Set {
    Digit,
    Word,
    Space,
}

/// Why a pattern was not understood.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unsupported;

/// The most steps one match may take, and the deepest its backtracking may
/// nest: enough for any sane pattern on a long string.
const MAX_STEPS: u32 = 1_000_000;
const MAX_DEPTH: u32 = 2_000;

impl Pattern {
    /// Parses an ECMA-262 pattern.
    pub(crate) fn parse(source: &str) -> Result<Pattern, Unsupported> {
        let mut parser = Parser { chars: source.chars().collect(), at: 0, depth: 0 };
        let node = parser.alternation()?;
        if parser.at != parser.chars.len() {
            return Err(Unsupported);
        }
        let anchored = starts_anchored(&node);
        Ok(Pattern { node, anchored })
    }

    /// The pattern `source`, parsed once per thread: a schema checked on
    /// every call names the same few patterns again and again. `None` when
    /// it is not understood. At most [`CACHED`] are kept; past that the
    /// cache starts again.
    pub(crate) fn cached(source: &str) -> Option<Rc<Pattern>> {
        thread_local! {
            static PARSED: RefCell<HashMap<String, Option<Rc<Pattern>>>> =
                RefCell::new(HashMap::new());
        }
        PARSED.with(|parsed| {
            let mut parsed = parsed.borrow_mut();
            if let Some(pattern) = parsed.get(source) {
                return pattern.clone();
            }
            if parsed.len() >= CACHED {
                parsed.clear();
            }
            let pattern = Pattern::parse(source).ok().map(Rc::new);
            parsed.insert(source.to_owned(), pattern.clone());
            pattern
        })
    }

    /// Whether the pattern matches somewhere in `text`; `None` when the
    /// match ran out of steps or depth.
    pub(crate) fn is_match(&self, text: &str) -> Option<bool> {
        let chars: Vec<char> = text.chars().collect();
        let mut matcher = Matcher { chars: &chars, steps: 0, depth: 0, gave_up: false };
        let starts = if self.anchored { 0..=0 } else { 0..=chars.len() };
        for start in starts {
            if matcher.at(&self.node, start, &mut |_, _| true) {
                return Some(true);
            }
            if matcher.gave_up {
                return None;
            }
        }
        Some(false)
    }
}

/// True when every match must start at the beginning (`^…`).
fn starts_anchored(node: &Node) -> bool {
    match node {
        Node::Start => true,
        Node::Concat(nodes) => nodes.first().is_some_and(starts_anchored),
        Node::Alternation(nodes) => nodes.iter().all(starts_anchored),
        _ => false,
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    depth: u32,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, wanted: char) -> bool {
        let found = self.peek() == Some(wanted);
        if found {
            self.at += 1;
        }
        found
    }

    fn next(&mut self) -> Result<char, Unsupported> {
        let c = self.peek().ok_or(Unsupported)?;
        self.at += 1;
        Ok(c)
    }

    fn alternation(&mut self) -> Result<Node, Unsupported> {
        self.depth += 1;
        if self.depth > 100 {
            return Err(Unsupported);
        }
        let mut branches = vec![self.concat()?];
        while self.eat('|') {
            branches.push(self.concat()?);
        }
        self.depth -= 1;
        Ok(if branches.len() == 1 { branches.remove(0) } else { Node::Alternation(branches) })
    }

    fn concat(&mut self) -> Result<Node, Unsupported> {
        let mut nodes = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            nodes.push(self.quantified(atom)?);
        }
        Ok(match nodes.len() {
            0 => Node::Empty,
            1 => nodes.remove(0),
            _ => Node::Concat(nodes),
        })
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, Unsupported> {
        let (min, max) = match self.peek() {
            Some('{') => match self.braces() {
                Some(bounds) => bounds,
                // A `{` that is no quantifier is a literal (Annex B).
                None => return Ok(atom),
            },
            Some(c @ ('*' | '+' | '?')) => {
                self.at += 1;
                match c {
                    '*' => (0, None),
                    '+' => (1, None),
                    _ => (0, Some(1)),
                }
            }
            _ => return Ok(atom),
        };
        if matches!(atom, Node::Start | Node::End | Node::Boundary(_) | Node::Look(..)) {
            return Err(Unsupported);
        }
        if max.is_some_and(|max| max < min) {
            return Err(Unsupported);
        }
        let greedy = !self.eat('?');
        Ok(Node::Repeat { node: Box::new(atom), min, max, greedy })
    }

    /// `{n}`, `{n,}` or `{n,m}` at the cursor, consumed; `None` (nothing
    /// consumed) when the brace starts no quantifier.
    fn braces(&mut self) -> Option<(u32, Option<u32>)> {
        let start = self.at;
        self.at += 1;
        let number = |parser: &mut Parser| {
            let from = parser.at;
            while parser.peek().is_some_and(|c| c.is_ascii_digit()) {
                parser.at += 1;
            }
            let digits: String = parser.chars[from..parser.at].iter().collect();
            digits.parse::<u32>().ok()
        };
        let parsed = (|| {
            let min = number(self)?;
            let max = if self.eat(',') {
                if self.peek() == Some('}') {
                    None
                } else {
                    Some(number(self)?)
                }
            } else {
                Some(min)
            };
            self.eat('}').then_some((min, max))
        })();
        if parsed.is_none() {
            self.at = start;
        }
        parsed
    }

    fn atom(&mut self) -> Result<Node, Unsupported> {
        match self.next()? {
            '.' => Ok(Node::Any),
            '^' => Ok(Node::Start),
            '$' => Ok(Node::End),
            '[' => self.class(),
            '(' => self.group(),
            '\\' => self.escape(),
            '*' | '+' | '?' => Err(Unsupported),
            c => Ok(Node::Char(c)),
        }
    }

    fn group(&mut self) -> Result<Node, Unsupported> {
        let look = if self.eat('?') {
            match self.next()? {
                ':' => None,
                '=' => Some(true),
                '!' => Some(false),
                '<' if !matches!(self.peek(), Some('=' | '!')) => {
                    // A named group: the name is skipped, the group kept.
                    while self.next()? != '>' {}
                    None
                }
                _ => return Err(Unsupported),
            }
        } else {
            None
        };
        let inner = self.alternation()?;
        if !self.eat(')') {
            return Err(Unsupported);
        }
        Ok(match look {
            Some(positive) => Node::Look(Box::new(inner), positive),
            None => inner,
        })
    }

    fn escape(&mut self) -> Result<Node, Unsupported> {
        let c = self.next()?;
        Ok(match c {
            'b' => Node::Boundary(true),
            'B' => Node::Boundary(false),
            _ => match self.escaped(c)? {
                Escaped::Char(c) => Node::Char(c),
                Escaped::Set(set, negated) => {
                    Node::Class { items: vec![ClassItem::Set(set, negated)], negated: false }
                }
            },
        })
    }

    /// The escape after `\` (already read as `c`), outside or inside a class.
    fn escaped(&mut self, c: char) -> Result<Escaped, Unsupported> {
        Ok(Escaped::Char(match c {
            'd' => return Ok(Escaped::Set(Set::Digit, false)),
            'D' => return Ok(Escaped::Set(Set::Digit, true)),
            'w' => return Ok(Escaped::Set(Set::Word, false)),
            'W' => return Ok(Escaped::Set(Set::Word, true)),
            's' => return Ok(Escaped::Set(Set::Space, false)),
            'S' => return Ok(Escaped::Set(Set::Space, true)),
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\u{c}',
            'v' => '\u{b}',
            '0' if !self.peek().is_some_and(|c| c.is_ascii_digit()) => '\0',
            'x' => self.hex(2)?,
            'u' if self.eat('{') => {
                let from = self.at;
                while self.peek().is_some_and(|c| c != '}') {
                    self.at += 1;
                }
                let digits: String = self.chars[from..self.at].iter().collect();
                self.at += 1;
                u32::from_str_radix(&digits, 16).ok().and_then(char::from_u32).ok_or(Unsupported)?
            }
            'u' => self.hex(4)?,
            'c' => {
                let letter = self.next()?;
                if !letter.is_ascii_alphabetic() {
                    return Err(Unsupported);
                }
                char::from(letter as u8 % 32)
            }
            // Back references and Unicode property escapes are not
            // understood; any other letter escape is an error in Unicode
            // mode, the mode JSON Schema asks for.
            c if c.is_ascii_alphanumeric() => return Err(Unsupported),
            c => c,
        }))
    }

    fn hex(&mut self, digits: usize) -> Result<char, Unsupported> {
        let text: String =
            self.chars.get(self.at..self.at + digits).ok_or(Unsupported)?.iter().collect();
        self.at += digits;
        u32::from_str_radix(&text, 16).ok().and_then(char::from_u32).ok_or(Unsupported)
    }

    fn class(&mut self) -> Result<Node, Unsupported> {
        let negated = self.eat('^');
        let mut items = Vec::new();
        loop {
            let c = self.next()?;
            if c == ']' {
                break;
            }
            let low = match self.class_char(c)? {
                Escaped::Set(set, negated) => {
                    items.push(ClassItem::Set(set, negated));
                    continue;
                }
                Escaped::Char(low) => low,
            };
            if self.peek() == Some('-') && self.chars.get(self.at + 1).is_some_and(|&c| c != ']') {
                self.at += 1;
                let c = self.next()?;
                match self.class_char(c)? {
                    Escaped::Char(high) if high >= low => items.push(ClassItem::Range(low, high)),
                    _ => return Err(Unsupported),
                }
            } else {
                items.push(ClassItem::Range(low, low));
            }
        }
        Ok(Node::Class { items, negated })
    }

    fn class_char(&mut self, c: char) -> Result<Escaped, Unsupported> {
        match c {
            '\\' => match self.next()? {
                'b' => Ok(Escaped::Char('\u{8}')),
                '-' => Ok(Escaped::Char('-')),
                c => self.escaped(c),
            },
            c => Ok(Escaped::Char(c)),
        }
    }
}

enum Escaped {
    Char(char),
    Set(Set, bool),
}

fn in_set(set: Set, c: char) -> bool {
    match set {
        Set::Digit => c.is_ascii_digit(),
        Set::Word => c.is_ascii_alphanumeric() || c == '_',
        // ECMA-262's WhiteSpace and LineTerminator.
        Set::Space => {
            matches!(c, '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{feff}')
                || matches!(c, '\u{1680}' | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}')
                || matches!(c, '\u{202f}' | '\u{205f}' | '\u{3000}')
        }
    }
}

fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

struct Matcher<'t> {
    chars: &'t [char],
    steps: u32,
    depth: u32,
    gave_up: bool,
}

/// What to match after a node: called with the position reached and the
/// matcher, true when the rest matched.
type Next<'k, 't> = dyn FnMut(&mut Matcher<'t>, usize) -> bool + 'k;

impl<'t> Matcher<'t> {
    /// Whether `node` matches at `at` and `next` matches after it.
    fn at(&mut self, node: &Node, at: usize, next: &mut Next<'_, 't>) -> bool {
        self.steps += 1;
        if self.gave_up || self.steps > MAX_STEPS || self.depth > MAX_DEPTH {
            self.gave_up = true;
            return false;
        }
        self.depth += 1;
        let matched = self.node(node, at, next);
        self.depth -= 1;
        matched
    }

    fn node(&mut self, node: &Node, at: usize, next: &mut Next<'_, 't>) -> bool {
        let chars = self.chars;
        match node {
            Node::Empty => next(self, at),
            Node::Start => at == 0 && next(self, at),
            Node::End => at == chars.len() && next(self, at),
            Node::Boundary(wanted) => {
                let word = |i: usize| chars.get(i).is_some_and(|&c| in_set(Set::Word, c));
                let boundary = (at > 0 && word(at - 1)) != word(at);
                boundary == *wanted && next(self, at)
            }
            Node::Char(_) | Node::Any | Node::Class { .. } => {
                at < chars.len() && single(node, chars[at]) && next(self, at + 1)
            }
            Node::Look(inner, positive) => {
                let found = self.at(inner, at, &mut |_, _| true);
                if self.gave_up {
                    return false;
                }
                found == *positive && next(self, at)
            }
            Node::Concat(nodes) => self.sequence(nodes, at, next),
            Node::Alternation(branches) => branches.iter().any(|branch| self.at(branch, at, next)),
            Node::Repeat { node: inner, min, max, greedy } => {
                if is_single(inner) {
                    return self.repeat_single(inner, at, *min, *max, *greedy, next);
                }
                self.repeat(inner, at, 0, *min, *max, *greedy, next)
            }
        }
    }

    fn sequence(&mut self, nodes: &[Node], at: usize, next: &mut Next<'_, 't>) -> bool {
        match nodes {
            [] => next(self, at),
            [only] => self.at(only, at, next),
            [first, rest @ ..] => self.at(first, at, &mut |matcher: &mut Matcher<'t>, after| {
                matcher.sequence(rest, after, next)
            }),
        }
    }

    /// A repeated single character: counted without recursion, then tried
    /// from the longest (greedy) or the shortest (lazy).
    fn repeat_single(
        &mut self,
        node: &Node,
        at: usize,
        min: u32,
        max: Option<u32>,
        greedy: bool,
        next: &mut Next<'_, 't>,
    ) -> bool {
        let limit = max.map_or(usize::MAX, |max| max as usize);
        let available =
            self.chars[at..].iter().take(limit).take_while(|&&c| single(node, c)).count();
        // Each character looked at is a step, so a scan repeated from every
        // start cannot go on unbounded.
        self.steps = self.steps.saturating_add(available as u32);
        if self.steps > MAX_STEPS {
            self.gave_up = true;
            return false;
        }
        let min = min as usize;
        if available < min {
            return false;
        }
        let mut try_count = |matcher: &mut Matcher<'t>, count: usize| {
            matcher.steps += 1;
            if matcher.steps > MAX_STEPS {
                matcher.gave_up = true;
            }
            !matcher.gave_up && next(matcher, at + count)
        };
        if greedy {
            (min..=available).rev().any(|count| try_count(self, count))
        } else {
            (min..=available).any(|count| try_count(self, count))
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &mut self,
        node: &Node,
        at: usize,
        done: u32,
        min: u32,
        max: Option<u32>,
        greedy: bool,
        next: &mut Next<'_, 't>,
    ) -> bool {
        let may_stop = done >= min;
        let may_go = max.is_none_or(|max| done < max);
        // An iteration that matched nothing ends the loop, as ECMA-262
        // says, so `(a*)*` cannot spin.
        macro_rules! again {
            () => {
                &mut |matcher: &mut Matcher<'t>, after: usize| {
                    (after != at || done < min)
                        && matcher.repeat(node, after, done + 1, min, max, greedy, next)
                }
            };
        }
        if greedy {
            (may_go && self.at(node, at, again!())) || (may_stop && next(self, at))
        } else {
            (may_stop && next(self, at)) || (may_go && self.at(node, at, again!()))
        }
    }
}

fn is_single(node: &Node) -> bool {
    matches!(node, Node::Char(_) | Node::Any | Node::Class { .. })
}

/// Whether a one-character node takes `c`.
fn single(node: &Node, c: char) -> bool {
    match node {
        Node::Char(wanted) => c == *wanted,
        Node::Any => !is_line_terminator(c),
        Node::Class { items, negated } => {
            let hit = items.iter().any(|item| match *item {
                ClassItem::Range(low, high) => (low..=high).contains(&c),
                ClassItem::Set(set, negated) => in_set(set, c) != negated,
            });
            hit != *negated
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        Pattern::parse(pattern).unwrap().is_match(text).unwrap()
    }

    #[test]
    fn literals_anchors_and_search() {
        assert!(matches("abc", "xxabcxx"));
        assert!(!matches("^abc", "xxabc"));
        assert!(matches("^abc$", "abc"));
        assert!(!matches("^abc$", "abcd"));
        assert!(matches("", "anything"));
        assert!(matches("a|b", "b"));
        assert!(matches("^(ab|cd)+$", "abcdab"));
        assert!(!matches("^(ab|cd)+$", "abc"));
        assert!(matches(r"\.", "a.b"));
        assert!(!matches(r"\.", "ab"));
        assert!(matches("a{2}", "xaax"));
        assert!(!matches("^a{2}$", "aaa"));
        assert!(matches("^a{2,}$", "aaaa"));
        assert!(matches("^a{1,3}b$", "aab"));
        assert!(matches("x{", "x{"));
    }

    #[test]
    fn classes_and_escapes() {
        assert!(matches("^[a-z0-9_-]+$", "my-name_2"));
        assert!(!matches("^[a-z0-9_-]+$", "My"));
        assert!(matches(r"^\d{3}-\d{4}$", "555-1234"));
        assert!(!matches(r"^\d+$", "12a"));
        assert!(matches(r"^[^\s]+$", "nospace"));
        assert!(!matches(r"^\S+$", "a b"));
        assert!(matches(r"^\w+@\w+\.com$", "me@host.com"));
        assert!(matches(r"^[\w.-]+$", "a.b-c"));
        assert!(matches(r"\u00e9", "café"));
        assert!(matches(r"^\x41$", "A"));
        assert!(matches(r"\bword\b", "a word here"));
        assert!(!matches(r"\bword\b", "swordfish"));
        assert!(matches("^.$", "é"));
        assert!(!matches("^.$", "\n"));
    }

    #[test]
    fn groups_lookahead_and_laziness() {
        assert!(matches("^(?:a|b)*c$", "ababc"));
        assert!(matches("^(?<year>[0-9]{4})-[0-9]{2}$", "2026-12"));
        assert!(matches("^(?=.*[0-9])[a-z0-9]+$", "abc1"));
        assert!(!matches("^(?=.*[0-9])[a-z0-9]+$", "abc"));
        assert!(matches("^(?!foo).*$", "bar"));
        assert!(!matches("^(?!foo).*$", "foobar"));
        assert!(matches("^a+?b$", "aaab"));
        assert!(matches("^(a*)*$", "aaaa"));
        assert!(!matches("^(a*)*b$", "aaaa"));
        // RFC 3339 date-times, as schemas often spell them.
        let date_time = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$";
        assert!(matches(date_time, "2026-12-02T13:19:38Z"));
        assert!(!matches(date_time, "2026-12-02 13:19:38"));
    }

    #[test]
    fn what_is_not_understood_is_said() {
        for pattern in [r"(a)\1", r"(?<=a)b", r"\p{L}", "(", "a**", "[b-a]", r"\k"] {
            assert_eq!(Pattern::parse(pattern).err(), Some(Unsupported), "{pattern}");
        }
    }

    #[test]
    fn a_hostile_pattern_gives_up_instead_of_hanging() {
        let pattern = Pattern::parse("^(a|aa)+$").unwrap();
        let text = format!("{}b", "a".repeat(60));
        assert_eq!(pattern.is_match(&text), None);
        let pattern = Pattern::parse("^(ab)*$").unwrap();
        assert_eq!(pattern.is_match(&"ab".repeat(50_000)), None);
        let pattern = Pattern::parse("^a*$").unwrap();
        assert_eq!(pattern.is_match(&"a".repeat(200_000)), Some(true));
        // A scan repeated from every start counts each character it reads.
        let pattern = Pattern::parse("(?=[^!]*)!").unwrap();
        let started = std::time::Instant::now();
        assert_eq!(pattern.is_match(&"a".repeat(100_000)), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
