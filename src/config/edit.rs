//! Changing a config file in place: one key at a time, keeping every comment and the layout
//! (toml_edit), and replacing the file atomically so a crash never leaves half a config.

use super::error::ConfigError;
use std::io::Write;
use std::path::Path;
use toml_edit::{DocumentMut, Item, Table};

/// Returns `text` with `path` set to `value`. Comments and formatting elsewhere are untouched;
/// a value that is replaced keeps its trailing comment.
pub(crate) fn set_value(
    text: &str,
    path: &[String],
    value: &toml::Value,
) -> Result<String, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        format!(
            "the file is not valid TOML, fix it first: {}",
            e.message().lines().next().unwrap_or("")
        )
    })?;
    let new: toml_edit::Value = value
        .to_string()
        .parse()
        .map_err(|e: toml_edit::TomlError| format!("cannot write value: {e}"))?;
    let Some((last, parents)) = path.split_last() else {
        return Err("empty key".into());
    };
    // Comments at the very end of a file belong to the document, which toml_edit always prints
    // last; a new table would land above them. Hand them to the new table so they stay put.
    let creates_table = !table_exists(&doc, parents);
    let new_table_prefix = if creates_table {
        let trailing = doc.trailing().as_str().unwrap_or("").to_string();
        doc.set_trailing("");
        let body = trailing.trim_end_matches('\n');
        let non_empty = !doc.as_table().is_empty() || !body.trim().is_empty();
        Some(match (body.trim().is_empty(), non_empty) {
            (true, true) => "\n".to_string(),
            (true, false) => String::new(),
            (false, _) => format!("{body}\n\n"),
        })
    } else {
        None
    };
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    for (depth, part) in parents.iter().enumerate() {
        let is_last = depth + 1 == parents.len();
        let item = table.entry(part).or_insert_with(|| {
            let mut t = Table::new();
            // `[agents.claude]` alone reads better than an empty `[agents]` header above it.
            t.set_implicit(!is_last);
            if let (true, Some(prefix)) = (is_last, &new_table_prefix) {
                t.decor_mut().set_prefix(prefix.clone());
            }
            Item::Table(t)
        });
        table = item
            .as_table_like_mut()
            .ok_or_else(|| format!("`{}` is not a table in this file", path[..=depth].join(".")))?;
    }
    match table.get_mut(last) {
        // Replace only the value: the key keeps the comment above it, the value its trailing one.
        Some(Item::Value(old)) => {
            let decor = old.decor().clone();
            *old = new;
            *old.decor_mut() = decor;
        }
        _ => {
            table.insert(last, Item::Value(new));
        }
    }
    Ok(doc.to_string())
}

fn table_exists(doc: &DocumentMut, path: &[String]) -> bool {
    let mut item = doc.as_item();
    for part in path {
        match item.get(part.as_str()) {
            Some(next) => item = next,
            None => return false,
        }
    }
    true
}

/// Writes `contents` to `path` through a temporary file in the same directory, calls `check` on
/// the temporary file, and only then renames it over `path`. A failed check leaves `path` as it was.
pub(crate) fn write_atomic(
    path: &Path,
    contents: &str,
    check: impl FnOnce(&Path) -> Result<(), ConfigError>,
) -> Result<(), ConfigError> {
    // A symlinked config (dotfile managers do this) is replaced at its target, so the link survives.
    let resolved = std::fs::canonicalize(path).ok();
    let path = resolved.as_deref().unwrap_or(path);
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".whilly-config-")
        .suffix(".toml")
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(contents.as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    let perms = match std::fs::metadata(path) {
        Ok(meta) => Some(meta.permissions()),
        Err(_) => default_permissions(),
    };
    if let Some(perms) = perms {
        std::fs::set_permissions(tmp.path(), perms).map_err(io)?;
    }
    check(tmp.path())?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(unix)]
fn default_permissions() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    // Temp files are created 0600; a new config file should look like any file the user made.
    Some(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn default_permissions() -> Option<std::fs::Permissions> {
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn p(key: &str) -> Vec<String> {
        crate::config::schema::split_key(key).unwrap()
    }

    #[test]
    fn keeps_comments_and_trailing_comment_of_the_replaced_value() {
        let text = "# my settings\n[queue]\n# how long a claim lasts\nlease_secs = 30 # seconds\nnotify = true\n";
        let out = set_value(text, &p("queue.lease_secs"), &toml::Value::Integer(60)).unwrap();
        assert_eq!(
            out,
            "# my settings\n[queue]\n# how long a claim lasts\nlease_secs = 60 # seconds\nnotify = true\n"
        );
    }

    #[test]
    fn creates_missing_tables() {
        let out = set_value(
            "# top\n",
            &p("agents.claude.model"),
            &toml::Value::String("opus".into()),
        )
        .unwrap();
        assert_eq!(out, "# top\n\n[agents.claude]\nmodel = \"opus\"\n");
        let text = "[queue]\nlease_secs = 30\n# notify = false\n";
        let out = set_value(text, &p("run.parallel"), &toml::Value::Integer(2)).unwrap();
        assert_eq!(
            out,
            "[queue]\nlease_secs = 30\n# notify = false\n\n[run]\nparallel = 2\n"
        );
        let out = set_value(
            "",
            &p(r#"prices."gpt-4.1".input_per_mtok"#),
            &toml::Value::Float(2.0),
        )
        .unwrap();
        assert!(
            out.contains("[prices.\"gpt-4.1\"]\ninput_per_mtok = 2.0"),
            "{out}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn atomic_write_keeps_symlinks_and_permissions_and_honours_the_check() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles/config.toml");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, "a = 1\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();

        write_atomic(&link, "a = 2\n", |_| Ok(())).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "a = 2\n");
        assert_eq!(
            std::fs::metadata(&real).unwrap().permissions().mode() & 0o777,
            0o600
        );

        let refused = write_atomic(&link, "a = 3\n", |_| Err(ConfigError::Usage("no".into())));
        assert!(refused.is_err());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "a = 2\n");
        assert_eq!(
            std::fs::read_dir(real.parent().unwrap()).unwrap().count(),
            1,
            "temp file cleaned up"
        );
    }

    #[test]
    fn refuses_to_descend_into_a_value() {
        let err = set_value("run = 3\n", &p("run.parallel"), &toml::Value::Integer(1)).unwrap_err();
        assert!(err.contains("not a table"), "{err}");
    }
}
