//! Splitting a command template into words like a POSIX shell would, without running a shell.

/// An unterminated quote or a trailing backslash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SplitError {
    #[error("unterminated {0} quote starting at character {1}")]
    UnterminatedQuote(&'static str, usize),
    #[error("trailing backslash")]
    TrailingBackslash,
}

/// Words of `line`: whitespace separates words; `'…'` is literal; `"…"` allows `\"`, `\\`,
/// `\$` and `` \` `` escapes; a backslash outside quotes escapes the next character. No
/// expansion of any kind happens: `$HOME` stays `$HOME`.
pub(crate) fn split(line: &str) -> Result<Vec<String>, SplitError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((_, c)) => word.push(c),
                        None => return Err(SplitError::UnterminatedQuote("single", i)),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, c @ ('"' | '\\' | '$' | '`'))) => word.push(c),
                            Some((_, '\n')) => {}
                            Some((_, c)) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(SplitError::UnterminatedQuote("double", i)),
                        },
                        Some((_, c)) => word.push(c),
                        None => return Err(SplitError::UnterminatedQuote("double", i)),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some((_, '\n')) => {}
                    Some((_, c)) => word.push(c),
                    None => return Err(SplitError::TrailingBackslash),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(split("a  b\tc").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            split(r#"run --msg "hello world" 'it''s' x\ y"#).unwrap(),
            ["run", "--msg", "hello world", "its", "x y"]
        );
        assert_eq!(
            split(r#""a\"b" "\n" '$HOME' "" ''"#).unwrap(),
            ["a\"b", "\\n", "$HOME", "", ""]
        );
        assert_eq!(split("  ").unwrap(), Vec::<String>::new());
        assert_eq!(
            split("--file={prompt_file}").unwrap(),
            ["--file={prompt_file}"]
        );
    }

    #[test]
    fn reports_bad_quoting() {
        assert_eq!(
            split("a 'b"),
            Err(SplitError::UnterminatedQuote("single", 2))
        );
        assert_eq!(
            split("a \"b"),
            Err(SplitError::UnterminatedQuote("double", 2))
        );
        assert_eq!(split("a \\"), Err(SplitError::TrailingBackslash));
    }
}
