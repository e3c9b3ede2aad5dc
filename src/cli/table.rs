//! Aligned columns for the listings (`tools`, `resources`, `prompts`):
//! every cell escaped (what a server says is never interpreted by the
//! terminal), every column as wide as its widest cell, the last one free.

use super::escape::escaped;

/// The rows as aligned lines, each ending in a newline.
pub(super) fn render<R: AsRef<[String]>>(rows: &[R]) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|row| row.as_ref().iter().map(|cell| escaped(cell)).collect()).collect();
    let widths = widths(&rows);
    let mut out = String::new();
    for row in &rows {
        out.push_str(&line(row, &widths));
        out.push('\n');
    }
    out
}

/// Each column's width: its widest cell, in characters.
pub(super) fn widths<R: AsRef<[String]>>(rows: &[R]) -> Vec<usize> {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (column, cell) in row.as_ref().iter().enumerate() {
            if widths.len() <= column {
                widths.push(0);
            }
            widths[column] = widths[column].max(cell.chars().count());
        }
    }
    widths
}

/// One line of cells (already escaped), each but the last padded to its
/// column's width and two spaces; no trailing blanks, no line break.
pub(super) fn line(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (column, cell) in cells.iter().enumerate() {
        line.push_str(cell);
        if column + 1 < cells.len() {
            let width = widths.get(column).copied().unwrap_or(0);
            line.push_str(&" ".repeat(width.saturating_sub(cell.chars().count()) + 2));
        }
    }
    line.trim_end().to_owned()
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
