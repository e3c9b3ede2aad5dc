//! Did-you-mean: the known word nearest to a typo.
//!
//! Shared by the configuration loader (field names) and the command line
//! (commands, servers, tools), which reaches it through the hidden
//! `tether::for_cli`: one copy in the binary, and no spelling helper in the
//! documented API.

/// The longest word a typo is looked for in: the distance costs the product
/// of two lengths, and a name a script or a server chose may be huge.
const MAX_WORD: usize = 256;

/// The known word nearest to `word`, if it is near enough to be a typo.
pub fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    if word.len() > MAX_WORD {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let allowed = |candidate: &str| (candidate.len() / 3).max(1);
    known
        .iter()
        // A length apart by more than the edits allowed is no typo.
        .filter(|candidate| {
            candidate.len() <= MAX_WORD
                && candidate.len().abs_diff(word.len()) <= allowed(candidate)
        })
        .map(|candidate| (edit_distance(&lower, &candidate.to_ascii_lowercase()), *candidate))
        .filter(|(distance, candidate)| *distance <= allowed(candidate))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Edits between two words, a swap of neighbours counting as one (the
/// commonest typo: "comand", "dmeo").
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // rows[i][j]: edits between a[..i] and b[..j].
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best =
                (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}
