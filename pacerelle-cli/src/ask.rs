//! Agent-side question commands: `ask`, `notify`, `cancel`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow};
use pacerelle_client::{
    AgentClient, Answer, Channel, ErrorKind, Level, QuestionKind, QuestionState, agent::AnswerOutcome,
    agent::Asked, agent::QuestionRequest, agent::answer_text, gate::Conclusion,
};
use tokio::io::AsyncBufReadExt;

use crate::Global;
use crate::home;
use crate::output;

/// Exit status of `ask` on yes, a chosen option or a written answer.
pub const EXIT_YES: u8 = 0;
/// Exit status of `ask` on no.
pub const EXIT_NO: u8 = 1;
/// Exit status of `ask` when the question expired or was cancelled.
pub const EXIT_NO_ANSWER: u8 = 2;
/// Exit status of `ask` on any error.
pub const EXIT_ERROR: u8 = 3;

#[derive(Debug, clap::Args)]
pub struct AskArgs {
    /// The question.
    question: String,
    /// An option to choose from (repeat: --choice A --choice B). Makes it a choice question.
    #[arg(long = "choice", value_name = "OPTION")]
    choices: Vec<String>,
    /// Several options may be chosen.
    #[arg(long, requires = "choices")]
    multiple: bool,
    /// Expect a written answer.
    #[arg(long, conflicts_with = "choices")]
    text: bool,
    /// More context, shown under the question (at most 65536 bytes of UTF-8).
    #[arg(long)]
    details: Option<String>,
    /// Read the details from this file, as it is (at most 65536 bytes of UTF-8; longer is refused before
    /// anything is sent).
    #[arg(long, value_name = "PATH", conflicts_with = "details")]
    details_file: Option<std::path::PathBuf>,
    /// How long the question may be answered (90, 30s, 10m, 2h, 7d; at most 7 days).
    #[arg(long, default_value = "10m", value_parser = crate::time::parse_duration)]
    expires: Duration,
    /// Your own question id, to ask again safely after an uncertain failure or a restart. An id names one
    /// question for good: the same question under it resumes it (and its answer, if any), keeping its first
    /// expiry, and says so on stderr ("resumed question …"; `resumed` in --json); a different one exits 3
    /// with question_id_conflict.
    #[arg(long)]
    id: Option<String>,
    /// Ask here too: while waiting for the phone, read one answer typed on standard input (yes/no; an option,
    /// or options separated by commas with --multiple; the text). The first answer, here or on the phone,
    /// counts; the exit status is the same either way.
    #[arg(long, conflicts_with = "user")]
    here: bool,
    /// Partner mode: ask this user of the agent (their `externalId`, see `pacerelle user list`) instead of the
    /// owner. Only that user's devices receive the question and only their answers count.
    #[arg(long, value_name = "EXTERNAL_ID")]
    user: Option<String>,
    /// For a yes/no question: how many distinct owner devices must approve, each with a signed yes (2 to
    /// 10; one no denies at once). The question stays open until that many approved.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10),
          conflicts_with_all = ["here", "user", "choices", "text"])]
    approvals: u32,
}

#[derive(Debug, clap::Args)]
pub struct NotifyArgs {
    /// The text.
    text: String,
    /// A short title.
    #[arg(long)]
    title: Option<String>,
    /// How much it matters.
    #[arg(long, default_value = "info", value_parser = parse_level)]
    level: Level,
    /// Partner mode: notify this user of the agent (their `externalId`) instead of the owner.
    #[arg(long, value_name = "EXTERNAL_ID")]
    user: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// The question's id (printed by `pacerelle ask --json`, listed by `pacerelle audit search`).
    question_id: String,
}

fn parse_level(text: &str) -> Result<Level, String> {
    match text {
        "info" => Ok(Level::Info),
        "warning" => Ok(Level::Warning),
        "error" => Ok(Level::Error),
        "success" => Ok(Level::Success),
        _ => Err("one of info, warning, error, success".into()),
    }
}

