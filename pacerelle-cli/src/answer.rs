//! `pacerelle answer`: answer a question from this terminal, acting as a device.

use anyhow::{Result, anyhow};
use pacerelle_client::core::wire::code;
use pacerelle_client::{
    Answer, DeviceClient, QuestionKind, QuestionState, agent::answer_text, device::ClosedQuestion,
    device::GrantChoice, device::OpenedQuestion, device::QuestionList,
};

use crate::Global;
use crate::home;
use crate::output;

#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The question's id, as `pacerelle inbox` shows it.
    question_id: String,
    /// `yes` or `no`; or the chosen option(s) of a choice question; or the words of a text answer.
    #[arg(value_name = "ANSWER")]
    values: Vec<String>,
    /// A written answer (for a text question).
    #[arg(long, conflicts_with = "values")]
    text: Option<String>,
    /// With `yes` to a question that offers grants (the gate's): allow the same for this long (`15m`, `1h`:
    /// at most the longest the question offers), signed by this device; `pacerelle inbox` shows the offer.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_grant_duration)]
    grant_for: Option<u64>,
    /// With `--for`: which offered scope (`pacerelle inbox` numbers them; 1, the default, is the exact call).
    #[arg(long, value_name = "N", requires = "grant_for", value_parser = clap::value_parser!(u16).range(1..=8))]
    scope: Option<u16>,
    #[command(flatten)]
    target: crate::device::AgentArg,
}

fn parse_grant_duration(text: &str) -> std::result::Result<u64, String> {
    pacerelle_client::core::policy::parse_duration(text)
        .ok_or_else(|| "a number and s, m or h, up to 24h (15m, 1h)".to_string())
}

/// Turns the command line into an answer that fits the question.
fn to_answer(q: &OpenedQuestion, values: &[String], text: Option<String>) -> Result<Answer> {
    if let Some(text) = text {
        return Ok(Answer::Text(text));
    }
    let words: Vec<&str> = values.iter().map(String::as_str).collect();
    read_answer(q.kind, &q.options, q.multiple, &words).map_err(output::invalid_input)
}

/// The answer a person's words give to a question: `yes`/`y` or `no`/`n` in any case; for a choice, each word
/// an option named exactly, else ignoring case, else by its number (1, 2, …), each once, and one only unless
/// the question takes several; for a text, the words joined by spaces. The one reading of typed answers, for
/// `pacerelle answer` and `ask --here`; the error says what would be an answer.
pub(crate) fn read_answer(
    kind: QuestionKind,
    options: &[String],
    multiple: bool,
    words: &[&str],
) -> std::result::Result<Answer, String> {
    let one_of = || {
        let list = options.join(", ");
        if multiple {
            format!("one or more of {list}")
        } else {
            format!("one of {list}")
        }
    };
    match kind {
        QuestionKind::YesNo => match words {
            [one] => match one.trim().to_lowercase().as_str() {
                "yes" | "y" => Ok(Answer::Yes),
                "no" | "n" => Ok(Answer::No),
                _ => Err(format!("{one:?} is not an answer: answer yes or no")),
            },
            _ => Err("answer yes or no".into()),
        },
        QuestionKind::Choice => {
            if words.is_empty() {
                return Err(format!("answer {}", one_of()));
            }
            let mut chosen: Vec<String> = Vec::new();
            for word in words {
                let option = option_named(options, word.trim())
                    .ok_or_else(|| format!("{word:?} is not an option: answer {}", one_of()))?;
                if !chosen.contains(&option) {
                    chosen.push(option);
                }
            }
            if chosen.len() > 1 && !multiple {
                return Err(format!("choose only one: {}", one_of()));
            }
            Ok(Answer::Options(chosen))
        }
        QuestionKind::Text => {
            let text = words.join(" ");
            if text.trim().is_empty() {
                Err("give the answer's text".into())
            } else {
                Ok(Answer::Text(text))
            }
        }
    }
}

/// The option `typed` names: exactly, then ignoring case (when only one matches), then by its number.
fn option_named(options: &[String], typed: &str) -> Option<String> {
    if let Some(o) = options.iter().find(|o| o.as_str() == typed) {
        return Some(o.clone());
    }
    let folded: Vec<&String> = options
        .iter()
        .filter(|o| o.to_lowercase() == typed.to_lowercase())
        .collect();
    if let [one] = folded.as_slice() {
        return Some((*one).clone());
    }
    let n: usize = typed.parse().ok()?;
    options.get(n.checked_sub(1)?).cloned()
}

