//! Agent-side question commands: `ask`, `notify`, `cancel`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow};
use pacerelle_client::{
    Answer, AnswerOutcome, Level, QuestionKind, QuestionRequest, QuestionState, answer_text,
};

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
    /// question for good: the same question under it resumes it (and its answer, if any); a different one
    /// exits 3 with question_id_conflict.
    #[arg(long)]
    id: Option<String>,
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

/// The exit status for an outcome: 0 yes/option/text, 1 no, 2 expired/cancelled, 3 anything else.
pub fn exit_status(outcome: &AnswerOutcome) -> u8 {
    if outcome.rejected.is_some() {
        return EXIT_ERROR;
    }
    match (outcome.state, &outcome.answer) {
        (QuestionState::Answered, Some(Answer::No)) => EXIT_NO,
        (QuestionState::Answered, Some(Answer::Yes | Answer::Options(_))) if outcome.approved => EXIT_YES,
        (QuestionState::Answered, Some(Answer::Text(_))) => EXIT_YES,
        (QuestionState::Expired | QuestionState::Cancelled, _) => EXIT_NO_ANSWER,
        _ => EXIT_ERROR,
    }
}

fn print_outcome(global: &Global, outcome: &AnswerOutcome) -> Result<()> {
    if global.json {
        let mut value = serde_json::to_value(outcome)?;
        value["answerText"] = serde_json::json!(outcome.answer_text());
        return output::json(&value);
    }
    match (outcome.state, &outcome.answer, &outcome.rejected) {
        (_, _, Some(reason)) => eprintln!("error: the answer was rejected: {reason}"),
        (QuestionState::Answered, Some(answer), None) => {
            println!("{}", answer_text(answer));
            let who = outcome
                .answered_by_name
                .as_deref()
                .or(outcome.answered_by.as_deref())
                .unwrap_or("?");
            let when = outcome
                .device_answered_at
                .map(|t| t.to_string())
                .unwrap_or_default();
            eprintln!("answered by {who} at {when}");
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
    let request = QuestionRequest {
        question: args.question,
        kind,
        options: args.choices,
        multiple: args.multiple,
        details,
        expires_in: args.expires,
        question_id: args.id,
        channels: Vec::new(),
    };
    let asked = agent.ask_user(request).await?;
    if !global.json {
        eprintln!(
            "asked {} — waiting for the answer on the phone (expires in {})",
            asked.question_id,
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
    let outcome = tokio::select! {
        outcome = agent.wait_until_final(&asked, deadline) => outcome?,
        _ = tokio::signal::ctrl_c() => {
            // Interrupted: withdraw the question so that a later answer cannot count.
            match agent.cancel_question(&asked.question_id).await {
                Ok(outcome) => outcome,
                Err(e) => return Err(anyhow!("interrupted; the question could not be cancelled: {e}")),
            }
        }
    };
    print_outcome(global, &outcome)?;
    Ok(ExitCode::from(exit_status(&outcome)))
}

pub async fn notify(global: &Global, args: NotifyArgs) -> Result<()> {
    let agent = home::agent_client(global)?;
    let stored = agent
        .notify(&args.text, args.title.as_deref(), args.level)
        .await?;
    if global.json {
        output::json(&serde_json::json!({
            "notificationId": stored.id, "createdAt": stored.created_at, "created": stored.created,
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
        // A yes the verdict did not approve is never a 0.
        assert_eq!(exit_status(&outcome(Answered, Some(Answer::Yes), false)), 3);
        let mut rejected = outcome(Answered, Some(Answer::Yes), true);
        rejected.rejected = Some("x".into());
        assert_eq!(exit_status(&rejected), 3);
    }
}
