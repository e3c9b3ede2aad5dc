//! Ranking deferred tools for the model-facing `tool_search` tool.
//!
//! Deferred tools are not declared to the model up front; it finds them by
//! asking `tool_search` with a few words, and this module decides which tools
//! those words mean. The corpus is small (tens to a few thousand tools) and the
//! text is short, so a hand-written BM25 is enough and keeps the crate free of
//! a search dependency.
//!
//! The ranking is BM25F: each tool has three fields (its names, its
//! description, and its server's name and description), each field's term
//! frequency is normalised by that field's length and weighted, and the summed
//! weighted frequency is saturated once, under one idf computed over whole
//! tools. Because none of that depends on the query, [`SearchIndex::new`]
//! computes every term's contribution to every tool up front, and a search is
//! only a sum over the posting lists of the query's terms.
//!
//! Two kinds of query bypass or override the ranking, because a model that
//! already knows a name should not be second-guessed: a query equal to a tool's
//! name puts that tool first, and `select:a,b` returns exactly the named tools.

use std::collections::HashMap;

/// BM25's term frequency saturation.
const K1: f64 = 1.2;
/// BM25's strength of field length normalisation.
const B: f64 = 0.75;
/// Weights of the name, description and server fields, in that order.
const WEIGHTS: [f64; FIELDS] = [3.0, 1.0, 0.5];
/// The number of fields each tool is indexed under.
const FIELDS: usize = 3;
/// The field of the tool name and the qualified name.
const NAME: usize = 0;
/// The field of the tool's description.
const DESCRIPTION: usize = 1;
/// The field of the server's name and description.
const SERVER: usize = 2;

/// One tool as the search sees it.
#[derive(Debug, Clone)]
pub(crate) struct SearchDoc {
    /// The qualified tool name, e.g. `mcp__github__create_issue`.
    pub(crate) name: String,
    /// The server's own name for the tool, e.g. `create_issue`.
    pub(crate) tool_name: String,
    /// The tool's description.
    pub(crate) description: String,
    /// The server's name.
    pub(crate) server: String,
    /// The server's description, possibly empty.
    pub(crate) server_description: String,
}

impl SearchDoc {
    /// A registered tool, with its server's description.
    pub(crate) fn for_tool(
        entry: &crate::model::registry::RegisteredTool,
        server_description: String,
    ) -> SearchDoc {
        SearchDoc {
            name: entry.qualified_name.clone(),
            tool_name: entry.tool.name.clone(),
            description: entry.tool.description.clone().unwrap_or_default(),
            server: entry.server.clone(),
            server_description,
        }
    }
}

/// A BM25F index over a fixed set of tools, built once and searched many times.
#[derive(Debug)]
pub(crate) struct SearchIndex {
    /// Each known term's position in `postings`.
    terms: HashMap<String, usize>,
    /// For each term, the tools containing it (ascending) with the term's full
    /// contribution to that tool's score.
    postings: Vec<Vec<(usize, f64)>>,
    /// Each tool's qualified name and tool name, lowercased, for exact matches
    /// and `select:`.
    names: Vec<(String, String)>,
}