pub async fn answer(global: &Global, args: AnswerArgs) -> Result<()> {
    let (device, list) = find_question(global, &args).await?;
    let q = list
        .questions
        .iter()
        .find(|q| q.question_id == args.question_id)
        .ok_or_else(|| {
            if list.rejected.iter().any(|r| r.message_id == args.question_id) {
                anyhow!(
                    "question {} did not open (altered, or not for this device)",
                    args.question_id
                )
            } else {
                output::Refused {
                    code: code::NOT_FOUND,
                    message: format!(
                        "no question {} for this device: see `pacerelle inbox`",
                        args.question_id
                    ),
                }
                .into()
            }
        })?;
    let answer = to_answer(q, &args.values, args.text)?;
    let result = match args.grant_for {
        None => device.answer(&args.question_id, answer.clone()).await,
        Some(_) if answer != Answer::Yes => {
            return Err(output::invalid_input(
                "--for goes with yes: a grant extends a yes",
            ));
        }
        Some(seconds) => {
            let scope = usize::from(args.scope.unwrap_or(1)) - 1;
            let choice = GrantChoice { scope, seconds };
            device.answer_granting(&args.question_id, choice).await
        }
    };
    crate::device::keep_signing_key(global, &device)?;
    let answered = match result {
        Ok(answered) => answered,
        Err(e) => match ClosedQuestion::from_error(&e) {
            Some(closed) => return not_recorded(global, &closed, &answer),
            None => return Err(e.into()),
        },
    };
    // The answer that counts, as the relay stored it (the same as this one, or this would have failed).
    let counted = answered.answer.clone().unwrap_or(answer);
    if global.json {
        output::json(&serde_json::json!({
            "questionId": answered.question_id,
            "state": answered.state,
            "recorded": true,
            "answer": counted,
            "answerText": answer_text(&counted),
            "answeredBy": answered.answered_by,
            "answeredByName": answered.answered_by_name,
            "answeredAt": answered.answered_at,
        }))
    } else {
        if answered.state == QuestionState::Pending && answered.approvals > 1 {
            // This device's yes is kept; the question needs more devices' approvals.
            let (have, need) = (answered.answers.len(), answered.approvals as usize);
            println!(
                "approved {}: {have} of {need} approvals, waiting for {} more",
                answered.question_id,
                need.saturating_sub(have)
            );
        } else {
            println!("answered {}: {}", answered.question_id, answer_text(&counted));
        }
        Ok(())
    }
}