/// The exit status for an outcome: 0 an authenticated yes, options or a text, 1 no, 2 expired or cancelled, 3
/// anything else (pending, a rejected answer).
pub fn exit_status(outcome: &AnswerOutcome) -> u8 {
    // The client's one sorting of outcomes, as the hook, MCP and Python read it.
    match Conclusion::of(outcome) {
        Conclusion::Approved | Conclusion::Answered => EXIT_YES,
        Conclusion::Denied => EXIT_NO,
        Conclusion::Expired | Conclusion::Cancelled => EXIT_NO_ANSWER,
        _ => EXIT_ERROR,
    }
}

fn print_outcome(global: &Global, outcome: &AnswerOutcome, user: Option<&str>, resumed: bool) -> Result<()> {
    if global.json {
        let mut value = serde_json::to_value(outcome)?;
        value["answerText"] = serde_json::json!(outcome.answer_text());
        // Whom it was asked of: a user of the agent (Partner mode), or null for the owner.
        value["user"] = serde_json::json!(user);
        // True when --id named this same question already: it was resumed, and expiresAt is its first expiry.
        value["resumed"] = serde_json::json!(resumed);
        return output::json(&value);
    }
    match (outcome.state, &outcome.answer, &outcome.rejected) {
        (_, _, Some(reason)) => eprintln!("error: the answer was rejected: {reason}"),
        (QuestionState::Answered, Some(answer), None) => {
            println!("{}", answer_text(answer));
            let when = outcome
                .device_answered_at
                .or(outcome.answered_at)
                .map(|t| t.to_string())
                .unwrap_or_default();
            if outcome.channel == Some(Channel::Host) {
                eprintln!("answered here at the computer at {when}");
            } else {
                let who = outcome
                    .answered_by_name
                    .as_deref()
                    .or(outcome.answered_by.as_deref())
                    .unwrap_or("?");
                eprintln!("answered by {who} at {when}");
            }
        }
        (QuestionState::Expired, _, None) => {
            eprintln!(
                "no answer before {}: expired (no answer is a no)",
                outcome.expires_at
            )
        }
        (QuestionState::Cancelled, _, None) => eprintln!("the question was cancelled"),
        _ => eprintln!("still pending"),
    }
    Ok(())
}

pub async fn ask(global: &Global, args: AskArgs) -> Result<ExitCode> {
    if !args.here {
        return ask_and_wait(global, args).await.map(ExitCode::from);
    }
    // The read of standard input runs on a blocking thread that cannot be cancelled: a runtime shut down
    // normally would wait for a line nobody types. The outcome decided, exit here, as `main` would.
    let result = ask_and_wait(global, args).await;
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            output::error(global.json, &e);
            EXIT_ERROR
        }
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(i32::from(code))
}