impl SearchIndex {
    /// Indexes `docs`; search results are indices into this vector.
    pub(crate) fn new(docs: Vec<SearchDoc>) -> SearchIndex {
        let mut builder = Builder::default();
        let mut lengths: Vec<[usize; FIELDS]> = Vec::with_capacity(docs.len());
        let mut names = Vec::with_capacity(docs.len());

        for (index, doc) in docs.iter().enumerate() {
            let mut length = [0; FIELDS];
            let mut add = |field: usize, term: &str| {
                builder.add(index, field, term);
                length[field] += 1;
            };
            let tool_terms = tokenize(&doc.tool_name);
            let server_terms = tokenize(&doc.server);
            for term in &tool_terms {
                add(NAME, term);
            }
            // The qualified name usually repeats the server and the tool name,
            // which must not count twice (nor give the server name the name
            // field's weight); it only adds words when the hub had to rename
            // the tool. The `mcp__` prefix every qualified name shares says
            // nothing about the tool.
            let qualified = doc.name.strip_prefix("mcp__").unwrap_or(&doc.name);
            for_each_term(qualified, |term| {
                if !tool_terms.iter().chain(&server_terms).any(|known| known == term) {
                    add(NAME, term);
                }
            });
            for_each_term(&doc.description, |term| add(DESCRIPTION, term));
            for term in &server_terms {
                add(SERVER, term);
            }
            for_each_term(&doc.server_description, |term| add(SERVER, term));
            lengths.push(length);
            names.push((doc.name.to_lowercase(), doc.tool_name.to_lowercase()));
        }
        let Builder { terms, raw } = builder;

        let total = docs.len() as f64;
        let averages: [f64; FIELDS] = std::array::from_fn(|field| {
            lengths.iter().map(|length| length[field] as f64).sum::<f64>() / total.max(1.0)
        });
        // A tool's length normalisation per field; a field empty in every tool
        // never has a term to normalise, so 1.0 there only avoids dividing by 0.
        let norms: Vec<[f64; FIELDS]> = lengths
            .iter()
            .map(|length| {
                std::array::from_fn(|field| {
                    if averages[field] > 0.0 {
                        1.0 - B + B * length[field] as f64 / averages[field]
                    } else {
                        1.0
                    }
                })
            })
            .collect();

        let postings = raw
            .into_iter()
            .map(|list| {
                let holders = list.len() as f64;
                let idf = (1.0 + (total - holders + 0.5) / (holders + 0.5)).ln();
                list.into_iter()
                    .map(|(doc, count)| {
                        let weighted: f64 = (0..FIELDS)
                            .map(|field| {
                                WEIGHTS[field] * f64::from(count[field]) / norms[doc][field]
                            })
                            .sum();
                        (doc, idf * weighted * (K1 + 1.0) / (K1 + weighted))
                    })
                    .collect()
            })
            .collect();

        SearchIndex { terms, postings, names }
    }

    /// Indices into the docs, best first, with scores; at most `limit`, only
    /// score > 0.
    ///
    /// A query equal to a tool's tool name or qualified name (ignoring case)
    /// puts that tool first. `select:a,b` returns exactly the tools named, by
    /// qualified name or tool name, in that order with score 1.0, skipping
    /// unknown names. Equal scores keep the docs' original order.
    pub(crate) fn search(&self, query: &str, limit: usize) -> Vec<(usize, f64)> {
        let query = query.trim();
        if query.is_empty() || limit == 0 {
            return Vec::new();
        }
        if let Some(prefix) = query.get(..7).filter(|prefix| prefix.eq_ignore_ascii_case("select:"))
        {
            return self.select(&query[prefix.len()..], limit);
        }

        let mut scores = vec![0.0; self.names.len()];
        let mut seen = Vec::new();
        for_each_term(query, |term| {
            // Unknown words are ignored, and a repeated word counts once: saying
            // "file" twice is not evidence that the tool is more about files.
            let Some(&term) = self.terms.get(term) else { return };
            if seen.contains(&term) {
                return;
            }
            seen.push(term);
            for &(doc, contribution) in &self.postings[term] {
                scores[doc] += contribution;
            }
        });

        // Lifting exact matches above the best score keeps the scores
        // consistent with the order, and keeps several tools sharing that name
        // in their own relevance order.
        let query = query.to_lowercase();
        let best = scores.iter().copied().fold(0.0, f64::max);
        for (doc, (name, tool_name)) in self.names.iter().enumerate() {
            if *name == query || *tool_name == query {
                scores[doc] += best + 1.0;
            }
        }

        let mut ranked: Vec<(usize, f64)> =
            scores.into_iter().enumerate().filter(|&(_, score)| score > 0.0).collect();
        // A common word can match most tools; only the best `limit` need
        // sorting. The order is total (index breaks ties), so the unstable
        // selection is still deterministic.
        let better = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit, better);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(better);
        ranked
    }

    /// The tools named in a comma-separated list, in its order.
    ///
    /// A qualified name is unique, so it picks one tool; a bare tool name can
    /// be shared by several servers, and then all of them are returned rather
    /// than an arbitrary one.
    fn select(&self, list: &str, limit: usize) -> Vec<(usize, f64)> {
        let mut chosen: Vec<usize> = Vec::new();
        for wanted in list.split(',').map(str::trim).filter(|wanted| !wanted.is_empty()) {
            let wanted = wanted.to_lowercase();
            let matches: Vec<usize> = match self.names.iter().position(|(name, _)| *name == wanted)
            {
                Some(doc) => vec![doc],
                None => (0..self.names.len()).filter(|&doc| self.names[doc].1 == wanted).collect(),
            };
            for doc in matches {
                if !chosen.contains(&doc) {
                    chosen.push(doc);
                }
            }
        }
        chosen.truncate(limit);
        chosen.into_iter().map(|doc| (doc, 1.0)).collect()
    }
}