/// The device that holds the question and its questions: the only pairing's, the one `--agent` names, or,
/// with several pairings, the agent whose question it is (reading the questions first lets the client
/// refuse locally an answer that cannot count).
async fn find_question(global: &Global, args: &AnswerArgs) -> Result<(DeviceClient, QuestionList)> {
    let pairings = home::pick(global, args.target.agent.as_deref())?;
    if let [one] = pairings.as_slice() {
        let device = home::client_for(global, one)?;
        let list = device.questions(None).await?;
        return Ok((device, list));
    }
    let mut holders = Vec::new();
    let mut failed = Vec::new();
    for pairing in &pairings {
        let device = home::client_for(global, pairing)?;
        match device.questions(None).await {
            Ok(list)
                if list.questions.iter().any(|q| q.question_id == args.question_id)
                    || list.rejected.iter().any(|r| r.message_id == args.question_id) =>
            {
                holders.push((pairing, device, list))
            }
            Ok(_) => {}
            Err(e) => failed.push(format!("{}: {e}", pairing.label())),
        }
    }
    match holders.len() {
        1 => {
            let (_, device, list) = holders.remove(0);
            Ok((device, list))
        }
        0 if failed.is_empty() => Err(output::invalid_input(format!(
            "no question {} for any paired agent ({}): see `pacerelle inbox`",
            args.question_id,
            home::paired_list(&pairings)
        ))),
        0 => Err(output::invalid_input(format!(
            "question {} is not among the readable agents' questions, and some could not be read ({}); \
             paired with: {}; name the agent with `--agent AGENT_ID|NAME`",
            args.question_id,
            failed.join("; "),
            home::paired_list(&pairings)
        ))),
        _ => Err(output::invalid_input(format!(
            "several paired agents have a question {}: {}; name one with `--agent AGENT_ID|NAME`",
            args.question_id,
            holders
                .iter()
                .map(|(p, _, _)| p.label())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The answer given here did not count: the question was already answered (elsewhere, or here with another
/// answer), expired or was cancelled. Says so with the answer that counts — never the refused one as if it
/// stood — and fails. `--json` prints the question as it stands on stdout, the error on stderr.
fn not_recorded(global: &Global, closed: &ClosedQuestion, refused: &Answer) -> Result<()> {
    if global.json {
        output::json(&serde_json::json!({
            "questionId": closed.question_id,
            "state": closed.state,
            "recorded": false,
            "answer": closed.answer,
            "answerText": closed.answer.as_ref().map(answer_text),
            "answeredBy": closed.answered_by,
            "answeredByName": closed.answered_by_name,
            "answeredAt": closed.answered_at,
            "byThisDevice": closed.by_this_device,
        }))?;
    }
    Err(output::Refused {
        code: match closed.state {
            QuestionState::Expired => code::QUESTION_EXPIRED,
            QuestionState::Cancelled => code::QUESTION_CANCELLED,
            _ => code::QUESTION_ANSWERED,
        },
        message: closed_message(closed, refused),
    }
    .into())
}

/// `question q1 is already answered: "yes" by Ana's phone at 15:02:07 — your "no" was not recorded`.
fn closed_message(closed: &ClosedQuestion, refused: &Answer) -> String {
    let id = &closed.question_id;
    let yours = format!("your {:?} was not recorded", answer_text(refused));
    match closed.state {
        QuestionState::Expired => match closed.expires_at {
            Some(at) => format!("question {id} expired at {} — {yours}", output::clock(at)),
            None => format!("question {id} has expired — {yours}"),
        },
        QuestionState::Cancelled => format!("question {id} was cancelled — {yours}"),
        _ => {
            let what = closed
                .answer
                .as_ref()
                .map(|a| format!(": {:?}", answer_text(a)))
                .unwrap_or_default();
            let by = if closed.by_this_device {
                "this device".to_string()
            } else {
                closed
                    .answered_by_name
                    .clone()
                    .or_else(|| closed.answered_by.clone())
                    .unwrap_or_else(|| "another device".into())
            };
            let at = closed
                .answered_at
                .map(|t| format!(" at {}", output::clock(t)))
                .unwrap_or_default();
            format!("question {id} is already answered{what} by {by}{at} — {yours}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::Timestamp;

    fn q(kind: QuestionKind, options: &[&str]) -> OpenedQuestion {
        OpenedQuestion {
            grants: None,
            approvals: 1,
            answers: Vec::new(),
            question_id: "q".into(),
            question: "?".into(),
            kind,
            options: options.iter().map(|s| s.to_string()).collect(),
            multiple: true,
            details: None,
            state: QuestionState::Pending,
            expires_at: Timestamp(i64::MAX),
            answered_by: None,
            answered_at: None,
            answered_by_name: None,
            answer: None,
            created_at: Timestamp(0),
            digest: String::new(),
            answer_key: None,
            channel: None,
        }
    }

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn words_become_answers() {
        let yn = q(QuestionKind::YesNo, &[]);
        assert_eq!(to_answer(&yn, &v(&["YES"]), None).expect("yes"), Answer::Yes);
        assert_eq!(to_answer(&yn, &v(&["n"]), None).expect("no"), Answer::No);
        assert!(to_answer(&yn, &v(&["maybe"]), None).is_err());
        assert!(to_answer(&yn, &[], None).is_err());

        let choice = q(QuestionKind::Choice, &["Staging", "prod"]);
        assert_eq!(
            to_answer(&choice, &v(&["staging", "prod"]), None).expect("options"),
            Answer::Options(v(&["Staging", "prod"]))
        );
        assert!(to_answer(&choice, &v(&["dev"]), None).is_err());
        // The same reading as `ask --here`: an option by its number, each once.
        assert_eq!(
            to_answer(&choice, &v(&["2", "prod"]), None).expect("by number"),
            Answer::Options(v(&["prod"]))
        );
        let single = OpenedQuestion {
            multiple: false,
            ..choice.clone()
        };
        assert!(to_answer(&single, &v(&["staging", "prod"]), None).is_err());
        assert!(to_answer(&single, &[], None).is_err());

        let text = q(QuestionKind::Text, &[]);
        assert_eq!(
            to_answer(&text, &v(&["after", "lunch"]), None).expect("text"),
            Answer::Text("after lunch".into())
        );
        assert_eq!(
            to_answer(&text, &[], Some("ok".into())).expect("text"),
            Answer::Text("ok".into())
        );
    }

    #[test]
    fn a_closed_question_says_which_answer_counts_never_the_refused_one() {
        let closed = |state, answer: Option<Answer>, by_this_device| ClosedQuestion {
            question_id: "q1".into(),
            state,
            answer,
            answered_by: Some("dv_1".into()),
            answered_by_name: Some("Ana's phone".into()),
            answered_at: Some(Timestamp::parse("2026-11-30T15:02:07Z").expect("time")),
            by_this_device,
            expires_at: Some(Timestamp::parse("2026-11-30T15:10:00Z").expect("time")),
            channel: None,
        };
        assert_eq!(
            closed_message(
                &closed(QuestionState::Answered, Some(Answer::Yes), false),
                &Answer::No
            ),
            r#"question q1 is already answered: "yes" by Ana's phone at 15:02:07 — your "no" was not recorded"#
        );
        assert_eq!(
            closed_message(
                &closed(QuestionState::Answered, Some(Answer::Yes), true),
                &Answer::No
            ),
            r#"question q1 is already answered: "yes" by this device at 15:02:07 — your "no" was not recorded"#
        );
        assert_eq!(
            closed_message(&closed(QuestionState::Answered, None, false), &Answer::No),
            r#"question q1 is already answered by Ana's phone at 15:02:07 — your "no" was not recorded"#
        );
        assert_eq!(
            closed_message(&closed(QuestionState::Expired, None, false), &Answer::Yes),
            r#"question q1 expired at 15:10:00 — your "yes" was not recorded"#
        );
        assert_eq!(
            closed_message(&closed(QuestionState::Cancelled, None, false), &Answer::Yes),
            r#"question q1 was cancelled — your "yes" was not recorded"#
        );
    }
}
