//! What a file edit changes, as the phone shows it before the person approves (docs/hooks.md, "What the
//! phone shows"): a `Diff:` section of the question's details — a header with the file and the lines added and
//! removed, then the lines, `-` removed, `+` added, ` ` unchanged context — sealed in the question like the
//! rest, so the answer's signature covers what the person saw.

use serde_json::Value;

/// Most diff lines shown; the header still counts them all.
const MAX_LINES: usize = 400;
/// Unchanged lines kept around a change.
const CONTEXT: usize = 2;

/// The diff of an edit tool's call: Claude Code's `Edit` (`old_string` → `new_string`), `MultiEdit` (its
/// `edits`), `Write` (the whole `content` added), Codex's `apply_patch` (the patch's own lines). `None` for
/// other tools.
pub fn of(tool: &str, input: &Value) -> Option<String> {
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    let file = text("file_path").unwrap_or("");
    let lines: Vec<String> = match tool {
        "Edit" => replaced(text("old_string")?, text("new_string")?),
        "MultiEdit" => input
            .get("edits")?
            .as_array()?
            .iter()
            .enumerate()
            .flat_map(|(n, e)| {
                let old = e.get("old_string").and_then(Value::as_str).unwrap_or("");
                let new = e.get("new_string").and_then(Value::as_str).unwrap_or("");
                std::iter::once(format!("@@ edit {}", n + 1)).chain(replaced(old, new))
            })
            .collect(),
        "Write" => text("content")?.lines().map(|l| format!("+{l}")).collect(),
        "apply_patch" => text("input")?
            .lines()
            .filter(|l| !l.starts_with("*** Begin Patch") && !l.starts_with("*** End Patch"))
            .map(str::to_string)
            .collect(),
        _ => return None,
    };
    let added = lines.iter().filter(|l| l.starts_with('+')).count();
    let removed = lines.iter().filter(|l| l.starts_with('-')).count();
    let mut out = match file {
        "" => format!("Diff: (+{added} -{removed})"),
        file => format!("Diff: {file} (+{added} -{removed})"),
    };
    for line in lines.iter().take(MAX_LINES) {
        out.push('\n');
        out.push_str(line);
    }
    if lines.len() > MAX_LINES {
        out.push_str(&format!("\n… ({} more lines not shown)", lines.len() - MAX_LINES));
    }
    Some(out)
}

/// `old` replaced by `new`, line by line: the lines both share at the start and at the end are context (at
/// most [`CONTEXT`] of each kept), the rest removed then added.
fn replaced(old: &str, new: &str) -> Vec<String> {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out: Vec<String> = Vec::new();
    out.extend(
        old[head.saturating_sub(CONTEXT)..head]
            .iter()
            .map(|l| format!(" {l}")),
    );
    out.extend(old[head..old.len() - tail].iter().map(|l| format!("-{l}")));
    out.extend(new[head..new.len() - tail].iter().map(|l| format!("+{l}")));
    let after = &old[old.len() - tail..];
    out.extend(after[..after.len().min(CONTEXT)].iter().map(|l| format!(" {l}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_edit_shows_the_lines_it_replaces_with_their_context() {
        let input = json!({
            "file_path": "/repo/src/lib.rs",
            "old_string": "fn a() {}\nfn b() {}\nlet x = 1;\nfn c() {}\nfn d() {}\nfn e() {}",
            "new_string": "fn a() {}\nfn b() {}\nlet x = 2;\nlet y = 3;\nfn c() {}\nfn d() {}\nfn e() {}",
        });
        let diff = of("Edit", &input).expect("a diff");
        assert_eq!(
            diff,
            "Diff: /repo/src/lib.rs (+2 -1)\n fn a() {}\n fn b() {}\n-let x = 1;\n+let x = 2;\n+let y = 3;\n fn c() {}\n fn d() {}"
        );
    }

    #[test]
    fn writes_patches_and_multi_edits_have_diffs_other_tools_none() {
        let write = of("Write", &json!({"file_path": "/r/a.txt", "content": "one\ntwo"})).expect("diff");
        assert_eq!(write, "Diff: /r/a.txt (+2 -0)\n+one\n+two");
        let patch = "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** End Patch";
        let patched = of("apply_patch", &json!({ "input": patch })).expect("diff");
        assert_eq!(patched, "Diff: (+1 -1)\n*** Update File: src/main.rs\n@@\n-a\n+b");
        let multi = json!({"file_path": "/r/m.rs", "edits": [
            {"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": ""}]});
        assert_eq!(
            of("MultiEdit", &multi).expect("diff"),
            "Diff: /r/m.rs (+1 -2)\n@@ edit 1\n-a\n+b\n@@ edit 2\n-c"
        );
        assert!(of("Bash", &json!({"command": "ls"})).is_none());
        assert!(
            of("Edit", &json!({"file_path": "/r"})).is_none(),
            "an edit without its strings"
        );
    }

    #[test]
    fn a_long_diff_is_cut_with_a_count_and_the_header_counts_everything() {
        let content: String = (0..1000).map(|n| format!("line {n}\n")).collect();
        let diff = of("Write", &json!({"file_path": "/r/big", "content": content})).expect("diff");
        assert!(diff.starts_with("Diff: /r/big (+1000 -0)"), "{}", &diff[..40]);
        assert!(diff.ends_with("… (600 more lines not shown)"));
        assert_eq!(diff.lines().count(), 1 + MAX_LINES + 1);
    }
}