/// Term frequencies per tool and field while an index is being built.
#[derive(Default)]
struct Builder {
    /// Each known term's position in `raw`.
    terms: HashMap<String, usize>,
    /// For each term, the tools containing it (ascending) with its count in
    /// each field; scores wait until the fields' average lengths are known.
    raw: Vec<Vec<(usize, [u32; FIELDS])>>,
}

impl Builder {
    /// Counts one occurrence of `term` in a field of tool `doc`; tools must be
    /// added in ascending order.
    fn add(&mut self, doc: usize, field: usize, term: &str) {
        // Looking up by `&str` first allocates a key only for a new term.
        let id = match self.terms.get(term) {
            Some(&id) => id,
            None => {
                self.terms.insert(term.to_owned(), self.raw.len());
                self.raw.push(Vec::new());
                self.raw.len() - 1
            }
        };
        // Tools arrive in order, so if this tool already has the term, it is
        // the last posting in the term's list.
        let postings = &mut self.raw[id];
        match postings.last_mut() {
            Some((holder, count)) if *holder == doc => count[field] += 1,
            _ => {
                let mut count = [0; FIELDS];
                count[field] = 1;
                postings.push((doc, count));
            }
        }
    }
}

/// Splits text into normalised search terms and calls `each` with every one,
/// in order.
///
/// Words break at anything not alphanumeric, at a lowercase-to-uppercase step
/// (`getPull`), at the end of an acronym (`HTTPServer`, though not before a
/// plural `s` as in `URLs`) and between letters and digits (`request2`). Terms
/// are lowercased; single letters and stop words are dropped, single digits
/// kept (a version number can tell tools apart); then [`stem`] applies.
///
/// One buffer is reused for every term, so indexing allocates only for terms
/// it has not seen before.
fn for_each_term(text: &str, mut each: impl FnMut(&str)) {
    let mut term = String::new();
    let mut start = 0;
    let mut previous: Option<char> = None;
    for (at, c) in text.char_indices() {
        let end = at + c.len_utf8();
        if !c.is_alphanumeric() {
            if normalise(&text[start..at], &mut term) {
                each(&term);
            }
            (start, previous) = (end, None);
            continue;
        }
        if previous.is_some_and(|previous| is_boundary(previous, c, &text[end..])) {
            if normalise(&text[start..at], &mut term) {
                each(&term);
            }
            start = at;
        }
        previous = Some(c);
    }
    if normalise(&text[start..], &mut term) {
        each(&term);
    }
}

/// The terms of `text`, in order.
fn tokenize(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    for_each_term(text, |term| terms.push(term.to_owned()));
    terms
}

/// Whether a word breaks between the alphanumerics `previous` and `c`, given
/// the text after `c`.
fn is_boundary(previous: char, c: char, rest: &str) -> bool {
    // Most of any text is lowercase ASCII letters in a row; answer them first.
    if previous.is_ascii_lowercase() && c.is_ascii_lowercase() {
        return false;
    }
    if previous.is_numeric() != c.is_numeric() {
        return true;
    }
    if previous.is_lowercase() && c.is_uppercase() {
        return true;
    }
    if !(previous.is_uppercase() && c.is_uppercase()) {
        return false;
    }
    // In `HTTPServer` the `S` starts a new word, but in `URLs` the `s` is a
    // plural: a lone lowercase `s` ending the word does not start one.
    let mut rest = rest.chars();
    match (rest.next(), rest.next()) {
        (Some('s'), after) => after.is_some_and(char::is_lowercase),
        (next, _) => next.is_some_and(char::is_lowercase),
    }
}

