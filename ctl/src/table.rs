//! Columns as kubectl prints them: a header in capitals, cells padded to
//! the widest of their column, three spaces apart, no trailing spaces.

/// Renders `rows` under `header`, one line each, ending in a newline.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("   ");
            }
            line.push_str(cell);
            let width = widths.get(i).copied().unwrap_or(0);
            line.extend(std::iter::repeat_n(
                ' ',
                width.saturating_sub(cell.chars().count()),
            ));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A list as one cell: comma-separated, or `-` when empty.
pub fn cell<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_and_lines_trimmed() {
        let rows = vec![
            vec!["pool-a".to_owned(), "1/4".to_owned(), "-".to_owned()],
            vec!["b".to_owned(), "12/256".to_owned(), String::new()],
        ];
        assert_eq!(
            render(&["NAME", "IPV4", "NOTE"], &rows),
            "NAME     IPV4     NOTE\npool-a   1/4      -\nb        12/256\n"
        );
        assert_eq!(cell::<&str>(&[]), "-");
        assert_eq!(cell(&["a", "b"]), "a,b");
    }
}