/// Asks and waits; the exit status of the outcome.
async fn ask_and_wait(global: &Global, args: AskArgs) -> Result<u8> {
    let details = match (args.details, args.details_file.as_deref()) {
        (_, Some(path)) => Some(crate::text::from_file(path)?),
        (Some(text), None) => Some(crate::text::check("--details", text)?),
        (None, None) => None,
    };
    let agent = home::agent_client(global)?;
    let kind = if !args.choices.is_empty() {
        QuestionKind::Choice
    } else if args.text {
        QuestionKind::Text
    } else {
        QuestionKind::YesNo
    };
    let here = args.here.then(|| Here {
        kind,
        options: args.choices.clone(),
        multiple: args.multiple,
    });
    let request = QuestionRequest {
        grants: None,
        question: args.question,
        kind,
        options: args.choices,
        multiple: args.multiple,
        details,
        expires_in: args.expires,
        question_id: args.id,
        channels: Vec::new(),
        user: args.user.clone(),
        approvals: args.approvals,
    }
    .answered_at_host(args.here);
    let asked = agent.ask_user(request).await?;
    if !global.json && asked.resumed {
        // The same question under the same --id: nothing new was asked, and the first expiry holds.
        eprintln!(
            "resumed question {} asked earlier; it expires at {} (--expires does not change it)",
            asked.question_id, asked.expires_at
        );
    }
    if !global.json {
        let whose = match &args.user {
            Some(user) => format!("on {user}'s device"),
            None => "on the phone".to_string(),
        };
        eprintln!(
            "asked {} — waiting for the answer {} (expires in {})",
            asked.question_id,
            if here.is_some() {
                "here or on the phone"
            } else {
                &whose
            },
            output::until(asked.expires_at)
        );
    }
    // Waits until the question's own expiry; a little slack for the last read after it.
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis(
            u64::try_from(asked.expires_at.millis() - pacerelle_client::Timestamp::now().millis())
                .unwrap_or(0),
        )
        + Duration::from_secs(5);
    // Without --here, standard input is never read: this never finishes.
    let typed = async {
        match &here {
            Some(here) => answer_here(&agent, &asked, here).await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        outcome = agent.wait_until_final(&asked, deadline) => outcome?,
        // Recorded here first. Every other end of reading here (the phone answered first, the question
        // closed, no more input) never finishes, and the phone's side decides.
        outcome = typed => outcome,
        _ = tokio::signal::ctrl_c() => {
            // Interrupted: withdraw the question so that a later answer cannot count.
            match agent.cancel_question(&asked.question_id).await {
                Ok(outcome) => outcome,
                Err(e) => return Err(anyhow!("interrupted; the question could not be cancelled: {e}")),
            }
        }
    };
    print_outcome(global, &outcome, args.user.as_deref(), asked.resumed)?;
    Ok(exit_status(&outcome))
}

/// The question as `--here` reads an answer to it.
#[derive(Debug)]
struct Here {
    kind: QuestionKind,
    options: Vec<String>,
    multiple: bool,
}

impl Here {
    fn prompt(&self) -> String {
        let how = match self.kind {
            QuestionKind::YesNo => "yes/no".to_string(),
            QuestionKind::Choice if self.multiple => {
                format!("{}; several separated by commas", self.options.join(" / "))
            }
            QuestionKind::Choice => self.options.join(" / "),
            QuestionKind::Text => "type it".to_string(),
        };
        format!("Answer here too ({how}), or on the phone: ")
    }

    /// The answer a typed line gives (several options separated by commas), or why it is not one.
    fn parse(&self, line: &str) -> Result<Answer, String> {
        let line = line.trim();
        let words: Vec<&str> = match self.kind {
            QuestionKind::Choice if self.multiple => {
                line.split(',').map(str::trim).filter(|t| !t.is_empty()).collect()
            }
            _ => vec![line],
        };
        crate::answer::read_answer(self.kind, &self.options, self.multiple, &words)
    }
}

/// Reads standard input until a line gives an answer, and records it as answered at the computer. Returns
/// the outcome once the relay took it; never returns when it did not (the phone answered first, the
/// question closed, standard input ended, or answering here failed): the phone's side decides then.
async fn answer_here(agent: &AgentClient, asked: &Asked, here: &Here) -> AnswerOutcome {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        eprint!("{}", here.prompt());
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => {
                eprintln!();
                eprintln!("(no more input here; waiting for the phone)");
                break;
            }
            Err(e) => {
                eprintln!();
                eprintln!("(standard input cannot be read: {e}; waiting for the phone)");
                break;
            }
        };
        let answer = match here.parse(&line) {
            Ok(answer) => answer,
            Err(why) => {
                eprintln!("{why}");
                continue;
            }
        };
        match agent
            .answer_at_host(&asked.question_id, asked.digest.as_deref(), answer)
            .await
        {
            Ok(outcome) if outcome.is_final() => return outcome,
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::QuestionClosed => {
                // Answered on the phone first (or expired, or cancelled): that outcome counts, read by the
                // wait beside this one.
                eprintln!("too late here: {e}");
                break;
            }
            Err(e) if e.is_transient() => {
                eprintln!("the answer could not be recorded ({e}); type it again, or answer on the phone");
            }
            Err(e) => {
                eprintln!("the answer could not be recorded here: {e}; waiting for the phone");
                break;
            }
        }
    }
    std::future::pending().await
}

pub async fn notify(global: &Global, args: NotifyArgs) -> Result<()> {
    let agent = home::agent_client(global)?;
    let stored = agent
        .notify_user(
            args.user.as_deref(),
            &args.text,
            args.title.as_deref(),
            args.level,
        )
        .await?;
    if global.json {
        output::json(&serde_json::json!({
            "notificationId": stored.id, "createdAt": stored.created_at, "created": stored.created,
            "user": args.user,
        }))
    } else {
        println!("{}", stored.id);
        Ok(())
    }
}

