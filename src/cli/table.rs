//! Aligned columns for the listings (`tools`, `resources`, `prompts`):
//! every cell escaped (what a server says is never interpreted by the
//! terminal), every column as wide as its widest cell, the last one free.

use super::shown::escaped;

/// The rows as aligned lines, each ending in a newline.
pub(super) fn render<R: AsRef<[String]>>(rows: &[R]) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|row| row.as_ref().iter().map(|cell| escaped(cell)).collect()).collect();
    let mut widths: Vec<usize> = Vec::new();
    for row in &rows {
        for (column, cell) in row.iter().enumerate() {
            if widths.len() <= column {
                widths.push(0);
            }
            widths[column] = widths[column].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            if column + 1 == row.len() {
                line.push_str(cell);
            } else {
                let padding = widths[column] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(padding + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_cells_are_escaped() {
        let rows = vec![
            vec!["a".to_owned(), "connected".to_owned(), "x".to_owned()],
            vec!["longer".to_owned(), "ok\u{1b}[2K".to_owned(), String::new()],
        ];
        assert_eq!(render(&rows), "a       connected  x\nlonger  ok\\e[2K\n");
    }
}
