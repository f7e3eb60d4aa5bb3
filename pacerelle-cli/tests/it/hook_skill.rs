//! The agent skill written by the real `pacerelle hook install`: Claude Code's SKILL.md is front matter then
//! exactly the MCP server's instructions, Codex's is one section of AGENTS.md between the user's own text;
//! installing again changes no byte, a file that is not ours is left alone, and `hook uninstall` takes out
//! what install wrote and nothing else.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{run, stderr, stdout};
use pacerelle_client::INSTRUCTIONS;

const BEGIN: &str = "<!-- pacerelle:begin -->";
const END: &str = "<!-- pacerelle:end -->";

/// `pacerelle hook install ARGS` with `home` as the user's home folder and Codex's.
fn install(home: &Path, args: &[&str]) -> Output {
    hook(home, "install", args)
}

/// `pacerelle hook uninstall ARGS`, the same way.
fn uninstall(home: &Path, args: &[&str]) -> Output {
    hook(home, "uninstall", args)
}

fn hook(home: &Path, command: &str, args: &[&str]) -> Output {
    let mut c: Command = common::pacerelle(&home.join("pacerelle"), "http://127.0.0.1:9");
    c.env("HOME", home)
        .env("CODEX_HOME", home.join("codex-home"))
        .args(["hook", command])
        .args(args);
    let out = run(c);
    assert!(out.status.success(), "{command} {args:?}: {}", stderr(&out));
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The front matter's fields and the body of a SKILL.md.
fn split_skill(text: &str) -> (Vec<(String, String)>, String) {
    let rest = text.strip_prefix("---\n").expect("front matter opens the file");
    let (front, body) = rest.split_once("\n---\n").expect("front matter closes");
    let fields = front
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once(": ").expect("key: value");
            (k.to_string(), v.to_string())
        })
        .collect();
    (fields, body.to_string())
}

#[test]
fn install_writes_the_claude_code_skill_with_front_matter_and_exactly_the_instructions() {
    let home = tempfile::tempdir().expect("tempdir");
    let project = tempfile::tempdir().expect("tempdir");
    let dir = project.path().to_str().expect("utf-8");
    let skill = project.path().join(".claude/skills/pacerelle/SKILL.md");

    // Printing the entry writes nothing, and says where the skill would go.
    let out = install(home.path(), &["claude-code", "--dir", dir]);
    assert!(
        stderr(&out).contains(&skill.display().to_string()),
        "{}",
        stderr(&out)
    );
    assert!(!skill.exists());

    let out = install(home.path(), &["claude-code", "--write", "--dir", dir]);
    assert!(
        stdout(&out).contains("Agent skill written to"),
        "{}",
        stdout(&out)
    );
    let first = read(&skill);
    let (fields, body) = split_skill(&first);
    let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["name", "description"]);
    assert_eq!(fields[0].1, "pacerelle");
    assert!(fields[1].1.contains("no answer is a no"), "{}", fields[1].1);
    assert_eq!(body, format!("\n{INSTRUCTIONS}\n"));
    assert!(project.path().join(".claude/settings.json").exists());

    let out = install(
        home.path(),
        &["claude-code", "--write", "--budget", "300", "--dir", dir],
    );
    assert!(stdout(&out).contains("is up to date"), "{}", stdout(&out));
    assert_eq!(read(&skill), first, "installing again changes no byte");

    // --no-skill installs the gate alone.
    let other = tempfile::tempdir().expect("tempdir");
    let other_dir = other.path().to_str().expect("utf-8");
    install(
        home.path(),
        &["claude-code", "--write", "--no-skill", "--dir", other_dir],
    );
    assert!(other.path().join(".claude/settings.json").exists());
    assert!(!other.path().join(".claude/skills").exists());
}