/// Writes the term for one word into `term`, or returns false if the word
/// is not one.
fn normalise(word: &str, term: &mut String) -> bool {
    let mut chars = word.chars();
    match (chars.next(), chars.next()) {
        (None, _) => return false,
        (Some(c), None) if !c.is_numeric() => return false,
        _ => {}
    }
    term.clear();
    if word.is_ascii() {
        term.push_str(word);
        term.make_ascii_lowercase();
    } else {
        term.extend(word.chars().flat_map(char::to_lowercase));
    }
    if is_stop_word(term) {
        return false;
    }
    stem(term);
    true
}

/// Whether a word is so common in tool descriptions and in the model's
/// queries that it would only add noise; with a corpus this small, idf alone
/// does not push such words down far enough.
fn is_stop_word(word: &str) -> bool {
    matches!(
        word,
        "an" | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "by"
            | "for"
            | "from"
            | "in"
            | "into"
            | "is"
            | "it"
            | "its"
            | "of"
            | "on"
            | "or"
            | "that"
            | "the"
            | "this"
            | "to"
            | "with"
            | "you"
            | "your"
    )
}

/// Very light stemming, so that plurals and `-ing` forms meet their stems.
///
/// `-ies` becomes `-y` in words longer than four letters (`repositories`,
/// `directories`; `cookies` suffers, but tool vocabularies favour the former);
/// otherwise a trailing `s` goes from words longer than three letters that do
/// not end in `ss` (`issues`, but not `class` or `bus`). Then `-ing` goes when
/// at least three letters remain (`reading`, but not `thing`). Anything more
/// (Porter's rules) would conflate words that tools keep apart.
fn stem(token: &mut String) {
    // Suffixes are checked before lengths, because counting characters costs
    // more and most words have none of these endings.
    let length = |token: &str| token.chars().count();
    if token.ends_with("ies") && length(token) > 4 {
        token.truncate(token.len() - 3);
        token.push('y');
    } else if token.ends_with('s') && !token.ends_with("ss") && length(token) > 3 {
        token.pop();
    }
    if token.ends_with("ing") && length(token) >= 6 {
        token.truncate(token.len() - 3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn doc(server: &str, tool_name: &str, description: &str) -> SearchDoc {
        SearchDoc {
            name: format!("mcp__{server}__{tool_name}"),
            tool_name: tool_name.to_owned(),
            description: description.to_owned(),
            server: server.to_owned(),
            server_description: String::new(),
        }
    }

    fn order(index: &SearchIndex, query: &str) -> Vec<usize> {
        index.search(query, 100).into_iter().map(|(doc, _)| doc).collect()
    }

    #[test]
    fn tokenizer_splits_cases_digits_and_punctuation() {
        assert_eq!(tokenize("getPullRequest2"), ["get", "pull", "request", "2"]);
        assert_eq!(tokenize("create_issue"), ["create", "issue"]);
        assert_eq!(tokenize("list-files"), ["list", "file"]);
        assert_eq!(tokenize("HTTPServer parseURLs"), ["http", "server", "parse", "url"]);
        assert_eq!(tokenize("listAPIsNow getIDs ABC"), ["list", "api", "now", "get", "ids", "abc"]);
        assert_eq!(tokenize("mcp__github__create_issue"), ["mcp", "github", "create", "issue"]);
        assert_eq!(tokenize("oauth2 v2 API x 7"), ["oauth", "2", "2", "api", "7"]);
        assert_eq!(tokenize("2024-01-31"), ["2024", "01", "31"]);
        assert_eq!(tokenize("Größe ÜBER"), ["größe", "über"]);
        assert_eq!(tokenize("  ,;  "), Vec::<String>::new());
    }

    #[test]
    fn tokenizer_drops_stop_words_and_single_letters() {
        assert_eq!(tokenize("Send a message to the channel"), ["send", "message", "channel"]);
        assert_eq!(tokenize("I x y z"), Vec::<String>::new());
    }

    #[test]
    fn stemming_is_light() {
        let stems: Vec<String> =
            ["issues", "files", "class", "bus", "reading", "thing", "repositories", "ties"]
                .into_iter()
                .map(|word| {
                    let mut word = word.to_owned();
                    stem(&mut word);
                    word
                })
                .collect();
        assert_eq!(stems, ["issue", "file", "class", "bus", "read", "thing", "repository", "tie"]);
        // Query and docs share the normalisation, so forms meet.
        assert_eq!(tokenize("Reading Files"), tokenize("read file"));
    }

    #[test]
    fn a_match_in_the_name_beats_the_same_word_in_a_description() {
        let index = SearchIndex::new(vec![
            doc("store", "keep", "Put the archive somewhere safe"),
            doc("store", "archive", "Put the thing somewhere safe"),
        ]);
        let results = index.search("archive", 10);
        assert_eq!(results.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 0]);
        assert!(results[0].1 > results[1].1 && results[1].1 > 0.0);
    }

    #[test]
    fn the_server_description_counts_a_little() {
        let mut hosted = doc("alpha", "launch", "Start the job");
        hosted.server_description = "Deploy services".to_owned();
        let index = SearchIndex::new(vec![
            doc("alpha", "other", "Unrelated words here"),
            hosted,
            doc("alpha", "start", "Deploy the job"),
        ]);
        let results = index.search("deploy", 10);
        assert_eq!(results.iter().map(|r| r.0).collect::<Vec<_>>(), [2, 1]);
        assert!(results[1].1 > 0.0 && results[1].1 < results[0].1);
        // The server's own name is in the same field, where the tool with a
        // server description has more words to dilute it.
        assert_eq!(order(&index, "alpha"), [0, 2, 1]);
    }

    #[test]
    fn an_exact_name_ranks_first() {
        let index = SearchIndex::new(vec![
            doc("files", "read_file_lines", "Read, read, read and read again: reads lines"),
            doc("files", "read", "Return the bytes"),
            doc("other", "unrelated", "Nothing"),
        ]);
        // Without the boost the description-heavy tool wins ...
        assert_eq!(order(&index, "reads"), [0, 1]);
        // ... but naming a tool exactly puts it first, by either name.
        assert_eq!(order(&index, "read"), [1, 0]);
        assert_eq!(order(&index, " READ "), [1, 0]);
        assert_eq!(order(&index, "MCP__files__Read"), [1, 0]);
        let results = index.search("read", 10);
        assert!(results[0].1 > results[1].1);
    }

    #[test]
    fn an_exact_name_without_terms_still_matches() {
        let index = SearchIndex::new(vec![doc("s", "x", "Does things"), doc("s", "y", "Other")]);
        assert_eq!(index.search("x", 10), [(0, 1.0)]);
    }

    #[test]
    fn select_returns_exactly_the_named_tools() {
        let index = SearchIndex::new(vec![
            doc("one", "alpha", "First"),
            doc("one", "beta", "Second"),
            doc("two", "alpha", "Third"),
            doc("two", "gamma", "Fourth"),
        ]);
        assert_eq!(index.search("select:gamma,beta", 10), [(3, 1.0), (1, 1.0)]);
        assert_eq!(
            index.search("SELECT: mcp__two__alpha , nope,beta,gamma", 10),
            [(2, 1.0), (1, 1.0), (3, 1.0)]
        );
        // A bare name shared by two servers selects both, each once.
        assert_eq!(index.search("select:alpha,mcp__one__alpha", 10), [(0, 1.0), (2, 1.0)]);
        assert_eq!(index.search("select:gamma,beta", 1), [(3, 1.0)]);
        assert!(index.search("select:", 10).is_empty());
        assert!(index.search("select:nope", 10).is_empty());
    }

    #[test]
    fn empty_and_unknown_queries_find_nothing() {
        let index = SearchIndex::new(vec![doc("s", "read_file", "Read a file")]);
        for query in ["", "   ", "the of to", "zebra", "!!"] {
            assert!(index.search(query, 10).is_empty(), "{query:?}");
        }
        assert!(index.search("read", 0).is_empty());
        assert!(SearchIndex::new(Vec::new()).search("read", 10).is_empty());
    }

    #[test]
    fn ties_keep_the_original_order_and_limit_applies() {
        let index = SearchIndex::new(vec![
            doc("s", "gamma", "Fetch the weather"),
            doc("s", "alpha", "Unrelated"),
            doc("s", "delta", "Fetch the weather"),
            doc("s", "beta", "Fetch the weather"),
        ]);
        let results = index.search("weather", 10);
        assert_eq!(results.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 2, 3]);
        assert!(results.iter().all(|r| r.1 == results[0].1));
        assert_eq!(order(&index, "weather weather"), [0, 2, 3]);
        assert_eq!(index.search("weather", 2), results[..2]);
    }

    fn realistic() -> Vec<SearchDoc> {
        let github = "GitHub API: repositories, issues and pull requests";
        let files = "Local file system access within the allowed directories";
        let slack = "Slack workspace messaging";
        let tools = [
            ("github", github, "create_issue", "Create a new issue in a GitHub repository"),
            ("github", github, "list_issues", "List issues in a GitHub repository with filters"),
            ("github", github, "get_pull_request", "Get details of a specific pull request"),
            ("github", github, "create_pull_request", "Create a new pull request in a repository"),
            ("github", github, "search_repositories", "Search for GitHub repositories"),
            (
                "github",
                github,
                "get_file_contents",
                "Get the contents of a file or directory from a GitHub repository",
            ),
            (
                "filesystem",
                files,
                "read_file",
                "Read the complete contents of a file from the file system",
            ),
            (
                "filesystem",
                files,
                "write_file",
                "Create a new file or overwrite an existing file with new content",
            ),
            ("filesystem", files, "list_directory", "List files and directories in a given path"),
            ("filesystem", files, "move_file", "Move or rename files and directories"),
            (
                "filesystem",
                files,
                "search_files",
                "Recursively search for files matching a pattern",
            ),
            ("slack", slack, "slack_post_message", "Post a new message to a Slack channel"),
            ("slack", slack, "slack_list_channels", "List public channels in the workspace"),
            ("slack", slack, "slack_reply_to_thread", "Reply to a specific message thread"),
            ("slack", slack, "slack_get_users", "Get a list of all users in the workspace"),
        ];
        tools
            .into_iter()
            .map(|(server, server_description, tool_name, description)| SearchDoc {
                server_description: server_description.to_owned(),
                ..doc(server, tool_name, description)
            })
            .collect()
    }

    #[test]
    fn realistic_queries_find_the_right_tool_first() {
        let docs = realistic();
        let index = SearchIndex::new(docs.clone());
        for (query, expected) in [
            ("create issue", "create_issue"),
            ("read file", "read_file"),
            ("send message to channel", "slack_post_message"),
            ("Reading files from disk", "read_file"),
            ("open a pull request", "get_pull_request"),
            ("create pull request", "create_pull_request"),
            ("rename a file", "move_file"),
            ("list the issues of a repo", "list_issues"),
            ("find github repositories", "search_repositories"),
            ("who is in the slack workspace users", "slack_get_users"),
            ("reply in thread", "slack_reply_to_thread"),
            ("listDirectory", "list_directory"),
            ("write_file", "write_file"),
        ] {
            let results = index.search(query, 5);
            assert!(!results.is_empty(), "{query:?} found nothing");
            assert_eq!(docs[results[0].0].tool_name, expected, "{query:?}: {results:?}");
        }
    }

    #[test]
    fn a_thousand_tools_index_and_search_quickly() {
        let words = [
            "create",
            "read",
            "update",
            "delete",
            "list",
            "search",
            "file",
            "issue",
            "message",
            "channel",
            "user",
            "repository",
            "branch",
            "commit",
            "comment",
            "label",
            "project",
            "ticket",
            "record",
            "table",
            "query",
            "database",
            "email",
            "calendar",
            "event",
        ];
        // A fixed linear congruential sequence, so the corpus is varied but the
        // same on every run.
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut pick = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            words[(state >> 33) as usize % words.len()]
        };
        let docs: Vec<SearchDoc> = (0..1000)
            .map(|i| {
                let tool_name = format!("{}_{}_{i}", pick(), pick());
                let description: Vec<&str> = (0..12).map(|_| pick()).collect();
                SearchDoc {
                    server_description: format!("Server for {} and {}", pick(), pick()),
                    ..doc(&format!("server{}", i % 20), &tool_name, &description.join(" "))
                }
            })
            .collect();
        let queries = ["create issue", "read file", "send message to channel", "select:x,y", "zzz"];

        let started = Instant::now();
        let index = SearchIndex::new(docs);
        for round in 0..100 {
            let results = index.search(queries[round % queries.len()], 10);
            assert!(results.len() <= 10);
        }
        // This takes about 3 ms optimised and 25 ms in a test build. The bound
        // is ten times the latter, so that a machine busy compiling cannot
        // make it flake, while anything quadratic in the number of tools
        // would still fail it by far.
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_millis(250), "{elapsed:?}");
    }
}