pub async fn cancel(global: &Global, args: CancelArgs) -> Result<()> {
    let agent = home::agent_client(global)?;
    let outcome = agent.cancel_question(&args.question_id).await?;
    if global.json {
        output::json(&outcome)
    } else {
        println!("{}: {}", outcome.question_id, outcome.state.as_str());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::Timestamp;

    fn outcome(state: QuestionState, answer: Option<Answer>, approved: bool) -> AnswerOutcome {
        AnswerOutcome {
            grant: None,
            grant_refused: None,
            question_id: "q".into(),
            state,
            approved,
            answer,
            answered_by: None,
            answered_by_name: None,
            answered_at: None,
            device_answered_at: None,
            expires_at: Timestamp(0),
            rejected: None,
            signed: false,
            channel: None,
        }
    }

    #[test]
    fn exit_statuses() {
        use QuestionState::*;
        assert_eq!(exit_status(&outcome(Answered, Some(Answer::Yes), true)), 0);
        assert_eq!(
            exit_status(&outcome(Answered, Some(Answer::Options(vec!["a".into()])), true)),
            0
        );
        assert_eq!(
            exit_status(&outcome(Answered, Some(Answer::Text("t".into())), false)),
            0
        );
        assert_eq!(exit_status(&outcome(Answered, Some(Answer::No), false)), 1);
        assert_eq!(exit_status(&outcome(Expired, None, false)), 2);
        assert_eq!(exit_status(&outcome(Cancelled, None, false)), 2);
        assert_eq!(exit_status(&outcome(Pending, None, false)), 3);
        // A yes or options the verdict did not approve are never a 0.
        assert_eq!(exit_status(&outcome(Answered, Some(Answer::Yes), false)), 3);
        assert_eq!(
            exit_status(&outcome(Answered, Some(Answer::Options(vec!["a".into()])), false)),
            3
        );
        let mut rejected = outcome(Answered, Some(Answer::Yes), true);
        rejected.rejected = Some("x".into());
        assert_eq!(exit_status(&rejected), 3);
    }

    #[test]
    fn lines_typed_here_are_read_by_kind() {
        let yes_no = Here {
            kind: QuestionKind::YesNo,
            options: Vec::new(),
            multiple: false,
        };
        assert_eq!(yes_no.parse("yes"), Ok(Answer::Yes));
        assert_eq!(yes_no.parse(" Y "), Ok(Answer::Yes));
        assert_eq!(yes_no.parse("NO"), Ok(Answer::No));
        assert_eq!(yes_no.parse("n"), Ok(Answer::No));
        assert!(yes_no.parse("maybe").is_err());
        assert!(yes_no.parse("").is_err());

        let one = Here {
            kind: QuestionKind::Choice,
            options: vec!["staging".into(), "production".into(), "a, b".into()],
            multiple: false,
        };
        assert_eq!(one.parse("staging"), Ok(Answer::Options(vec!["staging".into()])));
        assert_eq!(
            one.parse("Production"),
            Ok(Answer::Options(vec!["production".into()]))
        );
        assert_eq!(one.parse("2"), Ok(Answer::Options(vec!["production".into()])));
        assert_eq!(one.parse("a, b"), Ok(Answer::Options(vec!["a, b".into()])));
        assert!(one.parse("moon").is_err());
        assert!(one.parse("4").is_err());
        assert!(one.parse("0").is_err());
        assert!(one.parse("staging, production").is_err());

        let several = Here {
            kind: QuestionKind::Choice,
            options: vec!["staging".into(), "production".into()],
            multiple: true,
        };
        assert_eq!(
            several.parse("staging, Production"),
            Ok(Answer::Options(vec!["staging".into(), "production".into()]))
        );
        assert_eq!(several.parse("1,1"), Ok(Answer::Options(vec!["staging".into()])));
        assert!(several.parse("staging, moon").is_err());
        assert!(several.parse(" , ").is_err());

        let text = Here {
            kind: QuestionKind::Text,
            options: Vec::new(),
            multiple: false,
        };
        assert_eq!(text.parse("ship it "), Ok(Answer::Text("ship it".into())));
        assert!(text.parse("   ").is_err());
        assert!(text.prompt().starts_with("Answer here too"));
        assert!(yes_no.prompt().contains("yes/no"));
    }
}