#[test]
fn an_older_skill_of_ours_is_replaced_and_a_skill_that_is_not_ours_is_left_alone() {
    let home = tempfile::tempdir().expect("tempdir");
    let project = tempfile::tempdir().expect("tempdir");
    let dir = project.path().to_str().expect("utf-8");
    let skill = project.path().join(".claude/skills/pacerelle/SKILL.md");
    std::fs::create_dir_all(skill.parent().expect("parent")).expect("mkdir");

    install(home.path(), &["claude-code", "--skill-only", "--dir", dir]);
    let ours = read(&skill);
    let marker = ours
        .lines()
        .find(|l| l.starts_with('#'))
        .expect("our marker line")
        .to_string();
    std::fs::write(
        &skill,
        format!("---\nname: pacerelle\ndescription: \"old\"\n{marker}\n---\n\nAn older text.\n"),
    )
    .expect("write");
    install(home.path(), &["claude-code", "--skill-only", "--dir", dir]);
    assert_eq!(read(&skill), ours);

    let mine = "---\nname: pacerelle\ndescription: my own notes\n---\n\nAsk me on Signal instead.\n";
    std::fs::write(&skill, mine).expect("write");
    let out = install(home.path(), &["claude-code", "--write", "--dir", dir]);
    assert!(
        stderr(&out).contains("warning") && stderr(&out).contains("not written by pacerelle"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&skill), mine);
    // The gate is installed all the same.
    assert!(project.path().join(".claude/settings.json").exists());
}

#[test]
fn the_codex_section_sits_once_between_the_users_own_agents_md_text() {
    let home = tempfile::tempdir().expect("tempdir");
    let project = tempfile::tempdir().expect("tempdir");
    let dir = project.path().to_str().expect("utf-8");
    let agents = project.path().join("AGENTS.md");
    let section = |text: &str| {
        let begin = text.find(BEGIN).expect("begin");
        let end = text.find(END).expect("end") + END.len();
        text[begin..end].to_string()
    };

    // Appended after the user's text, which is kept as it was.
    let before = "# Project\n\nRun `make test` before committing.\n";
    std::fs::write(&agents, before).expect("write");
    let out = install(home.path(), &["codex", "--write", "--dir", dir]);
    assert!(
        stdout(&out).contains("Agent skill written to"),
        "{}",
        stdout(&out)
    );
    let once = read(&agents);
    assert!(once.starts_with(before), "{once}");
    let ours = section(&once);
    assert!(ours.ends_with(&format!("\n{INSTRUCTIONS}\n{END}")), "{ours}");
    assert_eq!(once, format!("{before}\n{ours}\n"));
    assert!(project.path().join(".codex/hooks.json").exists());

    // The user writes around it, and the section is from an older version: replaced in place, once.
    let after = "\n## Later notes\nDeploys go through CI.\n";
    let older = format!("{BEGIN}\nAn older Pacerelle text.\n{END}");
    std::fs::write(&agents, format!("{before}\n{older}\n{after}")).expect("write");
    for _ in 0..2 {
        install(home.path(), &["codex", "--skill-only", "--dir", dir]);
        let text = read(&agents);
        assert_eq!(text, format!("{before}\n{ours}\n{after}"));
        assert_eq!(text.matches(BEGIN).count(), 1);
        assert_eq!(text.matches("## Pacerelle").count(), 1);
    }

    // Markers that do not enclose one section: the file is not touched and the command says why.
    let broken = format!("{before}{BEGIN}\nno end\n");
    std::fs::write(&agents, &broken).expect("write");
    let out = run({
        let mut c = common::pacerelle(&home.path().join("pacerelle"), "http://127.0.0.1:9");
        c.env("HOME", home.path())
            .args(["hook", "install", "codex", "--skill-only", "--dir", dir]);
        c
    });
    assert!(!out.status.success());
    assert!(stderr(&out).contains("left alone"), "{}", stderr(&out));
    assert_eq!(read(&agents), broken);
}

#[test]
fn the_user_scope_skill_goes_to_the_hosts_home_folders() {
    let home = tempfile::tempdir().expect("tempdir");
    install(home.path(), &["claude-code", "--skill-only", "--global"]);
    let (_, body) = split_skill(&read(&home.path().join(".claude/skills/pacerelle/SKILL.md")));
    assert_eq!(body, format!("\n{INSTRUCTIONS}\n"));
    assert!(
        !home.path().join(".claude/settings.json").exists(),
        "--skill-only leaves the settings alone"
    );

    let codex_agents = home.path().join("codex-home/AGENTS.md");
    install(home.path(), &["codex", "--skill-only", "--global"]);
    let text = read(&codex_agents);
    assert!(
        text.starts_with(BEGIN) && text.ends_with(&format!("{INSTRUCTIONS}\n{END}\n")),
        "{text}"
    );
    assert!(!home.path().join("codex-home/hooks.json").exists());

    // Codex reads a non-empty AGENTS.override.md instead: the command says so.
    std::fs::write(home.path().join("codex-home/AGENTS.override.md"), "mine\n").expect("write");
    let out = install(home.path(), &["codex", "--skill-only", "--global"]);
    assert!(stderr(&out).contains("AGENTS.override.md"), "{}", stderr(&out));
    assert_eq!(read(&codex_agents), text);
}

