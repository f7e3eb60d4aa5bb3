//! Two rules of the house that no compiler checks (ARCHITECTURE.md, "The client's rooms"), run by the
//! `layers` step:
//! - the modules of `pacerelle-client` form a tree: no module reaches, through the paths it names, a module
//!   that reaches it back (a module may name its ancestors, which contain it);
//! - no source outside the client's one mapping (`pacerelle-client/src/error.rs`) compares a relay error code
//!   as a string: callers branch on `ErrorKind`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The client's modules by path (`agent::roster`), each with the modules it names, ancestors left out.
fn client_modules(src: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut texts = BTreeMap::new();
    collect(src, src, &mut texts)?;
    let names: BTreeSet<String> = texts.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (module, text) in &texts {
        let mut named = BTreeSet::new();
        for path in paths_after(text, "crate::") {
            named.extend(longest_module(&names, &[], &path));
        }
        let parent: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
        let parent = &parent[..parent.len().saturating_sub(1)];
        for path in paths_after(text, "super::") {
            named.extend(longest_module(&names, parent, &path).or(Some(parent.join("::"))));
        }
        let own: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
        for path in paths_after(text, "self::") {
            named.extend(longest_module(&names, &own, &path).filter(|m| m != module));
        }
        named.retain(|m| !m.is_empty() && m != module && !module.starts_with(&format!("{m}::")));
        graph.insert(module.clone(), named);
    }
    Ok(graph)
}

/// Reads every `.rs` file under `dir`, keyed by module path, without comment lines and test modules.
fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
            continue;
        }
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let relative = path.strip_prefix(root)?.with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
            parts.pop();
        }
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let code: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        out.insert(parts.join("::"), code.join("\n"));
    }
    Ok(())
}

/// The `a::b::c` paths that follow each `prefix` in `text` (lower-case segments: modules, functions).
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':')
            .collect();
        found.push(
            path.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        );
    }
    found
}

/// The longest module among `names` that `base` + a prefix of `path` names.
fn longest_module(names: &BTreeSet<String>, base: &[&str], path: &[String]) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| {
        let mut segments: Vec<&str> = base.to_vec();
        segments.extend(path[..n].iter().map(String::as_str));
        let name = segments.join("::");
        names.contains(&name).then_some(name)
    })
}

/// The first circle in `graph`, as the modules along it.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|m| m == node) {
            let mut found = stack[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if !done.insert(node.to_string()) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(graph, next, done, stack) {
                return Some(found);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut done, &mut Vec::new()))
}

/// Fails when the client's modules do not form a tree.
pub fn client_is_a_tree(root: &Path) -> Result<()> {
    let graph = client_modules(&root.join("pacerelle-client/src"))?;
    if let Some(found) = circle(&graph) {
        bail!(
            "pacerelle-client's modules name each other in a circle: {} (move what both need into the module \
             above them, or into the one of the two that the other uses)",
            found.join(" -> ")
        );
    }
    println!("pacerelle-client: {} modules, no import circle", graph.len());
    Ok(())
}

/// What a comparison of an error code as a string looks like.
const CODE_COMPARISONS: &[&str] = &[
    "code() ==",
    "code() !=",
    "== code::",
    "!= code::",
    "== wire::code::",
    "!= wire::code::",
    "== Some(code::",
    "== Some(wire::code::",
    "code == ",
    "c == code",
];

/// Fails when a source outside the client's error mapping compares error codes as strings.
pub fn no_code_comparisons(root: &Path) -> Result<()> {
    let mut found = Vec::new();
    for krate in [
        "pacerelle-client",
        "pacerelle-cli",
        "pacerelle-mcp",
        "pacerelle-py",
        "pacerelle-ffi",
        "pacerelle-soak",
        "pacerelle-load",
        "examples",
    ] {
        scan(&root.join(krate), root, &mut found)?;
    }
    if !found.is_empty() {
        bail!(
            "error codes compared as strings (branch on `ErrorKind`; the one mapping is \
             pacerelle-client/src/error.rs):\n  {}",
            found.join("\n  ")
        );
    }
    println!("no error code is compared as a string outside pacerelle-client/src/error.rs");
    Ok(())
}

fn scan(dir: &Path, root: &Path, found: &mut Vec<String>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "tests" | "node_modules" | ".venv") {
                scan(&path, root, found)?;
            }
            continue;
        }
        if !name.ends_with(".rs") || path.ends_with("pacerelle-client/src/error.rs") {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            if CODE_COMPARISONS.iter().any(|p| line.contains(p)) {
                let shown = path.strip_prefix(root).unwrap_or(&path).display().to_string();
                found.push(format!("{shown}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        edges
            .iter()
            .map(|(m, to)| (m.to_string(), to.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_circle_is_found_and_a_tree_passes() {
        let tree = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
        assert_eq!(circle(&tree), None);
        let round = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])]);
        assert_eq!(
            circle(&round),
            Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
    }

    #[test]
    fn paths_are_read_after_their_prefix_and_resolve_to_the_longest_module() {
        let text = "use crate::agent::roster::RosterMark;\nlet x = super::inbox::reply_id_for(y);";
        assert_eq!(
            paths_after(text, "crate::"),
            vec![vec!["agent".to_string(), "roster".into()]]
        );
        let names: BTreeSet<String> = ["agent", "agent::roster", "agent::inbox"]
            .map(String::from)
            .into();
        let path = vec!["agent".to_string(), "roster".into()];
        assert_eq!(longest_module(&names, &[], &path), Some("agent::roster".into()));
        let path = vec!["inbox".to_string(), "reply_id_for".into()];
        assert_eq!(
            longest_module(&names, &["agent"], &path),
            Some("agent::inbox".into())
        );
    }
}