#[test]
fn uninstall_takes_out_only_what_install_wrote() {
    let home = tempfile::tempdir().expect("tempdir");
    let project = tempfile::tempdir().expect("tempdir");
    let dir = project.path().to_str().expect("utf-8");
    let agents = project.path().join("AGENTS.md");
    let hooks = project.path().join(".codex/hooks.json");
    let mine = "# Project\n\nRun `make test` before committing.\n";
    std::fs::write(&agents, mine).expect("write");
    std::fs::create_dir_all(hooks.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &hooks,
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]}}"#,
    )
    .expect("write");

    // Codex: the user's AGENTS.md comes back byte for byte, the user's hook stays.
    install(home.path(), &["codex", "--write", "--dir", dir]);
    assert!(read(&agents).contains(BEGIN));
    let out = uninstall(home.path(), &["codex", "--dir", dir]);
    assert!(stdout(&out).contains("Agent skill taken out"), "{}", stdout(&out));
    assert_eq!(read(&agents), mine);
    let settings: serde_json::Value = serde_json::from_str(&read(&hooks)).expect("json");
    assert_eq!(
        settings,
        serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]}})
    );
    // Again: nothing of ours is left, and nothing changes.
    let out = uninstall(home.path(), &["codex", "--dir", dir]);
    assert!(
        stdout(&out).contains("No Pacerelle agent skill"),
        "{}",
        stdout(&out)
    );
    assert_eq!(read(&agents), mine);

    // An AGENTS.md that held only our section goes; --skill-only keeps the hook.
    std::fs::remove_file(&agents).expect("remove");
    install(home.path(), &["codex", "--write", "--dir", dir]);
    uninstall(home.path(), &["codex", "--skill-only", "--dir", dir]);
    assert!(!agents.exists());
    assert!(read(&hooks).contains("pacerelle hook codex"));

    // Claude Code: our SKILL.md and its folder go; someone else's stays, with a warning.
    let skill = project.path().join(".claude/skills/pacerelle/SKILL.md");
    install(home.path(), &["claude-code", "--write", "--dir", dir]);
    assert!(skill.exists());
    uninstall(home.path(), &["claude-code", "--dir", dir]);
    assert!(!skill.parent().expect("folder").exists());
    assert!(!read(&project.path().join(".claude/settings.json")).contains("pacerelle hook"));

    std::fs::create_dir_all(skill.parent().expect("parent")).expect("mkdir");
    let theirs = "---\nname: pacerelle\ndescription: my own notes\n---\n\nAsk me on Signal instead.\n";
    std::fs::write(&skill, theirs).expect("write");
    let out = uninstall(home.path(), &["claude-code", "--skill-only", "--dir", dir]);
    assert!(
        stderr(&out).contains("not written by pacerelle"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&skill), theirs);
}

#[test]
fn up_names_the_commands_that_write_the_skill_for_this_user() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let home = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let mut c = common::pacerelle(&home.path().join("pacerelle"), "http://127.0.0.1:9");
    c.env_remove("PACERELLE_RELAY_URL")
        .env("HOME", home.path())
        .env("CODEX_HOME", home.path().join("codex-home"))
        .args(["up", "--listen", "127.0.0.1:0", "--data"])
        .arg(data.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut up = common::Proc(c.spawn().expect("spawn"));
    let mut reader = BufReader::new(up.0.stdout.take().expect("stdout"));
    let mut text = String::new();
    while !text.contains("A new link at any time") {
        assert!(
            reader.read_line(&mut text).expect("read") > 0,
            "up exited: {text}"
        );
    }
    let claude = home.path().join(".claude/skills/pacerelle/SKILL.md");
    let codex = home.path().join("codex-home/AGENTS.md");
    assert!(
        text.contains("pacerelle hook install claude-code --skill-only --global")
            && text.contains(&claude.display().to_string())
            && text.contains("pacerelle hook install codex --skill-only --global")
            && text.contains(&codex.display().to_string()),
        "{text}"
    );
    assert!(
        !claude.exists() && !codex.exists(),
        "up only says where the skill goes"
    );
    // And where the one-entry configuration for an agent on another machine is.
    assert!(text.contains("docs/hosts/remote.md"), "{text}");
}
